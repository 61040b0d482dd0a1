/* remote_stash_test — blocks freed by other threads get back to the thread
 * that allocated them, whether they travel in full stash batches or are
 * left in a partial stash by a thread that exits.
 *
 * usage: remote_stash_test [items=100000] [rounds=2000]
 *
 * Hand-off: the main thread allocates `items` blocks of many sizes (16 B ..
 * 128 KiB, log-uniform, every other run of 1024 below 1 KiB), writes a pattern
 * into every byte (a header word with serial number and size, a body byte
 * derived from the serial, a trailer word) and hands them to CONSUMERS threads
 * through a bounded queue protected by a mutex and two condition variables.
 * The hand-off runs twice: once with consumers that allocate first (and
 * now and then), once with consumers that never allocate, whose frees must
 * be batched all the same (the first free gives such a thread a heap).
 * Each consumer verifies every byte of each block it takes and frees it: a
 * remote free. Checks: no corrupt block, every block consumed
 * once, and (RSS) the main thread gets the memory back: a live set of at most
 * QCAP blocks must not grow towards the 735 MiB that 100,000 blocks of 7.5 KiB
 * on average take if remote frees do not come home (or stay stashed: a
 * consumer that never published would hold them all until it exits).
 *
 * Exit with a partial stash: `rounds` times, the main thread allocates K
 * blocks of 4 KiB (K = 1..63, fewer than a stash batch both in count, 64, and
 * in bytes, 63 * 4 KiB < 256 KiB) and fills them; a new thread allocates once
 * (to have a heap), verifies and frees the K blocks and exits with them still
 * in its stash. The exit must publish them to the main thread's inbox.
 * Checks: RSS may grow by at most EXIT_RSS_LIMIT from the end of the warm-up
 * to the end: if the stashed blocks were lost at exit, every round would
 * strand K * 4 KiB (on average 128 KiB), 225 MiB over the 1,800 rounds after
 * the warm-up, far above the limit, while the memory legitimately live never
 * exceeds 63 blocks.
 *
 * Statistics (when the hz_ API is reachable: linked, -DTEST_HZ_API, or
 * through dlsym under LD_PRELOAD), read by parsing hz_stats_print() after
 * hz_collect(true) in the main thread (publish its stash, drain its inbox):
 *   - hand-off: remote frees grew by at least `items`, in batches of 4 or
 *     more blocks on average (single destination: only the caps, 64 blocks
 *     or 256 KiB, and flushes publish; checked from 1,000 items on, about
 *     30 per batch measured); the inbox received at least `items`
 *     blocks in at least one drain; no more small blocks live than before;
 *   - exit: no more small blocks live after the last round (K = 63) than
 *     after the warm-up: a stash that is published late (say, only when a
 *     later thread reuses the pooled heap) leaves the last round's blocks
 *     live and fails this even though RSS stays bounded.
 * Under a sanitizer RSS is printed but not enforced. The test passes data
 * between threads only through the mutex and pthread_create/join, so it is
 * race-free (ThreadSanitizer build with -DTEST_HZ_API).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "test_alloc.h"
#include "test_util.h"

#ifdef HAVE_HZ_API
#include "hakozuna.h"
#endif

#define CONSUMERS   3
#define QCAP        256 /* blocks in flight between main and consumers */
#define MIN_SIZE    16
#define MAX_SIZE    ((size_t)128 << 10)
#define MAX_REPORTS 20

/* Hand-off: RSS growth allowed while `items` blocks pass through. What is
 * live: QCAP queued blocks (3.6 MiB on average, 32 MiB at most), the blocks
 * each consumer holds or has stashed (at most 64 blocks / 256 KiB each), and
 * what the allocator caches. */
#define HANDOFF_RSS_LIMIT ((size_t)96 << 20)

#define EXIT_BLOCKS_MAX 63 /* < 64 blocks, 63 * 4 KiB < 256 KiB */
#define EXIT_BLOCK_SIZE 4096
#define EXIT_WARMUP     200
#define EXIT_RSS_LIMIT  ((size_t)32 << 20)
/* Small blocks live after the exit rounds may exceed the count after the
 * warm-up by this much (allocations of the C library and the threading
 * runtime); the last round leaves EXIT_BLOCKS_MAX blocks behind if its stash
 * is not published at exit. */
#define EXIT_LIVE_SLACK 16

static atomic_ulong g_errors;

