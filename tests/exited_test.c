/* exited_test — what happens to memory when threads end or go idle, and
 * what a thread's exit costs.
 *
 * usage: exited_test MODE
 *   threads      THREADS threads alive at once each malloc 50 blocks of
 *                16-3000 B, write them, and free their neighbour's; all are
 *                joined. RSS must come back within THREAD_SLACK bytes per
 *                thread of what it was before them once the purge delay has
 *                passed (polled up to WAIT_MS), and after malloc_trim(0)
 *                within TRIM_SLACK_PER_THREAD per thread. An exited thread's
 *                heap, pages and segments must all go.
 *   destructors  CHURN_THREADS threads one after the other make DTOR_PAIRS
 *                malloc/free pairs, in the thread's body or in a pthread key
 *                destructor that runs after the allocator's own. In the
 *                destructor they may take at most DTOR_SLOWDOWN times as
 *                long (each thread's CPU time in its pairs, which a loaded
 *                machine's preemptions do not move, summed; best of
 *                DTOR_ROUNDS, interleaved), and each pair gets
 *                the block just freed back: the exiting thread holds one
 *                heap to its end, it does not borrow one per call.
 *   large_freer  the main thread mallocs LARGE_COUNT blocks of LARGE_SIZE
 *                and writes them; a second thread that never mallocs frees
 *                them and exits; main sleeps. RSS must be back within
 *                LARGE_SLACK of the start within the purge delay + 5 s (polled:
 * a loaded machine may run the purge thread late). large_single the same, freed
 * by the main thread of a single-threaded program: at once, at most
 * UNWATCHED_KEEP of them may stay resident (no purge thread will give them back
 * later). idle_owner   the main thread mallocs IDLE_BYTES in 256 B blocks and
 *                writes them; 4 threads free them all and are joined; main
 *                then takes a few slow paths and sleeps. RSS must be back
 *                within IDLE_SLACK of the start within IDLE_WAIT_MS (CTest
 *                runs it with a purge delay of 20 ms: the inbox of an owner
 *                idle for the purge delay goes home, and the pages that
 *                empties are purged a delay later).
 *   gone_pages   GONE_THREADS threads each malloc GONE_BYTES in 16-3000 B
 *                blocks and write them, free half of theirs and half of
 *                their neighbour's, and exit (joined); main holds a heap.
 *                CTest runs it with a purge delay of 10 s, so only the
 *                pooled heaps' collection, whole once idle for 250 ms, can
 *                give their pages back in time: RSS must be back within
 *                GONE_SLACK of the start within GONE_WAIT_MS (a heap that
 *                left its pages to the delayed purge held them 10-20 s).
 * Under a sanitizer RSS is printed but not enforced. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "test_util.h"

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

static const double MB = 1024.0 * 1024.0;

/* Touch every page of [p, p + size) with a byte the compiler keeps. */
static void fill(void *p, size_t size, int byte) {
  memset(p, byte, size);
  __asm__ volatile("" : : "r"(p) : "memory");
}

/* malloc `n` blocks of `size` bytes into `slots`, each written. */
static void alloc_filled(void **slots, size_t n, size_t size, int byte) {
  for (size_t i = 0; i < n; i++) {
    slots[i] = malloc(size);
    CHECK(slots[i] != NULL);
    if (slots[i] != NULL) fill(slots[i], size, byte);
  }
}

/* malloc `n` blocks of 16-3000 B (drawn from `seed`) into `slots`, each
 * written. */
static void alloc_mixed(void **slots, size_t n, uint64_t seed, int byte) {
  uint64_t rng = 0x9E3779B97F4A7C15u ^ seed;
  for (size_t k = 0; k < n; k++) {
    size_t size = 16 + (size_t)(test_rng_next(&rng) % 2985);
    slots[k] = malloc(size);
    CHECK(slots[k] != NULL);
    if (slots[k] != NULL) fill(slots[k], size, byte);
  }
}

