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
 * the shared pages (central box: a refill from them or the ladder, or any
 * thread's free), which a spill hands to the ladder or sends to their
 * class heap through the stash; a page with no block in use is flagged
 * retired (kept empty in its class queue, or spare) or back in its
 * segment. */
#include "heap_parts.h"

#include <stdatomic.h>
#include <string.h>

#include "guard.h"
#include "large.h"
#include "list.h"
#include "options.h"
#include "os.h"
#include "prof.h"
#include "purge.h"
#include "route.h"

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

/* The next sample of the bin's class after `skip` more blocks. */
static void heap_sample_after(hz_bin_t *bin, uint64_t skip) {
  uint64_t allocs = hz_bin_allocs(bin);
  bin->sample_left = skip;
  bin->alloc_mark = allocs + skip;
}

/* The next turn of the profiler (which has it when on) or the guard. */
static uint64_t heap_sample_gap(uint8_t cls) {
  if (hz_prof_active)
    return hz_prof_blocks_to_skip(hz_sizeclass_block_size(cls));
  return hz_guard_blocks_to_skip();
}

/* The guard's classes: those that serve requests it takes. */
static bool heap_guard_class(uint8_t cls) {
  return hz_sizeclass_block_size((uint8_t)(cls - 1)) < hz_guard_max_size();
}

void hz_heap_arm_sampling(hz_heap_t *heap) {
  for (uint8_t c = 1; c < HZ_CLASS_COUNT; c++)
    if (hz_prof_active || heap_guard_class(c))
      heap_sample_after(&heap->bins[c], heap_sample_gap(c));
}

/* Only the bin of its class: threads without a heap malloc from it (the
 * central box's lock held), counted and sampled as any heap's. The class
 * heaps of blocks up to 16 KiB (pages of one or two slices) cut their
 * pages from one set, not one each: rptest's shared classes
 * mapped 54-66 MB with it against 142-155 MB. Wider pages take 8 or 32
 * slices of one region, which a set shared with small pages rarely frees
 * whole: with them in it, mt_remote 16 B-128 KiB T4 held 22-35% more
 * (results/2026-11-28-issue78/one-set.md), so their heaps keep their own. */
void hz_heap_init_shared(hz_heap_t *heap, uint8_t cls, hz_segment_set_t *set) {
  heap_bin_init(heap, cls);
  heap->state = HZ_HEAP_SHARED;
  hz_page_kind_t kind = hz_segment_kind_for(hz_sizeclass_block_size(cls));
  heap->pages.cuts_from = kind <= HZ_KIND_MEDIUM ? set : &heap->pages.segments;
  heap->pages.empty_quarters = 4 / HZ_HEAP_SHARED_EMPTY_DIVISOR;
  if (hz_prof_active || (hz_guard_active && heap_guard_class(cls)))
    heap_sample_after(&heap->bins[cls], heap_sample_gap(cls));
}

static void heap_move_to_front(hz_page_queue_t *q, hz_page_t *page) {
  if (page == q->first) return;
  hz_queue_remove(q, page);
  hz_queue_push_front(q, page);
}

/* A batch at the bin's top: its `n` first blocks, which hold no mark,
 * join those below fresh_end (each swapped with the block there), so a
 * bin filled from several pages keeps them all below it. */
HZ_INLINE void bin_hold_unmarked(hz_bin_t *bin, void **batch, uint32_t n) {
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
HZ_INLINE uint32_t page_room(const hz_page_t *page) {
  return (uint32_t)page->reserved - page->tally->used;
}

/* A page of class `cls` with a free block or room to carve one, now first
 * in its queue. Refills stay on the first page until it runs out (its
 * blocks come out in address order); then they move to the fullest of the
 * next FIND_SCAN pages (fewest blocks left to hand out), so sparse pages
 * empty and go back, and memory held tracks memory live. Pages with
 * nothing left move to `full`. A fresh page is cut only when no page has
 * room. */
HZ_INLINE hz_page_t *pages_find(hz_pages_t *pages, uint8_t cls) {
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
    } else if (best == NULL || page_room(page) < page_room(best)) {
      best = page;
    }
    page = next;
  }
  if (best != NULL) {
    heap_move_to_front(q, best);
    return best;
  }
  page = hz_pages_new_page(pages, cls);
  if (page != NULL) hz_queue_push_front(q, page);
  return page;
}

