/* heap: a heap's bins and pages, and the malloc slow path behind the
 * inline fast path (fast.h): refilling a bin from one page (the class's
 * current one, else its fullest; free blocks lowest address first, then
 * fresh ones carved), spilling a full bin back onto its pages, empty and
 * spare pages, publishing the per-class counts, and taking the inbox home
 * as bits set on the blocks' pages. Frees the fast
 * path leaves are heap_free.c's; the collection of idle heaps is
 * heap_collect.c's.
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

/* Bins empty and without room: every call takes the slow path. */
const hz_heap_t hz_heap_empty = {.state = HZ_HEAP_EMPTY};
uintptr_t hz_heap_shared_base;
size_t hz_heap_shared_span;

void hz_heap_set_shared_range(const void *base, size_t span) {
  HZ_SHARED_SET(hz_heap_shared_base, (uintptr_t)base);
  HZ_SHARED_SET(hz_heap_shared_span, span);
}

HZ_TLS hz_heap_t *hz_heap_tls = (hz_heap_t *)&hz_heap_empty;
HZ_TLS hz_heap_t *hz_heap_own;

/* ---------------------------------------------------------------------------
 * Page queues
 * ------------------------------------------------------------------------- */
#ifdef HZ_DEBUG
/* After every queue change: the ends, and the links around `page`. */
static void queue_check(const hz_page_queue_t *q, const hz_page_t *page) {
  HZ_ASSERT((q->first == NULL) == (q->last == NULL));
  HZ_ASSERT(q->first == NULL || q->first->prev == NULL);
  HZ_ASSERT(q->last == NULL || q->last->next == NULL);
  if (page == NULL) return;
  HZ_ASSERT(page->next == NULL || page->next->prev == page);
  HZ_ASSERT(page->prev == NULL || page->prev->next == page);
}
#else
#define queue_check(q, page) ((void)(q), (void)(page))
#endif

static void queue_push_front(hz_page_queue_t *q, hz_page_t *page) {
  HZ_LIST_PUSH_FRONT(q, first, last, page, next, prev);
  queue_check(q, page);
}

static void queue_push_back(hz_page_queue_t *q, hz_page_t *page) {
  HZ_LIST_PUSH_BACK(q, first, last, page, next, prev);
  queue_check(q, page);
}

static void queue_remove(hz_page_queue_t *q, hz_page_t *page) {
  hz_page_t *before = page->prev;
  HZ_LIST_REMOVE(q, first, last, page, next, prev);
  queue_check(q, before);
}

/* `page` right behind the queue's first (the page refills take from),
 * where the next choice of a page looks first. */
static void queue_push_second(hz_page_queue_t *q, hz_page_t *page) {
  hz_page_t *first = q->first;
  if (first != NULL) queue_remove(q, first);
  queue_push_front(q, page);
  if (first != NULL) queue_push_front(q, first);
}

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
  heap->cuts_from = &heap->segments;
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
  heap->cuts_from = kind <= HZ_KIND_MEDIUM ? set : &heap->segments;
  if (hz_prof_active || (hz_guard_active && heap_guard_class(cls)))
    heap_sample_after(&heap->bins[cls], heap_sample_gap(cls));
}

/* ---------------------------------------------------------------------------
 * Spare pages
 * ------------------------------------------------------------------------- */
static const uint8_t spare_max[HZ_HEAP_SPARE_KINDS] = {
    [HZ_KIND_SMALL] = 4,  /* 256 KiB */
    [HZ_KIND_MEDIUM] = 2, /* 256 KiB */
    [HZ_KIND_WIDE] = 2,   /* 1 MiB */
    [HZ_KIND_BIG] = 1,
};

static hz_page_kind_t page_kind(const hz_page_t *page) {
  return hz_segment_kind_for(page->block_size);
}

/* The page is the one the samples of its class take from (route.h): the
 * first of its class queue, and the last refill from it was a sample's. */
static bool page_for_samples(const hz_heap_t *heap, const hz_page_t *page) {
  return page->for_samples && page == heap->queues[page->class_id].first;
}

/* The heap's bins of the page's class refill from the shared pages
 * (central box): its own pages of the class only empty now, and it keeps
 * none, but for the one its samples take from. */
static bool page_only_empties(const hz_heap_t *heap, const hz_page_t *page) {
  return heap->refills_shared[page->class_id] &&
         !page_for_samples(heap, page);
}

/* ---------------------------------------------------------------------------
 * Lent pages
 *
 * When a class turns shared, a thread's own pages of it would only empty
 * as the program freed their blocks, while the class heap cut pages for
 * the blocks it hands out in their place: the live set faulted in twice,
 * and every page that empties given back with a call to the kernel
 * (exchange: 11,300 faults and 331 madvise calls against 7,000 and 48 with
 * every class shared from the start). So at the thread's next refill from
 * the class heap (under the class's lock), its pages of the class are lent
 * whole to the class heap, free blocks and blocks in use alike: the owner
 * word changes, flags and all, and the class heap's refills take their
 * free blocks before they cut a page; pages that empty before then are
 * kept for it. The page the class's samples take from stays (route.h):
 * the samples are what its blocks do on the thread's own pages (keeping
 * the page in use at the turn held 5 MiB of exchange's peak). A block
 * freed before the page changed hands may still reach the thread's inbox:
 * its drain sends it on to the class heap. A page's slices go back into
 * its segment only by the owner of the segment's set, so the class heap
 * hands a lent page it no longer keeps (no block in use) back to that heap
 * (`returned`), whose next slow path or collection gives it back to the
 * kernel; a heap with a page out (`lent`) is not retired, its set being
 * where the page goes back.
 * ------------------------------------------------------------------------- */
