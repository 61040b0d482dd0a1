/* segment: 4 MiB chunks of address space aligned to their size, cut into
 * 64 slices of 64 KiB; pages are runs of slices, so the free memory of a
 * page of one size serves a page of any other. Also the map that answers
 * "is this pointer ours?" for segments outside the arena, the page
 * descriptors kept in each segment's header, and each heap's set of
 * segments it cuts pages from.
 *
 * Pointer -> segment: ((p - 1) & ~mask), so a block that starts exactly
 * at the end of a 4 MiB unit (large blocks aligned to 4 MiB) still maps to
 * the segment that holds its header. Segment -> slice descriptor:
 * (p - segment) >> 16; a page's descriptor is that of its first slice,
 * and the descriptors of its other slices point back to it. */
#ifndef HZ_SEGMENT_H
#define HZ_SEGMENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "config.h"
#include "lock.h"
#include "page.h"

/* What a segment holds. Zero is pages: the header of a segment the arena
 * took back reads as zeros, a segment with no page in use. */
typedef enum {
  HZ_SEGMENT_PAGES = 0, /* pages cut from slices */
  HZ_SEGMENT_LARGE      /* one large block, owned by the large box */
} hz_segment_kind_t;

/* Kinds of page, by the size of the blocks they hold: a page is a run of
 * 1, 2, 8 or 32 slices (64 KiB, 128 KiB, 512 KiB, 2 MiB), aligned to its
 * length, so a page never straddles a 2 MiB region. */
typedef enum {
  HZ_KIND_SMALL,  /* blocks <= 8 KiB */
  HZ_KIND_MEDIUM, /* <= 16 KiB */
  HZ_KIND_WIDE,   /* <= 64 KiB */
  HZ_KIND_BIG,    /* <= 256 KiB: a whole region */
  HZ_KIND_COUNT
} hz_page_kind_t;

#define HZ_SLICE_SHIFT         16
#define HZ_SLICE_SIZE          ((size_t)1 << HZ_SLICE_SHIFT)
#define HZ_SLICES              64
#define HZ_REGION_SLICES       32 /* 2 MiB: a huge page */
#define HZ_REGIONS_PER_SEGMENT 2
_Static_assert(HZ_SEGMENT_SIZE / HZ_SLICE_SIZE == HZ_SLICES, "one bit each");

struct hz_segment_set_s;

typedef struct hz_segment_s {
  /* First, so that segment -> descriptor is base + (index << 6). One
   * spare descriptor: a pointer exactly at the segment end indexes it. */
  hz_page_t pages[HZ_SLICES + 1];
  uint8_t kind;
  uint8_t page_shift;  /* its map entry: HZ_SLICE_SHIFT, or 63 (large) */
  uint8_t huge;        /* bit r: region r is backed by a huge page */
  uint8_t looked;      /* bit r: region r was found too sparse for one */
  uint8_t mapped;      /* mapped on its own, outside the arena */
  uint16_t used_pages; /* large: 1 while its block is live */
  uint8_t zeroed;      /* large: the block area reads as zeros */
  size_t map_size;     /* bytes mapped from the segment start (large blocks) */
  size_t touched;      /* large: bytes from the start that may be resident */
  uint64_t demand_epoch; /* large: last half delay its bytes counted in */
  /* Slices held by a page, free slices that may be resident (dirty), and
   * those of them dirty since the last purge round (aged), which the next
   * round gives back to the kernel once purge_due has passed: a slice
   * stays resident one to two purge delays after its page went. The owner
   * changes them, the purge reads and clears them: all under `lock`. */
  hz_lock_t lock;
  uint64_t used_slices;
  uint64_t dirty_slices;
  uint64_t aged_slices;
  uint64_t purge_due; /* written under `lock`, read with HZ_SHARED_GET */
  uint32_t pinned;    /* purges working on it: kept linked (segment lock) */
  struct hz_segment_s *purge_next; /* large: the cache's purge queue */
  struct hz_segment_s *purge_prev;
  struct hz_segment_set_s *set; /* the owning heap's set, NULL if none */
  struct hz_segment_s *next;    /* set: segments with a free slice; cache */
  struct hz_segment_s *prev;
  struct hz_segment_s *all_next; /* every segment of pages */
  struct hz_segment_s *all_prev;
  /* The counts and free bitmap of the page starting at each slice
   * (page.h): out of the blocks, and resident only where pages use them. */
  hz_page_tally_t tallies[HZ_SLICES];
} hz_segment_t;

/* The segments pages are cut from. A thread's heap has a set of its own,
 * which only its owner (or a collector holding the heap) touches, so a
 * page goes from segment to heap without a process-wide lock. The class
 * heaps share one set: its `lock` (NULL for a heap's own) is taken by
 * every call here that reads or changes the set. */
typedef struct hz_segment_set_s {
  hz_segment_t *room;  /* segments with a free slice */
  hz_segment_t *empty; /* one segment with no page, kept for reuse */
  hz_lock_t *lock;     /* a shared set's, else NULL */
} hz_segment_set_t;

