/* The misuse checks of the three variants, each misuse in a child process
 * of its own. Argument 1 names the variant preloaded (secure, debug or
 * release); the program is not linked against hakozuna.
 *
 * secure and debug: every detection ends the child with SIGABRT after one
 * line "hakozuna: error: ..." naming the misuse and the address; guard
 * pages end it with SIGSEGV. release: an invalid free is reported with one
 * line and ignored, every other block stays intact.
 *
 * A child's stderr goes to a pipe; it announces the address it is about to
 * misuse with a line "note: addr 0x...", which the parent expects in the
 * library's line. A child that finds something wrong itself prints
 * "fail: ..." and exits 1. Cases that need an option set at start-up run in
 * a child that re-executes this program with "--case NAME". */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_run.h"
#include "check.h"
#include "lock.h" /* the library's: which lock the hook is called at */

/* Exported by the library: C++ sized delete and C23 free_sized. */
extern void _ZdlPvm(void *p, size_t n) __attribute__((weak));
extern void free_sized(void *p, size_t n) __attribute__((weak));

enum { V_RELEASE, V_SECURE, V_DEBUG };
#define REL (1u << V_RELEASE)
#define SEC (1u << V_SECURE)
#define DBG (1u << V_DEBUG)
static int variant;
static const char *variant_name;

/* Called through volatile pointers: the compiler can neither drop a
 * malloc/free pair nor warn about the misuses, which are the point. */
static void *(*volatile xmalloc)(size_t) = malloc;
static void *(*volatile xrealloc)(void *, size_t) = realloc;
static void (*volatile xfree)(void *) = free;

#define SEGMENT_SIZE ((uintptr_t)4 << 20)

/* ---------------------------------------------------------------------------
 * Child side
 * ------------------------------------------------------------------------- */
#define note_addr(p) child_say("note: addr %p", (const void *)(p))
#define child_fail(...)                                                        \
  do {                                                                         \
    child_say("fail: " __VA_ARGS__);                                         \
    _exit(1);                                                                  \
  } while (0)

/* No core files for the expected crashes, and no case runs forever (the
 * alarm is for a hang only: a case took more than 5 s in the emulated
 * arm64 machine of `make test-arm64`). */
static void child_setup(void) {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
  prctl(PR_SET_DUMPABLE, 0);
  alarm(60);
}

static unsigned char pattern(int block, size_t k) {
  return (unsigned char)(block * 31 + k * 7 + 1);
}

static void fill_check(const unsigned char *p, size_t n, unsigned char byte,
                       const char *what) {
  for (size_t k = 0; k < n; k++)
    if (p[k] != byte)
      child_fail("%s: byte %zu is 0x%02x, not 0x%02x", what, k, p[k], byte);
}

/* Blocks that must survive an invalid free, of sizes from 16 B to a large
 * block. */
enum { LIVE = 20 };
static unsigned char *live[LIVE];
static size_t live_size[LIVE];

static void live_fill(void) {
  for (int i = 0; i < LIVE; i++) {
    live_size[i] = i == LIVE - 1 ? 300000 : 16 + (size_t)i * i * 97;
    live[i] = xmalloc(live_size[i]);
    if (live[i] == NULL) child_fail("malloc(%zu) failed", live_size[i]);
    for (size_t k = 0; k < live_size[i]; k++)
      live[i][k] = pattern(i, k);
  }
}

static void live_verify(void) {
  for (int i = 0; i < LIVE; i++) {
    for (size_t k = 0; k < live_size[i]; k++)
      if (live[i][k] != pattern(i, k))
        child_fail("live block %d (%zu bytes) changed at byte %zu", i,
                   live_size[i], k);
    xfree(live[i]);
  }
}

/* The allocator keeps working. */
static void more_pairs(void) {
  for (int i = 0; i < 1000; i++) {
    size_t n = 1 + (size_t)(i * 37) % 5000;
    unsigned char *p = xmalloc(n);
    if (p == NULL) child_fail("malloc(%zu) failed after the invalid free", n);
    memset(p, i & 0xFF, n);
    if (p[0] != (i & 0xFF) || p[n - 1] != (i & 0xFF))
      child_fail("block of %zu bytes does not hold its bytes", n);
    xfree(p);
  }
}

/* Free a pointer that is no block: secure and debug stop there; release
 * reports it and must go on with every other block intact. */
static void invalid_free_of(void *p) {
  live_fill();
  note_addr(p);
  xfree(p);
  live_verify();
  more_pairs();
}

/* --- double free -----------------------------------------------------------
 */
/* After a double free release reported: the next mallocs of the size
 * hand the block out once at most. */
static void df_taken_once(size_t size) {
  enum { N = 8 };
  void *got[N];
  for (int i = 0; i < N; i++)
    got[i] = xmalloc(size);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < i; j++)
      if (got[i] == got[j])
        child_fail("%p handed out twice after the double free", got[i]);
}

static void case_df_immediate(void) {
  void *p = xmalloc(64);
  note_addr(p);
  xfree(p);
  xfree(p);
  df_taken_once(64);
}

static void case_df_after_others(void) {
  void *p = xmalloc(64);
  void *others[5];
  for (int i = 0; i < 5; i++)
    others[i] = xmalloc(64);
  note_addr(p);
  xfree(p);
  for (int i = 0; i < 5; i++)
    xfree(others[i]);
  xfree(p);
  df_taken_once(64);
}

static void case_df_interleaved(void) {
  void *p = xmalloc(64);
  void *q = xmalloc(64);
  note_addr(p);
  xfree(p);
  xfree(q);
  xfree(p);
  df_taken_once(64);
}

static void case_df_after_reuse(void) {
  void *p = xmalloc(64);
  xfree(p);
  void *q = xmalloc(64);
  if (q != p) child_say("note: reuse gave %p, not %p", q, p);
  xfree(q);
  note_addr(p);
  xfree(p); /* q is p: a double free; otherwise p is still free */
  df_taken_once(64);
}

static void *free_in_thread(void *p) {
  void *own = xmalloc(100); /* the thread has a heap of its own */
  xfree(p);
  xfree(own);
  return NULL;
}

static void case_df_cross_thread(void) {
  void *p = xmalloc(64);
  pthread_t t;
  if (pthread_create(&t, NULL, free_in_thread, p) != 0)
    child_fail("pthread_create");
  pthread_join(t, NULL);
  note_addr(p);
  xfree(p);
  df_taken_once(64);
}

static void case_df_large(void) {
  void *p = xmalloc((size_t)1 << 20);
  note_addr(p);
  xfree(p);
  xfree(p);
  df_taken_once((size_t)1 << 20);
}

/* A block whose page emptied and went to its heap's spare list: 3000
 * blocks of 64 B span three 64 KiB pages; once all are freed, the first
 * page is retired (the last stays first in line). The double free is
 * reported (release) and the block never comes back twice: 3000 blocks of
 * 64 B and 3000 of 32 B (which may take the page over) are all distinct. */
enum { SPAN = 3000 };
static unsigned char *span[SPAN];

static void span_alloc_free(void) {
  for (int i = 0; i < SPAN; i++)
    if ((span[i] = xmalloc(64)) == NULL) child_fail("malloc(64) failed");
  for (int i = 0; i < SPAN; i++)
    xfree(span[i]);
}

