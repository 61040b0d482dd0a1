/* size_loop: a single thread that allocates blocks of random sizes and
 * frees each a few allocations later, the way a parser or a formatter
 * churns through short-lived buffers.
 *
 * Sizes are log-uniform between MIN and MAX (as many 16-32 B requests as
 * 4-8 KiB ones), drawn from a table made before the loop. Each block is
 * written at its first and last byte and freed when KEEP newer blocks have
 * been allocated after it (a ring of KEEP slots).
 *
 * Result: ops/s = malloc+free pairs / wall time of the loop. */
#include "bench.h"

#include <math.h>

static const char usage[] =
    "usage: size_loop [ITERS] [MIN] [MAX] [KEEP]\n"
    "  ITERS  malloc+free pairs                       (default 50000000)\n"
    "  MIN    smallest block in bytes                 (default 16)\n"
    "  MAX    largest block in bytes                  (default 8192)\n"
    "  KEEP   blocks alive at a time (ring of slots)  (default 8)\n"
    "Sizes are log-uniform in MIN..MAX; each block is freed KEEP\n"
    "allocations after its own.\n"
    "Metric: ops/s (throughput) = ITERS / wall time (one op = malloc+free).\n";

#define TABLE    8192 /* power of two */
#define KEEP_MAX 4096

int main(int argc, char **argv) {
  long long a[] = {50000000, 16, 8192, 8};
  if (bench_start(argc, argv, usage, a, 4)) return 0;
  long long iters = a[0], min = a[1], max = a[2], keep = a[3];
  if (iters < 0 || min < 1 || max < min || keep < 1 || keep > KEEP_MAX)
    return bench_bad_args(usage);
  static unsigned sizes[TABLE];
  bench_rng_t rng;
  bench_rng_seed(&rng, 1);
  double span = log((double)max / (double)min);
  for (int i = 0; i < TABLE; i++) {
    double u = bench_rng_unit(&rng);
    unsigned n = (unsigned)((double)min * exp(u * span));
    sizes[i] = n < min ? (unsigned)min : n > max ? (unsigned)max : n;
  }
  static char *ring[KEEP_MAX];
  double t0 = bench_now();
  for (long long i = 0; i < iters; i++) {
    size_t n = sizes[i & (TABLE - 1)];
    char **slot = &ring[i % keep];
    free(*slot);
    char *p = bench_xmalloc(n);
    p[0] = 1;
    p[n - 1] = 2;
    *slot = p;
  }
  double secs = bench_now() - t0;
  for (long long s = 0; s < keep; s++)
    free(ring[s]);
  double rate = secs > 0 ? (double)iters / secs : 0.0;
  bench_result("size_loop", "iters=%lld min=%lld max=%lld keep=%lld ops/s=%.0f",
               iters, min, max, keep, rate);
  return 0;
}
