/* cpu_cache and ladder: the page decides a block's route, and the class
 * decision chooses where refills come from (route.h).
 *   - choice: where glibc registered rseq (__rseq_size > 0) and
 *     HZ_CPU_CACHE is not 0 the report names the per-CPU caches, else the
 *     depots alone (CTest runs this test again with
 *     GLIBC_TUNABLES=glibc.pthread.rseq=0: the fallback);
 *   - decision: route.h's rule on counts: a class shares once 1 malloc in
 *     8 is of a block another thread then frees, unless those frees
 *     come in runs and the program is not crowded; it goes back once fewer
 *     than 1 in 16 are and the program is not crowded (runs do not turn it
 *     back); a class seen too little keeps what it does;
 *   - routes: a shared page's block freed by another thread goes onto that
 *     thread's bin (its next malloc of the size returns it), a block of
 *     another thread's own page goes home (never onto a bin or the ladder),
 *     whatever the class's refills do;
 *   - ladder: blocks of the shared pages that overflow one thread's bin
 *     (pinned to CPU 0) go onto the ladder, and another thread on the same
 *     CPU takes them from there; after hz_collect(true) the ladder is
 *     empty;
 *   - stopped: a thread's sections stopped inside, on a page of the
 *     test's they copy to or from: a page with no access (SIGSEGV, which
 *     the kernel delivers at the section's abort handler; the handler
 *     opens the page), and a page userfaultfd keeps empty until the main
 *     thread has moved the faulting thread to CPU 1: each restarts (the
 *     report counts it), the migrated one on CPU 1, and moves one block;
 *   - restarts: three threads pinned to one CPU trade shared blocks (every
 *     free a remote one, bins spilling to and refilling from the CPU's
 *     cache) while a fourth signals them every 50 us, so sections are
 *     interrupted now and then: no block is ever handed to two threads at
 *     once;
 *   - migrations: the same trade, unpinned and unsignalled, while a fourth
 *     thread moves each trader to another CPU every 50 us (where there are
 *     two or more), so sections are preempted and migrated: the traders
 *     ran on more than one CPU and no block is held twice (and, where no
 *     section could be stopped and migrated above, sections restarted);
 *   - unregistered: two threads that unregistered glibc's rseq area (the
 *     kernel then leaves cpu_id at -1 and mm_cid at 0 and restarts no
 *     section) trade shared blocks: none is ever held by both (they skip
 *     the caches);
 *   - lent: a thread's pages of a class that then turns shared empty, and
 *     the class heap hands its blocks out of them (lent, in the thread's
 *     segments: at least 3 in 4 of the blocks it hands the thread; the
 *     pages the bin still held blocks of were not empty); once the class
 *     heap gives them back (hz_collect), the thread's next slow path gives
 *     them back to their segments and none is out; a thread that exits
 *     with pages lent: once their blocks are freed, collections give them
 *     back through its pooled heap (no more pages in use than before); a
 *     thread's pages with blocks in use are lent too (none of those blocks
 *     is left on its own pages after its refill from the class heap), and
 *     blocks another thread freed before that, which reach its inbox
 *     after, go on to the class heap (no page out once all are freed);
 *   - one set: the class heaps of two sizes up to 16 KiB cut their pages
 *     from one set of segments (under a lock, not a thread's), that of a
 *     wide size from its own, and once the blocks are freed and collected
 *     no more pages are in use than before;
 *   - alone (argument "alone"): while more than HZ_SHARED_PAGES (4)
 *     threads a CPU hold a heap, threads that start make their first
 *     mallocs and frees without one (written blocks of the shared pages,
 *     some freed by main), and take one past ALONE_OPS; with few threads
 *     a new thread takes a heap at once;
 *   - share (argument "share", with the purge thread): more than
 *     HZ_SHARED_PAGES (4) threads a CPU that free only their own blocks
 *     share no class; once they hand blocks round a ring the rounds make
 *     classes share, the threads' mallocs get their blocks (no block held
 *     by two threads at once); once two threads that free their own
 *     blocks take over, every class turns back to the threads' pages.
 * Without an argument the test runs with HZ_PURGE_THREAD=0 (CTest), so no
 * round of the purge thread changes the classes or drains the caches under
 * the steps that set and read them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "api.h"
#include "arena.h"
#include "check.h"
#include "class_heap.h"
#include "cpu_cache.h"
#include "decision.h"
#include "hakozuna.h"
#include "route.h"
#include "sizeclass.h"

static bool per_cpu;
#define HELD ((uintptr_t)0x48454c4400000001u) /* written by a holder */

static hz_heap_summary_t summary(void) {
  hz_heap_summary_t heaps;
  hz_memory_summary_t memory;
  hz_api_summarize(&heaps, &memory);
  return heaps;
}

static void pin_to_cpu0(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
}

static void choice(void) {
  const char *env = getenv("HZ_CPU_CACHE");
  bool want = __rseq_size > 0 && !(env != NULL && env[0] == '0');
  const char *name = summary().front.name;
  per_cpu = strcmp(name, "per-CPU caches (rseq) and depots") == 0;
  CHECK_MSG(per_cpu == want, "front end \"%s\" with __rseq_size %u", name,
            __rseq_size);
  if (!want) CHECK(strcmp(name, "depots") == 0);
}

/* The classes of `sizes` share pages (route), or go back. */
static void set_route(size_t size, hz_class_route_t route) {
  CHECK(hz_decision_set(hz_sizeclass_of(size), route));
}

/* --- decision -------------------------------------------------------------
 */
static bool judged(uint64_t allocs, uint64_t handed, uint64_t remote,
                   uint64_t runs, bool now, bool crowded) {
  hz_route_seen_t seen = {
      .allocs = allocs, .handed = handed, .remote = remote, .runs = runs};
  return hz_route_shared(&seen, now, crowded);
}

