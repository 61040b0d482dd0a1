/* segment: segments of slices and the pages cut from them, each heap's set
 * of segments, the process-wide cache of empty segments, huge pages by
 * 2 MiB region, giving free slices back to the kernel after the purge
 * delay. The map of segments is segment_map.c's.
 *
 * Locks: a heap's own set is its owner's alone; the set the class heaps
 * share has a lock, taken around each call that reads or changes it. Each
 * segment's lock guards its slice bitmaps against the purge; the owner
 * takes it when it cuts or frees a page (nobody else wants it then). The
 * process-wide segment lock guards the cache, the list of all segments,
 * the arena and the purge walk; it is taken per 4 MiB segment that changes
 * hands, never per page. Order: a set's lock, the segment lock, a
 * segment's lock.
 *
 * Invariants: a segment is on its set's room list iff it has a free slice;
 * a set keeps at most one segment with no page (`empty`), others go to the
 * cache (at most SEGMENT_CACHE_MAX) and then back to the arena or the
 * kernel; dirty_slices never includes a used slice; the map entry of a
 * segment outside the arena is set for exactly as long as it is mapped. */
#include "segment.h"

#include <stddef.h>

#include <string.h>

#include "arena.h"
#include "list.h"
#include "options.h"
#include "os.h"

/* Empty segments kept mapped process-wide, their memory purged after the
 * delay like any free slice. */
#define SEGMENT_CACHE_MAX 16
#define REGION_MASK       (((uint64_t)1 << HZ_REGION_SLICES) - 1)

_Static_assert(sizeof(hz_segment_t) <= HZ_SEGMENT_META_SIZE,
               "segment header too large");
_Static_assert(offsetof(hz_segment_t, tallies) <= HZ_LARGE_META_SIZE,
               "a large block's header holds all but the bitmaps");

static hz_lock_t segment_lock = HZ_LOCK_INIT(HZ_LOCK_ID_SEGMENTS);
static hz_segment_t *segment_cache; /* empty segments, newest first */
static size_t segment_cache_count;
static hz_segment_t *segment_all; /* every segment of pages, by all_next */
static _Atomic uint64_t purge_next_due = UINT64_MAX;

static const uint8_t kind_slices[HZ_KIND_COUNT] = {1, 2, 8, HZ_REGION_SLICES};

void hz_segment_guard(hz_segment_t *seg, size_t map_size) {
  if (!HZ_SECURE) return;
  uint8_t *base = (uint8_t *)seg;
  size_t meta =
      seg->kind == HZ_SEGMENT_LARGE ? HZ_LARGE_META_SIZE : HZ_SEGMENT_META_SIZE;
  hz_os_protect(base + meta, HZ_GUARD_SIZE, false);
  hz_os_protect(base + map_size - HZ_GUARD_SIZE, HZ_GUARD_SIZE, false);
}

hz_page_kind_t hz_segment_kind_for(size_t block_size) {
  if (block_size <= HZ_SMALL_BLOCK_MAX) return HZ_KIND_SMALL;
  if (block_size <= HZ_MEDIUM_BLOCK_MAX) return HZ_KIND_MEDIUM;
  if (block_size <= HZ_WIDE_BLOCK_MAX) return HZ_KIND_WIDE;
  return HZ_KIND_BIG;
}

hz_segment_t *hz_segment_of_page(const hz_page_t *page) {
  return (hz_segment_t *)((uintptr_t)page & ~(uintptr_t)HZ_SEGMENT_MASK);
}

/* ---------------------------------------------------------------------------
 * Segments changing hands (under the segment lock)
 * ------------------------------------------------------------------------- */
static void all_link(hz_segment_t *seg) {
  seg->all_prev = NULL;
  seg->all_next = segment_all;
  if (segment_all != NULL) segment_all->all_prev = seg;
  segment_all = seg;
}

static void all_unlink(hz_segment_t *seg) {
  if (seg->all_prev != NULL)
    seg->all_prev->all_next = seg->all_next;
  else
    segment_all = seg->all_next;
  if (seg->all_next != NULL) seg->all_next->all_prev = seg->all_prev;
}

/* A header for a segment whose memory reads as zeros. */
static void segment_format(hz_segment_t *seg, bool mapped) {
  seg->kind = HZ_SEGMENT_PAGES;
  seg->page_shift = HZ_SLICE_SHIFT;
  seg->mapped = mapped;
  seg->map_size = HZ_SEGMENT_SIZE;
  hz_lock_init(&seg->lock, HZ_LOCK_ID_SEGMENT);
}

