/* scaling_test — what the allocator writes to shared cache lines must not
 * grow per operation with the thread count (counted, so 2 cores can tell
 * how 64 would behave).
 *
 * The test re-executes itself once per thread count T in {1, 4, 16, 64}
 * with HZ_SHOW_STATS=1. The child runs ROUNDS rounds of: every thread
 * allocates BATCH blocks of 16..2048 bytes (a fixed random sequence per
 * thread) and fills their first and last byte; a barrier; every thread
 * frees the blocks of the previous thread (a remote free; with T = 1 its
 * own); a barrier. Work per thread is fixed, so total work grows with T.
 * The parent reads the report's "shared writes" line: lock acquisitions
 * per lock, inbox pushes, CAS retries, inbox takes and live-count
 * publications, each per million operations, and checks:
 *   - the line is there, and the counts are sane: some segment-lock and
 *     pool-lock acquisitions at every T; inbox pushes and takes from T = 4
 *     on (every free is remote there); no more CAS retries than pushes;
 *   - no lock is taken per block: every lock together at most 1 per 64
 *     operations, at every T;
 *   - flat: every count per million operations at T = 16 and at T = 64 is
 *     at most 1.5 times its value at T = 4, plus SLACK_PER_MOP.
 *
 * usage: scaling_test (the child it runs is "scaling_test T") */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "child_run.h"

#define ROUNDS        40
#define BATCH         500
#define MIN_SIZE      16
#define MAX_SIZE      2048
#define SLACK_PER_MOP 150.0

enum { SEG, LARGE, POOL, COLLECT, PUSHES, RETRIES, TAKES, LIVE, COUNTS };
static const char *const names[COUNTS] = {
    "segment lock", "large lock",  "pool lock",   "collect lock",
    "inbox pushes", "CAS retries", "inbox takes", "live publishes"};

/* ---------------------------------------------------------------------------
 * Child: the workload
 * ------------------------------------------------------------------------- */
static int threads;
static pthread_barrier_t barrier;
static void **blocks; /* threads * BATCH */

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t rng = 0x9E3779B97F4A7C15u * (uint64_t)(id + 1);
  void **mine = &blocks[(size_t)id * BATCH];
  void **theirs = &blocks[(size_t)((id + threads - 1) % threads) * BATCH];
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < BATCH; i++) {
      rng = rng * 6364136223846793005u + 1442695040888963407u;
      size_t size = MIN_SIZE + (size_t)(rng >> 33) % (MAX_SIZE - MIN_SIZE + 1);
      char *p = malloc(size);
      if (p == NULL) abort();
      p[0] = p[size - 1] = (char)i;
      mine[i] = p;
    }
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < BATCH; i++)
      free(theirs[i]);
    pthread_barrier_wait(&barrier);
  }
  return NULL;
}

static int child_main(int t) {
  threads = t;
  blocks = calloc((size_t)t * BATCH, sizeof *blocks);
  pthread_t *th = calloc((size_t)t, sizeof *th);
  if (blocks == NULL || th == NULL) return 1;
  pthread_barrier_init(&barrier, NULL, (unsigned)t);
  for (int i = 0; i < t; i++)
    if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) != 0)
      return 1;
  for (int i = 0; i < t; i++)
    pthread_join(th[i], NULL);
  return 0;
}

/* ---------------------------------------------------------------------------
 * Parent: run, read, compare
 * ------------------------------------------------------------------------- */
/* The counts per million operations from the report's shared-writes line. */
static bool read_counts(const char *err, double out[COUNTS]) {
  char line[1024];
  if (!line_starting(err, "  shared writes", line, sizeof line)) return false;
  for (int k = 0; k < COUNTS; k++) {
    const char *at = strstr(line, names[k]);
    if (at == NULL || sscanf(at + strlen(names[k]), " %lf", &out[k]) != 1)
      return false;
  }
  return true;
}

static bool run_at(const char *argv0, int t, double out[COUNTS]) {
  char arg[32];
  snprintf(arg, sizeof arg, "%d", t);
  /* The route of threads' own pages (stash, inbox): the shared pages'
   * ladder, which a crowded program's classes take, has its own test. */
  static const char *const settings[] = {"HZ_SHOW_STATS=1",
                                         "HZ_SHARED_PAGES=0", NULL};
  child_result_t r = child_run(argv0, arg, settings);
  bool ok = r.status == 0 && r.err != NULL && read_counts(r.err, out);
  CHECK_MSG(ok, "T=%d: child exit %d, no shared-writes line in:\n%s", t,
            r.status, r.err ? r.err : "(nothing)");
  if (ok) {
    fprintf(stderr, "scaling_test: T=%-3d", t);
    for (int k = 0; k < COUNTS; k++)
      fprintf(stderr, " %s %.1f%s", names[k], out[k],
              k + 1 < COUNTS ? "," : "");
    fprintf(stderr, " (per Mop)\n");
  }
  free(r.err);
  return ok;
}

static void check_sane(int t, const double c[COUNTS]) {
  CHECK_MSG(c[SEG] > 0 && c[POOL] > 0,
            "T=%d: segment lock %.1f, pool lock %.1f", t, c[SEG], c[POOL]);
  if (t >= 4)
    CHECK_MSG(c[PUSHES] > 0 && c[TAKES] > 0,
              "T=%d: every free is remote, yet inbox pushes %.1f, takes %.1f",
              t, c[PUSHES], c[TAKES]);
  CHECK_MSG(c[RETRIES] <= c[PUSHES] + 1.0,
            "T=%d: %.1f CAS retries, %.1f pushes", t, c[RETRIES], c[PUSHES]);
  double locks = c[SEG] + c[LARGE] + c[POOL] + c[COLLECT];
  CHECK_MSG(locks <= 1e6 / 64, "T=%d: %.1f lock acquisitions per Mop", t,
            locks);
}

static void check_flat(int t, const double c[COUNTS],
                       const double base[COUNTS]) {
  for (int k = 0; k < COUNTS; k++)
    CHECK_MSG(c[k] <= 1.5 * base[k] + SLACK_PER_MOP,
              "%s: %.1f per Mop at T=%d, %.1f at T=4: grows with threads",
              names[k], c[k], t, base[k]);
}

int main(int argc, char **argv) {
  if (argc == 2) return child_main(atoi(argv[1]));
  static const int counts[] = {1, 4, 16, 64};
  double at[4][COUNTS];
  bool ok = true;
  for (int i = 0; i < 4; i++) {
    ok = run_at(argv[0], counts[i], at[i]) && ok;
    if (ok) check_sane(counts[i], at[i]);
  }
  if (ok) {
    check_flat(16, at[2], at[1]);
    check_flat(64, at[3], at[1]);
  }
  return check_report("scaling_test");
}
