/* heap: the slow paths behind the inline fast paths of heap.h — finding or
 * making a page with free blocks, freeing to a page that needs attention,
 * sending blocks to their owner's inbox and draining our own.
 *
 * Invariants: a page is on exactly one queue of its owner (its class
 * queue, or `full` when in_full is set); a block in a bin counts as used
 * by its page; bins hold only block starts of pages their heap owns. */
#include "heap.h"

#include <errno.h>
#include <string.h>

#include "large.h"
#include "options.h"
#include "os.h"
#include "prof.h"
#include "purge.h"

/* Bins empty and without room: every call takes the slow path. */
const hz_heap_t hz_heap_empty = {.state = HZ_HEAP_EMPTY};

HZ_TLS hz_heap_t *hz_heap_tls = (hz_heap_t *)&hz_heap_empty;

/* ---------------------------------------------------------------------------
 * Collection handshake: the owner side costs two plain stores and a load;
 * the collector pays for a membarrier. ThreadSanitizer cannot see that
 * barrier, so its build makes both sides sequentially consistent.
 * ------------------------------------------------------------------------- */
#if defined(__SANITIZE_THREAD__)
#define HANDSHAKE_ORDER memory_order_seq_cst
#else
#define HANDSHAKE_ORDER memory_order_relaxed
#endif

static void heap_raise_busy(hz_heap_t *heap) {
  atomic_store_explicit(&heap->busy, 1, HANDSHAKE_ORDER);
  atomic_signal_fence(memory_order_seq_cst);
}

static bool heap_claimed(hz_heap_t *heap) {
  return atomic_load_explicit(&heap->collector, memory_order_seq_cst) != 0;
}

void hz_heap_wait_unclaimed(hz_heap_t *heap) {
  while (heap_claimed(heap))
    hz_os_yield();
}

static HZ_NOINLINE void heap_wait_collector(hz_heap_t *heap) {
  do {
    atomic_store_explicit(&heap->busy, 0, memory_order_release);
    hz_heap_wait_unclaimed(heap);
    heap_raise_busy(heap);
  } while (heap_claimed(heap));
}

static void heap_bins_restore(hz_heap_t *heap);

/* The owner enters / leaves a slow path. */
static void heap_enter(hz_heap_t *heap) {
  heap_raise_busy(heap);
  if (HZ_UNLIKELY(heap_claimed(heap))) heap_wait_collector(heap);
  if (HZ_UNLIKELY(heap->bins_stolen)) heap_bins_restore(heap);
  uint32_t n = atomic_load_explicit(&heap->activity, memory_order_relaxed);
  atomic_store_explicit(&heap->activity, n + 1, memory_order_relaxed);
}

static void heap_leave(hz_heap_t *heap) {
  atomic_store_explicit(&heap->busy, 0, memory_order_release);
}

bool hz_heap_claim(hz_heap_t *heap, uintptr_t token, bool idle_only) {
  if (heap->state != HZ_HEAP_LIVE && heap->state != HZ_HEAP_POOLED)
    return false;
  if (idle_only) {
    uint32_t n = atomic_load_explicit(&heap->activity, memory_order_relaxed);
    if (n != heap->collect_seen) { /* active since we last looked */
      heap->collect_seen = n;
      heap->collect_clean = false;
      return false;
    }
    if (heap->collect_clean && !hz_remote_pending(&heap->inbox)) return false;
  }
  uintptr_t expected = 0;
  return atomic_compare_exchange_strong(&heap->collector, &expected, token);
}

bool hz_heap_owner_quiet(hz_heap_t *heap) {
  return atomic_load_explicit(&heap->busy, memory_order_seq_cst) == 0;
}

void hz_heap_release_claim(hz_heap_t *heap) {
  atomic_store_explicit(&heap->collector, 0, memory_order_release);
}

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
  page->prev = NULL;
  page->next = q->first;
  if (q->first != NULL)
    q->first->prev = page;
  else
    q->last = page;
  q->first = page;
  queue_check(q, page);
}

static void queue_push_back(hz_page_queue_t *q, hz_page_t *page) {
  page->next = NULL;
  page->prev = q->last;
  if (q->last != NULL)
    q->last->next = page;
  else
    q->first = page;
  q->last = page;
  queue_check(q, page);
}