/* A segment mapped on its own when the arena has none left. */
static hz_segment_t *segment_map_new(void) {
  hz_segment_t *seg = hz_os_map_aligned(HZ_SEGMENT_SIZE, HZ_SEGMENT_SIZE);
  if (seg == NULL) return NULL;
  hz_arena_advise(seg, HZ_SEGMENT_SIZE);
  segment_format(seg, true);
  if (!hz_segment_map_set(seg, HZ_SLICE_SHIFT)) {
    hz_os_unmap(seg, HZ_SEGMENT_SIZE);
    return NULL;
  }
  return seg;
}

/* An empty segment for a set: a cached one (its slices maybe resident),
 * else one from the arena, else one of its own. Of the system calls, only
 * the arena's commit (an mprotect, once per segment of its span) runs
 * under the segment lock, which orders the arena's span: a segment mapped
 * on its own (mmap, munmap, madvise) and the secure variants' guard pages
 * (two mprotects) are made before the segment is linked where the purge
 * can see it, and no other thread waits for them. */
static hz_segment_t *segment_acquire(void) {
  hz_lock(&segment_lock);
  hz_segment_t *seg = segment_cache;
  if (seg != NULL) {
    segment_cache = seg->next;
    segment_cache_count--;
    hz_unlock(&segment_lock);
    return seg;
  }
  seg = hz_arena_take();
  hz_unlock(&segment_lock);
  if (seg != NULL)
    segment_format(seg, false);
  else
    seg = segment_map_new();
  if (seg == NULL) return NULL;
  hz_segment_guard(seg, HZ_SEGMENT_SIZE);
  hz_lock(&segment_lock);
  all_link(seg);
  hz_unlock(&segment_lock);
  hz_segment_count_add(1);
  return seg;
}

/* Segments the cache let go: unlinked from everything under the segment
 * lock (segment_cache_cut), given back outside it (segments_give_back), so
 * no thread that wants the lock waits for their system calls. */
static hz_segment_t *segment_cache_cut(size_t keep) {
  hz_segment_t **link = &segment_cache, *gone = NULL;
  size_t kept = 0;
  while (*link != NULL) {
    hz_segment_t *seg = *link;
    if (kept < keep || seg->pinned != 0) { /* a purge's: the next trim's */
      kept++;
      link = &seg->next;
      continue;
    }
    *link = seg->next;
    all_unlink(seg);
    hz_segment_count_add(-1);
    seg->next = gone;
    gone = seg;
  }
  segment_cache_count = kept;
  return gone;
}

/* Back to the kernel, or to the arena (whose discard makes it read as
 * zeros: no page in use), each of the cut segments. */
static void segments_give_back(hz_segment_t *gone) {
  while (gone != NULL) {
    hz_segment_t *seg = gone;
    gone = seg->next;
    if (seg->mapped) {
      hz_segment_map_set(seg, 0);
      hz_os_unmap(seg, HZ_SEGMENT_SIZE);
      continue;
    }
    if (seg->huge != 0) hz_arena_advise(seg, HZ_SEGMENT_SIZE);
    hz_arena_discard(seg);
    hz_lock(&segment_lock);
    hz_arena_give(seg);
    hz_unlock(&segment_lock);
  }
}

static void segment_release(hz_segment_t *seg) {
  hz_lock(&segment_lock);
  HZ_SHARED_SET(seg->set, NULL);
  seg->next = segment_cache;
  segment_cache = seg;
  segment_cache_count++;
  hz_segment_t *gone = segment_cache_cut(SEGMENT_CACHE_MAX);
  hz_unlock(&segment_lock);
  segments_give_back(gone);
}

/* ---------------------------------------------------------------------------
 * Dirty slices and the purge
 * ------------------------------------------------------------------------- */
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

/* Lower the process-wide next due to `due` if it is earlier: a write only
 * when nothing earlier waits, so frees rarely touch the shared word. */
static void purge_note_due(uint64_t due) {
  uint64_t next = atomic_load_explicit(&purge_next_due, memory_order_relaxed);
  while (due < next && !atomic_compare_exchange_weak_explicit(
                           &purge_next_due, &next, due, memory_order_relaxed,
                           memory_order_relaxed)) {
  }
}

static uint64_t region_bits(unsigned region) {
  return REGION_MASK << (region * HZ_REGION_SLICES);
}

