/* cpu_cache: the per-CPU front end, through the hz_ API and the stats.
 *   - choice: where glibc registered rseq (__rseq_size > 0) and
 *     HZ_CPU_CACHE is not 0 the report names the per-CPU caches, else the
 *     per-thread heaps (CTest runs this test again with
 *     GLIBC_TUNABLES=glibc.pthread.rseq=0: the fallback);
 *   - reuse: every thread pinned to one CPU, a block thread A allocated and
 *     thread B freed is the block thread C's next malloc of its size
 *     returns (with per-thread heaps, C's own page gives it one);
 *   - restarts: three threads pinned to one CPU trade blocks (every free a
 *     remote one, every malloc served by the CPU's cache) while a fourth
 *     signals them every 50 us, so sections are interrupted (preempted or
 *     signalled): no block is ever handed to two threads at once (each
 *     writes its mark over the whole block and checks it when it frees
 *     it... and when it takes it), and the report counts restarts;
 *   - drain: after hz_collect(true) no block is left in a CPU cache or
 *     depot;
 *   - crowded: a round with more than 4 threads a CPU holding a heap
 *     turns classes above 256 B off (once asking for a drain), smaller
 *     ones stay cached; a round with fewer caches every class again;
 *   - churn: a round that saw more threads exit than hold a heap turns
 *     every class off (once: the drain is asked for when it begins);
 *   - unregistered: two threads that unregistered glibc's rseq area (the
 *     kernel then leaves cpu_id at -1 and mm_cid at 0 and restarts no
 *     section) trade blocks: none is ever held by both (they take the
 *     per-thread paths);
 *   - shared: with the shared pages on, every class up to 32 KiB is
 *     SHARED: a bin refilled from them holds their blocks, whose frees go
 *     onto the caches, while a block of another thread's own page goes
 *     home past them; off again, every class is cached as before;
 *   - local: a class whose frees are local (fewer than 1 in 8 of another
 *     heap's block, seen while the class is off) goes off the caches at a
 *     probe within 32 rounds and stays off, goes back on when its frees
 *     turn remote, and is probed again within 32 rounds;
 *   - one_way: a class whose blocks one thread mallocs and another frees
 *     (full caches send batches home, none is taken) bypasses the caches
 *     and stays so until the next probe round, within 32 rounds;
 *   - chain (argument "chain", with the purge thread): chains of threads
 *     that each free their predecessor's blocks and exit make the purge
 *     thread's rounds turn the caches off, and they come back after;
 *   - alone (argument "alone"): while more than HZ_SHARED_PAGES (4)
 *     threads a CPU hold a heap, threads that start make their first
 *     mallocs and frees without one (written blocks of the shared pages,
 *     some freed by main), and take one past ALONE_OPS; with few threads
 *     a new thread takes a heap at once;
 *   - share (argument "share", with the purge thread): more than
 *     HZ_SHARED_PAGES (4) threads a CPU that free only their own blocks
 *     never turn the shared pages on; once they hand blocks round a ring
 *     the rounds turn them on, the threads' mallocs get their blocks (no
 *     block held by two threads at once), and once the threads are gone
 *     the rounds turn them off.
 * Without an argument the test runs with HZ_PURGE_THREAD=0 (CTest), so no
 * round of the purge thread changes the modes or drains the caches under
 * the steps that set and read them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "arena.h"
#include "central.h"
#include "check.h"
#include "cpu_cache.h"
#include "hakozuna.h"
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
  per_cpu = strcmp(name, "per-CPU caches (rseq)") == 0;
  CHECK_MSG(per_cpu == want, "front end \"%s\" with __rseq_size %u", name,
            __rseq_size);
  if (!want) CHECK(strcmp(name, "per-thread heaps") == 0);
}

/* --- reuse ---------------------------------------------------------------- */
/* Threads A, B and C, alive together (so none takes another's heap), step
 * by step: A mallocs, B frees A's block, C mallocs. */
enum { REUSE_SIZE = 200 };
static void *handed, *taken;
static pthread_barrier_t step;

static void *reuse_thread(void *arg) {
  int role = (int)(intptr_t)arg;
  pin_to_cpu0();
  if (role == 0) handed = hz_malloc(REUSE_SIZE);
  if (role == 1) hz_free(hz_malloc(8)); /* B has a heap: its frees are fast */
  pthread_barrier_wait(&step);
  if (role == 1) hz_free(handed);
  pthread_barrier_wait(&step);
  if (role == 2) taken = hz_malloc(REUSE_SIZE);
  pthread_barrier_wait(&step);
  return NULL;
}

