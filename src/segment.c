/* segment: mapping, registering and recycling 4 MiB segments, handing
 * out their pages, and giving the memory of free pages back to the kernel
 * after the purge delay. One mutex guards the per-kind lists, the cache
 * and the purge list; it is taken only when a heap needs a fresh page or
 * gives an empty one back (and by the purge), never on a malloc/free fast
 * path.
 *
 * Invariants: a segment is in lists[kind] iff it has a free page; a
 * segment with no used page is cached (up to SEGMENT_CACHE_MAX) or
 * unmapped; the map entry of a segment is set for exactly as long as it is
 * mapped; dirty_slices never includes a slice of an allocated page, and a
 * segment is on the purge list iff it has a dirty slice. */
#include "segment.h"

#include <pthread.h>
#include <string.h>

#include "list.h"
#include "lock.h"
#include "options.h"
#include "os.h"

/* Empty segments stay mapped for reuse (their memory purged after the
 * delay like any free page); at most SEGMENT_CACHE_MAX of them. */
#define SEGMENT_CACHE_MAX 64
/* With transparent huge pages, a purge that is not forced gives back only
 * whole huge pages (half a segment), so it never splits one. */
#define SEGMENT_HUGE_SLICES 32

_Atomic uint8_t hz_segment_map[HZ_SEGMENT_MAP_ENTRIES];

_Static_assert(sizeof(hz_segment_t) <= HZ_SEGMENT_META_SIZE,
               "segment header too large");

static hz_lock_t segment_lock = HZ_LOCK_INIT;
static hz_segment_t *segment_lists[HZ_SEGMENT_KINDS];
static hz_segment_t *segment_cache; /* empty segments, newest first */
static hz_segment_t *segment_all;   /* mapped page segments, by all_next */
static size_t segment_cache_count;
static _Atomic size_t segment_live;
/* Dirty segments, oldest first (purge_due grows along the list). */
static hz_segment_queue_t purge_queue;
static _Atomic uint64_t purge_next_due = UINT64_MAX;
static _Atomic size_t dirty_bytes;
static int segment_huge = -1; /* THP backs our segments (-1: not known) */

/* The second map: FAR_LEAVES pointers to pages of FAR_LEAF entries, each
 * page mapped when the first segment of its 16 GiB is registered and kept. */
#define FAR_LEAF   ((size_t)4096)
#define FAR_LEAVES (((size_t)1 << (47 - HZ_SEGMENT_SHIFT)) / FAR_LEAF)
static _Atomic(_Atomic uint8_t *) far_leaves[FAR_LEAVES];

unsigned hz_segment_page_shift_far(const void *p) {
  size_t index = ((uintptr_t)p - 1) >> HZ_SEGMENT_SHIFT;
  if (index >= FAR_LEAVES * FAR_LEAF) return 0; /* NULL included */
  _Atomic uint8_t *leaf =
      atomic_load_explicit(&far_leaves[index / FAR_LEAF], memory_order_acquire);
  if (leaf == NULL) return 0;
  return atomic_load_explicit(&leaf[index % FAR_LEAF], memory_order_relaxed);
}

/* Where the entry of a segment lives; NULL when its page of the second map
 * cannot be had (with `make`, a new one is mapped). */
static _Atomic uint8_t *segment_map_entry(const hz_segment_t *seg, bool make) {
  size_t index = (uintptr_t)seg >> HZ_SEGMENT_SHIFT;
  if (index < HZ_SEGMENT_MAP_ENTRIES) return &hz_segment_map[index];
  _Atomic(_Atomic uint8_t *) *slot = &far_leaves[index / FAR_LEAF];
  _Atomic uint8_t *leaf = atomic_load_explicit(slot, memory_order_acquire);
  if (leaf == NULL && make) {
    _Atomic uint8_t *fresh = hz_os_map(FAR_LEAF);
    if (fresh == NULL) return NULL;
    if (atomic_compare_exchange_strong_explicit(
            slot, &leaf, fresh, memory_order_acq_rel, memory_order_acquire))
      leaf = fresh;
    else
      hz_os_unmap(fresh, FAR_LEAF); /* another thread's page won */
  }
  return leaf != NULL ? &leaf[index % FAR_LEAF] : NULL;
}

