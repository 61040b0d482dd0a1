/* thread: process start-up, heap <-> thread binding, the heap pool, fork
 * handling, collection of idle heaps and the purge thread, and the routes
 * of a malloc or free that finds its thread inside the allocator (a signal
 * handler's: "Inside the allocator" below).
 *
 * Start-up uses only the os and options boxes. pthread_key_create,
 * pthread_atfork and pthread_setspecific are called only once the calling
 * thread's heap is installed, so any allocation they make is served.
 *
 * A heap outlives its thread in the pool: a block's page may name it long
 * after its thread exited, and a remote free must always find its inbox.
 * The pool keeps POOL_KEEP heaps for threads to come; the collector takes
 * any beyond at once. Once it finds a pooled heap holding nothing (no
 * page, no block on its way to it) and the pool has more than POOL_KEEP,
 * the heap is retired: taken off the lists and unmapped, its counts kept
 * for the stats report.
 *
 * The purge thread starts when a second thread gets a heap (never in a
 * single-threaded program) unless HZ_PURGE_THREAD=0 or the purge delay is
 * -1. Every quarter of the delay it looks at every heap, collecting those
 * of idle threads as far as their idleness calls for (hz_heap_claim), and
 * runs the purge that fell due, so memory comes back while the program
 * sleeps. It blocks every signal and
 * never allocates. It must never keep a process alive: when the last
 * thread with a heap exits (the main thread called pthread_exit, or the
 * thread a fork child was made from returned), it is woken and ends too,
 * so the process ends as it would without hakozuna; a thread that gets a
 * heap later starts it again. */
#define _GNU_SOURCE
#include "thread.h"

#include "central.h"
#include "cpu_cache.h"
#include "decision.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "guard.h"
#include "large.h"
#include "list.h"
#include "lock.h"
#include "options.h"
#include "os.h"
#include "prof.h"
#include "purge.h"
#include "tool.h"

/* Each heap is a mapping of its own, so a retired heap's memory goes back
 * whole. */
#define HEAP_MAP_SIZE HZ_ALIGN_UP(sizeof(hz_heap_t), (size_t)4096)
/* Pooled heaps kept however empty, so threads that come and go take a
 * heap without mapping one: below this many in the pool, none retires. */
#define POOL_KEEP 8
/* The purge thread wakes every quarter of the purge delay, within these. */
#define PURGE_PERIOD_MIN_MS 10
#define PURGE_PERIOD_MAX_MS 250
static hz_lock_t pool_lock = HZ_LOCK_INIT(HZ_LOCK_ID_POOL);

/* The pool lock. A signal handler whose malloc or free interrupts a
 * thread holding it (its first allocation, its exit) never asks for it
 * again: the thread is inside the allocator (hz_heap_inside), and the
 * call takes the routes that need no lock (below, "Inside the
 * allocator"). */
static void pool_take(void) { hz_lock(&pool_lock); }

static void pool_give(void) { hz_unlock(&pool_lock); }
typedef struct {
  hz_heap_t *first, *last;
} heap_list_t;
static heap_list_t heaps_all;    /* every heap not retired, by next_all */
static heap_list_t heaps_pooled; /* FIFO by next_pooled */
static _Atomic size_t heaps_pooled_count;
static size_t heaps_made;    /* heaps mapped so far (pool lock) */
static size_t heaps_retired; /* of those, retired (pool lock) */
/* What retired heaps counted, for the stats report (pool lock). */
static hz_heap_summary_t retired_counts;

static pthread_key_t thread_key;
static HZ_TLS bool thread_exiting;  /* our key destructor has run */
static HZ_TLS unsigned exit_rounds; /* times it ran (once per round) */
static _Atomic int process_state;   /* 0 new, 1 starting, 2 ready */
static _Atomic int hooks_state;     /* 0 none, 1 installing, 2 installed */
static size_t heaps_bound;          /* threads that got a heap (pool lock) */
static size_t heaps_live; /* threads holding one now (written under the pool
                           * lock; the purge thread reads it without) */
/* Wakes the purge thread early (with pool_lock) when heaps_live drops to
 * 0, so it ends at once. */
