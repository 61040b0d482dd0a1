/* malloc_large: a fixed amount of work with very large blocks (5..25 MiB),
 * at most LIVE of them live. Each iteration picks a random slot, frees the
 * block there (if any), mallocs a new one and touches every page of it.
 * Slots start empty, so the first iterations fill them.
 *
 * Result: secs = wall time of the ITERS iterations (lower is better). */
#include "bench.h"

#define MIN_SIZE (5u << 20)
#define MAX_SIZE (25u << 20)

static const char usage[] =
    "usage: malloc_large [ITERS] [LIVE]\n"
    "  ITERS  iterations (malloc + touch, plus a free once a slot is used)\n"
    "         (default 2000)\n"
    "  LIVE   most blocks live at once (slots)     (default 20)\n"
    "Blocks are 5..25 MiB, every page touched (bench_touch); random slot\n"
    "replacement; slots start empty. Seed is fixed (1).\n"
    "Metric: secs (fixed work: wall time of the ITERS iterations; lower is\n"
    "better). Remaining blocks are freed after timing.\n";

int main(int argc, char **argv) {
  if (bench_wants_help(argc, argv, usage)) return 0;
  long long a[] = {2000, 20};
  bench_args(argc, argv, a, 2);
  long long iters = a[0], live = a[1];
  if (iters < 0 || live < 1) return bench_bad_args(usage);
  bench_rng_t rng;
  bench_rng_seed(&rng, 1);
  void **slots = calloc((size_t)live, sizeof(void *));
  if (slots == NULL) {
    fprintf(stderr, "malloc_large: out of memory\n");
    return 1;
  }

  double t0 = bench_now();
  for (long long i = 0; i < iters; i++) {
    uint64_t r = bench_rng_next(&rng);
    uint64_t s = (r >> 32) % (uint64_t)live;
    size_t n =
        MIN_SIZE + (size_t)((r & 0xffffffffu) % (MAX_SIZE - MIN_SIZE + 1));
    free(slots[s]);
    slots[s] = malloc(n);
    if (slots[s] == NULL) {
      fprintf(stderr, "malloc_large: malloc(%zu) failed\n", n);
      return 1;
    }
    bench_touch(slots[s], n);
  }
  double secs = bench_now() - t0;

  for (long long i = 0; i < live; i++)
    free(slots[i]);
  free(slots);
  bench_result("malloc_large", "iters=%lld live=%lld secs=%.4f", iters, live,
               secs);
  return 0;
}
