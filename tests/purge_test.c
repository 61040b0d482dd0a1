/* purge_test — freed memory goes back to the kernel, seen through RSS and
 * the C library's interface only (malloc/free/calloc/malloc_trim/mallinfo2).
 *
 * A burst allocates BURST bytes in blocks of 16 B .. 1 MiB (log-uniform),
 * writes every byte and frees everything. Then:
 *   - trim: malloc_trim(0) right after the burst returns 1 and brings RSS
 *     back to within RSS_SLACK of what it was before the burst at once
 *     (single-threaded, no purge thread yet); mallinfo2 counts the freed
 *     memory in keepcost (free bytes not yet purged) before and not after
 *     the trim, and nothing in use (uordblks) after it;
 *   - calloc: a block freed with its bytes set and allocated again reads as
 *     zeros: from the bins and from the large cache before any purge (the
 *     same address, checked), and after a trim (any purged mapping);
 *   - delay: with a second thread alive (so the purge thread runs) and the
 *     main thread idle, RSS comes back within DELAY_SLACK by itself once
 *     the purge delay has passed (polled up to DELAY_WAIT_MS): the purge
 *     thread must also collect the idle main heap (its bins and the free
 *     blocks in its pages hold about 30 MiB after this burst);
 *   - thread churn: CHURN_THREADS threads, one after the other, each
 *     allocating, writing and freeing about 2 MiB (16 blocks of 64 KiB, 64
 *     of 256 B, one of 1 MiB); RSS may peak at most
 *     CHURN_PEAK above the start and, after malloc_trim(0), must be back
 *     within RSS_SLACK.
 * The purge delay comes from HZ_PURGE_DELAY_MS (CTest sets 200 ms), as the
 * allocator reads it; the default is 100 ms. Under a sanitizer RSS is
 * printed but not enforced. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "test_util.h"

#define MiB           ((size_t)1 << 20)
#define BURST         (256 * MiB)
#define MAX_BLOCKS    65536
#define MIN_SIZE      16
#define MAX_SIZE      MiB
#define RSS_SLACK     (32 * MiB)
#define DELAY_SLACK   (16 * MiB)
#define DELAY_WAIT_MS 10000 /* a poll: ends as soon as RSS is down */
#define CHURN_THREADS 2000
#define CHURN_PEAK    (64 * MiB)
#define SMALL_MAX     ((size_t)256 << 10) /* largest size-class block */

static void *blocks[MAX_BLOCKS];
static const double MB = 1024.0 * 1024.0;

/* The compiler must not drop a malloc/free pair or the stores before a
 * free: the block escapes here. */
static void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static bool rss_within(size_t rss, size_t base, size_t slack) {
  return !TEST_RSS_ENFORCED || rss <= base + slack;
}

static bool rss_near(size_t rss, size_t base) {
  return rss_within(rss, base, RSS_SLACK);
}

/* ---------------------------------------------------------------------------
 * The burst
 * ------------------------------------------------------------------------- */
static size_t pick_size(uint64_t *rng) {
  uint64_t r = test_rng_next(rng);
  unsigned shift = 4 + (unsigned)(r % 17); /* 16 B .. 1 MiB */
  size_t size =
      ((size_t)1 << shift) + (size_t)((r >> 8) % ((size_t)1 << shift));
  return size < MIN_SIZE ? MIN_SIZE : size > MAX_SIZE ? MAX_SIZE : size;
}

/* How long the last burst's frees took. */
static double burst_free_ms;

/* Allocate and write BURST bytes, free them all; returns the peak RSS. */
static size_t burst(uint64_t seed) {
  uint64_t rng = seed;
  size_t total = 0, n = 0;
  while (total < BURST && n < MAX_BLOCKS) {
    size_t size = pick_size(&rng);
    void *p = malloc(size);
    CHECK_MSG(p != NULL, "malloc(%zu) failed", size);
    if (p == NULL) break;
    memset(p, (int)(n % 255) + 1, size);
    escape(p);
    blocks[n++] = p;
    total += size;
  }
  size_t peak = test_rss_bytes();
  double start = test_now_ms();
  for (size_t i = 0; i < n; i++)
    free(blocks[i]);
  burst_free_ms = test_now_ms() - start;
  return peak;
}

/* ---------------------------------------------------------------------------
 * malloc_trim
 * ------------------------------------------------------------------------- */
