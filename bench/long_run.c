/* long_run: a long-running server, compressed. Does RSS level off or keep
 * growing?
 *
 * PHASES phases (default 60, each standing for ten seconds of a server's
 * life, so ten minutes), THREADS workers (default 4). In each phase every
 * worker makes OPS replacements in its own table of WS slots: the block in
 * a random slot goes (freed by the worker itself, or every fourth one
 * handed to the next worker, which frees it) and a new block takes its
 * place. Block sizes follow a mix that drifts from phase to phase (small
 * objects, strings up to 4 KiB, buffers up to 256 KiB, and now and then a
 * 1-8 MiB block), so size classes empty and fill again over time. Every
 * tenth phase each worker also allocates a 32 MiB burst and frees it at
 * the end of the phase. One short-lived thread per phase allocates and
 * frees a few hundred blocks and exits. Between phases everything is quiet
 * for IDLE_MS (default 20).
 *
 * RSS (/proc/self/statm) is sampled after every phase. Reports:
 * rss_q1_kb / rss_q4_kb (highest sample in the first / last quarter of the
 * phases), growth = rss_q4 / rss_q1 (1.0 = a plateau), rss_end_kb, and
 * ops/s over the whole run. */
#include <pthread.h>

#include "bench.h"

static const char *usage =
    "usage: long_run [PHASES] [THREADS] [OPS] [WS] [IDLE_MS]\n"
    "  PHASES   phases, each a compressed ten seconds (default 60)\n"
    "  THREADS  workers (default 4)\n"
    "  OPS      slot replacements per worker per phase (default 20000)\n"
    "  WS       slots per worker (default 4000)\n"
    "  IDLE_MS  quiet time between phases (default 20)\n"
    "Reports: rss_q1_kb, rss_q4_kb, growth = rss_q4/rss_q1, rss_end_kb,\n"
    "ops/s.\n";

#define MAILBOX     256
#define BURST_BYTES ((size_t)32 << 20)

typedef struct {
  pthread_mutex_t lock;
  void *blocks[MAILBOX];
  int count;
} mailbox_t;

typedef struct {
  int id;
  pthread_t th;
  void **slots;
  mailbox_t box;
  bench_rng_t rng;
} worker_t;

static worker_t *g_workers;
static int g_threads, g_phase;
static long long g_ops, g_ws;
static pthread_barrier_t g_start, g_done;

/* The size mix drifts with the phase: weights rotate among the ranges. */
static size_t next_size(bench_rng_t *r, int phase) {
  uint64_t x = bench_rng_next(r) % 1000;
  uint64_t buffers = 20 + (uint64_t)(phase % 7) * 10; /* 2%..8% */
  uint64_t strings = 150 + (uint64_t)(phase % 5) * 50;
  if (x < 2 && phase % 3 == 0) return bench_rng_range(r, 1 << 20, 8 << 20);
  if (x < buffers) return bench_rng_range(r, 4097, 256 << 10);
  if (x < buffers + strings) return bench_rng_range(r, 257, 4096);
  return bench_rng_range(r, 16, 256);
}

static void mailbox_drain(mailbox_t *box) {
  pthread_mutex_lock(&box->lock);
  for (int i = 0; i < box->count; i++)
    free(box->blocks[i]);
  box->count = 0;
  pthread_mutex_unlock(&box->lock);
}

/* Hand a block to the next worker; free it here if its mailbox is full. */
static void hand_over(worker_t *w, void *p) {
  mailbox_t *box = &g_workers[(w->id + 1) % g_threads].box;
  pthread_mutex_lock(&box->lock);
  if (box->count < MAILBOX) {
    box->blocks[box->count++] = p;
    p = NULL;
  }
  pthread_mutex_unlock(&box->lock);
  free(p);
}