static void decision(void) {
  /* too little seen: what it does */
  CHECK(!judged(8000, HZ_ROUTE_MIN_HANDED - 1, 1000, 0, false, false));
  CHECK(judged(8000, HZ_ROUTE_MIN_HANDED - 1, 0, 0, true, false));
  /* thread pages: 1 malloc in 8 crossing shares, fewer does not */
  CHECK(judged(8000, 8000, 1000, 0, false, false));
  CHECK(!judged(8000, 8000, 999, 0, false, false));
  /* bins that take back what their thread frees: 1 in 8 of the blocks
   * handed out from the pages crossing is 1 malloc in 6,000 */
  CHECK(!judged(6000000, 8000, 1000, 0, false, false));
  /* in runs: a producer and its consumers keep their pages, unless
   * crowded */
  CHECK(!judged(8000, 8000, 4000, 2000, false, false));
  CHECK(judged(8000, 8000, 4000, 1999, false, false));
  CHECK(judged(8000, 8000, 4000, 4000, false, true));
  /* shared, seen through the samples (blocks handed out from the pages,
   * whatever the mallocs): back below 1 in 16, not while crowded; samples
   * freed in runs (a fresh bin is in address order) keep it shared, or a
   * random mix of sizes would turn at every round */
  CHECK(judged(1000000, 16000, 1000, 0, true, false));
  CHECK(!judged(16000, 16000, 999, 0, true, false));
  CHECK(judged(16000, 16000, 4000, 4000, true, false));
  CHECK(judged(16000, 16000, 0, 0, true, true));
  /* crowding */
  CHECK(hz_route_crowded(9, 2, 4) && !hz_route_crowded(8, 2, 4));
  CHECK(!hz_route_crowded(1000, 2, 0));
}

/* --- routes ---------------------------------------------------------------
 */
enum { ROUTE_SIZE = 200 };
static void *route_block, *route_next;
static pthread_barrier_t step;

/* Thread 0 mallocs, thread 1 frees it and mallocs the size again. */
static void *route_thread(void *arg) {
  int role = (int)(intptr_t)arg;
  if (role == 0) route_block = hz_malloc(ROUTE_SIZE);
  if (role == 1) hz_free(hz_malloc(8)); /* a heap of its own */
  pthread_barrier_wait(&step);
  if (role == 1) {
    hz_free(route_block);
    route_next = hz_malloc(ROUTE_SIZE);
  }
  pthread_barrier_wait(&step);
  return NULL;
}

/* route_block as thread 0 mallocs it and thread 1 frees it; whether thread
 * 1's next malloc of the size returned it. */
static bool route_trip(hz_class_route_t route) {
  set_route(ROUTE_SIZE, route);
  pthread_barrier_init(&step, NULL, 2);
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    CHECK(pthread_create(&t[i], NULL, route_thread, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&step);
  bool again = route_next == route_block;
  hz_free(route_next);
  return again;
}

static void routes(void) {
  uint64_t held = summary().front.cached_blocks;
  CHECK_MSG(route_trip(HZ_CLASS_SHARED),
            "a shared page's block freed by another thread did not go onto "
            "that thread's bin");
  CHECK(hz_class_heap_holds(hz_segment_block_page(route_block)));
  hz_collect(true); /* pooled heaps' bins too: the next thread 0 adopts one */
  CHECK_MSG(!route_trip(HZ_CLASS_OWN_PAGES),
            "another thread's own block went onto the freeing thread's bin");
  CHECK(!hz_class_heap_holds(hz_segment_block_page(route_block)));
  CHECK_MSG(summary().front.cached_blocks == held,
            "a block of a thread's page went onto the ladder");
  hz_collect(true);
}

/* --- lent -----------------------------------------------------------------
 */
enum { LENT_SIZE = 3000, LENT_BLOCKS = 200 };

/* The blocks of blocks[] that lie on the shared pages, and of those how
 * many on pages cut from `set`, flagged lent. */
static void lent_count(void **blocks, const hz_segment_set_t *set,
                       int *shared, int *lent) {
  *shared = *lent = 0;
  for (int i = 0; i < LENT_BLOCKS; i++) {
    hz_page_t *page = hz_segment_block_page(blocks[i]);
    if (!hz_class_heap_holds(page)) continue;
    (*shared)++;
    *lent += page->lent && hz_segment_set_of_page(page) == set;
  }
}

/* The calling thread's blocks[] of LENT_SIZE come from its own pages, all
 * freed, then (the class shared) from the class heap. */
static void lent_turn(void **blocks) {
  set_route(LENT_SIZE, HZ_CLASS_OWN_PAGES);
  for (int i = 0; i < LENT_BLOCKS; i++)
    blocks[i] = hz_malloc(LENT_SIZE);
  set_route(LENT_SIZE, HZ_CLASS_SHARED);
  for (int i = 0; i < LENT_BLOCKS; i++)
    hz_free(blocks[i]);
  for (int i = 0; i < LENT_BLOCKS; i++)
    blocks[i] = hz_malloc(LENT_SIZE);
}

static void *lent_thread(void *arg) {
  (void)arg;
  static void *blocks[LENT_BLOCKS];
  hz_heap_t *heap = hz_heap_current();
  lent_turn(blocks);
  heap = hz_heap_current();
  int shared, lent;
  lent_count(blocks, &heap->pages.segments, &shared, &lent);
  CHECK_MSG(shared > 0, "no block of the class came from the shared pages");
  CHECK_MSG(lent * 4 >= shared * 3,
            "%d of %d blocks of the shared pages came from pages other than "
            "the thread's emptied ones",
            shared - lent, shared);
  CHECK(atomic_load(&heap->lent) > 0);
  for (int i = 0; i < LENT_BLOCKS; i++)
    hz_free(blocks[i]);
  hz_collect(true); /* the class heap gives its pages back */
  hz_free(hz_malloc(LENT_SIZE + 4096)); /* a slow path of the thread's */
  CHECK_MSG(atomic_load(&heap->lent) == 0 &&
                atomic_load(&heap->returned) == NULL,
            "%u lent pages still out after the class heap gave them back",
            (unsigned)atomic_load(&heap->lent));
  set_route(LENT_SIZE, HZ_CLASS_OWN_PAGES);
  return NULL;
}

static void *lent_exit_thread(void *arg) {
  lent_turn(arg);
  return NULL; /* its pages lent, their blocks live */
}

/* A thread's pages of a class, blocks in use and all, are lent at its
 * first refill from the class heap after the class turned; blocks another
 * thread freed before that, still in its stash, reach the thread's inbox
 * after, and the thread sends them on to the class heap: once every block
 * is freed and collections ran, no page is out. */
enum { LIVE_FREED_EVERY = 8 }; /* 25 blocks, 75 KB: the stash holds them */
static struct {
  void *blocks[LENT_BLOCKS];
  pthread_barrier_t freed, lent;
} live;

static void *live_freer(void *arg) {
  (void)arg;
  for (int i = 0; i < LENT_BLOCKS; i += LIVE_FREED_EVERY)
    hz_free(live.blocks[i]);
  pthread_barrier_wait(&live.freed);
  pthread_barrier_wait(&live.lent);
  return NULL; /* its exit sends its stash to the blocks' owner then */
}

static void *live_owner(void *arg) {
  (void)arg;
  static void *more[LENT_BLOCKS];
  set_route(LENT_SIZE, HZ_CLASS_OWN_PAGES);
  for (int i = 0; i < LENT_BLOCKS; i++)
    live.blocks[i] = hz_malloc(LENT_SIZE);
  hz_heap_t *heap = hz_heap_current();
  pthread_t freer;
  CHECK(pthread_create(&freer, NULL, live_freer, NULL) == 0);
  pthread_barrier_wait(&live.freed);
  set_route(LENT_SIZE, HZ_CLASS_SHARED);
  for (int i = 0; i < LENT_BLOCKS; i++)
    more[i] = hz_malloc(LENT_SIZE);
  int own = 0;
  for (int i = 1; i < LENT_BLOCKS; i++)
    own += i % LIVE_FREED_EVERY != 0 &&
           !hz_class_heap_holds(hz_segment_block_page(live.blocks[i]));
  CHECK_MSG(own == 0, "%d blocks in use still on the thread's own pages "
            "after its refill from the class heap", own);
  pthread_barrier_wait(&live.lent);
  pthread_join(freer, NULL);
  for (int i = 0; i < LENT_BLOCKS; i++) {
    if (i % LIVE_FREED_EVERY != 0) hz_free(live.blocks[i]);
    hz_free(more[i]);
  }
  hz_collect(true); /* the thread's inbox on to the class heap, */
  hz_collect(true); /* which gives the pages back, */
  hz_free(hz_malloc(LENT_SIZE + 4096)); /* and a slow path takes them */
  CHECK_MSG(atomic_load(&heap->lent) == 0,
            "%u lent pages still out after every block was freed",
            (unsigned)atomic_load(&heap->lent));
  set_route(LENT_SIZE, HZ_CLASS_OWN_PAGES);
  return NULL;
}

static void lent_live(void) {
  pthread_barrier_init(&live.freed, NULL, 2);
  pthread_barrier_init(&live.lent, NULL, 2);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, live_owner, NULL) == 0);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&live.freed);
  pthread_barrier_destroy(&live.lent);
}

