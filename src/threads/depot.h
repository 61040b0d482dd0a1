/* depot: the shared pages' ladder's rung between the CPU caches and the
 * class heaps (ladder.h): per class, up to HZ_DEPOT_BATCHES batches that
 * one CPU's cache could not hold and another CPU's bins take, so blocks
 * freed on one CPU serve mallocs on another without going back to their
 * class heap's pages. Where the CPU caches are off (no rseq, the secure
 * and debug variants, HZ_CPU_CACHE=0) the depots are the ladder's first
 * rung. One lock a class, taken once a batch. A depot holds the blocks the
 * way a bin gave them (entries, heap.h), counted in use on their pages. */
#ifndef HZ_DEPOT_H
#define HZ_DEPOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_cache.h"
#include "heap.h"
#include "lock.h"
#include "stats.h"

#define HZ_DEPOT_BATCHES 8

/* One class's depot: a stack of batches of up to HZ_CPU_BATCH entries.
 * `batches` and `count` are written under the lock and read without it
 * (HZ_SHARED_GET) by the stats. */
typedef struct {
  hz_lock_t lock;
  uint32_t batches;
  uint32_t count[HZ_DEPOT_BATCHES];
  void *slots[HZ_DEPOT_BATCHES][HZ_CPU_BATCH];
} hz_depot_t;

/* At start-up: the depots' locks. */
void hz_depot_init(void);
/* The newest batch of class `cls` (a class of the CPU caches:
 * hz_cpu_class) into out[]; how many (0: the depot is empty). */
unsigned hz_depot_take(size_t cls, void **out);
/* blocks[0..n) (n at most HZ_CPU_BATCH) of class `cls` as one batch;
 * false when the depot is full (nothing taken). */
bool hz_depot_put(size_t cls, void *const *blocks, unsigned n);
/* Every depot's batches home to their class heaps through the calling
 * thread's heap (trim, an idle process). */
void hz_depot_drain(hz_heap_t *heap);

/* fork: the depots' locks held across it. */
void hz_depot_fork_prepare(void);
void hz_depot_fork_parent(void);
void hz_depot_fork_child(void);

/* The stats report: batches put and taken, and the blocks each class's
 * depot holds now added to cached[] (a snapshot while threads run); the
 * blocks the depots hold in all. */
void hz_depot_stats(hz_front_end_stats_t *out);
uint64_t hz_depot_blocks(void);

#endif
