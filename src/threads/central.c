/* central: each class's route (where its refills come from), the shared
 * pages' heaps, one a class, each under its own lock, the segments they
 * cut their pages from (for blocks up to 16 KiB one set, under its own
 * lock: taken inside a class's), the two ends of their ladder (a bin that
 * runs empty, a bin that overflows), and giving back what the heaps hold
 * (see central.h). They are mapped together at the first switch on, so
 * that one range of addresses tells a shared page by its owner word, and
 * never unmapped: blocks of their pages may be anywhere in the program for
 * as long as it runs. A class heap is set up by its first refill. */
#include "central.h"

#include <stdatomic.h>

#include "cpu_cache.h"
#include "lock.h"
#include "os.h"
#include "sizeclass.h"

uint8_t hz_central_route[HZ_CLASS_COUNT];
static uint64_t class_turns;

static hz_heap_t *central; /* HZ_CENTRAL_CLASSES heaps, by class */
static hz_lock_t make_lock = HZ_LOCK_INIT(HZ_LOCK_ID_MAKE);
static hz_lock_t class_lock[HZ_CENTRAL_CLASSES];
static bool class_made[HZ_CENTRAL_CLASSES]; /* under the class's lock */
/* The set the class heaps of small pages share (hz_heap_init_shared). */
static hz_lock_t set_lock = HZ_LOCK_INIT(HZ_LOCK_ID_CLASS_SET);
static hz_segment_set_t class_set = {NULL, NULL, &set_lock};

static bool central_make(void);

/* The heap of class `cls`, set up by its first use. */
static hz_heap_t *central_class(uint8_t cls) {
  hz_heap_t *shared = (hz_heap_t *)hz_central_base() + cls;
  if (HZ_UNLIKELY(!__atomic_load_n(&class_made[cls], __ATOMIC_ACQUIRE))) {
    hz_lock(&class_lock[cls]);
    if (!class_made[cls]) hz_heap_init_shared(shared, cls, &class_set);
    __atomic_store_n(&class_made[cls], true, __ATOMIC_RELEASE);
    hz_unlock(&class_lock[cls]);
  }
  return shared;
}

/* The most blocks a bin of `cls` takes from the ladder at a time: what a
 * spill gives it (half the bin), at most a batch. */
static unsigned ladder_batch(const hz_heap_t *heap, uint8_t cls) {
  const hz_bin_t *bin = &heap->bins[cls];
  size_t half = hz_bin_capacity(bin) / 2;
  if (half == 0) half = 1;
  return half < HZ_CPU_BATCH ? (unsigned)half : HZ_CPU_BATCH;
}

void *hz_central_malloc(hz_heap_t *heap, size_t size) {
  uint8_t cls = hz_sizeclass_of(size);
  bool probed = __atomic_load_n(&hz_central_route[cls], __ATOMIC_RELAXED) ==
                HZ_CENTRAL_PROBED;
  /* [condition: probe-refill] */
  if (probed && hz_heap_probe_turn(heap, cls))
    return hz_heap_malloc_probe(heap, size);
  if (hz_cpu_class(cls)) {
    void *batch[HZ_CPU_BATCH];
    unsigned n = hz_cpu_take(cls, batch, ladder_batch(heap, cls));
    /* [condition: ladder-empty] */
    if (n != 0) return hz_heap_malloc_given(heap, size, batch, n);
  }
  return hz_heap_malloc_shared(heap, size, central_class(cls), &class_lock[cls],
                               probed);
}

_Static_assert(HZ_BIN_SLOTS / 2 <= HZ_CPU_BATCH,
               "a bin's spill is one batch for the ladder");

void hz_central_free_full(hz_heap_t *heap, hz_page_t *page, void *p) {
  /* A signal handler's free, the thread inside the allocator: no spill
   * (it may take locks the thread holds); p (marked) to its page's owner's
   * inbox, as a thread without a heap frees. */
  if (HZ_UNLIKELY(hz_lock_depth != 0)) { /* the fast path found the heap */
    hz_heap_free_orphan(page, p);
    return;
  }
  uint8_t cls = page->class_id; /* the page may go with the spill */
  void *spilled[HZ_BIN_SLOTS / 2];
  unsigned n = hz_heap_free_spilling(heap, page, p, spilled);
  if (n == 0) return;
  /* [condition: spill-to-ladder] */
  unsigned took = hz_cpu_class(cls) && hz_central_shares(cls)
                      ? hz_cpu_give(cls, spilled, n)
                      : 0;
  hz_heap_send_shared(heap, spilled + took, n - took);
}

/* The class heaps exist (mapped at the first use). */
static bool central_ready(void) {
  return HZ_LIKELY(hz_central_base() != NULL) || central_make();
}

void *hz_central_malloc_alone(size_t size) {
  if (!central_ready()) return NULL;
  uint8_t cls = hz_sizeclass_of(size);
  hz_heap_t *shared = central_class(cls);
  hz_lock(&class_lock[cls]);
  void *p = hz_heap_malloc_small(shared, size);
  hz_unlock(&class_lock[cls]);
  return p;
}

/* The heaps' memory: zeros until a class's first refill sets its heap up,
 * and only the lines a refill uses are ever touched. Mapped before the
 * lock is taken: the first may be a young thread without a heap, whose
 * signal handler's malloc would come here too and wait for the lock its
 * own thread held across the mmap. Of two threads mapping at once, the
 * first to take the lock installs its mapping and the other unmaps. */