static size_t pages_in_use(void) {
  size_t pages, blocks, bytes, free_blocks;
  hz_segment_summarize(&pages, &blocks, &bytes, &free_blocks);
  return pages;
}

static void lent(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, lent_thread, NULL) == 0);
  pthread_join(t, NULL);
  hz_collect(true);
  size_t before = pages_in_use();
  static void *blocks[LENT_BLOCKS];
  CHECK(pthread_create(&t, NULL, lent_exit_thread, blocks) == 0);
  pthread_join(t, NULL);
  for (int i = 0; i < LENT_BLOCKS; i++)
    hz_free(blocks[i]);
  hz_collect(true); /* the class heap gives its pages back, */
  hz_collect(true); /* the exited thread's heap gives them back */
  CHECK_MSG(pages_in_use() <= before,
            "%zu pages in use after an exited thread's lent pages came "
            "back, %zu before",
            pages_in_use(), before);
  set_route(LENT_SIZE, HZ_CLASS_OWN_PAGES);
}

/* --- one set ---------------------------------------------------------------
 */
/* The class heaps of two sizes up to 16 KiB cut their pages (those not
 * lent) from one set of segments, under a lock, not a thread's; that of
 * 40,000-byte blocks (wide pages) from a set of its own, without one; once
 * their blocks are freed and collected, no more pages are in use than
 * before. */
enum { SET_BLOCKS = 100, SET_SIZES = 3 };
static const size_t set_sizes[SET_SIZES] = {1200, 7000, 40000};

static void *one_set_thread(void *arg) {
  void **blocks = arg;
  for (int i = 0; i < SET_SIZES * SET_BLOCKS; i++)
    blocks[i] = hz_malloc(set_sizes[i / SET_BLOCKS]);
  return NULL;
}

static void one_set(void) {
  hz_collect(true);
  size_t before = pages_in_use();
  for (int k = 0; k < SET_SIZES; k++)
    set_route(set_sizes[k], HZ_CLASS_SHARED);
  static void *blocks[SET_SIZES * SET_BLOCKS];
  pthread_t t;
  CHECK(pthread_create(&t, NULL, one_set_thread, blocks) == 0);
  pthread_join(t, NULL);
  const hz_segment_set_t *set = NULL, *wide = NULL;
  int seen[SET_SIZES] = {0}, elsewhere = 0;
  for (int i = 0; i < SET_SIZES * SET_BLOCKS; i++) {
    hz_page_t *page = hz_segment_block_page(blocks[i]);
    if (!hz_class_heap_holds(page) || page->lent) continue;
    int k = i / SET_BLOCKS;
    seen[k]++;
    const hz_segment_set_t **first = k < 2 ? &set : &wide;
    if (*first == NULL) *first = hz_segment_set_of_page(page);
    elsewhere += hz_segment_set_of_page(page) != *first;
  }
  CHECK_MSG(seen[0] > 0 && seen[1] > 0 && seen[2] > 0,
            "%d, %d and %d blocks of the classes on the class heaps' pages",
            seen[0], seen[1], seen[2]);
  CHECK_MSG(elsewhere == 0, "%d blocks on pages of another set", elsewhere);
  CHECK_MSG(set != NULL && set->lock != NULL,
            "the class heaps' set has no lock");
  CHECK_MSG(wide != NULL && wide != set && wide->lock == NULL,
            "the wide pages' class heap cuts from the shared set");
  for (int i = 0; i < SET_SIZES * SET_BLOCKS; i++)
    hz_free(blocks[i]);
  for (int k = 0; k < SET_SIZES; k++)
    set_route(set_sizes[k], HZ_CLASS_OWN_PAGES);
  hz_collect(true);
  hz_collect(true);
  CHECK_MSG(pages_in_use() <= before,
            "%zu pages in use after the class heaps' blocks were freed, "
            "%zu before",
            pages_in_use(), before);
}