static pthread_cond_t purge_wake = PTHREAD_COND_INITIALIZER;
/* One collection round at a time (purge thread, malloc_trim, reclaim). */
static hz_lock_t collect_lock = HZ_LOCK_INIT(HZ_LOCK_ID_COLLECT);
static _Atomic bool purge_thread_started;

/* ---------------------------------------------------------------------------
 * Process start-up
 * ------------------------------------------------------------------------- */
/* Read the options and draw the secret, once, whichever thread comes
 * first: before any heap, so before any block exists. */
static void process_init(void) {
  int expected = 0;
  if (atomic_load_explicit(&process_state, memory_order_acquire) == 2) return;
  if (atomic_compare_exchange_strong(&process_state, &expected, 1)) {
    hz_options_init();
    hz_check_init();
    atomic_store_explicit(&process_state, 2, memory_order_release);
    return;
  }
  while (atomic_load_explicit(&process_state, memory_order_acquire) != 2) {
  }
}

/* ---------------------------------------------------------------------------
 * The heap pool
 * ------------------------------------------------------------------------- */
/* A new heap, mapped and set up before the pool lock is taken: no system
 * call runs under a process-wide lock that a thread's first allocation
 * takes. A signal handler's malloc landing in the mmap then takes a heap
 * of its own (see thread_bind) instead of waiting for the lock its own
 * thread holds, and other threads' first allocations do not queue behind
 * the kernel. Nobody can reach the heap before it is on the list. */
static hz_heap_t *heap_new(void) {
  hz_heap_t *heap = hz_os_map(HEAP_MAP_SIZE);
  if (heap == NULL) return NULL;
  hz_heap_init(heap);
  pool_take();
  HZ_LIST_PUSH_FRONT(&heaps_all, first, last, heap, next_all, prev_all);
  heaps_made++;
  pool_give();
  return heap;
}

static void pool_remove_locked(hz_heap_t *heap) {
  HZ_LIST_REMOVE(&heaps_pooled, first, last, heap, next_pooled, prev_pooled);
  atomic_fetch_sub_explicit(&heaps_pooled_count, 1, memory_order_relaxed);
}

static hz_heap_t *pool_pop_locked(void) {
  hz_heap_t *heap = heaps_pooled.first;
  if (heap != NULL) pool_remove_locked(heap);
  return heap;
}

static void pool_push_locked(hz_heap_t *heap) {
  HZ_LIST_PUSH_BACK(&heaps_pooled, first, last, heap, next_pooled, prev_pooled);
  atomic_fetch_add_explicit(&heaps_pooled_count, 1, memory_order_relaxed);
}

/* A pooled heap that holds nothing leaves both lists and is unmapped, its
 * counts kept; true if it did. Called by a collector holding the claim
 * (under the collect lock, so no other collector walks the list of all).
 * A thread that took it from the pool meanwhile keeps it. */
static bool heap_retire(hz_heap_t *heap) {
  pool_take();
  bool retire = heap->state == HZ_HEAP_POOLED &&
                atomic_load_explicit(&heaps_pooled_count,
                                     memory_order_relaxed) > POOL_KEEP &&
                hz_heap_holds_nothing(heap);
  if (retire) {
    pool_remove_locked(heap);
    HZ_LIST_REMOVE(&heaps_all, first, last, heap, next_all, prev_all);
    hz_heap_summarize_one(heap, &retired_counts);
    heaps_retired++;
  }
  pool_give();
  if (retire) hz_os_unmap(heap, HEAP_MAP_SIZE);
  return retire;
}

/* A pooled heap, else a new one (mapped with the pool lock released). */
static hz_heap_t *heap_take(void) {
  pool_take();
  hz_heap_t *heap = pool_pop_locked();
  if (heap != NULL)
    HZ_SHARED_SET(heap->state, HZ_HEAP_LIVE); /* a collector may read it */
  pool_give();
  if (heap == NULL) heap = heap_new();
  /* a collector may be emptying its bins */
  if (heap != NULL) hz_heap_wait_unclaimed(heap);
  return heap;
}

static void heap_pool_locked(hz_heap_t *heap) {
  HZ_SHARED_SET(heap->state, HZ_HEAP_POOLED);
  heap->collect_clean = false; /* what its thread left is to collect */
  pool_push_locked(heap);
}

