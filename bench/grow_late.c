/* grow_late: a working set that only grows, freed at the very end, as in a
 * compiler or a loader that builds a large structure and drops it whole.
 *
 * BLOCKS blocks of log-uniform random sizes in MIN..MAX are allocated and
 * filled (every byte written, as a program initialises what it builds);
 * one in FREE_EVERY allocations also frees a random earlier block (a
 * little garbage along the way). Then every block left is freed, in
 * allocation order.
 *
 * Result: secs = wall time of building and freeing. */
#include "bench.h"

#include <math.h>

static const char usage[] =
    "usage: grow_late [BLOCKS] [MIN] [MAX] [FREE_EVERY]\n"
    "  BLOCKS      blocks allocated                    (default 1000000)\n"
    "  MIN         smallest block in bytes             (default 16)\n"
    "  MAX         largest block in bytes              (default 512)\n"
    "  FREE_EVERY  also free a random live block every (default 16)\n"
    "              this many allocations (0: never)\n"
    "Sizes are log-uniform in MIN..MAX; every block is filled; all that\n"
    "is left is freed at the end, in allocation order.\n"
    "Metric: secs (lower is better) = building plus freeing.\n";

int main(int argc, char **argv) {
  long long a[] = {1000000, 16, 512, 16};
  if (bench_start(argc, argv, usage, a, 4)) return 0;
  long long blocks = a[0], min = a[1], max = a[2], every = a[3];
  if (blocks < 1 || min < 1 || max < min || every < 0)
    return bench_bad_args(usage);
  char **live = bench_xcalloc((size_t)blocks, sizeof *live);
  bench_rng_t rng;
  bench_rng_seed(&rng, 1);
  double span = log((double)max / (double)min);
  double t0 = bench_now();
  for (long long i = 0; i < blocks; i++) {
    double u = bench_rng_unit(&rng);
    size_t n = (size_t)((double)min * exp(u * span));
    if (n > (size_t)max) n = (size_t)max;
    live[i] = bench_xmalloc(n);
    memset(live[i], (int)i, n);
    if (every > 0 && i % every == every - 1) {
      long long victim = (long long)(bench_rng_next(&rng) % (uint64_t)(i + 1));
      free(live[victim]);
      live[victim] = NULL;
    }
  }
  for (long long i = 0; i < blocks; i++)
    free(live[i]);
  double secs = bench_now() - t0;
  free(live);
  bench_result("grow_late",
               "blocks=%lld min=%lld max=%lld free_every=%lld "
               "secs=%.4f",
               blocks, min, max, every, secs);
  return 0;
}
