/* thread: process start-up, heap <-> thread binding, fork handling, the
 * purge thread, the slow paths of the fast paths, and the routes of a
 * malloc or free that finds its thread inside the allocator (a signal
 * handler's: "Inside the allocator" below). The heaps themselves (the
 * pool, the list of all, the collection rounds) are thread_pool.c's.
 *
 * Start-up uses only the os and options boxes. pthread_key_create,
 * pthread_atfork and pthread_setspecific are called only once the calling
 * thread's heap is installed, so any allocation they make is served.
 *
 * The purge thread starts when a second thread gets a heap (never in a
 * single-threaded program) unless HZ_PURGE_THREAD=0 or the purge delay is
 * -1. Every quarter of the delay it looks at every heap, collecting those
 * of idle threads as far as their idleness calls for (hz_heap_claim), runs
 * the class decision's round (decision.h) and the purge that fell due, so
 * memory comes back while the program sleeps. It blocks every signal and
 * never allocates. It must never keep a process alive: when the last
 * thread with a heap exits (the main thread called pthread_exit, or the
 * thread a fork child was made from returned), it is woken and ends too,
 * so the process ends as it would without hakozuna; a thread that gets a
 * heap later starts it again. */
#define _GNU_SOURCE
#include "thread.h"

#include "class_heap.h"
#include "cpu_cache.h"
#include "decision.h"
#include "depot.h"
#include "ladder.h"
#include "thread_parts.h"

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

/* The purge thread wakes every quarter of the purge delay, within these. */
#define PURGE_PERIOD_MIN_MS 10
#define PURGE_PERIOD_MAX_MS 250
static pthread_key_t thread_key;
static HZ_TLS bool thread_exiting;  /* our key destructor has run */
static HZ_TLS unsigned exit_rounds; /* times it ran (once per round) */
static _Atomic int process_state;   /* 0 new, 1 starting, 2 ready */
static _Atomic int hooks_state;     /* 0 none, 1 installing, 2 installed */
static size_t heaps_bound;          /* threads that got a heap (pool lock) */
static size_t heaps_live; /* threads holding one now (written under the pool
                           * lock; the purge thread reads it without) */
/* Wakes the purge thread early (with the pool lock) when heaps_live drops to
 * 0, so it ends at once. */
static pthread_cond_t purge_wake = PTHREAD_COND_INITIALIZER;
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
  hz_thread_pool_take();
  while (heaps_live > 0 &&
         pthread_cond_clockwait(&purge_wake, &hz_thread_pool_lock.mutex,
                                CLOCK_MONOTONIC, &until) != ETIMEDOUT) {
  }
  bool keep = heaps_live > 0;
  if (!keep) {
    atomic_store_explicit(&purge_thread_started, false, memory_order_relaxed);
    hz_purge_set_background(false);
  }
  hz_thread_pool_give();
  return keep;
}

/* Every block in the CPU caches and depots goes home, through a heap
 * taken from the pool for the purpose. */
static void purge_drain_caches(void) {
  hz_heap_t *heap = hz_thread_heap_take();
  if (heap == NULL) return;
  hz_ladder_drain(heap);
  hz_heap_flush(heap);
  hz_thread_pool_take();
  hz_thread_heap_pool_locked(heap);
  hz_thread_pool_give();
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
  hz_thread_pool_take();
  for (hz_heap_t *h = hz_thread_heaps.first; h != NULL; h = h->next_all)
    activity += atomic_load_explicit(&h->pages.activity, memory_order_relaxed);
  hz_thread_pool_give();
  if (activity != seen_activity) {
    seen_activity = activity;
    quiet_since_ms = now_ms;
    return;
  }
  if (now_ms - quiet_since_ms < HZ_IDLE_FULL_MS || hz_ladder_blocks() == 0)
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
  hz_thread_pool_take();
  for (hz_heap_t *h = hz_thread_heaps.first; h != NULL; h = h->next_all)
    hz_decision_add_heap(&sums, h);
  size_t threads = heaps_live;
  hz_thread_pool_give();
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
    hz_class_heaps_collect(false);
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
  hz_thread_pool_take();
  hz_thread_heap_pool_locked(heap);
  HZ_SHARED_ADD(heaps_live, -1);
  bool last = heaps_live == 0;
  hz_thread_pool_give();
  /* After the lock: a wake is a system call. The purge thread reads
   * heaps_live under the lock before it waits, so it cannot miss it. */
  if (last) pthread_cond_signal(&purge_wake);
}

