/* ladder: the two ends of the shared pages' ladder: a bin of a shared
 * class that runs empty, a bin that overflows (see ladder.h). The class
 * heaps at its foot are class_heap.c's, the routes decision.c's. */
#include "ladder.h"

#include "class_heap.h"
#include "cpu_cache.h"
#include "decision.h"
#include "depot.h"
#include "lock.h"
#include "sizeclass.h"

/* The most blocks a bin of `cls` takes from the ladder at a time: what a
 * spill gives it (half the bin), at most a batch. */
static unsigned ladder_batch(const hz_heap_t *heap, uint8_t cls) {
  const hz_bin_t *bin = &heap->bins[cls];
  size_t half = hz_bin_capacity(bin) / 2;
  if (half == 0) half = 1;
  return half < HZ_CPU_BATCH ? (unsigned)half : HZ_CPU_BATCH;
}

void *hz_ladder_malloc(hz_heap_t *heap, size_t size) {
  uint8_t cls = hz_sizeclass_of(size);
  bool probed = hz_decision_probed(cls);
  /* [condition: probe-refill] */
  if (probed && hz_decision_probe_turn(cls))
    return hz_heap_malloc_probe(heap, size);
  if (hz_cpu_class(cls)) {
    void *batch[HZ_CPU_BATCH];
    unsigned n = hz_cpu_take(cls, batch, ladder_batch(heap, cls));
    if (n == 0) n = hz_depot_take(cls, batch);
    /* [condition: ladder-empty] */
    if (n != 0) return hz_heap_malloc_given(heap, size, batch, n);
  }
  return hz_heap_malloc_shared(heap, size, probed);
}

/* A full bin's shared blocks onto this CPU's cache, what it has no room
 * for into the depot as one batch; how many went (the rest go home). */
static unsigned ladder_give(uint8_t cls, void *const *blocks, unsigned n) {
  unsigned took = hz_cpu_give(cls, blocks, n);
  if (took == n || !hz_depot_put(cls, blocks + took, n - took)) return took;
  return n;
}

_Static_assert(HZ_BIN_SLOTS / 2 <= HZ_CPU_BATCH,
               "a bin's spill is one batch for the ladder");

void hz_ladder_free_full(hz_heap_t *heap, hz_page_t *page, void *p) {
  /* A signal handler's free, the thread inside the allocator: no spill
   * (it may take locks the thread holds); p (marked) to its page's owner's
   * inbox, as a thread without a heap frees. */
  if (HZ_UNLIKELY(hz_lock_depth != 0)) { /* the fast path found the heap */
    hz_heap_free_orphan(page, p);
    return;
  }
  uint8_t cls = page->class_id; /* the page may go with the spill */
  void *spilled[HZ_BIN_SLOTS / 2];
  unsigned n = hz_heap_free_spilling(heap, page, p, spilled);
  if (n == 0) return;
  /* [condition: spill-to-ladder] */
  unsigned took = hz_cpu_class(cls) && hz_decision_shares(cls)
                      ? ladder_give(cls, spilled, n)
                      : 0;
  hz_heap_send_shared(heap, spilled + took, n - took);
}

void hz_ladder_drain(hz_heap_t *heap) {
  hz_cpu_cache_drain(heap);
  hz_depot_drain(heap);
}

uint64_t hz_ladder_blocks(void) {
  return hz_cpu_cache_blocks() + hz_depot_blocks();
}

void hz_ladder_stats(hz_front_end_stats_t *out) {
  hz_cpu_cache_stats(out);
  hz_depot_stats(out);
}