static void queue_remove(hz_page_queue_t *q, hz_page_t *page) {
  hz_page_t *before = page->prev;
  if (page->prev != NULL)
    page->prev->next = page->next;
  else
    q->first = page->next;
  if (page->next != NULL)
    page->next->prev = page->prev;
  else
    q->last = page->prev;
  page->next = page->prev = NULL;
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
    [HZ_SEGMENT_SMALL] = 4,  /* 256 KiB */
    [HZ_SEGMENT_MEDIUM] = 2, /* 256 KiB */
    [HZ_SEGMENT_WIDE] = 2,   /* 1 MiB */
    [HZ_SEGMENT_BIG] = 1,
};

static hz_segment_kind_t page_kind(const hz_page_t *page) {
  return hz_segment_kind_for(page->block_size);
}

/* Keep an empty page for reuse, or give it back to its segment. A spare
 * page is flagged retired: the free fast path leaves it to the generic
 * path, which reports any free to it (all its blocks are free already). */
static void heap_spare_push(hz_heap_t *heap, hz_page_t *page) {
  hz_segment_kind_t kind = page_kind(page);
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
static hz_page_t *heap_spare_take(hz_heap_t *heap, hz_segment_kind_t kind,
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

static void heap_spare_release(hz_heap_t *heap) {
  for (int kind = 0; kind < HZ_HEAP_SPARE_KINDS; kind++) {
    while (heap->spare[kind] != NULL) {
      hz_page_t *page = heap->spare[kind];
      heap->spare[kind] = page->next;
      hz_segment_page_free(page);
    }
    heap->spare_count[kind] = 0;
  }
}

/* ---------------------------------------------------------------------------
 * Freeing
 * ------------------------------------------------------------------------- */
static void heap_retire_page(hz_heap_t *heap, hz_page_t *page) {
  queue_remove(page->in_full ? &heap->full : &heap->queues[page->class_id],
               page);
  HZ_SHARED_ADD(heap->stats.pages_retired, 1);
  heap_spare_push(heap, page);
}

static void heap_page_emptied(hz_heap_t *heap, hz_page_t *page) {
  /* Keep the page refills take from, so a class that frees and
   * allocates one block at a time does not bounce pages. */
  if (heap->queues[page->class_id].first == page) return;
  heap_retire_page(heap, page);
}

static void heap_unfull(hz_heap_t *heap, hz_page_t *page) {
  queue_remove(&heap->full, page);
  page->in_full = 0;
  queue_push_back(&heap->queues[page->class_id], page);
}

static bool heap_page_is_retired(const hz_page_t *page) {
  return (hz_page_flags(page) & HZ_PAGE_RETIRED) != 0;
}

static void heap_double_free(const hz_page_t *page, const void *block) {
  hz_check_fail("double free", block, page->class_id, page->block_size);
}

/* Put a block of ours (a block start) back on its page. A page with every
 * block free already gets one more only through a double free: reported,
 * and the block is not listed twice. */
static void heap_page_put(hz_heap_t *heap, hz_page_t *page, hz_block_t *block) {
  if (HZ_UNLIKELY(page->used == 0)) {
    heap_double_free(page, block);
    return;
  }
  hz_block_set_next(block, page->local_free);
  page->local_free = block;
  HZ_SHARED_SET(page->used, (uint16_t)(page->used - 1));
  if (page->in_full) heap_unfull(heap, page);
  hz_page_check(page);
  if (page->used == 0) heap_page_emptied(heap, page);
}

static hz_page_t *block_page(const void *block) {
  return hz_segment_page_of(hz_segment_base(block), block);
}

static size_t bin_count(const hz_bin_t *bin) {
  return (size_t)(bin->top - bin->base);
}

static size_t bin_capacity_of(const hz_bin_t *bin) {
  return (size_t)(bin->limit - bin->base);
}

/* Return the `n` oldest blocks of a bin to their pages. */
static void heap_bin_spill(hz_heap_t *heap, hz_bin_t *bin, size_t n) {
  for (size_t i = 0; i < n; i++)
    heap_page_put(heap, block_page(bin->base[i]), bin->base[i]);
  size_t left = bin_count(bin) - n;
  memmove(bin->base, bin->base + n, left * sizeof bin->base[0]);
  bin->top = bin->base + left;
  HZ_ASSERT(bin->top >= bin->base && bin->top <= bin->limit);
}

/* Publish the bin's counts of class `cls` for other threads to read, and
 * the thread's live count to the process-wide one once it has moved by a
 * bin's worth, so the peak stays close while the shared counter is touched
 * rarely. Both on slow paths only: the fast paths count in the bin. */
#define LIVE_PUBLISH_STEP 64

static void heap_publish_counts(hz_heap_t *heap, uint8_t cls, bool always) {
  hz_bin_t *bin = &heap->bins[cls];
  hz_class_counts_t *counts = &heap->counts[cls];
  HZ_SHARED_SET(counts->allocs, hz_bin_allocs(bin));
  HZ_SHARED_SET(counts->frees, bin->frees);
  int64_t net = (int64_t)(hz_bin_allocs(bin) - bin->frees);
  int64_t delta = net - counts->published;
  if (!always && delta < LIVE_PUBLISH_STEP && delta > -LIVE_PUBLISH_STEP)
    return;
  counts->published = net;
  HZ_SHARED_ADD(heap->stats.live_publishes, 1);
  hz_stats_add_live(cls, delta);
}

void hz_heap_free_full_bin(hz_heap_t *heap, hz_page_t *page, void *p) {
  heap_enter(heap);
  hz_bin_t *bin = &heap->bins[page->class_id];
  if (bin->top == bin->limit)
    heap_bin_spill(heap, bin, (bin_capacity_of(bin) + 1) / 2);
  *bin->top++ = p;
  heap_publish_counts(heap, page->class_id, false);
  heap_leave(heap);
}

void hz_heap_bad_free(const hz_page_t *page, const void *p) {
  hz_check_fail("invalid free (not at the start of a block)", p, page->class_id,
                page->block_size);
}

/* The block a free of p on this page gives back, or NULL (reported) when p
 * names none: inside a block only where memalign handed the block out
 * (its tag is cleared here, so the block is a plain one again). Other
 * threads check against the blocks that fit, not those carved. */
static hz_block_t *heap_block_to_free(const hz_page_t *page, void *p,
                                      bool owner) {
  hz_block_t *block =
      hz_page_block_named(page, p, owner ? page->capacity : page->reserved);
  if (block == NULL) hz_heap_bad_free(page, p);
  if (block != NULL && (void *)block != p) *(uintptr_t *)block = 0; /* tag */
  return block;
}

/* A block of another heap's page: into our stash. The stash may publish
 * the block at once, and its owner may then retire the page: read what the
 * page says first, and never touch it after. */
static void heap_free_remote(hz_heap_t *heap, hz_page_t *page,
                             hz_block_t *block) {
  hz_inbox_t *dest = &hz_page_heap(page)->inbox;
  uint8_t cls = page->class_id;
  size_t size = page->block_size;
  HZ_SHARED_ADD(heap->counts[cls].remote_frees, 1);
  HZ_SHARED_ADD(heap->stats.remote_frees, 1);
  HZ_SHARED_ADD(heap->stats.batches_published,
                hz_remote_stash(&heap->stash, dest, block, size));
  heap_publish_counts(heap, cls, false);
}

static void heap_free_large(hz_segment_t *seg, void *p) {
  if (seg->kind == HZ_SEGMENT_LARGE && hz_large_owns(seg, p)) {
    if (HZ_UNLIKELY(hz_prof_active)) hz_prof_forget(p, NULL);
    hz_large_free(seg);
    hz_purge_tick();
  } else if (seg->kind == HZ_SEGMENT_LARGE && hz_large_was_freed(seg, p)) {
    hz_check_fail("double free", p, 0, hz_large_usable_size(seg, p));
  } else {
    hz_check_report("invalid free", p, "not an allocated block");
  }
}

/* A block of a page with sampled blocks is freed: the profiler forgets
 * it, and the owner clears the flag once the page holds no sampled block
 * (another thread cannot; the owner's next free on the page does). */
static void heap_forget_sampled(hz_heap_t *heap, hz_page_t *page,
                                const hz_block_t *block) {
  if (!hz_prof_forget(block, page) && hz_page_heap(page) == heap)
    hz_page_set_flag(page, HZ_PAGE_SAMPLED, false);
}

/* The owner frees p on its page flagged for sampled blocks only, and the
 * profiler's filter says p is none of them: the fast path's work, and the
 * flag goes once the page holds no sampled block. False: not this case. */
static bool heap_free_unsampled(hz_heap_t *heap, hz_page_t *page, void *p) {
  if (hz_page_owner_word(page) != ((uintptr_t)heap | HZ_PAGE_SAMPLED) ||
      !hz_page_is_block(page, p, page->capacity) || hz_prof_may_be_sampled(p) ||
      !hz_check_freeing_fast(p))
    return false;
  if (!hz_prof_page_may_hold(page))
    hz_page_set_flag(page, HZ_PAGE_SAMPLED, false);
  hz_bin_t *bin = &heap->bins[page->class_id];
  bin->frees++;
  if (bin->top != bin->limit)
    *bin->top++ = p;
  else
    hz_heap_free_full_bin(heap, page, p);
  return true;
}

/* Every free the fast path did not finish: a page of another heap, a page
 * with a flag (aligned or sampled blocks), a large block, or a thread
 * without a heap. That last case gets back the block it must find a heap
 * for (thread box); otherwise NULL, the free done. */
hz_block_t *hz_heap_free_generic(hz_heap_t *heap, hz_segment_t *seg,
                                 hz_page_t *page, void *p) {
  if (heap_free_unsampled(heap, page, p)) return NULL;
  hz_heap_t *owner = hz_page_heap(page);
  if (owner == NULL) {
    heap_free_large(seg, p);
    return NULL;
  }
  hz_block_t *block = heap_block_to_free(page, p, owner == heap);
  if (block == NULL) return NULL;
  if (HZ_UNLIKELY(heap_page_is_retired(page))) {
    heap_double_free(page, block);
    return NULL;
  }
  hz_check_freeing(block, page->class_id, page->block_size);
  if (HZ_UNLIKELY(hz_page_flags(page) & HZ_PAGE_SAMPLED))
    heap_forget_sampled(heap, page, block);
  if (heap->state == HZ_HEAP_EMPTY) return block;
  hz_heap_free_block(heap, page, block);
  return NULL;
}

void hz_heap_free_block(hz_heap_t *heap, hz_page_t *page, hz_block_t *block) {
  heap->bins[page->class_id].frees++;
  if (hz_page_heap(page) == heap) {
    hz_heap_free_full_bin(heap, page, block);
    return;
  }
  heap_enter(heap);
  heap_free_remote(heap, page, block);
  heap_leave(heap);
}

void hz_heap_free_orphan(hz_page_t *page, hz_block_t *block) {
  uint8_t cls = page->class_id; /* the page may go once the block is home */
  hz_stats_count_orphan_free(cls, hz_remote_push_one(&hz_page_heap(page)->inbox,
                                                     block, page->block_size));
}

static void heap_flush_stash(hz_heap_t *heap) {
  if (!hz_remote_stash_empty(&heap->stash))
    HZ_SHARED_ADD(heap->stats.batches_published, hz_remote_flush(&heap->stash));
}

/* Most blocks one drain takes home; the rest wait in the backlog for the
 * next slow path, so no single malloc pays for a huge inbox. */
#define DRAIN_BUDGET 4096

/* The link an inbox block holds must name a block of one of our pages:
 * otherwise a freed block was overwritten, and what it names (an
 * attacker's address, or a block still live) must not be handed out. */
static bool heap_inbox_link_ok(const hz_heap_t *heap, const hz_block_t *next) {
  if (next == NULL) return true;
  hz_segment_t *seg = hz_segment_of(next);
  if (seg == NULL || seg->kind == HZ_SEGMENT_LARGE) return false;
  hz_page_t *page = hz_segment_page_of(seg, next);
  return hz_page_heap(page) == heap &&
         hz_page_is_block(page, next, page->reserved);
}

/* Put blocks received through the inbox into their bins (only the owner
 * may), or back on their pages when a bin is full. A spoilt link is
 * reported and ends the list: the blocks after it are lost. */
static void heap_drain_inbox(hz_heap_t *heap, bool into_bins) {
  hz_block_t *block = heap->backlog;
  if (block == NULL) {
    block = hz_remote_take_all(&heap->inbox);
    if (block == NULL) return;
    HZ_SHARED_ADD(heap->stats.inbox_drains, 1);
  }
  int n = 0;
  for (; block != NULL && n < DRAIN_BUDGET; n++) {
    hz_block_t *next = hz_block_next(block);
    if (HZ_UNLIKELY(!heap_inbox_link_ok(heap, next))) {
      hz_check_report(HZ_CHECK_CORRUPT_LIST, block,
                      "a block sent back by another thread");
      next = NULL;
    }
    hz_page_t *page = block_page(block);
    hz_block_t *ahead = hz_remote_skip(block, page->block_size);
    if (ahead != NULL) __builtin_prefetch(ahead, 1);
    HZ_ASSERT(hz_page_heap(page) == heap);
    hz_bin_t *bin = &heap->bins[page->class_id];
    if (HZ_UNLIKELY(heap_page_is_retired(page)))
      heap_double_free(page, block); /* freed again by another thread */
    else if (into_bins && bin->top != bin->limit)
      *bin->top++ = block; /* straight to malloc, no page round trip */
    else
      heap_page_put(heap, page, block);
    block = next;
  }
  HZ_SHARED_ADD(heap->stats.drained_blocks, (uint64_t)n);
  heap->backlog = block;
}

static bool heap_has_incoming(hz_heap_t *heap) {
  return heap->backlog != NULL || hz_remote_pending(&heap->inbox);
}

/* ---------------------------------------------------------------------------
 * Allocating
 * ------------------------------------------------------------------------- */
/* A page for class `cls` with room: a spare page, or a fresh one from the
 * segments. */
static hz_page_t *heap_new_page(hz_heap_t *heap, uint8_t cls) {
  hz_segment_kind_t kind = hz_segment_kind_for(hz_sizeclass_block_size(cls));
  hz_page_t *page = heap_spare_take(heap, kind, cls);
  if (page != NULL && page->class_id == cls) {
    hz_page_collect(page);
    if (hz_page_has_room(page)) return page;
  }
  if (page == NULL) {
    page = hz_segment_page_alloc(kind);
    if (page == NULL) return NULL;
    HZ_SHARED_ADD(heap->stats.pages_acquired, 1);
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
  for (uint32_t i = 0; i < n / 2; i++) {
    void *t = bin->top[i];
    bin->top[i] = bin->top[n - 1 - i];
    bin->top[n - 1 - i] = t;
  }
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
    HZ_SHARED_SET(page->used, (uint16_t)(page->used + taken));
    hz_page_check(page);
    HZ_ASSERT(bin->top <= bin->limit);
  }
  return bin->top > bin->base;
}

/* The block the countdown reached 0 on (it is counted): record it. */
static void *heap_sampled(hz_heap_t *heap, void *block, size_t size) {
  hz_page_t *page = block_page(block);
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
  heap_enter(heap);
  HZ_SHARED_ADD(heap->stats.slow_mallocs, 1);
  heap_flush_stash(heap);
  if (heap_has_incoming(heap)) heap_drain_inbox(heap, true);
  uint8_t cls = hz_sizeclass_of(size);
  hz_bin_t *bin = &heap->bins[cls];
  void *block = NULL;
  if (bin->top != bin->base || heap_refill(heap, cls)) {
    bin->sample_left--;
    block = hz_bin_take(bin, bin->top, cls);
    heap_publish_counts(heap, cls, false);
  }
  heap_leave(heap);
  if (HZ_UNLIKELY(bin->sample_left == 0) && block != NULL)
    return heap_sampled(heap, block, size);
  return block;
}

/* ---------------------------------------------------------------------------
 * Lifecycle
 * ------------------------------------------------------------------------- */
/* ---------------------------------------------------------------------------
 * Taking blocks out of an idle heap's bins
 *
 * The owner's fast path reads top and base and writes top, with no
 * handshake. The collector raises base to top - 1 in every bin, forces a
 * barrier on every thread, and reads top again: from then on each owner
 * operation sees the new base (and finds the bin empty below it), except
 * one that was under way across the barrier, which can pop only slot
 * top - 1 or push at top. So the slots below min(new base, top - 1) are
 * the collector's; it records that bound in stolen_end. The owner's next
 * slow path keeps [stolen_end, top) and moves it back to the start.
 * ------------------------------------------------------------------------- */
static void heap_bins_restore(hz_heap_t *heap) {
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    hz_bin_t *bin = &heap->bins[c];
    void **start = heap->bin_slots[c];
    if (bin->base == start) continue;
    void **from = bin->stolen_end != NULL ? bin->stolen_end : bin->base;
    size_t left = bin->top > from ? (size_t)(bin->top - from) : 0;
    memmove(start, from, left * sizeof *start);
    bin->base = start;
    bin->top = start + left;
    bin->stolen_end = NULL;
  }
  heap->bins_stolen = false;
}

static void heap_page_put(hz_heap_t *heap, hz_page_t *page, hz_block_t *block);
static hz_page_t *block_page(const void *block);

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
      if (old_base[c] != NULL) heap->bins[c].stolen_end = old_base[c];
    heap->bins_stolen = true;
    return;
  }
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    if (old_base[c] == NULL) continue;
    volatile hz_bin_t *bin = &heap->bins[c];
    void **end = bin->top - 1;
    if (end > bin->base) end = bin->base;
    for (void **slot = old_base[c]; slot < end; slot++) {
      heap_page_put(heap, block_page(*slot), *slot);
      HZ_SHARED_ADD(heap->stats.bin_blocks_taken, 1);
    }
    bin->stolen_end = end > old_base[c] ? end : old_base[c];
  }
  heap->bins_stolen = true;
}
#else
/* ThreadSanitizer cannot see the barrier the handshake relies on. */
static void heap_take_bins(hz_heap_t *heap) { (void)heap; }
#endif

