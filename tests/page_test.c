/* page: taking blocks from a fresh page yields distinct in-bounds blocks
 * (in address order in release, each batch a shuffle of its addresses in
 * the secure variants) until it is exhausted; blocks put back are handed
 * out again lowest address first, whatever order they came back in; a
 * block put back twice is refused; block_of finds the block of interior
 * pointers; the invariant (used + free bits == capacity) holds throughout;
 * fresh blocks of a page cut from memory that reads as zeros hold no mark
 * (hz_page_take's unmarked count), freed ones may; in release, a page
 * whose free memory was given back keeps no mark in its free blocks, even
 * as blocks come back, until a refill empties it (exercise_purged).
 * Runs on a page from a real segment, driven directly (no heap). */
#include <string.h>

#include "check.h"
#include "page.h"
#include "segment.h"
#include "sizeclass.h"

static void put(hz_page_t *page, void *b) {
  CHECK(hz_page_put_index(page, hz_page_index(page, b), true));
  page->tally->used--;
}

/* Stands in for the owning heap: heaps are 64-byte aligned (the page keeps
 * flags in the low bits of its owner word). */
static _Alignas(64) char fake_heap[64];

static hz_segment_set_t segments; /* the fake heap's */

static void exercise_class(uint8_t cls) {
  size_t size = hz_sizeclass_block_size(cls);
  hz_page_t *page = hz_segment_page_alloc(&segments, hz_segment_kind_for(size));
  CHECK(page != NULL);
  if (page == NULL) return;
  /* the first page comes from a fresh segment; later ones from slices
   * the page before gave back, unpurged */
  bool zeroed = page->cut_zeroed;
  CHECK(zeroed == (cls == 1));
  hz_page_init(page, (struct hz_pages_s *)fake_heap, cls);
  CHECK(page->cut_zeroed == 0); /* used up */
  CHECK(hz_page_owner(page) == (struct hz_pages_s *)fake_heap);
  CHECK(hz_page_flags(page) == 0);
  hz_page_set_flag(page, HZ_PAGE_ALIGNED, true);
  CHECK(hz_page_has_aligned(page));
  CHECK(hz_page_owner(page) == (struct hz_pages_s *)fake_heap);
  hz_page_set_flag(page, HZ_PAGE_ALIGNED, false);
  CHECK(hz_page_owner_word(page) == (uintptr_t)fake_heap);
  /* page 0 shares its slice with the header (descriptors and bitmaps) */
  CHECK(page->reserved >= 2);
  CHECK(hz_page_start(page) + (size_t)page->reserved * size <=
        hz_page_end(page));

  static hz_block_t *blocks[HZ_PAGE_BLOCKS_MAX]; /* by index */
  memset(blocks, 0, sizeof blocks);
  size_t n = 0;
  for (;;) {
    void *got[5];
    uint32_t unmarked;
    uint32_t k = hz_page_take(page, got, 5, &unmarked);
    if (k == 0) break;
    page->tally->used = (uint16_t)(page->tally->used + k);
    /* fresh blocks hold no mark where the page read as zeros */
    CHECK(unmarked == (HZ_SECURE || !zeroed ? 0 : k));
    uint8_t *lowest = hz_page_start(page) + (size_t)(page->capacity - k) * size;
    for (uint32_t i = 0; i < k; i++) {
      hz_block_t *b = got[i];
      CHECK(hz_page_is_block_start(page, b));
      CHECK(((uintptr_t)b & 15) == 0);
      /* the batch is the next k blocks of the page, a stack whose top
       * (the last) is the lowest */
      CHECK((uint8_t *)b >= lowest && (uint8_t *)b < lowest + (size_t)k * size);
      if (!HZ_SECURE)
        CHECK((uint8_t *)b == lowest + (size_t)(k - 1 - i) * size);
      memset(b, 0x5a, size); /* whole block is ours to write */
      uint32_t index = hz_page_index(page, b);
      CHECK(index < page->reserved && blocks[index] == NULL); /* once */
      if (index < page->reserved) blocks[index] = b;
      n++;
    }
    hz_page_check(page);
  }
  CHECK_MSG(n == page->reserved, "class %u: %zu blocks, reserved %u", cls, n,
            page->reserved);
  CHECK(page->tally->used == page->reserved);
  CHECK(!hz_page_has_room(page));
  for (size_t i = 1; i < n; i++)
    CHECK(blocks[i] != blocks[i - 1]);
  /* Interior pointers map back to their block. */
  uint8_t *mid = (uint8_t *)blocks[n / 2];
  CHECK(hz_page_block_of(page, mid + size / 2) == blocks[n / 2]);
  CHECK(!hz_page_is_block_start(page, mid + 8));
  /* Put every other block back, highest first; they come back lowest
   * address first (release: a batch's top first), each exactly once. */
  size_t half = 0;
  for (size_t i = (n - 1) & ~(size_t)1;; i -= 2) {
    put(page, blocks[i]);
    half++;
    if (i == 0) break;
  }
  hz_page_check(page);
  CHECK(hz_page_free_count(page) == half);
  CHECK(!hz_page_put_index(page, hz_page_index(page, blocks[0]), true)); /* twice */
  CHECK(hz_page_free_count(page) == half);
  size_t again = 0;
  uint8_t *prev = NULL;
  void *got[7];
  uint32_t unmarked;
  for (uint32_t k; (k = hz_page_take(page, got, 7, &unmarked)) != 0;) {
    page->tally->used = (uint16_t)(page->tally->used + k);
    CHECK(unmarked == 0); /* freed blocks may hold their marks */
    for (uint32_t i = k; i-- > 0; again++) { /* from the top of the stack */
      uint8_t *b = got[i];
      CHECK(hz_page_index(page, b) % 2 == 0);
      if (!HZ_SECURE) CHECK(prev == NULL || b == prev + 2 * size);
      prev = b;
    }
  }
  CHECK(again == half);
  CHECK(page->tally->used == page->reserved);
  hz_page_check(page);
  for (size_t i = 0; i < n; i++)
    put(page, blocks[i]);
  CHECK(hz_page_all_free(page));
  hz_page_check(page);
  hz_segment_page_free(page);
}