#define report(...)                                                            \
  test_report("remote_stash_test", &g_errors, MAX_REPORTS, __VA_ARGS__)

/* ---------------------------------------------------------------------------
 * Block pattern: header word, body bytes, trailer word (size >= 16).
 * ------------------------------------------------------------------------- */
static uint64_t header_of(uint64_t serial, size_t size) {
  return serial << 20 | (uint64_t)size; /* size < 2^20 */
}
static uint64_t trailer_of(uint64_t serial, size_t size) {
  return ~header_of(serial, size) * UINT64_C(0x9E3779B97F4A7C15);
}
static unsigned char body_of(uint64_t serial) {
  return (unsigned char)(serial * 131 + 7);
}

static void fill(void *p, size_t size, uint64_t serial) {
  unsigned char *b = p;
  uint64_t h = header_of(serial, size), t = trailer_of(serial, size);
  memcpy(b, &h, 8);
  memset(b + 8, body_of(serial), size - 16);
  memcpy(b + size - 8, &t, 8);
}

/* True if every byte of p follows the pattern of (serial, size). */
static bool intact(const void *p, size_t size, uint64_t serial) {
  const unsigned char *b = p;
  uint64_t h, t;
  memcpy(&h, b, 8);
  memcpy(&t, b + size - 8, 8);
  if (h != header_of(serial, size) || t != trailer_of(serial, size))
    return false;
  size_t body = size - 16;
  if (body == 0) return true;
  /* every body byte equals its successor, and the first is right */
  return b[8] == body_of(serial) && memcmp(b + 8, b + 9, body - 1) == 0;
}

static bool verify(const void *p, size_t size, uint64_t serial,
                   const char *who) {
  if (t_usable_size((void *)p) < size) {
    report("%s: usable_size(%p) = %zu < %zu", who, p, t_usable_size((void *)p),
           size);
    return false;
  }
  if (!intact(p, size, serial)) {
    report("%s: block %p (serial %llu, size %zu) is corrupt", who, p,
           (unsigned long long)serial, size);
    return false;
  }
  return true;
}

/* ---------------------------------------------------------------------------
 * Allocator statistics, parsed from hz_stats_print()
 * ------------------------------------------------------------------------- */
typedef void (*stats_print_fn)(void);
typedef void (*collect_fn)(bool);
static stats_print_fn api_stats_print;
static collect_fn api_collect;

static void api_find(void) {
#if defined(TEST_HZ_API) || defined(HAVE_HZ_API)
  api_stats_print = hz_stats_print;
  api_collect = hz_collect;
#else
  /* LD_PRELOAD=libhakozuna.so exports them; plain glibc does not. */
  *(void **)&api_stats_print = dlsym(RTLD_DEFAULT, "hz_stats_print");
  *(void **)&api_collect = dlsym(RTLD_DEFAULT, "hz_collect");
  if (api_stats_print == NULL || api_collect == NULL)
    api_stats_print = NULL, api_collect = NULL;
#endif
}

typedef struct {
  unsigned long long remote_frees, batches, drains, drained, live_blocks;
} stats_t;

#ifdef __SANITIZE_THREAD__
/* A sanitizer report raised while stderr goes into the pipe would be lost
 * with the process: send reports to a copy of the real stderr instead. */
void __sanitizer_set_report_fd(void *fd);
static void reports_to_real_stderr(void) {
  __sanitizer_set_report_fd((void *)(intptr_t)dup(STDERR_FILENO));
}
#else
static void reports_to_real_stderr(void) {}
#endif

/* Publish the calling thread's stash and drain its inbox, then read the
 * report. False (and a failed check) if the report cannot be parsed. */
static bool read_stats(stats_t *s) {
  api_collect(true);
  int fds[2];
  if (pipe(fds) != 0) {
    CHECK_MSG(0, "pipe failed");
    return false;
  }
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  dup2(fds[1], STDERR_FILENO);
  api_stats_print(); /* a few KiB: fits in the pipe */
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fds[1]);
  char buf[16384];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof buf - 1 &&
         (n = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0)
    len += (size_t)n;
  close(fds[0]);
  buf[len] = '\0';
  int found = 0;
  for (char *line = buf; line != NULL && *line != '\0';) {
    char *end = strchr(line, '\n');
    if (end != NULL) *end = '\0';
    while (*line == ' ')
      line++;
    found += sscanf(line, "small live %llu blocks", &s->live_blocks) == 1;
    found += sscanf(line, "remote frees %llu in %llu batches", &s->remote_frees,
                    &s->batches) == 2;
    found += sscanf(line, "inbox %llu drains, %llu blocks", &s->drains,
                    &s->drained) == 2;
    line = end != NULL ? end + 1 : NULL;
  }
  CHECK_MSG(found == 3, "stats report not understood (%d of 3 lines):\n%s",
            found, buf);
  return found == 3;
}

