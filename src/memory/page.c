/* page: carving a page into blocks of one class and moving blocks between
 * its lists. Only the owning heap's thread calls these. */
#include "page.h"

#include <stdio.h>

#include "os.h"
#include "sizeclass.h"

void hz_page_init(hz_page_t *page, struct hz_heap_s *heap, uint8_t class_id) {
  size_t block_size = hz_sizeclass_block_size(class_id);
  hz_page_set_heap(page, heap);
  page->class_id = class_id;
  HZ_SHARED_SET(page->block_size, (uint32_t)block_size);
  page->reserved = (uint16_t)(hz_page_area(page) / block_size);
  page->capacity = 0;
  HZ_SHARED_SET(page->used, 0);
  page->free = NULL;
  page->local_free = NULL;
  page->in_full = 0;
  page->next = page->prev = NULL;
}

void hz_page_collect(hz_page_t *page) {
  if (page->free == NULL && page->local_free != NULL) {
    page->free = page->local_free;
    page->local_free = NULL;
  }
}

/* Secure variants: the order in which fresh blocks are handed out is not
 * predictable from the last one, and each carries the free mark. */
static void page_secure_fresh(void **out, uint32_t n) {
  for (uint32_t i = n; i-- > 1;) {
    uint32_t j = (uint32_t)(hz_check_random() % (i + 1));
    void *t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
  for (uint32_t i = 0; i < n; i++)
    ((uintptr_t *)out[i])[1] = hz_check_mark(out[i]);
}

uint32_t hz_page_carve(hz_page_t *page, void **out, uint32_t max) {
  uint32_t left = (uint32_t)page->reserved - page->capacity;
  uint32_t n = max < left ? max : left;
  uint8_t *first =
      hz_page_start(page) + (size_t)page->capacity * page->block_size;
  for (uint32_t i = 0; i < n; i++)
    out[i] = first + (size_t)i * page->block_size;
  if (HZ_SECURE) page_secure_fresh(out, n);
  page->capacity += n;
  return n;
}

void hz_page_bad_link(const hz_page_t *page, const hz_block_t *block) {
  hz_check_fail(HZ_CHECK_CORRUPT_LIST, block, page->class_id, page->block_size);
}

static void discard_range(uint8_t *from, uint8_t *to, bool lazy) {
  size_t os_page = hz_os_page_size();
  uint8_t *a = (uint8_t *)HZ_ALIGN_UP((uintptr_t)from, os_page);
  uint8_t *b = (uint8_t *)((uintptr_t)to & ~(uintptr_t)(os_page - 1));
  if (a < b) hz_os_discard(a, (size_t)(b - a), lazy);
}

static void discard_list(const hz_page_t *page, hz_block_t *block, size_t size,
                         bool lazy) {
  for (; block != NULL; block = hz_page_next(page, block))
    discard_range((uint8_t *)block + sizeof *block, (uint8_t *)block + size,
                  lazy);
}

void hz_page_discard_free(hz_page_t *page, bool lazy) {
  size_t size = page->block_size;
  discard_range(hz_page_start(page) + (size_t)page->capacity * size,
                hz_page_end(page), lazy);
  if (size < 2 * hz_os_page_size()) return; /* no whole page inside */
  discard_list(page, page->free, size, lazy);
  discard_list(page, page->local_free, size, lazy);
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
/* A list longer than the page's blocks runs in a circle: a freed block was
 * overwritten, which is reported as such, not as a broken invariant. */
static size_t list_length(const hz_page_t *page, const hz_block_t *b) {
  size_t n = 0;
  for (; b != NULL; b = hz_page_next(page, b)) {
    HZ_ASSERT(hz_page_is_block_start(page, b));
    if (++n > page->capacity) hz_page_bad_link(page, b);
  }
  return n;
}

void hz_page_check(const hz_page_t *page) {
  HZ_ASSERT(hz_page_heap(page) != NULL);
  HZ_ASSERT(page->capacity <= page->reserved);
  size_t free_count = list_length(page, page->free);
  size_t local_count = list_length(page, page->local_free);
  HZ_ASSERT(page->used + free_count + local_count == page->capacity);
}
#endif