static void reuse(void) {
  pthread_barrier_init(&step, NULL, 3);
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    CHECK(pthread_create(&t[i], NULL, reuse_thread, (void *)(intptr_t)i) == 0);
  for (int i = 0; i < 3; i++)
    pthread_join(t[i], NULL);
  CHECK(handed != NULL && taken != NULL);
  if (per_cpu)
    CHECK_MSG(taken == handed, "freed %p on CPU 0, the next malloc there %p",
              handed, taken);
  else
    CHECK_MSG(taken != handed, "per-thread heaps: %p came back elsewhere",
              taken);
  hz_free(taken);
}

/* --- restarts ------------------------------------------------------------- */
enum { TRADERS = 3, SLOTS = 64, ROUNDS = 200000, TRADE_SIZE = 96 };
static _Atomic(void *) trade[TRADERS][SLOTS];
static atomic_int trading;
static atomic_long clashes;
static atomic_bool restarted; /* a trader saw one of its sections restart */

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
  pin_to_cpu0();
  /* ROUNDS at least, then on until some section restarted (a loaded
   * machine may run a whole batch of rounds between two signals), at
   * most 60 s. */
  time_t until = time(NULL) + 60;
  for (int r = 0; r < ROUNDS ||
                  (per_cpu && !atomic_load(&restarted) && time(NULL) < until);
       r++) {
    if (hz_cpu_restarts != 0) atomic_store(&restarted, true);
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

static void restarts(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGUSR1, &sa, NULL);
  uint64_t before = summary().front.restarts;
  pthread_t t[TRADERS];
  atomic_store(&trading, TRADERS);
  for (int i = 0; i < TRADERS; i++)
    CHECK(pthread_create(&t[i], NULL, trader, (void *)(intptr_t)i) == 0);
  struct timespec gap = {0, 50000};
  while (atomic_load(&trading) > 0) {
    for (int i = 0; i < TRADERS; i++)
      pthread_kill(t[i], SIGUSR1);
    nanosleep(&gap, NULL);
  }
  for (int i = 0; i < TRADERS; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < TRADERS; i++)
    for (int s = 0; s < SLOTS; s++)
      hz_free(atomic_exchange(&trade[i][s], NULL));
  CHECK_MSG(atomic_load(&clashes) == 0, "%ld blocks held by two threads",
            atomic_load(&clashes));
  uint64_t counted = summary().front.restarts - before;
  if (per_cpu)
    CHECK_MSG(counted > 0, "no section restarted in 60 s of signalled rounds");
  else
    CHECK(counted == 0);
}

/* --- drain -----------------------------------------------------------------
 */
/* Frees main's blocks: onto this thread's CPU's cache. */
static void *drain_freer(void *arg) {
  void **blocks = arg;
  for (int i = 0; i < 64; i++)
    hz_free(blocks[i]);
  return NULL;
}

static void drain(void) {
  if (per_cpu) {
    /* A churn round of the purge thread (threads of the earlier steps
     * exiting) may have taken the classes off and drained them: on again,
     * and blocks of another heap freed into a cache. */
    int tries = 0;
    for (; tries < 5; tries++) {
      uint64_t churn = summary().front.churn_rounds;
      hz_cpu_cache_rejudge(1, 0, NULL, 0, NULL);
      static void *blocks[64];
      for (int i = 0; i < 64; i++)
        blocks[i] = hz_malloc(24);
      pthread_t t;
      CHECK(pthread_create(&t, NULL, drain_freer, blocks) == 0);
      pthread_join(t, NULL);
      if (summary().front.churn_rounds == churn) break; /* else again */
    }
    CHECK_MSG(tries < 5, "churn rounds came in the way %d times", tries);
    CHECK(summary().front.cached_blocks > 0);
  }
  hz_collect(true);
  hz_heap_summary_t s = summary();
  CHECK_MSG(s.front.cached_blocks == 0, "%llu blocks cached after a trim",
            (unsigned long long)s.front.cached_blocks);
}

/* --- crowded ---------------------------------------------------------------
 */