static void segment_map_set(hz_segment_t *seg, uint8_t entry) {
  _Atomic uint8_t *at = segment_map_entry(seg, false);
  HZ_ASSERT(at != NULL);
  atomic_store_explicit(at, entry, memory_order_release);
}

bool hz_segment_map_reserve(const void *seg) {
  return segment_map_entry(seg, true) != NULL;
}

bool hz_segment_register(hz_segment_t *seg) {
  HZ_ASSERT(seg->page_shift != 0);
  _Atomic uint8_t *at = segment_map_entry(seg, true);
  if (at == NULL) return false;
  atomic_store_explicit(at, seg->page_shift, memory_order_release);
  atomic_fetch_add_explicit(&segment_live, 1, memory_order_relaxed);
  return true;
}

void hz_segment_unregister(hz_segment_t *seg) {
  segment_map_set(seg, 0);
  atomic_fetch_sub_explicit(&segment_live, 1, memory_order_relaxed);
}

size_t hz_segment_count(void) {
  return atomic_load_explicit(&segment_live, memory_order_relaxed);
}

void hz_segment_guard(hz_segment_t *seg, size_t map_size) {
  if (!HZ_SECURE) return;
  uint8_t *base = (uint8_t *)seg;
  hz_os_protect(base + HZ_SEGMENT_META_SIZE, HZ_GUARD_SIZE, false);
  hz_os_protect(base + map_size - HZ_GUARD_SIZE, HZ_GUARD_SIZE, false);
}

hz_segment_kind_t hz_segment_kind_for(size_t block_size) {
  if (block_size <= HZ_SMALL_BLOCK_MAX) return HZ_SEGMENT_SMALL;
  if (block_size <= HZ_MEDIUM_BLOCK_MAX) return HZ_SEGMENT_MEDIUM;
  if (block_size <= HZ_WIDE_BLOCK_MAX) return HZ_SEGMENT_WIDE;
  return HZ_SEGMENT_BIG;
}

hz_segment_t *hz_segment_of_page(const hz_page_t *page) {
  return (hz_segment_t *)((uintptr_t)page & ~(uintptr_t)HZ_SEGMENT_MASK);
}

static unsigned segment_page_shift(hz_segment_kind_t kind) {
  switch (kind) {
  case HZ_SEGMENT_SMALL: return HZ_SMALL_PAGE_SHIFT;
  case HZ_SEGMENT_MEDIUM: return HZ_MEDIUM_PAGE_SHIFT;
  case HZ_SEGMENT_WIDE: return HZ_WIDE_PAGE_SHIFT;
  default: return HZ_SEGMENT_SHIFT;
  }
}

/* Lay out the header for `kind` and push every page on the free stack. */
static void segment_format(hz_segment_t *seg, hz_segment_kind_t kind) {
  hz_segment_t saved = *seg;
  memset(seg, 0, sizeof *seg);
  seg->all_next = saved.all_next;
  seg->all_prev = saved.all_prev;
  seg->dirty_slices = saved.dirty_slices;
  seg->purge_due = saved.purge_due;
  seg->purge_next = saved.purge_next;
  seg->purge_prev = saved.purge_prev;
  unsigned shift = segment_page_shift(kind);
  seg->kind = (uint8_t)kind;
  seg->page_shift = (uint8_t)shift;
  seg->page_count = (uint16_t)(HZ_SEGMENT_SIZE >> shift);
  seg->map_size = HZ_SEGMENT_SIZE;
  uint8_t *base = (uint8_t *)seg;
  for (int i = seg->page_count - 1; i >= 0; i--) {
    hz_page_t *page = &seg->pages[i];
    uint8_t *start = base + ((size_t)i << shift);
    if (i == 0) start = base + HZ_SEGMENT_HEADER_SIZE;
    hz_page_set_start(page, start);
    uint8_t *end = base + ((size_t)(i + 1) << shift);
    if (i == seg->page_count - 1) end -= HZ_GUARD_SIZE;
    page->area = (uint32_t)(end - start);
    page->next = seg->free_pages;
    seg->free_pages = page;
  }
}

