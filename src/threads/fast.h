/* fast: malloc and free as most calls run them, inline in the C library
 * surface (api, override). A malloc pops the bin of its class; a free
 * finds the block's page, and the page decides: a block of the thread's
 * own page or of a shared page, proved a block start, goes onto the
 * thread's bin; a plain block of another thread's page goes to the stash,
 * home. Everything else falls into the thread box's slow paths, which give
 * a thread without a heap one. This box sits above heap, ladder and
 * thread so that none of them calls upward. */
#ifndef HZ_FAST_H
#define HZ_FAST_H

#include <stddef.h>

#include "arena.h"
#include "check.h"
#include "class_heap.h"
#include "decision.h"
#include "guard.h"
#include "heap.h"
#include "ladder.h"
#include "page.h"
#include "segment.h"
#include "sizeclass.h"
#include "thread.h"

/* The countdown of `bin` (not empty) ran out: the profiler records the
 * block the bin hands out; the guard's turn goes to the slow path, where
 * the heap is busy while the guard works (the countdown goes back to 1:
 * the slow path counts this malloc, not the fast path's decrement). */
static HZ_NOINLINE void *hz_fast_malloc_sampled(hz_heap_t *heap, hz_bin_t *bin,
                                                size_t size) {
  if (!hz_guard_active) return hz_heap_malloc_sampled(heap, bin, size);
  bin->sample_left = 1;
  return hz_thread_malloc_slow(size, heap);
}

/* Pop a block of the class whose bin is `scaled` bytes into the heap's
 * (the class tables' entry), or take the slow path. Counting the block
 * and the profiler's check are one decrement and one branch. */
HZ_INLINE void *hz_fast_malloc_class(hz_heap_t *heap, size_t scaled,
                                     size_t size) {
  hz_bin_t *bin = (hz_bin_t *)((char *)heap->bins + scaled);
  void **top = bin->top;
  if (HZ_UNLIKELY(top <= bin->base)) return hz_thread_malloc_slow(size, heap);
  if (HZ_UNLIKELY(--bin->sample_left == 0))
    return hz_fast_malloc_sampled(heap, bin, size);
  return hz_bin_take(bin, top, (unsigned)(scaled / HZ_CLASS_LUT_SCALE));
}

/* malloc of any size: small sizes from the bins, the rest through the
 * slow path. hz_sizeclass_scaled_of written out, so each size range costs
 * one compare. The class table is shared by every thread and small enough to
 * stay cached; a per-heap table of bin pointers (one load fewer) lost 20% on 4
 * threads mallocing 16 B-2 KiB among 400 live blocks each: its lines fell out
 * of the cache. */
HZ_INLINE void *hz_fast_malloc(size_t size) {
  hz_heap_t *heap = hz_heap_current();
  if (HZ_LIKELY(size <= HZ_CLASS_LUT_MAX))
    return hz_fast_malloc_class(heap, hz_class_lut[(size + 15) >> 4], size);
  if (HZ_LIKELY(size <= HZ_SMALL_MAX))
    return hz_fast_malloc_class(heap, hz_sizeclass_scaled_of_wide(size), size);
  return hz_thread_malloc_slow(size, heap);
}

/* p, a free block of `page`, onto the thread's bin of its class (whose top
 * is `top`); a full bin passes its older half on first: the thread's own
 * blocks to their pages, the shared pages' to the ladder. */
HZ_INLINE void hz_fast_bin_put(hz_heap_t *heap, hz_bin_t *bin, void **top,
                               hz_page_t *page, void *p) {
  if (HZ_LIKELY(top != bin->limit)) {
    *top = p;
    bin->top = top + 1;
    return;
  }
  hz_ladder_free_full(heap, page, p);
}

/* The index of p among its page's blocks by the bin's divisor of their
 * size: the block-start proof's multiply (a pointer inside a block, or off
 * the page, gives an index past any bound). */
HZ_INLINE uint32_t hz_fast_block_index(const hz_bin_t *bin,
                                       const hz_page_t *page, const void *p) {
  uint32_t offset = (uint32_t)((uintptr_t)p - (uintptr_t)hz_page_start(page));
  return hz_sizeclass_index_rotated(bin->inverse, bin->rotate, offset);
}

/* A shared page's block goes onto the thread's bin like its own while its
 * class shares pages: told by the owner word alone, the class's shared
 * heap sitting at a fixed place (class_heap.h), so no line of that heap is
 * read. */
HZ_INLINE bool hz_fast_shared_to_bin(const hz_page_t *page, uintptr_t word) {
  return word == hz_class_heap_word(page->class_id) &&
         hz_decision_shares(page->class_id);
}

