/* heap_refill: a bin filled from a heap's pages (hz_pages_t), inline in
 * both refills that do it: a thread's from its own pages (heap.c), and
 * one from a class heap's pages (class_heap.c). Internal to the heap box,
 * as heap_parts.h. */
#ifndef HZ_HEAP_REFILL_H
#define HZ_HEAP_REFILL_H

#include "heap_parts.h"

static inline void hz_pages_move_to_front(hz_page_queue_t *q, hz_page_t *page) {
  if (page == q->first) return;
  hz_queue_remove(q, page);
  hz_queue_push_front(q, page);
}

/* A batch at the bin's top: its `n` first blocks, which hold no mark,
 * join those below fresh_end (each swapped with the block there), so a
 * bin filled from several pages keeps them all below it. */
HZ_INLINE void hz_bin_hold_unmarked(hz_bin_t *bin, void **batch, uint32_t n) {
  HZ_ASSERT(bin->fresh_end <= batch);
  if (bin->fresh_end == batch) { /* the batch starts the bin */
    bin->fresh_end += n;
    return;
  }
  for (uint32_t i = 0; i < n; i++, bin->fresh_end++) {
    void *other = *bin->fresh_end;
    *bin->fresh_end = batch[i];
    batch[i] = other;
  }
}

/* Pages of a class queue a refill looks at for the fullest. */
#define FIND_SCAN 8

/* Blocks of the page still to hand out: free ones and uncarved ones. */
HZ_INLINE uint32_t hz_refill_page_room(const hz_page_t *page) {
  return (uint32_t)page->reserved - page->tally->used;
}

/* A page of class `cls` with a free block or room to carve one, now first
 * in its queue. Refills stay on the first page until it runs out (its
 * blocks come out in address order); then they move to the fullest of the
 * next FIND_SCAN pages (fewest blocks left to hand out), so sparse pages
 * empty and go back, and memory held tracks memory live. Pages with
 * nothing left move to `full`. A fresh page is cut only when no page has
 * room. */
HZ_INLINE hz_page_t *hz_pages_find(hz_pages_t *pages, uint8_t cls) {
  hz_page_queue_t *q = &pages->queues[cls];
  hz_page_t *page = q->first;
  if (HZ_LIKELY(page != NULL && hz_page_has_room(page))) return page;
  hz_page_t *best = NULL;
  for (int looked = 0; page != NULL && looked < FIND_SCAN; looked++) {
    hz_page_t *next = page->next;
    if (!hz_page_has_room(page)) {
      hz_queue_remove(q, page);
      page->in_full = 1;
      hz_queue_push_back(&pages->full, page);
    } else if (best == NULL ||
               hz_refill_page_room(page) < hz_refill_page_room(best)) {
      best = page;
    }
    page = next;
  }
  if (best != NULL) {
    hz_pages_move_to_front(q, best);
    return best;
  }
  page = hz_pages_new_page(pages, cls);
  if (page != NULL) hz_queue_push_front(q, page);
  return page;
}

/* Fill the empty bin of `cls` up to half way from one page (the one
 * hz_pages_find chooses, which has room: at least one block), the lowest
 * address on top: malloc hands blocks out in address order, which
 * hardware prefetchers follow. (Going on to the next fullest page when the
 * first runs out halved the slow paths of mt_remote main R90/T4 but bought
 * no speed there, and cost 10% on batch_queue 2x2-8-2048, 11 runs. A
 * software prefetch of each block for writing bought nothing measurable on
 * batch_queue, random_mixed, string_builder or json, 5 runs each. Both
 * were dropped.) False if out of memory. */
HZ_INLINE uint32_t hz_pages_refill(hz_pages_t *pages, hz_bin_t *bin,
                                   uint8_t cls, uint32_t want) {
  hz_page_t *page = hz_pages_find(pages, cls);
  if (page == NULL) return 0;
  uint32_t unmarked;
  uint32_t taken = hz_page_take(page, bin->top, want, &unmarked);
  HZ_ASSERT(taken > 0);
  hz_bin_hold_unmarked(bin, bin->top, unmarked);
  bin->top += taken;
  hz_bin_moved(bin, taken);
  if (page->tally->used == 0) pages->busy_bytes += hz_page_area(page);
  HZ_SHARED_SET(page->tally->used, (uint16_t)(page->tally->used + taken));
  if (HZ_UNLIKELY(page->refill_notes)) hz_pages_refilled_noted(pages, page);
  hz_page_check(page);
  return taken;
}

/* The emptiest page of the class (last in its queue) goes if it has been
 * empty for HZ_HEAP_EMPTY_AGE of the heap's slow paths: kept pages absorb
 * a class's ups and downs, and memory held follows memory live as the
 * heap goes on. One look per malloc slow path. */
static inline void hz_pages_age_empty(hz_pages_t *pages, uint8_t cls) {
  hz_page_t *last = pages->queues[cls].last;
  if (last == NULL || !last->emptied || last == pages->queues[cls].first)
    return;
  uint32_t now = atomic_load_explicit(&pages->activity, memory_order_relaxed);
  if (now - last->emptied_at >= HZ_HEAP_EMPTY_AGE) hz_pages_retire(pages, last);
}

#endif
