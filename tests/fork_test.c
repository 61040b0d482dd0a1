/* fork_test — fork while other threads are allocating.
 *
 * usage: fork_test [forks=50]
 *
 * BG_THREADS background threads allocate and free mixed sizes without pause
 * and hand blocks to each other through a shared array of atomic slots,
 * while the main thread forks `forks` times. Before each fork the main
 * thread allocates a set of blocks with known contents. In the child:
 *   - the pre-fork blocks are verified; a third is freed by the child's
 *     main thread, a third by a new thread created in the child, a third by
 *     a grandchild (and by the child after forking it);
 *   - every block sitting in the exchange array (allocated by background
 *     threads that do not exist in the child) is verified and freed;
 *   - many mixed-size blocks are allocated and freed;
 *   - a new thread allocates and frees while the child forks a grandchild,
 *     which allocates, frees pre-fork blocks, creates and joins a thread of
 *     its own and exits; the child waits for it with a timeout.
 * Exit codes of a child: 0 ok, 2 corruption/allocation failure, 3 the
 * grandchild failed or crashed, 4 the grandchild hung (deadlock).
 * The parent waits for each child for at most CHILD_TIMEOUT_MS; a child
 * still running then is killed with SIGKILL and reported as a DEADLOCK.
 * Finally the background threads are stopped and joined, and everything
 * left is verified and freed.
 *
 * Output from a child uses write(2) on a stack buffer only (no stdio
 * locks, which another thread may have held at fork time).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "mixed_alloc.h"
#include "test_alloc.h"
#include "test_util.h"

#define BG_THREADS            4
#define NSLOTS                512
#define NPRE                  48 /* blocks allocated by main before each fork */
#define CHILD_TIMEOUT_MS      10000
#define GRANDCHILD_TIMEOUT_MS 8000
#define MAX_REPORTS           30

/* ThreadSanitizer cannot start threads in the child of a multi-threaded
 * fork ("dup thread with used id", die_after_fork). Under TSan the child's
 * and grandchild's "threads" therefore run their work inline; every other
 * build creates real threads in them. */
#if defined(__SANITIZE_THREAD__)
#define THREADS_IN_CHILD 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define THREADS_IN_CHILD 0
#endif
#endif
#ifndef THREADS_IN_CHILD
#define THREADS_IN_CHILD 1
#endif

/* Exit codes of children and grandchildren */
#define EX_OK                  0
#define EX_CORRUPT             2
#define EX_GRANDCHILD_FAILED   3
#define EX_GRANDCHILD_DEADLOCK 4

static _Atomic(void *) slots[NSLOTS];
static atomic_bool stop_bg;
static atomic_ulong bg_ops, bg_remote_frees, bg_errors;
static atomic_ulong n_reports;

/* ---------------------------------------------------------------- helpers */

/* Format into a stack buffer and write(2) it: safe in a forked child. */
static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...) {
  if (atomic_fetch_add(&n_reports, 1) >= MAX_REPORTS) return;
  char buf[512];
  int n = snprintf(buf, sizeof buf, "fork_test[%ld]: ", (long)getpid());
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof buf - 2) n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t w = write(2, buf, (size_t)n);
  (void)w;
}

/* Block layout: w[0] = size | tag << 48, w[i] = cookie(p, size, i); the
 * block holds the first `size` bytes of that word sequence. tag: 1..4
 * background thread, 100 main thread before a fork, 200+ children. */
#define SIZE_MASK ((UINT64_C(1) << 48) - 1)
static inline uint64_t word_at(uintptr_t p, size_t size, unsigned tag,
                               size_t i) {
  if (i == 0) return (uint64_t)size | ((uint64_t)tag << 48);
  return ((uint64_t)p ^ (uint64_t)size ^ UINT64_C(0xf0a4c0debeef1234)) +
         (uint64_t)i * UINT64_C(0x9E3779B97F4A7C15);
}

static void fill(void *p, size_t size, unsigned tag) {
  uint64_t *w = p;
  size_t n = size / 8;
  for (size_t i = 0; i < n; i++)
    w[i] = word_at((uintptr_t)p, size, tag, i);
  if (size % 8) {
    uint64_t c = word_at((uintptr_t)p, size, tag, n);
    memcpy((unsigned char *)p + n * 8, &c, size % 8);
  }
}

