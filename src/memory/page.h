/* page: a run of equal-sized blocks of one size class, owned by one heap.
 *
 * Ownership: every field is touched only by the owning heap's thread, with
 * two exceptions: `owner` is read by any thread freeing a block of the page
 * (it is stable while any block is live), and the descriptor is handed
 * between heaps only through the segment box, under its lock, while the page
 * holds no live block.
 *
 * Invariant (checked in debug builds):
 *   used + |free| + |local_free| == capacity <= reserved
 * where `used` counts blocks handed out and not yet back on this page's
 * lists — blocks cached in a bin, stashed or waiting in an inbox still
 * count as used. */
#ifndef HZ_PAGE_H
#define HZ_PAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "config.h"
#include "sizeclass.h"

/* A free block: its first word links it into a list (page lists, stash,
 * inbox), stored through hz_block_next/hz_block_set_next, encoded. In the
 * secure variants the second word is the free mark (check.h); a header of
 * a stash or inbox list names other freed blocks in the words after those
 * (remote.h). */
typedef struct hz_block_s {
  struct hz_block_s *next;
} hz_block_t;

HZ_INLINE hz_block_t *hz_block_next(const hz_block_t *block) {
  return hz_check_decode(block, block->next);
}

HZ_INLINE void hz_block_set_next(hz_block_t *block, hz_block_t *next) {
  block->next = hz_check_encode(block, next);
}

struct hz_heap_s;

/* Flag bits kept in the low bits of hz_page_t.owner (heaps are 64-byte
 * aligned). Only the owner changes them; any thread may read them
 * (usable_size reads HZ_PAGE_ALIGNED). */
/* HZ_PAGE_ALIGNED: a block was handed out at an offset (the secure
 * variants: a block served an aligned request). */
#define HZ_PAGE_ALIGNED 1u
#define HZ_PAGE_RETIRED 2u /* on its heap's spare list: no block in use */
#define HZ_PAGE_SAMPLED 4u /* may hold blocks the profiler sampled */
/* The whole owner word of a slice inside a page of several slices (no
 * heap): the free fast path's compare fails on it, and the descriptor's
 * `next` names the page's own (segment.h). */
#define HZ_PAGE_INTERIOR  8u
#define HZ_PAGE_FLAG_MASK ((uintptr_t)63)

/* 64 bytes, so segment -> descriptor is a shift. */
typedef struct hz_page_s {
  hz_block_t *free;       /* blocks ready for malloc */
  hz_block_t *local_free; /* blocks freed by the owner since the last collect */
  /* Owner heap | flags, 0 when the page is free. The free fast path
   * compares it with the current heap: equal means ours and no flag set. */
  _Atomic uintptr_t owner;
  uintptr_t start_word;   /* first block, as hz_page_start reads it */
  struct hz_page_s *next; /* heap queue; an interior slice: its page */
  struct hz_page_s *prev;
  uint16_t used;
  uint16_t reserved; /* blocks that fit in the page */
  uint8_t class_id;
  uint8_t in_full;     /* on the heap's full queue, not its class queue */
  uint16_t area_pages; /* 4 KiB pages from start to the end (hz_page_area) */
  uint32_t capacity;   /* blocks carved out so far (32 bits: the free fast
                        * path compares with it in memory) */
  uint32_t block_size;
} hz_page_t;

_Static_assert(sizeof(hz_page_t) == 64, "page descriptor is one cache line");

/* The page's first block. Builds for memcheck (HZ_VALGRIND) keep its
 * address complemented: memcheck's leak check takes any word holding a
 * block's address for a pointer to it, and a leaked block that starts its
 * page would be counted as still reachable. Elsewhere this is one load. */
HZ_INLINE uint8_t *hz_page_start(const hz_page_t *page) {
  uintptr_t word = page->start_word;
  return (uint8_t *)(HZ_VALGRIND ? ~word : word);
}

HZ_INLINE void hz_page_set_start(hz_page_t *page, uint8_t *start) {
  uintptr_t word = (uintptr_t)start;
  page->start_word = HZ_VALGRIND ? ~word : word;
}

/* Set the page up for `class_id`, owned by `heap`. */
void hz_page_init(hz_page_t *page, struct hz_heap_s *heap, uint8_t class_id);
/* Move local_free onto free (when free is empty). */
void hz_page_collect(hz_page_t *page);
/* Carve up to `max` never-used blocks, their addresses into `out` (in
 * address order; shuffled in the secure variants); returns how many. The
 * caller holds them as used. Release writes nothing into the blocks, so
 * memory is first touched by the program that gets it. */
uint32_t hz_page_carve(hz_page_t *page, void **out, uint32_t max);
/* A block coming back that is the last one carved is carved again later
 * instead of linked, so memory a thread never wrote stays untouched (bins
 * give fresh blocks back highest address first). True if it was. Not in
 * the secure variants, whose fresh blocks come in random order. */