static void crowded(void) {
  if (!per_cpu) return;
  size_t cpus = (size_t)sysconf(_SC_NPROCESSORS_CONF);
  hz_cpu_cache_rejudge(1, 0, NULL, 0, NULL); /* on, whatever rounds did */
  CHECK(hz_cpu_cache_rejudge(4 * cpus + 1, 0, NULL, 0,
                             NULL)); /* drain what they hold */
  CHECK(hz_cpu_mode[hz_sizeclass_of(256)] == HZ_CPU_CLASS_CACHED);
  CHECK(hz_cpu_mode[hz_sizeclass_of(257)] == HZ_CPU_CLASS_OFF);
  CHECK(hz_cpu_mode[hz_sizeclass_of(HZ_CPU_BLOCK_MAX)] == HZ_CPU_CLASS_OFF);
  CHECK(!hz_cpu_cache_rejudge(4 * cpus + 1, 0, NULL, 0, NULL));
  CHECK(!hz_cpu_cache_rejudge(4 * cpus, 0, NULL, 0, NULL));
  CHECK(hz_cpu_mode[hz_sizeclass_of(257)] == HZ_CPU_CLASS_CACHED);
  CHECK(hz_cpu_mode[hz_sizeclass_of(HZ_CPU_BLOCK_MAX)] == HZ_CPU_CLASS_CACHED);
  CHECK(hz_cpu_mode[hz_sizeclass_of(HZ_CPU_BLOCK_MAX + 1)] == HZ_CPU_CLASS_OFF);
}

/* Waits of up to 60 s, polled every 10 ms: a loaded machine may run the
 * purge thread late, never the other way round. */
enum { WAIT_POLLS = 6000 };

/* --- shared -----------------------------------------------------------------
 */
static void *other_block;
static pthread_barrier_t other_step;

/* A thread alive through the step, whose own page holds other_block. */
static void *other_thread(void *arg) {
  (void)arg;
  other_block = hz_malloc(3000);
  pthread_barrier_wait(&other_step);
  pthread_barrier_wait(&other_step);
  return NULL;
}

static void shared(void) {
  if (!per_cpu) return;
  size_t cpus = (size_t)sysconf(_SC_NPROCESSORS_CONF);
  pthread_t other;
  pthread_barrier_init(&other_step, NULL, 2);
  CHECK(pthread_create(&other, NULL, other_thread, NULL) == 0);
  pthread_barrier_wait(&other_step);
  CHECK(hz_central_set(true));
  CHECK(hz_central_base() != NULL && hz_central_span() > 0);
  /* nothing goes off */
  CHECK(!hz_cpu_cache_rejudge(4 * cpus + 1, 0, hz_central_base(),
                              hz_central_span(), NULL));
  CHECK(hz_cpu_mode[hz_sizeclass_of(16)] == HZ_CPU_CLASS_SHARED);
  CHECK(hz_cpu_mode[hz_sizeclass_of(257)] == HZ_CPU_CLASS_SHARED);
  CHECK(hz_cpu_mode[hz_sizeclass_of(HZ_CPU_BLOCK_MAX)] == HZ_CPU_CLASS_SHARED);
  CHECK(hz_cpu_mode[hz_sizeclass_of(HZ_CPU_BLOCK_MAX + 1)] == HZ_CPU_CLASS_OFF);
  /* A block of the shared pages, through this thread's bin, goes onto the
   * caches when freed; another thread's own block goes home past them. */
  void *mine = hz_central_malloc(hz_heap_current(), 3000);
  CHECK(mine != NULL);
  const hz_page_t *page = hz_segment_block_page(mine);
  CHECK(hz_central_holds(page));
  CHECK(hz_cpu_takes_free(page));
  const hz_page_t *their = hz_segment_block_page(other_block);
  CHECK(!hz_central_holds(their) && hz_page_heap(their) != NULL);
  CHECK(!hz_cpu_takes_free(their));
  uint64_t cached = summary().front.cached_blocks;
  hz_free(mine);
  CHECK_MSG(summary().front.cached_blocks == cached + 1,
            "a shared block freed by another heap's thread is not cached");
  hz_free(other_block);
  CHECK_MSG(summary().front.cached_blocks == cached + 1,
            "another thread's own block went onto the caches");
  pthread_barrier_wait(&other_step);
  pthread_join(other, NULL);
  /* Off again: every class cached, whoever owns the block. */
  CHECK(hz_central_set(false));
  CHECK(!hz_cpu_cache_rejudge(1, 0, NULL, 0, NULL));
  CHECK(hz_cpu_mode[hz_sizeclass_of(257)] == HZ_CPU_CLASS_CACHED);
  CHECK(hz_cpu_takes_free(page));
  hz_collect(true);
  CHECK(summary().front.cached_blocks == 0);
}

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
  if (hz_arena_holds(p) && hz_central_holds(hz_segment_block_page(p)))
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

