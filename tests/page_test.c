/* page: carving a page yields distinct in-bounds blocks (in address order
 * in release, each batch a shuffle of its addresses in the secure
 * variants) until it is exhausted, collect moves
 * local frees back for reuse, block_of finds the block of interior
 * pointers, and the list invariant holds throughout. Runs on a page from a
 * real segment, driven directly (no heap). */
#include <string.h>

#include "check.h"
#include "page.h"
#include "segment.h"
#include "sizeclass.h"

static hz_block_t *pop(hz_page_t *page) {
  hz_block_t *b = page->free;
  if (b != NULL) {
    page->free = hz_block_next(b);
    page->used++;
  }
  return b;
}

static void push_local(hz_page_t *page, hz_block_t *b) {
  hz_block_set_next(b, page->local_free);
  page->local_free = b;
  page->used--;
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
  hz_page_init(page, (struct hz_heap_s *)fake_heap, cls);
  CHECK(hz_page_heap(page) == (struct hz_heap_s *)fake_heap);
  CHECK(hz_page_flags(page) == 0);
  hz_page_set_flag(page, HZ_PAGE_ALIGNED, true);
  CHECK(hz_page_has_aligned(page));
  CHECK(hz_page_heap(page) == (struct hz_heap_s *)fake_heap);
  hz_page_set_flag(page, HZ_PAGE_ALIGNED, false);
  CHECK(hz_page_owner_word(page) == (uintptr_t)fake_heap);
  CHECK(page->reserved >= 7); /* page 0 shares its slot with the header */
  CHECK(hz_page_start(page) + (size_t)page->reserved * size <=
        hz_page_end(page));

  static hz_block_t *blocks[70000];
  size_t n = 0;
  for (;;) {
    void *got[5];
    uint32_t k = hz_page_carve(page, got, 5);
    if (k == 0) break;
    page->used = (uint16_t)(page->used + k);
    uint8_t *lowest = hz_page_start(page) + (size_t)(page->capacity - k) * size;
    for (uint32_t i = 0; i < k; i++) {
      hz_block_t *b = got[i];
      CHECK(hz_page_is_block_start(page, b));
      CHECK(((uintptr_t)b & 15) == 0);
      /* the batch is the next k blocks of the page */
      CHECK((uint8_t *)b >= lowest && (uint8_t *)b < lowest + (size_t)k * size);
      if (!HZ_SECURE) CHECK((uint8_t *)b == lowest + (size_t)i * size);
      memset(b, 0x5a, size); /* whole block is ours to write */
      blocks[n++] = b;
    }
    hz_page_check(page);
  }
  CHECK_MSG(n == page->reserved, "class %u: %zu blocks, reserved %u", cls, n,
            page->reserved);
  CHECK(page->used == page->reserved);
  for (size_t i = 1; i < n; i++)
    CHECK(blocks[i] != blocks[i - 1]);
  /* Interior pointers map back to their block. */
  uint8_t *mid = (uint8_t *)blocks[n / 2];
  CHECK(hz_page_block_of(page, mid + size / 2) == blocks[n / 2]);
  CHECK(!hz_page_is_block_start(page, mid + 8));
  /* Free half locally, collect, and get exactly those back. */
  for (size_t i = 0; i < n; i += 2)
    push_local(page, blocks[i]);
  hz_page_check(page);
  CHECK(page->free == NULL);
  hz_page_collect(page);
  size_t again = 0;
  while (pop(page) != NULL)
    again++;
  CHECK(again == (n + 1) / 2);
  CHECK(page->used == page->reserved);
  for (size_t i = 0; i < n; i++)
    push_local(page, blocks[i]);
  CHECK(hz_page_all_free(page));
  hz_page_check(page);
  hz_segment_page_free(page);
}

int main(void) {
  for (uint8_t cls = 1; cls < HZ_CLASS_COUNT; cls++)
    exercise_class(cls);
  return check_report("page");
}
