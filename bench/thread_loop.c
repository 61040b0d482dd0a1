/* thread_loop: every thread runs the same loop against an array of its
 * own, as glibc's thread benchmark for malloc does: pick a random slot,
 * free the block it holds, allocate a new one of a random size. Sizes
 * follow an inverse-square law between MIN and MAX (most are tiny, a few
 * are large), and each new block's first bytes are written. No block
 * leaves its thread: this is the local path under threads that share the
 * machine.
 *
 * Result: ops/s = (allocs + frees) / wall time, all threads together. */
#include "bench.h"

#include <stdatomic.h>

static const char usage[] =
    "usage: thread_loop [THREADS] [ITERS] [SLOTS] [MIN] [MAX]\n"
    "  THREADS  threads, each with its own array          (default 4)\n"
    "  ITERS    free+malloc steps per thread              (default 5000000)\n"
    "  SLOTS    slots of each thread's array              (default 2000)\n"
    "  MIN, MAX block sizes in bytes, P(size) ~ 1/size^2  (default 4 32768)\n"
    "Each new block's first min(size, 32) bytes are written. Metric: ops/s\n"
    "= (allocs + frees) / wall time.\n";

static struct {
  long iters, slots;
  double inv_min, inv_span;
  pthread_barrier_t start;
  _Atomic uint64_t checksum;
} g;

/* Inverse-square sizes: the inverse of a uniform draw between 1/MAX and
 * 1/MIN. */
static size_t draw_size(bench_rng_t *rng) {
  return (size_t)(1.0 / (g.inv_min - bench_rng_unit(rng) * g.inv_span));
}

static void *worker(void *arg) {
  bench_rng_t rng;
  bench_rng_seed(&rng, 0x74686c70ull + (uint64_t)(uintptr_t)arg);
  unsigned char **slot = bench_xcalloc((size_t)g.slots, sizeof *slot);
  uint64_t sum = 0;
  pthread_barrier_wait(&g.start);
  for (long i = 0; i < g.iters; i++) {
    unsigned char **s = &slot[bench_rng_next(&rng) % (uint64_t)g.slots];
    if (*s != NULL) sum += **s;
    free(*s);
    size_t size = draw_size(&rng);
    *s = bench_xmalloc(size);
    memset(*s, (int)(i & 0x7f), size < 32 ? size : 32);
  }
  for (long i = 0; i < g.slots; i++)
    free(slot[i]);
  free(slot);
  atomic_fetch_add(&g.checksum, sum);
  return NULL;
}

int main(int argc, char **argv) {
  long long v[5] = {4, 5000000, 2000, 4, 32768};
  if (bench_start(argc, argv, usage, v, 5)) return 0;
  int threads = (int)v[0];
  g.iters = (long)v[1];
  g.slots = (long)v[2];
  if (threads < 1 || g.iters < 1 || g.slots < 1 || v[3] < 1 || v[4] < v[3])
    return bench_bad_args(usage);
  g.inv_min = 1.0 / (double)v[3];
  g.inv_span = g.inv_min - 1.0 / ((double)v[4] + 1); /* MAX included */
  double secs = bench_time_threads(threads, worker, &g.start);
  bench_result("thread_loop",
               "threads=%d iters=%ld slots=%ld min=%lld max=%lld ops/s=%.0f "
               "checksum=%llu",
               threads, g.iters, g.slots, v[3], v[4],
               2.0 * threads * (double)g.iters / secs,
               (unsigned long long)g.checksum);
  return 0;
}
