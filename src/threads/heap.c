/* heap: a heap's bins and pages, and the malloc slow path behind the
 * inline fast path (fast.h): refilling a bin from the class's pages
 * (freed blocks, or fresh ones carved), finding or making a page, spare
 * pages, spilling a full bin, publishing the per-class counts, and taking
 * the inbox home. Frees the fast path leaves are heap_free.c's; the
 * collection of idle heaps is heap_collect.c's.
 *
 * Invariants: a page is on exactly one queue of its owner (its class
 * queue, or `full` when in_full is set); a block in a bin counts as used
 * by its page; bins hold only block starts of pages their heap owns. */
#include "heap_parts.h"

#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "large.h"
#include "list.h"
#include "options.h"
#include "os.h"
#include "prof.h"
#include "purge.h"

/* Bins empty and without room: every call takes the slow path. */
const hz_heap_t hz_heap_empty = {.state = HZ_HEAP_EMPTY};

HZ_TLS hz_heap_t *hz_heap_tls = (hz_heap_t *)&hz_heap_empty;

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

static uint32_t class_bin_capacity(uint8_t cls) {
  size_t cap = HZ_BIN_BYTES / hz_sizeclass_block_size(cls);
  if (cap > HZ_BIN_SLOTS) cap = HZ_BIN_SLOTS;
  return cap < 1 ? 1 : (uint32_t)cap;
}

void hz_heap_init(hz_heap_t *heap) {
  memset(heap, 0, sizeof *heap);
  for (uint8_t c = 1; c < HZ_CLASS_COUNT; c++) {
    hz_bin_t *bin = &heap->bins[c];
    bin->base = bin->top = heap->bin_slots[c];
    bin->limit = bin->base + class_bin_capacity(c);
    bin->inverse = (uint32_t)hz_class_divisor[c];
    bin->rotate = (uint32_t)(hz_class_divisor[c] >> 32);
  }
  heap->state = HZ_HEAP_LIVE;
  if (hz_prof_active) hz_heap_arm_sampling(heap);
}

/* The next sample of the bin's class after `skip` more blocks. */
static void heap_sample_after(hz_bin_t *bin, uint64_t skip) {
  uint64_t allocs = hz_bin_allocs(bin);
  bin->sample_left = skip;
  bin->alloc_mark = allocs + skip;
}