static void list_push(hz_segment_t **list, hz_segment_t *seg) {
  seg->prev = NULL;
  seg->next = *list;
  if (*list != NULL) (*list)->prev = seg;
  *list = seg;
}

static void list_remove(hz_segment_t **list, hz_segment_t *seg) {
  if (seg->prev != NULL)
    seg->prev->next = seg->next;
  else
    *list = seg->next;
  if (seg->next != NULL) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
}

static bool segment_thp(void) {
  if (segment_huge < 0)
    segment_huge = hz_option_enabled(HZ_OPTION_THP) && hz_os_thp_always();
  return segment_huge;
}

/* A cached segment keeps its map entry, which names its page size: a
 * new kind updates it. */
static hz_segment_t *segment_new(hz_segment_kind_t kind) {
  hz_segment_t *seg = segment_cache;
  if (seg != NULL) {
    segment_cache = seg->next;
    segment_cache_count--;
    segment_format(seg, kind);
    segment_map_set(seg, seg->page_shift);
    return seg;
  }
  seg = hz_os_map_aligned(HZ_SEGMENT_SIZE, HZ_SEGMENT_SIZE);
  if (seg == NULL) return NULL;
  if (!hz_option_enabled(HZ_OPTION_THP))
    hz_os_huge_pages(seg, HZ_SEGMENT_SIZE, false);
  hz_segment_guard(seg, HZ_SEGMENT_SIZE);
  segment_format(seg, kind);
  if (!hz_segment_register(seg)) {
    hz_os_unmap(seg, HZ_SEGMENT_SIZE);
    return NULL;
  }
  seg->all_next = segment_all;
  if (segment_all != NULL) segment_all->all_prev = seg;
  segment_all = seg;
  return seg;
}

/* ---------------------------------------------------------------------------
 * Dirty slices and the purge list
 * ------------------------------------------------------------------------- */
static uint64_t page_slices(const hz_segment_t *seg, const hz_page_t *page) {
  unsigned per_page = 1u << (seg->page_shift - HZ_SLICE_SHIFT);
  unsigned first = (unsigned)(page - seg->pages) * per_page;
  uint64_t bits = per_page == 64 ? ~(uint64_t)0 : ((uint64_t)1 << per_page) - 1;
  return bits << first;
}

void hz_segment_queue_remove(hz_segment_queue_t *q, hz_segment_t *seg) {
  HZ_LIST_REMOVE(q, first, last, seg, purge_next, purge_prev);
}

void hz_segment_queue_append(hz_segment_queue_t *q, hz_segment_t *seg,
                             uint64_t due) {
  seg->purge_due = due;
  HZ_LIST_PUSH_BACK(q, first, last, seg, purge_next, purge_prev);
}

uint64_t hz_segment_queue_next_due(const hz_segment_queue_t *q) {
  return q->first != NULL ? q->first->purge_due : UINT64_MAX;
}

uint64_t hz_segment_purge_due_from(uint64_t now) {
  long delay = hz_option(HZ_OPTION_PURGE_DELAY_MS);
  return delay < 0 ? UINT64_MAX : now + (uint64_t)delay;
}

static void purge_publish_next(void) {
  atomic_store_explicit(&purge_next_due,
                        hz_segment_queue_next_due(&purge_queue),
                        memory_order_relaxed);
}

static void set_dirty(hz_segment_t *seg, uint64_t bits) {
  uint64_t added = bits & ~seg->dirty_slices;
  atomic_fetch_add_explicit(
      &dirty_bytes, (size_t)__builtin_popcountll(added) << HZ_SLICE_SHIFT,
      memory_order_relaxed);
  seg->dirty_slices |= bits;
}

