/* page: carving a page into blocks of one class, its bitmap of free
 * blocks (handed out lowest address first), and giving back the memory of
 * its free blocks. Only the owning heap's thread (or a collector holding
 * that heap) calls these. */
#include "page.h"

#include <string.h>

#include "os.h"
#include "sizeclass.h"

void hz_page_init(hz_page_t *page, struct hz_pages_s *owner, uint8_t class_id) {
  size_t block_size = hz_sizeclass_block_size(class_id);
  hz_page_set_owner(page, owner);
  page->class_id = class_id;
  HZ_SHARED_SET(page->block_size, (uint32_t)block_size);
  page->reserved = (uint16_t)(hz_page_area(page) / block_size);
  HZ_ASSERT(page->reserved <= HZ_PAGE_BLOCKS_MAX);
  HZ_SHARED_SET(page->capacity, 0);
  HZ_SHARED_SET(page->tally->used, 0);
  memset(page->tally->bits, 0,
         hz_page_words(page->reserved) * sizeof page->tally->bits[0]);
  page->tally->bits_from = 0;
  page->tally->tail_unmarked = !HZ_SECURE && page->cut_zeroed;
  page->tally->marks_gone = false;
  page->cut_zeroed = 0;
  page->in_full = 0;
  page->emptied = 0;
  page->purged = 0;
  page->for_probes = 0;
  page->next = page->prev = NULL;
}

/* Secure variants: the order in which blocks are handed out is not
 * predictable from the last one. */
