/* heap_parts: what the heap box's files offer each other. The box's files,
 * by what they hold:
 *   heap_owner.c   the owner's side of the collection handshake;
 *   heap_sample.c  a bin's countdown to the next sample;
 *   heap_pages.c   a heap's pages (a thread's or a class heap's): its
 *                  queues, the empty pages it keeps and its spares, new
 *                  pages cut from its segments (and heap_refill.h: a bin
 *                  filled from them);
 *   heap_spill.c   blocks leaving a bin: onto their pages, or home;
 *   heap_drain.c   the inbox taken home;
 *   heap_lend.c    a class that turns shared: the thread's pages lent to
 *                  the class heap, and given back to it;
 *   class_heap.c   the class heaps (class_heap.h);
 *   heap.c         bins set up, the malloc slow path (a bin's refill);
 *   heap_free.c    the frees the fast path leaves;
 *   heap_collect.c collecting a claimed heap.
 * Internal to the box: no other box includes it. */
#ifndef HZ_HEAP_PARTS_H
#define HZ_HEAP_PARTS_H

#include "class_heap.h"
#include "heap_owner.h"
#include "list.h"

/* A spare page (every block free): a free to it is a double free. */
HZ_INLINE bool hz_heap_page_is_retired(const hz_page_t *page) {
  return (hz_page_flags(page) & HZ_PAGE_RETIRED) != 0;
}

/* Page queues. Inline as the compiler sees fit, not forced: forced into the
 * refill's scan for the fullest page (heap.c) they cost the 70000-200000 B
 * hot_pair 2.4 instructions a pair more than left to it (37.75M against
 * 37.27M under callgrind). */
#ifdef HZ_DEBUG
/* After every queue change: the ends, and the links around `page`. */
static inline void hz_queue_check(const hz_page_queue_t *q,
                                  const hz_page_t *page) {
  HZ_ASSERT((q->first == NULL) == (q->last == NULL));
  HZ_ASSERT(q->first == NULL || q->first->prev == NULL);
  HZ_ASSERT(q->last == NULL || q->last->next == NULL);
  if (page == NULL) return;
  HZ_ASSERT(page->next == NULL || page->next->prev == page);
  HZ_ASSERT(page->prev == NULL || page->prev->next == page);
}
#else
#define hz_queue_check(q, page) ((void)(q), (void)(page))
#endif

static inline void hz_queue_push_front(hz_page_queue_t *q, hz_page_t *page) {
  HZ_LIST_PUSH_FRONT(q, first, last, page, next, prev);
  hz_queue_check(q, page);
}

static inline void hz_queue_push_back(hz_page_queue_t *q, hz_page_t *page) {
  HZ_LIST_PUSH_BACK(q, first, last, page, next, prev);
  hz_queue_check(q, page);
}

static inline void hz_queue_remove(hz_page_queue_t *q, hz_page_t *page) {
  hz_page_t *before = page->prev;
  HZ_LIST_REMOVE(q, first, last, page, next, prev);
  hz_queue_check(q, before);
}

/* `page` right behind the queue's first (the page refills take from),
 * where the next choice of a page looks first. */
static inline void hz_queue_push_second(hz_page_queue_t *q, hz_page_t *page) {
  hz_page_t *first = q->first;
  if (first != NULL) hz_queue_remove(q, first);
  hz_queue_push_front(q, page);
  if (first != NULL) hz_queue_push_front(q, first);
}

/* heap_pages.c: a heap's pages (hz_pages_t), a thread's heap's or a
 * class heap's alike. */
/* A kept empty page takes blocks again (or goes): no longer counted as
 * kept, no longer flagged retired. */
void hz_pages_unempty(hz_pages_t *pages, hz_page_t *page);
/* An empty page leaves its queue for the spares (or its segment). */
void hz_pages_retire(hz_pages_t *pages, hz_page_t *page);
/* `page`, empty, in its class queue: kept, last in line. */
void hz_pages_keep_emptied(hz_pages_t *pages, hz_page_t *page);
/* The last block of `page` came back: kept empty, or retired. */
void hz_pages_emptied(hz_pages_t *pages, hz_page_t *page);
/* A page leaves the full queue, behind the one refills take from. */
void hz_pages_unfull(hz_pages_t *pages, hz_page_t *page);
/* A page of class `cls` with every block free: a spare, or cut fresh;
 * NULL when out of memory. */
hz_page_t *hz_pages_new_page(hz_pages_t *pages, uint8_t cls);
/* The spare pages back to their segments, and the segments trimmed. */
void hz_pages_spare_release(hz_pages_t *pages);
/* A refill took blocks off a page with notes (refill_notes): kept empty,
 * or purged. */
void hz_pages_refilled_noted(hz_pages_t *pages, hz_page_t *page);
/* Collecting: every empty page of the class queues and every spare back
 * to their segments (the segments trimmed); the memory of the free blocks
 * of the pages still in use given back (the purge option's way); the
 * pages' counters and kept bytes added to `out`. */