/* Blocks freed to a pooled heap wait in its inbox and keep its pages
 * alive. Before a heap takes a fresh page, it collects the pooled heap at
 * the head of the pool (taken out of the pool meanwhile, so no thread can
 * adopt it) and rotates it to the tail: memory of exited threads is
 * recycled even when no new thread comes to adopt their heaps. At most
 * once a millisecond in the whole process: threads whose live sets swing
 * cut fresh pages by the thousand a second (mt_remote main R90/T16 without
 * back-pressure: 24,649 in 0.5 s), and a look at the pool for each took
 * the pool lock 15,270 times per million operations. */
#define RECLAIM_EVERY_NS 1000000

void hz_thread_reclaim_pooled(void) {
  static _Atomic uint64_t next_ns;
  if (atomic_load_explicit(&heaps_pooled_count, memory_order_relaxed) == 0)
    return;
  uint64_t now = hz_os_now_ns();
  uint64_t due = atomic_load_explicit(&next_ns, memory_order_relaxed);
  if (now < due || !atomic_compare_exchange_strong_explicit(
                       &next_ns, &due, now + RECLAIM_EVERY_NS,
                       memory_order_relaxed, memory_order_relaxed))
    return;
  if (!hz_lock_try(&collect_lock)) return; /* a round runs */
  uintptr_t token = (uintptr_t)&token;
  pool_take();
  hz_heap_t *heap = pool_pop_locked();
  bool claimed = heap != NULL &&
                 hz_heap_claim(heap, token, HZ_CLAIM_ANY, 0) != HZ_COLLECT_NONE;
  pool_give();
  if (claimed) {
    /* recycle only, no purge; the bins stay for the thread that adopts
     * the heap next (the background collector takes them when it idles) */
    hz_heap_collect(heap, false, HZ_BINS_KEEP);
    hz_heap_release_claim(heap);
  }
  if (heap != NULL) {
    pool_take();
    pool_push_locked(heap);
    pool_give();
  }
  hz_unlock(&collect_lock);
}

/* A collector claims this many heaps at a time. An owner that finds its
 * heap claimed waits until the collector releases it, and with more
 * threads than cores the collector gets little CPU: claiming every idle
 * heap at once left hundreds of threads waiting for one round. */
#define COLLECT_GROUP 4

/* Claim up to COLLECT_GROUP heaps worth collecting from `from` on, force a
 * barrier on every thread, collect those whose owner is outside its slow
 * paths as deep as their idleness says, retire pooled ones left empty, and
 * release the rest. Without membarrier only pooled heaps (no owner) are
 * safe. Returns the heap the next group starts from. The list of all is
 * changed only under the collect lock, which the caller holds. */
static hz_heap_t *collect_group(hz_heap_t *self, hz_heap_t *from,
                                bool idle_only, uint64_t now_ms) {
  uintptr_t token = (uintptr_t)&token;
  hz_heap_t *claimed[COLLECT_GROUP];
  hz_collect_depth_t depth[COLLECT_GROUP];
  bool pooled[COLLECT_GROUP];
  bool any_live = false; /* a claimed heap has an owner: needs the barrier */
  size_t n = 0;
  hz_heap_t *heap = from;
  pool_take();
  for (; heap != NULL && n < COLLECT_GROUP; heap = heap->next_all) {
    if (heap == self) continue;
    /* Pooled heaps past POOL_KEEP are not kept for threads to come: no
     * idleness to wait for. */
    bool surplus = heap->state == HZ_HEAP_POOLED &&
                   atomic_load_explicit(&heaps_pooled_count,
                                        memory_order_relaxed) > POOL_KEEP;
    hz_claim_t how = !idle_only ? HZ_CLAIM_ANY
                     : surplus  ? HZ_CLAIM_SURPLUS
                                : HZ_CLAIM_IDLE;
    depth[n] = hz_heap_claim(heap, token, how, now_ms);
    if (depth[n] == HZ_COLLECT_NONE) continue;
    pooled[n] = heap->state == HZ_HEAP_POOLED; /* stays ownerless */
    any_live |= !pooled[n];
    claimed[n++] = heap;
  }
  pool_give();
  if (n == 0) return heap;
  bool barrier = any_live && hz_os_barrier_all_threads();
  for (size_t i = 0; i < n; i++) {
    hz_heap_t *one = claimed[i];
    if (pooled[i]) {
      hz_heap_collect(one, true, HZ_BINS_ALL);
      if (heap_retire(one)) continue;
    } else if (barrier && hz_heap_owner_quiet(one)) {
      if (depth[i] == HZ_COLLECT_FULL)
        hz_heap_collect(one, true, HZ_BINS_BELOW_TOP);
      else
        hz_heap_collect(one, false, HZ_BINS_KEEP);
    }
    hz_heap_release_claim(one);
  }
  return heap;
}

