/* route: the one decision that chooses a block's route at run time. A
 * block's page decides where the block goes when it is freed (a thread's
 * page: home to that thread's heap; a shared page: any thread's bin, then
 * the CPU's cache, the class's depot and its shared pages), so what is
 * decided is where a class's refills come from: the allocating thread's
 * own pages, or the class's shared pages. The purge thread's rounds feed
 * this what they saw of each class; the rule and its thresholds are here
 * and nowhere else, and so is the crowding test they share with young
 * threads. Pure functions: no state, no call into any box. */
#ifndef HZ_ROUTE_H
#define HZ_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* What the rounds saw of one class since it was last judged. */
typedef struct {
  /* Blocks the threads' bins handed to the program (their mallocs). */
  uint64_t allocs;
  /* Blocks handed out from threads' own pages (refills from them). */
  uint64_t handed;
  /* Of those pages' blocks, frees by another thread than the owner (they
   * travel home through a stash). */
  uint64_t remote;
  /* Of `remote`, frees that extended a run: blocks freed in the order
   * their page holds them (a producer and its consumers). */
  uint64_t runs;
} hz_route_seen_t;

/* A class is judged once its rounds saw this many blocks handed out from
 * threads' pages; until then what was seen adds up (a slow program takes
 * more rounds, not a noisier look). */
#define HZ_ROUTE_MIN_HANDED 256

/* Of a shared class's refills, one in HZ_ROUTE_PROBE_EVERY comes from the
 * thread's own pages while the program is not crowded: the blocks the
 * class is seen by, so it can turn local again without a probe. */
#define HZ_ROUTE_PROBE_EVERY 64

/* The program is crowded: more threads hold a heap than `per_cpu` for
 * each of its `cpus` (per_cpu 0: never). */
HZ_INLINE bool hz_route_crowded(size_t threads, size_t cpus, size_t per_cpu) {
  return per_cpu != 0 && threads > cpus * per_cpu;
}

/* A judgement is due: enough was seen. */
HZ_INLINE bool hz_route_ready(const hz_route_seen_t *seen) {
  return seen->handed >= HZ_ROUTE_MIN_HANDED;
}

/* Whether the class refills from the shared pages from now on, given what
 * was seen, what it does now and whether the program is crowded. */
bool hz_route_shared(const hz_route_seen_t *seen, bool shared_now,
                     bool crowded);

#endif