static bool shared_on(void) {
  return __atomic_load_n(&hz_central_on, __ATOMIC_RELAXED);
}

static void share(void) {
  if (!per_cpu) return;
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
   * purge delay each) must not turn them on. */
  usleep(1000000);
  CHECK_MSG(!shared_on(), "threads that free only their own blocks took the "
                          "shared pages");
  atomic_store(&ring_pass, true);
  for (int i = 0; i < WAIT_POLLS && !shared_on(); i++)
    usleep(10000);
  CHECK_MSG(shared_on(),
            "crowded threads freeing each other's blocks did not take the "
            "shared pages (churn rounds %llu, remote frees %llu)",
            (unsigned long long)summary().front.churn_rounds,
            (unsigned long long)summary().classes[20].remote_frees);
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
  for (int i = 0; i < WAIT_POLLS && shared_on(); i++)
    usleep(10000);
  CHECK_MSG(!shared_on(), "the shared pages stayed on after the threads went");
  hz_free(mine);
}

/* --- local -----------------------------------------------------------------
 */
/* One round of the rules with `frees` frees of the class of `size`, of
 * which `remote` went to other heaps through stashes, made by heaps that
 * allocate the class too (threads that trade blocks both ways); true when
 * a class went off. */
static bool local_round(size_t size, uint64_t frees, uint64_t remote) {
  static hz_cpu_frees_t seen;
  memset(&seen, 0, sizeof seen);
  seen.frees[hz_sizeclass_of(size)] = frees;
  seen.remote[hz_sizeclass_of(size)] = remote;
  seen.crossed[hz_sizeclass_of(size)] = remote;
  return hz_cpu_cache_rejudge(1, 0, NULL, 0, &seen);
}

static uint8_t mode_of(size_t size) {
  return hz_cpu_mode[hz_sizeclass_of(size)];
}

/* Rounds of `frees` local frees of the class of `size` until it goes off
 * the caches (a probe); how many it took. */
static int rounds_to_probe(size_t size, uint64_t frees) {
  int rounds = 0;
  while (rounds < 64 && mode_of(size) == HZ_CPU_CLASS_CACHED) {
    local_round(size, frees, 0);
    rounds++;
  }
  return rounds;
}

/* A class whose frees are local goes off the caches and back on when they
 * turn remote: within 32 rounds a probe takes every class with enough
 * frees off for a round; seen off, a class with fewer than 1 free in 8 of
 * another heap's block stays off, one with more goes back on; on, it is
 * probed again within 32 rounds; a class with too few frees to tell keeps
 * its mode. */
static void local(void) {
  if (!per_cpu) return;
  CHECK(mode_of(100) == HZ_CPU_CLASS_CACHED);
  int rounds = rounds_to_probe(100, 5000);
  CHECK_MSG(mode_of(100) == HZ_CPU_CLASS_OFF && rounds <= 32,
            "a cached class with local frees was not probed within 32 "
            "rounds (%d)",
            rounds);
  CHECK(mode_of(2000) == HZ_CPU_CLASS_CACHED); /* no frees: not probed */
  CHECK(!local_round(100, 5000, 100));         /* 2% of other heaps': local */
  CHECK(mode_of(100) == HZ_CPU_CLASS_OFF);
  CHECK(!local_round(100, 500, 400)); /* too few to tell */
  CHECK(mode_of(100) == HZ_CPU_CLASS_OFF);
  CHECK(!local_round(100, 5000, 2000)); /* 40%: back on */
  CHECK(mode_of(100) == HZ_CPU_CLASS_CACHED);
  rounds = rounds_to_probe(100, 5000);
  CHECK_MSG(mode_of(100) == HZ_CPU_CLASS_OFF && rounds <= 32,
            "a cached class was not probed again within 32 rounds (%d)",
            rounds);
  CHECK(!local_round(100, 5000, 4000)); /* remote: on for the next steps */
  CHECK(mode_of(100) == HZ_CPU_CLASS_CACHED);
}