static void collect_round(hz_heap_t *self, bool idle_only) {
  uint64_t now_ms = hz_os_now_ms();
  pool_take();
  hz_heap_t *next = heaps_all.first;
  pool_give();
  while (next != NULL)
    next = collect_group(self, next, idle_only, now_ms);
}

void hz_thread_collect(bool idle_only) {
  hz_lock(&collect_lock);
  collect_round(hz_heap_tls, idle_only);
  hz_unlock(&collect_lock);
}

void hz_thread_give_back_all(void) {
  hz_heap_t *heap = hz_heap_tls;
  if (heap != &hz_heap_empty) {
    hz_cpu_cache_drain(heap);
    hz_heap_trim(heap);
  }
  hz_thread_collect(false);
  hz_central_collect(true);
  hz_purge_run(true);
}

/* ---------------------------------------------------------------------------
 * The purge thread
 * ------------------------------------------------------------------------- */
static uint64_t purge_period_ms(void) {
  long delay = hz_option(HZ_OPTION_PURGE_DELAY_MS);
  uint64_t period = delay > 0 ? (uint64_t)delay / 4 : PURGE_PERIOD_MIN_MS;
  if (period < PURGE_PERIOD_MIN_MS) period = PURGE_PERIOD_MIN_MS;
  if (period > PURGE_PERIOD_MAX_MS) period = PURGE_PERIOD_MAX_MS;
  return period;
}

/* Sleep one period; false when no thread holds a heap any more, and then
 * the purge thread is marked stopped (a new one may start). */
static bool purge_thread_sleep(uint64_t period) {
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += (time_t)(period / 1000);
  until.tv_nsec += (long)(period % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L)
    until.tv_sec++, until.tv_nsec -= 1000000000L;
  pool_take();
  while (heaps_live > 0 &&
         pthread_cond_clockwait(&purge_wake, &pool_lock.mutex, CLOCK_MONOTONIC,
                                &until) != ETIMEDOUT) {
  }
  bool keep = heaps_live > 0;
  if (!keep) {
    atomic_store_explicit(&purge_thread_started, false, memory_order_relaxed);
    hz_purge_set_background(false);
  }
  pool_give();
  return keep;
}

/* Every block in the CPU caches and depots goes home, through a heap
 * taken from the pool for the purpose. */
static void purge_drain_caches(void) {
  hz_heap_t *heap = heap_take();
  if (heap == NULL) return;
  hz_cpu_cache_drain(heap);
  hz_heap_flush(heap);
  pool_take();
  heap_pool_locked(heap);
  pool_give();
}

/* The CPU caches and depots hold the shared pages' blocks. Once no heap
 * has taken a slow path for HZ_IDLE_FULL_MS, the purge thread empties them
 * through a borrowed heap, which sends the blocks to their class heaps;
 * the class heaps' collection and the purge then give their pages back,
 * as for any idle memory. */
/* [condition: idle-drain] */
static void purge_drain_idle_caches(void) {
  static uint64_t seen_activity, quiet_since_ms;
  uint64_t now_ms = hz_os_now_ms(), activity = 0;
  pool_take();
  for (hz_heap_t *h = heaps_all.first; h != NULL; h = h->next_all)
    activity += atomic_load_explicit(&h->activity, memory_order_relaxed);
  pool_give();
  if (activity != seen_activity) {
    seen_activity = activity;
    quiet_since_ms = now_ms;
    return;
  }
  if (now_ms - quiet_since_ms < HZ_IDLE_FULL_MS || hz_cpu_cache_blocks() == 0)
    return;
  purge_drain_caches();
}

/* A round of the class decision (decision.h) over what every heap
 * counted. A class that leaves the shared pages leaves its blocks in the
 * CPU caches and depots: they go to their class heaps at once. */
