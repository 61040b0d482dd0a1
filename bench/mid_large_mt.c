/* mid_large_mt: threads doing random replacement of 8..32 KiB blocks in
 * their own working sets (no sharing), every page of each new block
 * touched.
 *
 * Result: ops/s = all iterations of all threads / wall time of the
 * measured loop (one iteration = one free + one malloc + touch). */
#include "slots.h"

#include <pthread.h>

#define MIN_SIZE (8u << 10)
#define MAX_SIZE (32u << 10)

static const char usage[] =
    "usage: mid_large_mt [THREADS] [ITERS] [WS]\n"
    "  THREADS  worker threads               (default 4)\n"
    "  ITERS    iterations per thread        (default 4000000)\n"
    "  WS       slots per thread             (default 256)\n"
    "Each thread fills its WS slots (untimed), then per iteration picks a\n"
    "random slot, frees its block, mallocs a new 8..32 KiB block and\n"
    "touches every page of it. Threads start together at a barrier.\n"
    "Seeds are fixed per thread.\n"
    "Metric: ops/s (throughput) = THREADS*ITERS / wall time.\n";

typedef struct {
  int id;
  pthread_t tid;
  char pad[64];
} worker_t;

static struct {
  int threads;
  long long iters, ws;
  pthread_barrier_t start, stop;
} g;

static void *worker(void *arg) {
  worker_t *self = arg;
  bench_slots_t slots;
  bench_slots_init(&slots, (uint64_t)g.ws, MIN_SIZE, MAX_SIZE,
                   0x6d6c6dull * 1000 + (uint64_t)self->id + 1);
  bench_slots_fill(&slots); /* warm-up, untimed */

  pthread_barrier_wait(&g.start);
  bench_slots_replace(&slots, g.iters);
  pthread_barrier_wait(&g.stop);

  bench_slots_free(&slots);
  return NULL;
}

int main(int argc, char **argv) {
  long long a[] = {4, 4000000, 256};
  if (bench_start(argc, argv, usage, a, 3)) return 0;
  long long threads = a[0], iters = a[1], ws = a[2];
  if (threads < 1 || threads > 4096 || iters < 0 || ws < 1)
    return bench_bad_args(usage);
  g.threads = (int)threads;
  g.iters = iters;
  g.ws = ws;

  worker_t *w = bench_xcalloc((size_t)threads, sizeof(worker_t));
  pthread_barrier_init(&g.start, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&g.stop, NULL, (unsigned)threads + 1);
  for (int i = 0; i < g.threads; i++) {
    w[i].id = i;
    bench_thread(&w[i].tid, worker, &w[i]);
  }
  pthread_barrier_wait(&g.start);
  double t0 = bench_now();
  pthread_barrier_wait(&g.stop);
  double secs = bench_now() - t0;
  for (int i = 0; i < g.threads; i++)
    pthread_join(w[i].tid, NULL);
  pthread_barrier_destroy(&g.start);
  pthread_barrier_destroy(&g.stop);
  free(w);

  double ops = secs > 0 ? (double)iters * (double)threads / secs : 0.0;
  bench_result("mid_large_mt", "threads=%lld iters=%lld ws=%lld ops/s=%.0f",
               threads, iters, ws, ops);
  return 0;
}