static int by_address(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static void blocks_distinct(void) {
  static unsigned char *got[2 * SPAN];
  for (int i = 0; i < 2 * SPAN; i++)
    if ((got[i] = xmalloc(i < SPAN ? 64 : 32)) == NULL)
      child_fail("malloc failed after the double free");
  qsort(got, 2 * SPAN, sizeof *got, by_address);
  for (int i = 1; i < 2 * SPAN; i++)
    if (got[i] < got[i - 1] + 32)
      child_fail("blocks %p and %p overlap: one handed out twice",
                 (void *)got[i - 1], (void *)got[i]);
}

static void case_df_retired_page(void) {
  span_alloc_free();
  note_addr(span[0]);
  xfree(span[0]);
  blocks_distinct();
}

static void case_df_retired_cross_thread(void) {
  span_alloc_free();
  note_addr(span[0]);
  pthread_t t;
  if (pthread_create(&t, NULL, free_in_thread, span[0]) != 0)
    child_fail("pthread_create");
  pthread_join(t, NULL);
  blocks_distinct();
}

/* --- double frees across threads ---------------------------------------------
 * Each case frees one block twice from threads other than its owner's (or
 * from another thread whose owner has exited), then takes blocks of its
 * size until whatever it was sent home through has been drained: release
 * reports it once and goes on, the block never handed to two holders (the
 * blocks taken are all distinct). Each runs on the threads' own pages
 * (no class shares pages: no purge thread's round) and on the shared
 * pages (".shared": HZ_SHARED_PAGES=-1, their ladder through the per-CPU
 * caches where rseq is there). */
enum { DF_TAKE = 3000 };
static size_t df_size;
static unsigned char **df_taken;
static int df_count;

static void *df_free_once(void *p) {
  xfree(xmalloc(100)); /* the thread has a heap of its own */
  xfree(p);
  return NULL;
}

static void *df_free_twice(void *p) {
  xfree(xmalloc(100));
  xfree(p);
  xfree(p);
  return NULL;
}

static void df_run_thread(void *(*fn)(void *), void *arg) {
  pthread_t t;
  if (pthread_create(&t, NULL, fn, arg) != 0) child_fail("pthread_create");
  pthread_join(t, NULL);
}

/* Take blocks of the case's size (never freed before the check): the
 * slow paths this takes drain what came home. */
static void *df_take(void *arg) {
  (void)arg;
  int n = df_size > 10000 ? DF_TAKE / 10 : DF_TAKE;
  for (int i = 0; i < n; i++) {
    unsigned char *p = xmalloc(df_size);
    if (p == NULL)
      child_fail("malloc(%zu) failed after the double free", df_size);
    memset(p, 0x3C, df_size);
    df_taken[__atomic_fetch_add(&df_count, 1, __ATOMIC_RELAXED)] = p;
  }
  return NULL;
}

static int by_pointer(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* Every block taken is distinct: none was handed to two holders. */
static void df_none_twice(void) {
  qsort(df_taken, (size_t)df_count, sizeof *df_taken, by_pointer);
  for (int i = 1; i < df_count; i++)
    if (df_taken[i] < df_taken[i - 1] + df_size)
      child_fail("%p handed out twice after the double free",
                 (void *)df_taken[i]);
}

/* Before the check, malloc_trim sends every block home (a copy waiting in
 * a per-CPU cache leaves it there), and main and a new thread take more. */
static void df_distinct(void) {
  malloc_trim(0);
  df_take(NULL);
  df_run_thread(df_take, NULL);
  df_none_twice();
}

/* Room for what the route cases take: five takers of 8,000 blocks, and
 * one df_take. */
enum { DF_ROOM = 16 * DF_TAKE };

static void df_begin(size_t size) {
  df_size = size;
  df_taken = calloc(DF_ROOM, sizeof *df_taken);
  if (df_taken == NULL) child_fail("calloc failed");
}

/* main allocates p; two other threads free it, one each. */
static void df_two_threads(size_t size) {
  df_begin(size);
  void *p = xmalloc(size);
  note_addr(p);
  df_run_thread(df_free_once, p);
  df_run_thread(df_free_once, p);
  df_take(NULL);
  df_distinct();
}

/* Another thread allocates p and stays; main frees it twice; both take. */
static void *df_owner(void *arg) {
  pthread_barrier_t *step = arg;
  void *p = xmalloc(df_size);
  note_addr(p);
  df_taken[__atomic_fetch_add(&df_count, 1, __ATOMIC_RELAXED)] = p;
  pthread_barrier_wait(step); /* p allocated */
  pthread_barrier_wait(step); /* main freed it twice and took */
  df_take(NULL);
  return NULL;
}

static void df_owner_alive(size_t size) {
  df_begin(size);
  pthread_barrier_t step;
  pthread_barrier_init(&step, NULL, 2);
  pthread_t t;
  if (pthread_create(&t, NULL, df_owner, &step) != 0)
    child_fail("pthread_create");
  pthread_barrier_wait(&step);
  void *p = df_taken[0];
  df_count = 0; /* p is freed: not a block held */
  xfree(p);
  xfree(p);
  df_take(NULL);
  pthread_barrier_wait(&step);
  pthread_join(t, NULL);
  df_distinct();
}

/* Another thread allocates p and exits; main frees it twice. */
static void *df_alloc_and_exit(void *arg) {
  (void)arg;
  void *p = xmalloc(df_size);
  note_addr(p);
  return p;
}

static void df_owner_exited(size_t size) {
  df_begin(size);
  pthread_t t;
  void *p = NULL;
  if (pthread_create(&t, NULL, df_alloc_and_exit, NULL) != 0)
    child_fail("pthread_create");
  pthread_join(t, &p);
  xfree(p);
  xfree(p);
  df_take(NULL);
  df_distinct(); /* the exited thread's heap takes its blocks home */
}

/* main allocates p; one other thread frees it twice. */
static void df_one_thread_twice(size_t size) {
  df_begin(size);
  void *p = xmalloc(size);
  note_addr(p);
  df_run_thread(df_free_twice, p);
  df_take(NULL);
  df_distinct();
}

/* Blocks another thread frees one after the other in address order go
 * home as one run (remote.h): a block of the run freed twice, once before
 * the run or once after it, is reported, and no block is handed to two
 * holders. The blocks are main's first of their size, neighbours on a
 * fresh page; sorted by address all the same. */
enum { DF_RUN = 48, DF_RUN_TWICE = DF_RUN / 2 };
static void *df_run_blocks[DF_RUN];
static bool df_twice_first;

static void *df_free_run(void *arg) {
  (void)arg;
  xfree(xmalloc(100));
  if (df_twice_first) xfree(df_run_blocks[DF_RUN_TWICE]);
  for (int i = 0; i < DF_RUN; i++)
    xfree(df_run_blocks[i]);
  if (!df_twice_first) xfree(df_run_blocks[DF_RUN_TWICE]);
  return NULL;
}

static void df_run(bool twice_first) {
  df_begin(64);
  for (int i = 0; i < DF_RUN; i++)
    df_run_blocks[i] = xmalloc(64);
  qsort(df_run_blocks, DF_RUN, sizeof *df_run_blocks, by_pointer);
  note_addr(df_run_blocks[DF_RUN_TWICE]);
  df_twice_first = twice_first;
  df_run_thread(df_free_run, NULL);
  df_take(NULL);
  df_distinct();
}

static void case_df_run_before(void) { df_run(true); }
static void case_df_run_after(void) { df_run(false); }

#define DF_CASES(size)                                                         \
  static void case_df_two_threads_##size(void) { df_two_threads(size); }       \
  static void case_df_owner_alive_##size(void) { df_owner_alive(size); }       \
  static void case_df_owner_exited_##size(void) { df_owner_exited(size); }     \
  static void case_df_one_thread_##size(void) { df_one_thread_twice(size); }
DF_CASES(16)
DF_CASES(64)
DF_CASES(1000)
DF_CASES(5000)
DF_CASES(40000)

/* --- double frees on every route ---------------------------------------------
 * The cases above take blocks after malloc_trim, which sends every copy
 * home through one drain. These leave each copy where its free put it (a
 * stash, a CPU cache, a bin, an inbox) while the owner and four other
 * threads take blocks of the size and keep them, as a program would: no
 * block may then be held twice, and release reports the second free once. */
enum { ROUTE_TAKERS = 4 };

static void *route_take(void *arg) {
  (void)arg;
  int n = df_size > 10000 ? 200 : 4000;
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < n; i++) {
      unsigned char *p = xmalloc(df_size);
      if (p == NULL) child_fail("malloc(%zu) failed", df_size);
      p[0] = 0x3C; /* a write, not the whole block: 40 threads trade */
      df_taken[__atomic_fetch_add(&df_count, 1, __ATOMIC_RELAXED)] = p;
    }
  return NULL;
}

/* The owner (main) and ROUTE_TAKERS threads take blocks; none is held
 * twice (p, still held by the program in some cases, is in df_taken). */
static void route_take_all(void) {
  pthread_t t[ROUTE_TAKERS];
  route_take(NULL);
  for (int i = 0; i < ROUTE_TAKERS; i++)
    if (pthread_create(&t[i], NULL, route_take, NULL) != 0)
      child_fail("pthread_create");
  for (int i = 0; i < ROUTE_TAKERS; i++)
    pthread_join(t[i], NULL);
  df_none_twice();
}

/* A thread that never allocated (no heap of its own: its first free takes
 * the slow path) frees p twice in a row, then waits until the others have
 * taken (`stay`) or exits at once. */
static pthread_barrier_t route_step;
static bool route_stay;

static void *route_free_twice_fresh(void *p) {
  xfree(p);
  xfree(p);
  if (route_stay) pthread_barrier_wait(&route_step);
  return NULL;
}

static void route_fresh_twice(size_t size, bool stay) {
  df_begin(size);
  void *p = xmalloc(size);
  note_addr(p);
  route_stay = stay;
  pthread_barrier_init(&route_step, NULL, 2);
  pthread_t t;
  if (pthread_create(&t, NULL, route_free_twice_fresh, p) != 0)
    child_fail("pthread_create");
  if (!stay) pthread_join(t, NULL);
  route_take_all();
  if (stay) {
    pthread_barrier_wait(&route_step);
    pthread_join(t, NULL);
  }
}

/* Two threads with heaps of their own free p once each: the first exits
 * (its copy goes home), the second waits, its copy in its stash or CPU
 * cache, while the owner takes blocks (reusing p), then exits, and all
 * take. */
static void *route_free_and_exit(void *p) {
  xfree(xmalloc(100));
  xfree(p);
  return NULL;
}

static void *route_free_and_wait(void *p) {
  xfree(xmalloc(100));
  xfree(p);
  pthread_barrier_wait(&route_step); /* freed */
  pthread_barrier_wait(&route_step); /* the owner took */
  return NULL;
}

static void route_first_exits(size_t size) {
  df_begin(size);
  void *p = xmalloc(size);
  note_addr(p);
  df_run_thread(route_free_and_exit, p);
  pthread_barrier_init(&route_step, NULL, 2);
  pthread_t t;
  if (pthread_create(&t, NULL, route_free_and_wait, p) != 0)
    child_fail("pthread_create");
  pthread_barrier_wait(&route_step);
  df_take(NULL); /* p comes home once and is handed out again */
  pthread_barrier_wait(&route_step);
  pthread_join(t, NULL);
  route_take_all();
}

/* The owner and another thread free p once each, in either order, while
 * ROUTE_CROWD threads trade 48 B blocks (more than 4 threads a CPU: the
 * crowded program's rules, shared pages included). */
enum { ROUTE_CROWD = 40 };
static atomic_int route_crowd_stop;
/* Set while the blocks are taken: the crowd stays (its threads hold their
 * heaps, which is what makes the program crowded) but waits, so the
 * takers finish within the case's alarm on a loaded machine. */
static atomic_int route_crowd_waits;

static void *route_trade(void *arg) {
  (void)arg;
  enum { KEEP = 64 };
  void *mine[KEEP] = {0};
  static void *_Atomic swap[KEEP];
  for (unsigned i = 0; !atomic_load(&route_crowd_stop); i++) {
    if (atomic_load(&route_crowd_waits)) {
      usleep(10 * 1000);
      continue;
    }
    unsigned k = i % KEEP;
    void *q = xmalloc(48);
    if (q == NULL) child_fail("malloc(48) failed");
    xfree(atomic_exchange(&swap[k], q)); /* another thread's block */
    xfree(mine[k]);
    mine[k] = xmalloc(48);
    if (k == KEEP - 1) usleep(1000); /* a crowd, not a CPU hog */
  }
  for (unsigned k = 0; k < KEEP; k++)
    xfree(mine[k]);
  return NULL;
}

static void *route_free_once(void *p) {
  xfree(p);
  return NULL;
}

static void route_owner_and_other(size_t size, bool owner_first, bool crowded) {
  df_begin(size);
  pthread_t crowd[ROUTE_CROWD];
  int n = crowded ? ROUTE_CROWD : 0;
  /* 45 threads beside a busy machine: 0.4 s alone, more than 5 s once in
   * about 50 runs beside two busy loops. The alarm is for a hang only. */
  if (crowded) alarm(120);
  atomic_store(&route_crowd_stop, 0);
  for (int i = 0; i < n; i++)
    if (pthread_create(&crowd[i], NULL, route_trade, NULL) != 0)
      child_fail("pthread_create");
  if (crowded) usleep(100 * 1000); /* purge rounds see the crowd */
  xfree(xmalloc(size));            /* the owner has a bin of the class */
  void *p = xmalloc(size);
  note_addr(p);
  if (owner_first) xfree(p);
  df_run_thread(route_free_once, p);
  if (!owner_first) xfree(p);
  atomic_store(&route_crowd_waits, 1);
  route_take_all();
  atomic_store(&route_crowd_stop, 1);
  for (int i = 0; i < n; i++)
    pthread_join(crowd[i], NULL);
}

#define ROUTE_CASES(size)                                                      \
  static void case_route_fresh_stays_##size(void) {                            \
    route_fresh_twice(size, true);                                             \
  }                                                                            \
  static void case_route_fresh_exits_##size(void) {                            \
    route_fresh_twice(size, false);                                            \
  }                                                                            \
  static void case_route_first_exits_##size(void) { route_first_exits(size); } \
  static void case_route_owner_first_##size(void) {                            \
    route_owner_and_other(size, true, false);                                  \
  }                                                                            \
  static void case_route_other_first_##size(void) {                            \
    route_owner_and_other(size, false, false);                                 \
  }                                                                            \
  static void case_route_crowded_owner_first_##size(void) {                    \
    route_owner_and_other(size, true, true);                                   \
  }                                                                            \
  static void case_route_crowded_other_first_##size(void) {                    \
    route_owner_and_other(size, false, true);                                  \
  }