/* Verify every byte; returns the tag, or -1 (reported) if corrupt. */
static int verify(void *p, const char *who) {
  const uint64_t *w = p;
  size_t size = (size_t)(w[0] & SIZE_MASK);
  unsigned tag = (unsigned)(w[0] >> 48);
  if (size < 8 || size > ((size_t)8 << 20)) {
    report("%s: block %p has a corrupt header 0x%016llx", who, p,
           (unsigned long long)w[0]);
    return -1;
  }
  size_t us = t_usable_size(p);
  if (us < size) {
    report("%s: usable_size(%p) = %zu < %zu", who, p, us, size);
    return -1;
  }
  size_t n = size / 8, bad = 0, first = 0;
  for (size_t i = 1; i < n; i++)
    if (w[i] != word_at((uintptr_t)p, size, tag, i) && bad++ == 0) first = i;
  if (size % 8) {
    uint64_t c = word_at((uintptr_t)p, size, tag, n);
    if (memcmp((const unsigned char *)p + n * 8, &c, size % 8) != 0 &&
        bad++ == 0)
      first = n;
  }
  if (bad) {
    report("%s: block %p (size %zu, tag %u): %zu words corrupt, first at "
           "byte offset %zu",
           who, p, size, tag, bad, first * 8);
    return -1;
  }
  return (int)tag;
}

/* Take every block left in the slots: each verified, then freed (a
 * corrupt one is kept). Returns the number corrupt. */
static int drain_slots(const char *who) {
  int errors = 0;
  for (int i = 0; i < NSLOTS; i++) {
    void *p = atomic_exchange(&slots[i], NULL);
    if (p == NULL) continue;
    if (verify(p, who) < 0)
      errors++;
    else
      t_free(p);
  }
  return errors;
}

/* Mostly 16 B..4 KiB, ~5% 4..128 KiB, ~0.3% 256 KiB..2 MiB. */
static size_t pick_size(uint64_t *rng) {
  uint64_t r = test_rng_next(rng);
  unsigned u = (unsigned)(r % 1000);
  r >>= 16;
  if (u < 3) return ((size_t)256 << 10) + (size_t)(r % (1792u << 10));
  unsigned shift = u < 50 ? 12 + (unsigned)(r % 5) : 4 + (unsigned)(r % 8);
  r >>= 8;
  return ((size_t)1 << shift) + (size_t)(r % ((size_t)1 << shift));
}

/* Allocate (malloc / calloc / aligned_alloc / realloc-grown) and fill;
 * NULL (reported) on failure or a broken promise. */
static void *alloc_block(uint64_t *rng, unsigned tag, const char *who) {
  static const test_mix_t mix = {32, 32, 12}; /* aligned 32 B..64 KiB */
  size_t size = pick_size(rng);
  void *p = test_mixed_alloc(rng, &size, &mix, who, report);
  if (p != NULL) fill(p, size, tag);
  return p;
}

/* Mixed malloc/free churn through a local ring; returns the error count. */
static unsigned long churn(uint64_t *rng, unsigned tag, int ops, int ring_len,
                           const char *who) {
  void *ring[64] = {0};
  unsigned long errors = 0;
  if (ring_len > 64) ring_len = 64;
  for (int i = 0; i < ops; i++) {
    int k = (int)(test_rng_next(rng) % (uint64_t)ring_len);
    if (ring[k] != NULL) {
      if (verify(ring[k], who) < 0)
        errors++;
      else
        t_free(ring[k]);
    }
    ring[k] = alloc_block(rng, tag, who);
    if (ring[k] == NULL) errors++;
  }
  for (int k = 0; k < ring_len; k++) {
    if (ring[k] == NULL) continue;
    if (verify(ring[k], who) < 0)
      errors++;
    else
      t_free(ring[k]);
  }
  return errors;
}

/* ---------------------------------------------------- background threads */

