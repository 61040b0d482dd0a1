/* Touched slots: the workload of malloc_large, vm_mixed and mid_large_mt.
 * Blocks of MIN..MAX bytes live in N slots; a random slot's block is
 * replaced again and again, and every page of a new block is touched (or
 * one byte every `stride` bytes).
 * bench_slots_main is the whole program for the one-thread benchmarks. */
#ifndef HZ_BENCH_SLOTS_H
#define HZ_BENCH_SLOTS_H

#include <stdbool.h>

#include "bench.h"

typedef struct {
  void **slots;
  uint64_t n;
  size_t min, max;
  size_t stride; /* bytes between the writes to a new block */
  bench_rng_t rng;
} bench_slots_t;

/* N empty slots, sizes MIN..MAX, random draws from seed. */
static inline void bench_slots_init(bench_slots_t *t, uint64_t n, size_t min,
                                    size_t max, uint64_t seed) {
  t->slots = bench_xcalloc((size_t)n, sizeof(void *));
  t->n = n;
  t->min = min;
  t->max = max;
  t->stride = 4096;
  bench_rng_seed(&t->rng, seed);
}

/* A new block in every slot (the slots must be empty). */
static inline void bench_slots_fill(bench_slots_t *t) {
  for (uint64_t i = 0; i < t->n; i++) {
    size_t n = (size_t)bench_rng_range(&t->rng, t->min, t->max);
    t->slots[i] = bench_xmalloc(n);
    bench_touch_every(t->slots[i], n, t->stride);
  }
}

/* ITERS times: pick a random slot, free its block (if any) and put a new
 * one there. Returns the wall time this took, in seconds. */
static inline double bench_slots_replace(bench_slots_t *t, long long iters) {
  double t0 = bench_now();
  for (long long i = 0; i < iters; i++) {
    uint64_t r = bench_rng_next(&t->rng);
    uint64_t s = (r >> 32) % t->n;
    size_t n = t->min + (size_t)((r & 0xffffffffu) % (t->max - t->min + 1));
    free(t->slots[s]);
    t->slots[s] = bench_xmalloc(n);
    bench_touch_every(t->slots[s], n, t->stride);
  }
  return bench_now() - t0;
}

/* Every block and the slot table freed. */
static inline void bench_slots_free(bench_slots_t *t) {
  for (uint64_t i = 0; i < t->n; i++)
    free(t->slots[i]);
  free(t->slots);
}

/* A one-thread touched-slots benchmark: its name, the result key for the
 * slot count, default ITERS and slot count, block sizes, whether the slots
 * are filled (untimed) before the measured replacements, and whether the
 * result is fixed work in secs (else ops/s). */
typedef struct {
  const char *name, *slots_key;
  long long iters, slots;
  size_t min, max;
  bool fill, fixed_work;
} bench_slots_spec_t;

/* main for a one-thread touched-slots benchmark: arguments [ITERS] [SLOTS]
 * [STRIDE] (bytes between writes, default 4096: every page), seed 1; the
 * blocks left are freed after timing. */
static inline int bench_slots_main(int argc, char **argv, const char *usage,
                                   const bench_slots_spec_t *spec) {
  long long a[] = {spec->iters, spec->slots, 4096};
  if (bench_start(argc, argv, usage, a, 3)) return 0;
  long long iters = a[0], n = a[1], stride = a[2];
  if (iters < 0 || n < 1 || stride < 1) return bench_bad_args(usage);
  bench_slots_t slots;
  bench_slots_init(&slots, (uint64_t)n, spec->min, spec->max, 1);
  slots.stride = (size_t)stride;
  if (spec->fill) bench_slots_fill(&slots);
  double secs = bench_slots_replace(&slots, iters);
  bench_slots_free(&slots);
  if (spec->fixed_work)
    bench_result(spec->name, "iters=%lld %s=%lld stride=%lld secs=%.4f",
                 iters, spec->slots_key, n, stride, secs);
  else
    bench_result(spec->name, "iters=%lld %s=%lld stride=%lld ops/s=%.0f",
                 iters, spec->slots_key, n, stride,
                 secs > 0 ? (double)iters / secs : 0.0);
  return 0;
}

#endif
