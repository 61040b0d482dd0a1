/* cpu_cache: the per-CPU front end's slow paths (see cpu_cache.h): the
 * start-up decision, the depots between caches, batches to and from the
 * thread's heap, and draining every cache (membarrier with rseq: a
 * section running on a CPU whose cache is being closed is aborted). */
#define _GNU_SOURCE
#include "cpu_cache.h"

#include <linux/membarrier.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lock.h"
#include "options.h"
#include "os.h"
#include "segment.h"
#include "sizeclass.h"

#if defined(__x86_64__)
#include <sys/rseq.h>
#endif

#ifndef AT_RSEQ_FEATURE_SIZE
#define AT_RSEQ_FEATURE_SIZE 27
#endif

_Static_assert(offsetof(hz_cpu_cache_t, closed) == HZ_CPU_CLOSED_OFFSET,
               "the sections read `closed` here");
_Static_assert(offsetof(hz_cpu_cache_t, cap) == HZ_CPU_CAP_OFFSET,
               "the push section reads `cap` here");
_Static_assert(offsetof(hz_cpu_cache_t, slots) == HZ_CPU_SLOTS_OFFSET,
               "the sections read the slots here");
_Static_assert(sizeof(hz_cpu_cache_t) == 1 << HZ_CPU_CACHE_LOG2,
               "the sections find a cache with a shift");
_Static_assert(sizeof(((hz_cpu_cache_t *)0)->slots[0]) == 1 << HZ_CPU_ROW_LOG2,
               "the sections find a row with a shift");

bool hz_cpu_cache_on;
hz_cpu_cache_t *hz_cpu_caches;
long hz_cpu_id_offset;
long hz_cpu_rseq_offset;
HZ_TLS uint64_t hz_cpu_restarts;
static uint64_t exited_restarts; /* of threads that exited */
static long cache_count;

/* ---------------------------------------------------------------------------
 * Depots: per class, up to DEPOT_BATCHES batches that one CPU's cache gave
 * and another's takes, so blocks freed on one CPU serve mallocs on another
 * without going home.
 * ------------------------------------------------------------------------- */
#define DEPOT_BATCHES 8

typedef struct {
  hz_lock_t lock;
  uint32_t batches; /* written under the lock, read with HZ_SHARED_GET */
  void *slots[DEPOT_BATCHES][HZ_CPU_BATCH];
} depot_t;

static depot_t depots[HZ_CPU_CLASSES];
static hz_lock_t drain_lock = HZ_LOCK_INIT; /* one drain at a time */

static struct {
  uint64_t overflows, depot_puts, depot_takes, drains, bypassed, churn_rounds;
} counts;

#define COUNT(field) __atomic_add_fetch(&counts.field, 1, __ATOMIC_RELAXED)

/* A class's stack: HZ_CPU_SLOTS blocks, or as many as HZ_CPU_CLASS_BYTES
 * holds (16 KiB blocks: 16, 32 KiB: 8). */
static uint32_t class_stack(size_t cls) {
  size_t fit = HZ_CPU_CLASS_BYTES / hz_sizeclass_block_size((uint8_t)cls);
  return fit < HZ_CPU_SLOTS ? (uint32_t)fit : HZ_CPU_SLOTS;
}

/* The blocks a batch of the class moves: half its stack. */
static uint32_t class_batch(size_t cls) { return class_stack(cls) / 2; }

/* ---------------------------------------------------------------------------
 * One-way classes: when a class's full caches send twice as many batches
 * back to the heaps as empty caches take from its depot, its blocks are freed
 * on other CPUs than the ones that allocate them (producers and consumers): the
 * caches only delay them on their way home and hand them out in no order. Such
 * a class bypasses the caches (its frees go home as without them) until a
 * probe round of the purge thread (one in PROBE_EVERY, below) puts it back
 * on to look again. Let back on every round instead, it sent 0.1-1.2% of a
 * producer's 64 B blocks far from its last (batch_queue 2x2, 3 runs) while
 * each round learnt it again.
 * ------------------------------------------------------------------------- */
#define BYPASS_AFTER 16 /* batches back to the heaps before judging */

uint8_t hz_cpu_mode[HZ_CLASS_COUNT];
static bool shared_pages; /* the last round's `shared` (rejudge) */
uintptr_t hz_cpu_shared_base, hz_cpu_shared_span;
static uint32_t class_spills[HZ_CPU_CLASSES], class_reuses[HZ_CPU_CLASSES];
static bool class_one_way[HZ_CPU_CLASSES];

