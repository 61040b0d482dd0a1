/* route: the class decision (see route.h). */
#include "route.h"

/* A class shares pages once one block in CROSS_SHARE of its threads'
 * pages is freed by another thread than the owner; it turns local again
 * when fewer than one in 2 * CROSS_SHARE are (the gap keeps a class near
 * the line from turning at every round). */
#define CROSS_SHARE 8

/* Frees that cross threads in runs (half of them or more extend a run)
 * are a producer and its consumers: on their own pages their blocks go
 * home a run at a time and come back in address order, which the shared
 * pages would give up. Such a class shares only while the program is
 * crowded, where a page of every class in every thread's heap is what
 * costs most. */
static bool crosses_in_runs(const hz_route_seen_t *seen) {
  return seen->runs * 2 >= seen->remote;
}

/* At least one block in `share` of those handed out from the threads'
 * pages was freed by another thread. */
static bool crosses(const hz_route_seen_t *seen, uint64_t share) {
  return seen->remote * share >= seen->handed;
}

/* At least one malloc in `share` of the class's was of a block another
 * thread then freed: what the trips home cost the threads' pages, against
 * what the shared pages cost every malloc and free of the class. (Counted
 * against the blocks handed out from the pages instead, a class whose
 * bins take back what the thread frees saw one block in 8 cross: larson,
 * whose threads free, once, the blocks their predecessor allocated, one
 * malloc in 6,000 crossing, shared 20 classes and took 20.2 s against
 * 16.0 on the threads' pages, 7 runs.) */
static bool crosses_mallocs(const hz_route_seen_t *seen, uint64_t share) {
  return seen->remote * share >= seen->allocs;
}

/* Frees that cross threads, one malloc in `share` at least, and not in
 * runs unless the program is crowded. */
static bool crossing(const hz_route_seen_t *seen, uint64_t share,
                     bool crowded) {
  return crosses_mallocs(seen, share) && (crowded || !crosses_in_runs(seen));
}

bool hz_route_shared(const hz_route_seen_t *seen, bool shared_now,
                     bool crowded) {
  if (!hz_route_ready(seen)) return shared_now;
  /* Seen through the probes (crowded: there are none). Runs do not turn
   * a class back: a probe is a bin cut fresh from a page, in address
   * order, so even a random mix of frees returns it in runs. */
  if (shared_now)
    return crowded || crosses(seen, 2 * CROSS_SHARE);
  return crossing(seen, CROSS_SHARE, crowded);
}