static void test_trim(void) {
  size_t rss0 = test_rss_bytes();
  size_t peak = burst(UINT64_C(0x9E3779B97F4A7C15));
  struct mallinfo2 kept = mallinfo2();
  int trimmed = malloc_trim(0);
  size_t rss1 = test_rss_bytes();
  struct mallinfo2 after = mallinfo2();
  fprintf(stderr,
          "purge_test: trim: rss %.1f -> peak %.1f -> %.1f MiB after "
          "malloc_trim (returned %d); keepcost %.1f -> %.1f MiB, uordblks "
          "%.1f -> %.1f MiB\n",
          (double)rss0 / MB, (double)peak / MB, (double)rss1 / MB, trimmed,
          (double)kept.keepcost / MB, (double)after.keepcost / MB,
          (double)kept.uordblks / MB, (double)after.uordblks / MB);
  CHECK(rss0 != 0 && rss1 != 0);
  if (TEST_RSS_ENFORCED) /* the burst was resident: the check means something */
    CHECK(peak >= rss0 + BURST / 2);
  CHECK(trimmed == 1);
  CHECK_MSG(rss_near(rss1, rss0), "RSS %.1f MiB above the start after trim",
            ((double)rss1 - (double)rss0) / MB);
  /* Freed memory waits the purge delay before it goes: all of it is kept
   * when the frees took less (an emulated arm64 machine took longer, and
   * purged the first freed while it freed the rest). */
  long delay = test_purge_delay_ms();
  if (delay < 0 || burst_free_ms < (double)delay)
    CHECK_MSG(kept.keepcost >= BURST / 4,
              "keepcost %zu bytes after freeing %zu", kept.keepcost, BURST);
  else
    fprintf(stderr,
            "purge_test: trim: the frees took %.0f ms, past the %ld ms purge "
            "delay: keepcost not checked\n",
            burst_free_ms, delay);
  CHECK_MSG(after.keepcost <= RSS_SLACK,
            "keepcost %.1f MiB after malloc_trim: nothing left to give back",
            (double)after.keepcost / MB);
  CHECK_MSG(after.uordblks <= RSS_SLACK,
            "uordblks %.1f MiB in use with nothing allocated",
            (double)after.uordblks / MB);
}

/* ---------------------------------------------------------------------------
 * calloc
 * ------------------------------------------------------------------------- */
static bool all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return false;
  return true;
}

/* Free a block full of 0xAB, calloc the same size: the same block (unless
 * malloc_trim ran in between: then any purged mapping), all zeros. */
static void check_calloc_reuse(size_t size, bool trim) {
  unsigned char *p = malloc(size);
  CHECK(p != NULL);
  if (p == NULL) return;
  memset(p, 0xAB, size);
  escape(p);
  volatile uintptr_t freed = (uintptr_t)p; /* kept before the free */
  free(p);
  if (trim) CHECK(malloc_trim(0) == 1);
  unsigned char *q = calloc(1, size);
  CHECK(q != NULL);
  if (q == NULL) return;
  if (!trim)
    CHECK_MSG((uintptr_t)q == freed,
              "calloc(%zu) did not reuse the block just freed", size);
  CHECK_MSG(all_zero(q, size), "calloc(%zu)%s: not all zeros", size,
            trim ? " after malloc_trim" : "");
  free(q);
}