ROUTE_CASES(64)
ROUTE_CASES(1024)
ROUTE_CASES(16384)
ROUTE_CASES(49152)

/* --- double frees after the purge -------------------------------------------
 * A thread allocates N blocks of the size and frees all but every
 * `keep`th, so its pages stay in use with runs of free blocks between
 * live ones (N: 4,000 blocks of up to 64 B, 1,000 of 1 KiB, 64 of
 * 16 KiB), and exits. Their free memory then goes back to the kernel
 * (malloc_trim, or the purge thread once the exited thread's pooled heap
 * has idled): a block freed midway between two kept ones reads zeros, its
 * free mark gone (release: checked, and waited for). It is then freed
 * again, by a thread that never allocated (it takes the pooled heap and
 * frees as the block's owner) or by main (a heap of its own: the block
 * goes home through its stash, or onto main's bin from a shared page). In
 * the `owner` cases main is the thread that allocated and freed, and stays:
 * its own second free. Main and four threads then take 2 x N
 * blocks each and keep them: release reports the second free once and
 * hands the block to no two holders; secure and debug, whose purge keeps
 * the mark, stop at the second free. Before the page's bit was asked on
 * pages whose free memory went back, release handed the block out twice
 * without a word. */
static size_t purged_blocks(size_t size) {
  return size <= 64 ? 4000 : size <= 1024 ? 1000 : 64;
}

static void **purged_all;
static void *purged_victim;
static int purged_keep;

static void *purged_owner(void *arg) {
  (void)arg;
  size_t n = purged_blocks(df_size);
  for (size_t i = 0; i < n; i++)
    if ((purged_all[i] = xmalloc(df_size)) == NULL)
      child_fail("malloc(%zu) failed", df_size);
  for (size_t i = 0; i < n; i++)
    if (i % (size_t)purged_keep != 0) xfree(purged_all[i]);
  return NULL;
}

/* The victim's second word, read after it was freed (ours to read: the
 * arena stays mapped). */
static uintptr_t purged_mark_word(void) {
  return ((volatile uintptr_t *)purged_victim)[1];
}

/* The purge thread gives the pooled heap's free memory back once it has
 * idled: release waits until the victim's mark reads zero (at most 20 s,
 * for a loaded machine; about 0.3 s alone). */
static void purged_wait_idle(void) {
  for (int ms = 0; variant == V_RELEASE && purged_mark_word() != 0; ms += 5) {
    if (ms >= 20000) child_fail("the idle purge left %p's mark", purged_victim);
    usleep(5000);
  }
}

static void *purged_free_once(void *p) {
  xfree(p);
  return NULL;
}

/* Takers of 2 x N blocks each: route_take's count, by the case's N. */
static void *purged_take(void *arg) {
  (void)arg;
  size_t n = purged_blocks(df_size);
  for (size_t i = 0; i < 2 * n; i++) {
    unsigned char *p = xmalloc(df_size);
    if (p == NULL) child_fail("malloc(%zu) failed", df_size);
    p[0] = 0x3C;
    df_taken[__atomic_fetch_add(&df_count, 1, __ATOMIC_RELAXED)] = p;
  }
  return NULL;
}

/* Who frees the victim the second time. */
typedef enum { PURGED_ADOPTER, PURGED_MAIN, PURGED_OWNER } purged_by_t;

static void purged_case(size_t size, int keep, bool idle, purged_by_t by) {
  df_begin(size);
  purged_keep = keep;
  size_t n = purged_blocks(size);
  purged_all = calloc(n, sizeof *purged_all);
  if (purged_all == NULL) child_fail("calloc failed");
  if (by == PURGED_OWNER)
    purged_owner(NULL);
  else
    df_run_thread(purged_owner, NULL);
  purged_victim = purged_all[n / 2 / (size_t)keep * (size_t)keep + keep / 2];
  note_addr(purged_victim);
  if (idle)
    purged_wait_idle();
  else
    malloc_trim(0);
  if (variant == V_RELEASE && purged_mark_word() != 0)
    child_fail("%p still carries its mark after the purge", purged_victim);
  if (by == PURGED_ADOPTER)
    df_run_thread(purged_free_once, purged_victim);
  else
    xfree(purged_victim);
  pthread_t t[ROUTE_TAKERS];
  for (int i = 0; i < ROUTE_TAKERS; i++)
    if (pthread_create(&t[i], NULL, purged_take, NULL) != 0)
      child_fail("pthread_create");
  purged_take(NULL);
  for (int i = 0; i < ROUTE_TAKERS; i++)
    pthread_join(t[i], NULL);
  df_none_twice();
}

#define PURGED_TRIM_CASE(size, keep)                                           \
  static void case_purged_trim_##size##_##keep(void) {                         \
    purged_case(size, keep, false, PURGED_ADOPTER);                            \
  }
#define PURGED_CASES(size, keep)                                               \
  PURGED_TRIM_CASE(size, keep)                                                 \
  static void case_purged_idle_##size##_##keep(void) {                         \
    purged_case(size, keep, true, PURGED_ADOPTER);                             \
  }                                                                            \
  static void case_purged_main_##size##_##keep(void) {                         \
    purged_case(size, keep, false, PURGED_MAIN);                               \
  }                                                                            \
  static void case_purged_owner_##size##_##keep(void) {                        \
    purged_case(size, keep, false, PURGED_OWNER);                              \
  }
PURGED_CASES(16, 1024)
PURGED_TRIM_CASE(16, 2048)
PURGED_CASES(64, 256)
PURGED_TRIM_CASE(64, 128)
PURGED_CASES(1024, 64)
PURGED_TRIM_CASE(1024, 16)
PURGED_CASES(16384, 2)
PURGED_TRIM_CASE(16384, 4)

/* --- invalid frees ---------------------------------------------------------
 */
static void case_inv_one(void) { invalid_free_of((void *)1); }

static void case_inv_stack(void) {
  unsigned char local[64];
  memset(local, 0x77, sizeof local);
  invalid_free_of(local + 16);
  fill_check(local, sizeof local, 0x77, "stack bytes");
}