/* Poll RSS every 5 ms until it is at most `limit` or `wait_ms` passed;
 * returns the last RSS and sets *took_ms. */
static size_t rss_wait_below(size_t limit, double wait_ms, double *took_ms) {
  double start = test_now_ms();
  size_t rss = test_rss_bytes();
  while (rss > limit && test_now_ms() - start < wait_ms) {
    test_sleep_ms(5);
    rss = test_rss_bytes();
  }
  *took_ms = test_now_ms() - start;
  return rss;
}

/* rss_wait_below up to `limit` for the mode `what`, and one line saying how
 * RSS went from `start` through `peak` to where it came `since` its event. */
static size_t rss_return(const char *what, const char *since, size_t start,
                         size_t peak, size_t limit, double wait_ms,
                         double *took_ms) {
  size_t rss = rss_wait_below(limit, wait_ms, took_ms);
  fprintf(stderr,
          "exited_test: %s, purge delay %ld ms: rss %.1f -> %.1f -> %.1f "
          "MiB %.0f ms after %s\n",
          what, test_purge_delay_ms(), (double)start / MB, (double)peak / MB,
          (double)rss / MB, *took_ms, since);
  return rss;
}

/* ---------------------------------------------------------------------------
 * threads: memory of exited threads
 * ------------------------------------------------------------------------- */
#define THREADS 2000
#define BLOCKS  50
/* Per exited thread. glibc keeps their stacks cached: with glibc's malloc
 * this test holds 9 KiB per thread after the wait and 4.2 KiB after
 * malloc_trim; a heap left behind is about 30 KiB. */
#define THREAD_SLACK          (8 * KiB) /* after the purge delay */
#define TRIM_SLACK_PER_THREAD (6 * KiB)
#define WAIT_MS               10000 /* a poll: ends as soon as RSS is down */

static void *thread_blocks[THREADS][BLOCKS];
static pthread_barrier_t all_allocated, all_freed;

static void *neighbour_main(void *arg) {
  size_t i = (size_t)(uintptr_t)arg;
  alloc_mixed(thread_blocks[i], BLOCKS, i + 1, 1);
  pthread_barrier_wait(&all_allocated);
  size_t next = (i + 1) % THREADS;
  for (int k = 0; k < BLOCKS; k++)
    free(thread_blocks[next][k]);
  pthread_barrier_wait(&all_freed);
  return NULL;
}

static int test_threads(void) {
  pthread_barrier_init(&all_allocated, NULL, THREADS);
  pthread_barrier_init(&all_freed, NULL, THREADS);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * KiB);
  static pthread_t threads[THREADS];
  size_t rss0 = test_rss_bytes();
  size_t made = 0;
  for (; made < THREADS; made++)
    if (pthread_create(&threads[made], &attr, neighbour_main,
                       (void *)(uintptr_t)made) != 0)
      break;
  CHECK_MSG(made == THREADS, "made %zu of %d threads", made, THREADS);
  if (made != THREADS) return check_report("exited_test threads");
  for (size_t i = 0; i < made; i++)
    pthread_join(threads[i], NULL);
  size_t joined = test_rss_bytes();
  double took;
  size_t limit = rss0 + THREADS * THREAD_SLACK;
  size_t idle = rss_wait_below(limit, WAIT_MS, &took);
  malloc_trim(0);
  size_t trimmed = test_rss_bytes();
  fprintf(stderr,
          "exited_test: %d threads: rss %.1f -> %.1f MiB joined -> %.1f MiB "
          "after %.0f ms -> %.1f MiB after malloc_trim\n",
          THREADS, (double)rss0 / MB, (double)joined / MB, (double)idle / MB,
          took, (double)trimmed / MB);
  if (TEST_RSS_ENFORCED) {
    CHECK_MSG(idle <= limit,
              "%.1f KiB per exited thread still resident after %d ms",
              ((double)idle - (double)rss0) / 1024.0 / THREADS, WAIT_MS);
    CHECK_MSG(trimmed <= rss0 + THREADS * TRIM_SLACK_PER_THREAD,
              "%.1f KiB per exited thread still resident after malloc_trim",
              ((double)trimmed - (double)rss0) / 1024.0 / THREADS);
  }
  return check_report("exited_test threads");
}