static void purge_judge_classes(void) {
  if (!hz_decision_rounds_on()) return;
  hz_decision_sums_t sums;
  memset(&sums, 0, sizeof sums);
  pool_take();
  for (hz_heap_t *h = heaps_all.first; h != NULL; h = h->next_all)
    hz_decision_add_heap(&sums, h);
  size_t threads = heaps_live;
  pool_give();
  /* [condition: class-left-drain] */
  if (hz_decision_judge(&sums, threads)) purge_drain_caches();
}

static void *purge_thread_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "hz-purge");
  /* If this is the last thread, glibc runs the exit handlers here; what
   * they allocate borrows a pooled heap, and starts no thread. */
  thread_exiting = true;
  exit_rounds = PTHREAD_DESTRUCTOR_ITERATIONS; /* borrows, never binds */
  hz_tool_quiet(true); /* it reads and writes free blocks only */
  uint64_t period = purge_period_ms();
  while (purge_thread_sleep(period)) {
    purge_drain_idle_caches();
    purge_judge_classes();
    hz_thread_collect(true);
    hz_central_collect(false);
    hz_purge_run(false);
    hz_segment_densify();
  }
  return NULL;
}

/* Called with no lock held, by a thread that has its heap (pthread_create
 * allocates). */
static void purge_thread_start(void) {
  if (!hz_option_enabled(HZ_OPTION_PURGE_THREAD) ||
      hz_option(HZ_OPTION_PURGE_DELAY_MS) < 0)
    return;
  bool expected = false;
  if (!atomic_compare_exchange_strong(&purge_thread_started, &expected, true))
    return;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, (size_t)256 << 10);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t th;
  int saved = errno;
  if (pthread_create(&th, &attr, purge_thread_main, NULL) == 0)
    hz_purge_set_background(true);
  errno = saved;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
}

/* ---------------------------------------------------------------------------
 * Thread binding
 * ------------------------------------------------------------------------- */
static void thread_exit(void *value) {
  hz_heap_t *heap = value;
  hz_cpu_cache_thread_exit();
  thread_exiting = true;
  exit_rounds++;
  hz_tool_quiet(true); /* parking writes links into free blocks */
  if (heap == NULL || heap != hz_heap_tls) return;
  hz_heap_park(heap);
  hz_heap_tls = (hz_heap_t *)&hz_heap_empty;
  hz_heap_own = NULL;
  pool_take();
  heap_pool_locked(heap);
  HZ_SHARED_ADD(heaps_live, -1);
  bool last = heaps_live == 0;
  pool_give();
  /* After the lock: a wake is a system call. The purge thread reads
   * heaps_live under the lock before it waits, so it cannot miss it. */
  if (last) pthread_cond_signal(&purge_wake);
}

static void fork_prepare(void) {
  hz_prof_fork_wait_unwinds(); /* first: an unwinding thread may allocate */
  hz_cpu_cache_fork_prepare();
  hz_lock(&collect_lock);
  hz_heap_fork_prepare();
  hz_central_fork_prepare(); /* after the pool: the report takes both */
  hz_segment_fork_prepare();
  hz_large_fork_prepare();
  hz_prof_fork_prepare();
  hz_guard_fork_prepare();
}

static void fork_parent(void) {
  hz_guard_fork_parent();
  hz_prof_fork_parent();
  hz_large_fork_parent();
  hz_segment_fork_parent();
  hz_central_fork_parent();
  hz_heap_fork_parent();
  hz_unlock(&collect_lock);
  hz_cpu_cache_fork_parent();
}

/* The child has one thread: no purge thread until it makes another. */
static void fork_child(void) {
  hz_cpu_cache_fork_child();
  hz_guard_fork_child();
  hz_prof_fork_child();
  hz_large_fork_child();
  hz_segment_fork_child();
  hz_central_fork_child();
  hz_heap_fork_child(hz_heap_tls);
  hz_lock_reinit(&collect_lock);
  pthread_cond_init(&purge_wake, NULL);
  heaps_live = heaps_bound = hz_heap_tls != &hz_heap_empty;
  atomic_store_explicit(&purge_thread_started, false, memory_order_relaxed);
  hz_purge_set_background(false);
  hz_lock_depth_reset(); /* after every lock's own reset */
}

