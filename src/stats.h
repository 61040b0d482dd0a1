/* stats: counters and the report. Per-heap counters live in each heap and
 * are written only by its owner; process-wide counters (OS calls, large
 * blocks) are relaxed atomics touched only on slow paths. */
#ifndef HZ_STATS_H
#define HZ_STATS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t pages_acquired;    /* pages taken from segments */
  uint64_t pages_retired;     /* empty pages given back */
  uint64_t remote_frees;      /* blocks freed to another heap */
  uint64_t batches_published; /* stash lists pushed onto inboxes */
  uint64_t inbox_drains;      /* non-empty inbox takes */
  uint64_t drained_blocks;    /* blocks received through the inbox */
  uint64_t slow_mallocs;      /* mallocs that left the fast path */
} hz_heap_stats_t;

/* What the heap box knows, merged over every heap. */
typedef struct {
  hz_heap_stats_t counters;
  size_t heaps_total;
  size_t heaps_pooled;
  size_t pages_in_use;
  size_t blocks_live;
  size_t bytes_live; /* small blocks handed out, counted at block size */
} hz_heap_summary_t;

void hz_stats_count_mmap(size_t bytes);
void hz_stats_count_munmap(size_t bytes);
void hz_stats_count_madvise(size_t bytes);
void hz_stats_count_large_alloc(size_t bytes);
void hz_stats_count_large_free(size_t bytes);

size_t hz_stats_mapped_bytes(void);
size_t hz_stats_large_live_bytes(void);

void hz_stats_heap_add(hz_heap_stats_t *into, const hz_heap_stats_t *from);
/* Print the report (to stderr). */
void hz_stats_report(const hz_heap_summary_t *heaps, size_t segments);

#endif