/* ---------------------------------------------------------------------------
 * destructors: an exiting thread that allocates keeps one heap
 * ------------------------------------------------------------------------- */
#define CHURN_THREADS 100
#define DTOR_PAIRS    1000
#define DTOR_ROUNDS   3
/* Allocating in a destructor may cost this much more than in the thread's
 * body (a heap borrowed and flushed per call cost 32 times more). */
#define DTOR_SLOWDOWN 4.0

static pthread_key_t late_key;
static _Atomic int dtor_moved; /* pairs that got another block back */
static _Atomic int dtor_ran;

/* Thread CPU time of the pairs, in ns: [0] in threads' bodies, [1] in
 * destructors. A thread's own clock: a loaded machine's preemptions (and
 * the thread starts and exits around the pairs) do not move it. */
static _Atomic long pairs_ns[2];

static long thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void malloc_pairs(bool in_destructor) {
  long start = thread_cpu_ns();
  void *first = malloc(100);
  CHECK(first != NULL);
  fill(first, 100, 3);
  free(first);
  int moved = 0;
  for (int i = 0; i < DTOR_PAIRS; i++) {
    void *p = malloc(100);
    CHECK(p != NULL);
    if (p != first) moved++;
    fill(p, 100, 4);
    free(p);
  }
  atomic_fetch_add(&dtor_moved, moved);
  atomic_fetch_add(&pairs_ns[in_destructor], thread_cpu_ns() - start);
}

static void late_destructor(void *value) {
  malloc_pairs(true);
  free(value);
  atomic_fetch_add(&dtor_ran, 1);
}

static void *late_main(void *arg) {
  bool in_destructor = arg != NULL;
  void *value = malloc(64);
  CHECK(value != NULL);
  if (in_destructor) {
    pthread_setspecific(late_key, value);
  } else {
    malloc_pairs(false);
    free(value);
  }
  return NULL;
}

/* Milliseconds of CPU time the pairs of CHURN_THREADS threads took, the
 * threads one after the other, each doing its pairs in its body or in the
 * destructor. */
static double churn_ms(bool in_destructor) {
  atomic_store(&pairs_ns[in_destructor], 0);
  for (int i = 0; i < CHURN_THREADS; i++) {
    pthread_t th;
    CHECK(pthread_create(&th, NULL, late_main, in_destructor ? &th : NULL) ==
          0);
    pthread_join(th, NULL);
  }
  return (double)atomic_load(&pairs_ns[in_destructor]) / 1e6;
}

static int test_destructors(void) {
  /* Created after the allocator's key (made at its start-up), so glibc
   * calls this destructor after the allocator's in each round. */
  CHECK(pthread_key_create(&late_key, late_destructor) == 0);
  double body = 1e30, dtor = 1e30; /* the best of a few rounds, interleaved */
  for (int r = 0; r < DTOR_ROUNDS; r++) {
    double b = churn_ms(false), d = churn_ms(true);
    body = b < body ? b : body;
    dtor = d < dtor ? d : dtor;
  }
  fprintf(stderr,
          "exited_test: destructors: %d threads x %d malloc/free pairs: "
          "%.2f ms of CPU in the bodies, %.2f in destructors; %d pairs got "
          "another block back\n",
          CHURN_THREADS, DTOR_PAIRS, body, dtor, atomic_load(&dtor_moved));
  CHECK(atomic_load(&dtor_ran) == CHURN_THREADS * DTOR_ROUNDS);
  CHECK_MSG(atomic_load(&dtor_moved) == 0,
            "%d malloc/free pairs did not reuse the block just freed",
            atomic_load(&dtor_moved));
  CHECK_MSG(dtor <= body * DTOR_SLOWDOWN,
            "allocating in a destructor is %.1f times slower than in the "
            "thread's body",
            dtor / body);
  return check_report("exited_test destructors");
}