/* The header (page descriptors, then the pages' tallies: counts and free
 * bitmaps) fills the first 44 KiB. The secure
 * variants follow it with a guard page and keep another at the segment's
 * end, so neither an underflow of the first block nor an overflow out of
 * the segment below reaches the descriptors. Blocks start at
 * HZ_SEGMENT_HEADER_SIZE. */
#define HZ_SEGMENT_META_SIZE   ((size_t)44 << 10)
#define HZ_GUARD_SIZE          (HZ_SECURE ? (size_t)4096 : 0)
#define HZ_SEGMENT_HEADER_SIZE (HZ_SEGMENT_META_SIZE + HZ_GUARD_SIZE)
/* A large block's segment has one page and no bitmap: its header is the
 * descriptors' 8 KiB (and the guard page), and the block follows. */
#define HZ_LARGE_META_SIZE   ((size_t)8 << 10)
#define HZ_LARGE_HEADER_SIZE (HZ_LARGE_META_SIZE + HZ_GUARD_SIZE)
/* The map, for segments outside the arena: one byte per segment of the
 * address space below the hint range's end (config.h), 1 MiB; the
 * segments the kernel placed above it are found through a second,
 * two-level map of the whole address space (HZ_ADDRESS_BITS). */
#define HZ_SEGMENT_MAP_ENTRIES                                                 \
  ((HZ_HINT_BASE + HZ_HINT_SIZE) >> HZ_SEGMENT_SHIFT)

extern _Atomic uint8_t hz_segment_map[HZ_SEGMENT_MAP_ENTRIES];

/* The map entry of p above the first map's reach (0: not ours). */
unsigned hz_segment_page_shift_far(const void *p);

/* Cached large mappings waiting for their purge, in due order, linked by
 * purge_next/purge_prev (the large box guards its queue with its lock). */
typedef struct {
  hz_segment_t *first;
  hz_segment_t *last;
} hz_segment_queue_t;

void hz_segment_queue_append(hz_segment_queue_t *q, hz_segment_t *seg,
                             uint64_t due);
void hz_segment_queue_remove(hz_segment_queue_t *q, hz_segment_t *seg);
/* When the first one falls due (UINT64_MAX: the queue is empty). */
uint64_t hz_segment_queue_next_due(const hz_segment_queue_t *q);
/* now + the purge delay (UINT64_MAX when the delay is -1: never). */
uint64_t hz_segment_purge_due_from(uint64_t now);

/* The segment p would belong to, if it is ours. */
HZ_INLINE hz_segment_t *hz_segment_base(const void *p) {
  return (hz_segment_t *)(((uintptr_t)p - 1) & ~(uintptr_t)HZ_SEGMENT_MASK);
}

/* Nonzero when p is one of ours (NULL is not): HZ_SLICE_SHIFT in the
 * arena (a subtract and a compare), else the map entry of its segment (63
 * for a large block), from the first map or, above its reach, the second. */
HZ_INLINE unsigned hz_segment_page_shift_of(const void *p) {
  if (HZ_LIKELY(hz_arena_holds(p))) return HZ_SLICE_SHIFT;
  size_t index = ((uintptr_t)p - 1) >> HZ_SEGMENT_SHIFT;
  if (HZ_UNLIKELY(index >= HZ_SEGMENT_MAP_ENTRIES))
    return hz_segment_page_shift_far(p);
  return atomic_load_explicit(&hz_segment_map[index], memory_order_relaxed);
}

/* True when p lies in one of our segments (false for NULL). */
HZ_INLINE bool hz_segment_owns(const void *p) {
  return hz_segment_page_shift_of(p) != 0;
}

/* The segment holding p, or NULL when p is not ours (NULL included). */
HZ_INLINE hz_segment_t *hz_segment_of(const void *p) {
  return hz_segment_owns(p) ? hz_segment_base(p) : NULL;
}

/* The descriptor of the slice holding p, with the segment's page_shift in
 * hand (from the map): the page's own when p is in its first slice, one
 * that points back to it otherwise (hz_segment_page_first). */
HZ_INLINE hz_page_t *hz_segment_page_at(hz_segment_t *seg, const void *p,
                                        unsigned page_shift) {
  return &seg->pages[((uintptr_t)p - (uintptr_t)seg) >> page_shift];
}

/* hz_segment_page_at for a block of the arena, one instruction shorter:
 * the slice index from p's own bits. A pointer exactly at the segment's
 * end (hz_segment_base of p - 1) names slice 0 instead of the spare
 * descriptor; a block check on that page refuses it all the same (it lies
 * past the page's blocks). */
HZ_INLINE hz_page_t *hz_segment_slice_of(hz_segment_t *seg, const void *p) {
  return &seg->pages[((uintptr_t)p >> HZ_SLICE_SHIFT) % HZ_SLICES];
}

/* The page a slice descriptor belongs to. */
HZ_INLINE hz_page_t *hz_segment_page_first(hz_page_t *slice) {
  if (HZ_UNLIKELY(hz_page_owner_word(slice) == HZ_PAGE_INTERIOR))
    return slice->next;
  return slice;
}

/* The page of p, a pointer into a segment of pages (the arena's, or one
 * mapped on its own; not a large block's), found from p alone: its
 * segment is p - 1 rounded down, its slice p's own bits. */