static void interior_free(size_t offset) {
  unsigned char *p = xmalloc(16384);
  memset(p, 0x5A, 16384);
  invalid_free_of(p + offset);
  fill_check(p, 16384, 0x5A, "block freed through an interior pointer");
  xfree(p);
}

static void case_inv_interior_1(void) { interior_free(1); }
static void case_inv_interior_8(void) { interior_free(8); }
static void case_inv_interior_4096(void) { interior_free(4096); }

/* Blocks from memalign(64, 100): 160-byte blocks, handed out at an offset
 * inside when the block start is not 64-aligned. Returns one with an
 * offset (usable size below the block size), the others freed. (Debug's
 * usable size is the size asked for: its block and offset are unknown.) */
static unsigned char *aligned_with_offset(size_t *offset) {
  enum { TRIES = 32 };
  unsigned char *keep = NULL, *q[TRIES];
  for (int i = 0; i < TRIES; i++) {
    q[i] = memalign(64, 100);
    if (q[i] == NULL) child_fail("memalign(64, 100) failed");
    size_t usable = malloc_usable_size(q[i]);
    if (keep == NULL && usable < 160) {
      keep = q[i];
      *offset = 160 - usable;
    }
  }
  for (int i = 0; i < TRIES; i++)
    if (q[i] != keep) xfree(q[i]);
  if (keep == NULL) child_fail("no memalign block handed out at an offset");
  memset(keep, 0x6B, 100);
  return keep;
}

/* The aligned block q must be intact and still allocated: none of 300
 * fresh blocks of its class lands on it. */
static void aligned_intact(unsigned char *q) {
  fill_check(q, 100, 0x6B, "aligned block after the misuse");
  unsigned char *fresh[300];
  for (int i = 0; i < 300; i++) {
    fresh[i] = xmalloc(148);
    if (fresh[i] != NULL && fresh[i] + 148 > q && fresh[i] < q + 100)
      child_fail("malloc gave %p, inside the live aligned block %p",
                 (void *)fresh[i], (void *)q);
  }
  for (int i = 0; i < 300; i++)
    xfree(fresh[i]);
  xfree(q);
}

static void aligned_misuse(char how, ptrdiff_t delta) {
  size_t offset;
  unsigned char *q = aligned_with_offset(&offset);
  unsigned char *p = delta == 0 ? q - offset : q + delta;
  note_addr(p);
  if (how == 'f') xfree(p);
  if (how == 'r' && xrealloc(p, 120) != NULL)
    child_fail("realloc of an interior pointer returned a block");
  if (how == 'u' && malloc_usable_size(p) != 0)
    child_fail("malloc_usable_size of an interior pointer is not 0");
  aligned_intact(q);
}

static void case_aligned_free_8(void) { aligned_misuse('f', 8); }
static void case_aligned_free_1(void) { aligned_misuse('f', 1); }
static void case_aligned_free_start(void) { aligned_misuse('f', 0); }
static void case_aligned_realloc_8(void) { aligned_misuse('r', 8); }
static void case_aligned_usable_1(void) { aligned_misuse('u', 1); }

/* The aligned pointer itself frees, reallocs and reports its size. */
static void case_aligned_ok(void) {
  for (int round = 0; round < 50; round++) {
    size_t offset;
    unsigned char *q = aligned_with_offset(&offset);
    size_t usable = variant == V_DEBUG ? 100 : 160 - offset; /* canary */
    if (malloc_usable_size(q) != usable)
      child_fail("usable size of %p changed", (void *)q);
    unsigned char *r = xrealloc(q, 110); /* fits: stays (debug copies) */
    if (r == NULL || (r != q && variant != V_DEBUG))
      child_fail("realloc(%p, 110) gave %p", (void *)q, (void *)r);
    xfree(r);
    void *again = xmalloc(148); /* may be the same block, now plain */
    xfree(again);
  }
}

static void case_inv_mmap(void) {
  unsigned char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) child_fail("mmap");
  memset(m, 0x3C, 4096);
  invalid_free_of(m + 16);
  fill_check(m, 4096, 0x3C, "mmap'd page");
  munmap(m, 4096);
}

/* --- write after free ------------------------------------------------------
 */
static void case_write_after_free(void) {
  unsigned char *p = xmalloc(64);
  note_addr(p);
  xfree(p);
  memset(p, 0x41, 16);
  for (int i = 0; i < 8; i++)
    (void)xmalloc(64);
}

/* --- steering by a write after free ----------------------------------------
 * A use after free writes the attacker's address into the first two words
 * of freed blocks. Nothing malloc hands out may be that address (or any
 * other block still live), in every variant; release reports the spoilt
 * list and goes on, the secure variants stop. */
enum { STEER_FREED = 300, STEER_TAKEN = 900 };
static _Alignas(64) unsigned char steer_target[8192];
static void *steer_taken[STEER_TAKEN];

static void poison(void **blocks, int n, uintptr_t aim) {
  for (int i = 0; i < n; i++) {
    ((volatile uintptr_t *)blocks[i])[0] = aim;
    ((volatile uintptr_t *)blocks[i])[1] = aim;
  }
}

/* No block among the n taken (all of `size` bytes, all live) twice. */
static void expect_distinct(void **taken, int n, size_t size) {
  qsort(taken, (size_t)n, sizeof taken[0], by_address);
  for (int i = 1; i < n; i++)
    if (taken[i] == taken[i - 1])
      child_fail("malloc(%zu) handed out %p twice", size, taken[i]);
}

/* Take STEER_TAKEN blocks of `size`: none may be the aim, none the block
 * `keep` (live), and no two the same. */
static void take_after_poison(size_t size, const void *aim, const void *keep) {
  for (int i = 0; i < STEER_TAKEN; i++) {
    unsigned char *p = xmalloc(size);
    if (p == NULL) child_fail("malloc(%zu) failed after the poisoning", size);
    if (p == aim || p == keep)
      child_fail("malloc(%zu) handed out %p, the attacker's aim", size,
                 (void *)p);
    if (p >= steer_target && p < steer_target + sizeof steer_target)
      child_fail("malloc(%zu) handed out %p, inside the attacker's buffer",
                 size, (void *)p);
    memset(p, 0x5A, size);
    steer_taken[i] = p;
  }
  expect_distinct(steer_taken, STEER_TAKEN, size);
}

static void steer_page_list(size_t size) {
  live_fill();
  void *blocks[STEER_FREED];
  for (int i = 0; i < STEER_FREED; i++)
    if ((blocks[i] = xmalloc(size)) == NULL) child_fail("malloc(%zu)", size);
  for (int i = 0; i < STEER_FREED; i++)
    xfree(blocks[i]);
  note_addr(blocks[STEER_FREED - 1]); /* the first a secure malloc checks */
  void *aim = steer_target + 64;
  poison(blocks, STEER_FREED, (uintptr_t)aim);
  take_after_poison(size, aim, NULL);
  live_verify();
}

static void case_steer_64(void) { steer_page_list(64); }
static void case_steer_1024(void) { steer_page_list(1024); }

static int freed_in_thread = STEER_FREED; /* how many blocks the thread frees */

static void *free_all_in_thread(void *blocks) {
  for (int i = 0; i < freed_in_thread; i++)
    xfree(((void **)blocks)[i]);
  return NULL;
}

/* Blocks freed by another thread travel home through this thread's inbox,
 * linked through their first words; the aim is a block still live. */
static void case_steer_cross_thread(void) {
  enum { SIZE = 8192 };
  static void *blocks[STEER_FREED];
  unsigned char *keep = xmalloc(SIZE);
  if (keep == NULL) child_fail("malloc(%d)", SIZE);
  memset(keep, 0xC3, SIZE);
  for (int i = 0; i < STEER_FREED; i++)
    if ((blocks[i] = xmalloc(SIZE)) == NULL) child_fail("malloc(%d)", SIZE);
  pthread_t t;
  if (pthread_create(&t, NULL, free_all_in_thread, blocks) != 0)
    child_fail("pthread_create");
  pthread_join(t, NULL);
  note_addr(blocks[STEER_FREED - 1]);
  poison(blocks, STEER_FREED, (uintptr_t)keep);
  take_after_poison(SIZE, keep, keep);
  fill_check(keep, SIZE, 0xC3, "the live block the attacker aimed at");
  xfree(keep);
}

/* --- one flipped bit of a freed block's link ------------------------------
 * A use after free that flips one bit of freed blocks' first words (their
 * encoded links) must not steer malloc either. With a link XORed with a
 * key, the decoded link moved by that bit, onto another block of the same
 * page: release handed one address out thousands of times, or a block
 * still live. Every block taken here is written; none may be taken twice
 * and the live blocks must keep their bytes. */
enum { FLIP_FREED = 64, FLIP_TAKEN = 4000 };
static void *flip_taken[FLIP_TAKEN];

static void flip_after_free(size_t size, uintptr_t bit, bool other_thread) {
  static void *blocks[FLIP_FREED];
  live_fill();
  for (int i = 0; i < FLIP_FREED; i++)
    if ((blocks[i] = xmalloc(size)) == NULL) child_fail("malloc(%zu)", size);
  freed_in_thread = FLIP_FREED;
  pthread_t t;
  if (!other_thread)
    free_all_in_thread(blocks);
  else if (pthread_create(&t, NULL, free_all_in_thread, blocks) != 0)
    child_fail("pthread_create");
  else
    pthread_join(t, NULL);
  note_addr(blocks[FLIP_FREED - 1]);
  for (int i = 0; i < FLIP_FREED; i++)
    ((volatile uintptr_t *)blocks[i])[0] ^= bit;
  for (int i = 0; i < FLIP_TAKEN; i++) {
    if ((flip_taken[i] = xmalloc(size)) == NULL)
      child_fail("malloc(%zu) failed after the flips", size);
    memset(flip_taken[i], 0x5A, size);
  }
  expect_distinct(flip_taken, FLIP_TAKEN, size);
  live_verify();
}

