/* decision: the class decision's state and the rounds that feed it. Where
 * a class's refills come from (the threads' own pages or the class's
 * shared pages) is judged here, by route.c's rule (pure arithmetic), on
 * what the heaps counted since the class was last judged; the verdict is
 * the class's route, one byte a class here, which the refill and the free
 * path read, and each thread's turn of its class's probes. Also here: the
 * crowding test (more threads with a heap than HZ_SHARED_PAGES a CPU), which
 * the rounds and the young threads' rule share, the young threads' rule itself
 * (a thread of a crowded program makes its first mallocs and frees without a
 * heap), and the start with every class shared (HZ_SHARED_PAGES=-1).
 * docs/DESIGN.md lists every condition that changes a block's route or a
 * refill's source, and which of them are switches. */
#ifndef HZ_DECISION_H
#define HZ_DECISION_H

#include <stdbool.h>
#include <stddef.h>

#include "heap.h"
#include "route.h"

/* Where a class's refills come from, one byte a class, written by the
 * purge thread's rounds: the threads' own pages, the shared pages, or the
 * shared pages with one refill in HZ_ROUTE_PROBE_EVERY from the own pages
 * (a program not crowded: route.h). */
typedef enum {
  HZ_CLASS_OWN_PAGES,
  HZ_CLASS_SHARED,
  HZ_CLASS_PROBED
} hz_class_route_t;
extern uint8_t hz_class_route[HZ_CLASS_COUNT];

/* The class's refills come from the shared pages (probed or not). */
/* [condition: class-route] */
HZ_INLINE bool hz_decision_shares(size_t cls) {
  return __atomic_load_n(&hz_class_route[cls], __ATOMIC_ACQUIRE) !=
         HZ_CLASS_OWN_PAGES;
}

/* The class takes probes: one refill in HZ_ROUTE_PROBE_EVERY from the
 * threads' own pages. */
HZ_INLINE bool hz_decision_probed(size_t cls) {
  return __atomic_load_n(&hz_class_route[cls], __ATOMIC_RELAXED) ==
         HZ_CLASS_PROBED;
}

/* A probed class's refill by the calling thread is a probe's this time:
 * one in HZ_ROUTE_PROBE_EVERY, counted per thread and class. */
bool hz_decision_probe_turn(uint8_t cls);
/* Set where the class's refills come from (blocks already out travel as
 * their pages say, whatever it is). False when the shared pages cannot be
 * had (no memory for their class heaps): the class stays on the threads'
 * pages. */
bool hz_decision_set(size_t cls, hz_class_route_t route);
/* The classes sharing pages now, and the times a class turned. */
void hz_decision_count(uint64_t *shared_classes, uint64_t *turns);

/* What the heaps counted of each class, summed over a round. */
typedef struct {
  hz_route_seen_t classes[HZ_CLASS_COUNT];
} hz_decision_sums_t;

/* The rounds judge the classes (HZ_SHARED_PAGES above 0; at 0 every class
 * stays on the threads' pages, at -1 every class shares from the start). */
bool hz_decision_rounds_on(void);
/* Add what `heap` counted of every class to `sums` (the caller holds the
 * list of heaps still). */
void hz_decision_add_heap(hz_decision_sums_t *sums, const hz_heap_t *heap);
/* One round: what grew since the last, added to what each class saw since
 * it was last judged; each class judged once enough was seen, its route
 * set. `threads`: the threads holding a heap now. True when a class left
 * the shared pages: its blocks in the CPU caches and depots are to go to
 * their class heaps (the caller drains them). */
bool hz_decision_judge(const hz_decision_sums_t *sums, size_t threads);
/* A thread without a heap stays without one for this malloc or free: one
 * of the first 256 of a young thread of a crowded program (`threads` hold
 * a heap now); not while it exits. */
bool hz_decision_stays_alone(size_t threads, bool exiting);
/* At start-up: HZ_SHARED_PAGES=-1 turns every class shared. */
void hz_decision_start(void);

#endif