/* ---------------------------------------------------------------------------
 * Hand-off through a bounded queue
 * ------------------------------------------------------------------------- */
typedef struct {
  void *p;
  uint32_t size;
  uint32_t serial;
} entry_t;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t not_empty, not_full;
  entry_t slot[QCAP];
  size_t head, len;
  bool closed;
} queue = {.lock = PTHREAD_MUTEX_INITIALIZER,
           .not_empty = PTHREAD_COND_INITIALIZER,
           .not_full = PTHREAD_COND_INITIALIZER};

static void queue_put(entry_t e) {
  pthread_mutex_lock(&queue.lock);
  while (queue.len == QCAP)
    pthread_cond_wait(&queue.not_full, &queue.lock);
  queue.slot[(queue.head + queue.len) % QCAP] = e;
  queue.len++;
  pthread_cond_signal(&queue.not_empty);
  pthread_mutex_unlock(&queue.lock);
}

static void queue_close(void) {
  pthread_mutex_lock(&queue.lock);
  queue.closed = true;
  pthread_cond_broadcast(&queue.not_empty);
  pthread_mutex_unlock(&queue.lock);
}

/* False when the queue is closed and empty. */
static bool queue_get(entry_t *e) {
  pthread_mutex_lock(&queue.lock);
  while (queue.len == 0 && !queue.closed)
    pthread_cond_wait(&queue.not_empty, &queue.lock);
  bool got = queue.len > 0;
  if (got) {
    *e = queue.slot[queue.head];
    queue.head = (queue.head + 1) % QCAP;
    queue.len--;
    pthread_cond_signal(&queue.not_full);
  }
  pthread_mutex_unlock(&queue.lock);
  return got;
}

typedef struct {
  pthread_t th;
  bool allocates; /* false: the thread only ever frees */
  unsigned long consumed;
} consumer_t;

static void *consume(void *arg) {
  consumer_t *c = arg;
  /* Allocate first: the first free would give the thread a heap anyway,
   * but this way both orders are covered. */
  void *own = c->allocates ? t_malloc(64) : NULL;
  if (c->allocates && own == NULL) report("consumer: malloc(64) failed");
  entry_t e;
  while (queue_get(&e)) {
    if (verify(e.p, e.size, e.serial, "consumer")) t_free(e.p);
    c->consumed++;
    if (c->allocates && c->consumed % 97 == 0) { /* some of its own, too */
      void *q = t_malloc(16 + c->consumed % 2000);
      if (q == NULL) report("consumer: malloc failed");
      t_free(q);
    }
  }
  t_free(own);
  return NULL;
}

/* Log-uniform in [MIN_SIZE, MAX_SIZE], except that every other run of 1024
 * items stays below 1 KiB, so stash lists fill up by count (64 blocks) as
 * well as by bytes (256 KiB). */
static size_t pick_size(uint64_t *rng, unsigned long item) {
  uint64_t r = test_rng_next(rng);
  unsigned shifts = (item / 1024) % 2 == 0 ? 13 : 6;
  unsigned shift = 4 + (unsigned)(r % shifts); /* 16 B .. 128 KiB or 1 KiB */
  r >>= 8;
  size_t size = ((size_t)1 << shift) + (size_t)(r % ((size_t)1 << shift));
  return size < MIN_SIZE ? MIN_SIZE : size > MAX_SIZE ? MAX_SIZE : size;
}