/* --- ladder ---------------------------------------------------------------
 */
enum { LADDER_BLOCKS = 200, LADDER_SIZE = 64 };
static void *ladder_freed[LADDER_BLOCKS], *ladder_taken[LADDER_BLOCKS];

static void *ladder_freer(void *arg) {
  (void)arg;
  pin_to_cpu0();
  hz_free(hz_malloc(8));
  for (int i = 0; i < LADDER_BLOCKS; i++)
    hz_free(ladder_freed[i]);
  return NULL;
}

static void *ladder_taker(void *arg) {
  (void)arg;
  pin_to_cpu0();
  for (int i = 0; i < LADDER_BLOCKS; i++)
    ladder_taken[i] = hz_malloc(LADDER_SIZE);
  return NULL;
}

static void ladder(void) {
  set_route(LADDER_SIZE, HZ_CLASS_SHARED);
  for (int i = 0; i < LADDER_BLOCKS; i++)
    ladder_freed[i] = hz_malloc(LADDER_SIZE);
  uint64_t held = summary().front.cached_blocks;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, ladder_freer, NULL) == 0);
  pthread_join(t, NULL);
  CHECK_MSG(summary().front.cached_blocks > held,
            "a bin that overflowed with shared blocks left none on the "
            "ladder");
  CHECK(pthread_create(&t, NULL, ladder_taker, NULL) == 0);
  pthread_join(t, NULL);
  int again = 0;
  for (int i = 0; i < LADDER_BLOCKS; i++)
    for (int k = 0; k < LADDER_BLOCKS; k++)
      again += ladder_taken[i] == ladder_freed[k];
  CHECK_MSG(again > 0, "no block another thread freed came off the ladder");
  for (int i = 0; i < LADDER_BLOCKS; i++)
    hz_free(ladder_taken[i]);
  hz_collect(true);
  hz_heap_summary_t s = summary();
  CHECK_MSG(s.front.cached_blocks == 0, "%llu blocks on the ladder after a "
            "trim", (unsigned long long)s.front.cached_blocks);
  set_route(LADDER_SIZE, HZ_CLASS_OWN_PAGES);
}

/* --- stopped: sections stopped inside, on a page of the test's ----------
 * The push section reads blocks[] and the pop section writes out[] inside,
 * before the store that commits: handed a page they cannot use yet, they
 * stop there every time, wherever they run. (A signal or a migration from
 * another thread seldom lands inside one of them: under emulation, where a
 * signal is taken only between translated blocks, almost never.) */
enum { STOP_BLOCKS = 200, STOP_SIZE = 160 };
static void *stop_freed[STOP_BLOCKS];
static char *closed_page;   /* no access until the handler opens it */
static char *missing_page;  /* userfaultfd's, empty until filled */
static void **missing_fill; /* what fills it */
static long page_size;
static int uffd = -1;
static bool stop_migrate; /* two CPUs and userfaultfd: migrate one */
static pthread_t stop_thread;
static atomic_bool stop_done;
static atomic_int closed_faults;
static atomic_int faults_at_abort; /* of them, delivered at an abort handler */

/* Where the interrupted thread goes on: its program counter. */
static const char *context_pc(void *context) {
  ucontext_t *uc = context;
#if defined(__x86_64__)
  return (const char *)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (const char *)uc->uc_mcontext.pc;
#else
  (void)uc;
  return NULL;
#endif
}

/* A section faulted on closed_page: the kernel delivers SIGSEGV at the
 * section's abort handler (rseq's signature just before it), not at the
 * faulting instruction. Open the page; the section starts again. */
static void on_fault(int sig, siginfo_t *info, void *context) {
  char *at = info->si_addr;
  if (at < closed_page || at >= closed_page + page_size) {
    signal(sig, SIG_DFL); /* another fault: crash on it */
    return;
  }
  const char *pc = context_pc(context);
  if (pc != NULL && *(const uint32_t *)(const void *)(pc - 4) == RSEQ_SIG)
    atomic_fetch_add(&faults_at_abort, 1);
  mprotect(closed_page, (size_t)page_size, PROT_READ | PROT_WRITE);
  atomic_fetch_add(&closed_faults, 1);
}

/* userfaultfd (user-mode faults only: all it needs, and all an
 * unprivileged process gets by default), missing_page registered with it;
 * false where the kernel refuses (a seccomp filter, an old kernel). */
