/* central: the shared pages' heap, its lock, switching it on and off, and
 * giving back what it holds (see central.h). The heap is mapped at the
 * first switch on and never unmapped: blocks of its pages may be anywhere
 * in the program for as long as it runs. */
#include "central.h"

#include <stdatomic.h>

#include "lock.h"
#include "os.h"

bool hz_central_on;

static hz_heap_t *central;
static hz_lock_t central_lock = HZ_LOCK_INIT;
/* The purge thread's: the heap's activity at its last round, and since
 * when it has not moved. */
static uint32_t seen_activity;
static uint64_t idle_since_ms;

void *hz_central_malloc(hz_heap_t *heap, size_t size) {
  return hz_heap_malloc_shared(heap, size, central, &central_lock);
}

static bool central_make(void) {
  hz_heap_t *heap = hz_os_map(HZ_ALIGN_UP(sizeof(hz_heap_t), 4096));
  if (heap == NULL) return false;
  hz_heap_init(heap);
  heap->state = HZ_HEAP_SHARED;
  central = heap;
  return true;
}

const hz_heap_t *hz_central_owner(void) { return central; }

bool hz_central_set(bool on) {
  if (on && central == NULL && !central_make()) return false;
  __atomic_store_n(&hz_central_on, on, __ATOMIC_RELAXED);
  return true;
}

/* The heap took no refill for HZ_IDLE_FULL_MS (and was not collected
 * whole since). */
static bool central_idle(void) {
  uint64_t now_ms = hz_os_now_ms();
  uint32_t n = atomic_load_explicit(&central->activity, memory_order_relaxed);
  if (n != seen_activity) {
    seen_activity = n;
    idle_since_ms = now_ms;
    central->collect_clean = false;
    return false;
  }
  return !central->collect_clean && now_ms - idle_since_ms >= HZ_IDLE_FULL_MS;
}

void hz_central_collect(bool all) {
  if (central == NULL) return;
  if (all)
    hz_lock(&central_lock);
  else if (!hz_lock_try(&central_lock))
    return; /* a refill holds it, and takes the inbox home */
  if (all || central_idle())
    hz_heap_collect(central, true, HZ_BINS_KEEP);
  else if (hz_heap_has_incoming(central))
    hz_heap_collect(central, false, HZ_BINS_KEEP);
  hz_unlock(&central_lock);
}

void hz_central_summarize(hz_heap_summary_t *out) {
  if (central == NULL) return;
  hz_lock(&central_lock);
  hz_heap_summarize_one(central, out);
  hz_unlock(&central_lock);
}

uint64_t hz_central_lock_taken(void) { return hz_lock_taken(&central_lock); }

void hz_central_fork_prepare(void) { hz_lock(&central_lock); }
void hz_central_fork_parent(void) { hz_unlock(&central_lock); }
void hz_central_fork_child(void) { hz_lock_reinit(&central_lock); }