static void note_reuse(size_t cls) {
  __atomic_add_fetch(&class_reuses[cls], 1, __ATOMIC_RELAXED);
}

static void note_spill(size_t cls) {
  if (shared_pages) return; /* their blocks go home to one heap, no order */
  uint32_t spills = __atomic_add_fetch(&class_spills[cls], 1, __ATOMIC_RELAXED);
  if (spills < BYPASS_AFTER ||
      spills <= 2 * __atomic_load_n(&class_reuses[cls], __ATOMIC_RELAXED))
    return;
  __atomic_store_n(&class_one_way[cls], true, __ATOMIC_RELAXED);
  __atomic_store_n(&hz_cpu_mode[cls], HZ_CPU_CLASS_TAKE_ONLY, __ATOMIC_RELAXED);
  COUNT(bypassed);
}

/* Blocks above 256 B (classes from WIDE_CLASS) are cached only while the
 * program runs at most WIDE_THREADS_PER_CPU threads a CPU: with more, the
 * blocks circulating through the caches keep pages of every heap from
 * emptying. mt_remote guard lane, R90 (16 B-2 KiB, 2 CPUs, 5 interleaved
 * runs): with 16 threads, caching them all held 54.5 MiB, up to 256 B
 * 43.7 MiB (per-thread heaps 44.1) at 34.3M against 32.0M ops/s; with 4
 * threads they gave 45.9M against 39.3M ops/s at the same 13 MiB. */
#define WIDE_CLASS           13
#define WIDE_THREADS_PER_CPU 4

/* Threads exiting faster than they run (more exits in a round than threads
 * holding a heap: short-lived threads handing their blocks to successors)
 * turn the caches off. The successor frees its predecessors' blocks into
 * its CPU's cache and takes them back, so every later pair in its loop is
 * a cache pair, twice the instructions of a bin pair, and its own heap is
 * never asked again; with its frees home instead, its heap serves it
 * locally. larson (4 chains of threads replaced every 10,000 pairs, 2
 * CPUs, 7 interleaved runs): 47.0M ops/s cached, 66.9M with every free
 * home, 75.9M per-thread heaps. */
static bool churning(size_t threads, size_t exits) { return exits > threads; }

/* A class whose frees are local stays off the caches: fewer than one free
 * in HZ_CPU_LOCAL_SHARE of another heap's block, as seen in a round the
 * class was off (its frees of other heaps' blocks then go through stashes,
 * which count them; on the caches they are not counted, and a malloc that
 * takes another heap's block from a cache makes its free another heap's
 * too, so a program that frees locally turns into one whose blocks go
 * round the caches). A class on the caches goes off for one round in
 * PROBE_EVERY to be seen again; a class with too few frees in a round
 * (LOCAL_MIN_FREES) keeps what it was. mimalloc-bench larsonN (2 threads, 3
 * interleaved runs): 13.6 s with the rule, 17.7 s without, 12.2 s with the
 * caches off. */
#define HZ_CPU_LOCAL_SHARE 8
#define PROBE_EVERY        32
#define PROBE_FIRST        4 /* rounds: a run of 0.1 s is not probed */
#define LOCAL_MIN_FREES    1024
static bool class_local[HZ_CPU_CLASSES];
static unsigned rounds_seen;

/* This round (one that saw the frees) is a probe: local classes go off to
 * be seen again, one-way classes back on. */
static bool probe_round(void) {
  return rounds_seen++ % PROBE_EVERY == PROBE_FIRST;
}

/* A class seen off the caches whose frees of other heaps' blocks come
 * from heaps that do not allocate it (fewer than one in ONE_WAY_SHARE of
 * them from a heap that allocated as much), half of them or more extending
 * a run, is one-way: a producer and its consumers, freeing in the order it
 * allocated. Its frees go home as runs (remote.h) and its mallocs refill
 * from pages in address order; through the caches, a consumer's CPU
 * pushes and the producer's pops, every pair a cache pair, in no order.
 * batch_queue 1x3-64B (7 interleaved runs): 88.4M ops/s against 77.9M on
 * the caches; the rule on spills alone never saw it (the producer empties
 * the depot as fast as the consumers fill it). Without runs a cache push
 * is the consumers' cheapest free: the rule without the runs' share took
 * batch_queue 2x2 8-2048 B from 41.6M to 32.6M ops/s. */
#define ONE_WAY_SHARE 8

static bool seen_one_way(const hz_cpu_frees_t *seen, int c) {
  return seen->remote[c] >= LOCAL_MIN_FREES &&
         seen->crossed[c] * ONE_WAY_SHARE < seen->remote[c] &&
         seen->runs[c] * 2 >= seen->remote[c];
}

