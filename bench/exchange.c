/* exchange: threads trade blocks through one shared pool of slots, the way
 * worker threads of a server hand requests and buffers to each other. Each
 * thread keeps a private set of slots too. Every step allocates a block of
 * a random size (log-uniform in MIN..MAX, so small sizes dominate) and
 * writes its first bytes; in SHARE percent of the steps the block goes
 * into a random shared slot with one atomic exchange, otherwise into a
 * random private slot. Whatever the slot held is read and freed by this
 * thread: a shared slot's block was most likely allocated by another.
 *
 * Result: ops/s = (allocs + frees) / wall time; remote_pct = the share of
 * frees of a block another thread allocated. */
#include "bench.h"

#include <math.h>
#include <stdatomic.h>

static const char usage[] =
    "usage: exchange [THREADS] [STEPS] [SHARED] [PRIVATE] [MIN] [MAX] "
    "[SHARE]\n"
    "  THREADS  threads                                     (default 4)\n"
    "  STEPS    steps per thread                            (default 1000000)\n"
    "  SHARED   slots of the pool all threads share         (default 4096)\n"
    "  PRIVATE  slots each thread keeps to itself           (default 1024)\n"
    "  MIN, MAX block size range in bytes (MIN >= 4), log-uniform\n"
    "                                                       (default 8 16384)\n"
    "  SHARE    percent of steps that go through the pool   (default 50)\n"
    "Each block's first min(size, 64) bytes are written; its first four\n"
    "bytes name the thread that allocated it. The block a step replaces is\n"
    "read and freed. Metric: ops/s = (allocs + frees) / wall time;\n"
    "remote_pct = frees of a block another thread allocated.\n";

static struct {
  _Atomic(void *) *shared;
  long steps, shared_n, private_n, share_pct;
  double log_min, log_span;
  pthread_barrier_t start;
  _Atomic uint64_t frees, remote_frees, checksum;
} g;

typedef struct {
  uint32_t self;
  bench_rng_t rng;
  uint64_t frees, remote, sum;
} worker_t;

static void *new_block(worker_t *w) {
  size_t size = (size_t)exp(g.log_min + bench_rng_unit(&w->rng) * g.log_span);
  unsigned char *p = bench_xmalloc(size);
  memset(p, 0x5a, size < 64 ? size : 64);
  memcpy(p, &w->self, sizeof w->self);
  return p;
}

/* Read and free the block a slot held (NULL: the slot was empty). */
static void drop_block(worker_t *w, unsigned char *p) {
  if (p == NULL) return;
  uint32_t owner;
  memcpy(&owner, p, sizeof owner);
  w->sum += owner;
  w->frees++;
  w->remote += owner != w->self;
  free(p);
}

static void *worker(void *arg) {
  worker_t w = {.self = (uint32_t)(uintptr_t)arg};
  bench_rng_seed(&w.rng, 0x65786368ull + w.self);
  void **mine = bench_xcalloc((size_t)g.private_n, sizeof *mine);
  pthread_barrier_wait(&g.start);
  for (long s = 0; s < g.steps; s++) {
    void *p = new_block(&w);
    uint64_t r = bench_rng_next(&w.rng);
    if ((long)(r % 100) < g.share_pct) {
      _Atomic(void *) *slot = &g.shared[(r >> 8) % (uint64_t)g.shared_n];
      drop_block(&w, atomic_exchange_explicit(slot, p, memory_order_acq_rel));
    } else {
      void **slot = &mine[(r >> 8) % (uint64_t)g.private_n];
      drop_block(&w, *slot);
      *slot = p;
    }
  }
  for (long i = 0; i < g.private_n; i++)
    drop_block(&w, mine[i]);
  free(mine);
  atomic_fetch_add(&g.frees, w.frees);
  atomic_fetch_add(&g.remote_frees, w.remote);
  atomic_fetch_add(&g.checksum, w.sum);
  return NULL;
}

int main(int argc, char **argv) {
  long long v[7] = {4, 1000000, 4096, 1024, 8, 16384, 50};
  if (bench_start(argc, argv, usage, v, 7)) return 0;
  int threads = (int)v[0];
  g.steps = (long)v[1];
  g.shared_n = (long)v[2];
  g.private_n = (long)v[3];
  g.share_pct = (long)v[6];
  if (threads < 1 || g.steps < 1 || g.shared_n < 1 || g.private_n < 1 ||
      v[4] < 4 || v[5] < v[4] || g.share_pct < 0 || g.share_pct > 100)
    return bench_bad_args(usage);
  g.log_min = log((double)v[4]);
  g.log_span = log((double)v[5] + 1) - g.log_min; /* MAX itself included */
  g.shared = bench_xcalloc((size_t)g.shared_n, sizeof *g.shared);
  double secs = bench_time_threads(threads, worker, &g.start);
  worker_t last = {.self = UINT32_MAX};
  for (long i = 0; i < g.shared_n; i++) /* outside the timing */
    drop_block(&last, atomic_load(&g.shared[i]));
  double ops = 2.0 * (double)threads * (double)g.steps;
  bench_result("exchange",
               "threads=%d steps=%ld shared=%ld private=%ld min=%lld "
               "max=%lld share=%ld ops/s=%.0f remote_pct=%.1f checksum=%llu",
               threads, g.steps, g.shared_n, g.private_n, v[4], v[5],
               g.share_pct, ops / secs,
               100.0 * (double)g.remote_frees / (double)(g.frees ? g.frees : 1),
               (unsigned long long)(g.checksum + last.sum));
  return 0;
}
