/* heap: a heap's bins and the malloc slow path behind the inline fast
 * path (fast.h): bins set up and sampled, and a bin's refill from one page
 * (the class's current one, else its fullest; free blocks lowest address
 * first, then fresh ones carved), from the class heap's pages under the
 * class's lock, or from the blocks the ladder held. The heap box's other
 * files are listed in heap_parts.h.
 *
 * Invariants: a page is on exactly one queue of its owner (its class
 * queue, or `full` when in_full is set); a block in a bin counts as used
 * by its page; bins hold only block starts of pages their heap owns, or of
 * the shared pages (class heaps': a refill from them or the ladder, or any
 * thread's free), which a spill hands to the ladder or sends to their
 * class heap through the stash; a page with no block in use is flagged
 * retired (kept empty in its class queue, or spare) or back in its
 * segment. */
#include <stdatomic.h>
#include <string.h>

#include "class_heap.h"
#include "guard.h"
#include "heap_refill.h"
#include "large.h"
#include "list.h"
#include "options.h"
#include "os.h"
#include "prof.h"
#include "purge.h"

static uint32_t class_bin_capacity(uint8_t cls) {
  size_t cap = HZ_BIN_BYTES / hz_sizeclass_block_size(cls);
  if (cap > HZ_BIN_SLOTS) cap = HZ_BIN_SLOTS;
  return cap < HZ_BIN_MIN ? HZ_BIN_MIN : (uint32_t)cap;
}

static void heap_bin_init(hz_heap_t *heap, uint8_t cls) {
  hz_bin_t *bin = &heap->bins[cls];
  bin->base = bin->top = bin->fresh_end = heap->bin_slots[cls];
  bin->limit = bin->base + class_bin_capacity(cls);
  bin->inverse = (uint32_t)hz_class_divisor[cls];
  bin->rotate = (uint32_t)(hz_class_divisor[cls] >> 32);
}

void hz_heap_init(hz_heap_t *heap) {
  for (uint8_t c = 1; c < HZ_CLASS_COUNT; c++)
    heap_bin_init(heap, c);
  heap->state = HZ_HEAP_LIVE;
  heap->pages.cuts_from = &heap->pages.segments;
  heap->pages.empty_quarters = HZ_HEAP_EMPTY_RATIO * 4;
  if (hz_prof_active || hz_guard_active) hz_heap_arm_sampling(heap);
}

void hz_heap_arm_sampling(hz_heap_t *heap) {
  for (uint8_t c = 1; c < HZ_CLASS_COUNT; c++)
    hz_bin_arm_sampling(&heap->bins[c], c);
}

HZ_NOINLINE void *hz_heap_malloc_sampled(hz_heap_t *heap, hz_bin_t *bin,
                                         size_t size) {
  unsigned cls = (unsigned)(bin - heap->bins);
  return hz_bin_sampled(bin, hz_bin_take(bin, bin->top, cls), size);
}

/* Where a bin's refill comes from: the heap's own pages (with `probe`, a
 * shared class's probe: route.h), the class heap's (`shared`; with
 * `probed`, the class takes probes), or blocks the ladder held. */
typedef struct {
  bool shared, probed, probe;
  void *const *given;
  unsigned given_count;
} refill_from_t;

/* Half the bin, or a whole one when no free came into a bin of small
 * blocks since its last refill (a class the thread only allocates). */
static uint32_t heap_own_want(hz_heap_t *heap, hz_bin_t *bin, uint8_t cls) {
  uint32_t room = (uint32_t)hz_bin_capacity(bin);
  bool only_mallocs = false;
  if (room == HZ_BIN_SLOTS) {
    uint64_t frees = hz_bin_frees(bin);
    only_mallocs = frees == heap->refill_frees[cls];
    heap->refill_frees[cls] = frees;
  }
  return only_mallocs ? room : room / 2;
}

/* The bin of `cls` is empty: fill it from where `from` says; from the own
 * pages half way (see heap_own_want), from the class heap's whole
 * (class_heap.c). */
