/* large: blocks too big for a size class, each in its own mapping, and the
 * cache of freed mappings.
 *
 * Layout of one large block: a 4 MiB-aligned segment header at `seg`, the
 * block at seg + round_up(header, align), the mapping ending at
 * seg + map_size. The block start is kept in pages[0] (hz_page_start) and
 * used_pages is 1 while the block is live, so a free of any other address,
 * or of a cached block, is recognised as invalid.
 *
 * The cache keeps freed mappings by size class (four per power of two):
 * a mapping of map_size bytes sits in the largest class not above
 * map_size. A request looks at the newest mapping of each class from
 * LARGE_BORROW + 1 classes below its own to LARGE_BORROW_UP above (up to
 * four times its size, so a program whose sizes vary finds its freed
 * pages still resident instead of faulting fresh ones in) and takes the
 * one with the fewest pages left to fault in (its touched extent), the
 * smaller on a tie; one below its size is grown with mremap. Mappings never
 * ask for huge pages. Over the byte cap, the oldest mappings of the class
 * just freed go first, then the oldest of the largest classes. Cached
 * mappings are purged (their memory given back, the mapping kept) in the
 * order they were freed, once the purge delay has passed and as far as
 * the program's large-block demand has fallen (see Demand below), or at a
 * cache miss over HZ_LARGE_DIRTY_KEEP. One mutex guards the cache; no
 * madvise, mmap or munmap runs under it. A signal handler's malloc that
 * interrupted the allocator takes none of this: a fresh mapping, made and
 * given back without the lock ("Fresh mappings" below). */
#include "large.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "list.h"
#include "lock.h"
#include "options.h"
#include "os.h"
#include "stats.h"

#define LARGE_CLASS_MIN_SHIFT 18 /* class 0 is 256 KiB */
#define LARGE_CLASS_COUNT     ((64 - LARGE_CLASS_MIN_SHIFT) * 4)
#define LARGE_BORROW          3 /* classes below a request's: grown */
#define LARGE_BORROW_UP       8 /* classes above: two powers of two */
#define LARGE_CACHED_MIN      ((size_t)1 << LARGE_CLASS_MIN_SHIFT)

typedef struct {
  hz_segment_t *newest; /* linked by next (towards older) / prev */
  hz_segment_t *oldest;
} large_list_t;

static hz_lock_t large_lock = HZ_LOCK_INIT(HZ_LOCK_ID_LARGE);
static large_list_t large_cache[LARGE_CLASS_COUNT];
static size_t large_cached_bytes, large_cached_count;
static size_t large_dirty_bytes; /* cached and not yet purged */
/* Cached mappings not yet purged, oldest first (by purge_next/prev). */
static hz_segment_queue_t dirty_queue;
static _Atomic uint64_t large_next_due = UINT64_MAX;

/* Demand: the bytes of the distinct large mappings the program took (from
 * the cache or fresh, growth included; a mapping taken again in the same
 * half delay counts once) in the current half purge delay and in the one
 * before it. Due mappings stay cached while the dirty bytes fit under what
 * was taken in that half to whole delay: a program that keeps using that
 * much large memory takes them again. Past it, the oldest are purged, and
 * what stays is looked at again when the next half delay begins. A program
 * that stops allocating large blocks gets all of it back a delay later;
 * one that loops on one block keeps no more than that block's worth. */
static size_t demand_taken[2];     /* [0]: this half delay, [1]: the last one */
static uint64_t demand_epoch;      /* the clock in half delays, of [0] */
static uint64_t demand_hold_until; /* no purge before (due mappings held) */

/* ---------------------------------------------------------------------------
 * Size classes
 * ------------------------------------------------------------------------- */
static unsigned class_floor(size_t size) {
  unsigned e = 63u - (unsigned)__builtin_clzll(size);
  if (e < LARGE_CLASS_MIN_SHIFT) return 0;
  return (e - LARGE_CLASS_MIN_SHIFT) * 4 + (unsigned)((size >> (e - 2)) & 3);
}

static size_t class_size(unsigned c) {
  unsigned e = c / 4 + LARGE_CLASS_MIN_SHIFT;
  return ((size_t)1 << e) + ((size_t)(c % 4) << (e - 2));
}

static unsigned class_ceil(size_t size) {
  unsigned c = class_floor(size);
  return class_size(c) < size ? c + 1 : c;
}

static size_t cache_cap(void) {
  long cap = hz_option(HZ_OPTION_LARGE_CACHE_MAX);
  return cap > 0 ? (size_t)cap : 0;
}

