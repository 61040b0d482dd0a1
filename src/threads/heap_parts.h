/* heap_parts: what heap.c (bins, pages and the slow paths) offers the
 * heap box's files above it: heap_free.c (the frees the fast path leaves)
 * and heap_collect.c (collecting a claimed heap). Calls go one way:
 * heap_owner.h below all three, heap.c below the other two.
 * Internal to the box: no other box includes it. */
#ifndef HZ_HEAP_PARTS_H
#define HZ_HEAP_PARTS_H

#include "heap_owner.h"

/* A spare page (every block free): a free to it is a double free. */
HZ_INLINE bool hz_heap_page_is_retired(const hz_page_t *page) {
  return (hz_page_flags(page) & HZ_PAGE_RETIRED) != 0;
}

/* From heap.c, for the box's other files. */
/* Put a block of a bin back: on its page, or home (the shared pages).
 * `marked`: it was not below the bin's fresh_end (hz_page_put_index). */
void hz_heap_page_put(hz_heap_t *heap, hz_page_t *page, hz_block_t *block,
                      bool marked);
/* Return the `n` oldest blocks of a bin to their pages. */
void hz_heap_bin_spill(hz_heap_t *heap, hz_bin_t *bin, size_t n);
/* Return every block of a bin to its page, never writing into one that
 * was carved and not handed out. */
void hz_heap_bin_empty(hz_heap_t *heap, hz_bin_t *bin);
/* An empty page leaves its queue for the spares (or its segment). */
void hz_heap_retire_page(hz_heap_t *heap, hz_page_t *page);
void hz_heap_spare_release(hz_heap_t *heap);
void hz_heap_publish_counts(hz_heap_t *heap, uint8_t cls, bool always);
void hz_heap_flush_stash(hz_heap_t *heap);
/* Take the inbox home, each header's blocks onto their page. */
void hz_heap_drain_inbox(hz_heap_t *heap);

#endif