static void judge_local(const hz_cpu_frees_t *seen, bool probe) {
  for (int c = 1; c < HZ_CPU_CLASSES; c++) {
    if (seen->frees[c] < LOCAL_MIN_FREES) continue;
    if (hz_cpu_mode[c] == HZ_CPU_CLASS_OFF) {
      class_local[c] = seen->remote[c] * HZ_CPU_LOCAL_SHARE < seen->frees[c];
      if (!shared_pages && seen_one_way(seen, c)) {
        __atomic_store_n(&class_one_way[c], true, __ATOMIC_RELAXED);
        COUNT(bypassed);
      }
    } else if (probe) {
      class_local[c] = true;
    }
  }
}

/* A class the rules take off the caches is off for mallocs too (not take
 * only: a malloc of it would try an empty cache and the depot before every
 * refill, mt_remote main R50/T16 0.93 of per-thread), and the caches are
 * drained once as it goes off. */
static uint8_t class_mode(int cls, bool crowded, bool churn, bool shared) {
  if (churn) return HZ_CPU_CLASS_OFF;
  if (shared) return HZ_CPU_CLASS_SHARED;
  if (crowded && cls >= WIDE_CLASS) return HZ_CPU_CLASS_OFF;
  if (class_local[cls]) return HZ_CPU_CLASS_OFF;
  if (__atomic_load_n(&class_one_way[cls], __ATOMIC_RELAXED))
    return HZ_CPU_CLASS_TAKE_ONLY;
  return HZ_CPU_CLASS_CACHED;
}

bool hz_cpu_crowded(size_t threads) {
  return hz_cpu_cache_on &&
         threads > (size_t)cache_count * WIDE_THREADS_PER_CPU;
}

bool hz_cpu_sharing(size_t threads) {
  long per_cpu = hz_option(HZ_OPTION_SHARED_PAGES);
  return hz_cpu_cache_on && per_cpu > 0 &&
         threads > (size_t)cache_count * (size_t)per_cpu;
}

bool hz_cpu_cache_rejudge(size_t threads, size_t exits, const void *shared,
                          size_t span, const hz_cpu_frees_t *seen) {
  if (!hz_cpu_cache_on) return false;
  bool probe = seen != NULL && probe_round();
  if (seen != NULL) judge_local(seen, probe);
  bool crowded = hz_cpu_crowded(threads);
  __atomic_store_n(&shared_pages, shared != NULL, __ATOMIC_RELAXED);
  if (shared != NULL) {
    __atomic_store_n(&hz_cpu_shared_base, (uintptr_t)shared, __ATOMIC_RELAXED);
    __atomic_store_n(&hz_cpu_shared_span, span, __ATOMIC_RELAXED);
  }
  bool churn = churning(threads, exits);
  bool went_off = false;
  if (churn) COUNT(churn_rounds);
  for (int c = 1; c < HZ_CPU_CLASSES; c++) {
    if (probe) __atomic_store_n(&class_one_way[c], false, __ATOMIC_RELAXED);
    uint8_t mode = class_mode(c, crowded, churn, shared != NULL);
    went_off |= mode == HZ_CPU_CLASS_OFF && hz_cpu_mode[c] != mode;
    __atomic_store_n(&class_spills[c], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&class_reuses[c], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&hz_cpu_mode[c], mode, __ATOMIC_RELAXED);
  }
  return went_off;
}

static bool depot_take(size_t cls, void **out) {
  depot_t *d = &depots[cls];
  if (HZ_SHARED_GET(d->batches) == 0) return false;
  hz_lock(&d->lock);
  bool any = d->batches != 0;
  if (any) {
    HZ_SHARED_SET(d->batches, d->batches - 1);
    memcpy(out, d->slots[d->batches], class_batch(cls) * sizeof(void *));
  }
  hz_unlock(&d->lock);
  return any;
}

static bool depot_put(size_t cls, void *const *batch) {
  depot_t *d = &depots[cls];
  if (HZ_SHARED_GET(d->batches) == DEPOT_BATCHES) return false;
  hz_lock(&d->lock);
  bool room = d->batches < DEPOT_BATCHES;
  if (room) {
    memcpy(d->slots[d->batches], batch, class_batch(cls) * sizeof(void *));
    HZ_SHARED_SET(d->batches, d->batches + 1);
  }
  hz_unlock(&d->lock);
  return room;
}

/* ---------------------------------------------------------------------------
 * Start-up
 * ------------------------------------------------------------------------- */