/* --- one-way rounds ---------------------------------------------------------
 * A class seen off the caches whose frees of other heaps' blocks come from
 * heaps that do not allocate it, mostly in runs, is one-way (take only)
 * until a probe puts it back to look again; where those heaps allocate as
 * much, or few of its frees make runs, it goes back on the caches. */
static void one_way_round(size_t size, uint64_t remote, uint64_t crossed,
                          uint64_t runs) {
  static hz_cpu_frees_t seen;
  memset(&seen, 0, sizeof seen);
  size_t c = hz_sizeclass_of(size);
  seen.frees[c] = remote, seen.remote[c] = remote, seen.crossed[c] = crossed;
  seen.runs[c] = runs;
  hz_cpu_cache_rejudge(1, 0, NULL, 0, &seen);
}

static void one_way_rounds(void) {
  if (!per_cpu) return;
  size_t size = 300; /* a class no other step uses */
  static const struct {
    uint64_t crossed, runs;
    uint8_t mode;
  } steps[] = {{5000, 5000, HZ_CPU_CLASS_CACHED}, /* both ways */
               {100, 500, HZ_CPU_CLASS_CACHED},   /* one way, no runs */
               {100, 4000, HZ_CPU_CLASS_TAKE_ONLY}};
  for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
    int rounds = rounds_to_probe(size, 5000);
    CHECK(mode_of(size) == HZ_CPU_CLASS_OFF && rounds <= 32);
    one_way_round(size, 5000, steps[k].crossed, steps[k].runs);
    CHECK_MSG(mode_of(size) == steps[k].mode, "step %zu: mode %u", k,
              mode_of(size));
  }
  int rounds = 0; /* until a probe, then it is looked at again */
  while (rounds < 64 && mode_of(size) == HZ_CPU_CLASS_TAKE_ONLY) {
    one_way_round(size, 0, 0, 0);
    rounds++;
  }
  CHECK_MSG(rounds > 8 && rounds <= 32, "one-way for %d rounds", rounds);
}

/* --- one_way ---------------------------------------------------------------
 */
enum { ONE_WAY_BLOCKS = 4000, ONE_WAY_SIZE = 64 };
static void *one_way_blocks[ONE_WAY_BLOCKS];
static pthread_barrier_t one_way_step;

/* The producer: mallocs the blocks main frees, and stays alive meanwhile
 * (its pages keep an owner, so their frees take the fast paths). */
static void *one_way_producer(void *arg) {
  (void)arg;
  for (int i = 0; i < ONE_WAY_BLOCKS; i++)
    one_way_blocks[i] = hz_malloc(ONE_WAY_SIZE);
  pthread_barrier_wait(&one_way_step);
  pthread_barrier_wait(&one_way_step);
  return NULL;
}

/* A class whose blocks only another thread frees (full caches send batch
 * after batch home, empty ones take none) bypasses the caches, stays so
 * through the rounds that follow, and is put back on by the next probe,
 * within 32 rounds. False, nothing checked past the point, when a churn
 * round of the purge thread (threads of the earlier steps exiting) took
 * every class off meanwhile: the caller tries again. */
static bool one_way_attempt(void) {
  uint64_t churn = summary().front.churn_rounds;
  rounds_to_probe(100, 5000); /* a probe round just went by */
  CHECK(!local_round(100, 5000, 4000));
  pthread_barrier_init(&one_way_step, NULL, 2);
  pthread_t producer;
  CHECK(pthread_create(&producer, NULL, one_way_producer, NULL) == 0);
  pthread_barrier_wait(&one_way_step);
  uint8_t before = mode_of(ONE_WAY_SIZE);
  for (int i = 0; i < ONE_WAY_BLOCKS; i++)
    hz_free(one_way_blocks[i]);
  uint8_t after = mode_of(ONE_WAY_SIZE);
  bool undisturbed = summary().front.churn_rounds == churn;
  if (undisturbed) {
    CHECK(before == HZ_CPU_CLASS_CACHED);
    CHECK_MSG(after == HZ_CPU_CLASS_TAKE_ONLY,
              "%d blocks freed by one thread only did not make their class "
              "bypass the caches",
              ONE_WAY_BLOCKS);
    int rounds = 0;
    while (rounds < 64 && mode_of(ONE_WAY_SIZE) == HZ_CPU_CLASS_TAKE_ONLY) {
      local_round(100, 0, 0);
      rounds++;
    }
    CHECK_MSG(rounds > 8 && rounds <= 32,
              "a one-way class came back on after %d rounds (probes come "
              "every 32)",
              rounds);
    CHECK(mode_of(ONE_WAY_SIZE) == HZ_CPU_CLASS_CACHED);
  }
  pthread_barrier_wait(&one_way_step);
  pthread_join(producer, NULL);
  return undisturbed;
}