static bool uffd_open(void) {
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
  uffd = (int)syscall(__NR_userfaultfd,
                      O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
  if (uffd < 0 && errno == EINVAL)
    uffd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (uffd < 0) return false;
  struct uffdio_api api = {.api = UFFD_API};
  struct uffdio_register reg = {
      .range = {(uintptr_t)missing_page, (uint64_t)page_size},
      .mode = UFFDIO_REGISTER_MODE_MISSING};
  if (ioctl(uffd, UFFDIO_API, &api) == 0 &&
      ioctl(uffd, UFFDIO_REGISTER, &reg) == 0)
    return true;
  close(uffd);
  uffd = -1;
  return false;
}

/* stop_thread in a fault on missing_page: moved to CPU 1, then the page
 * filled (which wakes it). */
static void fill_missing(void) {
  struct uffd_msg msg;
  if (read(uffd, &msg, sizeof msg) != sizeof msg ||
      msg.event != UFFD_EVENT_PAGEFAULT)
    return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(1, &set);
  CHECK(pthread_setaffinity_np(stop_thread, sizeof set, &set) == 0);
  struct uffdio_copy copy = {.dst = (uintptr_t)missing_page,
                             .src = (uintptr_t)missing_fill,
                             .len = (uint64_t)page_size};
  CHECK(ioctl(uffd, UFFDIO_COPY, &copy) == 0);
}

/* One move through a section stopped on `page`, by a fault that comes
 * back as a restart: a push of the block the page holds (1 taken) or a
 * pop of one onto it. `how` names the stop for the messages. */
static void stopped_move(bool push, void **page, const char *how) {
  size_t cls = hz_sizeclass_of(STOP_SIZE);
  uint64_t restarts = hz_cpu_restarts;
  uint64_t cached = summary().front.cached_blocks;
  unsigned moved = push ? hz_cpu_give(cls, page, 1) : hz_cpu_take(cls, page, 1);
  const char *what = push ? "push" : "pop";
  CHECK_MSG(moved == 1, "%s %s moved %u blocks", how, what, moved);
  /* Once for the stop at least (the thread may be preempted inside on
   * its second try too: a loaded machine, a first touch of a cache's
   * page that sleeps). */
  CHECK_MSG(hz_cpu_restarts > restarts, "a %s %s did not restart", how, what);
  /* The first try's copies are scratch: one block on, or one off. */
  CHECK(summary().front.cached_blocks == (push ? cached + 1 : cached - 1));
}

/* On CPU 0: blocks of the class freed until some spill onto this CPU's
 * cache, one taken back from there; then that block pushed and popped
 * through closed_page (signalled), and pushed through missing_page while
 * asleep in its fault, moved meanwhile to CPU 1 (migrated: whether or not
 * it was off CPU 0 yet when moved, the kernel takes it off and marks the
 * section to restart). */
static void *stop_sections(void *arg) {
  (void)arg;
  size_t cls = hz_sizeclass_of(STOP_SIZE);
  pin_to_cpu0();
  hz_free(hz_malloc(8)); /* a heap of its own */
  uint64_t gives = summary().front.cache_gives;
  for (int i = 0; i < STOP_BLOCKS; i++)
    hz_free(stop_freed[i]);
  CHECK_MSG(summary().front.cache_gives > gives, "no spill onto a cache");
  void *batch[HZ_CPU_BATCH];
  uint64_t takes = summary().front.cache_takes;
  CHECK(hz_cpu_take(cls, batch, 1) == 1);
  CHECK_MSG(summary().front.cache_takes == takes + 1,
            "the block did not come from this CPU's cache");
  void *block = batch[0];
  /* Signalled: SIGSEGV inside, delivered at the abort handler. */
  ((void **)closed_page)[0] = block;
  mprotect(closed_page, (size_t)page_size, PROT_NONE);
  stopped_move(true, (void **)closed_page, "signalled");
  mprotect(closed_page, (size_t)page_size, PROT_NONE);
  stopped_move(false, (void **)closed_page, "signalled");
  CHECK_MSG(atomic_load(&closed_faults) == 2 &&
                atomic_load(&faults_at_abort) == 2,
            "%d faults, %d delivered at an abort handler",
            atomic_load(&closed_faults), atomic_load(&faults_at_abort));
  CHECK_MSG(((void **)closed_page)[0] == block, "popped another block");
  if (stop_migrate) {
    missing_fill[0] = block;
    stopped_move(true, (void **)missing_page, "migrated");
    CHECK_MSG(sched_getcpu() == 1, "not moved to CPU 1 (on %d)",
              sched_getcpu());
  } else {
    CHECK(hz_cpu_give(cls, &block, 1) == 1);
  }
  atomic_store(&stop_done, true);
  return NULL;
}

/* The sections of one thread stopped inside by faults: each restarts,
 * where rseq is. Whether one was migrated so (two CPUs and
 * userfaultfd; else the migrated traders below must show a restart by
 * themselves). */
static bool stopped(void) {
  if (!per_cpu) {
    printf("cpu_cache: no per-CPU caches: no sections to stop\n");
    return false;
  }
  page_size = sysconf(_SC_PAGESIZE);
  closed_page = mmap(NULL, (size_t)page_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  missing_page = mmap(NULL, (size_t)page_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  missing_fill = mmap(NULL, (size_t)page_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(closed_page != MAP_FAILED && missing_page != MAP_FAILED &&
        missing_fill != MAP_FAILED);
  stop_migrate = sysconf(_SC_NPROCESSORS_ONLN) >= 2 && uffd_open();
  if (!stop_migrate)
    printf("cpu_cache: one CPU online or userfaultfd refused: no section "
           "migrated while stopped\n");
  struct sigaction sa, previous;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, &previous);
  set_route(STOP_SIZE, HZ_CLASS_SHARED);
  for (int i = 0; i < STOP_BLOCKS; i++)
    stop_freed[i] = hz_malloc(STOP_SIZE);
  hz_collect(true); /* every cache empty */
  uint64_t before = summary().front.restarts;
  CHECK(pthread_create(&stop_thread, NULL, stop_sections, NULL) == 0);
  while (stop_migrate && !atomic_load(&stop_done)) {
    struct pollfd fd = {.fd = uffd, .events = POLLIN};
    if (poll(&fd, 1, 10) == 1) fill_missing();
  }
  pthread_join(stop_thread, NULL);
  sigaction(SIGSEGV, &previous, NULL);
  uint64_t counted = summary().front.restarts - before;
  hz_collect(true);
  set_route(STOP_SIZE, HZ_CLASS_OWN_PAGES);
  if (uffd >= 0) close(uffd);
  munmap(closed_page, (size_t)page_size);
  munmap(missing_page, (size_t)page_size);
  munmap(missing_fill, (size_t)page_size);
  printf("cpu_cache: sections stopped inside: %llu restarts\n",
         (unsigned long long)counted);
  return stop_migrate;
}

/* --- restarts ------------------------------------------------------------- */
enum { TRADERS = 3, SLOTS = 64, ROUNDS = 200000, TRADE_SIZE = 96 };
static _Atomic(void *) trade[TRADERS][SLOTS];
static atomic_int trading;
static atomic_long clashes;
static atomic_bool restarted; /* a trader saw one of its sections restart */
static bool moved;              /* traders moved between CPUs, not pinned */
static bool until_restart;      /* trade until a section restarted */
static atomic_uint cpus_seen;   /* a bit for each CPU (below 32) a trader ran on */

static void on_signal(int sig) { (void)sig; }

/* Take a block: it must not carry another trader's mark while we hold it. */
static void *take_marked(int me) {
  unsigned char *p = hz_malloc(TRADE_SIZE);
  if (p == NULL) return NULL;
  memset(p, 'A' + me, TRADE_SIZE);
  for (int i = 0; i < TRADE_SIZE; i++)
    if (p[i] != 'A' + me) {
      atomic_fetch_add(&clashes, 1);
      break;
    }
  return p;
}

static void *trader(void *arg) {
  int me = (int)(intptr_t)arg;
  if (!moved) pin_to_cpu0();
  /* ROUNDS, then on until some section restarted if asked (a loaded
   * machine may run a whole batch of rounds between two moves), at most
   * 60 s. */
  time_t until = time(NULL) + 60;
  for (int r = 0; r < ROUNDS || (until_restart && !atomic_load(&restarted) &&
                                 time(NULL) < until);
       r++) {
    if (hz_cpu_restarts != 0) atomic_store(&restarted, true);
    int cpu = sched_getcpu();
    if (cpu >= 0 && cpu < 32) atomic_fetch_or(&cpus_seen, 1u << cpu);
    int s = r % SLOTS;
    /* Free what the previous trader left (a remote free), leave ours. */
    void *theirs =
        atomic_exchange(&trade[(me + TRADERS - 1) % TRADERS][s], NULL);
    if (theirs != NULL) {
      memset(theirs, 0, TRADE_SIZE);
      hz_free(theirs);
    }
    void *mine = take_marked(me);
    void *old = atomic_exchange(&trade[me][s], mine);
    if (old != NULL) hz_free(old);
  }
  atomic_fetch_sub(&trading, 1);
  return NULL;
}

/* Trader i onto CPU (round + i) % cpus alone: each one moves every round. */
static void move_traders(const pthread_t *t, long round, long cpus) {
  for (int i = 0; i < TRADERS; i++) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)((round + i) % cpus), &set);
    pthread_setaffinity_np(t[i], sizeof set, &set);
  }
}

