/* heap_spill: blocks leaving a bin. A full bin's older half, a bin given
 * back whole: the heap's own blocks onto their pages (bits set, counts
 * lowered), the shared pages' to the ladder or home to their class heap
 * through the stash; and the per-class counts the slow paths publish. */
#include <string.h>

#include "heap_parts.h"
#include "stats.h"

/* A block of the shared pages (class_heap.h) leaves a bin for its class
 * heap: through the stash, as a thread without the ladder would
 * send it; whoever holds the class's lock sets its bit. */
HZ_NOINLINE void hz_heap_send_home(hz_heap_t *heap, hz_page_t *page,
                                   hz_block_t *block) {
  uint8_t cls = page->class_id; /* the page may go once the block is home */
  const hz_page_t *run_page = heap->stash.run_page;
  unsigned published =
      hz_remote_stash(&heap->stash, &hz_page_owner(page)->inbox, block, page);
  if (heap->stash.run_page != run_page) hz_heap_note_run(heap, cls, true);
  if (published != 0)
    HZ_SHARED_ADD(heap->pages.stats.batches_published, published);
  HZ_SHARED_ADD(heap->pages.stats.bin_blocks_sent, 1);
}

/* Put a block of ours (a block start) back on its page. `marked`: the
 * program freed it (hz_page_put_index); one that holds no mark, never
 * handed out, is carved again later instead when it is the page's last
 * carved (hz_page_uncarve). A block whose bit is set already was freed
 * twice: reported, and not counted again. */
HZ_INLINE void page_put(hz_heap_t *heap, hz_page_t *page, hz_block_t *block,
                        bool marked) {
  if (!(!marked && hz_page_uncarve(page, block)) &&
      !hz_page_put_index(page, hz_page_index(page, block), marked)) {
    hz_heap_double_free(page, block);
    return;
  }
  hz_pages_returned(&heap->pages, page, 1);
}

/* A block of a bin goes back: onto its page, or, a block of the shared
 * pages, home through the stash. */
HZ_INLINE void bin_block_put(hz_heap_t *heap, hz_page_t *page,
                             hz_block_t *block, bool marked) {
  if (HZ_UNLIKELY(hz_page_owner(page) != &heap->pages))
    hz_heap_send_home(heap, page, block);
  else
    page_put(heap, page, block, marked);
}

void hz_heap_page_put(hz_heap_t *heap, hz_page_t *page, hz_block_t *block,
                      bool marked) {
  bin_block_put(heap, page, block, marked);
}

/* A bin's blocks[0..n) go back, as bin_block_put does one by one, with
 * the page they are on kept in registers: a block of the page the last
 * was on costs a range check, its index and its bit, and a run of one
 * page's blocks is counted off its `used` in one step (a bin's blocks
 * mostly come from a few pages, in runs). The shared pages' blocks go into
 * out[] when it is given (how many is returned), else home. */
static unsigned heap_put_blocks(hz_heap_t *heap, void *const *blocks, size_t n,
                                bool marked, void **out) {
  hz_page_t *page = NULL;
  uintptr_t start = 0, area = 0;
  uint32_t back = 0;
  unsigned shared = 0;
  bool ours = true;
  for (size_t i = 0; i < n; i++) {
    hz_block_t *block = blocks[i];
    if ((uintptr_t)block - start >= area) {
      if (page != NULL && ours) hz_pages_returned(&heap->pages, page, back);
      page = hz_segment_block_page(block);
      start = (uintptr_t)hz_page_start(page);
      area = hz_page_area(page);
      ours = hz_page_owner(page) == &heap->pages;
      back = 0;
    }
    if (HZ_UNLIKELY(!ours)) {
      if (out != NULL)
        out[shared++] = hz_entry_of(block, marked);
      else
        hz_heap_send_home(heap, page, block);
    } else if ((!marked && hz_page_uncarve(page, block)) ||
               hz_page_put_index(page, hz_page_index(page, block), marked)) {
      back++;
    } else {
      hz_heap_double_free(page, block);
    }
  }
  if (page != NULL && ours) hz_pages_returned(&heap->pages, page, back);
  return shared;
}

/* The `n` oldest blocks of a bin leave it (see heap_put_blocks). Those
 * below fresh_end, which it never handed out and which hold no mark, go
 * back uncarved where they can: they come highest address first, each the
 * last carved, so memory its thread never touched stays so. */