static hz_heap_t *heap_of_set(hz_segment_set_t *set) {
  return (hz_heap_t *)(void *)((char *)set - offsetof(hz_heap_t, segments));
}

/* A lent page with no live block onto its lender's `returned`: flagged
 * retired (a free to it is reported) until the lender frees it. */
static void lent_page_return(hz_page_t *page) {
  hz_heap_t *lender = heap_of_set(hz_segment_set_of_page(page));
  hz_page_set_flag(page, HZ_PAGE_RETIRED, true);
  hz_page_t *head =
      atomic_load_explicit(&lender->returned, memory_order_relaxed);
  do {
    page->next = head;
  } while (!atomic_compare_exchange_weak_explicit(
      &lender->returned, &head, page, memory_order_release,
      memory_order_relaxed));
}

void hz_heap_take_returned(hz_heap_t *heap) {
  if (atomic_load_explicit(&heap->returned, memory_order_relaxed) == NULL)
    return;
  hz_page_t *page =
      atomic_exchange_explicit(&heap->returned, NULL, memory_order_acquire);
  while (page != NULL) {
    hz_page_t *next = page->next;
    hz_segment_page_give_back(page);
    atomic_fetch_sub_explicit(&heap->lent, 1, memory_order_relaxed);
    page = next;
  }
}

/* `page` (no live block) back to its segment, its memory at once or a
 * purge delay later; a lent one to its lender. */
static void heap_page_give(hz_page_t *page, bool at_once) {
  if (page->lent)
    lent_page_return(page);
  else if (at_once)
    hz_segment_page_give_back(page);
  else
    hz_segment_page_free(page);
}

/* Keep an empty page for reuse, or give it back to its segment. A spare
 * page is flagged retired: the free fast path leaves it to the generic
 * path, which reports any free to it (all its blocks are free already). */
static void heap_spare_push(hz_heap_t *heap, hz_page_t *page) {
  hz_page_kind_t kind = page_kind(page);
  if (page_only_empties(heap, page) || heap->gone) {
    heap_page_give(page, true);
    return;
  }
  if (heap->spare_count[kind] >= spare_max[kind]) {
    heap_page_give(page, false);
    return;
  }
  hz_page_set_flag(page, HZ_PAGE_RETIRED, true);
  page->prev = NULL;
  page->next = heap->spare[kind];
  heap->spare[kind] = page;
  heap->spare_count[kind]++;
  HZ_SHARED_ADD(heap->kept_bytes, hz_page_area(page));
}

/* A spare page of `kind`, preferring one already cut for `cls`. */
static hz_page_t *heap_spare_take(hz_heap_t *heap, hz_page_kind_t kind,
                                  uint8_t cls) {
  hz_page_t **link = &heap->spare[kind];
  if (*link == NULL) return NULL;
  while (*link != NULL && (*link)->class_id != cls)
    link = &(*link)->next;
  if (*link == NULL) link = &heap->spare[kind];
  hz_page_t *page = *link;
  *link = page->next;
  page->next = NULL;
  heap->spare_count[kind]--;
  HZ_SHARED_SET(heap->kept_bytes, heap->kept_bytes - hz_page_area(page));
  hz_page_set_flag(page, HZ_PAGE_RETIRED, false);
  return page;
}

/* Every spare page back to its segment; false when there was none. */
static bool heap_spares_free(hz_heap_t *heap) {
  bool any = false;
  for (int kind = 0; kind < HZ_HEAP_SPARE_KINDS; kind++) {
    while (heap->spare[kind] != NULL) {
      hz_page_t *page = heap->spare[kind];
      heap->spare[kind] = page->next;
      HZ_SHARED_SET(heap->kept_bytes, heap->kept_bytes - hz_page_area(page));
      heap_page_give(page, false);
      any = true;
    }
    heap->spare_count[kind] = 0;
  }
  return any;
}

void hz_heap_spare_release(hz_heap_t *heap) {
  heap_spares_free(heap);
  hz_segment_set_trim(heap->cuts_from);
}

/* ---------------------------------------------------------------------------
 * Freeing
 * ------------------------------------------------------------------------- */
/* An empty page kept in its class queue takes blocks again, or goes. */
static void heap_unempty(hz_heap_t *heap, hz_page_t *page) {
  page->emptied = 0;
  hz_page_set_flag(page, HZ_PAGE_RETIRED, false);
  heap->empty_bytes -= hz_page_area(page);
  HZ_SHARED_SET(heap->kept_bytes, heap->kept_bytes - hz_page_area(page));
}

void hz_heap_retire_page(hz_heap_t *heap, hz_page_t *page) {
  if (page->emptied) heap_unempty(heap, page);
  queue_remove(page->in_full ? &heap->full : &heap->queues[page->class_id],
               page);
  HZ_SHARED_ADD(heap->stats.pages_retired, 1);
  heap_spare_push(heap, page);
}

/* The most bytes of empty pages the heap keeps now: a share of its pages
 * in use, so a heap that churns many pages keeps enough of them to take
 * back, and one whose memory goes (a phase ends, a burst is freed) gives
 * it back as it goes. */