/* ---------------------------------------------------------------------------
 * large_freer, large_single: freed large blocks go back
 * ------------------------------------------------------------------------- */
#define LARGE_COUNT    40
#define LARGE_SIZE     (4 * MiB)
#define LARGE_SLACK    (5 * MiB)
#define UNWATCHED_KEEP (64 * MiB)

static void *large_blocks[LARGE_COUNT];

static void *free_large(void *arg) {
  (void)arg;
  for (int i = 0; i < LARGE_COUNT; i++)
    free(large_blocks[i]);
  return NULL;
}

static int test_large(bool threaded) {
  size_t rss0 = test_rss_bytes();
  alloc_filled(large_blocks, LARGE_COUNT, LARGE_SIZE, 5);
  size_t filled = test_rss_bytes();
  if (threaded) {
    pthread_t th;
    CHECK(pthread_create(&th, NULL, free_large, NULL) == 0);
    pthread_join(th, NULL);
  } else {
    free_large(NULL);
  }
  double took = 0;
  size_t limit = rss0 + (threaded ? LARGE_SLACK : UNWATCHED_KEEP + LARGE_SLACK);
  size_t rss =
      threaded ? rss_wait_below(limit, test_purge_delay_ms() + 5000.0, &took)
               : test_rss_bytes();
  fprintf(stderr,
          "exited_test: %d x %zu MiB freed by %s: rss %.1f -> %.1f -> %.1f "
          "MiB after %.0f ms\n",
          LARGE_COUNT, LARGE_SIZE / MiB,
          threaded ? "a thread that only frees" : "the only thread",
          (double)rss0 / MB, (double)filled / MB, (double)rss / MB, took);
  if (TEST_RSS_ENFORCED) {
    CHECK(filled >= rss0 + LARGE_COUNT * LARGE_SIZE / 2);
    CHECK_MSG(rss <= limit, "%.1f MiB above the start",
              ((double)rss - (double)rss0) / MB);
  }
  /* The blocks still come and go: taken again, written, freed. */
  alloc_filled(large_blocks, LARGE_COUNT, LARGE_SIZE, 6);
  free_large(NULL);
  return check_report(threaded ? "exited_test large_freer"
                               : "exited_test large_single");
}

/* ---------------------------------------------------------------------------
 * idle_owner: blocks freed to an idle thread go back
 * ------------------------------------------------------------------------- */
#define IDLE_BYTES  (64 * MiB)
#define IDLE_BLOCK  256
#define IDLE_COUNT  (IDLE_BYTES / IDLE_BLOCK)
#define IDLE_FREERS 4
#define IDLE_SLACK  (12 * MiB)
/* The memory must be back within this (100 purge delays): on an idle
 * machine it takes about 10, but a loaded one may run the purge thread
 * late, and a test that leans on timing must not fail by chance. */
#define IDLE_WAIT_MS 2000.0

static void **idle_blocks;

static void *free_share(void *arg) {
  size_t k = (size_t)(uintptr_t)arg;
  for (size_t i = k; i < IDLE_COUNT; i += IDLE_FREERS)
    free(idle_blocks[i]);
  return NULL;
}

/* Slow paths of the owner's, so it was active until now. */
static void owner_busy(void) {
  void *some[256];
  for (int i = 0; i < 256; i++)
    some[i] = malloc(1500);
  for (int i = 0; i < 256; i++)
    free(some[i]);
}

