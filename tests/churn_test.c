/* churn_test — many short-lived threads; RSS must not grow with them.
 *
 * usage: churn_test [threads=20000]
 *
 * Creates `threads` threads in small batches (2..8 created, then all joined,
 * so only a few are alive at any time). Thread kinds, by serial number:
 *   - free-only (1 in 4): its very first allocator call is free(). It
 *     verifies and frees blocks it is handed: some allocated by the main
 *     thread, some allocated by threads that have already exited.
 *   - worker (3 in 4): allocates a handful of mixed-size blocks (malloc,
 *     calloc, realloc, aligned_alloc; 16 B..64 KiB, rarely up to 1 MiB),
 *     frees most of them itself, frees a block handed to it by main, and
 *     hands 1..3 blocks back to the main thread, which frees them (or passes
 *     them to a later free-only thread) after the allocating thread exited.
 * Every block carries a cookie in every word and is verified before free.
 *
 * RSS (resident pages from /proc/self/statm times the page size) is sampled
 * after a warm-up of WARMUP_THREADS threads, every 500 threads after that,
 * and at the end. The test fails if the final RSS grew by more than
 * RSS_GROWTH_LIMIT over the warm-up value, or if RSS ever exceeded
 * RSS_ABS_LIMIT after warm-up. Data is handed to and from threads only
 * through pthread_create/pthread_join, so the test is race-free (TSan).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "mixed_alloc.h"
#include "test_alloc.h"
#include "test_util.h"

#define WARMUP_THREADS 1000

/* Bound on RSS growth between the end of the warm-up and the end of the run.
 * What is legitimately live at any moment is small and independent of the
 * number of threads created: at most POOL_CAP pending blocks (a few KiB
 * each on average, 64 KiB at most except rare ones of up to 1 MiB), the
 * blocks of at most BATCH_MAX live threads and their stacks, plus whatever
 * the allocator caches for reuse (which must not scale with the number of
 * threads that have come and gone, since their heaps are reused). An
 * allocator that strands memory per exited thread (a heap that is never
 * reused, a page per thread never reclaimed, a stash never flushed) grows
 * linearly instead: with the default 20,000 threads, 19,000 of them after
 * the warm-up, 64 MiB is crossed by any leak averaging more than ~3.5 KiB
 * per thread (one 4 KiB page per thread would be 74 MiB), while leaving
 * glibc-like slack (about +6 MiB measured with glibc) for caches and purge
 * delays. Fewer threads on the command line make the check weaker. */
#define RSS_GROWTH_LIMIT ((size_t)64 << 20)
/* Absolute bound: the whole process (allocator, thread stacks, caches)
 * should stay far below this; see above for what is really live. */
#define RSS_ABS_LIMIT ((size_t)256 << 20)

#define BATCH_MAX   8
#define POOL_CAP    256 /* blocks handed back to main, freed later */
#define MAX_IN      8   /* blocks given to one thread to free */
#define MAX_OUT     3   /* blocks a worker hands back */
#define MAX_REPORTS 20

static atomic_ulong g_reports;

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  test_vreport("churn_test", &g_reports, MAX_REPORTS, fmt, ap);
  va_end(ap);
}

/* Block layout: w[0] = size, w[i] = cookie(p, size, i); the block holds
 * the first `size` bytes of that word sequence. */
static inline uint64_t word_at(uintptr_t p, size_t size, size_t i) {
  if (i == 0) return size;
  return ((uint64_t)p ^ (uint64_t)size ^ UINT64_C(0xc4e1a5b0f00dcafe)) +
         (uint64_t)i * UINT64_C(0x9E3779B97F4A7C15);
}

static void fill(void *p, size_t size) {
  uint64_t *w = p;
  size_t n = size / 8;
  for (size_t i = 0; i < n; i++)
    w[i] = word_at((uintptr_t)p, size, i);
  if (size % 8) {
    uint64_t c = word_at((uintptr_t)p, size, n);
    memcpy((unsigned char *)p + n * 8, &c, size % 8);
  }
}

/* Verify every byte of a block; returns 0 (and reports) if corrupt. */
static int verify(void *p, const char *who) {
  const uint64_t *w = p;
  size_t size = (size_t)w[0];
  if (size < 8 || size > ((size_t)4 << 20)) {
    report("%s: block %p has a corrupt size word 0x%016llx", who, p,
           (unsigned long long)w[0]);
    return 0;
  }
  size_t n = size / 8, bad = 0, first = 0;
  for (size_t i = 1; i < n; i++) {
    if (w[i] != word_at((uintptr_t)p, size, i) && bad++ == 0) first = i;
  }
  if (size % 8) {
    uint64_t c = word_at((uintptr_t)p, size, n);
    if (memcmp((unsigned char *)p + n * 8, &c, size % 8) != 0 && bad++ == 0)
      first = n;
  }
  if (bad) {
    report("%s: block %p (size %zu): %zu words corrupt, first at byte "
           "offset %zu",
           who, p, size, bad, first * 8);
    return 0;
  }
  return 1;
}