static void case_flip_64(void) { flip_after_free(64, 0x40, false); }
static void case_flip_32(void) { flip_after_free(32, 0x1000, false); }
static void case_flip_cross_64(void) { flip_after_free(64, 0x40, true); }
static void case_flip_cross_1024(void) { flip_after_free(1024, 0x400, true); }

/* --- debug: canaries and fill bytes ----------------------------------------
 */
static void case_overflow_1(void) {
  unsigned char *p = xmalloc(100);
  note_addr(p);
  p[100] = 'x';
  xfree(p);
}

static void case_overflow_32(void) {
  unsigned char *p = xmalloc(100);
  note_addr(p);
  memset(p + 100, 'x', 32);
  xfree(p);
}

static void case_overflow_large(void) {
  unsigned char *p = xmalloc((size_t)1 << 20);
  note_addr(p);
  p[(size_t)1 << 20] = 1;
  xfree(p);
}

static void case_fill_bytes(void) {
  unsigned char *p = xmalloc(100);
  fill_check(p, 100, 0xA5, "fresh malloc(100)");
  memset(p, 0, 100);
  xfree(p);
  /* The first 16 bytes hold the free mark; the rest read the freed fill. */
  fill_check(p + 16, 84, 0xDF, "freed block");
}

/* --- sized delete ----------------------------------------------------------
 */
static void case_sized_delete(void) {
  if (_ZdlPvm == NULL) child_fail("_ZdlPvm not found");
  void *p = xmalloc(200);
  note_addr(p);
  _ZdlPvm(p, 16);
}

static void case_free_sized(void) {
  if (free_sized == NULL) child_fail("free_sized not found");
  void *p = xmalloc(200);
  note_addr(p);
  free_sized(p, 16);
}

/* The right size is no misuse, in any variant. */
static void case_sized_ok(void) {
  if (_ZdlPvm == NULL || free_sized == NULL)
    child_fail("_ZdlPvm or free_sized not found");
  _ZdlPvm(xmalloc(200), 200);
  free_sized(xmalloc(200), 200);
  _ZdlPvm(xmalloc((size_t)1 << 20), (size_t)1 << 20);
}

/* free_sized with the size asked of each aligned allocation function
 * (pvalloc's too, which rounds it up to pages): every variant accepts it. */
static void case_sized_aligned(void) {
  static const size_t sizes[] = {1, 100, 5000, 300000};
  if (free_sized == NULL) child_fail("free_sized not found");
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    void *p = NULL;
    free_sized(memalign(64, n), n);
    free_sized(memalign(4096, n), n);
    free_sized(valloc(n), n);
    free_sized(pvalloc(n), n);
    free_sized(aligned_alloc(256, n), n);
    if (posix_memalign(&p, 128, n) != 0) child_fail("posix_memalign(%zu)", n);
    free_sized(p, n);
  }
}

/* --- secure: guard pages, random order, zeroing ----------------------------
 */
/* The guard must be a PROT_NONE page of the process, not just a hole. */
static void expect_guard_page(const volatile unsigned char *p) {
  uintptr_t a = (uintptr_t)p;
  FILE *maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) child_fail("cannot read /proc/self/maps");
  char line[512];
  bool found = false;
  while (fgets(line, sizeof line, maps) != NULL) {
    unsigned long from, to;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &from, &to, perms) != 3) continue;
    if (a < from || a >= to) continue;
    if (strncmp(perms, "---", 3) != 0)
      child_fail("%p lies in a mapping with permissions %s", (void *)a, perms);
    found = true;
  }
  fclose(maps);
  if (!found) child_fail("%p lies in no mapping: not a guard page", (void *)a);
}

static uintptr_t segment_of_small_block(void) {
  void *p = xmalloc(48);
  return (uintptr_t)p & ~(SEGMENT_SIZE - 1);
}

static void case_guard_head(void) {
  uintptr_t base = segment_of_small_block();
  /* after the header: descriptors and the pages' counts and bitmaps */
  volatile unsigned char *guard = (unsigned char *)(base + (44 << 10));
  note_addr(guard);
  expect_guard_page(guard);
  *guard = 1;
}

static void case_guard_tail(void) {
  uintptr_t base = segment_of_small_block();
  volatile unsigned char *guard =
      (unsigned char *)(base + SEGMENT_SIZE - 4096 + 100);
  note_addr(guard);
  expect_guard_page(guard);
  *guard = 1;
}

/* A large block ends at the guard page of its mapping. */
static void case_guard_large(void) {
  unsigned char *p = xmalloc((size_t)1 << 20);
  size_t usable = malloc_usable_size(p);
  if (usable < (size_t)1 << 20) child_fail("usable size %zu", usable);
  memset(p, 1, usable);
  volatile unsigned char *guard = p + usable;
  note_addr(guard);
  expect_guard_page(guard);
  *guard = 1;
}

static void case_random_order(void) {
  enum { N = 256 };
  uintptr_t a[N];
  for (int i = 0; i < N; i++)
    a[i] = (uintptr_t)xmalloc(48);
  int adjacent = 0;
  for (int i = 1; i < N; i++) {
    uintptr_t d = a[i] > a[i - 1] ? a[i] - a[i - 1] : a[i - 1] - a[i];
    adjacent += d == 48;
  }
  child_say("note: adjacent %d of %d", adjacent, N - 1);
}

static void case_zero_on_free(void) {
  if (getenv("HZ_ZERO_ON_FREE") == NULL) child_fail("HZ_ZERO_ON_FREE not set");
  unsigned char *p = xmalloc(256);
  memset(p, 0xAB, 256);
  xfree(p);
  fill_check(p + 16, 240, 0, "block freed with HZ_ZERO_ON_FREE=1");
}

/* A signal handler that allocates, interrupting malloc and free: once it
 * lands inside a slow path and takes one itself, the secure variants stop
 * with one line (before, they crashed or hung). The handler's 40 blocks of
 * one class overflow its bin, so each of its calls takes slow paths; the
 * loop takes them all the time. The child's alarm ends a run that never
 * meets one. */
static void allocating_handler(int sig) {
  (void)sig;
  void *p[40];
  for (int i = 0; i < 40; i++)
    p[i] = xmalloc(48);
  for (int i = 0; i < 40; i++)
    xfree(p[i]);
}

static void case_signal_reentry(void) {
  static void *blocks[4096];
  signal(SIGPROF, allocating_handler);
  struct itimerval every = {{0, 100}, {0, 100}};
  setitimer(ITIMER_PROF, &every, NULL);
  for (;;) {
    for (int i = 0; i < 4096; i++)
      blocks[i] = xmalloc(16 + (size_t)(i * 7) % 200);
    for (int i = 0; i < 4096; i++)
      xfree(blocks[i]);
  }
}

/* A signal handler that allocates, interrupting a new thread's first
 * allocation or its exit, which take the heap pool's lock: the secure
 * variants stop with one line (before, the thread waited for itself on
 * the lock forever; release serves it: tests/signal_test.c). The library
 * calls this hook with each of its locks just taken (the executable
 * exports it, tests/CMakeLists.txt), and a thread that armed it raises the
 * signal at the pool lock: the handler lands inside the locked region
 * every time. Sending signals until one landed there by chance took 1 to
 * 14 s alone and failed 5 runs of 5 after 120 s beside two busy loops. */
static _Thread_local bool raise_in_pool;

void hz_test_lock_taken(unsigned id) {
  if (!raise_in_pool || id != HZ_LOCK_ID_POOL) return;
  raise_in_pool = false;
  raise(SIGUSR1); /* delivered before raise returns */
}

static void *first_allocation(void *arg) {
  (void)arg;
  raise_in_pool = true;
  xfree(xmalloc(32));
  return NULL;
}

static void *exit_after_allocation(void *arg) {
  (void)arg;
  xfree(xmalloc(32));
  raise_in_pool = true; /* the pool lock's next taker: its exit */
  return NULL;
}

/* The thread runs `body`; the library must have stopped the process
 * before it is joined. */
static void signal_in_pool(void *(*body)(void *)) {
  signal(SIGUSR1, allocating_handler);
  pthread_t t;
  if (pthread_create(&t, NULL, body, NULL) != 0) child_fail("pthread_create");
  pthread_join(t, NULL);
  child_fail("no signal landed with the pool lock held: is "
             "hz_test_lock_taken exported by the test and called?");
}

static void case_signal_first_allocation(void) {
  signal_in_pool(first_allocation);
}

static void case_signal_thread_exit(void) {
  signal_in_pool(exit_after_allocation);
}

/* A signal handler that allocates, landing in the mmap of a new thread's
 * heap. The mapping runs with no lock held: the handler's malloc takes a
 * heap for the thread, which goes on with that one, the heap it mapped
 * going to the pool; no line, in every variant. With the pool lock held
 * across the mmap, release waited for itself (and every thread starting
 * after it for the lock: a timer signal's handler that allocated while
 * threads started hung 4 runs in 10) and the secure variants stopped. This
 * program's mmap, which the library calls, raises the signal in the armed
 * thread's first mapping: its heap's, the pool being empty (no thread of
 * the child has exited). Afterwards no more heaps are live than before: a
 * heap bound over the handler's would be left live for ever. */
