/* decision: the classes' routes, the class decision's rounds, the
 * crowding test and the young threads' rule (see decision.h). */
#define _GNU_SOURCE
#include "decision.h"

#include <string.h>
#include <unistd.h>

#include "class_heap.h"
#include "options.h"

/* A thread of a crowded program makes its first ALONE_OPS small mallocs
 * and frees without a heap: its blocks come from the shared pages one at
 * a time under their class's lock, and go home one at a time to their
 * owner's inbox. A heap costs a thread the lines of its bins and a page
 * cut for every class it uses (2,000 threads of 50 blocks each held 2.1
 * times glibc's peak RSS); short-lived threads never pay it, and a thread
 * that goes on takes one after ALONE_OPS. */
#define ALONE_OPS 256
static HZ_TLS unsigned alone_ops;

uint8_t hz_class_route[HZ_CLASS_COUNT];
static uint64_t class_turns;
/* The calling thread's refills of each probed class since its last probe. */
static HZ_TLS uint8_t probe_fills[HZ_CLASS_COUNT];

bool hz_decision_probe_turn(uint8_t cls) {
  if (++probe_fills[cls] < HZ_ROUTE_PROBE_EVERY) return false;
  probe_fills[cls] = 0;
  return true;
}

bool hz_decision_set(size_t cls, hz_class_route_t route) {
  if (route != HZ_CLASS_OWN_PAGES && !hz_class_heaps_ready()) return false;
  /* release: a malloc that reads the route (acquire) finds the heaps */
  uint8_t was = __atomic_exchange_n(&hz_class_route[cls], (uint8_t)route,
                                    __ATOMIC_RELEASE);
  if ((was == HZ_CLASS_OWN_PAGES) != (route == HZ_CLASS_OWN_PAGES))
    __atomic_add_fetch(&class_turns, 1, __ATOMIC_RELAXED);
  return true;
}

void hz_decision_count(uint64_t *shared_classes, uint64_t *turns) {
  uint64_t n = 0;
  for (int c = 1; c < HZ_CLASS_COUNT; c++)
    n += hz_decision_shares((size_t)c);
  *shared_classes = n;
  *turns = __atomic_load_n(&class_turns, __ATOMIC_RELAXED);
}

/* The CPUs the program may run on, as the crowding test counts them. */
static size_t decision_cpus(void) {
  static size_t cpus; /* 0 until first asked; any thread may ask */
  size_t n = HZ_SHARED_GET(cpus);
  if (n == 0) {
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    n = conf > 0 ? (size_t)conf : 1;
    HZ_SHARED_SET(cpus, n);
  }
  return n;
}

/* More threads hold a heap than HZ_SHARED_PAGES a CPU (route.h; never
 * with 0 or -1). */
static bool decision_crowded(size_t threads) {
  long per_cpu = hz_option(HZ_OPTION_SHARED_PAGES);
  return per_cpu > 0 &&
         hz_route_crowded(threads, decision_cpus(), (size_t)per_cpu);
}

/* [condition: young-thread] */
bool hz_decision_stays_alone(size_t threads, bool exiting) {
  if (exiting || alone_ops >= ALONE_OPS || !decision_crowded(threads))
    return false;
  alone_ops++;
  return true;
}

void hz_decision_start(void) {
  if (hz_option(HZ_OPTION_SHARED_PAGES) >= 0) return;
  for (int c = 1; c < HZ_CLASS_COUNT; c++)
    hz_decision_set((size_t)c, HZ_CLASS_SHARED);
}

bool hz_decision_rounds_on(void) {
  return hz_option(HZ_OPTION_SHARED_PAGES) > 0;
}

/* Blocks handed out from the heap's own pages, frees of those pages'
 * blocks by other threads (through a stash), and of those the frees that
 * extended a run. */
void hz_decision_add_heap(hz_decision_sums_t *sums, const hz_heap_t *heap) {
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    const hz_class_counts_t *k = &heap->counts[c];
    hz_route_seen_t *s = &sums->classes[c];
    s->allocs += HZ_SHARED_GET(k->allocs);
    s->handed += HZ_SHARED_GET(k->handed);
    s->remote +=
        HZ_SHARED_GET(k->remote_frees) - HZ_SHARED_GET(k->shared_frees);
    s->runs += HZ_SHARED_GET(k->run_frees);
  }
}

/* What a sum grew by since the last round, `last` (nothing if it went
 * back: a heap retired); the sum is remembered for the next. */
static uint64_t decision_growth(uint64_t sum, uint64_t *last) {
  uint64_t grew = sum > *last ? sum - *last : 0;
  *last = sum;
  return grew;
}

/* The purge thread's rounds: the sums of the last round, and what each
 * class saw since it was last judged. */
static hz_decision_sums_t last_sums;
static hz_route_seen_t seen[HZ_CLASS_COUNT];

static void decision_add_growth(const hz_decision_sums_t *sums) {
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    const hz_route_seen_t *s = &sums->classes[c];
    hz_route_seen_t *last = &last_sums.classes[c];
    seen[c].allocs += decision_growth(s->allocs, &last->allocs);
    seen[c].handed += decision_growth(s->handed, &last->handed);
    seen[c].remote += decision_growth(s->remote, &last->remote);
    seen[c].runs += decision_growth(s->runs, &last->runs);
  }
}

/* A class that leaves the shared pages leaves its blocks in the CPU caches
 * and depots, which no refill of it takes any more: the caller sends them
 * to their class heaps at once. */
bool hz_decision_judge(const hz_decision_sums_t *sums, size_t threads) {
  decision_add_growth(sums);
  bool crowded = decision_crowded(threads), left = false;
  hz_class_route_t shared = crowded ? HZ_CLASS_SHARED : HZ_CLASS_PROBED;
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    bool now = hz_decision_shares((size_t)c);
    bool next = hz_route_shared(&seen[c], now, crowded);
    if (hz_route_ready(&seen[c])) memset(&seen[c], 0, sizeof seen[c]);
    if (next && HZ_SHARED_GET(hz_class_route[c]) != shared)
      hz_decision_set((size_t)c, shared);
    else if (!next && now)
      left |= hz_decision_set((size_t)c, HZ_CLASS_OWN_PAGES);
  }
  return left;
}
