/* thread_pool: the heaps of the thread box. A heap outlives its thread
 * in the pool: a block's page may name it long after its thread exited,
 * and a remote free must always find its inbox. The pool keeps POOL_KEEP
 * heaps for threads to come; the collector takes any beyond at once. Once
 * it finds a pooled heap holding nothing (no page, no block on its way to
 * it) and the pool has more than POOL_KEEP, the heap is retired: taken off
 * the lists and unmapped, its counts kept for the stats report. Also the
 * collection rounds over every heap (the purge thread's, malloc_trim's),
 * the pool's side of fork and the report's sum over the heaps. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <string.h>

#include "class_heap.h"
#include "cpu_cache.h"
#include "decision.h"
#include "ladder.h"
#include "list.h"
#include "os.h"
#include "purge.h"
#include "thread_parts.h"

/* Each heap is a mapping of its own, so a retired heap's memory goes back
 * whole. */
#define HEAP_MAP_SIZE HZ_ALIGN_UP(sizeof(hz_heap_t), (size_t)4096)
/* Pooled heaps kept however empty, so threads that come and go take a
 * heap without mapping one: below this many in the pool, none retires. */
#define POOL_KEEP 8
hz_lock_t hz_thread_pool_lock = HZ_LOCK_INIT(HZ_LOCK_ID_POOL);

/* The pool lock. A signal handler whose malloc or free interrupts a
 * thread holding it (its first allocation, its exit) never asks for it
 * again: the thread is inside the allocator (hz_heap_inside), and the
 * call takes the routes that need no lock (thread.c, "Inside the
 * allocator"). */
void hz_thread_pool_take(void) { hz_lock(&hz_thread_pool_lock); }

void hz_thread_pool_give(void) { hz_unlock(&hz_thread_pool_lock); }
hz_heap_list_t hz_thread_heaps;     /* every heap not retired, by next_all */
static hz_heap_list_t heaps_pooled; /* FIFO by next_pooled */
static _Atomic size_t heaps_pooled_count;
static size_t heaps_made;    /* heaps mapped so far (pool lock) */
static size_t heaps_retired; /* of those, retired (pool lock) */
/* What retired heaps counted, for the stats report (pool lock). */
static hz_heap_summary_t retired_counts;
/* One collection round at a time (purge thread, malloc_trim, reclaim). */
hz_lock_t hz_thread_collect_lock = HZ_LOCK_INIT(HZ_LOCK_ID_COLLECT);

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
  hz_thread_pool_take();
  HZ_LIST_PUSH_FRONT(&hz_thread_heaps, first, last, heap, next_all, prev_all);
  heaps_made++;
  hz_thread_pool_give();
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
  hz_thread_pool_take();
  bool retire = heap->state == HZ_HEAP_POOLED &&
                atomic_load_explicit(&heaps_pooled_count,
                                     memory_order_relaxed) > POOL_KEEP &&
                hz_heap_holds_nothing(heap);
  if (retire) {
    pool_remove_locked(heap);
    HZ_LIST_REMOVE(&hz_thread_heaps, first, last, heap, next_all, prev_all);
    hz_heap_summarize_one(heap, &retired_counts);
    heaps_retired++;
  }
  hz_thread_pool_give();
  if (retire) hz_os_unmap(heap, HEAP_MAP_SIZE);
  return retire;
}

/* A pooled heap, else a new one (mapped with the pool lock released). */
hz_heap_t *hz_thread_heap_take(void) {
  hz_thread_pool_take();
  hz_heap_t *heap = pool_pop_locked();
  if (heap != NULL)
    HZ_SHARED_SET(heap->state, HZ_HEAP_LIVE); /* a collector may read it */
  hz_thread_pool_give();
  if (heap == NULL) heap = heap_new();
  /* a collector may be emptying its bins */
  if (heap != NULL) hz_heap_wait_unclaimed(heap);
  return heap;
}

