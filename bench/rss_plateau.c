/* rss_plateau: does memory come back after a big burst is freed?
 *
 * THREADS threads together allocate TOTAL_MB of blocks (each thread
 * TOTAL_MB/THREADS), every block touched.  Sizes by count: 97.33%
 * 16..1024 B, 2.57% 1..32 KiB, 0.1% 32 KiB..1 MiB, which is roughly a
 * third of the bytes in each range.  Then every block is freed: thread t
 * frees the even-indexed blocks it allocated and the odd-indexed blocks
 * of thread (t+1) % THREADS, so half the blocks are freed by a thread
 * other than their allocator (with one thread, all are local).  The live
 * set never exceeds TOTAL_MB.
 *
 * RSS (/proc/self/statm) is recorded: before (threads created, bookkeeping
 * arrays allocated and touched), at the peak (all blocks live), after the
 * free (worker threads still alive but idle), and after IDLE_MS of idling
 * (if TRIM=1, malloc_trim(0) is called first).  Then the workers exit and
 * RSS is recorded once more (rss_exit_kb).
 *
 * Metric: secs = allocation phase + free phase wall time. */
#include <malloc.h>
#include <pthread.h>

#include "bench.h"

static const char *usage =
    "usage: rss_plateau [THREADS] [TOTAL_MB] [IDLE_MS] [TRIM]\n"
    "  THREADS   allocating threads (default 4)\n"
    "  TOTAL_MB  MiB allocated in total, all live at the peak (default 1024)\n"
    "  IDLE_MS   idle time after the free before the last sample (default "
    "2000)\n"
    "  TRIM      1: call malloc_trim(0) before idling (default 0)\n"
    "Blocks 16 B-1 MiB (mostly small by count), touched; half of them are\n"
    "freed by another thread than their allocator.\n"
    "Reports: rss_before_kb rss_peak_kb rss_after_free_kb rss_after_idle_kb\n"
    "(workers alive but idle), rss_exit_kb (workers exited), and\n"
    "secs = alloc + free wall time.\n";

typedef struct {
  int id;
  pthread_t th;
  void **blocks;
  size_t n;
  uint64_t seed;
  size_t bytes;
} worker_t;

static worker_t *g_w;
static int g_threads;
static size_t g_per_thread;
static pthread_barrier_t g_bar;

static size_t next_size(bench_rng_t *r) {
  uint64_t x = bench_rng_next(r) % 1000000;
  if (x < 973300) return (size_t)bench_rng_range(r, 16, 1024);
  if (x < 999000) return (size_t)bench_rng_range(r, 1025, 32768);
  return (size_t)bench_rng_range(r, 32769, 1048576);
}

/* Number of blocks a thread allocates: replays its size sequence. */
static size_t count_blocks(uint64_t seed) {
  bench_rng_t r;
  bench_rng_seed(&r, seed);
  size_t total = 0, n = 0;
  while (total < g_per_thread) {
    size_t s = next_size(&r);
    if (s > g_per_thread - total) s = g_per_thread - total;
    total += s;
    n++;
  }
  return n;
}

static void *worker(void *arg) {
  worker_t *w = arg;
  bench_rng_t r;
  bench_rng_seed(&r, w->seed);

  pthread_barrier_wait(&g_bar); /* start */
  size_t total = 0;
  for (size_t i = 0; i < w->n; i++) {
    size_t s = next_size(&r);
    if (s > g_per_thread - total) s = g_per_thread - total;
    if (s < 16) s = 16;
    void *p = bench_xmalloc(s);
    bench_touch(p, s);
    w->blocks[i] = p;
    total += s;
  }
  w->bytes = total;
  pthread_barrier_wait(&g_bar); /* all allocated */
  pthread_barrier_wait(&g_bar); /* main sampled the peak */

  worker_t *other = &g_w[(w->id + 1) % g_threads];
  for (size_t i = 0; i < w->n; i += 2)
    free(w->blocks[i]);
  for (size_t i = 1; i < other->n; i += 2)
    free(other->blocks[i]);
  pthread_barrier_wait(&g_bar); /* all freed */
  pthread_barrier_wait(&g_bar); /* main finished idling: exit */
  return NULL;
}

int main(int argc, char **argv) {
  long long a[] = {4, 1024, 2000, 0};
  if (bench_start(argc, argv, usage, a, 4)) return 0;
  long threads = (long)a[0];
  long long total_mb = a[1], idle_ms = a[2], trim = a[3];
  if (threads < 1 || threads > 1024 || total_mb < 1 || idle_ms < 0)
    return bench_bad_args(usage);
  g_threads = (int)threads;
  g_per_thread = (size_t)(total_mb << 20) / (size_t)threads;

  /* Bookkeeping first, so it is part of the baseline. */
  g_w = bench_xcalloc((size_t)threads, sizeof *g_w);
  size_t nblocks = 0;
  for (long t = 0; t < threads; t++) {
    worker_t *w = &g_w[t];
    w->id = (int)t;
    w->seed = 1000 + (uint64_t)t;
    w->n = count_blocks(w->seed);
    w->blocks = bench_xmalloc(w->n * sizeof(void *));
    memset(w->blocks, 0, w->n * sizeof(void *));
    nblocks += w->n;
  }

  pthread_barrier_init(&g_bar, NULL, (unsigned)threads + 1);
  for (long t = 0; t < threads; t++) {
    bench_thread(&g_w[t].th, worker, &g_w[t]);
  }
  long rss_before = bench_rss_kb();

  pthread_barrier_wait(&g_bar); /* start */
  double t0 = bench_now();
  pthread_barrier_wait(&g_bar); /* all allocated */
  double t1 = bench_now();
  long rss_peak = bench_rss_kb();
  pthread_barrier_wait(&g_bar); /* release the free phase */
  double t2 = bench_now();
  pthread_barrier_wait(&g_bar); /* all freed */
  double t3 = bench_now();
  long rss_after_free = bench_rss_kb();

  long rss_after_trim = -1;
  if (trim) {
    malloc_trim(0);
    rss_after_trim = bench_rss_kb();
  }
  struct timespec ts = {(time_t)(idle_ms / 1000),
                        (long)(idle_ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  long rss_after_idle = bench_rss_kb();

  pthread_barrier_wait(&g_bar); /* let workers exit */
  for (long t = 0; t < threads; t++)
    pthread_join(g_w[t].th, NULL);
  long rss_exit = bench_rss_kb();
  pthread_barrier_destroy(&g_bar);

  size_t bytes = 0;
  for (long t = 0; t < threads; t++) {
    bytes += g_w[t].bytes;
    free(g_w[t].blocks);
  }
  free(g_w);

  double alloc_s = t1 - t0, free_s = t3 - t2;
  bench_result("rss_plateau",
               "threads=%ld total_mb=%lld idle_ms=%lld trim=%lld blocks=%zu "
               "bytes=%zu rss_before_kb=%ld rss_peak_kb=%ld "
               "rss_after_free_kb=%ld rss_after_trim_kb=%ld "
               "rss_after_idle_kb=%ld rss_exit_kb=%ld alloc_s=%.3f "
               "free_s=%.3f secs=%.3f",
               threads, total_mb, idle_ms, trim, nblocks, bytes, rss_before,
               rss_peak, rss_after_free, rss_after_trim, rss_after_idle,
               rss_exit, alloc_s, free_s, alloc_s + free_s);
  return 0;
}