static void clear_dirty(hz_segment_t *seg, uint64_t bits) {
  uint64_t removed = bits & seg->dirty_slices;
  if (removed == 0) return;
  atomic_fetch_sub_explicit(
      &dirty_bytes, (size_t)__builtin_popcountll(removed) << HZ_SLICE_SHIFT,
      memory_order_relaxed);
  seg->dirty_slices &= ~bits;
  if (seg->dirty_slices == 0) {
    hz_segment_queue_remove(&purge_queue, seg);
    purge_publish_next();
  }
}

/* Give back the slices in `bits` (a run); slice 0 keeps the header. */
static void discard_slices(hz_segment_t *seg, uint64_t bits) {
  unsigned first = (unsigned)__builtin_ctzll(bits);
  unsigned count = (unsigned)__builtin_popcountll(bits);
  size_t from = (size_t)first << HZ_SLICE_SHIFT;
  size_t to = (size_t)(first + count) << HZ_SLICE_SHIFT;
  if (from < HZ_SEGMENT_HEADER_SIZE) from = HZ_SEGMENT_HEADER_SIZE;
  hz_os_discard((uint8_t *)seg + from, to - from,
                hz_option_enabled(HZ_OPTION_PURGE_MADV_FREE));
}

/* Discard every run of dirty slices within `allowed`; returns those done. */
static uint64_t discard_runs(hz_segment_t *seg, uint64_t allowed) {
  uint64_t todo = seg->dirty_slices & allowed, done = todo;
  while (todo != 0) {
    uint64_t low = todo & -todo;         /* lowest dirty slice */
    uint64_t run = todo & ~(todo + low); /* the run of ones from there */
    discard_slices(seg, run);
    todo &= ~run;
  }
  return done;
}

/* Purge what may go now: with huge pages only halves that are wholly
 * free, unless forced. */
static void segment_purge_one(hz_segment_t *seg, bool force) {
  uint64_t allowed = ~seg->used_slices;
  if (!force && segment_thp()) {
    uint64_t half = ((uint64_t)1 << SEGMENT_HUGE_SLICES) - 1;
    allowed = 0;
    if ((seg->used_slices & half) == 0) allowed |= half;
    if ((seg->used_slices & (half << SEGMENT_HUGE_SLICES)) == 0)
      allowed |= half << SEGMENT_HUGE_SLICES;
  }
  clear_dirty(seg, discard_runs(seg, allowed));
}

/* A page went back to its segment: its slices are dirty from now on. */
static void segment_note_free(hz_segment_t *seg, uint64_t bits) {
  seg->used_slices &= ~bits;
  bool was_clean = seg->dirty_slices == 0;
  set_dirty(seg, bits);
  if (was_clean) {
    hz_segment_queue_append(&purge_queue, seg,
                            hz_segment_purge_due_from(hz_os_now_ms()));
    purge_publish_next();
  }
  if (hz_option(HZ_OPTION_PURGE_DELAY_MS) == 0) segment_purge_one(seg, false);
}

static void segment_note_alloc(hz_segment_t *seg, uint64_t bits) {
  seg->used_slices |= bits;
  clear_dirty(seg, bits);
}

static void segment_unmap(hz_segment_t *seg) {
  if (seg->dirty_slices != 0) clear_dirty(seg, seg->dirty_slices);
  if (seg->all_prev != NULL)
    seg->all_prev->all_next = seg->all_next;
  else
    segment_all = seg->all_next;
  if (seg->all_next != NULL) seg->all_next->all_prev = seg->all_prev;
  hz_segment_unregister(seg);
  hz_os_unmap(seg, HZ_SEGMENT_SIZE);
}

/* Unmap the cached segments beyond the first `keep` (the cache is newest
 * first, so the oldest go). */
static void segment_cache_trim(size_t keep) {
  hz_segment_t **link = &segment_cache;
  size_t kept = 0;
  while (*link != NULL) {
    hz_segment_t *seg = *link;
    if (kept < keep) {
      kept++;
      link = &seg->next;
      continue;
    }
    *link = seg->next;
    segment_unmap(seg);
  }
  segment_cache_count = kept;
}