void hz_heap_arm_sampling(hz_heap_t *heap) {
  for (uint8_t c = 1; c < HZ_CLASS_COUNT; c++)
    heap_sample_after(&heap->bins[c],
                      hz_prof_blocks_to_skip(hz_sizeclass_block_size(c)));
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

/* Keep an empty page for reuse, or give it back to its segment. A spare
 * page is flagged retired: the free fast path leaves it to the generic
 * path, which reports any free to it (all its blocks are free already). */
static void heap_spare_push(hz_heap_t *heap, hz_page_t *page) {
  hz_page_kind_t kind = page_kind(page);
  if (heap->spare_count[kind] >= spare_max[kind]) {
    hz_segment_page_free(page);
    return;
  }
  hz_page_set_flag(page, HZ_PAGE_RETIRED, true);
  page->prev = NULL;
  page->next = heap->spare[kind];
  heap->spare[kind] = page;
  heap->spare_count[kind]++;
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
  hz_page_set_flag(page, HZ_PAGE_RETIRED, false);
  return page;
}

void hz_heap_spare_release(hz_heap_t *heap) {
  for (int kind = 0; kind < HZ_HEAP_SPARE_KINDS; kind++) {
    while (heap->spare[kind] != NULL) {
      hz_page_t *page = heap->spare[kind];
      heap->spare[kind] = page->next;
      hz_segment_page_free(page);
    }
    heap->spare_count[kind] = 0;
  }
  hz_segment_set_trim(&heap->segments);
}

/* ---------------------------------------------------------------------------
 * Freeing
 * ------------------------------------------------------------------------- */
void hz_heap_retire_page(hz_heap_t *heap, hz_page_t *page) {
  queue_remove(page->in_full ? &heap->full : &heap->queues[page->class_id],
               page);
  HZ_SHARED_ADD(heap->stats.pages_retired, 1);
  heap_spare_push(heap, page);
}

static void heap_page_emptied(hz_heap_t *heap, hz_page_t *page) {
  /* Keep the page refills take from, so a class that frees and
   * allocates one block at a time does not bounce pages. */
  if (heap->queues[page->class_id].first == page) return;
  hz_heap_retire_page(heap, page);
}

static void heap_unfull(hz_heap_t *heap, hz_page_t *page) {
  queue_remove(&heap->full, page);
  page->in_full = 0;
  queue_push_back(&heap->queues[page->class_id], page);
}

/* Put a block of ours (a block start) back on its page; with `uncarve`,
 * the page's last carved block is carved again later instead
 * (hz_page_uncarve). A page with every block free already gets one more
 * only through a double free: reported, and the block is not listed
 * twice. */
HZ_INLINE void page_put(hz_heap_t *heap, hz_page_t *page, hz_block_t *block,
                        bool uncarve) {
  if (HZ_UNLIKELY(page->used == 0)) {
    hz_heap_double_free(page, block);
    return;
  }
  if (!uncarve || !hz_page_uncarve(page, block)) {
    hz_block_set_next(block, page->local_free);
    page->local_free = block;
  }
  HZ_SHARED_SET(page->used, (uint16_t)(page->used - 1));
  if (page->in_full) heap_unfull(heap, page);
  hz_page_check(page);
  if (page->used == 0) heap_page_emptied(heap, page);
}

void hz_heap_page_put(hz_heap_t *heap, hz_page_t *page, hz_block_t *block) {
  page_put(heap, page, block, false);
}

static size_t bin_capacity_of(const hz_bin_t *bin) {
  return (size_t)(bin->limit - bin->base);
}

HZ_INLINE void bin_spill(hz_heap_t *heap, hz_bin_t *bin, size_t n,
                         bool uncarve) {
  for (size_t i = 0; i < n; i++)
    page_put(heap, hz_segment_block_page(bin->base[i]), bin->base[i], uncarve);
  size_t left = hz_bin_count(bin) - n;
  memmove(bin->base, bin->base + n, left * sizeof bin->base[0]);
  bin->top = bin->base + left;
  hz_bin_moved(bin, -(int64_t)n);
  HZ_ASSERT(bin->top >= bin->base && bin->top <= bin->limit);
}

/* Return the `n` oldest blocks of a bin to their pages. */
void hz_heap_bin_spill(hz_heap_t *heap, hz_bin_t *bin, size_t n) {
  bin_spill(heap, bin, n, false);
}

/* Return every block of a bin, fresh ones it never handed out uncarved:
 * they come back highest address first, each the last carved, so a heap
 * given back whole writes nothing into memory its thread never touched
 * (10,000 exiting threads faulted in 700 MiB linking them). */
void hz_heap_bin_empty(hz_heap_t *heap, hz_bin_t *bin) {
  bin_spill(heap, bin, hz_bin_count(bin), true);
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
  hz_bin_t *bin = &heap->bins[cls];
  hz_class_counts_t *counts = &heap->counts[cls];
  HZ_SHARED_SET(counts->allocs, hz_bin_allocs(bin));
  uint64_t frees = hz_bin_frees(bin);
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

void hz_heap_free_full_bin(void *p, hz_heap_t *heap, hz_page_t *page) {
  hz_heap_enter(heap);
  hz_bin_t *bin = &heap->bins[page->class_id];
  if (bin->top == bin->limit)
    hz_heap_bin_spill(heap, bin, (bin_capacity_of(bin) + 1) / 2);
  *bin->top++ = p;
  hz_heap_publish_counts(heap, page->class_id, false);
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

/* Reverse the n slots from `slots` on, so the first put is on top. */
static void heap_reverse(void **slots, size_t n) {
  for (size_t i = 0; i < n / 2; i++) {
    void *t = slots[i];
    slots[i] = slots[n - 1 - i];
    slots[n - 1 - i] = t;
  }
}

/* Most blocks one drain takes home; the rest wait in the backlog for the
 * next slow path, so no single malloc pays for a huge inbox. */
#define DRAIN_BUDGET 4096
/* Most blocks a malloc slow path puts back on their pages (their bins
 * full) before it stops: a slow path of a class the inbox holds few of
 * (a producer's batch array among its blocks) would otherwise send up to
 * DRAIN_BUDGET blocks on the page round trip that the next slow paths of
 * their own class take straight to malloc. It still takes that many, so
 * the backlog drains while the thread allocates anything. */
#define DRAIN_PAGE_PUTS (2 * HZ_BIN_SLOTS)

/* Whether the CPU has PREFETCHW (CPUID 0x80000001, ECX bit 8), asked once.
 * On x86, __builtin_prefetch(p, 1) compiles to a read prefetch unless the
 * build targets PREFETCHW, so the drain chooses at run time. */
static bool heap_cpu_prefetchw(void) {
#if defined(__x86_64__)
  static _Atomic int known = -1;
  int has = atomic_load_explicit(&known, memory_order_relaxed);
  if (HZ_UNLIKELY(has < 0)) {
    unsigned a, b, c, d;
    has = __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & bit_PRFCHW) != 0;
    atomic_store_explicit(&known, has, memory_order_relaxed);
  }
  return has != 0;
#else
  return false;
#endif
}

/* Ask for the line of a block the owner will soon write (malloc's caller
 * fills it) to be brought in for writing. PREFETCHW takes the line
 * exclusive: the freeing thread's copy (it read the block) is invalidated
 * in the background, and the first store does not wait for that.
 * 9 interleaved runs against the read prefetch: batch_queue 1x3-64B
 * 80.5M -> 86.3M ops/s, 2x2-8-2048 50.5M -> 69.4M; prodcons 1KiB 65.6M ->
 * 73.7M. */
HZ_INLINE void drain_prefetch(const void *block, bool prefetchw) {
#if defined(__x86_64__)
  if (prefetchw) {
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)block));
    return;
  }