/* The traders at work, signalled (pinned to CPU 0) or moved between the
 * CPUs every 50 us, until they are done. */
static void interrupt_traders(const pthread_t *t, long cpus) {
  struct timespec gap = {0, 50000};
  for (long round = 0; atomic_load(&trading) > 0; round++) {
    if (moved)
      move_traders(t, round, cpus);
    else
      for (int i = 0; i < TRADERS; i++)
        pthread_kill(t[i], SIGUSR1);
    nanosleep(&gap, NULL);
  }
}

/* The traders' sections are interrupted at random: whether they ever are
 * while inside depends on timing (under emulation, almost never), so what
 * these rounds check is that no block is held twice however often they
 * are; stopped() restarts sections for sure. Where it could not migrate
 * one (no userfaultfd), `must_restart` asks the migrated traders to trade
 * until one of their sections restarted (60 s at most) instead. */
static void restarts(bool migrate, bool must_restart) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (migrate && cpus < 2) {
    printf("cpu_cache: one CPU online: no migrations to make\n");
    return;
  }
  moved = migrate;
  until_restart = per_cpu && must_restart;
  atomic_store(&restarted, false);
  atomic_store(&cpus_seen, 0);
  set_route(TRADE_SIZE, HZ_CLASS_SHARED);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGUSR1, &sa, NULL);
  uint64_t before = summary().front.restarts;
  pthread_t t[TRADERS];
  atomic_store(&trading, TRADERS);
  for (int i = 0; i < TRADERS; i++)
    CHECK(pthread_create(&t[i], NULL, trader, (void *)(intptr_t)i) == 0);
  interrupt_traders(t, cpus);
  for (int i = 0; i < TRADERS; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < TRADERS; i++)
    for (int s = 0; s < SLOTS; s++)
      hz_free(atomic_exchange(&trade[i][s], NULL));
  CHECK_MSG(atomic_load(&clashes) == 0, "%ld blocks held by two threads",
            atomic_load(&clashes));
  uint64_t counted = summary().front.restarts - before;
  set_route(TRADE_SIZE, HZ_CLASS_OWN_PAGES);
  const char *how = migrate ? "migrated" : "signalled";
  if (until_restart)
    CHECK_MSG(counted > 0, "no section restarted in 60 s of %s rounds", how);
  if (!per_cpu) CHECK(counted == 0);
  if (migrate)
    CHECK_MSG(__builtin_popcount(atomic_load(&cpus_seen)) >= 2,
              "the traders ran on one CPU only (CPUs 0x%x)",
              atomic_load(&cpus_seen));
  printf("cpu_cache: %s traders: %llu restarts\n", how,
         (unsigned long long)counted);
}

/* Waits of up to 60 s, polled every 10 ms: a loaded machine may run the
 * purge thread late, never the other way round. */
enum { WAIT_POLLS = 6000 };

/* --- share -----------------------------------------------------------------
 */
enum { RING_SLOTS = 64, RING_SIZE_MAX = 2048 };
static _Atomic(uintptr_t *) ring[RING_SLOTS * 64];
static atomic_int ring_threads;
static atomic_bool ring_pass, ring_stop;
static atomic_long ring_clashes, ring_shared;

/* A block taken by thread `me`: its first word says who holds it. */
static uintptr_t *ring_take(int me, unsigned round) {
  size_t size = 16 + (round * 97u) % RING_SIZE_MAX;
  uintptr_t *p = hz_malloc(size);
  if (p == NULL) return NULL;
  if (p[0] == HELD) atomic_fetch_add(&ring_clashes, 1);
  p[0] = HELD;
  p[1] = (uintptr_t)me;
  /* a guarded sample lies outside the arena, on no page */
  if (hz_arena_holds(p) && hz_class_heap_holds(hz_segment_block_page(p)))
    atomic_fetch_add(&ring_shared, 1);
  return p;
}

static void ring_free(uintptr_t *p) {
  p[0] = 0;
  hz_free(p);
}

