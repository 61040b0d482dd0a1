/* vm_mixed: one thread, random replacement of big blocks (512 KiB..2 MiB)
 * in a small working set, so the allocator's handling of sizes around the
 * usual mmap threshold and its reuse of freed big blocks is what counts.
 * Every page of each new block is touched.
 *
 * Result: ops/s = iterations / wall time of the measured loop (one
 * iteration = one free + one malloc + touch). */
#include "bench.h"

#define MIN_SIZE (512u << 10)
#define MAX_SIZE (2u << 20)

static const char usage[] =
    "usage: vm_mixed [ITERS] [WS]\n"
    "  ITERS  measured iterations     (default 100000)\n"
    "  WS     working-set slots       (default 32)\n"
    "One thread. WS slots are filled first (untimed); each iteration picks\n"
    "a random slot, frees its block, mallocs a new 512 KiB..2 MiB block and\n"
    "touches every page of it (bench_touch). Seed is fixed (1).\n"
    "Metric: ops/s (throughput) = ITERS / wall time.\n";

int main(int argc, char **argv) {
  if (bench_wants_help(argc, argv, usage)) return 0;
  long long a[] = {100000, 32};
  bench_args(argc, argv, a, 2);
  long long iters = a[0], ws = a[1];
  if (iters < 0 || ws < 1) return bench_bad_args(usage);
  bench_rng_t rng;
  bench_rng_seed(&rng, 1);
  void **slots = calloc((size_t)ws, sizeof(void *));
  if (slots == NULL) {
    fprintf(stderr, "vm_mixed: out of memory\n");
    return 1;
  }
  for (long long i = 0; i < ws; i++) {
    size_t n = (size_t)bench_rng_range(&rng, MIN_SIZE, MAX_SIZE);
    slots[i] = bench_xmalloc(n);
    bench_touch(slots[i], n);
  }

  double t0 = bench_now();
  for (long long i = 0; i < iters; i++) {
    uint64_t r = bench_rng_next(&rng);
    uint64_t s = (r >> 32) % (uint64_t)ws;
    size_t n =
        MIN_SIZE + (size_t)((r & 0xffffffffu) % (MAX_SIZE - MIN_SIZE + 1));
    free(slots[s]);
    slots[s] = bench_xmalloc(n);
    bench_touch(slots[s], n);
  }
  double secs = bench_now() - t0;

  for (long long i = 0; i < ws; i++)
    free(slots[i]);
  free(slots);
  double ops = secs > 0 ? (double)iters / secs : 0.0;
  bench_result("vm_mixed", "iters=%lld ws=%lld ops/s=%.0f", iters, ws, ops);
  return 0;
}