/* Take every block of the page; each batch's unmarked count must be
 * `unmarked_all` ? all of it : none. Returns how many. */
static uint32_t take_all(hz_page_t *page, bool unmarked_all) {
  uint32_t taken = 0;
  void *got[7];
  uint32_t unmarked;
  for (uint32_t k; (k = hz_page_take(page, got, 7, &unmarked)) != 0;) {
    page->tally->used = (uint16_t)(page->tally->used + k);
    CHECK(unmarked == (unmarked_all ? k : 0));
    taken += k;
  }
  return taken;
}

static uintptr_t *mark_word(hz_page_t *page, uint32_t index) {
  return (uintptr_t *)(hz_page_start(page) + (size_t)index * page->block_size) +
         1;
}

/* Release: the free blocks' memory given back (not lazily) flags the page,
 * and none of its free blocks holds a mark (marks_gone) nor does any block
 * carved later (tail_unmarked); a block the program frees to it loses its
 * mark coming back, one that holds none is not written, and the page stays
 * so; a refill that takes its last free block clears both. */
static void exercise_purged(uint8_t cls) {
  size_t size = hz_sizeclass_block_size(cls);
  hz_page_t *page = hz_segment_page_alloc(&segments, hz_segment_kind_for(size));
  CHECK(page != NULL);
  if (page == NULL) return;
  hz_page_init(page, (struct hz_pages_s *)fake_heap, cls);
  uint32_t n = take_all(page, page->tally->tail_unmarked);
  for (uint32_t i = 0; i < n; i++) { /* the program writes them, then frees */
    memset(hz_page_start(page) + (size_t)i * size, 0x5a, size);
    *mark_word(page, i) = 0xfeed; /* stands for the free mark */
  }
  for (uint32_t i = n; i-- > 1;) { /* all but block 0 */
    CHECK(hz_page_put_index(page, i, true));
    page->tally->used--;
  }
  CHECK(*mark_word(page, 1) == 0xfeed); /* a page not purged keeps marks */
  hz_page_discard_free(page, false);
  CHECK(page->tally->tail_unmarked);
  if (!(hz_page_flags(page) & HZ_PAGE_PURGED)) { /* no whole OS page free */
    CHECK(!page->tally->marks_gone);
    hz_segment_page_free(page);
    return;
  }
  CHECK(page->tally->marks_gone);
  for (uint32_t i = 1; i < n; i++)
    CHECK_MSG(*mark_word(page, i) == 0, "class %u block %u kept its mark",
              cls, i);
  CHECK(take_all(page, true) == n - 1);
  CHECK(hz_page_flags(page) & HZ_PAGE_PURGED); /* cleared by the heap... */
  *mark_word(page, 1) = 0xfeed;
  CHECK(hz_page_put_index(page, 1, true)); /* freed by the program */
  *mark_word(page, 2) = 0xbeef;
  CHECK(hz_page_put_index(page, 2, false)); /* never handed out */
  page->tally->used = (uint16_t)(page->tally->used - 2);
  CHECK(*mark_word(page, 1) == 0);
  CHECK(*mark_word(page, 2) == 0xbeef);
  CHECK(page->tally->marks_gone);
  CHECK(take_all(page, true) == 2);
  hz_page_purged_refilled(page); /* ...once no free block is left */
  CHECK(!(hz_page_flags(page) & HZ_PAGE_PURGED));
  CHECK(!page->tally->marks_gone);
  *mark_word(page, 1) = 0xfeed;
  CHECK(hz_page_put_index(page, 1, true)); /* now the mark stays */
  CHECK(*mark_word(page, 1) == 0xfeed);
  for (uint32_t i = 0; i < n; i++)
    if (i != 1) CHECK(hz_page_put_index(page, i, false));
  page->tally->used = 0;
  CHECK(hz_page_all_free(page));
  hz_page_check(page);
  hz_segment_page_free(page);
}

int main(void) {
  for (uint8_t cls = 1; cls < HZ_CLASS_COUNT; cls++)
    exercise_class(cls);
  if (!HZ_SECURE)
    for (uint8_t cls = 1; cls < HZ_CLASS_COUNT; cls++)
      exercise_purged(cls);
  return check_report("page");
}