static void test_calloc(void) {
  static const size_t sizes[] = {
      16,     24,        100,           1000,   4096, 8208,   65536,
      100000, SMALL_MAX, SMALL_MAX + 1, 300000, MiB,  8 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    check_calloc_reuse(sizes[i], false);
  check_calloc_reuse(8 * MiB, true);
  check_calloc_reuse(SMALL_MAX + 1, true);
}

/* ---------------------------------------------------------------------------
 * The purge delay
 * ------------------------------------------------------------------------- */
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static bool idle_ready, idle_stop;

/* Takes a heap (the process now has two threads with one: the purge
 * thread starts), then waits to be told to stop. */
static void *idle_thread(void *arg) {
  (void)arg;
  void *p = malloc(64);
  escape(p);
  free(p);
  pthread_mutex_lock(&idle_lock);
  idle_ready = true;
  pthread_cond_broadcast(&idle_cond);
  while (!idle_stop)
    pthread_cond_wait(&idle_cond, &idle_lock);
  pthread_mutex_unlock(&idle_lock);
  return NULL;
}

static void test_delay(long delay) {
  size_t rss0 = test_rss_bytes();
  size_t peak = burst(UINT64_C(0x243F6A8885A308D3));
  double t0 = test_now_ms();
  size_t rss_freed = test_rss_bytes();
  test_sleep_ms(3 * delay);
  size_t rss = test_rss_bytes();
  while (!rss_within(rss, rss0, DELAY_SLACK) && test_now_ms() - t0 < DELAY_WAIT_MS) {
    test_sleep_ms(50);
    rss = test_rss_bytes();
  }
  double waited = test_now_ms() - t0;
  fprintf(stderr,
          "purge_test: delay %ld ms: rss %.1f -> peak %.1f -> %.1f freed -> "
          "%.1f MiB after %.0f ms\n",
          delay, (double)rss0 / MB, (double)peak / MB, (double)rss_freed / MB,
          (double)rss / MB, waited);
  if (TEST_RSS_ENFORCED) CHECK(peak >= rss0 + BURST / 2);
  CHECK_MSG(rss_within(rss, rss0, DELAY_SLACK),
            "RSS still %.1f MiB above the start %.0f ms after the frees",
            ((double)rss - (double)rss0) / MB, waited);
}

/* ---------------------------------------------------------------------------
 * Thread churn
 * ------------------------------------------------------------------------- */
#define CHURN_SMALL 16
#define CHURN_TINY  64

/* 16 blocks of 64 KiB, 64 of 256 B and one of 1 MiB: about 2 MiB. */
static void *churn_thread(void *arg) {
  unsigned long *errors = arg;
  void *p[CHURN_SMALL + CHURN_TINY + 1];
  size_t n = 0;
  for (int i = 0; i < CHURN_SMALL; i++)
    p[n++] = malloc((size_t)64 << 10);
  for (int i = 0; i < CHURN_TINY; i++)
    p[n++] = malloc(256);
  p[n++] = malloc(MiB);
  for (size_t i = 0; i < n; i++) {
    if (p[i] == NULL) {
      ++*errors;
      continue;
    }
    size_t size = i < CHURN_SMALL                ? (size_t)64 << 10
                  : i < CHURN_SMALL + CHURN_TINY ? 256
                                                 : MiB;
    memset(p[i], 0x5C, size);
    escape(p[i]);
  }
  for (size_t i = 0; i < n; i++)
    free(p[i]);
  return NULL;
}

static void test_churn(void) {
  malloc_trim(0);
  size_t rss0 = test_rss_bytes(), peak = rss0;
  unsigned long errors = 0;
  int started = 0;
  for (int i = 0; i < CHURN_THREADS; i++) {
    pthread_t th;
    int rc = pthread_create(&th, NULL, churn_thread, &errors);
    CHECK_MSG(rc == 0, "pthread_create: %s", strerror(rc));
    if (rc != 0) break;
    pthread_join(th, NULL);
    started++;
    if (i % 100 == 0) {
      size_t rss = test_rss_bytes();
      if (rss > peak) peak = rss;
    }
  }
  int trimmed = malloc_trim(0);
  size_t rss1 = test_rss_bytes();
  fprintf(stderr,
          "purge_test: churn: %d threads; rss %.1f -> peak %.1f -> %.1f MiB "
          "after malloc_trim (returned %d)\n",
          started, (double)rss0 / MB, (double)peak / MB, (double)rss1 / MB,
          trimmed);
  CHECK(started == CHURN_THREADS);
  CHECK_MSG(errors == 0, "%lu allocations failed", errors);
  if (TEST_RSS_ENFORCED)
    CHECK_MSG(peak <= rss0 + CHURN_PEAK, "RSS peaked %.1f MiB above the start",
              ((double)peak - (double)rss0) / MB);
  CHECK_MSG(rss_near(rss1, rss0), "RSS %.1f MiB above the start after trim",
            ((double)rss1 - (double)rss0) / MB);
}

int main(void) {
  double t0 = test_now_ms();
  long delay = test_purge_delay_ms();
  test_trim();
  test_calloc();

  pthread_t idle;
  int rc = pthread_create(&idle, NULL, idle_thread, NULL);
  CHECK_MSG(rc == 0, "pthread_create: %s", strerror(rc));
  if (rc != 0) return check_report("purge_test");
  pthread_mutex_lock(&idle_lock);
  while (!idle_ready)
    pthread_cond_wait(&idle_cond, &idle_lock);
  pthread_mutex_unlock(&idle_lock);
  if (delay >= 0 && 3 * delay <= DELAY_WAIT_MS)
    test_delay(delay);
  else
    fprintf(stderr, "purge_test: HZ_PURGE_DELAY_MS=%ld: delay not tested\n",
            delay);
  test_churn();

  pthread_mutex_lock(&idle_lock);
  idle_stop = true;
  pthread_cond_broadcast(&idle_cond);
  pthread_mutex_unlock(&idle_lock);
  pthread_join(idle, NULL);
  fprintf(stderr, "purge_test: secs=%.2f\n", (test_now_ms() - t0) / 1e3);
  return check_report("purge_test");
}