/* ---------------------------------------------------------------------------
 * The cache (lists under large_lock)
 * ------------------------------------------------------------------------- */
static void dirty_remove(hz_segment_t *seg) {
  large_dirty_bytes -= seg->map_size;
  hz_segment_queue_remove(&dirty_queue, seg);
}

static void dirty_append(hz_segment_t *seg, uint64_t due) {
  large_dirty_bytes += seg->map_size;
  hz_segment_queue_append(&dirty_queue, seg, due);
}

static void publish_next_due(void) {
  uint64_t due = hz_segment_queue_next_due(&dirty_queue);
  if (due != UINT64_MAX && due < demand_hold_until) due = demand_hold_until;
  atomic_store_explicit(&large_next_due, due, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------
 * Demand (under large_lock)
 * ------------------------------------------------------------------------- */
static uint64_t demand_half_delay(void) {
  long delay = hz_option(HZ_OPTION_PURGE_DELAY_MS);
  return delay > 1 ? (uint64_t)delay / 2 : 1;
}

/* Move the counts on to the half delay `now` falls in. */
static void demand_roll(uint64_t now) {
  uint64_t epoch = now / demand_half_delay();
  if (epoch == demand_epoch) return;
  demand_taken[1] = epoch == demand_epoch + 1 ? demand_taken[0] : 0;
  demand_taken[0] = 0;
  demand_epoch = epoch;
}

/* The program took seg, now `grown` bytes bigger than it was: all of it
 * counts the first time in a half delay, the growth after that. */
static void demand_take(hz_segment_t *seg, size_t grown, uint64_t now) {
  demand_roll(now);
  if (seg->demand_epoch == demand_epoch + 1) {
    demand_taken[0] += grown;
  } else {
    seg->demand_epoch = demand_epoch + 1; /* 0: never counted */
    demand_taken[0] += seg->map_size;
  }
}

static void demand_take_locked(hz_segment_t *seg, size_t grown) {
  hz_lock(&large_lock);
  demand_take(seg, grown, hz_os_now_ms());
  hz_unlock(&large_lock);
}

/* Dirty bytes the recent demand may take again. */
static size_t demand_allowance(uint64_t now) {
  demand_roll(now);
  return demand_taken[0] + demand_taken[1];
}

static void cache_unlink(hz_segment_t *seg) {
  large_list_t *list = &large_cache[class_floor(seg->map_size)];
  HZ_LIST_REMOVE(list, newest, oldest, seg, next, prev);
  if (seg->dirty_slices != 0) dirty_remove(seg);
  large_cached_bytes -= seg->map_size;
  large_cached_count--;
}

/* Push as the newest of its class; purged mappings go in as the oldest, so
 * reuse prefers mappings whose memory is still there. A mapping not yet
 * purged (dirty_slices set) also joins the purge queue, due at `due`. */
static void cache_link(hz_segment_t *seg, uint64_t due) {
  large_list_t *list = &large_cache[class_floor(seg->map_size)];
  if (seg->dirty_slices != 0) dirty_append(seg, due);
  if (seg->dirty_slices == 0)
    HZ_LIST_PUSH_BACK(list, newest, oldest, seg, next, prev);
  else
    HZ_LIST_PUSH_FRONT(list, newest, oldest, seg, next, prev);
  large_cached_bytes += seg->map_size;
  large_cached_count++;
}

/* Take cached mappings out until at most `cap` bytes stay, the class `c`
 * first; they are returned linked by next for unmapping outside the lock. */
static hz_segment_t *cache_evict(unsigned c, size_t cap) {
  hz_segment_t *victims = NULL;
  unsigned from = LARGE_CLASS_COUNT;
  while (large_cached_bytes > cap) {
    hz_segment_t *seg = large_cache[c].oldest;
    while (seg == NULL && from > 0) {
      seg = large_cache[from - 1].oldest;
      if (seg == NULL) from--;
    }
    if (seg == NULL) break;
    cache_unlink(seg);
    seg->next = victims;
    victims = seg;
  }
  return victims;
}

/* Pages a request of `need` bytes would fault in on this mapping. */
static size_t faults_for(const hz_segment_t *seg, size_t need) {
  size_t touched = HZ_ALIGN_UP(seg->touched, hz_os_page_size());
  return need > touched ? need - touched : 0;
}

/* The cached mapping that serves `need` with the fewest new pages: the
 * newest of each class from LARGE_BORROW + 1 below need's class (grown with
 * mremap) to LARGE_BORROW_UP above; on a tie the smaller mapping. */
static hz_segment_t *cache_take(size_t need) {
  unsigned c = class_ceil(need);
  unsigned from = c > LARGE_BORROW + 1 ? c - LARGE_BORROW - 1 : 0;
  if (HZ_SECURE) from = c; /* guard pages split the mapping: no mremap */
  unsigned to = c + LARGE_BORROW_UP;
  if (to >= LARGE_CLASS_COUNT) to = LARGE_CLASS_COUNT - 1;
  hz_segment_t *best = NULL;
  hz_lock(&large_lock);
  for (unsigned k = from; k <= to; k++) {
    hz_segment_t *seg = large_cache[k].newest;
    if (seg == NULL) continue;
    if (best == NULL || faults_for(seg, need) < faults_for(best, need))
      best = seg;
    if (faults_for(best, need) == 0 && best->map_size >= need) break;
  }
  if (best != NULL) {
    cache_unlink(best);
    demand_take(best, 0, hz_os_now_ms());
    publish_next_due();
  }
  hz_unlock(&large_lock);
  return best;
}

/* ---------------------------------------------------------------------------
 * Mapping
 * ------------------------------------------------------------------------- */
static hz_segment_t *region_grow(hz_segment_t *seg, size_t map_size);
static size_t mapping_size(size_t need);
static void unmap_region(hz_segment_t *seg);

/* A cached mapping for `need` bytes, grown with mremap if it is smaller. */
static hz_segment_t *cache_reuse(size_t need) {
  hz_segment_t *seg = cache_take(need);
  if (seg == NULL || seg->map_size >= need) return seg;
  size_t old_size = seg->map_size;
  hz_segment_t *grown = region_grow(seg, mapping_size(need));
  if (grown == NULL)
    unmap_region(seg);
  else
    demand_take_locked(grown, grown->map_size - old_size);
  return grown;
}
static void unmap_region(hz_segment_t *seg) {
  hz_segment_unregister(seg);
  hz_os_unmap(seg, seg->map_size);
}

/* Unmap mappings linked by next (taken out of the cache). */
static void unmap_regions(hz_segment_t *victims) {
  while (victims != NULL) {
    hz_segment_t *next = victims->next;
    unmap_region(victims);
    victims = next;
  }
}

/* A fresh mapping of map_size bytes with its header; (seg + offset) is
 * aligned to map_align when that is above a segment. */
static hz_segment_t *map_region(size_t map_size, size_t map_align,
                                size_t offset) {
  hz_segment_t *seg = hz_os_map_aligned_at(
      map_size, map_align, map_align > HZ_SEGMENT_SIZE ? offset : 0);
  if (seg == NULL) return NULL;
  /* Never huge pages: a block written sparsely would pay 2 MiB of zeroing
   * and of memory per touch, and a huge-page fault that compacts memory
   * made malloc_large take 0.17 to 1.01 s from run to run here, against
   * 0.34 s every time with small pages (the cache reuses the pages). */
  hz_os_huge_pages(seg, map_size, false);
  seg->kind = HZ_SEGMENT_LARGE;
  seg->page_shift = 63;
  seg->map_size = map_size;
  seg->zeroed = 1;
  seg->touched = HZ_LARGE_HEADER_SIZE;
  seg->demand_epoch = 0;
  hz_segment_guard(seg, map_size);
  if (!hz_segment_register(seg)) {
    hz_os_unmap(seg, map_size);
    return NULL;
  }
  return seg;
}

/* Where the block of a request with this alignment starts. */
static size_t block_offset(size_t align) {
  return align <= HZ_SEGMENT_SIZE ? HZ_ALIGN_UP(HZ_LARGE_HEADER_SIZE, align)
                                  : HZ_SEGMENT_SIZE;
}

/* Bytes to map for `need`: rounded up to a 32nd of its power of two (at
 * most 3% more address space than asked, so a program under an address
 * space limit fits nearly as much as with exact mappings), which lets a
 * cached mapping serve slightly smaller requests; exact when too big to be
 * cached anyway. */
static size_t mapping_size(size_t need) {
  if (need > cache_cap()) return need;
  unsigned e = 63u - (unsigned)__builtin_clzll(need);
  size_t step = (size_t)1 << (e - 5);
  if (step < hz_os_page_size()) step = hz_os_page_size();
  return HZ_ALIGN_UP(need, step);
}

/* A request's mapping: its block's offset, its alignment and the bytes it
 * needs; false (errno = ENOMEM) when no mapping can hold it. */
typedef struct {
  size_t offset, map_align, need;
} large_request_t;

static bool large_request(size_t size, size_t align, large_request_t *r) {
  size_t page = hz_os_page_size();
  if (align < HZ_MIN_ALIGN) align = HZ_MIN_ALIGN;
  r->offset = block_offset(align);
  r->map_align = align <= HZ_SEGMENT_SIZE ? HZ_SEGMENT_SIZE : align;
  if (size > HZ_REQUEST_MAX || align > ((size_t)1 << 40) ||
      size > HZ_REQUEST_MAX - r->offset - page - r->map_align) {
    errno = ENOMEM;
    return false;
  }
  r->need = HZ_ALIGN_UP(r->offset + size, page) + HZ_GUARD_SIZE;
  return true;
}

/* The block of a mapping just taken or made goes out. */
static void *large_hand_out(hz_segment_t *seg, size_t offset, size_t size) {
  uint8_t *block = (uint8_t *)seg + offset;
  seg->zeroed = 0;
  seg->dirty_slices = 0;
  seg->used_pages = 1;
  if (seg->touched < offset + size) seg->touched = offset + size;
  hz_page_set_start(&seg->pages[0], block);
  hz_stats_count_large_alloc(seg->map_size);
  return block;
}

void *hz_large_alloc(size_t size, size_t align, bool zero) {
  large_request_t r;
  if (!large_request(size, align, &r)) return NULL;
  hz_segment_t *seg = NULL;
  if (align <= HZ_SEGMENT_SIZE && r.need <= cache_cap())
    seg = cache_reuse(r.need);
  if (seg != NULL) {
    if (zero && !seg->zeroed) memset((uint8_t *)seg + r.offset, 0, size);
    hz_stats_count_large_reuse();
  } else {
    hz_large_purge_dirty_over(
        r.need > HZ_LARGE_DIRTY_KEEP ? r.need : HZ_LARGE_DIRTY_KEEP);
    seg = map_region(mapping_size(r.need), r.map_align, r.offset);
    if (seg == NULL) {
      errno = ENOMEM;
      return NULL;
    }
    demand_take_locked(seg, 0);
  }
  return large_hand_out(seg, r.offset, size);
}

/* ---------------------------------------------------------------------------
 * Fresh mappings, without the lock
 * ------------------------------------------------------------------------- */
/* A request that fits FRESH_SIZE (most: a signal handler's small blocks)
 * gets a mapping of FRESH_SIZE bytes, and such a mapping once freed waits
 * in one of FRESH_KEEP slots for the next (an exchange or a compare and
 * swap on the slot, no lock, no list to go wrong under a signal): a
 * handler landing in every malloc of a young thread (each under its
 * class's lock) would otherwise map and unmap twice for each of its calls.
 * malloc_trim unmaps those waiting. */
#define FRESH_SIZE ((size_t)64 << 10)
#define FRESH_KEEP 64
static _Atomic(hz_segment_t *) fresh_kept[FRESH_KEEP];

static hz_segment_t *fresh_take(void) {
  for (size_t i = 0; i < FRESH_KEEP; i++) {
    if (atomic_load_explicit(&fresh_kept[i], memory_order_relaxed) == NULL)
      continue;
    hz_segment_t *seg =
        atomic_exchange_explicit(&fresh_kept[i], NULL, memory_order_acquire);
    if (seg != NULL) return seg;
  }
  return NULL;
}

/* Unmapped if it cannot wait (or is not of the size that waits). */
static void fresh_give(hz_segment_t *seg) {
  for (size_t i = 0; seg->map_size == FRESH_SIZE && i < FRESH_KEEP; i++) {
    hz_segment_t *none = NULL;
    if (atomic_compare_exchange_strong_explicit(&fresh_kept[i], &none, seg,
                                                memory_order_release,
                                                memory_order_relaxed))
      return;
  }
  unmap_region(seg);
}

static void fresh_unmap_kept(void) {
  for (size_t i = 0; i < FRESH_KEEP; i++) {
    hz_segment_t *seg =
        atomic_exchange_explicit(&fresh_kept[i], NULL, memory_order_acquire);
    if (seg != NULL) unmap_region(seg);
  }
}

void *hz_large_alloc_fresh(size_t size, size_t align, bool zero) {
  large_request_t r;
  if (!large_request(size, align, &r)) return NULL;
  bool fits = r.need <= FRESH_SIZE && r.map_align == HZ_SEGMENT_SIZE;
  hz_segment_t *seg = fits ? fresh_take() : NULL;
  if (seg != NULL) {
    if (zero) memset((uint8_t *)seg + r.offset, 0, size);
  } else {
    seg = map_region(fits ? FRESH_SIZE : r.need, r.map_align, r.offset);
    if (seg == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  return large_hand_out(seg, r.offset, size);
}

void hz_large_free_unmap(hz_segment_t *seg) {
  hz_stats_count_large_free(seg->map_size);
  seg->used_pages = 0;
  fresh_give(seg);
}

int hz_large_owns(const hz_segment_t *seg, const void *p) {
  return seg->kind == HZ_SEGMENT_LARGE && seg->used_pages == 1 &&
         (const uint8_t *)p == hz_page_start(&seg->pages[0]);
}

bool hz_large_was_freed(const hz_segment_t *seg, const void *p) {
  return seg->kind == HZ_SEGMENT_LARGE && seg->used_pages == 0 &&
         (const uint8_t *)p == hz_page_start(&seg->pages[0]);
}

static bool discard_region(hz_segment_t *seg) {
  return hz_os_discard((uint8_t *)seg + HZ_LARGE_HEADER_SIZE,
                       seg->map_size - HZ_LARGE_HEADER_SIZE,
                       hz_option_enabled(HZ_OPTION_PURGE_MADV_FREE));
}

/* Cache a mapping (purge due at `due` if it is dirty), evicting over the
 * cap. */
static void cache_put(hz_segment_t *seg, uint64_t due) {
  hz_lock(&large_lock);
  cache_link(seg, due);
  hz_segment_t *victims = cache_evict(class_floor(seg->map_size), cache_cap());
  publish_next_due();
  hz_unlock(&large_lock);
  unmap_regions(victims);
}

void hz_large_free(hz_segment_t *seg) {
  hz_stats_count_large_free(seg->map_size);
  seg->used_pages = 0;
  if (seg->map_size > cache_cap()) {
    unmap_region(seg);
    return;
  }
  /* A fresh mapping a small request got (below the smallest large block:
   * hz_large_alloc_fresh): it waits for the next such, or goes. */
  if (seg->map_size < LARGE_CACHED_MIN) {
    fresh_give(seg);
    return;
  }
  /* A zero delay purges at once, before other threads can see it. */
  seg->dirty_slices = 1;
  if (hz_option(HZ_OPTION_PURGE_DELAY_MS) == 0 || hz_check_zero_on_free) {
    seg->zeroed = discard_region(seg);
    seg->dirty_slices = 0;
    seg->touched = HZ_LARGE_HEADER_SIZE;
  }
  cache_put(seg, hz_segment_purge_due_from(hz_os_now_ms()));
}

/* Up to the guard page that ends the mapping in the secure variants. */
size_t hz_large_usable_size(const hz_segment_t *seg, const void *p) {
  return (size_t)((const uint8_t *)seg + seg->map_size - HZ_GUARD_SIZE -
                  (const uint8_t *)p);
}

/* ---------------------------------------------------------------------------
 * realloc
 * ------------------------------------------------------------------------- */
/* Grow a mapping to map_size without copying: in place when the address
 * space after it is free, else by moving its pages to a fresh 4 MiB-aligned
 * place. Returns the mapping (maybe moved), or NULL (seg unchanged). */
static hz_segment_t *region_grow(hz_segment_t *seg, size_t map_size) {
  size_t old_size = seg->map_size;
  if (hz_os_remap_in_place(seg, old_size, map_size)) {
    seg->map_size = map_size;
    return seg;
  }
  uint8_t *to = hz_os_map_aligned(map_size, HZ_SEGMENT_SIZE);
  if (to == NULL) return NULL;
  if (!hz_segment_map_reserve(to)) {
    hz_os_unmap(to, map_size);
    return NULL;
  }
  /* Forget the old address while it is still ours: once mremap has moved
   * the mapping, another thread may map and register a segment there. */
  hz_segment_unregister(seg);
  if (!hz_os_remap_to(seg, old_size, map_size, to)) {
    hz_segment_register(seg);
    hz_os_unmap(to, map_size);
    return NULL;
  }
  hz_segment_t *moved = (hz_segment_t *)to;
  hz_segment_register(moved);
  moved->map_size = map_size;
  return moved;
}

void *hz_large_realloc(hz_segment_t *seg, void *p, size_t size) {
  size_t offset = (size_t)((uint8_t *)p - (uint8_t *)seg);
  size_t page = hz_os_page_size();
  if (size > HZ_REQUEST_MAX - offset - page) return NULL;
  size_t need = HZ_ALIGN_UP(offset + size, page) + HZ_GUARD_SIZE;
  size_t old_size = seg->map_size;
  if (need <= old_size) {
    /* Shrink in place when more than half would be left unused (not
     * across the guard pages of the secure variants). */
    if (!HZ_SECURE && need < old_size / 2 &&
        hz_os_remap_in_place(seg, old_size, need)) {
      seg->map_size = need;
      if (seg->touched > need) seg->touched = need;
      hz_stats_count_large_resize(old_size, need);
    }
    if (seg->touched < offset + size) seg->touched = offset + size;
    return p;
  }
  /* Over-aligned, or split by guard pages: the caller copies. */
  if (offset >= HZ_SEGMENT_SIZE || HZ_SECURE) return NULL;
  hz_segment_t *grown = region_grow(seg, mapping_size(need));
  if (grown == NULL) return NULL;
  hz_stats_count_large_resize(old_size, grown->map_size);
  demand_take_locked(grown, grown->map_size - old_size);
  hz_page_set_start(&grown->pages[0], (uint8_t *)grown + offset);
  grown->touched = offset + size;
  return hz_page_start(&grown->pages[0]);
}

/* ---------------------------------------------------------------------------
 * Purge
 * ------------------------------------------------------------------------- */
void hz_large_unmap_cached(void) {
  fresh_unmap_kept();
  hz_lock(&large_lock);
  hz_segment_t *victims = cache_evict(0, 0);
  publish_next_due();
  hz_unlock(&large_lock);
  unmap_regions(victims);
}

/* The oldest dirty mapping leaves the cache (under the lock, held on
 * entry and released here) while its memory is discarded, so no madvise
 * runs under the lock, then comes back as purged. */
static void purge_oldest_locked(void) {
  hz_segment_t *seg = dirty_queue.first;
  cache_unlink(seg);
  publish_next_due();
  hz_unlock(&large_lock);
  seg->zeroed = discard_region(seg); /* not with MADV_FREE */
  seg->dirty_slices = 0;
  seg->touched = HZ_LARGE_HEADER_SIZE;
  hz_lock(&large_lock);
  cache_link(seg, 0);
  hz_unlock(&large_lock);
}

/* Purge the due mappings the recent demand would not take again, oldest
 * first (all of them with `force`). */
uint64_t hz_large_purge(uint64_t now, bool force) {
  for (;;) {
    hz_lock(&large_lock);
    hz_segment_t *seg = dirty_queue.first;
    bool due = seg != NULL && (force || seg->purge_due <= now);
    if (due && !force && large_dirty_bytes <= demand_allowance(now)) {
      demand_hold_until = (demand_epoch + 1) * demand_half_delay();
      publish_next_due();
      due = false;
    }
    if (!due) {
      hz_unlock(&large_lock);
      return atomic_load_explicit(&large_next_due, memory_order_relaxed);
    }
    purge_oldest_locked();
  }
}

/* A request the cache could not serve is about to fault in fresh memory:
 * the cached memory that could not serve it must not stay resident beside
 * it. Purge the oldest dirty mappings until at most `keep` bytes are dirty
 * (a program that frees a 256 MiB buffer and then asks for two of 128 MiB
 * holds 256 MiB, not 512). */
void hz_large_purge_dirty_over(size_t keep) {
  for (;;) {
    hz_lock(&large_lock);
    if (large_dirty_bytes <= keep || dirty_queue.first == NULL) {
      hz_unlock(&large_lock);
      return;
    }
    purge_oldest_locked();
  }
}

uint64_t hz_large_purge_next(void) {
  return atomic_load_explicit(&large_next_due, memory_order_relaxed);
}

void hz_large_cached(size_t *regions, size_t *bytes, size_t *dirty) {
  hz_lock(&large_lock);
  *regions = large_cached_count;
  *bytes = large_cached_bytes;
  *dirty = large_dirty_bytes;
  hz_unlock(&large_lock);
}

uint64_t hz_large_lock_taken(void) { return hz_lock_taken(&large_lock); }

void hz_large_fork_prepare(void) { hz_lock(&large_lock); }
void hz_large_fork_parent(void) { hz_unlock(&large_lock); }
void hz_large_fork_child(void) { hz_lock_reinit(&large_lock); }