static void test_handoff(unsigned long items, bool consumers_allocate) {
  const char *who = consumers_allocate ? "hand-off" : "hand-off, free-only";
  stats_t s0 = {0}, s1 = {0};
  bool stats = api_stats_print != NULL && read_stats(&s0);
  size_t rss0 = test_rss_bytes(), rss_peak = rss0;

  queue.closed = false;
  consumer_t consumers[CONSUMERS] = {0};
  for (int i = 0; i < CONSUMERS; i++) {
    consumers[i].allocates = consumers_allocate;
    int rc = pthread_create(&consumers[i].th, NULL, consume, &consumers[i]);
    CHECK_MSG(rc == 0, "pthread_create: %s", strerror(rc));
    if (rc != 0) return;
  }
  uint64_t rng = UINT64_C(0x243F6A8885A308D3);
  unsigned long made = 0;
  double bytes_made = 0;
  for (unsigned long i = 0; i < items; i++) {
    size_t size = pick_size(&rng, i);
    void *p = t_malloc(size);
    if (p == NULL) {
      report("main: malloc(%zu) failed", size);
      continue;
    }
    fill(p, size, i);
    queue_put((entry_t){p, (uint32_t)size, (uint32_t)i});
    made++;
    bytes_made += (double)size;
    if (i % 1024 == 0) {
      size_t rss = test_rss_bytes();
      if (rss > rss_peak) rss_peak = rss;
    }
  }
  queue_close();
  unsigned long consumed = 0;
  for (int i = 0; i < CONSUMERS; i++) {
    pthread_join(consumers[i].th, NULL);
    consumed += consumers[i].consumed;
  }
  size_t rss1 = test_rss_bytes();
  if (rss1 > rss_peak) rss_peak = rss1;
  if (stats && read_stats(&s1)) {
    unsigned long long remote = s1.remote_frees - s0.remote_frees;
    unsigned long long batches = s1.batches - s0.batches;
    unsigned long long drains = s1.drains - s0.drains;
    unsigned long long drained = s1.drained - s0.drained;
    fprintf(stderr,
            "remote_stash_test: %s: %llu remote frees in %llu batches "
            "(%.1f per batch), %llu drains of %llu blocks; small live %llu -> "
            "%llu blocks\n",
            who, remote, batches, batches ? (double)remote / (double)batches : 0.0,
            drains, drained, s0.live_blocks, s1.live_blocks);
    CHECK_MSG(remote >= made, "%s: %llu remote frees for %lu blocks", who,
              remote, made);
    CHECK_MSG(batches >= 1 && (made < 1000 || batches * 4 <= remote),
              "%s: %llu remote frees in %llu batches: not batched", who, remote,
              batches);
    CHECK_MSG(drains >= 1 && drained >= made,
              "inbox: %llu drains gave %llu of %lu blocks", drains, drained,
              made);
    CHECK_MSG(s1.live_blocks <= s0.live_blocks + EXIT_LIVE_SLACK,
              "small blocks live grew from %llu to %llu", s0.live_blocks,
              s1.live_blocks);
  }
  const double MiB = 1024.0 * 1024.0;
  fprintf(stderr,
          "remote_stash_test: %s: %lu blocks (%.0f MiB) made, %lu "
          "consumed; rss %.1f -> peak %.1f MiB%s\n",
          who, made, bytes_made / MiB, consumed, (double)rss0 / MiB,
          (double)rss_peak / MiB,
          TEST_RSS_ENFORCED ? "" : " (sanitizer: RSS not enforced)");
  CHECK_MSG(made == items, "%lu of %lu blocks allocated", made, items);
  CHECK_MSG(consumed == made, "%lu of %lu blocks consumed", consumed, made);
  CHECK(rss1 != 0);
  if (TEST_RSS_ENFORCED)
    CHECK_MSG(rss_peak <= rss0 + HANDOFF_RSS_LIMIT,
              "RSS grew by %.1f MiB during the hand-off (limit %.0f MiB)",
              ((double)rss_peak - (double)rss0) / MiB,
              (double)HANDOFF_RSS_LIMIT / MiB);
}

/* ---------------------------------------------------------------------------
 * Threads that exit with a partial stash
 * ------------------------------------------------------------------------- */
typedef struct {
  void *blocks[EXIT_BLOCKS_MAX];
  unsigned count;
  uint64_t serial;
  unsigned long errors;
} exit_job_t;

static void *exit_thread(void *arg) {
  exit_job_t *j = arg;
  void *own = t_malloc(32); /* take a heap: frees below are stashed */
  if (own == NULL) j->errors++;
  for (unsigned i = 0; i < j->count; i++) {
    if (verify(j->blocks[i], EXIT_BLOCK_SIZE, j->serial + i, "exiting thread"))
      t_free(j->blocks[i]);
    else
      j->errors++;
  }
  t_free(own);
  return NULL; /* exits holding up to 63 blocks in its stash */
}