static bool central_make(void) {
  size_t span = HZ_CENTRAL_CLASSES * sizeof(hz_heap_t);
  size_t size = HZ_ALIGN_UP(span, 4096);
  hz_heap_t *heaps = hz_os_map(size);
  if (heaps == NULL) return hz_central_base() != NULL;
  hz_lock(&make_lock);
  bool mine = central == NULL;
  if (mine) {
    for (int c = 0; c < HZ_CENTRAL_CLASSES; c++)
      hz_lock_init(&class_lock[c], HZ_LOCK_ID_CLASS);
    hz_heap_set_shared_range(heaps, span);
    __atomic_store_n(&central, heaps, __ATOMIC_RELEASE);
  }
  hz_unlock(&make_lock);
  if (!mine) hz_os_unmap(heaps, size);
  return true;
}

const void *hz_central_base(void) {
  return __atomic_load_n(&central, __ATOMIC_ACQUIRE);
}

bool hz_central_set(size_t cls, hz_central_route_t route) {
  if (route != HZ_CENTRAL_THREAD && !central_ready()) return false;
  /* release: a malloc that reads the route (acquire) finds the heaps */
  uint8_t was = __atomic_exchange_n(&hz_central_route[cls], (uint8_t)route,
                                    __ATOMIC_RELEASE);
  if ((was == HZ_CENTRAL_THREAD) != (route == HZ_CENTRAL_THREAD))
    __atomic_add_fetch(&class_turns, 1, __ATOMIC_RELAXED);
  return true;
}

void hz_central_count(uint64_t *shared_classes, uint64_t *turns) {
  uint64_t n = 0;
  for (int c = 1; c < HZ_CLASS_COUNT; c++)
    n += hz_central_shares((size_t)c);
  *shared_classes = n;
  *turns = __atomic_load_n(&class_turns, __ATOMIC_RELAXED);
}

/* The heap took no refill for HZ_IDLE_FULL_MS, and was not collected whole
 * since or has blocks come home since (the caches' idle drain sends them
 * after the heap was collected: their pages' free memory is to go too, as
 * for a thread's idle heap), by the purge thread's looks: the heap's own
 * collector fields. */
static bool central_idle(hz_heap_t *heap) {
  uint64_t now_ms = hz_os_now_ms();
  uint32_t n = atomic_load_explicit(&heap->pages.activity, memory_order_relaxed);
  if (n != heap->pages.collect_seen) {
    heap->pages.collect_seen = n;
    heap->pages.idle_since_ms = now_ms;
    heap->pages.collect_clean = false;
    return false;
  }
  return (!heap->pages.collect_clean || hz_heap_has_incoming(heap)) &&
         now_ms - heap->pages.idle_since_ms >= HZ_IDLE_FULL_MS;
}

/* Under the class's lock: its inbox home, and everything once idle (the
 * blocks its bin keeps for threads without a heap too). */
static void central_collect_held(hz_heap_t *heap, bool all) {
  if (all || central_idle(heap))
    hz_heap_collect(heap, true, HZ_BINS_ALL);
  else if (hz_heap_has_incoming(heap))
    hz_heap_collect(heap, false, HZ_BINS_KEEP);
}

static void central_collect_one(int cls, bool all) {
  if (all)
    hz_lock(&class_lock[cls]);
  else if (!hz_lock_try(&class_lock[cls]))
    return; /* a refill holds it, and takes the inbox home */
  if (class_made[cls]) central_collect_held(&central[cls], all);
  hz_unlock(&class_lock[cls]);
}

void hz_central_collect(bool all) {
  if (hz_central_base() == NULL) return;
  for (int c = 1; c < HZ_CENTRAL_CLASSES; c++)
    central_collect_one(c, all);
}

void hz_central_summarize(hz_heap_summary_t *out) {
  if (hz_central_base() == NULL) return;
  for (int c = 1; c < HZ_CENTRAL_CLASSES; c++) {
    hz_lock(&class_lock[c]);
    if (class_made[c]) hz_heap_summarize_one(&central[c], out);
    hz_unlock(&class_lock[c]);
  }
}

uint64_t hz_central_lock_taken(void) {
  uint64_t most = 0;
  if (hz_central_base() == NULL) return 0;
  for (int c = 1; c < HZ_CENTRAL_CLASSES; c++) {
    uint64_t taken = hz_lock_taken(&class_lock[c]);
    if (taken > most) most = taken;
  }
  return most;
}

void hz_central_fork_prepare(void) {
  hz_lock(&make_lock);
  if (central != NULL)
    for (int c = 1; c < HZ_CENTRAL_CLASSES; c++)
      hz_lock(&class_lock[c]);
  hz_lock(&set_lock);
}

void hz_central_fork_parent(void) {
  hz_unlock(&set_lock);
  if (central != NULL)
    for (int c = 1; c < HZ_CENTRAL_CLASSES; c++)
      hz_unlock(&class_lock[c]);
  hz_unlock(&make_lock);
}

void hz_central_fork_child(void) {
  hz_lock_reinit(&set_lock);
  if (central != NULL)
    for (int c = 1; c < HZ_CENTRAL_CLASSES; c++)
      hz_lock_reinit(&class_lock[c]);
  hz_lock_reinit(&make_lock);
}