static _Thread_local bool raise_in_map;
static atomic_int raised_in_map;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  if (raise_in_map) {
    int saved = errno;
    raise_in_map = false;
    atomic_fetch_add(&raised_in_map, 1);
    raise(SIGUSR1);
    errno = saved;
  }
  return p;
}

/* Heaps neither pooled nor retired, from the stats report. */
static long heaps_live(void) {
  int fd = memfd_create("stats", 0), saved = dup(2);
  if (fd < 0 || saved < 0)
    child_fail("memfd_create or dup: %s", strerror(errno));
  dup2(fd, 2);
  malloc_stats();
  dup2(saved, 2);
  close(saved);
  char text[16384];
  ssize_t n = pread(fd, text, sizeof text - 1, 0);
  close(fd);
  text[n > 0 ? n : 0] = 0;
  const char *line = strstr(text, "\n  heaps ");
  size_t total, pooled, retired;
  if (line == NULL || sscanf(line + 9, "%zu (%zu pooled, %zu retired)", &total,
                             &pooled, &retired) != 3)
    child_fail("no heaps line in the stats report");
  return (long)(total - pooled - retired);
}

static void *mapping_allocation(void *arg) {
  (void)arg;
  raise_in_map = true;
  unsigned char *p = xmalloc(32);
  if (p == NULL) child_fail("malloc failed after the handler's");
  memset(p, 0x5a, 32);
  fill_check(p, 32, 0x5a, "the thread's block");
  xfree(p);
  return NULL;
}

static void case_signal_heap_mapping(void) {
  signal(SIGUSR1, allocating_handler);
  long before = heaps_live();
  pthread_t t;
  if (pthread_create(&t, NULL, mapping_allocation, NULL) != 0)
    child_fail("pthread_create");
  pthread_join(t, NULL);
  if (atomic_load(&raised_in_map) != 1)
    child_fail("the thread's first allocation mapped nothing: no signal");
  long after = heaps_live();
  if (after != before)
    child_fail("%ld heaps live after the thread, %ld before", after, before);
}

/* ---------------------------------------------------------------------------
 * The cases and what each variant must do
 * ------------------------------------------------------------------------- */
typedef enum {
  OUT_ABORT,         /* SIGABRT after one matching line */
  OUT_SEGV,          /* SIGSEGV, no line */
  OUT_REPORTED,      /* exit 0 after one matching line */
  OUT_REPORTED_EACH, /* exit 0 after at least one line, all matching */
  OUT_CLEAN          /* exit 0, no line */
} outcome_t;

typedef struct case_s {
  const char *name;
  void (*run)(void);
  unsigned variants;
  outcome_t outcome;         /* secure and debug */
  outcome_t release_outcome; /* release, where it runs */
  /* The library's line starts with one of these; %s is the noted
   * address. */
  const char *message;
  const char *alternative;
  const char *env; /* NAME=value ...: the child re-executes with them set */
  void (*after)(const struct case_s *, const char *notes);
} case_t;

#define E           "hakozuna: error: "
#define DOUBLE_FREE E "double free of %s (size class "
#define NOT_OURS    E "invalid free of %s (not allocated by hakozuna)"
#define INTERIOR                                                               \
  E "invalid free (not at the start of a block) of %s (size class "
#define REENTERED E "re-entered slow path of "
#define WRITE_AFTER_FREE E "write after free of %s (size class "
#define CORRUPT_LIST     E "corrupted free list (a freed block was overwritten) of "
#define SIZED            E "sized delete mismatch (freed as 16 bytes) of %s (size class "
#define INTERIOR_REALLOC                                                       \
  E "invalid realloc (not at the start of a block) of %s (size class "
#define INTERIOR_USABLE                                                        \
  E "invalid malloc_usable_size (not at the start of a block) of %s (size "    \
    "class "

static void random_order_after(const case_t *c, const char *notes);

/* A spoilt free list, every variant: secure and debug stop at the first
 * sign, release reports each list it drops and goes on. The blocks travel
 * home as lists only from threads' own pages (no class shares pages). */
#define STEERED(name, run)                                                     \
  {                                                                            \
    name, run, SEC | DBG | REL, OUT_ABORT, OUT_REPORTED_EACH,                  \
        WRITE_AFTER_FREE, CORRUPT_LIST, "HZ_SHARED_PAGES=0", NULL              \
  }

/* Blocks freed by their owner wait on their page, whose free blocks are a
 * bitmap out of the blocks: what a use after free writes there steers
 * nothing and spoils no list, so release reports nothing (the case still
 * fails if malloc hands out the aim, a live block or one block twice).
 * Writing the second word spoils the secure variants' free mark. */
#define UNLISTED_STEER(name, run)                                              \
  {                                                                            \
    name, run, SEC | DBG | REL, OUT_ABORT, OUT_CLEAN, WRITE_AFTER_FREE, NULL,  \
        NULL, NULL                                                             \
  }
#define UNLISTED_FLIP(name, run)                                               \
  { name, run, SEC | DBG | REL, OUT_CLEAN, OUT_CLEAN, NULL, NULL, NULL, NULL }

/* A double free across threads: secure and debug stop at the second free,
 * release reports it once and hands the block to no two holders. */
#define DF_CASE(name, run, env)                                                \
  {                                                                            \
    name, run, SEC | DBG | REL, OUT_ABORT, OUT_REPORTED, DOUBLE_FREE,          \
        NULL, env, NULL                                                        \
  }
/* A case run twice: on the threads' own pages and on the shared pages
 * (".shared"). */
#define DF_CASES_BOTH(name, run)                                               \
  DF_CASE(name, run, NULL), DF_CASE(name ".shared", run, "HZ_SHARED_PAGES=-1")

/* The route cases of one size: crowded ones with the caches only (the
 * crowding rules are the front end's) and the purge thread, whose rounds
 * see the crowd, without huge pages (the purge thread's MADV_COLLAPSE held
 * the process's mappings for seconds on a loaded machine: 1 run in 25 past
 * the case's alarm). */