static int test_idle_owner(void) {
  idle_blocks = calloc(IDLE_COUNT, sizeof *idle_blocks);
  CHECK(idle_blocks != NULL);
  if (idle_blocks == NULL) return check_report("exited_test idle_owner");
  size_t rss0 = test_rss_bytes();
  alloc_filled(idle_blocks, IDLE_COUNT, IDLE_BLOCK, 7);
  size_t filled = test_rss_bytes();
  pthread_t th[IDLE_FREERS];
  for (size_t k = 0; k < IDLE_FREERS; k++)
    CHECK(pthread_create(&th[k], NULL, free_share, (void *)(uintptr_t)k) == 0);
  for (size_t k = 0; k < IDLE_FREERS; k++)
    pthread_join(th[k], NULL);
  owner_busy();
  double took;
  size_t limit = rss0 + IDLE_SLACK;
  size_t rss = rss_return("idle owner", "its last slow path", rss0, filled,
                          limit, IDLE_WAIT_MS, &took);
  if (TEST_RSS_ENFORCED) {
    CHECK(filled >= rss0 + IDLE_BYTES / 2);
    CHECK_MSG(rss <= limit && took <= IDLE_WAIT_MS,
              "%.1f MiB above the start after %.0f ms (want %.0f ms)",
              ((double)rss - (double)rss0) / MB, took, IDLE_WAIT_MS);
  }
  free(idle_blocks);
  return check_report("exited_test idle_owner");
}

/* ---------------------------------------------------------------------------
 * gone_pages: the pages of exited threads go back when their heaps are
 * collected, not a purge delay later
 * ------------------------------------------------------------------------- */
#define GONE_THREADS 4
#define GONE_BYTES   (16 * MiB)
#define GONE_SLACK   (16 * MiB) /* 7.5-8 MiB above the start here */
#define GONE_WAIT_MS 6000.0 /* collection within a second; a loaded machine */
#define GONE_BLOCKS  (GONE_BYTES / 1508)

static void *gone_blocks[GONE_THREADS][GONE_BLOCKS];
static pthread_barrier_t gone_allocated;

static void *gone_main(void *arg) {
  size_t i = (size_t)(uintptr_t)arg;
  alloc_mixed(gone_blocks[i], GONE_BLOCKS, i + 7, 3);
  pthread_barrier_wait(&gone_allocated);
  size_t next = (i + 1) % GONE_THREADS;
  for (size_t k = 0; k < GONE_BLOCKS; k += 2)
    free(gone_blocks[i][k]);
  for (size_t k = 1; k < GONE_BLOCKS; k += 2)
    free(gone_blocks[next][k]);
  return NULL;
}

static int test_gone_pages(void) {
  void *mine = malloc(100); /* main holds a heap: the purge thread runs */
  size_t rss0 = test_rss_bytes();
  pthread_barrier_init(&gone_allocated, NULL, GONE_THREADS);
  pthread_t th[GONE_THREADS];
  for (size_t i = 0; i < GONE_THREADS; i++)
    CHECK(pthread_create(&th[i], NULL, gone_main, (void *)(uintptr_t)i) == 0);
  for (size_t i = 0; i < GONE_THREADS; i++)
    pthread_join(th[i], NULL);
  size_t joined = test_rss_bytes();
  double took;
  size_t limit = rss0 + GONE_SLACK;
  size_t rss = rss_return("gone pages", "the threads were joined", rss0, joined,
                          limit, GONE_WAIT_MS, &took);
  if (TEST_RSS_ENFORCED) {
    CHECK(joined >= rss0 + GONE_THREADS * GONE_BYTES / 4);
    CHECK_MSG(rss <= limit, "%.1f MiB above the start after %.0f ms",
              ((double)rss - (double)rss0) / MB, took);
  }
  free(mine);
  return check_report("exited_test gone_pages");
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "threads") == 0) return test_threads();
  if (strcmp(mode, "destructors") == 0) return test_destructors();
  if (strcmp(mode, "large_freer") == 0) return test_large(true);
  if (strcmp(mode, "large_single") == 0) return test_large(false);
  if (strcmp(mode, "idle_owner") == 0) return test_idle_owner();
  if (strcmp(mode, "gone_pages") == 0) return test_gone_pages();
  fprintf(stderr, "usage: exited_test threads|destructors|large_freer|"
                  "large_single|idle_owner\n");
  return 2;
}