/* A refill took blocks off a page with notes: kept empty, it is in use
 * again; purged (HZ_PAGE_PURGED), the flag goes once no free block is
 * left on it. One test of both on every refill. */
static HZ_NOINLINE void pages_refilled_noted(hz_pages_t *pages,
                                             hz_page_t *page) {
  if (page->emptied) hz_pages_unempty(pages, page);
  if (page->purged) hz_page_purged_refilled(page);
}

/* Fill the empty bin of `cls` up to half way from one page (the one
 * pages_find chooses, which has room: at least one block), the lowest
 * address on top: malloc hands blocks out in address order, which
 * hardware prefetchers follow. (Going on to the next fullest page when the
 * first runs out halved the slow paths of mt_remote main R90/T4 but bought
 * no speed there, and cost 10% on batch_queue 2x2-8-2048, 11 runs. A
 * software prefetch of each block for writing bought nothing measurable on
 * batch_queue, random_mixed, string_builder or json, 5 runs each. Both
 * were dropped.) False if out of memory. */
HZ_INLINE uint32_t pages_refill(hz_pages_t *pages, hz_bin_t *bin, uint8_t cls,
                                uint32_t want) {
  hz_page_t *page = pages_find(pages, cls);
  if (page == NULL) return 0;
  uint32_t unmarked;
  uint32_t taken = hz_page_take(page, bin->top, want, &unmarked);
  HZ_ASSERT(taken > 0);
  bin_hold_unmarked(bin, bin->top, unmarked);
  bin->top += taken;
  hz_bin_moved(bin, taken);
  if (page->tally->used == 0) pages->busy_bytes += hz_page_area(page);
  HZ_SHARED_SET(page->tally->used, (uint16_t)(page->tally->used + taken));
  if (HZ_UNLIKELY(page->refill_notes)) pages_refilled_noted(pages, page);
  hz_page_check(page);
  return taken;
}

/* The block the countdown reached 0 on (it is counted): the profiler
 * records it; the guard's turn passed (its pool was full or the size too
 * large). */
static void *heap_sampled(hz_heap_t *heap, void *block, size_t size) {
  hz_page_t *page = hz_segment_block_page(block);
  hz_bin_t *bin = &heap->bins[page->class_id];
  heap_sample_after(bin, heap_sample_gap(page->class_id));
  if (hz_prof_active && hz_prof_record(block, size, page->block_size, page))
    hz_page_set_flag(page, HZ_PAGE_SAMPLED, true);
  return block;
}

/* The guard's turn in `bin` (this malloc not counted yet): a guarded
 * block, the countdown started again; NULL: the bin serves it. */
static void *heap_guarded(hz_bin_t *bin, size_t size) {
  void *guarded = hz_guard_malloc(size);
  if (guarded != NULL) heap_sample_after(bin, hz_guard_blocks_to_skip());
  return guarded;
}

HZ_NOINLINE void *hz_heap_malloc_sampled(hz_heap_t *heap, hz_bin_t *bin,
                                         size_t size) {
  unsigned cls = (unsigned)(bin - heap->bins);
  return heap_sampled(heap, hz_bin_take(bin, bin->top, cls), size);
}

/* The emptiest page of the class (last in its queue) goes if it has been
 * empty for HZ_HEAP_EMPTY_AGE of the heap's slow paths: kept pages absorb
 * a class's ups and downs, and memory held follows memory live as the
 * heap goes on. One look per malloc slow path. */
static void pages_age_empty(hz_pages_t *pages, uint8_t cls) {
  hz_page_t *last = pages->queues[cls].last;
  if (last == NULL || !last->emptied || last == pages->queues[cls].first)
    return;
  uint32_t now = atomic_load_explicit(&pages->activity, memory_order_relaxed);
  if (now - last->emptied_at >= HZ_HEAP_EMPTY_AGE) hz_pages_retire(pages, last);
}

/* Where a bin's refill comes from: the heap's own pages (shared NULL; with
 * `probe`, a shared class's probe: route.h), the class heap
 * under its lock (with `probed`, it takes probes), or blocks the ladder
 * held. */