HZ_INLINE bool hz_page_uncarve(hz_page_t *page, const void *block) {
  if (HZ_SECURE || page->capacity == 0 ||
      (const uint8_t *)block !=
          hz_page_start(page) + (size_t)(page->capacity - 1) * page->block_size)
    return false;
  page->capacity--;
  return true;
}

HZ_INLINE bool hz_page_has_room(const hz_page_t *page) {
  return page->free != NULL || page->capacity < page->reserved;
}
/* Give back the memory of the page's free blocks (all but each block's
 * first word, whole OS pages only) and of its part never carved into
 * blocks, keeping the page in use. Owner (or a collector holding the
 * heap) only. */
void hz_page_discard_free(hz_page_t *page, bool lazy);
/* Report a link of the page's lists that leads out of its blocks. */
void hz_page_bad_link(const hz_page_t *page, const hz_block_t *block)
    __attribute__((cold));
/* The block a pointer names among the page's first `limit` blocks (see
 * hz_page_is_block): p itself when it is a block start, the block around
 * it when p is where memalign handed that block out (check.h), NULL
 * otherwise. */
hz_block_t *hz_page_block_named(const hz_page_t *page, const void *p,
                                uint32_t limit);
/* The block containing p (p may be interior when has_aligned is set). */
hz_block_t *hz_page_block_of(const hz_page_t *page, const void *p);
/* True if p is exactly at a block boundary of the page. */
bool hz_page_is_block_start(const hz_page_t *page, const void *p);

#ifdef HZ_DEBUG
void hz_page_check(const hz_page_t *page);
#else
#define hz_page_check(page) ((void)0)
#endif

HZ_INLINE uintptr_t hz_page_owner_word(const hz_page_t *page) {
  return atomic_load_explicit(&page->owner, memory_order_relaxed);
}

/* The owning heap, NULL when the page is free. */
HZ_INLINE struct hz_heap_s *hz_page_heap(const hz_page_t *page) {
  return (struct hz_heap_s *)(hz_page_owner_word(page) & ~HZ_PAGE_FLAG_MASK);
}

/* Give the page to `heap` (NULL: free), clearing every flag. */
HZ_INLINE void hz_page_set_heap(hz_page_t *page, struct hz_heap_s *heap) {
  atomic_store_explicit(&page->owner, (uintptr_t)heap, memory_order_relaxed);
}

HZ_INLINE unsigned hz_page_flags(const hz_page_t *page) {
  return (unsigned)(hz_page_owner_word(page) & HZ_PAGE_FLAG_MASK);
}

HZ_INLINE bool hz_page_has_aligned(const hz_page_t *page) {
  return (hz_page_flags(page) & HZ_PAGE_ALIGNED) != 0;
}

/* Owner only: set or clear flag bits. */
HZ_INLINE void hz_page_set_flag(hz_page_t *page, unsigned bit, bool on) {
  uintptr_t w = hz_page_owner_word(page);
  w = on ? (w | bit) : (w & ~(uintptr_t)bit);
  atomic_store_explicit(&page->owner, w, memory_order_relaxed);
}

/* True if p is the start of one of the page's first `limit` blocks: the
 * carved ones (capacity) for the owner, the ones that fit (reserved) for
 * other threads, which must not read capacity. */
HZ_INLINE bool hz_page_is_block(const hz_page_t *page, const void *p,
                                uint32_t limit) {
  uint32_t offset = (uint32_t)((uintptr_t)p - (uintptr_t)hz_page_start(page));
  return hz_sizeclass_block_index(page->class_id, offset) < limit;
}

/* The next block of one of the page's lists. A link that leads out of the
 * page's blocks (a freed block was overwritten) is reported: the secure
 * variants stop, release ends the list there (NULL). */
HZ_INLINE hz_block_t *hz_page_next(const hz_page_t *page,
                                   const hz_block_t *block) {
  hz_block_t *next = hz_block_next(block);
  if (HZ_UNLIKELY(next != NULL &&
                  !hz_page_is_block(page, next, page->capacity))) {
    hz_page_bad_link(page, block);
    return NULL; /* release: the rest of the list is lost */
  }
  return next;
}

/* Bytes from the page's first block to its end (start and end lie on
 * 4 KiB boundaries: a slice, the segment header's end, the guard page). */
HZ_INLINE size_t hz_page_area(const hz_page_t *page) {
  return (size_t)page->area_pages << 12;
}

HZ_INLINE void hz_page_set_area(hz_page_t *page, size_t bytes) {
  page->area_pages = (uint16_t)(bytes >> 12);
}

HZ_INLINE uint8_t *hz_page_end(const hz_page_t *page) {
  return hz_page_start(page) + hz_page_area(page);
}

HZ_INLINE bool hz_page_all_free(const hz_page_t *page) {
  return page->used == 0;
}

#endif
