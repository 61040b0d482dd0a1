/* page: a run of equal-sized blocks of one size class, owned by one heap.
 *
 * Ownership: every field is touched only by the owning heap's thread, with
 * two exceptions: `heap` is read by any thread freeing a block of the page
 * (it is stable while any block is live), and the descriptor is handed
 * between heaps only through the segment box, under its lock, while the page
 * holds no live block.
 *
 * Invariant (checked in debug builds):
 *   used + |free| + |local_free| == capacity <= reserved
 * where `used` counts blocks handed out and not yet back on this page's
 * lists — blocks waiting in an inbox still count as used. */
#ifndef HZ_PAGE_H
#define HZ_PAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"

typedef struct hz_block_s {
  struct hz_block_s *next;
} hz_block_t;

struct hz_heap_s;

typedef struct hz_page_s {
  hz_block_t *free;       /* blocks ready for malloc */
  hz_block_t *local_free; /* blocks freed by the owner since the last collect */
  uint32_t used;
  uint32_t capacity; /* blocks carved out so far */
  uint32_t reserved; /* blocks that fit in the page */
  uint32_t block_size;
  uint8_t class_id;
  uint8_t in_full; /* on the heap's full queue, not its class queue */
  /* Some block was returned at an interior offset. Set by the owner, read
   * by any thread asking for a block's usable size: relaxed atomic. */
  _Atomic uint8_t has_aligned;
  uint8_t is_zero;        /* never-used blocks past `capacity` are zero */
  uint32_t page_index;    /* index inside its segment */
  struct hz_heap_s *heap; /* owner; NULL when the page is free */
  uint8_t *start;         /* first block */
  uint8_t *end;           /* end of the page's usable area */
  struct hz_page_s *next; /* heap queue, or the segment's free stack */
  struct hz_page_s *prev;
} hz_page_t;

/* Set the page up for `class_id`, owned by `heap`. */
void hz_page_init(hz_page_t *page, struct hz_heap_s *heap, uint8_t class_id);
/* Move local_free onto free (when free is empty). */
void hz_page_collect(hz_page_t *page);
/* Carve more never-used blocks onto free; false if the page is exhausted. */
bool hz_page_extend(hz_page_t *page);
/* The block containing p (p may be interior when has_aligned is set). */
hz_block_t *hz_page_block_of(const hz_page_t *page, const void *p);
/* True if p is exactly at a block boundary of the page. */
bool hz_page_is_block_start(const hz_page_t *page, const void *p);

#ifdef HZ_DEBUG
void hz_page_check(const hz_page_t *page);
#else
#define hz_page_check(page) ((void)0)
#endif

HZ_INLINE bool hz_page_has_aligned(const hz_page_t *page) {
  return atomic_load_explicit(&page->has_aligned, memory_order_relaxed) != 0;
}

HZ_INLINE bool hz_page_all_free(const hz_page_t *page) {
  return page->used == 0;
}

#endif
