/* heap_parts: what the heap box's files (heap.c: bins, pages and the slow
 * paths; heap_free.c: the frees the fast path leaves; heap_collect.c: the
 * collection handshake and collecting) share.
 * Internal to the box: no other box includes it.
 *
 * The owner raises `busy` with plain stores around its slow paths (enter
 * and leave below); the collector pays for a membarrier instead (see
 * heap_collect.c). ThreadSanitizer cannot see that barrier, so its build
 * makes both sides sequentially consistent. */
#ifndef HZ_HEAP_PARTS_H
#define HZ_HEAP_PARTS_H

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

/* The owner enters / leaves a slow path. */
HZ_INLINE void hz_heap_enter(hz_heap_t *heap) {
  if (HZ_SECURE &&
      HZ_UNLIKELY(atomic_load_explicit(&heap->busy, memory_order_relaxed)))
    hz_heap_reentered(heap);
  hz_heap_raise_busy(heap);
  if (HZ_UNLIKELY(hz_heap_claimed(heap))) hz_heap_wait_collector(heap);
  if (HZ_UNLIKELY(heap->bins_stolen)) hz_heap_bins_restore(heap);
  uint32_t n = atomic_load_explicit(&heap->activity, memory_order_relaxed);
  atomic_store_explicit(&heap->activity, n + 1, memory_order_relaxed);
}

HZ_INLINE void hz_heap_leave(hz_heap_t *heap) {
  atomic_store_explicit(&heap->busy, 0, memory_order_release);
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

/* A spare page (every block free): a free to it is a double free. */
HZ_INLINE bool hz_heap_page_is_retired(const hz_page_t *page) {
  return (hz_page_flags(page) & HZ_PAGE_RETIRED) != 0;
}

/* From heap.c, for the box's other files. */
/* Put a block of ours (a block start) back on its page. */
void hz_heap_page_put(hz_heap_t *heap, hz_page_t *page, hz_block_t *block);
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
/* Blocks wait in the inbox (a collector may ask before it claims the
 * heap). */
bool hz_heap_has_incoming(const hz_heap_t *heap);
/* Take the inbox home, each header's blocks onto their page. */
void hz_heap_drain_inbox(hz_heap_t *heap);

#endif