/* Each thread has RING_SLOTS slots of the ring; it frees what it finds in
 * its own (left there by the thread before it, once passing) and leaves a
 * new block in the next thread's while that slot is empty, or in its own
 * while not passing. Passing, every free is then of another thread's block
 * however the threads are scheduled (a thread that took back its own
 * blocks where the next thread had not run yet freed more of its own than
 * 7 in 8 under two busy loops, and rightly shared nothing). */
static void *ring_thread(void *arg) {
  int me = (int)(intptr_t)arg;
  int n = atomic_load(&ring_threads);
  for (unsigned round = 0; !atomic_load(&ring_stop); round++) {
    unsigned slot = round % RING_SLOTS;
    int to = atomic_load(&ring_pass) ? (me + 1) % n : me;
    uintptr_t *old = atomic_exchange(&ring[me * RING_SLOTS + slot], NULL);
    if (old != NULL) ring_free(old);
    _Atomic(uintptr_t *) *dest = &ring[to * RING_SLOTS + slot];
    uintptr_t *empty = NULL, *p;
    if (atomic_load(dest) == NULL && (p = ring_take(me, round)) != NULL &&
        !atomic_compare_exchange_strong(dest, &empty, p))
      ring_free(p); /* the slot's owner was still filling it itself */
    if (round % 1024 == 0) sched_yield();
  }
  return NULL;
}

/* Classes sharing pages now. */
static uint64_t sharing(void) { return summary().front.shared_classes; }

/* Two threads, few for the CPUs, that free their own blocks, a thousand
 * of one of the ring's sizes at a time (more than a bin holds, so bins
 * refill): the samples of the shared classes. */
static atomic_bool local_stop;
static void *local_thread(void *arg) {
  (void)arg;
  static _Thread_local void *held[1000];
  for (unsigned round = 0; !atomic_load(&local_stop); round++) {
    size_t size = 16 + (round * 97u) % RING_SIZE_MAX; /* more than a bin */
    for (unsigned i = 0; i < 1000; i++)
      held[i] = hz_malloc(size);
    for (unsigned i = 0; i < 1000; i++)
      hz_free(held[i]);
  }
  return NULL;
}

static void share(void) {
  int cpus = (int)sysconf(_SC_NPROCESSORS_CONF);
  int n = 4 * cpus + 2;
  if (n > 64) n = 64;
  atomic_store(&ring_threads, n);
  /* main holds a heap too: the purge thread's rounds go on after the
   * workers are gone */
  void *mine = hz_malloc(100);
  pthread_t threads[64];
  for (int i = 0; i < n; i++)
    CHECK(pthread_create(&threads[i], NULL, ring_thread, (void *)(intptr_t)i) ==
          0);
  /* Own blocks only: 40 rounds of the purge thread (a quarter of the
   * purge delay each) must not make a class share. */
  usleep(1000000);
  CHECK_MSG(sharing() == 0, "threads that free only their own blocks took "
                            "the shared pages");
  atomic_store(&ring_pass, true);
  for (int i = 0; i < WAIT_POLLS && sharing() == 0; i++)
    usleep(10000);
  CHECK_MSG(sharing() > 0, "crowded threads freeing each other's blocks did "
                           "not take the shared pages");
  long before = atomic_load(&ring_shared);
  for (int i = 0; i < WAIT_POLLS && atomic_load(&ring_shared) < before + 1000;
       i++)
    usleep(10000);
  CHECK_MSG(atomic_load(&ring_shared) >= before + 1000,
            "the threads' mallocs got no blocks of the shared pages");
  atomic_store(&ring_stop, true);
  for (int i = 0; i < n; i++)
    pthread_join(threads[i], NULL);
  for (size_t i = 0; i < sizeof ring / sizeof ring[0]; i++)
    if (ring[i] != NULL) ring_free(ring[i]);
  CHECK_MSG(atomic_load(&ring_clashes) == 0,
            "%ld blocks were handed to a thread while another held them",
            atomic_load(&ring_clashes));
  pthread_t local[2];
  for (int i = 0; i < 2; i++)
    CHECK(pthread_create(&local[i], NULL, local_thread, NULL) == 0);
  for (int i = 0; i < WAIT_POLLS && sharing() != 0; i++)
    usleep(10000);
  CHECK_MSG(sharing() == 0, "%llu classes still shared pages after threads "
                            "that free their own blocks took over",
            (unsigned long long)sharing());
  atomic_store(&local_stop, true);
  for (int i = 0; i < 2; i++)
    pthread_join(local[i], NULL);
  hz_free(mine);
}

/* --- alone -----------------------------------------------------------------
 */
enum { ALONE_BLOCKS = 50, ALONE_YOUNG = 20, ALONE_OPS_MAX = 256 };
static pthread_barrier_t holders_up;
static atomic_bool holders_go;
static void *alone_handed[ALONE_YOUNG][ALONE_BLOCKS / 2];
static void *main_block; /* main's, freed by the first young thread */

static void *holder(void *arg) {
  (void)arg;
  void *p = hz_malloc(64); /* a heap of its own, held while it waits */
  CHECK(p != NULL);
  pthread_barrier_wait(&holders_up);
  while (!atomic_load(&holders_go))
    usleep(1000);
  hz_free(p);
  return NULL;
}

/* A young thread of the crowded program: 50 written blocks of 16-3000 B
 * from the shared pages and no heap; it frees half itself (and, the first,
 * a block of main's heap), leaves half to main. */
