/* page: carving a page into blocks of one class and moving blocks between
 * its lists. Only the owning heap's thread calls these. */
#include "page.h"

#include <stdio.h>

#include "os.h"
#include "sizeclass.h"

/* Carve at most this many bytes of fresh blocks at a time, so a page's
 * memory is touched only as it is needed. */
#define PAGE_EXTEND_BYTES      ((size_t)4 << 10)
#define PAGE_EXTEND_MIN_BLOCKS 4

void hz_page_init(hz_page_t *page, struct hz_heap_s *heap, uint8_t class_id) {
  size_t block_size = hz_sizeclass_block_size(class_id);
  hz_page_set_heap(page, heap);
  page->class_id = class_id;
  page->block_size = (uint32_t)block_size;
  page->reserved = (uint16_t)(page->area / block_size);
  page->capacity = 0;
  page->used = 0;
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

bool hz_page_extend(hz_page_t *page) {
  if (page->capacity >= page->reserved) return false;
  size_t size = page->block_size;
  size_t count = PAGE_EXTEND_BYTES / size;
  if (count < PAGE_EXTEND_MIN_BLOCKS) count = PAGE_EXTEND_MIN_BLOCKS;
  size_t left = (size_t)page->reserved - page->capacity;
  if (count > left) count = left;
  uint8_t *first = page->start + (size_t)page->capacity * size;
  /* Link the new blocks in address order and put them before `free`. */
  hz_block_t *last = (hz_block_t *)(first + (count - 1) * size);
  for (uint8_t *p = first; p < (uint8_t *)last; p += size)
    ((hz_block_t *)p)->next = (hz_block_t *)(p + size);
  last->next = page->free;
  page->free = (hz_block_t *)first;
  page->capacity += (uint16_t)count;
  return true;
}

static void discard_range(uint8_t *from, uint8_t *to, bool lazy) {
  size_t os_page = hz_os_page_size();
  uint8_t *a = (uint8_t *)HZ_ALIGN_UP((uintptr_t)from, os_page);
  uint8_t *b = (uint8_t *)((uintptr_t)to & ~(uintptr_t)(os_page - 1));
  if (a < b) hz_os_discard(a, (size_t)(b - a), lazy);
}

static void discard_list(hz_block_t *block, size_t size, bool lazy) {
  for (; block != NULL; block = block->next)
    discard_range((uint8_t *)block + sizeof *block, (uint8_t *)block + size,
                  lazy);
}

void hz_page_discard_free(hz_page_t *page, bool lazy) {
  size_t size = page->block_size;
  discard_range(page->start + (size_t)page->capacity * size, hz_page_end(page),
                lazy);
  if (size < 2 * hz_os_page_size()) return; /* no whole page inside */
  discard_list(page->free, size, lazy);
  discard_list(page->local_free, size, lazy);
}

hz_block_t *hz_page_block_of(const hz_page_t *page, const void *p) {
  size_t offset = (size_t)((const uint8_t *)p - page->start);
  return (hz_block_t *)(page->start + offset - offset % page->block_size);
}

bool hz_page_is_block_start(const hz_page_t *page, const void *p) {
  const uint8_t *b = p;
  if (b < page->start || b >= hz_page_end(page)) return false;
  size_t offset = (size_t)(b - page->start);
  return offset % page->block_size == 0 &&
         offset / page->block_size < page->capacity;
}

#ifdef HZ_DEBUG
static size_t list_length(const hz_page_t *page, const hz_block_t *b) {
  size_t n = 0;
  for (; b != NULL; b = b->next) {
    HZ_ASSERT(hz_page_is_block_start(page, b));
    n++;
    HZ_ASSERT(n <= page->capacity);
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