static void page_shuffle(void **out, uint32_t n) {
  for (uint32_t i = n; i-- > 1;) {
    uint32_t j = (uint32_t)(hz_check_random() % (i + 1));
    void *t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
}

void hz_page_secure_batch(void **out, uint32_t fresh, uint32_t n) {
  for (uint32_t i = 0; i < fresh; i++) /* freed ones carry theirs */
    ((uintptr_t *)out[i])[1] = hz_check_mark(out[i]);
  page_shuffle(out, n);
}

uint32_t hz_page_free_count(const hz_page_t *page) {
  uint32_t n = 0;
  for (uint32_t w = 0; w < hz_page_words(page->capacity); w++)
    n += (uint32_t)__builtin_popcountll(page->tally->bits[w]);
  return n;
}

/* True when some memory went back. */
static bool discard_range(uint8_t *from, uint8_t *to, bool lazy) {
  size_t os_page = hz_os_page_size();
  uint8_t *a = (uint8_t *)HZ_ALIGN_UP((uintptr_t)from, os_page);
  uint8_t *b = (uint8_t *)((uintptr_t)to & ~(uintptr_t)(os_page - 1));
  if (a >= b) return false;
  hz_os_discard(a, (size_t)(b - a), lazy);
  return true;
}

/* The end of the run of free blocks from block `i` on (bits set). */
static uint32_t page_free_run_end(const hz_page_t *page, uint32_t i) {
  while (i < page->capacity && hz_page_bit(page, i))
    i++;
  return i;
}

/* Release: the blocks of [from, to) whose second word (the mark) the
 * discard of the whole OS pages in [their start, `gone_end`) did not reach
 * lose it; read first, so a part nobody touched stays unmapped. */
static void page_unmark_outside(const hz_page_t *page, uint32_t from,
                                uint32_t to, uintptr_t gone_end) {
  size_t size = page->block_size, os_page = hz_os_page_size();
  uintptr_t start = (uintptr_t)hz_page_start(page);
  uintptr_t a = HZ_ALIGN_UP(start + (size_t)from * size, os_page);
  uintptr_t b = gone_end & ~(uintptr_t)(os_page - 1);
  for (uint32_t i = from; i < to; i++) {
    uintptr_t *word = (uintptr_t *)(start + (size_t)i * size) + 1;
    if (b > a && (uintptr_t)word >= a && (uintptr_t)word < b) {
      /* the first block whose word lies at or past b: those between read
       * as zeros now */
      i = (uint32_t)((b - start - sizeof(uintptr_t) + size - 1) / size) - 1;
      continue;
    }
    if (*word != 0) *word = 0;
  }
}

/* The free run [from, to) was given back (whole OS pages inside it). */
static void page_unmark_run_ends(const hz_page_t *page, uint32_t from,
                                 uint32_t to) {
  page_unmark_outside(page, from, to,
                      (uintptr_t)hz_page_start(page) +
                          (size_t)to * page->block_size);
}

/* Release, the part never carved given back at once (whole OS pages from
 * `capacity` to the page's end): the marks left resident at its start go
 * too, and no block carved from now on holds one (tail_unmarked). */
static void page_unmark_tail(hz_page_t *page) {
  page_unmark_outside(page, page->capacity, page->reserved,
                      (uintptr_t)hz_page_end(page));
  page->tally->tail_unmarked = true;
}

/* Release, a flagged page (every free to it asks its bit), its memory
 * given back at once: the marks left resident at its free runs' ends go
 * too, so none of its free blocks holds one (marks_gone). A page not
 * flagged keeps them: there the mark is what catches a second free. */
static void page_unmark_free(hz_page_t *page) {
  for (uint32_t i = 0; i < page->capacity; i++) {
    if (!hz_page_bit(page, i)) continue;
    uint32_t end = page_free_run_end(page, i);
    page_unmark_run_ends(page, i, end);
    i = end;
  }
  page->tally->marks_gone = true;
}

void hz_page_discard_free(hz_page_t *page, bool lazy) {
  size_t size = page->block_size;
  uint8_t *start = hz_page_start(page);
  discard_range(start + (size_t)page->capacity * size, hz_page_end(page), lazy);
  if (!HZ_SECURE && !lazy && !page->tally->tail_unmarked)
    page_unmark_tail(page);
  size_t keep = HZ_SECURE ? 2 * sizeof(void *) : 0; /* the free mark */
  if (HZ_SECURE && size < 2 * hz_os_page_size()) return;
  for (uint32_t i = 0; i < page->capacity; i++) {
    if (!hz_page_bit(page, i)) continue;
    uint32_t end = HZ_SECURE ? i + 1 : page_free_run_end(page, i);
    bool gone = discard_range(start + (size_t)i * size + keep,
                              start + (size_t)end * size, lazy);
    if (!HZ_SECURE && gone && !page->purged) { /* marks went too */
      page->purged = 1;
      hz_page_set_flag(page, HZ_PAGE_PURGED, true);
    }
    i = end;
  }
  if (!HZ_SECURE && !lazy && page->purged) page_unmark_free(page);
}

void hz_page_purged_refilled(hz_page_t *page) {
  if (page->tally->used != page->capacity) return; /* free blocks left */
  page->purged = 0;
  page->tally->marks_gone = false; /* a block back from now on keeps it */
  hz_page_set_flag(page, HZ_PAGE_PURGED, false);
}

hz_block_t *hz_page_block_of(const hz_page_t *page, const void *p) {
  size_t offset = (size_t)((const uint8_t *)p - hz_page_start(page));
  return (hz_block_t *)(hz_page_start(page) + offset -
                        offset % page->block_size);
}

/* On a page with aligned blocks, a block start names its block only when
 * the block was not handed out at an offset, and an address inside a
 * block only when it is exactly where the block was handed out. */
hz_block_t *hz_page_block_named(const hz_page_t *page, const void *p,
                                uint32_t limit) {
  const uint8_t *b = p;
  if (hz_page_is_block(page, p, limit)) {
    bool inner = hz_page_has_aligned(page) &&
                 hz_check_inner_of(p, page->block_size) != NULL;
    return inner ? NULL : (hz_block_t *)p;
  }
  if (!hz_page_has_aligned(page) || b < hz_page_start(page) ||
      (size_t)(b - hz_page_start(page)) >= (size_t)limit * page->block_size)
    return NULL;
  hz_block_t *block = hz_page_block_of(page, p);
  return hz_check_inner_of(block, page->block_size) == b ? block : NULL;
}

bool hz_page_is_block_start(const hz_page_t *page, const void *p) {
  return hz_page_is_block(page, p, page->capacity);
}

#ifdef HZ_DEBUG
void hz_page_check(const hz_page_t *page) {
  HZ_ASSERT(hz_page_owner(page) != NULL);
  HZ_ASSERT(page->capacity <= page->reserved);
  uint32_t words = hz_page_words(page->capacity);
  for (uint32_t w = 0; w < page->tally->bits_from && w < words; w++)
    HZ_ASSERT(page->tally->bits[w] == 0);
  if (page->capacity % 64 != 0) /* no free bit past the carved blocks */
    HZ_ASSERT((page->tally->bits[words - 1] >> (page->capacity % 64)) == 0);
  HZ_ASSERT(page->tally->used + hz_page_free_count(page) == page->capacity);
  HZ_ASSERT(page->purged == ((hz_page_flags(page) & HZ_PAGE_PURGED) != 0));
}
#endif