HZ_INLINE hz_page_t *hz_segment_block_page(const void *p) {
  return hz_segment_page_first(hz_segment_slice_of(hz_segment_base(p), p));
}

HZ_INLINE hz_page_t *hz_segment_page_of(hz_segment_t *seg, const void *p) {
  if (seg->kind == HZ_SEGMENT_LARGE) return &seg->pages[0];
  return hz_segment_page_first(hz_segment_page_at(seg, p, HZ_SLICE_SHIFT));
}

/* Kind of page that holds blocks of block_size. */
hz_page_kind_t hz_segment_kind_for(size_t block_size);
/* A free page of the given kind from the set's segments (start/end set,
 * owner unset), or NULL when no memory can be had. Placed in the fullest
 * 2 MiB region with room. Owner of the set only (or its lock's takers). */
hz_page_t *hz_segment_page_alloc(hz_segment_set_t *set, hz_page_kind_t kind);
/* The same from the segments the set holds already: NULL when none of them
 * has room. */
hz_page_t *hz_segment_page_cut(hz_segment_set_t *set, hz_page_kind_t kind);
/* Give a page with no live block back to its segment (its set's owner, or
 * any heap cutting from a shared set). */
void hz_segment_page_free(hz_page_t *page);
/* The same, and its slices' memory (with every other free slice of its
 * segment) goes back to the kernel at once, not a purge delay later: a page
 * its heap will not cut again soon. The caller makes the madvise (a malloc
 * or free, often: keeping the page for the next purge round instead cut
 * bench/latency's p99.99 from 158 to 72 us but raised larson's peak RSS
 * from 11.6 to 14.5 MiB and mt_remote T16's from 36 to 45 MiB, in the runs
 * docs/DESIGN.md cites). */
void hz_segment_page_give_back(hz_page_t *page);
/* Give the set's empty segment back to the process (trim, collection). */
void hz_segment_set_trim(hz_segment_set_t *set);
hz_segment_t *hz_segment_of_page(const hz_page_t *page);
/* The set whose segment holds `page`: stable while the page is cut (a
 * segment with a page in it never leaves its set), so any thread may ask. */
hz_segment_set_t *hz_segment_set_of_page(const hz_page_t *page);

/* Secure variants: make the guard pages of a fresh mapping of map_size
 * bytes (after the header, and the last page) inaccessible. */
void hz_segment_guard(hz_segment_t *seg, size_t map_size);

/* Large blocks: a segment header in front of one mapping. Registering
 * fails only when a segment above the first map's reach needs a page of
 * the second map and the kernel refuses it. */
bool hz_segment_register(hz_segment_t *seg);
/* Make sure a segment at `seg` could be registered (false: it cannot). */
bool hz_segment_map_reserve(const void *seg);
void hz_segment_unregister(hz_segment_t *seg);
/* For segment.c (segment_map.c's): set the map entry of `seg` (its page
 * shift; 0: not a segment), false when its page of the second map cannot
 * be had; and count segments of pages mapped (+1) or given back (-1). */
bool hz_segment_map_set(hz_segment_t *seg, uint8_t entry);
void hz_segment_count_add(int n);

/* fork support: hold / release the segment lock around fork(). */
void hz_segment_fork_prepare(void);
void hz_segment_fork_parent(void);
void hz_segment_fork_child(void);

/* Delayed purge: give back the free slices of segments that have been
 * dirty for the purge delay (every dirty slice when `force`), and with
 * `force` the cached empty segments. Returns the ms clock of the next
 * slice that will fall due (UINT64_MAX if none). */
uint64_t hz_segment_purge(uint64_t now, bool force);
/* Background (the purge thread): back a few regions that are full of
 * pages and nearly all resident with huge pages (MADV_COLLAPSE). */
void hz_segment_densify(void);
/* When the earliest dirty segment falls due (UINT64_MAX: none); any thread. */
uint64_t hz_segment_purge_next(void);

/* Counters for the stats report. */
size_t hz_segment_count(void);
/* How often the process-wide segment lock was taken (stats). */
uint64_t hz_segment_lock_taken(void);
/* The state of the segments of pages, for the stats report. */
#define HZ_FILL_BUCKETS 6 /* empty, <= 1/4, <= 1/2, <= 3/4, < full, full */
typedef struct {
  size_t cached;                   /* empty segments kept mapped for reuse */
  size_t dirty_bytes;              /* free slices not yet given back */
  size_t regions[HZ_FILL_BUCKETS]; /* 2 MiB regions by slices in pages */
  size_t huge_regions;             /* regions that asked for huge pages */
  size_t arena_reserved, arena_in_use;
} hz_segment_state_t;
void hz_segment_state(hz_segment_state_t *out);
/* Pages in use, the blocks they hand out and the carved blocks back on
 * them (free), over every segment. Safe to
 * call from any thread (segments stay mapped while it runs); the numbers
 * are a snapshot that owners may be changing at the same time. */
void hz_segment_summarize(size_t *pages, size_t *blocks, size_t *bytes,
                          size_t *free_blocks);

#endif
