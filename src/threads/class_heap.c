/* class_heap: the class heaps (see class_heap.h): one a class, each under
 * its own lock, set up by its first use; a shared class's bins filled from
 * their pages; the blocks they hand threads without a heap; giving back
 * what they keep idle. */
#include "class_heap.h"

#include <stdatomic.h>

#include "guard.h"
#include "heap_refill.h"
#include "lock.h"
#include "os.h"

/* HZ_CLASS_COUNT of them, by class, HZ_CLASS_HEAP_STRIDE bytes apart */
static char *heaps;
static hz_lock_t make_lock = HZ_LOCK_INIT(HZ_LOCK_ID_MAKE);
static hz_lock_t class_lock[HZ_CLASS_COUNT];
static bool class_made[HZ_CLASS_COUNT]; /* under the class's lock */
/* The set the class heaps of small pages share. */
static hz_lock_t set_lock = HZ_LOCK_INIT(HZ_LOCK_ID_CLASS_SET);
static hz_segment_set_t class_set = {NULL, NULL, &set_lock};

/* A class heap in memory that is zeros: its bin of one slot, counted and
 * sampled as a thread's; its empty pages kept up to a quarter of its pages
 * in use (HZ_HEAP_SHARED_EMPTY_DIVISOR). The class heaps of blocks up to
 * 16 KiB (pages of one or two slices) cut their pages from one set, not
 * one each: rptest's shared classes mapped 54-66 MB with it against
 * 142-155 MB. Wider pages take 8 or 32 slices of one region, which a set
 * shared with small pages rarely frees whole: with them in it, mt_remote
 * 16 B-128 KiB T4 held 22-35% more (results/2026-11-28-issue78/one-set.md),
 * so their heaps keep their own. */
static void class_heap_init(hz_class_heap_t *heap, uint8_t cls) {
  hz_bin_t *bin = &heap->bin;
  bin->base = bin->top = bin->fresh_end = &heap->slot;
  bin->limit = bin->base + 1;
  hz_bin_arm_sampling(bin, cls);
  hz_pages_t *pages = &heap->pages;
  hz_page_kind_t kind = hz_segment_kind_for(hz_sizeclass_block_size(cls));
  pages->cuts_from = kind <= HZ_KIND_MEDIUM ? &class_set : &pages->segments;
  pages->empty_quarters = 4 / HZ_HEAP_SHARED_EMPTY_DIVISOR;
}

/* The class heaps are mapped (hz_class_heaps_ready maps them). */
static bool class_heaps_mapped(void) {
  return __atomic_load_n(&heaps, __ATOMIC_ACQUIRE) != NULL;
}

static hz_class_heap_t *class_heap_at(int cls) {
  return (hz_class_heap_t *)(void *)(heaps +
                                     (size_t)cls * HZ_CLASS_HEAP_STRIDE);
}

/* The class heap of `cls`, set up by its first use (the heaps mapped). */
static hz_class_heap_t *class_heap_of(uint8_t cls) {
  hz_class_heap_t *heap = class_heap_at(cls);
  if (HZ_UNLIKELY(!__atomic_load_n(&class_made[cls], __ATOMIC_ACQUIRE))) {
    hz_lock(&class_lock[cls]);
    if (!class_made[cls]) class_heap_init(heap, cls);
    __atomic_store_n(&class_made[cls], true, __ATOMIC_RELEASE);
    hz_unlock(&class_lock[cls]);
  }
  return heap;
}

/* The heaps' memory: zeros until a class's first use sets its heap up,
 * and only the lines a refill uses are ever touched. Mapped before the
 * lock is taken: the first may be a young thread without a heap, whose
 * signal handler's malloc would come here too and wait for the lock its
 * own thread held across the mmap. Of two threads mapping at once, the
 * first to take the lock installs its mapping and the other unmaps. */
static bool class_heaps_make(void) {
  size_t span = HZ_CLASS_COUNT * (size_t)HZ_CLASS_HEAP_STRIDE;
  size_t size = HZ_ALIGN_UP(span, 4096);
  char *mapped = hz_os_map(size);
  if (mapped == NULL) return class_heaps_mapped();
  hz_lock(&make_lock);
  bool mine = heaps == NULL;
  if (mine) {
    for (int c = 0; c < HZ_CLASS_COUNT; c++)
      hz_lock_init(&class_lock[c], HZ_LOCK_ID_CLASS);
    HZ_SHARED_SET(hz_class_heaps_base, (uintptr_t)mapped);
    HZ_SHARED_SET(hz_class_heaps_span, span);
    __atomic_store_n(&heaps, mapped, __ATOMIC_RELEASE);
  }
  hz_unlock(&make_lock);
  if (!mine) hz_os_unmap(mapped, size);
  return true;
}

bool hz_class_heaps_ready(void) {
  return HZ_LIKELY(class_heaps_mapped()) || class_heaps_make();
}

/* Under the class's lock, before its pages hand blocks out: the class
 * heap counts as active, takes its inbox home and ages its kept pages, as
 * an owner's slow path does. */
static void class_heap_tidy(hz_class_heap_t *heap, uint8_t cls) {
  hz_pages_t *pages = &heap->pages;
  hz_pages_note_active(pages);
  if (hz_remote_pending(&pages->inbox)) hz_pages_drain_inbox(pages);
  hz_pages_age_empty(pages, cls);
}

