/* batch_queue: producers hand blocks to consumers in batches through one
 * shared bounded queue guarded by a mutex and two condition variables, the
 * way a work queue or a logging pipeline does. A producer allocates a
 * batch array, fills it with BATCH fresh blocks (writing up to their
 * first 128 bytes) and queues it, waiting while the queue holds DEPTH
 * batches; a consumer takes a batch, reads each block's first byte, frees
 * every block and then the array. Every block is allocated by one thread
 * and freed by another.
 *
 * Result: ops/s = (blocks allocated + blocks freed) / wall time; waits =
 * times a producer found the queue full; jumps_pct = how often a
 * producer's next block lay more than 4 KiB from its last one, in percent
 * of its blocks (a stream of neighbouring blocks lets the hardware
 * prefetchers fetch ahead of the producer's writes and the consumers'
 * reads; a jump starts a new stream). */
#include "bench.h"

#include <pthread.h>
#include <stdint.h>

static const char usage[] =
    "usage: batch_queue [PRODUCERS] [CONSUMERS] [BATCHES] [MIN] [MAX] "
    "[BATCH] [DEPTH]\n"
    "  PRODUCERS  threads that allocate                   (default 2)\n"
    "  CONSUMERS  threads that only free                  (default 2)\n"
    "  BATCHES    batches made by all producers           (default 1000)\n"
    "  MIN, MAX   block size range in bytes, uniform      (default 64 64)\n"
    "  BATCH      blocks per batch                        (default 4096)\n"
    "  DEPTH      batches the queue holds at most         (default 100)\n"
    "Each block's first min(size, 128) bytes are written by its producer\n"
    "and its first byte read by the consumer that frees it. Metric: ops/s\n"
    "= (allocs + frees) / wall time; waits = producer found the queue full;\n"
    "jumps_pct = % of a producer's blocks more than 4 KiB from its last.\n";

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t not_full, not_empty;
  void ***slots; /* DEPTH batch arrays, a ring */
  long head, count;
  long producers_left;
  long waits;
} queue_t;

static struct {
  queue_t q;
  long depth, batch, batches_per_producer;
  uint64_t min, max;
  pthread_barrier_t start;
  uint64_t checksum;
  uint64_t jumps; /* producers' blocks more than 4 KiB from their last */
} g;

static void queue_put(void **batch) {
  queue_t *q = &g.q;
  pthread_mutex_lock(&q->lock);
  while (q->count == g.depth) {
    q->waits++;
    pthread_cond_wait(&q->not_full, &q->lock);
  }
  q->slots[(q->head + q->count) % g.depth] = batch;
  q->count++;
  pthread_cond_signal(&q->not_empty);
  pthread_mutex_unlock(&q->lock);
}

/* The next batch, or NULL once every producer is done and the queue is
 * empty. */
static void **queue_take(void) {
  queue_t *q = &g.q;
  pthread_mutex_lock(&q->lock);
  while (q->count == 0 && q->producers_left > 0)
    pthread_cond_wait(&q->not_empty, &q->lock);
  void **batch = NULL;
  if (q->count > 0) {
    batch = q->slots[q->head];
    q->head = (q->head + 1) % g.depth;
    q->count--;
    pthread_cond_signal(&q->not_full);
  }
  pthread_mutex_unlock(&q->lock);
  return batch;
}

static void *producer(void *arg) {
  bench_rng_t rng;
  bench_rng_seed(&rng, 0x62617463ull + (uint64_t)(uintptr_t)arg);
  uintptr_t last = 0;
  uint64_t jumps = 0;
  pthread_barrier_wait(&g.start);
  for (long b = 0; b < g.batches_per_producer; b++) {
    void **batch = bench_xmalloc((size_t)g.batch * sizeof *batch);
    for (long i = 0; i < g.batch; i++) {
      size_t size = (size_t)bench_rng_range(&rng, g.min, g.max);
      unsigned char *p = bench_xmalloc(size);
      memset(p, (int)(i & 0x7f) + 1, size < 128 ? size : 128);
      batch[i] = p;
      jumps += (uintptr_t)p - last + 4096 > 8192; /* |p - last| > 4 KiB */
      last = (uintptr_t)p;
    }
    queue_put(batch);
  }
  __atomic_fetch_add(&g.jumps, jumps, __ATOMIC_RELAXED);
  pthread_mutex_lock(&g.q.lock);
  if (--g.q.producers_left == 0) pthread_cond_broadcast(&g.q.not_empty);
  pthread_mutex_unlock(&g.q.lock);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  uint64_t sum = 0;
  pthread_barrier_wait(&g.start);
  for (void **batch; (batch = queue_take()) != NULL;) {
    for (long i = 0; i < g.batch; i++) {
      sum += *(unsigned char *)batch[i];
      free(batch[i]);
    }
    free(batch);
  }
  __atomic_fetch_add(&g.checksum, sum, __ATOMIC_RELAXED);
  return NULL;
}

int main(int argc, char **argv) {
  long long v[7] = {2, 2, 1000, 64, 64, 4096, 100};
  if (bench_start(argc, argv, usage, v, 7)) return 0;
  int producers = (int)v[0], consumers = (int)v[1];
  g.min = (uint64_t)v[3];
  g.max = (uint64_t)v[4];
  g.batch = (long)v[5];
  g.depth = (long)v[6];
  if (producers < 1 || consumers < 1 || v[2] < 1 || g.min < 1 ||
      g.max < g.min || g.batch < 1 || g.depth < 1)
    return bench_bad_args(usage);
  g.batches_per_producer = (long)((v[2] + producers - 1) / producers);
  pthread_mutex_init(&g.q.lock, NULL);
  pthread_cond_init(&g.q.not_full, NULL);
  pthread_cond_init(&g.q.not_empty, NULL);
  g.q.slots = bench_xcalloc((size_t)g.depth, sizeof *g.q.slots);
  g.q.producers_left = producers;
  int threads = producers + consumers;
  pthread_barrier_init(&g.start, NULL, (unsigned)threads + 1);
  pthread_t *th = bench_xcalloc((size_t)threads, sizeof *th);
  for (int i = 0; i < threads; i++)
    bench_thread(&th[i], i < producers ? producer : consumer,
                 (void *)(uintptr_t)i);
  pthread_barrier_wait(&g.start);
  double t0 = bench_now();
  for (int i = 0; i < threads; i++)
    pthread_join(th[i], NULL);
  double secs = bench_now() - t0;
  double blocks = (double)g.batches_per_producer * producers * (double)g.batch;
  bench_result("batch_queue",
               "producers=%d consumers=%d batches=%lld min=%llu max=%llu "
               "batch=%ld depth=%ld ops/s=%.0f waits=%ld jumps_pct=%.2f "
               "checksum=%llu",
               producers, consumers, (long long)g.batches_per_producer *
                                         producers,
               (unsigned long long)g.min, (unsigned long long)g.max, g.batch,
               g.depth, 2 * blocks / secs, g.q.waits,
               100.0 * (double)g.jumps / blocks,
               (unsigned long long)g.checksum);
  return 0;
}