static size_t heap_empty_budget(const hz_heap_t *heap) {
  size_t share = HZ_SHARED_GET(heap->state) == HZ_HEAP_SHARED
                     ? heap->busy_bytes / HZ_HEAP_SHARED_EMPTY_DIVISOR
                     : heap->busy_bytes * HZ_HEAP_EMPTY_RATIO;
  return share > HZ_HEAP_EMPTY_BYTES ? share : HZ_HEAP_EMPTY_BYTES;
}

/* Retire kept empty pages, the emptiest of a class at a time (each class
 * queue ends with its kept pages), until at most `budget` bytes are kept. */
static void heap_trim_empty(hz_heap_t *heap, size_t budget) {
  for (int c = 1; c < HZ_CLASS_COUNT && heap->empty_bytes > budget; c++) {
    hz_page_queue_t *q = &heap->queues[c];
    while (heap->empty_bytes > budget && q->last != NULL &&
           q->last != q->first && q->last->emptied)
      hz_heap_retire_page(heap, q->last);
  }
}

/* `page`, empty, in its class queue: kept, the emptiest, last in line. */
static void heap_keep_emptied(hz_heap_t *heap, hz_page_t *page) {
  hz_page_queue_t *q = &heap->queues[page->class_id];
  size_t area = hz_page_area(page);
  page->emptied = 1;
  page->emptied_at =
      atomic_load_explicit(&heap->activity, memory_order_relaxed);
  heap->empty_bytes += area;
  HZ_SHARED_ADD(heap->kept_bytes, area);
  hz_page_set_flag(page, HZ_PAGE_RETIRED, true); /* a free to it: reported */
  if (q->first != page && q->last != page) {
    queue_remove(q, page);
    queue_push_back(q, page);
  }
}

/* A page whose blocks all came back stays in its class queue, last in line
 * (the refills take it before they cut a fresh page), until it has been
 * empty for HZ_HEAP_EMPTY_AGE of the heap's slow paths (heap_age_empty),
 * while the heap keeps no more such pages than heap_empty_budget; a
 * collection takes them all. Retired at once, pages churned: a producer
 * whose consumers send whole batches home empties the pages it filled
 * together (batch_queue 2x2-8-2048: 21,000 pages cut, 3,000 with 4 MiB
 * kept), and a heap whose blocks of 64-128 KiB come home from other
 * threads (mt_remote cross128 R90/T4) cut 6,000 pages with 4 MiB kept,
 * faulting their memory in again and again (0.6 of the speed and 1.7
 * times the peak RSS of keeping them). A fixed larger bound churned less
 * but held memory freed in small pages from wide ones, and 64 MiB freed
 * to an idle owner past 200 ms (the reuse, purge and exited tests): the
 * share of pages in use follows both. The page refills take from stays
 * regardless. A kept page is flagged retired like a spare one: no block
 * of it is live, so the free fast path leaves any free to it to the
 * generic path, which reports a double free. */
static void heap_page_emptied(hz_heap_t *heap, hz_page_t *page) {
  hz_page_queue_t *q = &heap->queues[page->class_id];
  size_t area = hz_page_area(page);
  heap->busy_bytes -= area;
  size_t budget = heap_empty_budget(heap);
  if (q->first != page && heap->empty_bytes + area > budget) {
    hz_heap_retire_page(heap, page);
    heap_trim_empty(heap, budget);
    return;
  }
  heap_keep_emptied(heap, page);
}

/* A page leaves the full queue with a few blocks back: among the fullest
 * of its class, so it goes right behind the page refills take from, where
 * the next choice looks first. */
static void heap_unfull(hz_heap_t *heap, hz_page_t *page) {
  queue_remove(&heap->full, page);
  page->in_full = 0;
  queue_push_second(&heap->queues[page->class_id], page);
}

/* `n` blocks of the page came back (their bits set): the page leaves the
 * full queue, and once all its blocks are free it is kept empty or goes
 * (heap_page_emptied). */
HZ_INLINE void heap_page_returned(hz_heap_t *heap, hz_page_t *page,
                                  uint32_t n) {
  if (n == 0) return;
  HZ_SHARED_SET(page->tally->used, (uint16_t)(page->tally->used - n));
  if (page->in_full) heap_unfull(heap, page);
  hz_page_check(page);
  if (page->tally->used == 0) heap_page_emptied(heap, page);
}

/* A block of the shared pages (central box) leaves a bin for their
 * class's heap: through the stash, as a thread without the ladder would
 * send it; whoever holds the class's lock sets its bit. */
static HZ_NOINLINE void heap_send_home(hz_heap_t *heap, hz_page_t *page,
                                       hz_block_t *block) {
  uint8_t cls = page->class_id; /* the page may go once the block is home */
  const hz_page_t *run_page = heap->stash.run_page;
  unsigned published =
      hz_remote_stash(&heap->stash, &hz_page_heap(page)->inbox, block, page);
  if (heap->stash.run_page != run_page) hz_heap_note_run(heap, cls, true);
  if (published != 0) HZ_SHARED_ADD(heap->stats.batches_published, published);
  HZ_SHARED_ADD(heap->stats.bin_blocks_sent, 1);
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
  heap_page_returned(heap, page, 1);
}

/* A block of a bin goes back: onto its page, or, a block of the shared
 * pages, home through the stash. */
