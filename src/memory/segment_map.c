/* segment_map: which addresses are segments, and their page size: one
 * byte a segment, the entry of a segment outside the arena set for
 * exactly as long as it is mapped. Segments in the arena's first
 * HZ_SEGMENT_MAP_ENTRIES have their entry in hz_segment_map, read by the
 * free fast path; others (mapped on their own under an address-space
 * limit) in a second map of pages mapped as their 16 GiB is first used,
 * read by the slow paths. Also the count of live segments. */
#include <stdatomic.h>

#include "os.h"
#include "segment.h"

_Atomic uint8_t hz_segment_map[HZ_SEGMENT_MAP_ENTRIES];
static _Atomic size_t segment_live;

/* The second map: FAR_LEAVES pointers to pages of FAR_LEAF entries, each
 * page mapped when the first segment of its 16 GiB is registered and kept. */
#define FAR_LEAF ((size_t)4096)
#define FAR_LEAVES                                                             \
  (((size_t)1 << (HZ_ADDRESS_BITS - HZ_SEGMENT_SHIFT)) / FAR_LEAF)
static _Atomic(_Atomic uint8_t *) far_leaves[FAR_LEAVES];

unsigned hz_segment_page_shift_far(const void *p) {
  size_t index = ((uintptr_t)p - 1) >> HZ_SEGMENT_SHIFT;
  if (index >= FAR_LEAVES * FAR_LEAF) return 0; /* NULL included */
  _Atomic uint8_t *leaf =
      atomic_load_explicit(&far_leaves[index / FAR_LEAF], memory_order_acquire);
  if (leaf == NULL) return 0;
  return atomic_load_explicit(&leaf[index % FAR_LEAF], memory_order_relaxed);
}

/* Where the entry of a segment lives; NULL when its page of the second map
 * cannot be had (with `make`, a new one is mapped). */
static _Atomic uint8_t *segment_map_entry(const hz_segment_t *seg, bool make) {
  size_t index = (uintptr_t)seg >> HZ_SEGMENT_SHIFT;
  if (index < HZ_SEGMENT_MAP_ENTRIES) return &hz_segment_map[index];
  if (index >= FAR_LEAVES * FAR_LEAF) return NULL; /* beyond the map */
  _Atomic(_Atomic uint8_t *) *slot = &far_leaves[index / FAR_LEAF];
  _Atomic uint8_t *leaf = atomic_load_explicit(slot, memory_order_acquire);
  if (leaf == NULL && make) {
    _Atomic uint8_t *fresh = hz_os_map(FAR_LEAF);
    if (fresh == NULL) return NULL;
    if (atomic_compare_exchange_strong_explicit(
            slot, &leaf, fresh, memory_order_acq_rel, memory_order_acquire))
      leaf = fresh;
    else
      hz_os_unmap(fresh, FAR_LEAF); /* another thread's page won */
  }
  return leaf != NULL ? &leaf[index % FAR_LEAF] : NULL;
}

bool hz_segment_map_reserve(const void *seg) {
  return segment_map_entry(seg, true) != NULL;
}

bool hz_segment_map_set(hz_segment_t *seg, uint8_t entry) {
  _Atomic uint8_t *at = segment_map_entry(seg, entry != 0);
  if (at == NULL) return false;
  atomic_store_explicit(at, entry, memory_order_release);
  return true;
}

void hz_segment_count_add(int n) {
  atomic_fetch_add_explicit(&segment_live, (size_t)(ptrdiff_t)n,
                            memory_order_relaxed);
}

bool hz_segment_register(hz_segment_t *seg) {
  HZ_ASSERT(seg->page_shift != 0);
  if (!hz_segment_map_set(seg, seg->page_shift)) return false;
  hz_segment_count_add(1);
  return true;
}

void hz_segment_unregister(hz_segment_t *seg) {
  hz_segment_map_set(seg, 0);
  hz_segment_count_add(-1);
}

size_t hz_segment_count(void) {
  return atomic_load_explicit(&segment_live, memory_order_relaxed);
}