static void install_hooks(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&hooks_state, &expected, 1)) {
    while (atomic_load_explicit(&hooks_state, memory_order_acquire) != 2) {
    }
    return;
  }
  pthread_key_create(&thread_key, thread_exit);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  atomic_store_explicit(&hooks_state, 2, memory_order_release);
}

/* Make `heap`, just taken, the thread's own; false if a signal handler's
 * malloc, landing while heap_take mapped it, gave the thread one already:
 * that one stays (bound and counted) and `heap` goes to the pool. Bound
 * over it, the first would stay live for ever, and with heaps_live never
 * back at 0 the purge thread would keep the process alive. */
static bool thread_bind(hz_heap_t *heap) {
  if (HZ_UNLIKELY(hz_heap_tls != &hz_heap_empty)) {
    pool_take();
    heap_pool_locked(heap);
    pool_give();
    return false;
  }
  hz_heap_tls = heap;
  hz_heap_own = heap;
  return true;
}

hz_heap_t *hz_thread_attach(void) {
  process_init();
  hz_heap_t *heap = heap_take();
  if (heap == NULL) return NULL;
  if (!thread_bind(heap)) return hz_heap_tls;
  install_hooks();
  pthread_setspecific(thread_key, heap);
  pool_take();
  HZ_SHARED_ADD(heaps_live, 1);
  bool threaded = ++heaps_bound >= 2;
  pool_give();
  if (threaded &&
      !atomic_load_explicit(&purge_thread_started, memory_order_relaxed))
    purge_thread_start();
  return heap;
}

/* Destructors of other keys run after ours and may allocate. The thread
 * takes a heap again and sets our key once more, so glibc runs our
 * destructor in its next round and parks the heap: a thread whose exit
 * allocates pays for one heap, not a borrowed one per call. In the last
 * round our destructor would not run again: NULL then. */
static hz_heap_t *thread_rebind_exiting(void) {
  if (exit_rounds >= PTHREAD_DESTRUCTOR_ITERATIONS) return NULL;
  hz_heap_t *heap = heap_take();
  if (heap == NULL) return NULL;
  if (!thread_bind(heap)) return hz_heap_tls;
  pthread_setspecific(thread_key, heap);
  pool_take();
  HZ_SHARED_ADD(heaps_live, 1);
  pool_give();
  return heap;
}

hz_heap_t *hz_thread_attach_for_free(void) {
  return thread_exiting ? thread_rebind_exiting() : hz_thread_attach();
}

/* ---------------------------------------------------------------------------
 * Inside the allocator
 * ------------------------------------------------------------------------- */
/* A malloc or free that finds the thread inside the allocator
 * (hz_heap_inside): a signal handler's, which interrupted the thread while
 * it held one of the allocator's locks or was inside a slow path of its
 * heap. Waiting for a lock would wait for itself (or for a thread that
 * waits for a lock this one holds), and the heap is half changed. The
 * malloc gets a mapping of its own (large box, no lock), the free sends a
 * small block to its page's owner's inbox and a large block's mapping back
 * to the kernel: no lock, and nothing of the thread's heap. The secure
 * variants say so in one line and stop: malloc is not async-signal-safe. */
static HZ_NOINLINE void thread_reentered(const hz_heap_t *heap) {
  hz_check_report("re-entered slow path",
                  hz_heap_own != NULL ? hz_heap_own : heap,
                  "a lock or slow path of the allocator, held by the thread "
                  "a signal handler interrupted to call malloc or free; "
                  "malloc is not async-signal-safe");
}

static HZ_NOINLINE void *thread_malloc_inside(size_t size, size_t align,
                                              bool zero,
                                              const hz_heap_t *heap) {
  if (HZ_SECURE) thread_reentered(heap);
  return hz_large_alloc_fresh(size, align, zero);
}

static bool thread_free_far(void *p, hz_segment_t **seg, hz_page_t **page);

static HZ_NOINLINE void thread_free_inside(void *p, const hz_heap_t *heap,
                                           hz_segment_t *seg, hz_page_t *page) {
  if (HZ_SECURE) thread_reentered(heap);
  if (seg == NULL && !thread_free_far(p, &seg, &page)) return;
  hz_heap_free_inside(seg, hz_segment_page_first(page), p);
}

