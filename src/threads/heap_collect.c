/* heap_collect: a heap given back by someone other than a running owner.
 * The collection handshake (a collector claims an idle heap, forces a
 * barrier on every thread and works only while the owner is outside its
 * slow paths; an owner that finds its heap claimed waits), taking blocks
 * out of an idle heap's bins, collecting (inbox home, empty pages back,
 * free blocks' memory discarded), and what an exiting or trimming owner
 * gives back. The owner's side of the handshake is heap_owner.c's. */
#include <string.h>

#include "heap_parts.h"
#include "options.h"
#include "os.h"

static hz_collect_depth_t idle_depth(hz_heap_t *heap, uint64_t now_ms) {
  bool pending = hz_heap_has_incoming(heap);
  uint64_t idle;
  if (!hz_pages_look_idle(&heap->pages, now_ms, &idle)) return HZ_COLLECT_NONE;
  if (heap->pages.collect_clean && !pending) return HZ_COLLECT_NONE;
  if (idle >= HZ_IDLE_FULL_MS) return HZ_COLLECT_FULL;
  long delay = hz_option(HZ_OPTION_PURGE_DELAY_MS);
  if (pending && idle >= (uint64_t)(delay > 0 ? delay : 0))
    return HZ_COLLECT_INBOX;
  return HZ_COLLECT_NONE;
}

hz_collect_depth_t hz_heap_claim(hz_heap_t *heap, uintptr_t token,
                                 hz_claim_t how, uint64_t now_ms) {
  hz_heap_state_t state = HZ_SHARED_GET(heap->state);
  if (state != HZ_HEAP_LIVE && state != HZ_HEAP_POOLED) return HZ_COLLECT_NONE;
  hz_collect_depth_t depth = HZ_COLLECT_FULL;
  if (how == HZ_CLAIM_IDLE)
    depth = idle_depth(heap, now_ms);
  else if (how == HZ_CLAIM_SURPLUS && heap->pages.collect_clean &&
           !hz_heap_has_incoming(heap))
    depth = HZ_COLLECT_NONE;
  uintptr_t expected = 0;
  if (depth == HZ_COLLECT_NONE ||
      !atomic_compare_exchange_strong(&heap->collector, &expected, token))
    return HZ_COLLECT_NONE;
  return depth;
}

bool hz_heap_owner_quiet(hz_heap_t *heap) {
  return atomic_load_explicit(&heap->busy, memory_order_seq_cst) == 0;
}

void hz_heap_release_claim(hz_heap_t *heap) {
  atomic_store_explicit(&heap->collector, 0, memory_order_release);
}

/* ---------------------------------------------------------------------------
 * Taking blocks out of an idle heap's bins
 *
 * The owner's fast path reads top and base and writes top, with no
 * handshake. The collector raises base to top - 1 in every bin, forces a
 * barrier on every thread, and reads top again: from then on each owner
 * operation sees the new base (and finds the bin empty below it), except
 * one that was under way across the barrier, which can pop only slot
 * top - 1 or push at top. So the slots below min(new base, top - 1) are
 * the collector's; it records that bound in the heap's stolen_end. The
 * owner's next slow path keeps [stolen_end, top) and moves it back to the
 * start, with the part below the bin's fresh_end still below it.
 * ------------------------------------------------------------------------- */
#if !defined(__SANITIZE_THREAD__)
static void heap_take_bins(hz_heap_t *heap) {
  void **old_base[HZ_CLASS_COUNT] = {0};
  bool any = false;
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    volatile hz_bin_t *bin = &heap->bins[c];
    void **top = bin->top, **base = bin->base;
    if (top - base < 2) continue;
    old_base[c] = base;
    bin->base = top - 1;
    any = true;
  }
  if (!any) return;
  if (!hz_os_barrier_all_threads()) { /* nothing taken: the owner restores */
    for (int c = 1; c < HZ_CLASS_COUNT; c++)
      if (old_base[c] != NULL) heap->stolen_end[c] = old_base[c];
    heap->bins_stolen = true;
    return;
  }
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    if (old_base[c] == NULL) continue;
    volatile hz_bin_t *bin = &heap->bins[c];
    void **end = bin->top - 1;
    if (end > bin->base) end = bin->base;
    void **fresh_end = bin->fresh_end; /* below it: never handed out */
    for (void **slot = old_base[c]; slot < end; slot++) {
      hz_heap_page_put(heap, hz_segment_block_page(*slot), *slot,
                       slot >= fresh_end);
      HZ_SHARED_ADD(heap->pages.stats.bin_blocks_taken, 1);
    }
    if (end > old_base[c]) hz_bin_moved(&heap->bins[c], old_base[c] - end);
    heap->stolen_end[c] = end > old_base[c] ? end : old_base[c];
  }
  heap->bins_stolen = true;
}
#else
/* ThreadSanitizer cannot see the barrier the handshake relies on. */
static void heap_take_bins(hz_heap_t *heap) { (void)heap; }
#endif