static void run_phase(worker_t *w, int phase) {
  void *burst[32] = {0};
  int bursts = phase % 10 == 9 ? (int)(BURST_BYTES >> 20) : 0;
  for (int i = 0; i < bursts; i++) {
    burst[i] = bench_xmalloc((size_t)1 << 20);
    bench_touch(burst[i], (size_t)1 << 20);
  }
  for (long long i = 0; i < g_ops; i++) {
    size_t slot = (size_t)(bench_rng_next(&w->rng) % (uint64_t)g_ws);
    void *old = w->slots[slot];
    if (old != NULL) {
      if ((i & 3) == 0)
        hand_over(w, old);
      else
        free(old);
    }
    size_t size = next_size(&w->rng, phase);
    w->slots[slot] = bench_xmalloc(size);
    bench_touch(w->slots[slot], size < 4096 ? size : 4096);
    if ((i & 255) == 0) mailbox_drain(&w->box);
  }
  mailbox_drain(&w->box);
  for (int i = 0; i < bursts; i++)
    free(burst[i]);
}

static void *worker(void *arg) {
  worker_t *w = arg;
  for (;;) {
    pthread_barrier_wait(&g_start);
    if (g_phase < 0) break;
    run_phase(w, g_phase);
    pthread_barrier_wait(&g_done);
  }
  for (long long i = 0; i < g_ws; i++)
    free(w->slots[i]);
  mailbox_drain(&w->box);
  return NULL;
}

static void *short_lived(void *arg) {
  bench_rng_t r;
  bench_rng_seed(&r, (uint64_t)(uintptr_t)arg);
  void *blocks[300];
  for (int i = 0; i < 300; i++)
    blocks[i] = bench_xmalloc(next_size(&r, 0));
  for (int i = 0; i < 300; i++)
    free(blocks[i]);
  return NULL;
}

static long max_of(const long *v, int from, int to) {
  long m = 0;
  for (int i = from; i < to; i++)
    if (v[i] > m) m = v[i];
  return m;
}

int main(int argc, char **argv) {
  long long a[] = {60, 4};
  if (bench_start(argc, argv, usage, a, 2)) return 0;
  long long phases = a[0], threads = a[1];
  g_ops = bench_arg(argc, argv, 3, 20000);
  g_ws = bench_arg(argc, argv, 4, 4000);
  long long idle_ms = bench_arg(argc, argv, 5, 20);
  if (phases < 4 || threads < 1 || threads > 256 || g_ops < 1 || g_ws < 1 ||
      idle_ms < 0)
    return bench_bad_args(usage);
  g_threads = (int)threads;
  g_workers = bench_xcalloc((size_t)threads, sizeof *g_workers);
  long *rss = bench_xcalloc((size_t)phases, sizeof *rss);
  pthread_barrier_init(&g_start, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&g_done, NULL, (unsigned)threads + 1);
  for (int t = 0; t < g_threads; t++) {
    worker_t *w = &g_workers[t];
    w->id = t;
    w->slots = bench_xcalloc((size_t)g_ws, sizeof(void *));
    pthread_mutex_init(&w->box.lock, NULL);
    bench_rng_seed(&w->rng, 7000 + (uint64_t)t);
    bench_thread(&w->th, worker, w);
  }

  double t0 = bench_now();
  for (int p = 0; p < phases; p++) {
    g_phase = p;
    pthread_barrier_wait(&g_start);
    pthread_t th;
    bench_thread(&th, short_lived, (void *)(uintptr_t)(p + 1));
    pthread_join(th, NULL);
    pthread_barrier_wait(&g_done);
    struct timespec ts = {0, (long)idle_ms * 1000000L};
    nanosleep(&ts, NULL);
    rss[p] = bench_rss_kb();
  }
  double secs = bench_now() - t0;
  g_phase = -1;
  pthread_barrier_wait(&g_start);
  for (int t = 0; t < g_threads; t++)
    pthread_join(g_workers[t].th, NULL);

  int quarter = (int)phases / 4;
  long q1 = max_of(rss, 0, quarter),
       q4 = max_of(rss, (int)phases - quarter, (int)phases);
  double ops = (double)phases * (double)threads * (double)g_ops;
  bench_result("long_run",
               "phases=%lld threads=%lld ops=%lld ws=%lld idle_ms=%lld "
               "rss_q1_kb=%ld rss_q4_kb=%ld growth=%.3f rss_end_kb=%ld "
               "ops/s=%.0f",
               phases, threads, g_ops, g_ws, idle_ms, q1, q4,
               q1 > 0 ? (double)q4 / (double)q1 : 0.0, rss[phases - 1],
               ops / secs);
  return 0;
}