HZ_INLINE unsigned bin_spill(hz_heap_t *heap, hz_bin_t *bin, size_t n,
                             void **out) {
  if (n == 0) return 0; /* a class heap's bins of other classes: none */
  size_t fresh = (size_t)(bin->fresh_end - bin->base);
  if (fresh > n) fresh = n;
  unsigned shared = 0;
  if (HZ_UNLIKELY(fresh != 0))
    shared = heap_put_blocks(heap, bin->base, fresh, false, out);
  shared += heap_put_blocks(heap, bin->base + fresh, n - fresh, true,
                            out == NULL ? NULL : out + shared);
  size_t left = hz_bin_count(bin) - n;
  memmove(bin->base, bin->base + n, left * sizeof bin->base[0]);
  bin->top = bin->base + left;
  bin->fresh_end -= fresh;
  hz_bin_moved(bin, -(int64_t)n);
  HZ_ASSERT(bin->top >= bin->base && bin->top <= bin->limit);
  HZ_ASSERT(bin->fresh_end >= bin->base && bin->fresh_end <= bin->top);
  return shared;
}

/* Return every block of a bin, fresh ones it never handed out uncarved:
 * a heap given back whole writes nothing into memory its thread never
 * touched (10,000 exiting threads faulted in 700 MiB linking them). */
void hz_heap_bin_empty(hz_heap_t *heap, hz_bin_t *bin) {
  bin_spill(heap, bin, hz_bin_count(bin), NULL);
}

/* Publish the bin's counts of class `cls` for other threads to read, and
 * the thread's live count to the process-wide one once it has moved by
 * LIVE_PUBLISH_BYTES (and at least LIVE_PUBLISH_STEP blocks), so the peak
 * stays close while the shared counter, which every thread of the class
 * adds to, is touched rarely. Both on slow paths only: the fast paths
 * count in the bin. */
#define LIVE_PUBLISH_STEP  64
#define LIVE_PUBLISH_BYTES ((int64_t)64 << 10)

HZ_NOINLINE void hz_bin_publish(const hz_bin_t *bin, hz_class_counts_t *counts,
                                uint8_t cls, bool always,
                                hz_heap_stats_t *stats) {
  uint64_t allocs = hz_bin_allocs(bin); /* read before the stores below */
  uint64_t frees = hz_bin_frees(bin) + counts->remote_frees;
  HZ_SHARED_SET(counts->allocs, allocs);
  HZ_SHARED_SET(counts->frees, frees);
  int64_t net = (int64_t)(allocs - frees);
  int64_t delta = net - counts->published;
  int64_t moved = delta < 0 ? -delta : delta;
  if (moved == 0) return; /* a thread's exit publishes every class */
  if (!always &&
      (moved < LIVE_PUBLISH_STEP ||
       moved * (int64_t)hz_sizeclass_block_size(cls) < LIVE_PUBLISH_BYTES))
    return;
  counts->published = net;
  HZ_SHARED_ADD(stats->live_publishes, 1);
  hz_stats_add_live(cls, delta);
}

void hz_heap_publish_counts(hz_heap_t *heap, uint8_t cls, bool always) {
  hz_heap_settle_run(heap);
  hz_bin_publish(&heap->bins[cls], &heap->counts[cls], cls, always,
                 &heap->pages.stats);
}

unsigned hz_heap_free_spilling(hz_heap_t *heap, hz_page_t *page, void *p,
                               void **out) {
  uint8_t cls = page->class_id;
  hz_heap_enter(heap);
  hz_bin_t *bin = &heap->bins[cls];
  unsigned shared = 0;
  if (bin->top == bin->limit)
    shared = bin_spill(heap, bin, (hz_bin_capacity(bin) + 1) / 2, out);
  *bin->top++ = p;
  hz_heap_publish_counts(heap, cls, false);
  hz_heap_leave(heap);
  return shared;
}

void hz_heap_free_full_bin(void *p, hz_heap_t *heap, hz_page_t *page) {
  hz_heap_free_spilling(heap, page, p, NULL);
}

/* The ladder's entries[0..n) home (the heap entered). */
void hz_heap_send_entries(hz_heap_t *heap, void *const *entries, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    void *block = hz_entry_block(entries[i]);
    hz_heap_send_home(heap, hz_segment_block_page(block), block);
  }
}

void hz_heap_send_shared(hz_heap_t *heap, void *const *blocks, unsigned n) {
  if (n == 0) return;
  hz_heap_enter(heap);
  hz_heap_send_entries(heap, blocks, n);
  hz_heap_leave(heap);
}

void hz_heap_bad_free(const hz_page_t *page, const void *p) {
  hz_check_fail("invalid free (not at the start of a block)", p, page->class_id,
                page->block_size);
}

void hz_heap_publish_stash(hz_heap_t *heap) {
  HZ_SHARED_ADD(heap->pages.stats.batches_published,
                hz_remote_flush(&heap->stash));
}
