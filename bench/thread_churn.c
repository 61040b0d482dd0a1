/* thread_churn: many short-lived threads, each touching the allocator.
 *
 * The main thread creates THREADS_TOTAL threads, keeping CONCURRENT of
 * them in flight: before creating thread i (i >= CONCURRENT) it joins
 * thread i - CONCURRENT.  Each thread (RNG seeded by its index):
 *   - mallocs 12 blocks (70% 16-256 B, 25% 257-4096 B, 5% 4-64 KiB) and
 *     touches them,
 *   - frees 11 of them in a shuffled order,
 *   - swaps the remaining block into a shared hand-off slot and frees the
 *     block it took out, which an earlier thread (usually exited by now)
 *     allocated;
 *   - with EXIT_PAIRS > 0, sets a pthread key whose destructor (run as the
 *     thread exits, after the allocator's own where it has one) makes
 *     EXIT_PAIRS malloc/free pairs of 16-256 B, as C++ and library
 *     destructors do.
 * The block left in the slot at the end is freed by main.
 *
 * Metric: ops/s = threads per second (create + run + join).  Also
 * rss_start_kb (after the first 1000 threads have been joined) and
 * rss_end_kb (after all threads have been joined), to show per-thread
 * state that is never reclaimed. */
#include <pthread.h>
#include <stdatomic.h>

#include "bench.h"

static const char *usage =
    "usage: thread_churn [THREADS_TOTAL] [CONCURRENT] [EXIT_PAIRS]\n"
    "  THREADS_TOTAL  short-lived threads to create (default 20000)\n"
    "  CONCURRENT     threads in flight at a time (default 4)\n"
    "  EXIT_PAIRS     malloc/free pairs in a key destructor at thread exit\n"
    "                 (default 0)\n"
    "Each thread mallocs 12 mixed blocks (16 B-64 KiB), frees 11, and hands\n"
    "the last one to a later thread, which frees it.\n"
    "Reports: ops/s = threads per second, rss_start_kb (after the first\n"
    "1000 threads), rss_end_kb (after all threads).\n";

#define NBLK 12

static _Atomic(void *) g_handoff;
static atomic_ullong g_check;
static long long g_exit_pairs;
static pthread_key_t g_exit_key;

/* The key destructor: EXIT_PAIRS malloc/free pairs as the thread exits. */
static void exit_allocs(void *value) {
  bench_rng_t r;
  bench_rng_seed(&r, (uint64_t)(uintptr_t)value);
  unsigned long long sum = 0;
  for (long long i = 0; i < g_exit_pairs; i++) {
    size_t size = (size_t)bench_rng_range(&r, 16, 256);
    unsigned char *p = bench_xmalloc(size);
    bench_touch(p, size);
    sum += p[0];
    free(p);
  }
  atomic_fetch_add(&g_check, sum);
}

static void *worker(void *arg) {
  uint64_t idx = (uint64_t)(uintptr_t)arg;
  bench_rng_t r;
  bench_rng_seed(&r, 7 + idx);
  if (g_exit_pairs > 0)
    pthread_setspecific(g_exit_key, (void *)(uintptr_t)(idx + 1));
  void *b[NBLK];
  size_t sz[NBLK];
  for (int i = 0; i < NBLK; i++) {
    uint64_t x = bench_rng_next(&r) % 100;
    if (x < 70)
      sz[i] = (size_t)bench_rng_range(&r, 16, 256);
    else if (x < 95)
      sz[i] = (size_t)bench_rng_range(&r, 257, 4096);
    else
      sz[i] = (size_t)bench_rng_range(&r, 4097, 65536);
    b[i] = bench_xmalloc(sz[i]);
    bench_touch(b[i], sz[i]);
    ((unsigned char *)b[i])[0] = (unsigned char)i;
  }
  /* Fisher-Yates shuffle of the free order. */
  for (int i = NBLK - 1; i > 0; i--) {
    int j = (int)(bench_rng_next(&r) % (uint64_t)(i + 1));
    void *t = b[i];
    b[i] = b[j];
    b[j] = t;
  }
  unsigned long long sum = 0;
  for (int i = 0; i < NBLK - 1; i++) {
    sum += ((unsigned char *)b[i])[0];
    free(b[i]);
  }
  void *old = atomic_exchange(&g_handoff, b[NBLK - 1]);
  if (old != NULL) {
    sum += ((unsigned char *)old)[0];
    free(old);
  }
  atomic_fetch_add(&g_check, sum);
  return NULL;
}

int main(int argc, char **argv) {
  long long a[] = {20000, 4, 0};
  if (bench_start(argc, argv, usage, a, 3)) return 0;
  long long total = a[0], conc = a[1];
  g_exit_pairs = a[2];
  if (total < 1 || conc < 1 || conc > 4096 || g_exit_pairs < 0)
    return bench_bad_args(usage);
  if (g_exit_pairs > 0) pthread_key_create(&g_exit_key, exit_allocs);
  pthread_t *ring = bench_xcalloc((size_t)conc, sizeof *ring);
  long long mark = total < 1000 ? total : 1000;
  long rss_start = -1;

  double t0 = bench_now();
  long long joined = 0;
  for (long long i = 0; i < total; i++) {
    size_t s = (size_t)(i % conc);
    if (i >= conc) {
      pthread_join(ring[s], NULL);
      if (++joined == mark) rss_start = bench_rss_kb();
    }
    bench_thread(&ring[s], worker, (void *)(uintptr_t)i);
  }
  for (long long i = total - (total < conc ? total : conc); i < total; i++) {
    pthread_join(ring[(size_t)(i % conc)], NULL);
    if (++joined == mark) rss_start = bench_rss_kb();
  }
  double secs = bench_now() - t0;
  long rss_end = bench_rss_kb();

  free(atomic_exchange(&g_handoff, NULL));
  free(ring);
  bench_result("thread_churn",
               "threads=%lld concurrent=%lld exit_pairs=%lld rss_start_kb=%ld "
               "rss_end_kb=%ld elapsed_s=%.3f ops/s=%.0f",
               total, conc, g_exit_pairs, rss_start, rss_end, secs,
               (double)total / secs);
  (void)atomic_load(&g_check);
  return 0;
}