/* ---------------------------------------------------------------------------
 * The slow paths of the fast paths (fast.h)
 * ------------------------------------------------------------------------- */
/* A request the kernel refused may fit once the process gives back what
 * it holds free (cached segments and mappings hold address space, which a
 * limit like ulimit -v counts): one more try after that. */
static HZ_NOINLINE void *thread_retry(hz_heap_t *heap, size_t size,
                                      size_t align, bool zero) {
  if (size > HZ_REQUEST_MAX) return NULL;
  hz_thread_give_back_all();
  void *p = heap == NULL ? hz_large_alloc(size, align, zero)
                         : hz_heap_malloc_small(heap, size);
  if (p == NULL) errno = ENOMEM;
  return p;
}

void *hz_thread_large_alloc(size_t size, size_t align, bool zero) {
  if (HZ_UNLIKELY(hz_heap_inside(hz_heap_tls)))
    return thread_malloc_inside(size, align, zero, hz_heap_tls);
  void *p = hz_large_alloc(size, align, zero);
  if (HZ_UNLIKELY(p == NULL)) p = thread_retry(NULL, size, align, zero);
  if (HZ_UNLIKELY(hz_prof_active) && p != NULL) hz_prof_large(p, size);
  return p;
}

/* A heap that took a page from the segments (none spare) has pooled
 * heaps give theirs back, one at a time, so the next ones need no new
 * segment. */
void *hz_thread_malloc_slow(size_t size, hz_heap_t *heap) {
  if (HZ_UNLIKELY(hz_lock_depth != 0))
    return thread_malloc_inside(size, 0, false, heap);
  if (heap->state == HZ_HEAP_EMPTY) {
    if (HZ_UNLIKELY(hz_heap_hidden(heap)))
      return thread_malloc_inside(size, 0, false, heap);
    return hz_thread_malloc_unattached(size);
  }
  hz_purge_tick();
  if (size > HZ_SMALL_MAX) return hz_thread_large_alloc(size, 0, false);
  uint64_t pages = heap->stats.pages_acquired;
  void *p = hz_central_shares(hz_sizeclass_of(size))
                ? hz_central_malloc(heap, size)
                : hz_heap_malloc_small(heap, size);
  if (heap->stats.pages_acquired != pages) hz_thread_reclaim_pooled();
  return HZ_LIKELY(p != NULL) ? p : thread_retry(heap, size, 0, false);
}

/* A free outside the arena: a large block or a segment mapped on its own
 * (then the generic path), or a pointer that is not ours. */
static bool thread_free_far(void *p, hz_segment_t **seg, hz_page_t **page) {
  unsigned page_shift = hz_segment_page_shift_of(p);
  if (page_shift == 0) {
    if (hz_guard_holds(p))
      hz_guard_free(p);
    else
      hz_check_report("invalid free", p, "not allocated by hakozuna");
    return false;
  }
  *seg = hz_segment_base(p);
  *page = hz_segment_page_at(*seg, p, page_shift);
  return true;
}

/* A thread without a heap stays without one for this malloc or free: a
 * young thread of a crowded program (decision.h). */
static bool thread_stays_alone(void) {
  return hz_decision_stays_alone(HZ_SHARED_GET(heaps_live), thread_exiting);
}

/* A thread that only frees gets a heap too, so its frees travel home in
 * batches like any other, and it counts as a thread of the program: one
 * that frees nothing but large blocks starts the purge thread, which gives
 * them back. Past its exit handler it has none, nor while it stays alone. */
void hz_thread_free_slow(void *p, hz_heap_t *heap, hz_segment_t *seg,
                         hz_page_t *page) {
  if (HZ_UNLIKELY(hz_heap_inside(heap))) {
    thread_free_inside(p, heap, seg, page);
    return;
  }
  if (seg == NULL && !thread_free_far(p, &seg, &page)) return;
  if (heap->state == HZ_HEAP_EMPTY && !thread_stays_alone()) {
    hz_heap_t *own = hz_thread_attach_for_free();
    if (own != NULL) heap = own;
  }
  page = hz_segment_page_first(page); /* p past a page's first slice */
  hz_block_t *block = hz_heap_free_generic(heap, seg, page, p);
  /* [condition: orphan-free] */
  if (block != NULL) hz_heap_free_orphan(page, block); /* no heap to get */
}