#define ROUTE_ENTRIES(size)                                                    \
  DF_CASES_BOTH("double_free.route.fresh_stays_" #size,                        \
                case_route_fresh_stays_##size),                                \
      DF_CASES_BOTH("double_free.route.fresh_exits_" #size,                    \
                    case_route_fresh_exits_##size),                            \
      DF_CASES_BOTH("double_free.route.first_exits_" #size,                    \
                    case_route_first_exits_##size),                            \
      DF_CASES_BOTH("double_free.route.owner_first_" #size,                    \
                    case_route_owner_first_##size),                            \
      DF_CASES_BOTH("double_free.route.other_first_" #size,                    \
                    case_route_other_first_##size),                            \
      DF_CASE("double_free.route.crowded_owner_first_" #size,                  \
              case_route_crowded_owner_first_##size,                           \
              "HZ_PURGE_THREAD=1 HZ_THP=0"),                                   \
      DF_CASE("double_free.route.crowded_other_first_" #size,                  \
              case_route_crowded_other_first_##size,                           \
              "HZ_PURGE_THREAD=1 HZ_THP=0")

/* The purged cases of one size and keep ratio (see purged_case), on the
 * threads' own pages and on the shared pages (".shared"): freed again by a
 * thread that takes the owner's pooled heap, after malloc_trim and after
 * the idle purge (release only: secure and debug keep the mark through
 * the purge, so nothing tells the test when it ran; purge thread on, no
 * huge pages), by main after malloc_trim, and by the owner itself after
 * malloc_trim (its own pages); a second keep ratio of each size after
 * malloc_trim only. A page left with no block in
 * use goes back to its segment: a free there finds no page and is an
 * invalid free (the debug library's blocks of 16 B take 64 B, so at 16 B
 * keeping every 2,048th its victim's page empties). */
#define PURGED_GONE E "invalid free of %s (not an allocated block)"
#define PURGED_CASE(name, run, variants, env)                                  \
  {                                                                            \
    name, run, variants, OUT_ABORT, OUT_REPORTED, DOUBLE_FREE, PURGED_GONE,    \
        env, NULL                                                              \
  }
#define PURGED_BOTH(name, run, variants, env)                                  \
  PURGED_CASE(name, run, variants, env),                                       \
      PURGED_CASE(name ".shared", run, variants, env " HZ_SHARED_PAGES=-1")
#define PURGED_TRIM(size, keep)                                                \
  PURGED_BOTH("double_free.purged.trim_" #size "_keep_" #keep,                 \
              case_purged_trim_##size##_##keep, SEC | DBG | REL,               \
              "HZ_PURGE_THREAD=0")
#define PURGED_ENTRIES(size, keep)                                             \
  PURGED_TRIM(size, keep),                                                     \
      PURGED_BOTH("double_free.purged.main_" #size "_keep_" #keep,             \
                  case_purged_main_##size##_##keep, SEC | DBG | REL,           \
                  "HZ_PURGE_THREAD=0"),                                        \
      PURGED_BOTH("double_free.purged.idle_" #size "_keep_" #keep,             \
                  case_purged_idle_##size##_##keep, REL,                       \
                  "HZ_PURGE_THREAD=1 HZ_THP=0"),                               \
      PURGED_CASE("double_free.purged.owner_" #size "_keep_" #keep,            \
                  case_purged_owner_##size##_##keep, SEC | DBG | REL,          \
                  "HZ_PURGE_THREAD=0")

static const case_t cases[] = {
    {"double_free.immediate", case_df_immediate, SEC | DBG | REL, OUT_ABORT,
     OUT_REPORTED, DOUBLE_FREE, NULL, NULL, NULL},
    {"double_free.after_other_frees", case_df_after_others, SEC | DBG | REL,
     OUT_ABORT, OUT_REPORTED, DOUBLE_FREE, NULL, NULL, NULL},
    {"double_free.interleaved", case_df_interleaved, SEC | DBG | REL, OUT_ABORT,
     OUT_REPORTED, DOUBLE_FREE, NULL, NULL, NULL},
    {"double_free.after_reuse", case_df_after_reuse, SEC | DBG | REL, OUT_ABORT,
     OUT_REPORTED, DOUBLE_FREE, NULL, NULL, NULL},
    {"double_free.cross_thread", case_df_cross_thread, SEC | DBG | REL,
     OUT_ABORT, OUT_REPORTED, DOUBLE_FREE, NULL, NULL, NULL},
    {"double_free.retired_page", case_df_retired_page, SEC | DBG | REL,
     OUT_ABORT, OUT_REPORTED, DOUBLE_FREE, NULL, NULL, NULL},
    {"double_free.retired_page_cross_thread", case_df_retired_cross_thread,
     SEC | DBG | REL, OUT_ABORT, OUT_REPORTED, DOUBLE_FREE, NULL, NULL, NULL},
    DF_CASES_BOTH("double_free.two_threads_16", case_df_two_threads_16),
    DF_CASES_BOTH("double_free.owner_alive_16", case_df_owner_alive_16),
    DF_CASES_BOTH("double_free.owner_exited_16", case_df_owner_exited_16),
    DF_CASES_BOTH("double_free.one_thread_twice_16", case_df_one_thread_16),
    DF_CASES_BOTH("double_free.two_threads_64", case_df_two_threads_64),
    DF_CASES_BOTH("double_free.owner_alive_64", case_df_owner_alive_64),
    DF_CASES_BOTH("double_free.owner_exited_64", case_df_owner_exited_64),
    DF_CASES_BOTH("double_free.one_thread_twice_64", case_df_one_thread_64),
    DF_CASES_BOTH("double_free.two_threads_1000", case_df_two_threads_1000),
    DF_CASES_BOTH("double_free.owner_alive_1000", case_df_owner_alive_1000),
    DF_CASES_BOTH("double_free.owner_exited_1000", case_df_owner_exited_1000),
    DF_CASES_BOTH("double_free.one_thread_twice_1000", case_df_one_thread_1000),
    DF_CASES_BOTH("double_free.two_threads_5000", case_df_two_threads_5000),
    DF_CASES_BOTH("double_free.owner_alive_5000", case_df_owner_alive_5000),
    DF_CASES_BOTH("double_free.owner_exited_5000", case_df_owner_exited_5000),
    DF_CASES_BOTH("double_free.one_thread_twice_5000", case_df_one_thread_5000),
    DF_CASES_BOTH("double_free.two_threads_40000", case_df_two_threads_40000),
    DF_CASES_BOTH("double_free.owner_alive_40000", case_df_owner_alive_40000),
    DF_CASES_BOTH("double_free.owner_exited_40000", case_df_owner_exited_40000),
    DF_CASES_BOTH("double_free.one_thread_twice_40000",
                  case_df_one_thread_40000),
    ROUTE_ENTRIES(64),
    ROUTE_ENTRIES(1024),
    ROUTE_ENTRIES(16384),
    ROUTE_ENTRIES(49152),
    PURGED_ENTRIES(16, 1024),
    PURGED_TRIM(16, 2048),
    PURGED_ENTRIES(64, 256),
    PURGED_TRIM(64, 128),
    PURGED_ENTRIES(1024, 64),
    PURGED_TRIM(1024, 16),
    PURGED_ENTRIES(16384, 2),
    PURGED_TRIM(16384, 4),
    DF_CASES_BOTH("double_free.in_run_before", case_df_run_before),
    DF_CASES_BOTH("double_free.in_run_after", case_df_run_after),
    {"double_free.large", case_df_large, SEC | DBG | REL, OUT_ABORT,
     OUT_REPORTED, E "double free of %s (large block of ", NULL, NULL, NULL},
    {"invalid_free.one", case_inv_one, SEC | DBG | REL, OUT_ABORT, OUT_REPORTED,
     NOT_OURS, NULL, NULL, NULL},
    {"invalid_free.stack", case_inv_stack, SEC | DBG | REL, OUT_ABORT,
     OUT_REPORTED, NOT_OURS, NULL, NULL, NULL},
    {"invalid_free.interior_1", case_inv_interior_1, SEC | DBG | REL, OUT_ABORT,
     OUT_REPORTED, INTERIOR, NULL, NULL, NULL},
    {"invalid_free.interior_8", case_inv_interior_8, SEC | DBG | REL, OUT_ABORT,
     OUT_REPORTED, INTERIOR, NULL, NULL, NULL},
    {"invalid_free.interior_4096", case_inv_interior_4096, SEC | DBG | REL,
     OUT_ABORT, OUT_REPORTED, INTERIOR, NULL, NULL, NULL},
    {"aligned.free_interior_8", case_aligned_free_8, SEC | DBG | REL, OUT_ABORT,
     OUT_REPORTED, INTERIOR, NULL, NULL, NULL},
    {"aligned.free_interior_1", case_aligned_free_1, SEC | DBG | REL, OUT_ABORT,
     OUT_REPORTED, INTERIOR, NULL, NULL, NULL},
    {"aligned.free_block_start", case_aligned_free_start, SEC | REL, OUT_ABORT,
     OUT_REPORTED, INTERIOR, NULL, NULL, NULL},
    {"aligned.realloc_interior_8", case_aligned_realloc_8, SEC | DBG | REL,
     OUT_ABORT, OUT_REPORTED, INTERIOR_REALLOC, NULL, NULL, NULL},
    {"aligned.usable_size_interior_1", case_aligned_usable_1, SEC | DBG | REL,
     OUT_ABORT, OUT_REPORTED, INTERIOR_USABLE, NULL, NULL, NULL},
    {"aligned.right_pointer", case_aligned_ok, SEC | DBG | REL, OUT_CLEAN,
     OUT_CLEAN, NULL, NULL, NULL, NULL},
    {"invalid_free.mmap", case_inv_mmap, SEC | DBG | REL, OUT_ABORT,
     OUT_REPORTED, NOT_OURS, NULL, NULL, NULL},
    {"write_after_free", case_write_after_free, SEC | DBG, OUT_ABORT, 0,
     WRITE_AFTER_FREE, CORRUPT_LIST, NULL, NULL},
    /* A handler landing in a fast path between its read of a bin's top and
     * its store may put one block in the bin twice: the free marks then
     * stop the child first, also with one line. */
    {"signal_reentry", case_signal_reentry, SEC | DBG, OUT_ABORT, 0, REENTERED,
     E "double free of ", NULL, NULL},
    {"signal_first_allocation", case_signal_first_allocation, SEC | DBG,
     OUT_ABORT, 0, REENTERED, NULL, NULL, NULL},
    {"signal_thread_exit", case_signal_thread_exit, SEC | DBG, OUT_ABORT, 0,
     REENTERED, NULL, NULL, NULL},
    {"signal_heap_mapping", case_signal_heap_mapping, SEC | DBG | REL,
     OUT_CLEAN, OUT_CLEAN, NULL, NULL, NULL, NULL},
    UNLISTED_STEER("steer.page_list_64", case_steer_64),
    UNLISTED_STEER("steer.page_list_1024", case_steer_1024),
    STEERED("steer.cross_thread", case_steer_cross_thread),
    UNLISTED_FLIP("flip.page_list_64", case_flip_64),
    UNLISTED_FLIP("flip.page_list_32", case_flip_32),
    STEERED("flip.cross_thread_64", case_flip_cross_64),
    STEERED("flip.cross_thread_1024", case_flip_cross_1024),
    {"overflow.1_byte", case_overflow_1, DBG, OUT_ABORT, 0,
     E "heap overflow of %s (block of 100 bytes overrun by 1 bytes; size "
       "class ",
     NULL, NULL, NULL},
    {"overflow.32_bytes", case_overflow_32, DBG, OUT_ABORT, 0,
     E "heap overflow of %s (block of 100 bytes overrun by 32 bytes; size "
       "class ",
     NULL, NULL, NULL},
    {"overflow.large", case_overflow_large, DBG, OUT_ABORT, 0,
     E "heap overflow of %s (block of 1048576 bytes overrun by ", NULL, NULL,
     NULL},
    {"fill_bytes", case_fill_bytes, DBG, OUT_CLEAN, 0, NULL, NULL, NULL, NULL},
    {"sized_delete.mismatch", case_sized_delete, SEC | DBG, OUT_ABORT, 0, SIZED,
     NULL, NULL, NULL},
    {"free_sized.mismatch", case_free_sized, SEC | DBG, OUT_ABORT, 0, SIZED,
     NULL, NULL, NULL},
    {"sized_delete.aligned_functions", case_sized_aligned, SEC | DBG | REL,
     OUT_CLEAN, OUT_CLEAN, NULL, NULL, NULL, NULL},
    {"sized_delete.right_size", case_sized_ok, SEC | DBG | REL, OUT_CLEAN,
     OUT_CLEAN, NULL, NULL, NULL, NULL},
    {"guard_page.segment_header", case_guard_head, SEC, OUT_SEGV, 0, NULL, NULL,
     NULL, NULL},
    {"guard_page.segment_end", case_guard_tail, SEC, OUT_SEGV, 0, NULL, NULL,
     NULL, NULL},
    {"guard_page.large_end", case_guard_large, SEC, OUT_SEGV, 0, NULL, NULL,
     NULL, NULL},
    {"random_order", case_random_order, SEC | REL, OUT_CLEAN, OUT_CLEAN, NULL,
     NULL, NULL, random_order_after},
    {"zero_on_free", case_zero_on_free, SEC, OUT_CLEAN, 0, NULL, NULL,
     "HZ_ZERO_ON_FREE=1", NULL},
};
enum { CASE_COUNT = sizeof cases / sizeof *cases };

/* ---------------------------------------------------------------------------
 * Parent side
 * ------------------------------------------------------------------------- */
typedef struct {
  int status;
  char text[16384];
} result_t;

static const char *self_argv0;

static void run_child(const case_t *c, result_t *r) {
  int fds[2];
  if (pipe(fds) != 0) {
    perror("pipe");
    exit(2);
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(2);
  }
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    close(fds[1]);
    child_setup();
    if (c->env != NULL) {
      /* Options are read at start-up: a fresh process, same library. */
      char *env = strdup(c->env);
      for (char *pair = strtok(env, " "); pair; pair = strtok(NULL, " ")) {
        char *eq = strchr(pair, '=');
        *eq = 0;
        setenv(pair, eq + 1, 1);
      }
      char *args[] = {(char *)self_argv0, (char *)variant_name, "--case",
                      (char *)c->name, NULL};
      execv("/proc/self/exe", args);
      child_fail("execv /proc/self/exe: %s", strerror(errno));
    }
    c->run();
    _exit(0);
  }
  close(fds[1]);
  size_t len = 0;
  for (;;) {
    char sink[4096];
    char *to = len < sizeof r->text - 1 ? r->text + len : sink;
    size_t room =
        len < sizeof r->text - 1 ? sizeof r->text - 1 - len : sizeof sink;
    ssize_t n = read(fds[0], to, room);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (to != sink) len += (size_t)n;
  }
  r->text[len] = 0;
  close(fds[0]);
  while (waitpid(pid, &r->status, 0) < 0 && errno == EINTR) {
  }
}

static void describe_status(int status, char *out, size_t size) {
  if (WIFSIGNALED(status))
    snprintf(out, size, "killed by signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  else if (WIFEXITED(status))
    snprintf(out, size, "exited with code %d", WEXITSTATUS(status));
  else
    snprintf(out, size, "status 0x%x", status);
}

/* The value after "note: <key> " in the child's output, or "". */
static void note_value(const char *text, const char *key, char *out,
                       size_t size) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "note: %s ", key);
  out[0] = 0;
  for (const char *line = text; *line; line = strchr(line, '\n') + 1) {
    const char *end = strchr(line, '\n');
    if (end == NULL) break;
    size_t plen = strlen(prefix);
    if ((size_t)(end - line) > plen && strncmp(line, prefix, plen) == 0) {
      size_t n = (size_t)(end - line) - plen;
      if (n >= size) n = size - 1;
      memcpy(out, line + plen, n);
      out[n] = 0;
    }
  }
}

static bool line_matches(const char *line, size_t len, const char *format,
                         const char *addr) {
  if (format == NULL) return false;
  char want[256];
  snprintf(want, sizeof want, format, addr);
  size_t n = strlen(want);
  return len >= n && strncmp(line, want, n) == 0;
}

static int case_failures;

/* The passing cases' names, packed a few to a line. */
static char ok_line[128];

static void ok_line_flush(void) {
  if (ok_line[0] != 0) printf("ok  %s\n", ok_line);
  ok_line[0] = 0;
}

static void ok_line_add(const char *name) {
  if (strlen(ok_line) + strlen(name) + 2 > 100) ok_line_flush();
  size_t len = strlen(ok_line);
  snprintf(ok_line + len, sizeof ok_line - len, " %s", name);
}

static void evaluate(const case_t *c, const result_t *r) {
  int before = check_failures;
  outcome_t want = variant == V_RELEASE ? c->release_outcome : c->outcome;
  char status[96];
  describe_status(r->status, status, sizeof status);
  char addr[64];
  note_value(r->text, "addr", addr, sizeof addr);
  if (c->message != NULL && strstr(c->message, "%s") != NULL)
    CHECK_MSG(addr[0] != 0, "%s: the child noted no address", c->name);

  int lines = 0, matching = 0, fails = 0;
  for (const char *line = r->text; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    if (strncmp(line, "hakozuna: ", 10) == 0) {
      lines++;
      matching += line_matches(line, len, c->message, addr) ||
                  line_matches(line, len, c->alternative, addr);
    } else if (strncmp(line, "fail: ", 6) == 0) {
      fails++;
    }
    if (end == NULL) break;
    line = end + 1;
  }

  switch (want) {
  case OUT_ABORT:
    CHECK_MSG(WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGABRT,
              "%s: expected SIGABRT, child %s", c->name, status);
    break;
  case OUT_SEGV:
    CHECK_MSG(WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGSEGV,
              "%s: expected SIGSEGV, child %s", c->name, status);
    break;
  case OUT_REPORTED:
  case OUT_REPORTED_EACH:
  case OUT_CLEAN:
    CHECK_MSG(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0,
              "%s: expected a normal exit, child %s", c->name, status);
    break;
  }
  CHECK_MSG(fails == 0, "%s: the child found a problem:\n%s", c->name, r->text);
  if (want == OUT_ABORT || want == OUT_REPORTED) {
    CHECK_MSG(lines == 1, "%s: expected one hakozuna line, got %d", c->name,
              lines);
    char want_line[256];
    snprintf(want_line, sizeof want_line, c->message, addr);
    CHECK_MSG(matching == lines, "%s: expected a line starting \"%s\"%s%s",
              c->name, want_line, c->alternative != NULL ? " or " : "",
              c->alternative != NULL ? c->alternative : "");
  } else if (want == OUT_REPORTED_EACH) {
    CHECK_MSG(lines >= 1 && matching == lines,
              "%s: expected lines starting \"%s\", got %d of %d", c->name,
              c->alternative, matching, lines);
  } else {
    CHECK_MSG(lines == 0, "%s: expected no hakozuna line, got %d", c->name,
              lines);
  }
  if (c->after != NULL) c->after(c, r->text);

  bool ok = check_failures == before;
  case_failures += !ok;
  if (ok) {
    ok_line_add(c->name);
    return;
  }
  /* A failure in full: a CI log that keeps only the head of a test's
   * output still shows it, the passing cases being names on a few lines. */
  ok_line_flush();
  printf("FAIL %-32s %s\n", c->name, status);
  for (const char *line = r->text; *line;) {
    const char *end = strchr(line, '\n');
    int len = end != NULL ? (int)(end - line) : (int)strlen(line);
    printf("     | %.*s\n", len, line);
    if (end == NULL) break;
    line = end + 1;
  }
}

/* Fresh blocks in address order (release) sit next to each other; the
 * secure variants hand them out shuffled. */
static void random_order_after(const case_t *c, const char *notes) {
  char value[64];
  note_value(notes, "adjacent", value, sizeof value);
  int adjacent = -1, pairs = 0;
  if (sscanf(value, "%d of %d", &adjacent, &pairs) != 2) adjacent = -1;
  CHECK_MSG(adjacent >= 0, "%s: no count from the child", c->name);
  printf("     %s: %d of %d consecutive malloc(48) pairs are 48 bytes apart\n",
         variant_name, adjacent, pairs);
  if (variant != V_RELEASE)
    CHECK_MSG(adjacent < pairs / 2,
              "%s: %d of %d pairs adjacent: blocks not shuffled", c->name,
              adjacent, pairs);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s secure|debug|release\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0); /* in step with the checks' stderr */
  self_argv0 = argv[0];
  variant_name = argv[1];
  if (strcmp(variant_name, "release") == 0)
    variant = V_RELEASE;
  else if (strcmp(variant_name, "secure") == 0)
    variant = V_SECURE;
  else if (strcmp(variant_name, "debug") == 0)
    variant = V_DEBUG;
  else {
    fprintf(stderr, "unknown variant %s\n", variant_name);
    return 2;
  }
  /* A re-executed child: run the one case. */
  if (argc == 4 && strcmp(argv[2], "--case") == 0) {
    child_setup();
    for (int i = 0; i < CASE_COUNT; i++)
      if (strcmp(cases[i].name, argv[3]) == 0) {
        cases[i].run();
        return 0;
      }
    child_fail("no case %s", argv[3]);
  }

  int run = 0;
  for (int i = 0; i < CASE_COUNT; i++) {
    if (!(cases[i].variants & (1u << variant))) continue;
    result_t r;
    run_child(&cases[i], &r);
    evaluate(&cases[i], &r);
    run++;
  }
  ok_line_flush();
  printf("security.%s: %d cases, %d failed\n", variant_name, run,
         case_failures);
  char name[64];
  snprintf(name, sizeof name, "security.%s", variant_name);
  return check_report(name);
}