HZ_INLINE void bin_block_put(hz_heap_t *heap, hz_page_t *page,
                             hz_block_t *block, bool marked) {
  if (HZ_UNLIKELY(hz_page_heap(page) != heap))
    heap_send_home(heap, page, block);
  else
    page_put(heap, page, block, marked);
}

void hz_heap_page_put(hz_heap_t *heap, hz_page_t *page, hz_block_t *block,
                      bool marked) {
  bin_block_put(heap, page, block, marked);
}

static size_t bin_capacity_of(const hz_bin_t *bin) {
  return (size_t)(bin->limit - bin->base);
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
      if (page != NULL && ours) heap_page_returned(heap, page, back);
      page = hz_segment_block_page(block);
      start = (uintptr_t)hz_page_start(page);
      area = hz_page_area(page);
      ours = hz_page_heap(page) == heap;
      back = 0;
    }
    if (HZ_UNLIKELY(!ours)) {
      if (out != NULL)
        out[shared++] = hz_entry_of(block, marked);
      else
        heap_send_home(heap, page, block);
    } else if ((!marked && hz_page_uncarve(page, block)) ||
               hz_page_put_index(page, hz_page_index(page, block), marked)) {
      back++;
    } else {
      hz_heap_double_free(page, block);
    }
  }
  if (page != NULL && ours) heap_page_returned(heap, page, back);
  return shared;
}

/* The `n` oldest blocks of a bin leave it (see heap_put_blocks). Those
 * below fresh_end, which it never handed out and which hold no mark, go
 * back uncarved where they can: they come highest address first, each the
 * last carved, so memory its thread never touched stays so. */
