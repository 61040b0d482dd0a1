/* prodcons: producer/consumer throughput. PRODUCERS threads allocate
 * blocks and hand every one of them to CONSUMERS threads, which free them
 * and never allocate: every free is a remote free by a thread that only
 * frees, the pattern of work queues, loggers and pipelines.
 *
 * Producer p sends its k-th block to consumer (p + k) % CONSUMERS through
 * a bounded single-producer/single-consumer ring of its own per consumer.
 * A producer writes the first and last byte of each block; a consumer
 * reads them before freeing. A full ring makes its producer yield the CPU
 * (counted as waits=), and a consumer that finds all its rings empty
 * yields too, so the benchmark works with more threads than cores.
 *
 * Result: ops/s = (blocks allocated + blocks freed) / wall time. */
#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define CACHE_LINE 64
#define RING_CAP   1024 /* blocks in flight per producer/consumer pair */

static const char usage[] =
    "usage: prodcons [PRODUCERS] [CONSUMERS] [ITEMS] [MIN] [MAX]\n"
    "  PRODUCERS  threads that allocate                  (default 1)\n"
    "  CONSUMERS  threads that only free                 (default 3)\n"
    "  ITEMS      blocks allocated by all producers      (default 4000000)\n"
    "  MIN, MAX   block size range in bytes, uniform     (default 16 1024)\n"
    "Each block goes from its producer to one consumer (round robin)\n"
    "through a bounded SPSC ring (1024 entries per pair); full rings and\n"
    "idle consumers yield the CPU. Metric: ops/s = (allocs + frees) / wall\n"
    "time; waits = times a producer found its ring full.\n";

typedef struct {
  _Alignas(CACHE_LINE) _Atomic uint64_t head; /* consumer's */
  _Alignas(CACHE_LINE) _Atomic uint64_t tail; /* producer's */
  _Alignas(CACHE_LINE) void *slot[RING_CAP];
} ring_t;

static struct {
  int producers, consumers;
  uint64_t items_per_producer;
  uint64_t min, max;
  ring_t *rings; /* [producer * consumers + consumer] */
  _Atomic int producers_left;
  _Atomic uint64_t waits;
  _Atomic uint64_t freed;
  _Atomic uint64_t checksum;
  pthread_barrier_t start;
} g;

static ring_t *ring_of(int producer, int consumer) {
  return &g.rings[(size_t)producer * (size_t)g.consumers + (size_t)consumer];
}

static void *producer(void *arg) {
  int id = (int)(intptr_t)arg;
  bench_rng_t rng;
  bench_rng_seed(&rng, 0x70726f64ull + (uint64_t)id);
  uint64_t waits = 0;
  pthread_barrier_wait(&g.start);
  for (uint64_t k = 0; k < g.items_per_producer; k++) {
    size_t size = (size_t)bench_rng_range(&rng, g.min, g.max);
    unsigned char *p = bench_xmalloc(size);
    p[0] = (unsigned char)size;
    p[size - 1] = (unsigned char)k;
    ring_t *r = ring_of(id, (int)((id + k) % (uint64_t)g.consumers));
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    while (t - atomic_load_explicit(&r->head, memory_order_acquire) >=
           RING_CAP) {
      waits++;
      sched_yield();
    }
    r->slot[t % RING_CAP] = p;
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
  }
  atomic_fetch_add(&g.waits, waits);
  atomic_fetch_sub(&g.producers_left, 1);
  return NULL;
}

/* Free everything in the ring; returns how many blocks. */
static uint64_t drain(ring_t *r, uint64_t *sum) {
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
  for (uint64_t i = h; i != t; i++) {
    unsigned char *p = r->slot[i % RING_CAP];
    *sum += p[0];
    free(p);
  }
  atomic_store_explicit(&r->head, t, memory_order_release);
  return t - h;
}

static void *consumer(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t freed = 0, sum = 0;
  pthread_barrier_wait(&g.start);
  for (;;) {
    bool done =
        atomic_load_explicit(&g.producers_left, memory_order_acquire) == 0;
    uint64_t got = 0;
    for (int p = 0; p < g.producers; p++)
      got += drain(ring_of(p, id), &sum);
    freed += got;
    if (got == 0 && done) break; /* nothing after the last producer ended */
    if (got == 0) sched_yield();
  }
  atomic_fetch_add(&g.freed, freed);
  atomic_fetch_add(&g.checksum, sum); /* keeps the reads */
  return NULL;
}

int main(int argc, char **argv) {
  if (bench_wants_help(argc, argv, usage)) return 0;
  g.producers = (int)bench_arg(argc, argv, 1, 1);
  g.consumers = (int)bench_arg(argc, argv, 2, 3);
  uint64_t items = (uint64_t)bench_arg(argc, argv, 3, 4000000);
  g.min = (uint64_t)bench_arg(argc, argv, 4, 16);
  g.max = (uint64_t)bench_arg(argc, argv, 5, 1024);
  if (g.producers < 1 || g.consumers < 1 || items < 1 || g.min < 1 ||
      g.max < g.min) {
    fputs(usage, stderr);
    return 2;
  }
  g.items_per_producer =
      (items + (uint64_t)g.producers - 1) / (uint64_t)g.producers;
  g.rings = aligned_alloc(CACHE_LINE, sizeof(ring_t) * (size_t)g.producers *
                                          (size_t)g.consumers);
  if (g.rings == NULL) return 1;
  memset(g.rings, 0,
         sizeof(ring_t) * (size_t)g.producers * (size_t)g.consumers);
  atomic_store(&g.producers_left, g.producers);
  int threads = g.producers + g.consumers;
  pthread_barrier_init(&g.start, NULL, (unsigned)threads + 1);
  pthread_t *th = bench_xcalloc((size_t)threads, sizeof *th);
  for (int i = 0; i < threads; i++) {
    bool is_producer = i < g.producers;
    intptr_t id = is_producer ? i : i - g.producers;
    bench_thread(&th[i], is_producer ? producer : consumer, (void *)id);
  }
  pthread_barrier_wait(&g.start);
  double t0 = bench_now();
  for (int i = 0; i < threads; i++)
    pthread_join(th[i], NULL);
  double secs = bench_now() - t0;
  uint64_t made = g.items_per_producer * (uint64_t)g.producers;
  uint64_t freed = atomic_load(&g.freed);
  if (freed != made) {
    fprintf(stderr, "prodcons: %llu blocks made, %llu freed\n",
            (unsigned long long)made, (unsigned long long)freed);
    return 1;
  }
  bench_result("prodcons",
               "producers=%d consumers=%d items=%llu min=%llu max=%llu "
               "waits=%llu secs=%.3f ops/s=%.0f",
               g.producers, g.consumers, (unsigned long long)made,
               (unsigned long long)g.min, (unsigned long long)g.max,
               (unsigned long long)atomic_load(&g.waits), secs,
               (double)(made + freed) / secs);
  free(th);
  free(g.rings);
  return 0;
}