/* A thread without a heap gets one. Past our destructor's last round a
 * heap bound again would be left with a dead thread, so such calls (and
 * the purge thread's) borrow a pooled heap and give it back. */
void *hz_thread_malloc_unattached(size_t size) {
  if (size <= HZ_SMALL_MAX && thread_stays_alone()) {
    void *p = hz_central_malloc_alone(size);
    if (p != NULL) return p;
  }
  /* [condition: exiting-thread] */
  if (thread_exiting) {
    hz_heap_t *again = thread_rebind_exiting();
    if (again != NULL) return hz_thread_malloc_slow(size, again);
  }
  hz_heap_t *heap = thread_exiting ? heap_take() : hz_thread_attach();
  if (heap == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = hz_thread_malloc_slow(size, heap);
  if (thread_exiting) {
    hz_heap_flush(heap);
    pool_take();
    heap_pool_locked(heap);
    pool_give();
  }
  return p;
}

/* Register the thread key and fork handlers as early as possible: fork
 * handlers registered before ours would run while our locks are held. */
__attribute__((constructor)) static void thread_process_start(void) {
  if (hz_heap_tls == &hz_heap_empty) hz_thread_attach();
  /* After the options, before the program's first malloc: heaps made
   * from now on count down to samples from the start. */
  hz_prof_start();
  hz_guard_start();
  if ((hz_prof_active || hz_guard_active) && hz_heap_tls != &hz_heap_empty)
    hz_heap_arm_sampling(hz_heap_tls);
  hz_cpu_cache_init(!hz_prof_active);
  hz_decision_start();
}

static bool pool_contains_locked(const hz_heap_t *heap) {
  for (const hz_heap_t *h = heaps_pooled.first; h != NULL; h = h->next_pooled)
    if (h == heap) return true;
  return false;
}

void hz_thread_locks_taken(uint64_t *pool, uint64_t *collect,
                           uint64_t *central) {
  *pool = hz_lock_taken(&pool_lock);
  *collect = hz_lock_taken(&collect_lock);
  *central = hz_central_lock_taken();
}

/* ---------------------------------------------------------------------------
 * fork
 * ------------------------------------------------------------------------- */
void hz_heap_fork_prepare(void) { pool_take(); }
void hz_heap_fork_parent(void) { pool_give(); }

/* Heaps of threads that do not exist in the child may have been in the
 * middle of a change (their owner, or a reclaim, works without the pool
 * lock), so the child never touches them again: they are abandoned, and
 * blocks freed to them stay in their inboxes. Pooled heaps are intact (the
 * pool lock was held across fork). */
void hz_heap_fork_child(hz_heap_t *survivor) {
  hz_lock_reinit(&pool_lock);
  for (hz_heap_t *heap = heaps_all.first; heap != NULL; heap = heap->next_all) {
    bool pooled = heap->state == HZ_HEAP_POOLED && pool_contains_locked(heap);
    if (heap != survivor && heap->state != HZ_HEAP_EMPTY && !pooled)
      heap->state = HZ_HEAP_ABANDONED;
  }
}

/* Each heap's counts as of its owner's last slow path, the caller's own as
 * of now. No collector runs meanwhile: it would write other heaps'
 * counters and pages. Owners keep writing theirs, which they share
 * (HZ_SHARED_SET). */
void hz_thread_summarize(hz_heap_summary_t *out) {
  memset(out, 0, sizeof *out);
  if (hz_heap_tls != &hz_heap_empty) hz_heap_publish_all(hz_heap_tls);
  hz_lock(&collect_lock);
  pool_take();
  *out = retired_counts;
  for (hz_heap_t *heap = heaps_all.first; heap != NULL; heap = heap->next_all) {
    hz_heap_summarize_one(heap, out);
    out->heaps_pooled += heap->state == HZ_HEAP_POOLED;
  }
  hz_central_summarize(out);
  out->heaps_total = heaps_made;
  out->heaps_retired = heaps_retired;
  pool_give();
  hz_segment_summarize(&out->pages_in_use, &out->blocks_live, &out->bytes_live,
                       &out->blocks_free_on_pages);
  hz_cpu_cache_stats(&out->front);
  hz_central_count(&out->front.shared_classes, &out->front.class_turns);
  hz_unlock(&collect_lock);
}
