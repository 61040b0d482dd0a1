/* large_demand_test — freed large memory stays resident while the program
 * keeps allocating large blocks, and comes back once it stops.
 *
 * The program alternates two phases of about 1.5 purge delays each: with
 * a 16 MiB buffer and without it. All the while, every CHURN_MS, it
 * replaces one of CHURN_SLOTS blocks of 4 MiB in turn (the new one
 * allocated before the old one is freed, so the blocks move through
 * CHURN_SLOTS + 1 mappings), and its large-block demand never falls. The
 * buffer's mapping therefore waits in the cache longer than the purge
 * delay; a cache that purges on the delay alone gives its pages back and
 * faults all 4096 in again at every return (the library before this test).
 * After WARMUP cycles, the minor faults (getrusage) of taking and writing
 * the buffer must average under FAULT_BUDGET pages.
 *
 * The premise is measured, not assumed: the cache holds the buffer while
 * the mappings taken in the last half delay or two outweigh the cached
 * ones (16 MiB + 4 MiB: five takes of 4 MiB), so no two takes may lie
 * more than a tenth of the delay apart. A slow or crowded machine stretches
 * the churn's sleeps; a return after a cycle whose churn stalled so (the
 * buffer's own malloc and writing left out) is not counted, and the program
 * runs up to MAX_CYCLES cycles to count MEASURED of them (none counted:
 * the test reports itself skipped, exit 77).
 *
 * Then the program frees everything and loops on one 1 MiB block (malloc,
 * write, free): a mapping taken again and again counts once as demand, so
 * within WAIT_DELAYS purge delays (the purge thread runs, as a second
 * thread is alive) RSS must be back within RSS_SLACK of the start. Last, 8
 * blocks of 16 MiB are written and freed and the program stops allocating:
 * RSS must be back as soon. CTest sets HZ_PURGE_DELAY_MS=200 and HZ_THP=0
 * (a fault is one page). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "test_util.h"

#define MiB          ((size_t)1 << 20)
#define BUFFER       (16 * MiB)
#define CHURN        (4 * MiB)
#define CHURN_MS     2
#define CHURN_SLOTS  6
#define WARMUP       2
#define MEASURED     4
#define MAX_CYCLES   30
#define FAULT_BUDGET 256 /* pages per return of the buffer (4096: refaulted) */
#define WAIT_DELAYS  4
#define LOOP_BLOCK   MiB
#define BURST_BLOCKS 8
#define RSS_SLACK    (16 * MiB)

static char *churn_block[CHURN_SLOTS];
static void *volatile small_block; /* the main thread's heap */
static double last_take_ms;        /* when the churn last took a block */
static double longest_gap_ms;      /* between two takes, this cycle */
static bool premise_missed;        /* no return could be counted: skip */

/* Take the next churn block: written a byte a page (resident, cheap to
 * write on a slow machine), the block it replaces freed after. */
static void churn_take(void) {
  static unsigned next;
  char *block = malloc(CHURN);
  CHECK(block != NULL);
  if (block != NULL)
    for (size_t at = 0; at < CHURN; at += 4096)
      block[at] = 1;
  free(churn_block[next]);
  churn_block[next] = block;
  next = (next + 1) % CHURN_SLOTS;
  double now = test_now_ms();
  if (now - last_take_ms > longest_gap_ms) longest_gap_ms = now - last_take_ms;
  last_take_ms = now;
}

/* Replace a churn block every CHURN_MS for `ms`. */
static void churn_for(long ms) {
  for (double end = test_now_ms() + (double)ms; test_now_ms() < end;) {
    churn_take();
    test_sleep_ms(CHURN_MS);
  }
}

/* Take and write the buffer; the time it takes is left out of the churn's
 * gaps. Returns the buffer and adds its minor faults to *faults. */
static char *take_buffer(long *faults) {
  double start = test_now_ms();
  long before = test_minor_faults();
  char *buffer = malloc(BUFFER);
  CHECK(buffer != NULL);
  if (buffer != NULL) memset(buffer, 2, BUFFER);
  *faults = test_minor_faults() - before;
  last_take_ms += test_now_ms() - start;
  return buffer;
}

/* Cycles until MEASURED returns of the buffer followed a cycle whose churn
 * never stalled (see the top); each return's faults are printed. */
