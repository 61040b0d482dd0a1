/* segment: 4 MiB chunks of address space aligned to their size, the map
 * that answers "is this pointer ours?" with one load, and the page
 * descriptors kept in each segment's header.
 *
 * A segment holds pages of one kind. Pointer -> segment: ((p - 1) & ~mask),
 * so a block that starts exactly at the end of a 4 MiB unit (large blocks
 * aligned to 4 MiB) still maps to the segment that holds its header.
 * Segment -> page: (p - segment) >> page_shift. */
#ifndef HZ_SEGMENT_H
#define HZ_SEGMENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "page.h"

typedef enum {
  HZ_SEGMENT_SMALL,  /* 64 KiB pages */
  HZ_SEGMENT_MEDIUM, /* 128 KiB pages */
  HZ_SEGMENT_WIDE,   /* 512 KiB pages */
  HZ_SEGMENT_BIG,    /* one page spanning the segment */
  HZ_SEGMENT_LARGE,  /* one large block, owned by the large box */
  HZ_SEGMENT_KINDS
} hz_segment_kind_t;

typedef struct hz_segment_s {
  /* First, so that segment -> page descriptor is base + (index << 6).
   * One spare descriptor: a pointer exactly at the segment end indexes it. */
  hz_page_t pages[HZ_PAGES_PER_SEGMENT + 1];
  uint8_t kind;
  uint8_t page_shift;
  uint16_t page_count;
  uint16_t used_pages;
  uint8_t zeroed;  /* large: the block area reads as zeros */
  size_t map_size; /* bytes mapped from the segment start (large blocks) */
  size_t touched;  /* large: bytes from the start that may be resident */
  uint64_t demand_epoch; /* large: last half delay its bytes counted in */
  /* 64 KiB slices: held by an allocated page, or free but maybe resident
   * (dirty). A dirty segment is on the purge list until purge_due. */
  uint64_t used_slices;
  uint64_t dirty_slices;
  uint64_t purge_due;
  struct hz_segment_s *purge_next;
  struct hz_segment_s *purge_prev;
  struct hz_segment_s *next; /* segments of this kind with a free page */
  struct hz_segment_s *prev;
  struct hz_segment_s *all_next; /* every mapped page segment */
  struct hz_segment_s *all_prev;
  hz_page_t *free_pages;
} hz_segment_t;

#define HZ_SLICE_SHIFT 16
#define HZ_SLICE_SIZE  ((size_t)1 << HZ_SLICE_SHIFT)
_Static_assert(HZ_SEGMENT_SIZE / HZ_SLICE_SIZE == 64, "one bit per slice");

/* The header (page descriptors) fills the first 8 KiB. The secure
 * variants follow it with a guard page and keep another at the segment's
 * end, so neither an underflow of the first block nor an overflow out of
 * the segment below reaches the descriptors. Blocks start at
 * HZ_SEGMENT_HEADER_SIZE. */
#define HZ_SEGMENT_META_SIZE   ((size_t)8 << 10)
#define HZ_GUARD_SIZE          (HZ_SECURE ? (size_t)4096 : 0)
#define HZ_SEGMENT_HEADER_SIZE (HZ_SEGMENT_META_SIZE + HZ_GUARD_SIZE)
/* The map: one byte per segment of the address space below the arena
 * range's end (config.h), 1 MiB; the segments the kernel placed above it
 * are found through a second, two-level map of the whole 47-bit address
 * space, slower and off the free fast path. */
#define HZ_SEGMENT_MAP_ENTRIES                                                 \
  ((HZ_ARENA_BASE + HZ_ARENA_SIZE) >> HZ_SEGMENT_SHIFT)

extern _Atomic uint8_t hz_segment_map[HZ_SEGMENT_MAP_ENTRIES];

/* The map entry of p above the first map's reach (0: not ours). */
unsigned hz_segment_page_shift_far(const void *p);

/* Segments waiting for their purge, in due order, linked by
 * purge_next/purge_prev: the segment box keeps one for segments with dirty
 * slices, the large box one for cached mappings; each guards its own with
 * its lock. */
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

/* The map entry of the segment p would belong to: its page_shift when
 * it is one of ours, 0 when not (NULL included). */
HZ_INLINE unsigned hz_segment_page_shift_of(const void *p) {
  size_t index = ((uintptr_t)p - 1) >> HZ_SEGMENT_SHIFT;
  if (HZ_UNLIKELY(index >= HZ_SEGMENT_MAP_ENTRIES))
    return hz_segment_page_shift_far(p);
  return atomic_load_explicit(&hz_segment_map[index], memory_order_relaxed);
}

/* The same from the first map alone (one load): 0 also for our segments
 * above its reach, which the caller then looks up with the above. */
HZ_INLINE unsigned hz_segment_page_shift_near(const void *p) {
  size_t index = ((uintptr_t)p - 1) >> HZ_SEGMENT_SHIFT;
  if (HZ_UNLIKELY(index >= HZ_SEGMENT_MAP_ENTRIES)) return 0;
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

/* With the segment's page_shift in hand (from the map). */
HZ_INLINE hz_page_t *hz_segment_page_at(hz_segment_t *seg, const void *p,
                                        unsigned page_shift) {
  return &seg->pages[((uintptr_t)p - (uintptr_t)seg) >> page_shift];
}

HZ_INLINE hz_page_t *hz_segment_page_of(hz_segment_t *seg, const void *p) {
  return hz_segment_page_at(seg, p, seg->page_shift);
}

/* Kind of segment that holds pages for blocks of block_size. */
hz_segment_kind_t hz_segment_kind_for(size_t block_size);
/* A free page of the given kind (start/end set, owner unset), or NULL. */
hz_page_t *hz_segment_page_alloc(hz_segment_kind_t kind);
/* Give a page with no live block back to its segment. */
void hz_segment_page_free(hz_page_t *page);
hz_segment_t *hz_segment_of_page(const hz_page_t *page);

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

/* fork support: hold / release the segment lock around fork(). */
void hz_segment_fork_prepare(void);
void hz_segment_fork_parent(void);
void hz_segment_fork_child(void);

/* Delayed purge: give back the free slices of segments that have been
 * dirty for the purge delay (every dirty slice when `force`), and with
 * `force` unmap the cached empty segments. Returns the ms clock of the
 * next slice that will fall due (UINT64_MAX if none). */
uint64_t hz_segment_purge(uint64_t now, bool force);
/* When the earliest dirty segment falls due (UINT64_MAX: none); any thread. */
uint64_t hz_segment_purge_next(void);

/* Counters for the stats report. */
size_t hz_segment_count(void);
/* How often the segment lock was taken (stats). */
uint64_t hz_segment_lock_taken(void);
/* Empty segments kept mapped for reuse, and bytes of free slices not yet
 * purged. */
void hz_segment_cached(size_t *segments, size_t *dirty_bytes);
/* Pages in use and the blocks they hand out, over every segment. Safe to
 * call from any thread (segments stay mapped while it runs); the numbers
 * are a snapshot that owners may be changing at the same time. */
void hz_segment_summarize(size_t *pages, size_t *blocks, size_t *bytes);

#endif
