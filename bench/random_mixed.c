/* random_mixed: single-threaded random replacement over a working set.
 *
 * WS slots start full (untimed warm-up). Each measured iteration picks a
 * random slot, frees the block in it (if any), mallocs a new block of a
 * random size and writes its first and last byte.
 *
 * Result: ops/s = iterations / wall time of the measured loop (one
 * iteration = one free + one malloc). */
#include "bench.h"

static const char usage[] =
    "usage: random_mixed [ITERS] [WS] [MIN] [MAX] [SEED] [DIST]\n"
    "  ITERS  measured iterations                 (default 50000000)\n"
    "  WS     working-set slots                   (default 1000)\n"
    "  MIN    smallest block in bytes             (default 16)\n"
    "  MAX    largest block in bytes              (default 65536)\n"
    "  SEED   RNG seed                            (default 1)\n"
    "  DIST   size distribution: uniform | app    (default app)\n"
    "         uniform: MIN..MAX\n"
    "         app: 80% 16-256 B, 15% 257-2048 B, 5% 2049-MAX\n"
    "              (each class clipped to MIN..MAX)\n"
    "One thread. Each iteration: random slot, free old block, malloc new\n"
    "one, write its first and last byte. Slots are filled before timing.\n"
    "Metric: ops/s (throughput) = ITERS / wall time (one op = free+malloc).\n";

enum { DIST_UNIFORM, DIST_APP };

typedef struct {
  int dist;
  uint64_t min, max;
  /* app classes, clipped to [min, max]; lo > hi means "use min..max" */
  uint64_t lo[3], hi[3];
} sizer_t;

static void sizer_init(sizer_t *z, int dist, uint64_t min, uint64_t max) {
  static const uint64_t clo[3] = {16, 257, 2049};
  uint64_t chi[3] = {256, 2048, max};
  z->dist = dist;
  z->min = min;
  z->max = max;
  for (int i = 0; i < 3; i++) {
    uint64_t lo = clo[i] < min ? min : clo[i];
    uint64_t hi = chi[i] > max ? max : chi[i];
    if (lo > hi) { /* class empty after clipping */
      lo = min;
      hi = max;
    }
    z->lo[i] = lo;
    z->hi[i] = hi;
  }
}

static inline size_t sizer_next(const sizer_t *z, bench_rng_t *rng) {
  if (z->dist == DIST_UNIFORM)
    return (size_t)bench_rng_range(rng, z->min, z->max);
  uint64_t r = bench_rng_next(rng);
  uint64_t pct = (r >> 40) % 100;
  int c = pct < 80 ? 0 : pct < 95 ? 1 : 2;
  uint64_t span = z->hi[c] - z->lo[c] + 1;
  return (size_t)(z->lo[c] + (r & 0xffffffffu) % span);
}

int main(int argc, char **argv) {
  long long a[] = {50000000, 1000, 16, 65536, 1};
  if (bench_start(argc, argv, usage, a, 5)) return 0;
  long long iters = a[0], ws = a[1], min = a[2], max = a[3], seed = a[4];
  const char *dname = argc > 6 ? argv[6] : "app";
  int dist;
  if (strcmp(dname, "uniform") == 0) {
    dist = DIST_UNIFORM;
  } else if (strcmp(dname, "app") == 0) {
    dist = DIST_APP;
  } else {
    fprintf(stderr, "random_mixed: unknown DIST '%s'\n%s", dname, usage);
    return 2;
  }
  if (iters < 0 || ws < 1 || min < 1 || max < min) return bench_bad_args(usage);

  sizer_t z;
  sizer_init(&z, dist, (uint64_t)min, (uint64_t)max);
  bench_rng_t rng;
  bench_rng_seed(&rng, (uint64_t)seed);

  char **slots = bench_xcalloc((size_t)ws, sizeof(char *));
  /* Warm-up (untimed): fill every slot, then one pass of replacements so
   * the allocator has seen frees of every size class. */
  for (long long i = 0; i < ws; i++) {
    size_t n = sizer_next(&z, &rng);
    slots[i] = bench_xmalloc(n);
    slots[i][0] = 1;
    slots[i][n - 1] = 1;
  }
  for (long long i = 0; i < ws; i++) {
    uint64_t s = bench_rng_next(&rng) % (uint64_t)ws;
    size_t n = sizer_next(&z, &rng);
    free(slots[s]);
    slots[s] = bench_xmalloc(n);
    slots[s][0] = 1;
    slots[s][n - 1] = 1;
  }

  const uint64_t nws = (uint64_t)ws;
  double t0 = bench_now();
  for (long long i = 0; i < iters; i++) {
    uint64_t s = bench_rng_next(&rng) % nws;
    size_t n = sizer_next(&z, &rng);
    free(slots[s]);
    char *p = bench_xmalloc(n);
    p[0] = (char)i;
    p[n - 1] = (char)i;
    slots[s] = p;
  }
  double secs = bench_now() - t0;

  for (long long i = 0; i < ws; i++)
    free(slots[i]);
  free(slots);

  double ops = secs > 0 ? (double)iters / secs : 0.0;
  bench_result("random_mixed",
               "iters=%lld ws=%lld min=%lld max=%lld seed=%lld dist=%s "
               "ops/s=%.0f",
               iters, ws, min, max, seed, dname, ops);
  return 0;
}