HZ_INLINE unsigned bin_spill(hz_heap_t *heap, hz_bin_t *bin, size_t n,
                             void **out) {
  if (n == 0) return 0; /* a shared heap's bins of other classes: none */
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

/* Return the `n` oldest blocks of a bin to their pages. */
void hz_heap_bin_spill(hz_heap_t *heap, hz_bin_t *bin, size_t n) {
  bin_spill(heap, bin, n, NULL);
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

void hz_heap_publish_counts(hz_heap_t *heap, uint8_t cls, bool always) {
  hz_heap_settle_run(heap);
  hz_bin_t *bin = &heap->bins[cls];
  hz_class_counts_t *counts = &heap->counts[cls];
  HZ_SHARED_SET(counts->allocs, hz_bin_allocs(bin));
  uint64_t frees = hz_bin_frees(bin) + counts->remote_frees;
  HZ_SHARED_SET(counts->frees, frees);
  int64_t net = (int64_t)(hz_bin_allocs(bin) - frees);
  int64_t delta = net - counts->published;
  int64_t moved = delta < 0 ? -delta : delta;
  if (moved == 0) return; /* a thread's exit publishes every class */
  if (!always &&
      (moved < LIVE_PUBLISH_STEP ||
       moved * (int64_t)hz_sizeclass_block_size(cls) < LIVE_PUBLISH_BYTES))
    return;
  counts->published = net;
  HZ_SHARED_ADD(heap->stats.live_publishes, 1);
  hz_stats_add_live(cls, delta);
}

unsigned hz_heap_free_spilling(hz_heap_t *heap, hz_page_t *page, void *p,
                               void **out) {
  uint8_t cls = page->class_id;
  hz_heap_enter(heap);
  hz_bin_t *bin = &heap->bins[cls];
  unsigned shared = 0;
  if (bin->top == bin->limit)
    shared = bin_spill(heap, bin, (bin_capacity_of(bin) + 1) / 2, out);
  *bin->top++ = p;
  hz_heap_publish_counts(heap, cls, false);
  hz_heap_leave(heap);
  return shared;
}

void hz_heap_free_full_bin(void *p, hz_heap_t *heap, hz_page_t *page) {
  hz_heap_free_spilling(heap, page, p, NULL);
}

/* The ladder's entries[0..n) home (the heap entered). */
static void heap_send_entries(hz_heap_t *heap, void *const *entries,
                              unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    void *block = hz_entry_block(entries[i]);
    heap_send_home(heap, hz_segment_block_page(block), block);
  }
}

void hz_heap_send_shared(hz_heap_t *heap, void *const *blocks, unsigned n) {
  if (n == 0) return;
  hz_heap_enter(heap);
  heap_send_entries(heap, blocks, n);
  hz_heap_leave(heap);
}

void hz_heap_bad_free(const hz_page_t *page, const void *p) {
  hz_check_fail("invalid free (not at the start of a block)", p, page->class_id,
                page->block_size);
}

void hz_heap_flush_stash(hz_heap_t *heap) {
  if (!hz_remote_stash_empty(&heap->stash))
    HZ_SHARED_ADD(heap->stats.batches_published, hz_remote_flush(&heap->stash));
}

static void drain_report(const hz_block_t *header) {
  hz_check_report(HZ_CHECK_CORRUPT_LIST, header,
                  "a block sent back by another thread");
}

/* The page of a block named by a list, which must be a block of one of
 * our pages, handed out (below its capacity), or of a page we lent with
 * blocks in use (below what fits: its owner is another heap now; `lent`
 * set): otherwise (NULL) a freed block was overwritten, and what it names
 * (an attacker's address, or a block still live) must not be handed
 * out. */
static hz_page_t *drain_page_of(const hz_heap_t *heap, const hz_block_t *block,
                                bool *lent) {
  hz_segment_t *seg = hz_segment_of(block);
  if (seg == NULL || seg->kind == HZ_SEGMENT_LARGE) return NULL;
  hz_page_t *page = hz_segment_page_of(seg, block);
  hz_heap_t *owner = hz_page_heap(page);
  *lent = owner != heap && hz_heap_is_shared(owner) &&
          page->lent && hz_segment_set_of_page(page) == &heap->segments;
  if ((owner != heap && !*lent) ||
      !hz_page_is_block(page, block, *lent ? page->reserved : page->capacity))
    return NULL;
  return page;
}

/* One drain: the page it applies blocks to, kept in registers (lists
 * often run along one page), and the blocks applied to it not yet
 * counted off its `used`. A page the heap lent after the blocks were sent
 * (`lent`): they go on to its class heap instead. */
typedef struct {
  hz_heap_t *heap;
  hz_page_t *page;
  uintptr_t start;
  uintptr_t area; /* 0: no page yet */
  uint32_t back;
  bool lent;
  uint64_t blocks;
} drain_t;

/* Count the blocks applied to the drain's page off its `used`: it may
 * leave the full queue, or empty and go. */
static void drain_settle(drain_t *d) {
  if (d->page != NULL && !d->lent)
    heap_page_returned(d->heap, d->page, d->back);
  d->page = NULL;
  d->area = 0;
  d->back = 0;
}

/* The drain moves to the page of `block`; false when it is none of ours. */
static HZ_NOINLINE bool drain_move(drain_t *d, const hz_block_t *block) {
  drain_settle(d);
  hz_page_t *page = drain_page_of(d->heap, block, &d->lent);
  if (page == NULL) return false;
  d->page = page;
  d->start = (uintptr_t)hz_page_start(page);
  d->area = hz_page_area(page);
  return true;
}

/* The drain is at the page of `block`, a block of ours. */
HZ_INLINE bool drain_locate(drain_t *d, const hz_block_t *block) {
  return HZ_LIKELY((uintptr_t)block - d->start < d->area) ||
         drain_move(d, block);
}

/* What applying a block to its page found. */
typedef enum { DRAIN_APPLIED, DRAIN_TWICE, DRAIN_SPOILT } drain_result_t;

/* Blocks first..last of a page the heap lent (drain_t) go on to its class
 * heap through the stash, each a block start that fits the page. */
static HZ_NOINLINE drain_result_t drain_forward(drain_t *d,
                                                const hz_block_t *first,
                                                const hz_block_t *last) {
  hz_page_t *page = d->page;
  if ((uintptr_t)last - d->start >= d->area ||
      !hz_page_is_block(page, first, page->reserved) ||
      !hz_page_is_block(page, last, page->reserved) || last < first)
    return DRAIN_SPOILT;
  for (const uint8_t *b = (const uint8_t *)first; b <= (const uint8_t *)last;
       b += page->block_size) {
    heap_send_home(d->heap, page, (hz_block_t *)(uintptr_t)b);
    d->blocks++;
  }
  return DRAIN_APPLIED;
}

/* Set the bit of `block` on its page, without reading the block. TWICE
 * (reported) when the bit was set already: another thread freed it too.
 * SPOILT when it is no block of ours handed out. */
HZ_INLINE drain_result_t drain_block(drain_t *d, const hz_block_t *block) {
  if (!drain_locate(d, block)) return DRAIN_SPOILT;
  if (HZ_UNLIKELY(d->lent)) return drain_forward(d, block, block);
  uint32_t index = hz_page_index(d->page, block);
  if (HZ_UNLIKELY(index >= d->page->capacity)) return DRAIN_SPOILT;
  if (HZ_UNLIKELY(!hz_page_put_index(d->page, index, true))) {
    hz_heap_double_free(d->page, block); /* freed again by another thread */
    return DRAIN_TWICE;
  }
  d->back++, d->blocks++;
  return DRAIN_APPLIED;
}

/* Set the bits of a run's blocks, `first` (its name without the run bit)
 * to the last it holds, a word of the bitmap at a time, reading `first`
 * and nothing else. A block whose bit is set already is reported, the
 * others applied. SPOILT when the run's last is no block of the page after
 * `first`. */
static drain_result_t drain_run(drain_t *d, const hz_block_t *first) {
  if (!drain_locate(d, first)) return DRAIN_SPOILT;
  const hz_block_t *last = hz_block_next(first);
  hz_page_t *page = d->page;
  if (HZ_UNLIKELY(d->lent)) return drain_forward(d, first, last);
  if ((uintptr_t)last - d->start >= d->area) return DRAIN_SPOILT;
  uint32_t from = hz_page_index(page, first);
  uint32_t to = hz_page_index(page, last);
  if (HZ_UNLIKELY(to >= page->capacity || from >= to)) return DRAIN_SPOILT;
  if (HZ_UNLIKELY(!hz_page_put_run(page, from, to))) {
    for (uint32_t i = from; i <= to; i++) /* one freed twice at least */
      if (drain_block(d, (const hz_block_t *)(hz_page_start(page) +
                                              (size_t)i * page->block_size)) ==
          DRAIN_SPOILT)
        return DRAIN_SPOILT;
    return DRAIN_APPLIED;
  }
  d->back += to - from + 1, d->blocks += to - from + 1;
  return DRAIN_APPLIED;
}

/* Apply a name: a block, or a run of one page's blocks. */
HZ_INLINE drain_result_t drain_name(drain_t *d, const hz_block_t *name) {
  if (hz_remote_is_run(name)) return drain_run(d, hz_remote_run_first(name));
  return drain_block(d, name);
}

/* Apply a header and what it names to their pages, reading the header
 * (and a run's first block) and nothing else. Returns the next header, or
 * NULL where the list must end: after a spoilt link or name (reported; the
 * rest of the list is lost), or at a header already back on its page. Two
 * threads that free one block both make it a header of their lists, and
 * the second's link overwrites the first's: it may lead back into the list
 * (a block freed by two threads made its owner loop here), so the header
 * is applied first and a list never goes on past one seen before. */
static hz_block_t *drain_header(drain_t *d, hz_block_t *header) {
  if (!drain_locate(d, header)) {
    drain_report(header);
    return NULL;
  }
  /* Read the header before its block is applied: that may empty its page,
   * which may then go back to the kernel (page_only_empties). */
  uint32_t named;
  hz_block_t *next = hz_remote_link(header, &named);
  bool fine = named <= hz_remote_can_name(d->page->block_size);
  hz_block_t *names[HZ_REMOTE_NAMES_MAX];
  for (uint32_t i = 0; fine && i < named; i++)
    names[i] = hz_remote_name(header, i);
  drain_result_t own = drain_block(d, header);
  if (own == DRAIN_TWICE) return NULL;
  if (own == DRAIN_SPOILT) {
    drain_report(header);
    return NULL;
  }
  if (next != NULL) __builtin_prefetch(next);
  for (uint32_t i = 0; fine && i < named; i++)
    fine = drain_name(d, names[i]) != DRAIN_SPOILT;
  if (fine) return next;
  drain_report(header);
  return NULL;
}

/* Take every block received through the inbox home: each header's blocks
 * onto their page in one step (bits set, the count lowered), reading only
 * the headers. The blocks stay where they are until a refill hands them
 * out, lowest address first. A spoilt link or name is reported and ends
 * the list: the blocks after it are lost. */
void hz_heap_drain_inbox(hz_heap_t *heap) {
  hz_block_t *header = hz_remote_take_all(&heap->inbox);
  if (header == NULL) return;
  HZ_SHARED_ADD(heap->stats.inbox_drains, 1);
  drain_t d = {.heap = heap};
  uint64_t headers = 0;
  for (; header != NULL; headers++)
    header = drain_header(&d, header);
  drain_settle(&d);
  HZ_SHARED_ADD(heap->stats.drained_blocks, d.blocks);
  HZ_SHARED_ADD(heap->stats.drained_headers, headers);
}

bool hz_heap_has_incoming(const hz_heap_t *heap) {
  return hz_remote_pending(&heap->inbox);
}

/* ---------------------------------------------------------------------------
 * Allocating
 * ------------------------------------------------------------------------- */
/* Give every kept empty page and spare page back to the heap's segments;
 * false when there were none. */
static bool heap_release_kept(hz_heap_t *heap) {
  bool any = heap->empty_bytes != 0;
  heap_trim_empty(heap, 0);
  return heap_spares_free(heap) || any;
}

/* A fresh page from the heap's segments. Before they grow by a segment,
 * the empty pages the heap keeps go back to them: memory freed in pages of
 * one size serves pages of another before more is mapped. */
static hz_page_t *heap_cut_page(hz_heap_t *heap, hz_page_kind_t kind) {
  hz_page_t *page = hz_segment_page_cut(heap->cuts_from, kind);
  if (page == NULL && heap_release_kept(heap))
    page = hz_segment_page_cut(heap->cuts_from, kind);
  return page != NULL ? page : hz_segment_page_alloc(heap->cuts_from, kind);
}

/* A page for class `cls` with room: a spare page (one of the class keeps
 * its bitmap: every block free), or a fresh one from the segments. */
static hz_page_t *heap_new_page(hz_heap_t *heap, uint8_t cls) {
  hz_page_kind_t kind = hz_segment_kind_for(hz_sizeclass_block_size(cls));
  hz_page_t *page = heap_spare_take(heap, kind, cls);
  if (page != NULL && page->class_id == cls) return page;
  if (page == NULL) {
    page = heap_cut_page(heap, kind);
    if (page == NULL) return NULL;
    HZ_SHARED_ADD(heap->stats.pages_acquired, 1);
    if (hz_heap_has_incoming(heap))
      HZ_SHARED_ADD(heap->stats.pages_fresh_pending, 1);
  }
  hz_page_init(page, heap, cls);
  return page;
}

static void heap_move_to_front(hz_page_queue_t *q, hz_page_t *page) {
  if (page == q->first) return;
  queue_remove(q, page);
  queue_push_front(q, page);
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
HZ_INLINE hz_page_t *heap_find_page(hz_heap_t *heap, uint8_t cls) {
  hz_page_queue_t *q = &heap->queues[cls];
  hz_page_t *page = q->first;
  if (HZ_LIKELY(page != NULL && hz_page_has_room(page))) return page;
  hz_page_t *best = NULL;
  for (int looked = 0; page != NULL && looked < FIND_SCAN; looked++) {
    hz_page_t *next = page->next;
    if (!hz_page_has_room(page)) {
      queue_remove(q, page);
      page->in_full = 1;
      queue_push_back(&heap->full, page);
    } else if (best == NULL || page_room(page) < page_room(best)) {
      best = page;
    }
    page = next;
  }
  if (best != NULL) {
    heap_move_to_front(q, best);
    return best;
  }
  page = heap_new_page(heap, cls);
  if (page != NULL) queue_push_front(q, page);
  return page;
}

/* A refill took blocks off a page with notes: kept empty, it is in use
 * again; purged (HZ_PAGE_PURGED), the flag goes once no free block is
 * left on it. One test of both on every refill. */
static HZ_NOINLINE void heap_refilled_noted(hz_heap_t *heap, hz_page_t *page) {
  if (page->emptied) heap_unempty(heap, page);
  if (page->purged) hz_page_purged_refilled(page);
}

/* Fill the empty bin of `cls` up to half way from one page (the one
 * heap_find_page chooses, which has room: at least one block), the lowest
 * address on top: malloc hands blocks out in address order, which
 * hardware prefetchers follow. (Going on to the next fullest page when the
 * first runs out halved the slow paths of mt_remote main R90/T4 but bought
 * no speed there, and cost 10% on batch_queue 2x2-8-2048, 11 runs. A
 * software prefetch of each block for writing bought nothing measurable on
 * batch_queue, random_mixed, string_builder or json, 5 runs each. Both
 * were dropped.) False if out of memory. */
HZ_INLINE uint32_t heap_refill(hz_heap_t *heap, hz_bin_t *bin, uint8_t cls,
                               uint32_t want) {
  hz_page_t *page = heap_find_page(heap, cls);
  if (page == NULL) return 0;
  uint32_t unmarked;
  uint32_t taken = hz_page_take(page, bin->top, want, &unmarked);
  HZ_ASSERT(taken > 0);
  bin_hold_unmarked(bin, bin->top, unmarked);
  bin->top += taken;
  hz_bin_moved(bin, taken);
  if (page->tally->used == 0) heap->busy_bytes += hz_page_area(page);
  HZ_SHARED_SET(page->tally->used, (uint16_t)(page->tally->used + taken));
  if (HZ_UNLIKELY(page->refill_notes)) heap_refilled_noted(heap, page);
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
static void heap_age_empty(hz_heap_t *heap, uint8_t cls) {
  hz_page_t *last = heap->queues[cls].last;
  if (last == NULL || !last->emptied || last == heap->queues[cls].first) return;
  uint32_t now = atomic_load_explicit(&heap->activity, memory_order_relaxed);
  if (now - last->emptied_at >= HZ_HEAP_EMPTY_AGE)
    hz_heap_retire_page(heap, last);
}

/* The heap's bin of `cls` refills from the shared pages from now on: its
 * own pages of the class are lent to the class heap at its refills from
 * it, blocks in use and all (heap_lend_pages), and those that empty
 * meanwhile are kept for that (page_only_empties). (Giving back the
 * memory of their free blocks instead, a call to the kernel for each page
 * of every class of every heap as the classes turned, took mt_remote main
 * R90/T16 from 4.5M to 2.8M ops/s.) */
static HZ_NOINLINE void heap_turn_shared(hz_heap_t *heap, uint8_t cls) {
  heap->lend_full[cls] = true;
  heap->refills_shared[cls] = true;
  hz_page_t *first = heap->queues[cls].first;
  if (first != NULL) first->for_samples = false; /* a sample's, turns ago */
}

/* `page`, out of the heap's queues, goes to the class heap `shared`, lent
 * (Lent pages): its owner word changes in one store, flags and all. */
static void page_lend(hz_heap_t *heap, hz_heap_t *shared, hz_page_t *page) {
  page->lent = 1;
  atomic_fetch_add_explicit(&heap->lent, 1, memory_order_relaxed);
  hz_page_move(page, shared);
}

/* A page of the heap's with blocks in use, out of its queues, lent: onto
 * the class heap's full queue (`full`), or right behind the page its
 * refills take from, where the next choice looks (heap_unfull). */
static void page_lend_busy(hz_heap_t *heap, hz_heap_t *shared,
                           hz_page_t *page, bool full) {
  heap->busy_bytes -= hz_page_area(page);
  shared->busy_bytes += hz_page_area(page);
  page_lend(heap, shared, page);
  if (full)
    queue_push_back(&shared->full, page);
  else
    queue_push_second(&shared->queues[page->class_id], page);
}

/* An empty page of the heap's, out of its queues, lent: an empty page the
 * class heap keeps. */
static void page_lend_empty(hz_heap_t *heap, hz_heap_t *shared,
                            hz_page_t *page) {
  heap_unempty(heap, page);
  page_lend(heap, shared, page);
  queue_push_back(&shared->queues[page->class_id], page);
  heap_keep_emptied(shared, page);
}

/* The pages of `cls` on the heap's full queue, lent (once a turn: pages
 * that fill later come back through the class queue). */
static void heap_lend_full(hz_heap_t *heap, hz_heap_t *shared, uint8_t cls) {
  heap->lend_full[cls] = false;
  for (hz_page_t *page = heap->full.first, *next; page != NULL; page = next) {
    next = page->next;
    if (page->class_id != cls) continue;
    queue_remove(&heap->full, page);
    page_lend_busy(heap, shared, page, true);
  }
}

/* Under the class's lock, at a refill of `cls` from the shared pages: the
 * heap's pages of the class go to the class heap, lent, free blocks,
 * blocks in use and all (Lent pages); but for the one the samples take
 * from while the class takes samples (`sampled`). */
static void heap_lend_pages(hz_heap_t *heap, hz_heap_t *shared, uint8_t cls,
                            bool sampled) {
  if (heap->lend_full[cls]) heap_lend_full(heap, shared, cls);
  hz_page_queue_t *q = &heap->queues[cls];
  bool keep_first = sampled && q->first != NULL && q->first->for_samples;
  hz_page_t *page;
  while ((page = keep_first ? q->first->next : q->first) != NULL) {
    queue_remove(q, page);
    if (page->emptied)
      page_lend_empty(heap, shared, page);
    else
      page_lend_busy(heap, shared, page, false);
  }
}

/* The page the refill of a class's sample took from (its queue's first)
 * stays with the heap while the class refills from the shared pages. */
static HZ_NOINLINE void heap_keep_for_samples(hz_heap_t *heap, uint8_t cls) {
  if (heap->queues[cls].first != NULL)
    heap->queues[cls].first->for_samples = true;
}

/* Where a bin's refill comes from: the heap's own pages (shared NULL; with
 * `sample`, a shared class's sample: route.h), the class's shared heap
 * under its lock (with `sampled`, it takes samples), or blocks the ladder
 * held. */
typedef struct {
  hz_heap_t *shared;
  hz_lock_t *lock;
  bool sampled, sample;
  void *const *given;
  unsigned given_count;
} refill_from_t;

/* Half the bin, or a whole one when no free came into a bin of small
 * blocks since its last refill (a class the thread only allocates); a
 * shared heap's own bin serves threads without a heap one block at a time
 * and keeps none for them. */
static uint32_t heap_own_want(hz_heap_t *heap, hz_bin_t *bin, uint8_t cls) {
  uint32_t room = (uint32_t)bin_capacity_of(bin);
  if (heap->state == HZ_HEAP_SHARED) return 1;
  bool only_mallocs = false;
  if (room == HZ_BIN_SLOTS) {
    uint64_t frees = hz_bin_frees(bin);
    only_mallocs = frees == heap->refill_frees[cls];
    heap->refill_frees[cls] = frees;
  }
  return only_mallocs ? room : room / 2;
}

bool hz_heap_sample_turn(hz_heap_t *heap, uint8_t cls) {
  if (++heap->shared_fills[cls] < HZ_ROUTE_SAMPLE_EVERY) return false;
  heap->shared_fills[cls] = 0;
  return true;
}

/* The bin of `cls` is empty: fill it from where `from` says; from the own
 * pages half way (see heap_own_want), from the shared pages whole, from as
 * many pages as it takes, under the class's lock, taken once a bin. The
 * shared heap counts as active, takes its inbox home first and ages its
 * kept pages, as an owner's slow path does. */
HZ_INLINE bool heap_fill_bin(hz_heap_t *heap, hz_bin_t *bin, uint8_t cls,
                             const refill_from_t *from) {
  HZ_ASSERT(bin->top == bin->base);
  hz_heap_t *shared = from->shared;
  if (shared == NULL) {
    if (!from->sample) heap->refills_shared[cls] = false;
    uint32_t taken = heap_refill(heap, bin, cls, heap_own_want(heap, bin, cls));
    HZ_SHARED_ADD(heap->counts[cls].handed, taken);
    if (from->sample) heap_keep_for_samples(heap, cls);
    return taken != 0;
  }
  if (!heap->refills_shared[cls]) heap_turn_shared(heap, cls);
  uint32_t room = (uint32_t)bin_capacity_of(bin);
  hz_lock(from->lock);
  hz_heap_note_active(shared);
  if (hz_heap_has_incoming(shared)) hz_heap_drain_inbox(shared);
  heap_age_empty(shared, cls);
  heap_lend_pages(heap, shared, cls, from->sampled);
  uint32_t taken = 0, got;
  while (taken < room && (got = heap_refill(shared, bin, cls, room - taken)))
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
  if (!heap->refills_shared[cls]) heap_turn_shared(heap, cls);
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
  heap_send_entries(heap, from->given + fit, n - fit); /* no room: never */
}

HZ_INLINE void *heap_malloc(hz_heap_t *heap, size_t size,
                            const refill_from_t *from) {
  hz_heap_enter(heap);
  HZ_SHARED_ADD(heap->stats.slow_mallocs, 1);
  hz_heap_take_returned(heap);
  uint8_t cls = hz_sizeclass_of(size);
  hz_bin_t *bin = &heap->bins[cls];
  if (from->given_count != 0) heap_take_given(heap, bin, cls, from);
  /* The guard's turn, inside the slow path: a collector or a signal
   * handler's malloc meets the heap busy, as for any slow path. */
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
  heap_age_empty(heap, cls);
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
                            hz_lock_t *lock, bool sampled) {
  const refill_from_t from = {
      .shared = shared, .lock = lock, .sampled = sampled};
  return heap_malloc(heap, size, &from);
}

void *hz_heap_malloc_sample(hz_heap_t *heap, size_t size) {
  const refill_from_t from = {.sample = true};
  return heap_malloc(heap, size, &from);
}

void *hz_heap_malloc_given(hz_heap_t *heap, size_t size, void *const *blocks,
                           unsigned n) {
  const refill_from_t from = {.given = blocks, .given_count = n};
  return heap_malloc(heap, size, &from);
}