#endif
  (void)prefetchw;
  __builtin_prefetch(block, 1);
}

/* The page a drain walks along, what it needs of it kept in registers:
 * lists often run along one page, so a link into it is proved a block
 * start with a range check and a multiply, without loading the page. */
typedef struct {
  hz_page_t *page;
  uintptr_t start;
  uint32_t area; /* 0: no link is taken as in this page */
  uint32_t reserved;
  uint32_t inverse, rotate; /* the class's divisor (sizeclass.h) */
  hz_bin_t *bin;
  bool retired;
} drain_page_t;

static void drain_page_load(drain_page_t *d, hz_heap_t *heap, hz_page_t *page) {
  uint64_t divisor = hz_class_divisor[page->class_id];
  d->page = page;
  d->start = (uintptr_t)hz_page_start(page);
  d->area = hz_page_heap(page) == heap ? (uint32_t)hz_page_area(page) : 0;
  d->reserved = page->reserved;
  d->inverse = (uint32_t)divisor;
  d->rotate = (uint32_t)(divisor >> 32);
  d->bin = &heap->bins[page->class_id];
  d->retired = hz_heap_page_is_retired(page);
}

/* Whether `next`, a link or name read from a list, is a block of d's
 * page. */
HZ_INLINE bool drain_link_near(const drain_page_t *d, const hz_block_t *next) {
  uintptr_t offset = (uintptr_t)next - d->start;
  return offset < d->area &&
         hz_sizeclass_index_rotated(d->inverse, d->rotate, (uint32_t)offset) <
             d->reserved;
}

/* The page of a link that leaves d's page, which must be a block of one of
 * our pages: otherwise (NULL) a freed block was overwritten, and what it
 * names (an attacker's address, or a block still live) must not be handed
 * out. */