HZ_INLINE bool heap_fill_bin(hz_heap_t *heap, hz_bin_t *bin, uint8_t cls,
                             const refill_from_t *from) {
  HZ_ASSERT(bin->top == bin->base);
  if (!from->shared) {
    if (!from->probe) heap->pages.keeps_none[cls] = false;
    uint32_t taken =
        hz_pages_refill(&heap->pages, bin, cls, heap_own_want(heap, bin, cls));
    HZ_SHARED_ADD(heap->counts[cls].handed, taken);
    if (from->probe) hz_heap_keep_for_probes(heap, cls);
    return taken != 0;
  }
  if (!hz_heap_refills_shared(heap, cls)) hz_heap_turn_shared(heap, cls);
  return hz_class_heap_fill(heap, bin, cls, from->probed) != 0;
}

/* The entries the ladder held go into the bin of `cls` (empty): the blocks
 * that hold no mark below its fresh_end, the others above, whose top is
 * handed out first. */
static void heap_take_given(hz_heap_t *heap, hz_bin_t *bin, uint8_t cls,
                            const refill_from_t *from) {
  unsigned n = from->given_count;
  size_t room = (size_t)(bin->limit - bin->top);
  unsigned fit = n < room ? n : (unsigned)room;
  if (!hz_heap_refills_shared(heap, cls)) hz_heap_turn_shared(heap, cls);
  void **batch = bin->top;
  uint32_t unmarked = 0;
  for (unsigned i = 0; i < fit; i++)
    if (!hz_entry_marked(from->given[i]))
      batch[unmarked++] = hz_entry_block(from->given[i]);
  for (unsigned i = 0, at = unmarked; i < fit; i++)
    if (hz_entry_marked(from->given[i])) batch[at++] = from->given[i];
  hz_bin_hold_unmarked(bin, batch, unmarked);
  bin->top += fit;
  hz_bin_moved(bin, fit);
  hz_heap_send_entries(heap, from->given + fit, n - fit); /* no room: never */
}

HZ_INLINE void *heap_malloc(hz_heap_t *heap, size_t size,
                            const refill_from_t *from) {
  hz_heap_enter(heap);
  HZ_SHARED_ADD(heap->pages.stats.slow_mallocs, 1);
  hz_heap_take_returned(heap);
  uint8_t cls = hz_sizeclass_of(size);
  hz_bin_t *bin = &heap->bins[cls];
  if (from->given_count != 0) heap_take_given(heap, bin, cls, from);
  /* The guard's turn, inside the slow path: a collector or a signal
   * handler's malloc meets the heap busy, as for any slow path. */
  /* [condition: guard-sample] */
  if (HZ_UNLIKELY(hz_heap_sample_due(heap, cls)) && hz_guard_active) {
    void *guarded = hz_bin_guarded(bin, size);
    if (guarded != NULL) {
      hz_heap_leave(heap);
      return guarded;
    }
  }
  hz_heap_flush_stash(heap);
  if (hz_heap_has_incoming(heap)) hz_heap_drain_inbox(heap);
  void *block = NULL;
  hz_pages_age_empty(&heap->pages, cls);
  if (bin->top != bin->base || heap_fill_bin(heap, bin, cls, from)) {
    bin->sample_left--;
    block = hz_bin_take(bin, bin->top, cls);
    hz_heap_publish_counts(heap, cls, false);
  }
  hz_heap_leave(heap);
  if (HZ_UNLIKELY(bin->sample_left == 0) && block != NULL)
    return hz_bin_sampled(bin, block, size);
  return block;
}

void *hz_heap_malloc_small(hz_heap_t *heap, size_t size) {
  const refill_from_t own = {0};
  return heap_malloc(heap, size, &own);
}

void *hz_heap_malloc_shared(hz_heap_t *heap, size_t size, bool probed) {
  const refill_from_t from = {.shared = true, .probed = probed};
  return heap_malloc(heap, size, &from);
}

void *hz_heap_malloc_probe(hz_heap_t *heap, size_t size) {
  const refill_from_t from = {.probe = true};
  return heap_malloc(heap, size, &from);
}

void *hz_heap_malloc_given(hz_heap_t *heap, size_t size, void *const *blocks,
                           unsigned n) {
  const refill_from_t from = {.given = blocks, .given_count = n};
  return heap_malloc(heap, size, &from);
}