static void *bg_main(void *arg) {
  unsigned tag = (unsigned)(uintptr_t)arg;
  uint64_t rng = UINT64_C(0x9E3779B97F4A7C15) * tag | 1;
  unsigned long ops = 0, remote = 0, errors = 0;
  void *ring[16] = {0};
  while (!atomic_load_explicit(&stop_bg, memory_order_relaxed)) {
    void *p = alloc_block(&rng, tag, "background thread");
    if (p == NULL) {
      errors++;
      continue;
    }
    ops++;
    uint64_t r = test_rng_next(&rng);
    void *old;
    if (r % 4 != 0) {
      old = atomic_exchange_explicit(&slots[(r >> 8) % NSLOTS], p,
                                     memory_order_acq_rel);
    } else {
      old = ring[(r >> 8) % 16];
      ring[(r >> 8) % 16] = p;
    }
    if (old != NULL) {
      int t = verify(old, "background thread");
      if (t < 0) {
        errors++;
      } else {
        if ((unsigned)t != tag) remote++;
        t_free(old);
      }
    }
  }
  for (int k = 0; k < 16; k++) {
    if (ring[k] == NULL) continue;
    if (verify(ring[k], "background thread") < 0)
      errors++;
    else
      t_free(ring[k]);
  }
  atomic_fetch_add(&bg_ops, ops);
  atomic_fetch_add(&bg_remote_frees, remote);
  atomic_fetch_add(&bg_errors, errors);
  return NULL;
}

/* ----------------------------------------------------- children and such */

struct thread_job {
  void **blocks; /* verify and free these */
  int nblocks;
  unsigned tag;
  int ops;
  unsigned long errors;
};

static void *helper_thread(void *arg) {
  struct thread_job *j = arg;
  uint64_t rng = UINT64_C(0xD1B54A32D192ED03) * (j->tag + 1) | 1;
  j->errors = churn(&rng, j->tag, j->ops / 2, 32, "thread in child");
  for (int i = 0; i < j->nblocks; i++) {
    if (verify(j->blocks[i], "thread in child") < 0)
      j->errors++;
    else
      t_free(j->blocks[i]);
  }
  j->errors += churn(&rng, j->tag, j->ops / 2, 32, "thread in child");
  return NULL;
}

/* Start helper_thread(j) on a new thread (inline under TSan, see above).
 * Returns 0 on success. */
static int start_helper(pthread_t *th, struct thread_job *j) {
#if THREADS_IN_CHILD
  return pthread_create(th, NULL, helper_thread, j);
#else
  (void)th;
  helper_thread(j);
  return 0;
#endif
}

static void join_helper(pthread_t th) {
#if THREADS_IN_CHILD
  pthread_join(th, NULL);
#else
  (void)th;
#endif
}

/* Wait for pid for at most timeout_ms. Returns the waitpid status, or -1 if
 * it timed out (the process is then killed and reaped). */
static int wait_with_timeout(pid_t pid, int timeout_ms) {
  struct timespec nap = {0, 1000000}; /* 1 ms */
  for (int waited = 0;; waited++) {
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) {
      report("waitpid(%ld) failed: %s", (long)pid, strerror(errno));
      return -2;
    }
    if (waited >= timeout_ms) break;
    nanosleep(&nap, NULL);
  }
  kill(pid, SIGKILL);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return -1;
}

static void __attribute__((noreturn))
grandchild_main(void **blocks, int n, unsigned tag) {
  uint64_t rng = UINT64_C(0xA0761D6478BD642F) * tag | 1;
  unsigned long errors = 0;
  for (int i = 0; i < n; i++) {
    if (verify(blocks[i], "grandchild") < 0)
      errors++;
    else
      t_free(blocks[i]);
  }
  errors += churn(&rng, tag, 500, 32, "grandchild");
  struct thread_job j = {NULL, 0, tag + 1, 400, 0};
  pthread_t th = 0;
  int rc = start_helper(&th, &j);
  if (rc != 0) {
    report("grandchild: pthread_create failed: %s", strerror(rc));
    errors++;
  } else {
    join_helper(th);
    errors += j.errors;
  }
  _exit(errors ? EX_CORRUPT : EX_OK);
}