static void one_way(void) {
  if (!per_cpu) return;
  int tries = 0;
  while (tries < 5 && !one_way_attempt())
    tries++;
  CHECK_MSG(tries < 5, "churn rounds came in the way %d times", tries);
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
      CHECK_MSG(hz_central_holds(hz_segment_block_page(b[k])),
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
                 0x53053053) == 0 ||
         syscall(__NR_rseq, area, 32, RSEQ_FLAG_UNREGISTER, 0x53053053) == 0;
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
}

/* --- churn ---------------------------------------------------------------- */
enum { CHAIN_BLOCKS = 64, CHAIN_SIZE = 100 };
static void *chain_blocks[CHAIN_BLOCKS];
static atomic_bool chain_stop;

static pthread_t chain_last;
static atomic_bool chain_done;

/* One link: join the predecessor, free its blocks, leave new ones, hand
 * over to a successor and exit (larson's shape). */
static void *chain_link(void *arg) {
  if (arg != NULL) pthread_join((pthread_t)(uintptr_t)arg, NULL);
  for (int i = 0; i < CHAIN_BLOCKS; i++) {
    hz_free(chain_blocks[i]);
    chain_blocks[i] = hz_malloc(CHAIN_SIZE);
  }
  if (atomic_load(&chain_stop)) {
    chain_last = pthread_self();
    atomic_store(&chain_done, true);
    return NULL;
  }
  pthread_t next;
  CHECK(pthread_create(&next, NULL, chain_link,
                       (void *)(uintptr_t)pthread_self()) == 0);
  return NULL;
}

static void churn(void) {
  if (!per_cpu) return;
  CHECK(hz_cpu_cache_rejudge(2, 3, NULL, 0, NULL)); /* it begins */
  CHECK(hz_cpu_mode[hz_sizeclass_of(16)] == HZ_CPU_CLASS_OFF);
  CHECK(hz_cpu_mode[hz_sizeclass_of(HZ_CPU_BLOCK_MAX)] == HZ_CPU_CLASS_OFF);
  CHECK(!hz_cpu_cache_rejudge(2, 3, NULL, 0, NULL)); /* it goes on */
  CHECK(!hz_cpu_cache_rejudge(2, 2, NULL, 0, NULL));
  CHECK(hz_cpu_mode[hz_sizeclass_of(16)] == HZ_CPU_CLASS_CACHED);
}

static void chain(void) {
  if (!per_cpu) return;
  uint64_t before = summary().front.churn_rounds;
  pthread_t first;
  CHECK(pthread_create(&first, NULL, chain_link, NULL) == 0);
  for (int i = 0; i < WAIT_POLLS && summary().front.churn_rounds == before; i++)
    usleep(10000);
  CHECK_MSG(summary().front.churn_rounds > before,
            "no round saw the chain's threads exit");
  atomic_store(&chain_stop, true);
  while (!atomic_load(&chain_done))
    usleep(1000);
  pthread_join(chain_last, NULL);
  for (int i = 0; i < CHAIN_BLOCKS; i++)
    hz_free(chain_blocks[i]);
  for (int i = 0; i < WAIT_POLLS && hz_cpu_mode[1] != HZ_CPU_CLASS_CACHED; i++)
    usleep(10000);
  CHECK_MSG(hz_cpu_mode[1] == HZ_CPU_CLASS_CACHED,
            "the caches stayed off after the threads stopped exiting");
}

int main(int argc, char **argv) {
  choice();
  if (argc > 1 && strcmp(argv[1], "chain") == 0) {
    chain();
    return check_report("cpu_cache chain");
  }
  if (argc > 1 && strcmp(argv[1], "alone") == 0) {
    alone();
    return check_report("cpu_cache alone");
  }
  if (argc > 1 && strcmp(argv[1], "share") == 0) {
    share();
    return check_report("cpu_cache share");
  }
  reuse();
  restarts();
  drain();
  crowded();
  churn();
  shared();
  local();
  one_way_rounds();
  one_way();
  unregistered();
  return check_report("cpu_cache");
}