static void test_exit_with_stash(unsigned long rounds) {
  stats_t s0 = {0}, s1 = {0};
  bool stats = false;
  size_t rss_warm = 0, rss_peak = 0;
  unsigned long errors = 0, freed = 0;
  uint64_t serial = 0;
  for (unsigned long r = 0; r < rounds; r++) {
    exit_job_t job = {.count = r + 1 == rounds
                                   ? EXIT_BLOCKS_MAX
                                   : 1 + (unsigned)(r % EXIT_BLOCKS_MAX),
                      .serial = serial};
    for (unsigned i = 0; i < job.count; i++) {
      job.blocks[i] = t_malloc(EXIT_BLOCK_SIZE);
      if (job.blocks[i] == NULL) {
        report("main: malloc(%d) failed", EXIT_BLOCK_SIZE);
        job.count = i;
        break;
      }
      fill(job.blocks[i], EXIT_BLOCK_SIZE, serial + i);
    }
    serial += job.count;
    pthread_t th;
    int rc = pthread_create(&th, NULL, exit_thread, &job);
    CHECK_MSG(rc == 0, "pthread_create: %s", strerror(rc));
    if (rc != 0) {
      for (unsigned i = 0; i < job.count; i++)
        t_free(job.blocks[i]);
      break;
    }
    pthread_join(th, NULL);
    errors += job.errors;
    freed += job.count;
    if (r + 1 == EXIT_WARMUP || (rounds <= EXIT_WARMUP && r == 0)) {
      stats = api_stats_print != NULL && read_stats(&s0);
      rss_warm = rss_peak = test_rss_bytes();
    } else if (r % 100 == 0) {
      size_t rss = test_rss_bytes();
      if (rss > rss_peak) rss_peak = rss;
    }
  }
  size_t rss_end = test_rss_bytes();
  if (rss_end > rss_peak) rss_peak = rss_end;
  if (stats && read_stats(&s1)) {
    fprintf(stderr,
            "remote_stash_test: exit: small live %llu blocks after the "
            "warm-up, %llu at the end\n",
            s0.live_blocks, s1.live_blocks);
    CHECK_MSG(s1.live_blocks <= s0.live_blocks + EXIT_LIVE_SLACK,
              "small blocks live grew from %llu to %llu: the stash of the "
              "last exiting thread (%d blocks) did not come home",
              s0.live_blocks, s1.live_blocks, EXIT_BLOCKS_MAX);
  }
  const double MiB = 1024.0 * 1024.0;
  fprintf(stderr,
          "remote_stash_test: exit: %lu rounds, %lu blocks freed by exiting "
          "threads; rss after warm-up %.1f MiB, peak %.1f, end %.1f%s\n",
          rounds, freed, (double)rss_warm / MiB, (double)rss_peak / MiB,
          (double)rss_end / MiB,
          TEST_RSS_ENFORCED ? "" : " (sanitizer: RSS not enforced)");
  CHECK_MSG(errors == 0, "%lu blocks corrupt or allocations failed", errors);
  CHECK(rss_end != 0);
  if (TEST_RSS_ENFORCED)
    CHECK_MSG(rss_peak <= rss_warm + EXIT_RSS_LIMIT,
              "RSS grew by %.1f MiB after the warm-up (limit %.0f MiB)",
              ((double)rss_peak - (double)rss_warm) / MiB,
              (double)EXIT_RSS_LIMIT / MiB);
}

#define USAGE "remote_stash_test [items=100000] [rounds=2000]"

int main(int argc, char **argv) {
  unsigned long items = test_arg(argc, argv, 1, 100000, UINT32_MAX, USAGE);
  unsigned long rounds = test_arg(argc, argv, 2, 2000, 10000000, USAGE);
  reports_to_real_stderr();
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  api_find();
  if (api_stats_print == NULL)
    fprintf(stderr, "remote_stash_test: hz_ API not found: statistics not "
                    "checked\n");
  test_handoff(items, true);
  test_handoff(items, false);
  test_exit_with_stash(rounds);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  fprintf(stderr, "remote_stash_test: errors=%lu secs=%.2f\n",
          atomic_load(&g_errors),
          (double)(t1.tv_sec - t0.tv_sec) +
              (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  CHECK_MSG(atomic_load(&g_errors) == 0, "%lu errors reported",
            atomic_load(&g_errors));
  return check_report("remote_stash_test");
}