typedef struct {
  hz_heap_t *shared;
  hz_lock_t *lock;
  bool probed, probe;
  void *const *given;
  unsigned given_count;
} refill_from_t;

/* Half the bin, or a whole one when no free came into a bin of small
 * blocks since its last refill (a class the thread only allocates); a
 * class heap's own bin serves threads without a heap one block at a time
 * and keeps none for them. */
static uint32_t heap_own_want(hz_heap_t *heap, hz_bin_t *bin, uint8_t cls) {
  uint32_t room = (uint32_t)hz_bin_capacity(bin);
  if (heap->state == HZ_HEAP_SHARED) return 1;
  bool only_mallocs = false;
  if (room == HZ_BIN_SLOTS) {
    uint64_t frees = hz_bin_frees(bin);
    only_mallocs = frees == heap->refill_frees[cls];
    heap->refill_frees[cls] = frees;
  }
  return only_mallocs ? room : room / 2;
}

bool hz_heap_probe_turn(hz_heap_t *heap, uint8_t cls) {
  if (++heap->shared_fills[cls] < HZ_ROUTE_PROBE_EVERY) return false;
  heap->shared_fills[cls] = 0;
  return true;
}

/* The bin of `cls` is empty: fill it from where `from` says; from the own
 * pages half way (see heap_own_want), from the shared pages whole, from as
 * many pages as it takes, under the class's lock, taken once a bin. The
 * class heap counts as active, takes its inbox home first and ages its
 * kept pages, as an owner's slow path does. */
HZ_INLINE bool heap_fill_bin(hz_heap_t *heap, hz_bin_t *bin, uint8_t cls,
                             const refill_from_t *from) {
  HZ_ASSERT(bin->top == bin->base);
  hz_heap_t *shared = from->shared;
  if (shared == NULL) {
    if (!from->probe) heap->pages.keeps_none[cls] = false;
    uint32_t taken =
        pages_refill(&heap->pages, bin, cls, heap_own_want(heap, bin, cls));
    HZ_SHARED_ADD(heap->counts[cls].handed, taken);
    if (from->probe) hz_heap_keep_for_probes(heap, cls);
    return taken != 0;
  }
  if (!hz_heap_refills_shared(heap, cls)) hz_heap_turn_shared(heap, cls);
  uint32_t room = (uint32_t)hz_bin_capacity(bin);
  hz_pages_t *pages = &shared->pages;
  hz_lock(from->lock);
  hz_pages_note_active(pages);
  if (hz_remote_pending(&pages->inbox)) hz_pages_drain_inbox(pages);
  pages_age_empty(pages, cls);
  hz_heap_lend_pages(heap, pages, cls, from->probed);
  uint32_t taken = 0, got;
  while (taken < room && (got = pages_refill(pages, bin, cls, room - taken)))
    taken += got;
  hz_unlock(from->lock);
  return taken != 0;
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
  bin_hold_unmarked(bin, batch, unmarked);
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
    void *guarded = heap_guarded(bin, size);
    if (guarded != NULL) {
      hz_heap_leave(heap);
      return guarded;
    }
  }
  hz_heap_flush_stash(heap);
  if (hz_heap_has_incoming(heap)) hz_heap_drain_inbox(heap);
  void *block = NULL;
  pages_age_empty(&heap->pages, cls);
  if (bin->top != bin->base || heap_fill_bin(heap, bin, cls, from)) {
    bin->sample_left--;
    block = hz_bin_take(bin, bin->top, cls);
    hz_heap_publish_counts(heap, cls, false);
  }
  hz_heap_leave(heap);
  if (HZ_UNLIKELY(bin->sample_left == 0) && block != NULL)
    return heap_sampled(heap, block, size);
  return block;
}

void *hz_heap_malloc_small(hz_heap_t *heap, size_t size) {
  const refill_from_t own = {0};
  return heap_malloc(heap, size, &own);
}

void *hz_heap_malloc_shared(hz_heap_t *heap, size_t size, hz_heap_t *shared,
                            hz_lock_t *lock, bool probed) {
  const refill_from_t from = {.shared = shared, .lock = lock, .probed = probed};
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