static size_t pick_size(uint64_t *rng) {
  uint64_t r = test_rng_next(rng);
  unsigned u = (unsigned)(r % 1000);
  r >>= 16;
  if (u < 3) return ((size_t)256 << 10) + (size_t)(r % (768u << 10));
  unsigned shift = u < 100 ? 11 + (unsigned)(r % 5) /* 2..64 KiB */
                           : 4 + (unsigned)(r % 7); /* 16 B..2 KiB */
  r >>= 8;
  return ((size_t)1 << shift) + (size_t)(r % ((size_t)1 << shift));
}

/* Allocate and fill a mixed block; NULL (reported) on failure or a broken
 * promise. */
static void *alloc_block(uint64_t *rng, const char *who) {
  static const test_mix_t mix = {16, 64, 8}; /* aligned 64 B..8 KiB */
  size_t size = pick_size(rng);
  void *p = test_mixed_alloc(rng, &size, &mix, who, report);
  if (p != NULL) fill(p, size);
  return p;
}

struct job {
  pthread_t th;
  unsigned long serial;
  uint64_t seed;
  int free_only;
  void *in[MAX_IN]; /* to verify and free */
  int nin;
  void *out[MAX_OUT]; /* handed back to main */
  int nout;
  unsigned long errors; /* blocks found corrupt (written by the thread) */
};

static void *thread_main(void *arg) {
  struct job *j = arg;
  uint64_t rng = j->seed;
  j->errors = 0;
  j->nout = 0;
  if (j->free_only) {
    /* First allocator call of this thread is free(). */
    for (int i = 0; i < j->nin; i++) {
      if (verify(j->in[i], "free-only thread"))
        t_free(j->in[i]);
      else
        j->errors++;
    }
    return NULL;
  }
  void *mine[12];
  int n = 4 + (int)(test_rng_next(&rng) % 9);
  for (int i = 0; i < n; i++) {
    mine[i] = alloc_block(&rng, "worker thread");
    if (mine[i] == NULL) j->errors++;
  }
  for (int i = 0; i < j->nin; i++) {
    if (verify(j->in[i], "worker thread"))
      t_free(j->in[i]);
    else
      j->errors++;
  }
  int keep = 1 + (int)(test_rng_next(&rng) % MAX_OUT);
  for (int i = 0; i < n; i++) {
    if (mine[i] == NULL) continue;
    if (i < keep) {
      j->out[j->nout++] = mine[i];
    } else if (verify(mine[i], "worker thread")) {
      t_free(mine[i]);
    } else {
      j->errors++;
    }
  }
  return NULL;
}

/* Pending blocks owned by main: a FIFO ring. */
static void *pool[POOL_CAP];
static size_t pool_head, pool_len;

static void pool_push(void *p, unsigned long *errors, unsigned long *freed) {
  if (pool_len == POOL_CAP) {
    void *old = pool[pool_head];
    pool_head = (pool_head + 1) % POOL_CAP;
    pool_len--;
    if (verify(old, "main thread")) {
      t_free(old);
      (*freed)++;
    } else {
      (*errors)++;
    }
  }
  pool[(pool_head + pool_len) % POOL_CAP] = p;
  pool_len++;
}

static void *pool_pop(void) {
  if (pool_len == 0) return NULL;
  void *p = pool[pool_head];
  pool_head = (pool_head + 1) % POOL_CAP;
  pool_len--;
  return p;
}