uint32_t hz_class_heap_fill(hz_heap_t *heap, hz_bin_t *bin, uint8_t cls,
                            bool probed) {
  hz_class_heap_t *shared = class_heap_of(cls);
  uint32_t room = (uint32_t)hz_bin_capacity(bin);
  hz_lock(&class_lock[cls]);
  class_heap_tidy(shared, cls);
  hz_heap_lend_pages(heap, &shared->pages, cls, probed);
  uint32_t taken = 0, got;
  while (taken < room &&
         (got = hz_pages_refill(&shared->pages, bin, cls, room - taken)))
    taken += got;
  hz_unlock(&class_lock[cls]);
  return taken;
}

/* Under the class's lock: one block through the class heap's bin. */
static void *class_heap_malloc_held(hz_class_heap_t *heap, uint8_t cls,
                                    size_t size) {
  hz_bin_t *bin = &heap->bin;
  HZ_SHARED_ADD(heap->pages.stats.slow_mallocs, 1);
  if (HZ_UNLIKELY(hz_bin_sample_due(bin)) && hz_guard_active) {
    void *guarded = hz_bin_guarded(bin, size);
    if (guarded != NULL) return guarded;
  }
  class_heap_tidy(heap, cls);
  if (hz_pages_refill(&heap->pages, bin, cls, 1) == 0) return NULL;
  bin->sample_left--;
  void *block = hz_bin_take(bin, bin->top, cls);
  hz_bin_publish(bin, &heap->counts, cls, false, &heap->pages.stats);
  if (HZ_UNLIKELY(bin->sample_left == 0))
    return hz_bin_sampled(bin, block, size);
  return block;
}

void *hz_class_heap_malloc(size_t size) {
  if (!hz_class_heaps_ready()) return NULL;
  uint8_t cls = hz_sizeclass_of(size);
  hz_class_heap_t *heap = class_heap_of(cls);
  hz_lock(&class_lock[cls]);
  void *block = class_heap_malloc_held(heap, cls, size);
  hz_unlock(&class_lock[cls]);
  return block;
}

/* Collecting. */
/* The class heap took no refill for HZ_IDLE_FULL_MS, and was not collected
 * whole since or has blocks come home since (the caches' idle drain sends
 * them after the heap was collected: their pages' free memory is to go
 * too, as for a thread's idle heap), by the purge thread's looks. */
static bool class_heap_idle(hz_pages_t *pages) {
  uint64_t idle_ms;
  return hz_pages_look_idle(pages, hz_os_now_ms(), &idle_ms) &&
         (!pages->collect_clean || hz_remote_pending(&pages->inbox)) &&
         idle_ms >= HZ_IDLE_FULL_MS;
}

/* Under the class's lock: its inbox home and its empty pages back, and
 * once idle (or with `all`) its pages' free memory too, every empty page
 * going at once (`gone`). */
static void class_heap_collect_held(hz_class_heap_t *heap, bool all) {
  hz_pages_t *pages = &heap->pages;
  bool purge = all || class_heap_idle(pages);
  if (!purge && !hz_remote_pending(&pages->inbox)) return;
  HZ_ASSERT(heap->bin.top == heap->bin.base);
  HZ_SHARED_ADD(pages->stats.collections, 1);
  pages->gone = purge;
  hz_pages_drain_inbox(pages);
  hz_pages_release_empty(pages);
  pages->gone = false;
  if (!purge) return;
  hz_pages_discard_free(pages);
  hz_pages_collected_clean(pages);
}

static void class_heap_collect(int cls, bool all) {
  if (all)
    hz_lock(&class_lock[cls]);
  else if (!hz_lock_try(&class_lock[cls]))
    return; /* a refill holds it, and takes the inbox home */
  if (class_made[cls]) class_heap_collect_held(class_heap_at(cls), all);
  hz_unlock(&class_lock[cls]);
}

void hz_class_heaps_collect(bool all) {
  if (!class_heaps_mapped()) return;
  for (int c = 1; c < HZ_CLASS_COUNT; c++)
    class_heap_collect(c, all);
}

void hz_class_heaps_summarize(hz_heap_summary_t *out) {
  if (!class_heaps_mapped()) return;
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    hz_lock(&class_lock[c]);
    if (class_made[c]) {
      hz_pages_summarize(&class_heap_at(c)->pages, out);
      hz_class_counts_add(&out->classes[c], &class_heap_at(c)->counts);
    }
    hz_unlock(&class_lock[c]);
  }
}

uint64_t hz_class_heaps_lock_taken(void) {
  uint64_t most = 0;
  if (!class_heaps_mapped()) return 0;
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    uint64_t taken = hz_lock_taken(&class_lock[c]);
    if (taken > most) most = taken;
  }
  return most;
}

void hz_class_heaps_fork_prepare(void) {
  hz_lock(&make_lock);
  if (heaps != NULL)
    for (int c = 1; c < HZ_CLASS_COUNT; c++)
      hz_lock(&class_lock[c]);
  hz_lock(&set_lock);
}

void hz_class_heaps_fork_parent(void) {
  hz_unlock(&set_lock);
  if (heaps != NULL)
    for (int c = 1; c < HZ_CLASS_COUNT; c++)
      hz_unlock(&class_lock[c]);
  hz_unlock(&make_lock);
}

void hz_class_heaps_fork_child(void) {
  hz_lock_reinit(&set_lock);
  if (heaps != NULL)
    for (int c = 1; c < HZ_CLASS_COUNT; c++)
      hz_lock_reinit(&class_lock[c]);
  hz_lock_reinit(&make_lock);
}