/* Give back the slices in `run` (contiguous); slice 0 keeps the header. */
static void discard_run(hz_segment_t *seg, uint64_t run) {
  unsigned first = (unsigned)__builtin_ctzll(run);
  unsigned count = (unsigned)__builtin_popcountll(run);
  size_t from = (size_t)first << HZ_SLICE_SHIFT;
  size_t to = (size_t)(first + count) << HZ_SLICE_SHIFT;
  if (from < HZ_SEGMENT_HEADER_SIZE) from = HZ_SEGMENT_HEADER_SIZE;
  hz_os_discard((uint8_t *)seg + from, to - from,
                hz_option_enabled(HZ_OPTION_PURGE_MADV_FREE));
}

/* Purge what may go now (segment's lock held): the aged slices, or with
 * `all` every dirty one; in a region backed by a huge page only when the
 * whole region is free, so a routine purge never splits one; anything
 * free when forced. What stays dirty ages for the next round. */
static void segment_purge_one(hz_segment_t *seg, bool all, bool force) {
  uint64_t allowed = ~seg->used_slices;
  for (unsigned r = 0; r < HZ_REGIONS_PER_SEGMENT && !force; r++)
    if ((seg->huge >> r & 1) && (seg->used_slices & region_bits(r)) != 0)
      allowed &= ~region_bits(r);
  if (!all && !force) allowed &= seg->aged_slices;
  uint64_t todo = seg->dirty_slices & allowed;
  seg->dirty_slices &= ~todo;
  seg->aged_slices = seg->dirty_slices;
  while (todo != 0) {
    uint64_t low = todo & -todo;         /* lowest slice to give back */
    uint64_t run = todo & ~(todo + low); /* the run of ones from there */
    discard_run(seg, run);
    todo &= ~run;
  }
}

/* One segment at a time, under its lock (its owner waits at most for that
 * segment's madvise), with the segment lock let go meanwhile: the segment
 * is pinned, kept linked, so the walk goes on from it. */
uint64_t hz_segment_purge(uint64_t now, bool force) {
  hz_lock(&segment_lock);
  atomic_store_explicit(&purge_next_due, UINT64_MAX, memory_order_relaxed);
  uint64_t next = UINT64_MAX;
  for (hz_segment_t *seg = segment_all; seg != NULL; seg = seg->all_next) {
    uint64_t due = HZ_SHARED_GET(seg->purge_due);
    if (due == 0) continue; /* nothing dirty */
    if (!force && due > now) {
      if (due < next) next = due;
      continue;
    }
    seg->pinned++; /* a count: two purges (a trim's, the thread's) may meet */
    hz_unlock(&segment_lock);
    hz_lock(&seg->lock);
    segment_purge_one(seg, false, force);
    due = seg->dirty_slices == 0 ? 0 : hz_segment_purge_due_from(now);
    HZ_SHARED_SET(seg->purge_due, due); /* held back by a huge page */
    hz_unlock(&seg->lock);
    hz_lock(&segment_lock);
    seg->pinned--;
    if (due != 0 && due < next) next = due;
  }
  hz_segment_t *gone = force ? segment_cache_cut(0) : NULL;
  hz_unlock(&segment_lock);
  segments_give_back(gone);
  purge_note_due(next);
  return atomic_load_explicit(&purge_next_due, memory_order_relaxed);
}

