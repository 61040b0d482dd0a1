/* tiny_hot: the hottest small-object path. Bursts of DEPTH mallocs of
 * varying tiny sizes (8..64 B), one byte written into each, then freed in
 * reverse order (LIFO), over and over.
 *
 * Result: ops/s = malloc+free pairs / wall time of the measured loop. */
#include "bench.h"

static const char usage[] =
    "usage: tiny_hot [ITERS] [DEPTH]\n"
    "  ITERS  malloc+free pairs to time     (default 250000000)\n"
    "  DEPTH  blocks per LIFO burst         (default 16)\n"
    "Sizes are 8..64 B from a fixed pseudo-random table (seed 1); each\n"
    "burst mallocs DEPTH blocks, writes a byte in each, frees them in\n"
    "reverse order. A short untimed warm-up runs first.\n"
    "Metric: ops/s (throughput) = ITERS / wall time (one op = malloc+free).\n";

#define SIZE_TABLE 4096 /* power of two */

/* One burst starting at size-table position pos; returns the next pos. */
static inline unsigned burst(char **stack, long long depth,
                             const unsigned char *sizes, unsigned pos) {
  for (long long d = 0; d < depth; d++) {
    size_t n = sizes[pos++ & (SIZE_TABLE - 1)];
    char *p = bench_xmalloc(n);
    p[0] = (char)d;
    stack[d] = p;
  }
  for (long long d = depth - 1; d >= 0; d--)
    free(stack[d]);
  return pos;
}

int main(int argc, char **argv) {
  long long a[] = {250000000, 16};
  if (bench_start(argc, argv, usage, a, 2)) return 0;
  long long iters = a[0], depth = a[1];
  if (iters < 0 || depth < 1 || depth > (1LL << 24))
    return bench_bad_args(usage);

  static unsigned char sizes[SIZE_TABLE];
  bench_rng_t rng;
  bench_rng_seed(&rng, 1);
  for (int i = 0; i < SIZE_TABLE; i++)
    sizes[i] = (unsigned char)bench_rng_range(&rng, 8, 64);

  char **stack = bench_xmalloc(sizeof(char *) * (size_t)depth);

  /* Warm-up (untimed): about 1% of the work, at least a few bursts. */
  long long bursts = iters / depth;
  long long rest = iters - bursts * depth;
  long long warm = bursts / 100 + 4;
  unsigned pos = 0;
  for (long long b = 0; b < warm; b++)
    pos = burst(stack, depth, sizes, pos);

  pos = 0;
  double t0 = bench_now();
  for (long long b = 0; b < bursts; b++)
    pos = burst(stack, depth, sizes, pos);
  if (rest > 0) pos = burst(stack, rest, sizes, pos);
  double secs = bench_now() - t0;

  free(stack);
  double ops = secs > 0 ? (double)iters / secs : 0.0;
  bench_result("tiny_hot", "iters=%lld depth=%lld ops/s=%.0f", iters, depth,
               ops);
  return 0;
}