int main(int argc, char **argv) {
  unsigned long total =
      test_arg(argc, argv, 1, 20000, 10000000, "churn_test [threads=20000]");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);

  static struct job jobs[BATCH_MAX];
  uint64_t rng = UINT64_C(0x243F6A8885A308D3);
  unsigned long created = 0, errors = 0, create_failures = 0;
  unsigned long freed_after_exit = 0; /* by main, allocator thread gone */
  unsigned long handed_to_free_only = 0;
  size_t rss_warm = 0, rss_peak = 0, rss_initial = test_rss_bytes();
  unsigned long next_sample = WARMUP_THREADS;
  int warmed = 0;

  while (created < total) {
    int batch = 2 + (int)(test_rng_next(&rng) % (BATCH_MAX - 1));
    if ((unsigned long)batch > total - created) batch = (int)(total - created);
    int started = 0;
    for (int b = 0; b < batch; b++) {
      struct job *j = &jobs[b];
      j->serial = created + (unsigned long)b;
      j->seed = test_rng_next(&rng) | 1;
      j->free_only = j->serial % 4 == 0;
      j->nin = 0;
      if (j->free_only) {
        /* blocks of dead threads from the pool, plus fresh ones of main */
        int k = (int)(test_rng_next(&rng) % 4);
        for (int i = 0; i < k; i++) {
          void *p = pool_pop();
          if (p == NULL) break;
          j->in[j->nin++] = p;
          handed_to_free_only++;
        }
        int m = 1 + (int)(test_rng_next(&rng) % 4);
        for (int i = 0; i < m; i++) {
          void *p = alloc_block(&rng, "main thread");
          if (p == NULL)
            errors++;
          else
            j->in[j->nin++] = p;
        }
      } else if (test_rng_next(&rng) % 2 == 0) {
        void *p = alloc_block(&rng, "main thread");
        if (p == NULL)
          errors++;
        else
          j->in[j->nin++] = p;
      }
      int rc = pthread_create(&j->th, NULL, thread_main, j);
      if (rc != 0) {
        create_failures++;
        report("pthread_create failed: %s", strerror(rc));
        for (int i = 0; i < j->nin; i++)
          t_free(j->in[i]);
        break;
      }
      started++;
    }
    for (int b = 0; b < started; b++) {
      struct job *j = &jobs[b];
      pthread_join(j->th, NULL);
      errors += j->errors;
      for (int i = 0; i < j->nout; i++)
        pool_push(j->out[i], &errors, &freed_after_exit);
    }
    created += (unsigned long)batch;
    if (started < batch) break;

    if (created >= next_sample) {
      size_t rss = test_rss_bytes();
      if (!warmed) {
        rss_warm = rss;
        warmed = 1;
      }
      if (rss > rss_peak) rss_peak = rss;
      next_sample = created + 500;
    }
  }
  /* Free the rest of the pool from main (allocating threads have exited). */
  for (void *p; (p = pool_pop()) != NULL;) {
    if (verify(p, "main thread")) {
      t_free(p);
      freed_after_exit++;
    } else {
      errors++;
    }
  }
  size_t rss_end = test_rss_bytes();
  if (rss_end > rss_peak) rss_peak = rss_end;
  if (!warmed) rss_warm = rss_end; /* fewer threads than the warm-up */

  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs =
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

  const double MiB = 1024.0 * 1024.0;
  fprintf(
      stderr,
      "churn_test: threads=%lu rss_initial=%.1fMiB rss_after_warmup=%.1fMiB "
      "rss_peak=%.1fMiB rss_end=%.1fMiB growth=%+.1fMiB "
      "freed_after_owner_exit=%lu (of them via free-only threads=%lu) "
      "errors=%lu secs=%.2f%s\n",
      created, (double)rss_initial / MiB, (double)rss_warm / MiB,
      (double)rss_peak / MiB, (double)rss_end / MiB,
      ((double)rss_end - (double)rss_warm) / MiB,
      freed_after_exit + handed_to_free_only, handed_to_free_only, errors, secs,
      TEST_RSS_ENFORCED ? "" : " (sanitizer: RSS not enforced)");

  CHECK_MSG(create_failures == 0, "%lu thread creations failed",
            create_failures);
  CHECK_MSG(errors == 0, "%lu corrupt blocks or failed allocations", errors);
  CHECK_MSG(rss_end != 0, "could not read /proc/self/statm");
  if (TEST_RSS_ENFORCED) {
    CHECK_MSG(rss_end <= rss_warm || rss_end - rss_warm <= RSS_GROWTH_LIMIT,
              "RSS grew by %.1f MiB after warm-up (limit %.0f MiB): "
              "%.1f -> %.1f MiB",
              ((double)rss_end - (double)rss_warm) / MiB,
              (double)RSS_GROWTH_LIMIT / MiB, (double)rss_warm / MiB,
              (double)rss_end / MiB);
    CHECK_MSG(rss_peak <= RSS_ABS_LIMIT,
              "RSS reached %.1f MiB (limit %.0f MiB)", (double)rss_peak / MiB,
              (double)RSS_ABS_LIMIT / MiB);
  }
  return check_report("churn_test");
}
