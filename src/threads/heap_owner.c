/* heap_owner: the owner's side of the collection handshake: waiting while
 * a collector holds its heap, taking its bins back after a collector took
 * blocks from them, and the report of a slow path entered twice (a signal
 * handler that called malloc). See heap_owner.h. Also the box's shared
 * state: the constant empty heap, the thread's heap pointers and where
 * the class heaps lie (class_heap.c maps them; heap_drain.c and
 * heap_free.c, below it, tell their pages by it). */
#include <string.h>

#include "class_heap.h"
#include "heap_owner.h"
#include "os.h"

/* Bins empty and without room: every call takes the slow path. */
const hz_heap_t hz_heap_empty = {.state = HZ_HEAP_EMPTY};
uintptr_t hz_class_heaps_base;
size_t hz_class_heaps_span;
HZ_TLS hz_heap_t *hz_heap_tls = (hz_heap_t *)&hz_heap_empty;
HZ_TLS hz_heap_t *hz_heap_own;

void hz_heap_wait_unclaimed(hz_heap_t *heap) {
  while (hz_heap_claimed(heap))
    hz_os_yield();
}

void hz_heap_reentered(hz_heap_t *heap) {
  hz_check_report("re-entered slow path", heap,
                  "malloc or free called by a signal handler that "
                  "interrupted the allocator; malloc is not "
                  "async-signal-safe");
}

HZ_NOINLINE void hz_heap_wait_collector(hz_heap_t *heap) {
  do {
    atomic_store_explicit(&heap->busy, 0, memory_order_release);
    hz_heap_wait_unclaimed(heap);
    hz_heap_raise_busy(heap);
  } while (hz_heap_claimed(heap));
}

/* The owner's next slow path after a collector raised bins' `base`
 * (heap_collect.c): what is left of each bin moves back to its start. */
void hz_heap_bins_restore(hz_heap_t *heap) {
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    hz_bin_t *bin = &heap->bins[c];
    void **start = heap->bin_slots[c];
    if (bin->base == start) continue;
    void **from = heap->stolen_end[c] != NULL ? heap->stolen_end[c] : bin->base;
    size_t left = bin->top > from ? (size_t)(bin->top - from) : 0;
    size_t fresh = bin->fresh_end > from ? (size_t)(bin->fresh_end - from) : 0;
    memmove(start, from, left * sizeof *start);
    bin->base = start;
    bin->top = start + left;
    bin->fresh_end = start + fresh;
    heap->stolen_end[c] = NULL;
  }
  heap->bins_stolen = false;
}