static void segment_release(hz_segment_t *seg) {
  seg->next = segment_cache;
  segment_cache = seg;
  segment_cache_trim(SEGMENT_CACHE_MAX);
}

void hz_segment_summarize(size_t *pages, size_t *blocks, size_t *bytes) {
  *pages = *blocks = *bytes = 0;
  hz_lock(&segment_lock);
  for (hz_segment_t *seg = segment_all; seg != NULL; seg = seg->all_next) {
    for (int i = 0; i < seg->page_count; i++) {
      const hz_page_t *page = &seg->pages[i];
      if (hz_page_heap(page) == NULL) continue;
      size_t used = HZ_SHARED_GET(page->used);
      *pages += 1;
      *blocks += used;
      *bytes += used * HZ_SHARED_GET(page->block_size);
    }
  }
  hz_unlock(&segment_lock);
}

hz_page_t *hz_segment_page_alloc(hz_segment_kind_t kind) {
  hz_lock(&segment_lock);
  hz_segment_t *seg = segment_lists[kind];
  if (seg == NULL) {
    seg = segment_new(kind);
    if (seg != NULL) list_push(&segment_lists[kind], seg);
  }
  hz_page_t *page = NULL;
  if (seg != NULL) {
    page = seg->free_pages;
    seg->free_pages = page->next;
    page->next = page->prev = NULL;
    seg->used_pages++;
    segment_note_alloc(seg, page_slices(seg, page));
    if (seg->free_pages == NULL) list_remove(&segment_lists[kind], seg);
  }
  hz_unlock(&segment_lock);
  return page;
}

void hz_segment_page_free(hz_page_t *page) {
  hz_segment_t *seg = hz_segment_of_page(page);
  hz_lock(&segment_lock);
  hz_page_set_heap(page, NULL);
  page->class_id = 0;
  page->free = page->local_free = NULL;
  page->next = seg->free_pages;
  page->prev = NULL;
  if (seg->free_pages == NULL) list_push(&segment_lists[seg->kind], seg);
  seg->free_pages = page;
  seg->used_pages--;
  segment_note_free(seg, page_slices(seg, page));
  if (seg->used_pages == 0) {
    list_remove(&segment_lists[seg->kind], seg);
    segment_release(seg);
  }
  hz_unlock(&segment_lock);
}

/* One segment per lock hold, so page allocation waits at most for one
 * segment's madvise. The list is in due order: stop at the first not due. */
uint64_t hz_segment_purge(uint64_t now, bool force) {
  hz_segment_t *stop = NULL;
  for (;;) {
    hz_lock(&segment_lock);
    hz_segment_t *seg = purge_queue.first;
    if (seg == NULL || seg == stop || (!force && seg->purge_due > now)) {
      if (force) segment_cache_trim(0);
      hz_unlock(&segment_lock);
      return atomic_load_explicit(&purge_next_due, memory_order_relaxed);
    }
    segment_purge_one(seg, force);
    if (seg->dirty_slices != 0) { /* held back by huge pages: later */
      hz_segment_queue_remove(&purge_queue, seg);
      hz_segment_queue_append(&purge_queue, seg,
                              hz_segment_purge_due_from(now));
      if (stop == NULL) stop = seg;
    }
    purge_publish_next();
    hz_unlock(&segment_lock);
  }
}

uint64_t hz_segment_purge_next(void) {
  return atomic_load_explicit(&purge_next_due, memory_order_relaxed);
}

void hz_segment_cached(size_t *segments, size_t *dirty) {
  hz_lock(&segment_lock);
  *segments = segment_cache_count;
  hz_unlock(&segment_lock);
  *dirty = atomic_load_explicit(&dirty_bytes, memory_order_relaxed);
}

uint64_t hz_segment_lock_taken(void) { return hz_lock_taken(&segment_lock); }

void hz_segment_fork_prepare(void) { hz_lock(&segment_lock); }
void hz_segment_fork_parent(void) { hz_unlock(&segment_lock); }
void hz_segment_fork_child(void) { hz_lock_reinit(&segment_lock); }