static hz_page_t *drain_link_far(const hz_heap_t *heap,
                                 const hz_block_t *next) {
  hz_segment_t *seg = hz_segment_of(next);
  if (seg == NULL || seg->kind == HZ_SEGMENT_LARGE) return NULL;
  hz_page_t *page = hz_segment_page_of(seg, next);
  if (hz_page_heap(page) != heap ||
      !hz_page_is_block(page, next, page->reserved))
    return NULL;
  return page;
}

/* One drain's state: the page it is at, where blocks may go, and what is
 * left of its budgets. */
typedef struct {
  hz_heap_t *heap;
  drain_page_t at;
  hz_bin_t *wanted;   /* the bin whose filling ends the drain (or NULL) */
  bool to_bins;       /* false: every block onto its page */
  int blocks_left;    /* DRAIN_BUDGET */
  int page_puts_left; /* DRAIN_PAGE_PUTS, for a malloc slow path */
  bool prefetchw;     /* heap_cpu_prefetchw() */
} drain_t;

/* drain_locate for a block off the drain's page: out of line, so the
 * common case costs no call. */
static HZ_NOINLINE bool drain_move(drain_t *d, const hz_block_t *block) {
  hz_page_t *page = drain_link_far(d->heap, block);
  if (page == NULL) return false;
  drain_page_load(&d->at, d->heap, page);
  return true;
}

/* Whether `block`, named by a list, is a block of one of our pages; the
 * drain is then at its page. */
HZ_INLINE bool drain_locate(drain_t *d, const hz_block_t *block) {
  return HZ_LIKELY(drain_link_near(&d->at, block)) || drain_move(d, block);
}

/* Take `block` (of the page the drain is at) home: into its bin while
 * there is room, else onto its page. True when the drain should stop. */
static bool drain_place(drain_t *d, hz_block_t *block) {
  HZ_ASSERT(hz_page_heap(d->at.page) == d->heap);
  hz_bin_t *bin = d->at.bin;
  d->blocks_left--;
  if (HZ_LIKELY(d->to_bins && !d->at.retired && bin->top != bin->limit)) {
    *bin->top++ = block; /* straight to malloc, no page round trip */
    hz_bin_moved(bin, 1);
    drain_prefetch(block, d->prefetchw);
    return (bin == d->wanted && bin->top == bin->limit) || d->blocks_left <= 0;
  }
  if (d->at.retired) {
    hz_heap_double_free(d->at.page, block); /* freed again by another thread */
  } else {
    hz_heap_page_put(d->heap, d->at.page, block);
    drain_page_load(&d->at, d->heap, d->at.page); /* it may have retired */
    d->page_puts_left--;
  }
  return d->page_puts_left <= 0 || d->blocks_left <= 0;
}

static void drain_report(const hz_block_t *header) {
  hz_check_report(HZ_CHECK_CORRUPT_LIST, header,
                  "a block sent back by another thread");
}

/* Take one header of a list home, its named blocks first (newest first).
 * Returns the header the drain goes on with: `header` itself when the drain
 * stopped inside it (its link now names only what is left), the next one,
 * or NULL after a spoilt link or name (reported; the rest is lost). Sets
 * *stop when the drain should stop. */
static hz_block_t *drain_header(drain_t *d, hz_block_t *header, bool *stop) {
  if (!drain_locate(d, header)) {
    drain_report(header);
    return NULL;
  }
  hz_page_t *header_page = d->at.page;
  uint32_t named;
  hz_block_t *next = hz_remote_link(header, &named);
  if (next != NULL) drain_prefetch(next, d->prefetchw);
  if (HZ_UNLIKELY(named > hz_remote_can_name(header_page->block_size))) {
    drain_report(header);
    next = NULL;
    named = 0;
  }
  while (named > 0) {
    hz_block_t *block = hz_remote_name(header, named - 1);
    if (HZ_UNLIKELY(!drain_locate(d, block))) {
      drain_report(header);
      next = NULL;
      break;
    }
    named--;
    if (drain_place(d, block)) {
      hz_remote_set_link(header, next, named);
      *stop = true;
      return header;
    }
  }
  if (d->at.page != header_page) drain_page_load(&d->at, d->heap, header_page);
  *stop = drain_place(d, header);
  return next;
}