/* A shared page's block onto the thread's bin (hz_fast_shared_to_bin):
 * proved a block start of the blocks that fit its page (other threads
 * carve it under the class's lock), not marked already; a full bin passes
 * its older half to the ladder. A marked block takes the generic path,
 * which reports the double free; a thread without a heap, the slow path.
 * Out of line: inlined, its registers cost the thread's own pair. */
static HZ_NOINLINE HZ_HOT(4) void hz_fast_free_shared(hz_heap_t *heap,
                                                      hz_page_t *page,
                                                      void *p) {
  if (HZ_UNLIKELY(heap == &hz_heap_empty)) {
    hz_thread_free_slow(p, heap, hz_segment_base(p), page);
    return;
  }
  hz_bin_t *bin = &heap->bins[page->class_id];
  if (HZ_UNLIKELY(hz_fast_block_index(bin, page, p) >= page->reserved)) {
    hz_heap_bad_free(page, p);
    return;
  }
  if (HZ_UNLIKELY(!hz_check_freeing_fast(p))) {
    hz_heap_free_generic(heap, hz_segment_base(p), page, p); /* a heap */
    return;
  }
  hz_fast_bin_put(heap, bin, bin->top, page, p);
}

/* A block of `page` (owned by `word`) that is neither the thread's own nor
 * a shared page's block its bin takes, and extends no run: another
 * thread's plain block, or a shared page's whose class refills from the
 * threads' pages (a young thread's block: no refill takes it from a bin
 * or the ladder), goes home through the stash; a page whose only flag
 * says its free memory went back (the thread's own, another's or a shared
 * one) asks the page's bit first (hz_heap_free_purged); any other flag, a
 * free page or a thread without a heap takes the slow path. */
/* [condition: page-flag] */
static HZ_NOINLINE void hz_fast_free_foreign(hz_heap_t *heap,
                                             hz_segment_t *seg,
                                             hz_page_t *page, void *p,
                                             uintptr_t word) {
  if ((word & HZ_PAGE_FLAG_MASK) != 0 || word == 0 || heap == &hz_heap_empty) {
    if ((word & HZ_PAGE_FLAG_MASK) == HZ_PAGE_PURGED && heap != &hz_heap_empty)
      hz_heap_free_purged(heap, seg, page, p);
    else
      hz_thread_free_slow(p, heap, seg, page);
  } else {
    hz_heap_free_remote_plain(heap, page, p);
  }
}

/* A pointer that is not ours is reported and never written to; on our own
 * pages p must be a block start (a multiply and a compare) before it goes
 * into the bin. Pointers outside the arena (large blocks, segments mapped
 * on their own under an address-space limit) take the slow path, which
 * asks the segment map. */
HZ_INLINE void hz_fast_free(void *p) {
  if (HZ_UNLIKELY(!hz_arena_holds(p))) {
    if (p != NULL) hz_thread_free_slow(p, hz_heap_current(), NULL, NULL);
    return;
  }
  hz_segment_t *seg = hz_segment_base(p);
  hz_page_t *page = hz_segment_slice_of(seg, p);
  hz_heap_t *heap = hz_heap_current();
  /* One compare: our page, and no flag asks for the slow path; past the
   * first slice of a page, one more load finds the page. */
  uintptr_t word = hz_page_owner_word(page);
  if (HZ_UNLIKELY(word != (uintptr_t)heap)) {
    if (word == HZ_PAGE_INTERIOR) {
      page = page->next;
      word = hz_page_owner_word(page);
    }
    if (word != (uintptr_t)heap) {
      /* A shared page's block onto the bin; the block after the stash's
       * open run, on its page (two compares), extends the run: a leaf of
       * a few stores; the rest by their page. */
      if (hz_fast_shared_to_bin(page, word))
        hz_fast_free_shared(heap, page, p);
      else if (hz_heap_extends_run(heap, p, word))
        hz_heap_free_next(heap, page, p);
      else
        hz_fast_free_foreign(heap, seg, page, p, word);
      return;
    }
  }
  hz_bin_t *bin = &heap->bins[page->class_id];
  void **top = bin->top;
  if (HZ_UNLIKELY(hz_fast_block_index(bin, page, p) >= page->capacity)) {
    hz_heap_bad_free(page, p);
    return;
  }
  if (HZ_LIKELY(hz_check_freeing_fast(p))) {
    hz_fast_bin_put(heap, bin, top, page, p);
    return;
  }
  hz_thread_free_slow(p, heap, seg, page);
}

#endif
