/* latency: how long each malloc and free takes, not how many a second.
 * Each thread keeps SLOTS slots and every step picks one at random: a
 * block there is freed (one in four handed to the next thread instead,
 * which frees it: a queue without back-pressure), an empty one gets a new
 * block of 16 B-4 KiB (one in 64 up to 256 KiB, one in 4,096 up to
 * 4 MiB) whose first 64 bytes the program writes. Every call is timed on
 * its own; the result line gives the 99th, 99.9th and 99.99th percentile
 * and the longest of malloc, of free and of both, in microseconds, the
 * minor page faults, ops/s (calls a second, timing included) and peak RSS.
 * A page fault taken inside malloc shows in its tail: a program's first
 * write to a block should take it, not the allocator. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"

static const char usage[] =
    "usage: latency [THREADS=4] [STEPS=500000] [SLOTS=4096]\n"
    "  each thread: STEPS steps over SLOTS slots; every malloc and free "
    "timed\n";

/* A histogram of nanoseconds: 1 ns buckets below LINEAR, then SUB
 * buckets per power of two (under 2% wide) up to 2^OCTAVES ns. */
enum { LINEAR = 1024, SUB = 64, OCTAVES = 34 };
enum { BUCKETS = LINEAR + (OCTAVES - 10) * SUB };

typedef struct {
  uint64_t count[BUCKETS];
  uint64_t calls;
  uint64_t longest;
} histogram_t;

static size_t bucket_of(uint64_t ns) {
  if (ns < LINEAR) return (size_t)ns;
  unsigned octave = 63u - (unsigned)__builtin_clzll(ns); /* >= 10 */
  if (octave >= OCTAVES) return BUCKETS - 1;
  uint64_t sub = (ns >> (octave - 6)) & (SUB - 1);
  return LINEAR + (size_t)(octave - 10) * SUB + (size_t)sub;
}

/* The smallest value of bucket b. */
static uint64_t bucket_floor(size_t b) {
  if (b < LINEAR) return b;
  size_t octave = 10 + (b - LINEAR) / SUB, sub = (b - LINEAR) % SUB;
  return ((uint64_t)1 << octave) + ((uint64_t)sub << (octave - 6));
}

static void record(histogram_t *h, uint64_t ns) {
  h->count[bucket_of(ns)]++;
  h->calls++;
  if (ns > h->longest) h->longest = ns;
}

static void merge(histogram_t *into, const histogram_t *from) {
  for (size_t b = 0; b < BUCKETS; b++)
    into->count[b] += from->count[b];
  into->calls += from->calls;
  if (from->longest > into->longest) into->longest = from->longest;
}

/* The q-quantile, in microseconds (a bucket's floor). */
static double quantile_us(const histogram_t *h, double q) {
  uint64_t rank = (uint64_t)(q * (double)h->calls);
  uint64_t seen = 0;
  for (size_t b = 0; b < BUCKETS; b++) {
    seen += h->count[b];
    if (seen > rank) return (double)bucket_floor(b) / 1000.0;
  }
  return (double)h->longest / 1000.0;
}

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A block handed to the next thread: its first word links it. */
typedef struct handed_s {
  struct handed_s *next;
} handed_t;

typedef struct {
  _Alignas(64) _Atomic(handed_t *) inbox;
  histogram_t mallocs, frees;
} worker_t;

static struct {
  int threads;
  long steps, slots;
  worker_t *workers;
  pthread_barrier_t start;
} g;

static size_t draw_size(bench_rng_t *rng) {
  uint64_t r = bench_rng_next(rng);
  if (r % 4096 == 0) return (size_t)bench_rng_range(rng, 256 << 10, 4 << 20);
  if (r % 64 == 0) return (size_t)bench_rng_range(rng, 4097, 256 << 10);
  return (size_t)bench_rng_range(rng, 16, 4096);
}

static void timed_free(worker_t *w, void *p) {
  uint64_t t0 = now_ns();
  free(p);
  record(&w->frees, now_ns() - t0);
}

/* Free what the previous thread handed over. */
static void drain(worker_t *w) {
  handed_t *list = atomic_exchange(&w->inbox, NULL);
  while (list != NULL) {
    handed_t *next = list->next;
    timed_free(w, list);
    list = next;
  }
}

static void hand_over(worker_t *to, void *p) {
  handed_t *h = p;
  h->next = atomic_load(&to->inbox);
  while (!atomic_compare_exchange_weak(&to->inbox, &h->next, h)) {
  }
}

static void *run(void *arg) {
  int me = (int)(uintptr_t)arg;
  worker_t *w = &g.workers[me];
  worker_t *next = &g.workers[(me + 1) % g.threads];
  bench_rng_t rng;
  bench_rng_seed(&rng, 0x6c6174ull + (uint64_t)me);
  void **slot = bench_xcalloc((size_t)g.slots, sizeof *slot);
  pthread_barrier_wait(&g.start);
  for (long i = 0; i < g.steps; i++) {
    if ((i & 15) == 0) drain(w);
    void **s = &slot[bench_rng_next(&rng) % (uint64_t)g.slots];
    if (*s != NULL) {
      if (g.threads > 1 && bench_rng_next(&rng) % 4 == 0)
        hand_over(next, *s);
      else
        timed_free(w, *s);
      *s = NULL;
      continue;
    }
    size_t size = draw_size(&rng);
    uint64_t t0 = now_ns();
    void *p = malloc(size);
    record(&w->mallocs, now_ns() - t0);
    if (p == NULL) bench_oom(size);
    memset(p, (int)(i & 0x7f), size < 64 ? size : 64);
    *s = p;
  }
  for (long i = 0; i < g.slots; i++)
    free(slot[i]);
  free(slot);
  return NULL;
}

int main(int argc, char **argv) {
  long long v[3] = {4, 500000, 4096};
  if (bench_start(argc, argv, usage, v, 3)) return 0;
  g.threads = (int)v[0];
  g.steps = (long)v[1];
  g.slots = (long)v[2];
  if (g.threads < 1 || g.steps < 1 || g.slots < 1) return bench_bad_args(usage);
  g.workers = bench_xcalloc((size_t)g.threads, sizeof *g.workers);
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  double secs = bench_time_threads(g.threads, run, &g.start);
  for (int t = 0; t < g.threads; t++) /* what is still on its way */
    drain(&g.workers[t]);
  getrusage(RUSAGE_SELF, &after);
  histogram_t *m = bench_xcalloc(3, sizeof *m), *f = m + 1, *all = m + 2;
  for (int t = 0; t < g.threads; t++) {
    merge(m, &g.workers[t].mallocs);
    merge(f, &g.workers[t].frees);
  }
  merge(all, m);
  merge(all, f);
  const histogram_t *h[3] = {m, f, all};
  char line[512];
  size_t len = 0;
  const char *name[3] = {"malloc", "free", "all"};
  for (int k = 0; k < 3; k++)
    len += (size_t)snprintf(
        line + len, sizeof line - len,
        "%s_p99_us=%.3f %s_p999_us=%.3f %s_p9999_us=%.3f %s_max_us=%.1f ",
        name[k], quantile_us(h[k], 0.99), name[k], quantile_us(h[k], 0.999),
        name[k], quantile_us(h[k], 0.9999), name[k],
        (double)h[k]->longest / 1000.0);
  bench_result("latency",
               "threads=%d steps=%ld slots=%ld %sminor_faults=%ld ops/s=%.0f",
               g.threads, g.steps, g.slots, line,
               after.ru_minflt - before.ru_minflt, (double)all->calls / secs);
  free(m);
  free(g.workers);
  return 0;
}