/* Take blocks received through the inbox home: into their bins while
 * there is room (only the owner may), else back on their pages. A malloc
 * slow path for class `want` stops once that class's bin is full and
 * leaves the rest in the backlog, unread: a block then goes from the
 * freeing thread's cache to malloc once, instead of onto its page now and
 * back off it later, when it has left the cache (the bin holds 32 blocks,
 * a drain often twice that). The blocks it puts in that bin are reversed
 * so malloc hands them out in list order: a list runs against the order
 * its thread freed in, and the inbox stacks lists newest first, so the
 * inbox holds one freeing thread's blocks in reverse free order. A
 * producer whose consumer frees in allocation order then gets its blocks
 * back as one descending run of addresses (ascending the next round),
 * which hardware prefetchers follow; bins filled bottom-up handed out runs
 * of 32 in an order that broke the stream every 32 blocks, and the
 * consumer's reads of 64 B blocks went from 27% of a 2x2 run to 3.5%.
 * With HZ_DRAIN_TO_PAGES every block goes back to its page. Only headers
 * are read; a spoilt link or name is reported and ends the list: the
 * blocks after it are lost. */
void hz_heap_drain_inbox(hz_heap_t *heap, unsigned want) {
  hz_block_t *header = heap->backlog;
  if (header == NULL) {
    header = hz_remote_take_all(&heap->inbox);
    if (header == NULL) return;
    HZ_SHARED_ADD(heap->stats.inbox_drains, 1);
  }
  bool to_bins = want != HZ_DRAIN_TO_PAGES;
  drain_t d = {.heap = heap,
               .wanted = to_bins ? &heap->bins[want] : NULL,
               .to_bins = to_bins,
               .blocks_left = DRAIN_BUDGET,
               .page_puts_left = to_bins ? DRAIN_PAGE_PUTS : DRAIN_BUDGET,
               .prefetchw = heap_cpu_prefetchw()};
  void **wanted_from = to_bins ? d.wanted->top : NULL;
  bool stop = false;
  while (header != NULL && !stop)
    header = drain_header(&d, header, &stop);
  HZ_SHARED_ADD(heap->stats.drained_blocks,
                (uint64_t)(DRAIN_BUDGET - d.blocks_left));
  HZ_SHARED_SET(heap->backlog, header); /* collectors look (idle_depth) */
  if (wanted_from != NULL)
    heap_reverse(wanted_from, (size_t)(d.wanted->top - wanted_from));
}

bool hz_heap_has_incoming(const hz_heap_t *heap) {
  return HZ_SHARED_GET(heap->backlog) != NULL ||
         hz_remote_pending(&heap->inbox);
}

/* ---------------------------------------------------------------------------
 * Allocating
 * ------------------------------------------------------------------------- */
/* A page for class `cls` with room: a spare page, or a fresh one from the
 * segments. */