static long membarrier(int cmd, unsigned flags, int cpu) {
  return syscall(__NR_membarrier, cmd, flags, cpu);
}

/* rseq registered by glibc, a CPU id to index by, and membarrier to
 * abort sections on another CPU: the three things the front end needs. */
static bool rseq_usable(void) {
#if defined(__x86_64__)
  if (__rseq_size == 0) return false;
  hz_cpu_rseq_offset = __rseq_offset;
  unsigned long features = getauxval(AT_RSEQ_FEATURE_SIZE);
  hz_cpu_id_offset = features >= 28 ? 24 : 4; /* mm_cid, else cpu_id */
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0;
#else
  return false;
#endif
}

void hz_cpu_cache_init(void) {
#if defined(__SANITIZE_THREAD__)
  return; /* ThreadSanitizer cannot see what a section reads and writes */
#endif
  if (HZ_VARIANT != 0 || !hz_option_enabled(HZ_OPTION_CPU_CACHE) ||
      !rseq_usable())
    return;
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  if (cpus < 1) return;
  for (int c = 0; c < HZ_CPU_CLASSES; c++)
    hz_lock_reinit(&depots[c].lock);
  size_t bytes = (size_t)cpus * sizeof(hz_cpu_cache_t);
  hz_cpu_caches = hz_os_map(HZ_ALIGN_UP(bytes, 4096));
  if (hz_cpu_caches == NULL) return;
  cache_count = cpus;
  for (int c = 1; c < HZ_CPU_CLASSES; c++) {
    for (long i = 0; i < cpus; i++)
      hz_cpu_caches[i].cap[c] = class_stack((size_t)c);
    hz_cpu_mode[c] = HZ_CPU_CLASS_CACHED;
  }
  hz_cpu_cache_on = true;
}

/* ---------------------------------------------------------------------------
 * Batches to and from the heap
 * ------------------------------------------------------------------------- */
/* Word 1 at 0 is what a malloc's pop left: a double free that raced the
 * mark. Any other value was written there after the free, or into the
 * block the first copy became: which, nobody can tell. */
void hz_cpu_unmarked(const void *p) {
  const hz_page_t *page = hz_segment_block_page(p);
  const char *what = ((const uintptr_t *)p)[1] == 0
                         ? "double free"
                         : "double free or write after free";
  hz_check_fail(what, p, page->class_id, page->block_size);
}

static void give_back(hz_heap_t *heap, void *const *blocks, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    if (hz_cpu_still_marked(blocks[i]))
      hz_heap_free_block(heap, hz_segment_block_page(blocks[i]), blocks[i]);
}

/* Push blocks[1..n) highest index first, so blocks[1] is popped next;
 * what does not fit (the cache filled or was closed meanwhile) goes back
 * to the heaps. */
static void push_rest(hz_heap_t *heap, size_t cls, void **blocks, unsigned n) {
  for (unsigned i = n; i-- > 1;)
    if (!hz_cpu_push(cls, blocks[i])) {
      give_back(heap, blocks + 1, i);
      return;
    }
}

void *hz_cpu_refill(hz_heap_t *heap, size_t cls) {
  void *batch[HZ_CPU_BATCH];
  if (!depot_take(cls, batch)) return NULL;
  COUNT(depot_takes);
  note_reuse(cls);
  push_rest(heap, cls, batch, class_batch(cls));
  return hz_cpu_unmark(batch[0]) ? batch[0] : NULL;
}

void hz_cpu_overflow(hz_heap_t *heap, size_t cls, void *p) {
  void *batch[HZ_CPU_BATCH];
  unsigned n = 0, want = class_batch(cls);
  while (n < want && (batch[n] = hz_cpu_pop(cls)) != NULL)
    n++;
  if (n == want && depot_put(cls, batch)) {
    COUNT(depot_puts);
  } else {
    give_back(heap, batch, n);
    COUNT(overflows);
    note_spill(cls);
  }
  if (!hz_cpu_push(cls, p)) give_back(heap, &p, 1);
}

/* ---------------------------------------------------------------------------
 * Draining
 * ------------------------------------------------------------------------- */
/* Give back the blocks of a closed cache. */
static void drain_one(hz_heap_t *heap, hz_cpu_cache_t *cache) {
  bool any = false;
  for (int c = 1; c < HZ_CPU_CLASSES; c++) {
    uint32_t top = __atomic_load_n(&cache->top[c], __ATOMIC_ACQUIRE);
    give_back(heap, cache->slots[c], top);
    __atomic_store_n(&cache->top[c], 0, __ATOMIC_RELAXED);
    any |= top != 0;
  }
  if (any) COUNT(drains);
}