static void heap_collect(hz_heap_t *heap) {
  heap_flush_stash(heap);
  while (heap_has_incoming(heap))
    heap_drain_inbox(heap, false);
  for (int c = 0; c < HZ_CLASS_COUNT; c++) {
    hz_page_t *page = heap->queues[c].first;
    while (page != NULL) {
      hz_page_t *next = page->next;
      if (page->used == 0) heap_retire_page(heap, page);
      page = next;
    }
  }
  heap_spare_release(heap);
}

/* Pages still in use keep only their live blocks resident. */
static void heap_discard_free_blocks(hz_heap_t *heap) {
  bool lazy = hz_option_enabled(HZ_OPTION_PURGE_MADV_FREE);
  for (int c = 0; c < HZ_CLASS_COUNT; c++)
    for (hz_page_t *page = heap->queues[c].first; page; page = page->next)
      hz_page_discard_free(page, lazy);
  for (hz_page_t *page = heap->full.first; page != NULL; page = page->next)
    hz_page_discard_free(page, lazy);
}

static void heap_spill_all_bins(hz_heap_t *heap) {
  for (int c = 1; c < HZ_CLASS_COUNT; c++) /* class 0: large, no bin */
    heap_bin_spill(heap, &heap->bins[c], bin_count(&heap->bins[c]));
}