void hz_pages_release_empty(hz_pages_t *pages);
void hz_pages_discard_free(hz_pages_t *pages);
void hz_pages_summarize(const hz_pages_t *pages, hz_heap_summary_t *out);
/* A collector's look at the pages (collect_seen): false when their owner
 * took a slow path since the last look (the idle time starts again, and
 * they are not clean any more); else true, idle for *idle_ms. */
bool hz_pages_look_idle(hz_pages_t *pages, uint64_t now_ms, uint64_t *idle_ms);
/* A purging collection left the pages clean: no look finds them worth
 * another until their owner is active again or blocks come in. */
void hz_pages_collected_clean(hz_pages_t *pages);
/* The lent pages (heap_lend.c) given back to the heap into their
 * segments: by its owner in a slow path, or a collector holding it; the
 * test inline on every malloc slow path. */
void hz_heap_give_returned(hz_heap_t *heap);
HZ_INLINE void hz_heap_take_returned(hz_heap_t *heap) {
  if (atomic_load_explicit(&heap->returned, memory_order_relaxed) != NULL)
    hz_heap_give_returned(heap);
}

/* `n` blocks of the page came back (their bits set): the page leaves the
 * full queue, and once all its blocks are free it is kept empty or goes
 * (hz_pages_emptied). */
HZ_INLINE void hz_pages_returned(hz_pages_t *pages, hz_page_t *page,
                                 uint32_t n) {
  if (n == 0) return;
  HZ_SHARED_SET(page->tally->used, (uint16_t)(page->tally->used - n));
  if (page->in_full) hz_pages_unfull(pages, page);
  hz_page_check(page);
  if (page->tally->used == 0) hz_pages_emptied(pages, page);
}

/* heap_lend.c */
/* The heap's bin of `cls` refills from the shared pages from now on. */
void hz_heap_turn_shared(hz_heap_t *heap, uint8_t cls);
/* Under the class's lock: the heap's pages of `cls` lent to the class
 * heap whose pages are `to`. */
void hz_heap_lend_pages(hz_heap_t *heap, hz_pages_t *to, uint8_t cls,
                        bool probed);
/* The page a probe's refill took from stays with the heap. */
void hz_heap_keep_for_probes(hz_heap_t *heap, uint8_t cls);

/* heap_spill.c */
/* Put a block of a bin back: on its page, or home (the shared pages).
 * `marked`: it was not below the bin's fresh_end (hz_page_put_index). */
void hz_heap_page_put(hz_heap_t *heap, hz_page_t *page, hz_block_t *block,
                      bool marked);
/* Return every block of a bin to its page, never writing into one that
 * was carved and not handed out. */
void hz_heap_bin_empty(hz_heap_t *heap, hz_bin_t *bin);
/* A block of the shared pages home to its class heap, through the stash. */
void hz_heap_send_home(hz_heap_t *heap, hz_page_t *page, hz_block_t *block);
/* The ladder's entries[0..n) home (the heap entered). */
void hz_heap_send_entries(hz_heap_t *heap, void *const *entries, unsigned n);
/* Publish what a bin of `cls` counted into `counts`, and the live count
 * (stats box) when it moved enough since (or `always`), counted in
 * `stats`. */
void hz_bin_publish(const hz_bin_t *bin, hz_class_counts_t *counts, uint8_t cls,
                    bool always, hz_heap_stats_t *stats);
void hz_heap_publish_counts(hz_heap_t *heap, uint8_t cls, bool always);
/* Publish the stash's lists (it holds some). */
void hz_heap_publish_stash(hz_heap_t *heap);
/* The stash's lists go out, if it holds any: a test on every malloc slow
 * path, inline there. */
HZ_INLINE void hz_heap_flush_stash(hz_heap_t *heap) {
  if (!hz_remote_stash_empty(&heap->stash)) hz_heap_publish_stash(heap);
}

/* heap_sample.c: a bin's countdown to the next sample. */
/* The first sample of `cls` counted down in `bin`, when the profiler or
 * the guard (for its classes) is on. */
void hz_bin_arm_sampling(hz_bin_t *bin, uint8_t cls);
/* The block the countdown reached 0 on (it is counted), `size` bytes asked
 * for: the profiler records it; the guard's turn passed (its pool was full
 * or the size too large). The countdown starts again. */
void *hz_bin_sampled(hz_bin_t *bin, void *block, size_t size);
/* The guard's turn in `bin` (this malloc not counted yet): a guarded
 * block, the countdown started again; NULL: the bin serves it. */
void *hz_bin_guarded(hz_bin_t *bin, size_t size);

/* heap_drain.c */
/* Take the inbox home, each header's blocks onto their page: a thread's
 * heap's (blocks of the pages it lent go on to their class heap), or a
 * class heap's (under its class's lock). */
void hz_heap_drain_inbox(hz_heap_t *heap);
void hz_pages_drain_inbox(hz_pages_t *pages);

#endif