void hz_thread_heap_pool_locked(hz_heap_t *heap) {
  HZ_SHARED_SET(heap->state, HZ_HEAP_POOLED);
  heap->pages.collect_clean = false; /* what its thread left is to collect */
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
  if (!hz_lock_try(&hz_thread_collect_lock)) return; /* a round runs */
  uintptr_t token = (uintptr_t)&token;
  hz_thread_pool_take();
  hz_heap_t *heap = pool_pop_locked();
  bool claimed = heap != NULL &&
                 hz_heap_claim(heap, token, HZ_CLAIM_ANY, 0) != HZ_COLLECT_NONE;
  hz_thread_pool_give();
  if (claimed) {
    /* recycle only, no purge; the bins stay for the thread that adopts
     * the heap next (the background collector takes them when it idles) */
    hz_heap_collect(heap, false, HZ_BINS_KEEP);
    hz_heap_release_claim(heap);
  }
  if (heap != NULL) {
    hz_thread_pool_take();
    pool_push_locked(heap);
    hz_thread_pool_give();
  }
  hz_unlock(&hz_thread_collect_lock);
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
  hz_thread_pool_take();
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
  hz_thread_pool_give();
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
  hz_thread_pool_take();
  hz_heap_t *next = hz_thread_heaps.first;
  hz_thread_pool_give();
  while (next != NULL)
    next = collect_group(self, next, idle_only, now_ms);
}

void hz_thread_collect(bool idle_only) {
  hz_lock(&hz_thread_collect_lock);
  collect_round(hz_heap_tls, idle_only);
  hz_unlock(&hz_thread_collect_lock);
}

void hz_thread_give_back_all(void) {
  hz_heap_t *heap = hz_heap_tls;
  if (heap != &hz_heap_empty) {
    hz_ladder_drain(heap);
    hz_heap_trim(heap);
  }
  hz_thread_collect(false);
  hz_class_heaps_collect(true);
  hz_purge_run(true);
}

static bool pool_contains_locked(const hz_heap_t *heap) {
  for (const hz_heap_t *h = heaps_pooled.first; h != NULL; h = h->next_pooled)
    if (h == heap) return true;
  return false;
}

void hz_thread_locks_taken(uint64_t *pool, uint64_t *collect,
                           uint64_t *class_heap) {
  *pool = hz_lock_taken(&hz_thread_pool_lock);
  *collect = hz_lock_taken(&hz_thread_collect_lock);
  *class_heap = hz_class_heaps_lock_taken();
}

/* ---------------------------------------------------------------------------
 * fork
 * ------------------------------------------------------------------------- */
void hz_heap_fork_prepare(void) { hz_thread_pool_take(); }
void hz_heap_fork_parent(void) { hz_thread_pool_give(); }

/* Heaps of threads that do not exist in the child may have been in the
 * middle of a change (their owner, or a reclaim, works without the pool
 * lock), so the child never touches them again: they are abandoned, and
 * blocks freed to them stay in their inboxes. Pooled heaps are intact (the
 * pool lock was held across fork). */
void hz_heap_fork_child(hz_heap_t *survivor) {
  hz_lock_reinit(&hz_thread_pool_lock);
  for (hz_heap_t *heap = hz_thread_heaps.first; heap != NULL;
       heap = heap->next_all) {
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
  hz_lock(&hz_thread_collect_lock);
  hz_thread_pool_take();
  *out = retired_counts;
  for (hz_heap_t *heap = hz_thread_heaps.first; heap != NULL;
       heap = heap->next_all) {
    hz_heap_summarize_one(heap, out);
    out->heaps_pooled += heap->state == HZ_HEAP_POOLED;
  }
  hz_class_heaps_summarize(out);
  out->heaps_total = heaps_made;
  out->heaps_retired = heaps_retired;
  hz_thread_pool_give();
  hz_segment_summarize(&out->pages_in_use, &out->blocks_live, &out->bytes_live,
                       &out->blocks_free_on_pages);
  hz_ladder_stats(&out->front);
  hz_decision_count(&out->front.shared_classes, &out->front.class_turns);
  hz_unlock(&hz_thread_collect_lock);
}
