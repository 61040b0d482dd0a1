/* heap_owner: the owner's side of the collection handshake (raising
 * `busy` around its slow paths, waiting while a collector holds the heap,
 * taking its bins back after one took blocks from them) and the bins'
 * arithmetic. The lowest of the heap box's files: heap.c, heap_free.c and
 * heap_collect.c call it, it calls none of them.
 * Internal to the box: no other box includes it.
 *
 * The owner raises `busy` with plain stores around its slow paths (enter
 * and leave below); the collector pays for a membarrier instead (see
 * heap_collect.c). ThreadSanitizer cannot see that barrier, so its build
 * makes both sides sequentially consistent. */
#ifndef HZ_HEAP_OWNER_H
#define HZ_HEAP_OWNER_H

#include "heap.h"

#if defined(__SANITIZE_THREAD__)
#define HZ_HANDSHAKE_ORDER memory_order_seq_cst
#else
#define HZ_HANDSHAKE_ORDER memory_order_relaxed
#endif

HZ_INLINE void hz_heap_raise_busy(hz_heap_t *heap) {
  atomic_store_explicit(&heap->busy, 1, HZ_HANDSHAKE_ORDER);
  atomic_signal_fence(memory_order_seq_cst);
}

HZ_INLINE bool hz_heap_claimed(hz_heap_t *heap) {
  return atomic_load_explicit(&heap->collector, memory_order_seq_cst) != 0;
}

/* The owner found its heap claimed: it waits until the collector is done. */
void hz_heap_wait_collector(hz_heap_t *heap);
/* The owner takes its bins back after a collector took blocks from them. */
void hz_heap_bins_restore(hz_heap_t *heap);

/* A slow path was entered while this thread was inside one: a signal
 * handler that called malloc or free (which are not async-signal-safe).
 * The secure variants report it and stop. */
void hz_heap_reentered(hz_heap_t *heap) __attribute__((cold));

/* The owner (or whoever holds a class heap) did a slow path: a collector
 * that sees the count move knows the heap is not idle. */
HZ_INLINE void hz_pages_note_active(hz_pages_t *pages) {
  uint32_t n = atomic_load_explicit(&pages->activity, memory_order_relaxed);
  atomic_store_explicit(&pages->activity, n + 1, memory_order_relaxed);
}

HZ_INLINE void hz_heap_note_active(hz_heap_t *heap) {
  hz_pages_note_active(&heap->pages);
}

/* The thread's own heap (the one its fast paths use) goes out of their
 * sight for a slow path, and back (hz_heap_own, heap.h): a handler that
 * interrupts the slow path sees the empty heap. Other heaps (a shared
 * pages' heap, one borrowed by a thread without its own) are out of sight
 * already. A compare and a TLS store each way, on slow paths only. */
HZ_INLINE void hz_heap_hide(hz_heap_t *heap) {
  if (HZ_LIKELY(heap == hz_heap_tls)) /* before busy's store and fence */
    hz_heap_tls = (hz_heap_t *)&hz_heap_empty;
}

HZ_INLINE void hz_heap_show(hz_heap_t *heap) {
  if (HZ_LIKELY(heap == hz_heap_own)) {
    atomic_signal_fence(memory_order_seq_cst); /* after every change */
    hz_heap_tls = heap;
  }
}

/* The owner enters a slow path in full: hidden from its fast paths, busy,
 * past any collector, its bins back (the stash's own paths enter with
 * hz_heap_try_enter instead, unhidden). */
HZ_INLINE void hz_heap_enter(hz_heap_t *heap) {
  if (HZ_SECURE &&
      HZ_UNLIKELY(atomic_load_explicit(&heap->busy, memory_order_relaxed)))
    hz_heap_reentered(heap);
  hz_heap_hide(heap);
  hz_heap_raise_busy(heap);
  if (HZ_UNLIKELY(hz_heap_claimed(heap))) hz_heap_wait_collector(heap);
  if (HZ_UNLIKELY(heap->bins_stolen)) hz_heap_bins_restore(heap);
  hz_heap_note_active(heap);
}

/* The stash's paths leave (they entered with hz_heap_try_enter). */
HZ_INLINE void hz_heap_leave_stash(hz_heap_t *heap) {
  atomic_store_explicit(&heap->busy, 0, memory_order_release);
}

/* The owner leaves a slow path entered with hz_heap_enter. */
HZ_INLINE void hz_heap_leave(hz_heap_t *heap) {
  hz_heap_leave_stash(heap);
  hz_heap_show(heap);
}

/* hz_heap_enter where nothing is in the way (no collector, bins not taken,
 * not reentered), for the stash's paths, which stay in the fast paths'
 * sight; false, busy lowered again, where something is: the caller takes
 * hz_heap_enter (and leave) first to clear the way. */
HZ_INLINE bool hz_heap_try_enter(hz_heap_t *heap) {
  if (HZ_SECURE && atomic_load_explicit(&heap->busy, memory_order_relaxed))
    return false;
  hz_heap_raise_busy(heap);
  if (HZ_UNLIKELY(hz_heap_claimed(heap) | heap->bins_stolen)) {
    hz_heap_leave_stash(heap);
    return false;
  }
  hz_heap_note_active(heap);
  return true;
}

/* `n` frees of blocks of other heaps' pages of class `cls` (the shared
 * pages' if `shared`): the class's remote frees, which are also frees
 * that skip the bin (hz_heap_publish_counts adds them). */
HZ_INLINE void hz_heap_count_remote(hz_heap_t *heap, uint8_t cls, bool shared,
                                    uint32_t n) {
  HZ_SHARED_ADD(heap->counts[cls].remote_frees, n);
  if (HZ_UNLIKELY(shared)) HZ_SHARED_ADD(heap->counts[cls].shared_frees, n);
}

/* The frees that extended the open run go into the counts. */
HZ_INLINE void hz_heap_settle_run(hz_heap_t *heap) {
  if (heap->run_frees == 0) return;
  hz_heap_count_remote(heap, heap->run_class, heap->run_shared,
                       heap->run_frees);
  if (!heap->run_shared) /* the class decision's runs: threads' pages */
    HZ_SHARED_ADD(heap->counts[heap->run_class].run_frees, heap->run_frees);
  heap->run_frees = 0;
}

/* A block of class `cls` (the shared pages' if `shared`) went into the
 * stash and opened a run there: frees that extend it count to that class. */
HZ_INLINE void hz_heap_note_run(hz_heap_t *heap, uint8_t cls, bool shared) {
  hz_heap_settle_run(heap);
  heap->run_class = cls;
  heap->run_shared = shared;
}

HZ_INLINE size_t hz_bin_count(const hz_bin_t *bin) {
  return (size_t)(bin->top - bin->base);
}

/* The frees the bin's thread made in its class (hz_bin_t): exact when the
 * owner asks between its own slow paths, bins restored. */
HZ_INLINE uint64_t hz_bin_frees(const hz_bin_t *bin) {
  return bin->free_base + hz_bin_count(bin) + hz_bin_allocs(bin);
}

/* n blocks went into the bin (+n) or out of it (-n) other than by free
 * and malloc. */
HZ_INLINE void hz_bin_moved(hz_bin_t *bin, int64_t n) {
  bin->free_base -= (uint64_t)n;
}

HZ_INLINE void hz_heap_double_free(const hz_page_t *page, const void *block) {
  hz_check_fail("double free", block, page->class_id, page->block_size);
}

#endif
