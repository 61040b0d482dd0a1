/* thread: binding heaps to threads. A thread gets a heap on its first
 * slow-path malloc or its first free of another heap's block (a pooled
 * one if any, else a new one); at thread exit the heap is parked (stash
 * published, bins kept) and pooled for the next thread. Also owns the fork
 * handlers and the process-wide start-up. */
#ifndef HZ_THREAD_H
#define HZ_THREAD_H

#include "heap.h"

/* The slow paths the fast paths (fast.h) fall into: they give a thread
 * without a heap one, then call the heap's own slow paths. Size and
 * pointer first: the fast paths' tail calls then leave them where they
 * are. */
void *hz_thread_malloc_slow(size_t size, hz_heap_t *heap);
void hz_thread_free_slow(void *p, hz_heap_t *heap, hz_segment_t *seg,
                         hz_page_t *page);
/* Give the calling thread a heap (initialising the process on the first
 * call); NULL if out of memory. */
hz_heap_t *hz_thread_attach(void);
/* The heap a thread without one frees through: attached now, or NULL when
 * the thread is past its exit handler (or out of memory). */
hz_heap_t *hz_thread_attach_for_free(void);
/* malloc for a thread without a heap: attach one, or, when the thread is
 * already past its exit handler, serve the call from a borrowed heap. */
void *hz_thread_malloc_unattached(size_t size);
/* A large block (large box), given one more try after the process gave
 * back what it holds free when the first fails. */
void *hz_thread_large_alloc(size_t size, size_t align, bool zero);
/* Flush one pooled heap (drain its inbox, give back its empty pages). */
void hz_thread_reclaim_pooled(void);
/* Collect the heaps of other threads (only those idle since the last
 * round, with `idle_only`): their inboxes go home and their empty pages
 * back to the segments. */
void hz_thread_collect(bool idle_only);
/* Give back all the process can: the calling thread's heap (bins
 * included), what every other heap can without its owner, then every free
 * page's memory and every cached segment and mapping (malloc_trim, and
 * the last try before a request fails). */
void hz_thread_give_back_all(void);
/* How often the pool lock and the collection lock were taken, and the
 * busiest class heap's lock. */
void hz_thread_locks_taken(uint64_t *pool, uint64_t *collect,
                           uint64_t *class_heap);
/* Summary over every heap, for the stats report. */
void hz_thread_summarize(hz_heap_summary_t *out);

#endif