uint64_t hz_segment_purge_next(void) {
  return atomic_load_explicit(&purge_next_due, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------
 * Huge pages by region
 * ------------------------------------------------------------------------- */
static bool huge_allowed(void) {
  return hz_option_enabled(HZ_OPTION_THP) && hz_os_thp_mode() != 0;
}

/* Regions worth a huge page: every slice in a page and at least 7/8 of
 * the region resident already, so the huge page adds at most 1/8 to the
 * resident set; found under the segment lock, collapsed outside it. A
 * region looked at and found sparse is looked at again once a page of
 * it changes. */
#define DENSE_RESIDENT_EIGHTHS 7
#define COLLAPSE_PER_ROUND     2

static unsigned densify_candidates(uint8_t **out, unsigned max) {
  unsigned n = 0;
  hz_lock(&segment_lock);
  for (hz_segment_t *seg = segment_all; seg != NULL && n < max;
       seg = seg->all_next) {
    hz_lock(&seg->lock);
    for (unsigned r = 0; r < HZ_REGIONS_PER_SEGMENT && n < max; r++) {
      unsigned bit = 1u << r;
      if ((seg->huge | seg->looked) & bit ||
          (seg->used_slices & region_bits(r)) != region_bits(r))
        continue;
      seg->looked |= (uint8_t)bit;
      out[n++] = (uint8_t *)seg + ((size_t)r << 21);
    }
    hz_unlock(&seg->lock);
  }
  hz_unlock(&segment_lock);
  return n;
}

static void region_mark_huge(uint8_t *region) {
  hz_segment_t *seg = hz_segment_base(region + 1);
  hz_lock(&seg->lock);
  seg->huge |= (uint8_t)(1u << (((uintptr_t)region >> 21) & 1));
  hz_unlock(&seg->lock);
}

void hz_segment_densify(void) {
  if (!huge_allowed()) return;
  uint8_t *regions[COLLAPSE_PER_ROUND];
  unsigned n = densify_candidates(regions, COLLAPSE_PER_ROUND);
  size_t size = (size_t)HZ_REGION_SLICES << HZ_SLICE_SHIFT;
  for (unsigned i = 0; i < n; i++) {
    if (hz_os_resident(regions[i], size) * 8 < size * DENSE_RESIDENT_EIGHTHS)
      continue;
    hz_arena_advise_huge(regions[i], size);
    if (hz_os_collapse(regions[i], size))
      region_mark_huge(regions[i]);
    else
      hz_arena_advise(regions[i], size);
  }
}

/* ---------------------------------------------------------------------------
 * Pages from a set
 * ------------------------------------------------------------------------- */
/* The bits of slices first .. first+n-1 (n at most 32). */
static uint64_t run_bits(unsigned first, unsigned n) {
  return (((uint64_t)1 << n) - 1) << first;
}

/* Bit i set when slices i .. i+n-1 are all in `bits` (n a power of two),
 * for i a multiple of n. */
static uint64_t runs_of(uint64_t bits, unsigned n) {
  for (unsigned w = 1; w < n; w <<= 1)
    bits &= bits >> w;
  return bits & (~(uint64_t)0 / run_bits(0, n)); /* one bit every n */
}

typedef struct {
  hz_segment_t *seg;
  unsigned region;
  unsigned used; /* slices in pages in the region */
} placement_t;

static bool placement_better(const placement_t *a, const placement_t *b) {
  if (b->seg == NULL) return true;
  if (a->used != b->used) return a->used > b->used;
  return (uintptr_t)a->seg + a->region < (uintptr_t)b->seg + b->region;
}

/* The fullest region of the set's segments with room for n slices (most
 * slices in pages first, then the lowest address). */
static placement_t set_place(const hz_segment_set_t *set, unsigned n) {
  placement_t best = {NULL, 0, 0};
  for (hz_segment_t *seg = set->room; seg != NULL; seg = seg->next) {
    uint64_t runs = runs_of(~seg->used_slices, n);
    for (unsigned r = 0; r < HZ_REGIONS_PER_SEGMENT; r++) {
      if ((runs & region_bits(r)) == 0) continue;
      placement_t here = {
          seg, r,
          (unsigned)__builtin_popcountll(seg->used_slices & region_bits(r))};
      if (placement_better(&here, &best)) best = here;
    }
  }
  return best;
}

static void set_push(hz_segment_set_t *set, hz_segment_t *seg) {
  HZ_SHARED_SET(seg->set, set);
  seg->prev = NULL;
  seg->next = set->room;
  if (set->room != NULL) set->room->prev = seg;
  set->room = seg;
}

static void set_remove(hz_segment_set_t *set, hz_segment_t *seg) {
  if (seg->prev != NULL)
    seg->prev->next = seg->next;
  else
    set->room = seg->next;
  if (seg->next != NULL) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
}

/* The descriptors of a page of n slices from `first`: the first one set
 * up (start, area), the others pointing back to it. */
static hz_page_t *page_make(hz_segment_t *seg, unsigned first, unsigned n) {
  uint8_t *base = (uint8_t *)seg;
  hz_page_t *page = &seg->pages[first];
  uint8_t *start = base + ((size_t)first << HZ_SLICE_SHIFT);
  if (first == 0) start = base + HZ_SEGMENT_HEADER_SIZE;
  uint8_t *end = base + ((size_t)(first + n) << HZ_SLICE_SHIFT);
  if (first + n == HZ_SLICES) end -= HZ_GUARD_SIZE;
  memset(page, 0, sizeof *page);
  page->tally = &seg->tallies[first];
  hz_page_set_start(page, start);
  HZ_ASSERT(((uintptr_t)start | (uintptr_t)end) % 4096 == 0);
  hz_page_set_area(page, (size_t)(end - start));
  for (unsigned i = 1; i < n; i++) {
    hz_page_t *slice = &seg->pages[first + i];
    slice->next = page;
    atomic_store_explicit(&slice->owner, HZ_PAGE_INTERIOR,
                          memory_order_relaxed);
  }
  return page;
}

/* Cut a page of n slices in the region: the first run whose slices are
 * all resident, else the first run. A page none of whose slices was dirty
 * reads as zeros (given back at once, not lazily): the page box hands its
 * fresh blocks out without writing into them. */
static hz_page_t *region_cut(hz_segment_t *seg, unsigned region, unsigned n) {
  hz_lock(&seg->lock);
  uint64_t runs = runs_of(~seg->used_slices, n) & region_bits(region);
  uint64_t resident = runs & runs_of(seg->dirty_slices, n);
  unsigned first = (unsigned)__builtin_ctzll(resident != 0 ? resident : runs);
  uint64_t bits = run_bits(first, n);
  bool zeroed = (seg->dirty_slices & bits) == 0 &&
                !hz_option_enabled(HZ_OPTION_PURGE_MADV_FREE);
  seg->used_slices |= bits;
  seg->dirty_slices &= ~bits;
  seg->aged_slices &= ~bits;
  hz_page_t *page = page_make(seg, first, n);
  page->cut_zeroed = zeroed;
  hz_unlock(&seg->lock);
  return page;
}

static hz_page_t *set_cut(hz_segment_set_t *set, placement_t at, unsigned n) {
  hz_segment_t *seg = at.seg;
  if (seg == set->empty) set->empty = NULL;
  hz_page_t *page = region_cut(seg, at.region, n);
  if (seg->used_slices == ~(uint64_t)0) set_remove(set, seg);
  return page;
}

/* A shared set's lock around a call (a heap's own set has none). */
static void set_hold(hz_segment_set_t *set) {
  if (set->lock != NULL) hz_lock(set->lock);
}

static void set_let_go(hz_segment_set_t *set) {
  if (set->lock != NULL) hz_unlock(set->lock);
}

static hz_page_t *set_page_cut(hz_segment_set_t *set, unsigned n) {
  placement_t at = set_place(set, n);
  return at.seg != NULL ? set_cut(set, at, n) : NULL;
}

static hz_page_t *set_page_alloc(hz_segment_set_t *set, unsigned n) {
  hz_page_t *page = set_page_cut(set, n);
  if (page != NULL) return page;
  hz_segment_t *seg = segment_acquire();
  if (seg == NULL) return NULL;
  set_push(set, seg);
  placement_t at = set_place(set, n);
  HZ_ASSERT(at.seg == seg);
  return set_cut(set, at, n);
}

hz_page_t *hz_segment_page_cut(hz_segment_set_t *set, hz_page_kind_t kind) {
  set_hold(set);
  hz_page_t *page = set_page_cut(set, kind_slices[kind]);
  set_let_go(set);
  return page;
}

hz_page_t *hz_segment_page_alloc(hz_segment_set_t *set, hz_page_kind_t kind) {
  set_hold(set);
  hz_page_t *page = set_page_alloc(set, kind_slices[kind]);
  set_let_go(set);
  return page;
}

/* The slices of a page, from its area (only the last slice's page may
 * end short of a slice boundary, by the guard page). */
static uint64_t page_bits(const hz_segment_t *seg, const hz_page_t *page) {
  uintptr_t offset = (uintptr_t)hz_page_start(page) - (uintptr_t)seg;
  unsigned first = (unsigned)(offset >> HZ_SLICE_SHIFT);
  unsigned end = (unsigned)((offset + hz_page_area(page) + HZ_SLICE_SIZE - 1) >>
                            HZ_SLICE_SHIFT);
  return run_bits(first, end - first);
}

static void set_page_free(hz_segment_set_t *set, hz_segment_t *seg,
                          hz_page_t *page, bool now) {
  uint64_t bits = page_bits(seg, page);
  unsigned first = (unsigned)__builtin_ctzll(bits);
  unsigned n = (unsigned)__builtin_popcountll(bits);
  bool was_full = seg->used_slices == ~(uint64_t)0;
  hz_lock(&seg->lock);
  memset(&seg->pages[first], 0, n * sizeof(hz_page_t));
  seg->looked &= (uint8_t) ~(1u << (first / HZ_REGION_SLICES));
  seg->used_slices &= ~bits;
  seg->dirty_slices |= bits;
  uint64_t due = HZ_SHARED_GET(seg->purge_due);
  if (due == 0) {
    due = hz_segment_purge_due_from(hz_os_now_ms());
    HZ_SHARED_SET(seg->purge_due, due);
  }
  if (now || hz_option(HZ_OPTION_PURGE_DELAY_MS) == 0)
    segment_purge_one(seg, true, false);
  hz_unlock(&seg->lock);
  purge_note_due(due);
  if (was_full) set_push(set, seg);
  if (seg->used_slices != 0) return;
  if (set->empty == NULL) {
    set->empty = seg;
    return;
  }
  set_remove(set, seg);
  segment_release(seg);
}

static void segment_page_free(hz_page_t *page, bool now) {
  hz_segment_t *seg = hz_segment_of_page(page);
  hz_segment_set_t *set = HZ_SHARED_GET(seg->set); /* kept while cut */
  set_hold(set);
  set_page_free(set, seg, page, now);
  set_let_go(set);
}

void hz_segment_page_free(hz_page_t *page) { segment_page_free(page, false); }

hz_segment_set_t *hz_segment_set_of_page(const hz_page_t *page) {
  return HZ_SHARED_GET(hz_segment_of_page(page)->set);
}

void hz_segment_page_give_back(hz_page_t *page) {
  segment_page_free(page, true);
}

void hz_segment_set_trim(hz_segment_set_t *set) {
  set_hold(set);
  hz_segment_t *seg = set->empty;
  if (seg != NULL) {
    set->empty = NULL;
    set_remove(set, seg);
    segment_release(seg);
  }
  set_let_go(set);
}

/* ---------------------------------------------------------------------------
 * What the stats report shows
 * ------------------------------------------------------------------------- */
static unsigned fill_bucket(unsigned used) {
  if (used == 0) return 0;
  if (used == HZ_REGION_SLICES) return 5;
  return 1 + (used - 1) * 4 / HZ_REGION_SLICES;
}

void hz_segment_state(hz_segment_state_t *out) {
  memset(out, 0, sizeof *out);
  hz_lock(&segment_lock);
  out->cached = segment_cache_count;
  for (hz_segment_t *seg = segment_all; seg != NULL; seg = seg->all_next) {
    hz_lock(&seg->lock);
    uint64_t used = seg->used_slices;
    out->dirty_bytes += (size_t)__builtin_popcountll(seg->dirty_slices)
                        << HZ_SLICE_SHIFT;
    for (unsigned r = 0; r < HZ_REGIONS_PER_SEGMENT; r++) {
      out->regions[fill_bucket(
          (unsigned)__builtin_popcountll(used & region_bits(r)))]++;
      out->huge_regions += seg->huge >> r & 1;
    }
    hz_unlock(&seg->lock);
  }
  out->arena_reserved = hz_arena_reserved();
  out->arena_in_use = hz_arena_in_use();
  hz_unlock(&segment_lock);
}

void hz_segment_summarize(size_t *pages, size_t *blocks, size_t *bytes,
                          size_t *free_blocks) {
  *pages = *blocks = *bytes = *free_blocks = 0;
  hz_lock(&segment_lock);
  for (hz_segment_t *seg = segment_all; seg != NULL; seg = seg->all_next) {
    hz_lock(&seg->lock);
    for (int i = 0; i < HZ_SLICES; i++) {
      const hz_page_t *page = &seg->pages[i];
      if (hz_page_owner(page) == NULL) continue;
      size_t used = HZ_SHARED_GET(page->tally->used);
      *pages += 1;
      *blocks += used;
      *bytes += used * HZ_SHARED_GET(page->block_size);
      size_t carved = HZ_SHARED_GET(page->capacity);
      *free_blocks += carved > used ? carved - used : 0;
    }
    hz_unlock(&seg->lock);
  }
  hz_unlock(&segment_lock);
}

uint64_t hz_segment_lock_taken(void) { return hz_lock_taken(&segment_lock); }

/* A thread in the middle of cutting or freeing a page may hold its
 * segment's lock at fork: the child's copy starts unlocked. */
void hz_segment_fork_prepare(void) { hz_lock(&segment_lock); }
void hz_segment_fork_parent(void) { hz_unlock(&segment_lock); }
void hz_segment_fork_child(void) {
  hz_lock_reinit(&segment_lock);
  for (hz_segment_t *seg = segment_all; seg != NULL; seg = seg->all_next) {
    hz_lock_reinit(&seg->lock);
    seg->pinned = 0; /* the parent's purge thread is not here */
  }
}