static void heap_collect(hz_heap_t *heap) {
  hz_heap_drain_inbox(heap); /* may send blocks of lent pages on: */
  hz_heap_flush_stash(heap);
  hz_pages_release_empty(&heap->pages);
}

static void heap_spill_all_bins(hz_heap_t *heap) {
  for (int c = 1; c < HZ_CLASS_COUNT; c++) /* class 0: large, no bin */
    hz_heap_bin_empty(heap, &heap->bins[c]);
}

/* Only a collection that purged leaves the heap clean for purge rounds:
 * one that just recycled it still has free blocks to discard. */
void hz_heap_collect(hz_heap_t *heap, bool purge, hz_bins_take_t bins) {
  HZ_SHARED_ADD(heap->pages.stats.collections, 1);
  hz_heap_take_returned(heap);
  /* A pooled heap idle long enough to be collected whole has no thread to
   * cut its pages again soon: their memory goes now, not a purge delay
   * later (4 threads that freed 1 GiB and exited kept 60 MB resident 2.5
   * purge delays after the last free in one run of 6). */
  heap->pages.gone = bins == HZ_BINS_ALL && purge;
  if (bins == HZ_BINS_ALL) {
    if (heap->bins_stolen) hz_heap_bins_restore(heap);
    heap_spill_all_bins(heap);
  } else if (purge && bins == HZ_BINS_BELOW_TOP) {
    heap_take_bins(heap);
  }
  heap_collect(heap);
  heap->pages.gone = false;
  if (!purge) return;
  hz_pages_discard_free(&heap->pages);
  hz_pages_collected_clean(&heap->pages);
}

bool hz_heap_holds_nothing(const hz_heap_t *heap) {
  if (heap->pages.full.first != NULL || hz_heap_has_incoming(heap) ||
      !hz_remote_stash_empty(&heap->stash) ||
      atomic_load_explicit(&heap->lent, memory_order_relaxed) != 0)
    return false;
  for (int kind = 0; kind < HZ_HEAP_SPARE_KINDS; kind++)
    if (heap->pages.spare[kind] != NULL) return false;
  for (int c = 1; c < HZ_CLASS_COUNT; c++)
    if (heap->pages.queues[c].first != NULL ||
        heap->bins[c].top != heap->bins[c].base)
      return false;
  return heap->pages.segments.room == NULL &&
         heap->pages.segments.empty == NULL;
}

static void heap_publish_all_counts(hz_heap_t *heap) {
  for (int c = 1; c < HZ_CLASS_COUNT; c++)
    hz_heap_publish_counts(heap, (uint8_t)c, true);
}

/* The owner returns what it can: its bins too, then what a collector
 * would, and with `discard` the memory of free blocks in its pages. Pages
 * with live blocks stay with the heap while it is pooled. */
static void heap_give_back(hz_heap_t *heap, bool discard) {
  hz_heap_enter(heap);
  heap_spill_all_bins(heap);
  heap_publish_all_counts(heap);
  heap_collect(heap);
  if (discard) hz_pages_discard_free(&heap->pages);
  hz_heap_leave(heap);
}

void hz_heap_flush(hz_heap_t *heap) { heap_give_back(heap, false); }

void hz_heap_park(hz_heap_t *heap) {
  hz_heap_enter(heap);
  hz_heap_flush_stash(heap);
  heap_publish_all_counts(heap);
  hz_heap_leave(heap);
}

void hz_heap_trim(hz_heap_t *heap) { heap_give_back(heap, true); }

void hz_heap_publish_all(hz_heap_t *heap) {
  hz_heap_enter(heap);
  heap_publish_all_counts(heap);
  hz_heap_leave(heap);
}

void hz_heap_summarize_one(const hz_heap_t *heap, hz_heap_summary_t *out) {
  hz_pages_summarize(&heap->pages, out);
  out->counters.inbox_cas_retries += HZ_SHARED_GET(heap->stash.cas_retries);
  out->counters.stash_wait_ns += HZ_SHARED_GET(heap->stash.wait_ns);
  out->counters.stash_lists_timed += HZ_SHARED_GET(heap->stash.timed);
  out->counters.stash_published += HZ_SHARED_GET(heap->stash.published);
  for (int c = 1; c < HZ_CLASS_COUNT; c++)
    hz_class_counts_add(&out->classes[c], &heap->counts[c]);
}