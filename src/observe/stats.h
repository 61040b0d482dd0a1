/* stats: counters and the report. Per-heap counters live in each heap and
 * are written only by its owner; process-wide counters (OS calls, large
 * blocks) are relaxed atomics touched only on slow paths. */
#ifndef HZ_STATS_H
#define HZ_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sizeclass.h"

typedef struct {
  uint64_t pages_acquired;      /* pages taken from segments */
  uint64_t pages_retired;       /* empty pages given back */
  uint64_t batches_published;   /* stash lists pushed onto inboxes */
  uint64_t inbox_drains;        /* non-empty inbox takes */
  uint64_t drained_blocks;      /* blocks received through the inbox */
  uint64_t drained_headers;     /* headers read to take them home */
  uint64_t slow_mallocs;        /* mallocs that left the fast path */
  uint64_t collections;         /* times another thread collected the heap */
  uint64_t bin_blocks_taken;    /* blocks a collector took from its bins */
  uint64_t live_publishes;      /* adds to the process-wide live counts */
  uint64_t pages_fresh_pending; /* pages taken while the inbox held blocks */
  uint64_t inbox_cas_retries;   /* summaries only: from each heap's stash */
  uint64_t stash_wait_ns;       /* summaries only: timed lists' waits */
  uint64_t stash_lists_timed;   /* summaries only: lists timed (1 in 16) */
  uint64_t stash_published;     /* summaries only: blocks stashes published */
  uint64_t bin_blocks_sent;     /* shared pages' blocks bins sent home
                                   through the stash (frees already) */
} hz_heap_stats_t;

/* One size class, merged over every heap. */
typedef struct {
  uint64_t allocs;
  uint64_t frees; /* remote ones included */
  uint64_t remote_frees;
} hz_class_stats_t;

/* The shared pages' ladder above their pages (ladder box): batches a
 * bin gave to or took from a CPU's cache and a depot, caches emptied by
 * another thread, section restarts, the blocks caches and depots hold,
 * and the classes sharing pages now. */
typedef struct {
  const char *name;
  uint64_t cache_gives;   /* batches from bins onto CPU caches */
  uint64_t cache_takes;   /* batches from CPU caches into bins */
  uint64_t depot_puts;    /* batches from bins into depots */
  uint64_t depot_takes;   /* batches from depots into bins */
  uint64_t drains;        /* caches emptied by another thread */
  uint64_t cached_blocks; /* blocks in caches and depots now */
  uint64_t restarts;      /* sections started again, every thread's */
  uint64_t shared_classes; /* classes whose refills come from shared pages */
  uint64_t class_turns;    /* times a class turned shared or back */
  /* cached_blocks by class (counted as freed already: they left a bin). */
  uint64_t cached[HZ_CLASS_COUNT];
} hz_front_end_stats_t;

/* The guarded sample (guard box). */
typedef struct {
  uint64_t sample;  /* one malloc in this many is guarded (0: off) */
  uint64_t slots;   /* the pool's slots */
  uint64_t allocs;  /* guarded blocks handed out */
  uint64_t in_use;  /* slots holding a live block now */
  uint64_t reports; /* errors found in guarded blocks */
} hz_guard_stats_t;

/* What the heap box knows, merged over every heap. */
typedef struct {
  hz_heap_stats_t counters;
  hz_class_stats_t classes[HZ_CLASS_COUNT];
  size_t heaps_total;   /* heaps made so far */
  size_t heaps_pooled;  /* waiting for a thread now */
  size_t heaps_retired; /* emptied after their thread exited, and unmapped */
  size_t pages_in_use;
  size_t blocks_live;
  size_t bytes_live; /* small blocks handed out, counted at block size */
  size_t blocks_free_on_pages; /* carved blocks back on their pages */
  size_t bytes_kept_empty;     /* empty pages heaps keep for reuse */
  hz_front_end_stats_t front;
} hz_heap_summary_t;

/* The allocator's locks, each counting how often it was taken. */
typedef enum {
  HZ_LOCK_SEGMENT,    /* segment box: pages and segments */
  HZ_LOCK_LARGE,      /* large box: the cache of large mappings */
  HZ_LOCK_POOL,       /* thread box: the heap pool and list */
  HZ_LOCK_COLLECT,    /* thread box: one collection round at a time */
  HZ_LOCK_CLASS_HEAP, /* heap box: the busiest class heap's lock */
  HZ_LOCK_KINDS
} hz_lock_kind_t;

#define HZ_STATS_FILL_BUCKETS 6

/* What the memory-returning boxes hold, for the report and mallinfo2, and
 * how often the locks were taken. */
typedef struct {
  uint64_t locks_taken[HZ_LOCK_KINDS];
  size_t segments;        /* mapped segments, large mappings included */
  size_t segments_cached; /* empty segments kept for reuse */
  size_t dirty_bytes;     /* free slices of segments not yet purged */
  /* 2 MiB regions of the segments of pages by how much of them pages
   * hold: empty, up to 1/4, 1/2, 3/4, less than full, full. */
  size_t regions[HZ_STATS_FILL_BUCKETS];
  size_t huge_regions;       /* regions that asked for a huge page */
  size_t arena_reserved;     /* address space reserved for segments */
  size_t arena_in_use;       /* of it, in segments handed out now */
  size_t large_cached;       /* freed large mappings kept for reuse */
  size_t large_cached_bytes; /* their mapped bytes */
  size_t large_dirty_bytes;  /* of those, not yet purged */
  hz_guard_stats_t guard;
} hz_memory_summary_t;

/* The large box's counts (the os box keeps its own: hz_os_counts). */
void hz_stats_count_large_reuse(void);
void hz_stats_count_large_resize(size_t old_bytes, size_t new_bytes);
void hz_stats_count_large_alloc(size_t bytes);
void hz_stats_count_large_free(size_t bytes);
/* A thread's live count of class `cls` moved by `delta` blocks since it
 * last said (slow paths only); keeps the process-wide peak. */
void hz_stats_add_live(uint8_t cls, int64_t delta);
/* A free by a thread without a heap (past its exit handler, or out of
 * memory for one): counted here, as a remote free, with the failed CAS of
 * its push. */
void hz_stats_count_orphan_free(uint8_t cls, unsigned cas_retries);

size_t hz_stats_large_live_bytes(void);
size_t hz_stats_large_live_count(void);

void hz_stats_heap_add(hz_heap_stats_t *into, const hz_heap_stats_t *from);
/* Print the report (to stderr). */
void hz_stats_report(const hz_heap_summary_t *heaps,
                     const hz_memory_summary_t *memory);
/* Write the report as JSON to path; false (with a warning) on failure. */
bool hz_stats_write_json(const char *path, const hz_heap_summary_t *heaps,
                         const hz_memory_summary_t *memory);

#endif