/* Close every cache, abort every section running anywhere (caches are
 * indexed by mm_cid, which is not a CPU number: all CPUs; after membarrier
 * returns, every section sees its cache closed and finds it empty or
 * full), give back their blocks and the depots', open them again. */
void hz_cpu_cache_drain(hz_heap_t *heap) {
  if (!hz_cpu_cache_on) return;
  hz_lock(&drain_lock);
  for (long i = 0; i < cache_count; i++)
    __atomic_store_n(&hz_cpu_caches[i].closed, 1, __ATOMIC_SEQ_CST);
  membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0);
  for (long i = 0; i < cache_count; i++)
    drain_one(heap, &hz_cpu_caches[i]);
  for (long i = 0; i < cache_count; i++)
    __atomic_store_n(&hz_cpu_caches[i].closed, 0, __ATOMIC_RELEASE);
  void *batch[HZ_CPU_BATCH];
  for (int c = 1; c < HZ_CPU_CLASSES; c++)
    while (depot_take((size_t)c, batch))
      give_back(heap, batch, class_batch((size_t)c));
  hz_unlock(&drain_lock);
}

/* ---------------------------------------------------------------------------
 * fork and the stats
 * ------------------------------------------------------------------------- */
/* fork waits for a drain under way (the caches are open again after it)
 * and holds every depot. */
void hz_cpu_cache_fork_prepare(void) {
  if (!hz_cpu_cache_on) return;
  hz_lock(&drain_lock);
  for (int c = 0; c < HZ_CPU_CLASSES; c++)
    hz_lock(&depots[c].lock);
}

void hz_cpu_cache_fork_parent(void) {
  if (!hz_cpu_cache_on) return;
  for (int c = 0; c < HZ_CPU_CLASSES; c++)
    hz_unlock(&depots[c].lock);
  hz_unlock(&drain_lock);
}

void hz_cpu_cache_fork_child(void) {
  if (!hz_cpu_cache_on) return;
  for (int c = 0; c < HZ_CPU_CLASSES; c++)
    hz_lock_reinit(&depots[c].lock);
  hz_lock_reinit(&drain_lock);
}

/* The blocks of class `cls` every CPU's cache and the depot hold: each top
 * and the depot's count read once, no lock taken. While threads run it is a
 * snapshot (a batch on its way between a cache and the depot is in
 * neither); once they are joined nothing moves and it is exact. */
static uint64_t class_cached(int cls) {
  uint64_t blocks =
      (uint64_t)HZ_SHARED_GET(depots[cls].batches) * class_batch((size_t)cls);
  for (long cpu = 0; cpu < cache_count; cpu++)
    blocks += HZ_SHARED_GET(hz_cpu_caches[cpu].top[cls]);
  return blocks;
}

/* Each class's blocks in caches and depots into cached[class] (0 for
 * classes the caches never hold); their sum. */
static uint64_t cached_by_class(uint64_t cached[HZ_CLASS_COUNT]) {
  uint64_t blocks = 0;
  memset(cached, 0, HZ_CLASS_COUNT * sizeof cached[0]);
  if (!hz_cpu_cache_on) return 0;
  for (int c = 1; c < HZ_CPU_CLASSES; c++)
    blocks += cached[c] = class_cached(c);
  return blocks;
}

uint64_t hz_cpu_cache_blocks(void) {
  uint64_t cached[HZ_CLASS_COUNT];
  return cached_by_class(cached);
}

void hz_cpu_cache_thread_exit(void) {
  __atomic_add_fetch(&exited_restarts, hz_cpu_restarts, __ATOMIC_RELAXED);
  hz_cpu_restarts = 0;
}

void hz_cpu_cache_stats(hz_front_end_stats_t *out) {
  out->name = hz_cpu_cache_on ? "per-CPU caches (rseq)" : "per-thread heaps";
  out->depot_puts = HZ_SHARED_GET(counts.depot_puts);
  out->depot_takes = HZ_SHARED_GET(counts.depot_takes);
  out->overflows = HZ_SHARED_GET(counts.overflows);
  out->drains = HZ_SHARED_GET(counts.drains);
  out->cached_blocks = cached_by_class(out->cached);
  out->restarts = HZ_SHARED_GET(exited_restarts) + hz_cpu_restarts;
  out->bypassed = HZ_SHARED_GET(counts.bypassed);
  out->churn_rounds = HZ_SHARED_GET(counts.churn_rounds);
}