/* Only a collection that purged leaves the heap clean for purge rounds:
 * one that just recycled it still has free blocks to discard. */
void hz_heap_collect(hz_heap_t *heap, bool purge, hz_bins_take_t bins) {
  HZ_SHARED_ADD(heap->stats.collections, 1);
  if (bins == HZ_BINS_ALL) {
    if (heap->bins_stolen) heap_bins_restore(heap);
    heap_spill_all_bins(heap);
  } else if (purge && bins == HZ_BINS_BELOW_TOP) {
    heap_take_bins(heap);
  }
  heap_collect(heap);
  if (!purge) return;
  heap_discard_free_blocks(heap);
  heap->collect_seen =
      atomic_load_explicit(&heap->activity, memory_order_relaxed);
  heap->collect_clean = true;
}

static void heap_publish_all_counts(hz_heap_t *heap) {
  for (int c = 1; c < HZ_CLASS_COUNT; c++)
    heap_publish_counts(heap, (uint8_t)c, true);
}

/* The owner returns what it can: its bins too, then what a collector
 * would, and with `discard` the memory of free blocks in its pages. Pages
 * with live blocks stay with the heap while it is pooled. */
static void heap_give_back(hz_heap_t *heap, bool discard) {
  heap_enter(heap);
  heap_spill_all_bins(heap);
  heap_publish_all_counts(heap);
  heap_collect(heap);
  if (discard) heap_discard_free_blocks(heap);
  heap_leave(heap);
}

void hz_heap_flush(hz_heap_t *heap) { heap_give_back(heap, false); }

void hz_heap_park(hz_heap_t *heap) {
  heap_enter(heap);
  heap_flush_stash(heap);
  heap_publish_all_counts(heap);
  heap_leave(heap);
}

void hz_heap_trim(hz_heap_t *heap) { heap_give_back(heap, true); }

void hz_heap_publish_all(hz_heap_t *heap) {
  heap_enter(heap);
  heap_publish_all_counts(heap);
  heap_leave(heap);
}

void hz_heap_summarize_one(const hz_heap_t *heap, hz_heap_summary_t *out) {
  hz_stats_heap_add(&out->counters, &heap->stats);
  out->counters.inbox_cas_retries += HZ_SHARED_GET(heap->stash.cas_retries);
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    const hz_class_counts_t *counts = &heap->counts[c];
    out->classes[c].allocs += HZ_SHARED_GET(counts->allocs);
    out->classes[c].frees += HZ_SHARED_GET(counts->frees);
    out->classes[c].remote_frees += HZ_SHARED_GET(counts->remote_frees);
  }
  out->heaps_total++;
  if (heap->state == HZ_HEAP_POOLED) out->heaps_pooled++;
}
