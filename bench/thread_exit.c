/* thread_exit: what the memory of many threads that ended together does.
 *
 * THREADS threads (64 KiB stacks) are alive at once. Each mallocs 50
 * blocks of 16-3000 B and writes them; once all have, each frees its
 * neighbour's 50 blocks; once all have, they exit and the main thread
 * joins them. RSS is recorded after the last join, after IDLE_MS of
 * sleep, and after malloc_trim(0) that follows.
 *
 * Metric: secs = wall time from the first pthread_create to the last
 * join. Extra keys: rss_joined_kb, rss_idle_kb, rss_trim_kb. */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "bench.h"

static const char *usage =
    "usage: thread_exit [THREADS] [IDLE_MS]\n"
    "  THREADS  threads alive at once (default 2000)\n"
    "  IDLE_MS  sleep after the last join before the second sample\n"
    "           (default 2000)\n"
    "Each thread mallocs 50 blocks of 16-3000 B, writes them and frees its\n"
    "neighbour's; all exit together.\n"
    "Reports: secs (create to last join), rss_joined_kb, rss_idle_kb (after\n"
    "IDLE_MS), rss_trim_kb (after malloc_trim(0)).\n";

#define BLOCKS 50

static void **g_blocks; /* THREADS x BLOCKS */
static long long g_threads;
static pthread_barrier_t g_allocated, g_freed;
static atomic_ullong g_check;

static void *worker(void *arg) {
  long long i = (long long)(uintptr_t)arg;
  bench_rng_t r;
  bench_rng_seed(&r, 11 + (uint64_t)i);
  void **mine = g_blocks + i * BLOCKS;
  for (int k = 0; k < BLOCKS; k++) {
    size_t size = (size_t)bench_rng_range(&r, 16, 3000);
    mine[k] = bench_xmalloc(size);
    bench_touch(mine[k], size);
  }
  pthread_barrier_wait(&g_allocated);
  void **next = g_blocks + ((i + 1) % g_threads) * BLOCKS;
  unsigned long long sum = 0;
  for (int k = 0; k < BLOCKS; k++) {
    sum += ((unsigned char *)next[k])[0];
    free(next[k]);
  }
  atomic_fetch_add(&g_check, sum);
  pthread_barrier_wait(&g_freed);
  return NULL;
}

int main(int argc, char **argv) {
  long long a[] = {2000, 2000};
  if (bench_start(argc, argv, usage, a, 2)) return 0;
  g_threads = a[0];
  long long idle_ms = a[1];
  if (g_threads < 2 || g_threads > 100000 || idle_ms < 0)
    return bench_bad_args(usage);
  g_blocks = bench_xcalloc((size_t)(g_threads * BLOCKS), sizeof *g_blocks);
  pthread_t *threads = bench_xcalloc((size_t)g_threads, sizeof *threads);
  pthread_barrier_init(&g_allocated, NULL, (unsigned)g_threads);
  pthread_barrier_init(&g_freed, NULL, (unsigned)g_threads);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)64 << 10);

  double t0 = bench_now();
  for (long long i = 0; i < g_threads; i++)
    if (pthread_create(&threads[i], &attr, worker, (void *)(uintptr_t)i) !=
        0) {
      fprintf(stderr, "thread_exit: pthread_create failed at %lld\n", i);
      return 1;
    }
  for (long long i = 0; i < g_threads; i++)
    pthread_join(threads[i], NULL);
  double secs = bench_now() - t0;
  long joined = bench_rss_kb();
  struct timespec idle = {(time_t)(idle_ms / 1000),
                          (long)(idle_ms % 1000) * 1000000L};
  nanosleep(&idle, NULL);
  long idled = bench_rss_kb();
  malloc_trim(0);
  long trimmed = bench_rss_kb();

  free(threads);
  free(g_blocks);
  bench_result("thread_exit",
               "threads=%lld idle_ms=%lld rss_joined_kb=%ld rss_idle_kb=%ld "
               "rss_trim_kb=%ld secs=%.3f",
               g_threads, idle_ms, joined, idled, trimmed, secs);
  (void)atomic_load(&g_check);
  return 0;
}