static hz_page_t *heap_new_page(hz_heap_t *heap, uint8_t cls) {
  hz_page_kind_t kind = hz_segment_kind_for(hz_sizeclass_block_size(cls));
  hz_page_t *page = heap_spare_take(heap, kind, cls);
  if (page != NULL && page->class_id == cls) {
    hz_page_collect(page);
    if (hz_page_has_room(page)) return page;
  }
  if (page == NULL) {
    page = hz_segment_page_alloc(&heap->segments, kind);
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

/* A page of class `cls` with a free block or room to carve one, now first
 * in its queue. Blocks already freed are reused before fresh ones are
 * carved, so memory is touched only when the class really needs more. */
static hz_page_t *heap_find_page(hz_heap_t *heap, uint8_t cls) {
  hz_page_queue_t *q = &heap->queues[cls];
  hz_page_t *extendable = NULL;
  hz_page_t *page = q->first;
  while (page != NULL) {
    hz_page_t *next = page->next;
    hz_page_collect(page);
    if (page->free != NULL) {
      heap_move_to_front(q, page);
      return page;
    }
    if (page->capacity < page->reserved) {
      if (extendable == NULL) extendable = page;
    } else {
      queue_remove(q, page);
      page->in_full = 1;
      queue_push_back(&heap->full, page);
    }
    page = next;
  }
  if (extendable != NULL) {
    heap_move_to_front(q, extendable);
    return extendable;
  }
  page = heap_new_page(heap, cls);
  if (page != NULL) queue_push_front(q, page);
  return page;
}

/* Move up to `room` blocks from the page's free list onto the bin, the
 * list's first block on top: malloc then hands them out in list order,
 * newest first. Returns how many. */
static uint32_t heap_take_free(hz_bin_t *bin, hz_page_t *page, size_t room) {
  void **slot = bin->top + room;
  hz_block_t *block = page->free;
  while (block != NULL && slot > bin->top) {
    *--slot = block;
    block = hz_page_next(page, block);
  }
  page->free = block;
  uint32_t taken = (uint32_t)(bin->top + room - slot);
  if (slot > bin->top) /* the list ran out first */
    memmove(bin->top, slot, taken * sizeof *slot);
  bin->top += taken;
  return taken;
}

/* Carve up to `room` fresh blocks onto the bin, the lowest address on top:
 * malloc hands them out in address order, which hardware prefetchers
 * follow. Returns how many. */
static uint32_t heap_take_fresh(hz_bin_t *bin, hz_page_t *page, size_t room) {
  uint32_t n = hz_page_carve(page, bin->top, (uint32_t)room);
  heap_reverse(bin->top, n);
  bin->top += n;
  return n;
}

/* Fill the bin of `cls` half way from its pages; false if out of memory. */
static bool heap_refill(hz_heap_t *heap, uint8_t cls) {
  hz_bin_t *bin = &heap->bins[cls];
  size_t cap = bin_capacity_of(bin);
  void **want = bin->base + (cap > 1 ? cap / 2 : 1);
  while (bin->top < want) {
    hz_page_t *page = heap_find_page(heap, cls);
    if (page == NULL) break;
    size_t room = (size_t)(want - bin->top);
    uint32_t taken = page->free != NULL ? heap_take_free(bin, page, room)
                                        : heap_take_fresh(bin, page, room);
    hz_bin_moved(bin, taken);
    HZ_SHARED_SET(page->used, (uint16_t)(page->used + taken));
    hz_page_check(page);
    HZ_ASSERT(bin->top <= bin->limit);
  }
  return bin->top > bin->base;
}

/* The block the countdown reached 0 on (it is counted): record it. */
static void *heap_sampled(hz_heap_t *heap, void *block, size_t size) {
  hz_page_t *page = hz_segment_block_page(block);
  hz_bin_t *bin = &heap->bins[page->class_id];
  heap_sample_after(bin, hz_prof_blocks_to_skip(page->block_size));
  if (hz_prof_record(block, size, page->block_size, page))
    hz_page_set_flag(page, HZ_PAGE_SAMPLED, true);
  return block;
}

HZ_NOINLINE void *hz_heap_malloc_sampled(hz_heap_t *heap, hz_bin_t *bin,
                                         size_t size) {
  unsigned cls = (unsigned)(bin - heap->bins);
  return heap_sampled(heap, hz_bin_take(bin, bin->top, cls), size);
}

void *hz_heap_malloc_small(hz_heap_t *heap, size_t size) {
  hz_heap_enter(heap);
  HZ_SHARED_ADD(heap->stats.slow_mallocs, 1);
  hz_heap_flush_stash(heap);
  uint8_t cls = hz_sizeclass_of(size);
  if (hz_heap_has_incoming(heap)) hz_heap_drain_inbox(heap, cls);
  hz_bin_t *bin = &heap->bins[cls];
  void *block = NULL;
  if (bin->top != bin->base || heap_refill(heap, cls)) {
    bin->sample_left--;
    block = hz_bin_take(bin, bin->top, cls);
    hz_heap_publish_counts(heap, cls, false);
  }
  hz_heap_leave(heap);
  if (HZ_UNLIKELY(bin->sample_left == 0) && block != NULL)
    return heap_sampled(heap, block, size);
  return block;
}