static void fork_prepare(void) {
  hz_prof_fork_wait_unwinds(); /* first: an unwinding thread may allocate */
  hz_cpu_cache_fork_prepare();
  hz_depot_fork_prepare();
  hz_lock(&hz_thread_collect_lock);
  hz_heap_fork_prepare();
  hz_class_heaps_fork_prepare(); /* after the pool: the report takes both */
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
  hz_class_heaps_fork_parent();
  hz_heap_fork_parent();
  hz_unlock(&hz_thread_collect_lock);
  hz_depot_fork_parent();
  hz_cpu_cache_fork_parent();
}

/* The child has one thread: no purge thread until it makes another. */
static void fork_child(void) {
  hz_cpu_cache_fork_child();
  hz_depot_fork_child();
  hz_guard_fork_child();
  hz_prof_fork_child();
  hz_large_fork_child();
  hz_segment_fork_child();
  hz_class_heaps_fork_child();
  hz_heap_fork_child(hz_heap_tls);
  hz_lock_reinit(&hz_thread_collect_lock);
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
 * malloc, landing while hz_thread_heap_take mapped it, gave the thread one
 * already: that one stays (bound and counted) and `heap` goes to the pool.
 * Bound over it, the first would stay live for ever, and with heaps_live never
 * back at 0 the purge thread would keep the process alive. */
static bool thread_bind(hz_heap_t *heap) {
  if (HZ_UNLIKELY(hz_heap_tls != &hz_heap_empty)) {
    hz_thread_pool_take();
    hz_thread_heap_pool_locked(heap);
    hz_thread_pool_give();
    return false;
  }
  hz_heap_tls = heap;
  hz_heap_own = heap;
  return true;
}

hz_heap_t *hz_thread_attach(void) {
  process_init();
  hz_heap_t *heap = hz_thread_heap_take();
  if (heap == NULL) return NULL;
  if (!thread_bind(heap)) return hz_heap_tls;
  install_hooks();
  pthread_setspecific(thread_key, heap);
  hz_thread_pool_take();
  HZ_SHARED_ADD(heaps_live, 1);
  bool threaded = ++heaps_bound >= 2;
  hz_thread_pool_give();
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
  hz_heap_t *heap = hz_thread_heap_take();
  if (heap == NULL) return NULL;
  if (!thread_bind(heap)) return hz_heap_tls;
  pthread_setspecific(thread_key, heap);
  hz_thread_pool_take();
  HZ_SHARED_ADD(heaps_live, 1);
  hz_thread_pool_give();
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
  uint64_t pages = heap->pages.stats.pages_acquired;
  void *p = hz_decision_shares(hz_sizeclass_of(size))
                ? hz_ladder_malloc(heap, size)
                : hz_heap_malloc_small(heap, size);
  if (heap->pages.stats.pages_acquired != pages) hz_thread_reclaim_pooled();
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
    void *p = hz_class_heap_malloc(size);
    if (p != NULL) return p;
  }
  /* [condition: exiting-thread] */
  if (thread_exiting) {
    hz_heap_t *again = thread_rebind_exiting();
    if (again != NULL) return hz_thread_malloc_slow(size, again);
  }
  hz_heap_t *heap = thread_exiting ? hz_thread_heap_take() : hz_thread_attach();
  if (heap == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = hz_thread_malloc_slow(size, heap);
  if (thread_exiting) {
    hz_heap_flush(heap);
    hz_thread_pool_take();
    hz_thread_heap_pool_locked(heap);
    hz_thread_pool_give();
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
  hz_depot_init();
  hz_cpu_cache_init(!hz_prof_active);
  hz_decision_start();
}