static void check_buffer_kept(long delay) {
  double gap_limit = (double)delay / 10;
  long phase = delay * 3 / 2, faults = 0;
  int measured = 0, cycle = 0;
  bool steady = false;
  last_take_ms = test_now_ms();
  for (; cycle < MAX_CYCLES && measured < MEASURED; cycle++) {
    long taken_faults;
    char *buffer = take_buffer(&taken_faults);
    if (buffer == NULL) return;
    if (cycle >= WARMUP && steady) {
      faults += taken_faults;
      measured++;
    }
    printf("large_demand: cycle %d: %ld faults taking the buffer%s; longest "
           "churn gap before it %.1f ms (limit %.1f)\n",
           cycle, taken_faults,
           cycle >= WARMUP && steady ? "" : " (not counted)", longest_gap_ms,
           gap_limit);
    longest_gap_ms = 0;
    churn_for(phase);
    free(buffer);
    churn_for(phase);
    steady = longest_gap_ms <= gap_limit;
  }
  if (measured == 0) {
    printf("large_demand: SKIP: the churn stalled past %.1f ms in each of "
           "%d cycles; the machine is too slow to keep the demand up\n",
           gap_limit, cycle);
    premise_missed = true;
    return;
  }
  double per_return = (double)faults / measured;
  printf("large_demand: %.0f page faults per return of a 16 MiB buffer "
         "after %ld ms away, %d returns counted of %d (purge delay %ld ms; "
         "budget %d)\n",
         per_return, phase, measured, cycle, delay, FAULT_BUDGET);
  CHECK_MSG(per_return <= FAULT_BUDGET,
            "the buffer's pages were given back while large allocation went "
            "on: %.0f faults per return",
            per_return);
}

/* Wait up to WAIT_DELAYS purge delays for RSS to come back within
 * RSS_SLACK of rss0, looping on one block all the while if `loop`. */
static void check_rss_back(size_t rss0, long delay, bool loop,
                           const char *what) {
  size_t rss = test_rss_bytes();
  double t0 = test_now_ms(), waited = 0;
  while (waited < (double)(WAIT_DELAYS * delay) && rss > rss0 + RSS_SLACK) {
    if (loop) {
      char *volatile block = malloc(LOOP_BLOCK);
      CHECK(block != NULL);
      if (block != NULL) memset(block, 3, LOOP_BLOCK);
      free(block);
    }
    test_sleep_ms(1);
    waited = test_now_ms() - t0;
    rss = test_rss_bytes();
  }
  printf("large_demand: RSS %.1f MiB at the start, %.1f MiB %.0f ms after "
         "%s\n",
         (double)rss0 / (double)MiB, (double)rss / (double)MiB, waited, what);
  if (TEST_RSS_ENFORCED)
    CHECK_MSG(rss <= rss0 + RSS_SLACK,
              "RSS %.1f MiB %.0f ms after %s, %.1f MiB at the start",
              (double)rss / (double)MiB, waited, what,
              (double)rss0 / (double)MiB);
}

/* The second thread that lets the purge thread run: it only waits. */
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cond = PTHREAD_COND_INITIALIZER;
static int stop;

static void *idle_thread(void *arg) {
  (void)arg;
  void *volatile p = malloc(64);
  free(p);
  pthread_mutex_lock(&stop_lock);
  while (!stop)
    pthread_cond_wait(&stop_cond, &stop_lock);
  pthread_mutex_unlock(&stop_lock);
  return NULL;
}

int main(void) {
  long delay = test_purge_delay_ms();
  if (delay <= 0) delay = 200; /* the test needs a delay to wait out */
  /* Both threads take a heap (a small block each): the purge thread runs
   * once two threads hold one. */
  small_block = malloc(64);
  pthread_t idle;
  pthread_create(&idle, NULL, idle_thread, NULL);
  size_t rss0 = test_rss_bytes();

  check_buffer_kept(delay);

  for (int i = 0; i < CHURN_SLOTS; i++)
    free(churn_block[i]);
  check_rss_back(rss0, delay, true, "the frees, looping on one 1 MiB block");

  char *burst[BURST_BLOCKS];
  for (int i = 0; i < BURST_BLOCKS; i++) {
    burst[i] = malloc(BUFFER);
    CHECK(burst[i] != NULL);
    if (burst[i] != NULL) memset(burst[i], 4, BUFFER);
  }
  for (int i = 0; i < BURST_BLOCKS; i++)
    free(burst[i]);
  check_rss_back(rss0, delay, false, "a 128 MiB burst was freed, idle");
  free(small_block);

  pthread_mutex_lock(&stop_lock);
  stop = 1;
  pthread_cond_signal(&stop_cond);
  pthread_mutex_unlock(&stop_lock);
  pthread_join(idle, NULL);
  int status = check_report("large_demand");
  return status == 0 && premise_missed ? 77 : status; /* 77: skipped */
}