static void __attribute__((noreturn))
child_main(void **pre, int npre, unsigned tag) {
  uint64_t rng = UINT64_C(0xE7037ED1A0B428DB) * tag | 1;
  unsigned long errors = 0;
  int third = npre / 3;
  void **part_a = pre, **part_b = pre + third, **part_c = pre + 2 * third;
  int nc = npre - 2 * third;

  /* 1. All pre-fork blocks intact? (No allocator call but usable_size.) */
  for (int i = 0; i < npre; i++)
    if (verify(pre[i], "child, pre-fork block") < 0) errors++;
  if (errors) _exit(EX_CORRUPT); /* do not free corrupt blocks */

  /* 2. Free part A from the child's main thread. */
  for (int i = 0; i < third; i++)
    t_free(part_a[i]);

  /* 3. Blocks of background threads that do not exist here. */
  errors += drain_slots("child, background thread's block");

  /* 4. Plenty of allocation and free. */
  errors += churn(&rng, tag, 2000, 64, "child");

  /* 5. A new thread frees part B and churns, while we fork a grandchild. */
  struct thread_job j = {part_b, third, tag + 1, 1000, 0};
  pthread_t th = 0;
  int rc = start_helper(&th, &j);
  if (rc != 0) {
    report("child: pthread_create failed: %s", strerror(rc));
    _exit(EX_CORRUPT);
  }
  void *mine = alloc_block(&rng, tag, "child");
  if (mine == NULL) _exit(EX_CORRUPT);
  pid_t gpid = fork();
  if (gpid == 0) {
    /* Grandchild: single thread; frees part C and a block of the child. */
    if (verify(mine, "grandchild") < 0) _exit(EX_CORRUPT);
    t_free(mine);
    grandchild_main(part_c, nc, tag + 2);
  }
  int ex = EX_OK;
  if (gpid < 0) {
    report("child: fork of grandchild failed: %s", strerror(errno));
    ex = EX_GRANDCHILD_FAILED;
  }
  /* The child frees its own copies of part C while the thread runs. */
  for (int i = 0; i < nc; i++)
    t_free(part_c[i]);
  if (mine != NULL) {
    if (verify(mine, "child") < 0)
      errors++;
    else
      t_free(mine);
  }
  join_helper(th);
  errors += j.errors;
  errors += churn(&rng, tag, 500, 32, "child after join");

  if (gpid > 0) {
    int st = wait_with_timeout(gpid, GRANDCHILD_TIMEOUT_MS);
    if (st == -1) {
      report("DEADLOCK: grandchild %ld did not exit within %d ms (killed)",
             (long)gpid, GRANDCHILD_TIMEOUT_MS);
      ex = EX_GRANDCHILD_DEADLOCK;
    } else if (st < 0) {
      ex = EX_GRANDCHILD_FAILED;
    } else if (WIFSIGNALED(st)) {
      report("grandchild %ld killed by signal %d (%s)", (long)gpid,
             WTERMSIG(st), strsignal(WTERMSIG(st)));
      ex = EX_GRANDCHILD_FAILED;
    } else if (WEXITSTATUS(st) != 0) {
      report("grandchild %ld exited with %d", (long)gpid, WEXITSTATUS(st));
      ex = EX_GRANDCHILD_FAILED;
    }
  }
  if (errors) _exit(EX_CORRUPT);
  _exit(ex);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  unsigned long forks =
      test_arg(argc, argv, 1, 50, 100000, "fork_test [forks=50]");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);

  pthread_t bg[BG_THREADS];
  int nbg = 0;
  for (int i = 0; i < BG_THREADS; i++) {
    int rc = pthread_create(&bg[i], NULL, bg_main, (void *)(uintptr_t)(i + 1));
    CHECK_MSG(rc == 0, "pthread_create failed: %s", strerror(rc));
    if (rc == 0) nbg++;
  }

  uint64_t rng = UINT64_C(0x8BB84B93962EACC9);
  unsigned long ok = 0, deadlocks = 0, crashes = 0, corrupt = 0, gc_fail = 0,
                gc_deadlock = 0, other = 0, main_errors = 0;
  void *pre[NPRE];
  struct timespec nap = {0, 2000000}; /* let background threads run */

  for (unsigned long f = 0; f < forks; f++) {
    /* Known blocks of the main thread, shared with the child by fork. */
    int npre = 0;
    for (int i = 0; i < NPRE; i++) {
      void *p;
      if (i == 0) { /* one large block and one with a large alignment */
        size_t sz =
            ((size_t)1 << 20) + (size_t)(test_rng_next(&rng) % (1u << 20));
        p = t_malloc(sz);
        if (p) fill(p, sz, 100);
      } else if (i == 1) {
        p = t_aligned_alloc((size_t)64 << 10, (size_t)64 << 10);
        if (p) fill(p, (size_t)64 << 10, 100);
      } else {
        p = alloc_block(&rng, 100, "main");
      }
      if (p == NULL) {
        main_errors++;
        continue;
      }
      pre[npre++] = p;
    }
    nanosleep(&nap, NULL);

    pid_t pid = fork();
    if (pid == 0) child_main(pre, npre, 200 + (unsigned)(f % 1000) * 4);
    if (pid < 0) {
      report("fork %lu failed: %s", f, strerror(errno));
      other++;
    } else {
      int st = wait_with_timeout(pid, CHILD_TIMEOUT_MS);
      if (st == -1) {
        report("DEADLOCK: child %ld of fork %lu did not exit within %d ms "
               "(killed with SIGKILL)",
               (long)pid, f, CHILD_TIMEOUT_MS);
        deadlocks++;
      } else if (st < 0) {
        other++;
      } else if (WIFSIGNALED(st)) {
        report("CRASH: child %ld of fork %lu killed by signal %d (%s)",
               (long)pid, f, WTERMSIG(st), strsignal(WTERMSIG(st)));
        crashes++;
      } else {
        switch (WEXITSTATUS(st)) {
        case EX_OK: ok++; break;
        case EX_CORRUPT:
          report("child of fork %lu detected corruption or failed "
                 "allocations",
                 f);
          corrupt++;
          break;
        case EX_GRANDCHILD_FAILED:
          report("grandchild of fork %lu failed", f);
          gc_fail++;
          break;
        case EX_GRANDCHILD_DEADLOCK:
          report("grandchild of fork %lu hung (DEADLOCK)", f);
          gc_deadlock++;
          break;
        default:
          report("child of fork %lu exited with unexpected status %d", f,
                 WEXITSTATUS(st));
          other++;
        }
      }
    }
    /* The parent's copies are untouched by the child: verify and free. */
    for (int i = 0; i < npre; i++) {
      if (verify(pre[i], "parent, pre-fork block") < 0)
        main_errors++;
      else
        t_free(pre[i]);
    }
  }

  atomic_store(&stop_bg, true);
  for (int i = 0; i < nbg; i++)
    pthread_join(bg[i], NULL);
  main_errors += drain_slots("main, final drain");

  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs =
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  unsigned long bge = atomic_load(&bg_errors);
  fprintf(stderr,
          "fork_test: forks=%lu ok=%lu deadlocks=%lu crashes=%lu "
          "child_corrupt=%lu grandchild_failed=%lu grandchild_deadlocks=%lu "
          "other=%lu parent_errors=%lu bg_ops=%lu bg_remote_frees=%lu "
          "bg_errors=%lu secs=%.2f%s\n",
          forks, ok, deadlocks, crashes, corrupt, gc_fail, gc_deadlock, other,
          main_errors, atomic_load(&bg_ops), atomic_load(&bg_remote_frees), bge,
          secs, THREADS_IN_CHILD ? "" : " (TSan: no threads in children)");
  CHECK_MSG(deadlocks == 0, "%lu children deadlocked", deadlocks);
  CHECK_MSG(gc_deadlock == 0, "%lu grandchildren deadlocked", gc_deadlock);
  CHECK_MSG(crashes == 0, "%lu children crashed", crashes);
  CHECK_MSG(corrupt == 0, "%lu children found corruption", corrupt);
  CHECK_MSG(gc_fail == 0, "%lu grandchildren failed", gc_fail);
  CHECK_MSG(other == 0, "%lu other failures", other);
  CHECK_MSG(main_errors == 0, "%lu errors in the parent", main_errors);
  CHECK_MSG(bge == 0, "%lu errors in background threads", bge);
  CHECK_MSG(ok == forks, "only %lu of %lu children succeeded", ok, forks);
  return check_report("fork_test");
}