static void *young(void *arg) {
  int me = (int)(intptr_t)arg;
  unsigned char *b[ALONE_BLOCKS];
  for (int k = 0; k < ALONE_BLOCKS; k++) {
    size_t size = 16 + (size_t)(me * 131 + k * 977) % 2985;
    b[k] = hz_malloc(size);
    CHECK(b[k] != NULL);
    memset(b[k], me + k, size);
    if (hz_arena_holds(b[k])) /* a guarded sample is on no page */
      CHECK_MSG(hz_class_heap_holds(hz_segment_block_page(b[k])),
                "a young thread's block is not of the shared pages");
  }
  if (me == 0) hz_free(main_block);
  CHECK_MSG(hz_heap_current() == &hz_heap_empty,
            "a young thread of a crowded program took a heap");
  for (int k = 0; k < ALONE_BLOCKS; k++) {
    size_t size = 16 + (size_t)(me * 131 + k * 977) % 2985;
    CHECK(b[k][0] == (unsigned char)(me + k) &&
          b[k][size - 1] == (unsigned char)(me + k));
    if (k % 2 == 0)
      hz_free(b[k]);
    else
      alone_handed[me][k / 2] = b[k];
  }
  /* past ALONE_OPS it takes a heap like any thread */
  for (int k = 0; k < ALONE_OPS_MAX; k++)
    hz_free(hz_malloc(100));
  CHECK_MSG(hz_heap_current() != &hz_heap_empty,
            "a thread that went on past its first mallocs took no heap");
  return NULL;
}

/* A thread of a program that is not crowded takes a heap at once (for a
 * size the caches do not hold: a cache may serve a thread without one). */
static void *settled(void *arg) {
  (void)arg;
  void *p = hz_malloc(HZ_CPU_BLOCK_MAX + 1000);
  CHECK(p != NULL);
  CHECK_MSG(hz_heap_current() != &hz_heap_empty,
            "a thread of an uncrowded program mallocs without a heap");
  hz_free(p);
  return NULL;
}

/* More than HZ_SHARED_PAGES (4) threads a CPU hold a heap: threads that
 * start then make their first mallocs and frees without one, from the
 * shared pages; with few threads, a new thread takes a heap at once. */
static void alone(void) {
  if (!per_cpu) return;
  int cpus = (int)sysconf(_SC_NPROCESSORS_CONF);
  int n = 4 * cpus + 1;
  if (n > 64) n = 64;
  main_block = hz_malloc(200);
  pthread_t holders[64], t;
  pthread_barrier_init(&holders_up, NULL, (unsigned)n + 1);
  for (int i = 0; i < n; i++)
    CHECK(pthread_create(&holders[i], NULL, holder, NULL) == 0);
  pthread_barrier_wait(&holders_up);
  for (int i = 0; i < ALONE_YOUNG; i++) {
    CHECK(pthread_create(&t, NULL, young, (void *)(intptr_t)i) == 0);
    pthread_join(t, NULL);
  }
  for (int i = 0; i < ALONE_YOUNG; i++)
    for (int k = 0; k < ALONE_BLOCKS / 2; k++)
      hz_free(alone_handed[i][k]);
  atomic_store(&holders_go, true);
  for (int i = 0; i < n; i++)
    pthread_join(holders[i], NULL);
  CHECK(pthread_create(&t, NULL, settled, NULL) == 0); /* few threads now */
  pthread_join(t, NULL);
}

/* --- unregistered ----------------------------------------------------------
 */
enum { SWAP_ROUNDS = 1000000, SWAP_SLOTS = 256 };
static _Atomic(uintptr_t *) swap_slots[2][SWAP_SLOTS];
static atomic_long swap_clashes, swap_unregistered;
static pthread_barrier_t swap_start;

/* Unregister glibc's rseq area of the calling thread. */
static bool rseq_unregister(void) {
  void *area = (char *)__builtin_thread_pointer() + __rseq_offset;
  return syscall(__NR_rseq, area, __rseq_size, RSEQ_FLAG_UNREGISTER,
                 RSEQ_SIG) == 0 ||
         syscall(__NR_rseq, area, 32, RSEQ_FLAG_UNREGISTER, RSEQ_SIG) == 0;
}

/* A block just taken: nobody may hold it (its first word says so). */
static uintptr_t *swap_take(unsigned round) {
  uintptr_t *p = hz_malloc(16 + (round * 40503u) % 241);
  CHECK(p != NULL);
  if (__atomic_exchange_n(p, HELD, __ATOMIC_SEQ_CST) == HELD)
    atomic_fetch_add(&swap_clashes, 1);
  return p;
}

static void swap_free(uintptr_t *p) {
  if (p == NULL) return;
  __atomic_store_n(p, 0, __ATOMIC_SEQ_CST);
  hz_free(p);
}

static void *swapper(void *arg) {
  int me = (int)(intptr_t)arg;
  if (__rseq_size > 0 && rseq_unregister())
    atomic_fetch_add(&swap_unregistered, 1);
  hz_free(hz_malloc(8)); /* a heap of its own */
  pthread_barrier_wait(&swap_start);
  for (unsigned r = 0; r < SWAP_ROUNDS; r++) {
    unsigned s = r % SWAP_SLOTS;
    swap_free(atomic_exchange(&swap_slots[1 - me][s], NULL)); /* remote */
    swap_free(atomic_exchange(&swap_slots[me][s], swap_take(r)));
  }
  return NULL;
}

static void unregistered(void) {
  for (size_t size = 16; size <= 256; size += 16)
    set_route(size, HZ_CLASS_SHARED);
  pthread_barrier_init(&swap_start, NULL, 2);
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    CHECK(pthread_create(&t[i], NULL, swapper, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++)
    for (int s = 0; s < SWAP_SLOTS; s++)
      swap_free(atomic_exchange(&swap_slots[i][s], NULL));
  if (__rseq_size > 0)
    CHECK_MSG(atomic_load(&swap_unregistered) == 2,
              "could not unregister glibc's rseq area");
  CHECK_MSG(atomic_load(&swap_clashes) == 0,
            "%ld blocks handed out while another thread held them",
            atomic_load(&swap_clashes));
  for (size_t size = 16; size <= 256; size += 16)
    set_route(size, HZ_CLASS_OWN_PAGES);
}

int main(int argc, char **argv) {
  choice();
  if (argc > 1 && strcmp(argv[1], "alone") == 0) {
    alone();
    return check_report("cpu_cache alone");
  }
  if (argc > 1 && strcmp(argv[1], "share") == 0) {
    share();
    return check_report("cpu_cache share");
  }
  decision();
  routes();
  lent();
  lent_live();
  one_set();
  ladder();
  bool migrated = stopped();
  restarts(false, false);
  restarts(true, !migrated);
  unregistered();
  return check_report("cpu_cache");
}
