/* depot: the depots, one a class of the CPU caches, each a stack of
 * batches under its lock (see depot.h). */
#include "depot.h"

#include <string.h>

static hz_depot_t depots[HZ_CPU_CLASSES];

static struct { uint64_t puts, takes; } counts;

void hz_depot_init(void) {
  for (int c = 0; c < HZ_CPU_CLASSES; c++)
    hz_lock_init(&depots[c].lock, HZ_LOCK_ID_DEPOT);
}

/* The newest batch of the depot of `cls`, uncounted. */
static unsigned depot_pop(size_t cls, void **out) {
  hz_depot_t *d = &depots[cls];
  if (HZ_SHARED_GET(d->batches) == 0) return 0;
  hz_lock(&d->lock);
  unsigned n = 0;
  if (d->batches != 0) {
    uint32_t i = d->batches - 1;
    n = d->count[i];
    memcpy(out, d->slots[i], n * sizeof(void *));
    HZ_SHARED_SET(d->batches, i);
  }
  hz_unlock(&d->lock);
  return n;
}

unsigned hz_depot_take(size_t cls, void **out) {
  unsigned n = depot_pop(cls, out);
  if (n != 0) __atomic_add_fetch(&counts.takes, 1, __ATOMIC_RELAXED);
  return n;
}

bool hz_depot_put(size_t cls, void *const *blocks, unsigned n) {
  hz_depot_t *d = &depots[cls];
  if (HZ_SHARED_GET(d->batches) == HZ_DEPOT_BATCHES) return false;
  hz_lock(&d->lock);
  bool room = d->batches < HZ_DEPOT_BATCHES;
  if (room) {
    memcpy(d->slots[d->batches], blocks, n * sizeof(void *));
    HZ_SHARED_SET(d->count[d->batches], n); /* the stats read it */
    HZ_SHARED_SET(d->batches, d->batches + 1);
  }
  hz_unlock(&d->lock);
  if (room) __atomic_add_fetch(&counts.puts, 1, __ATOMIC_RELAXED);
  return room;
}

void hz_depot_drain(hz_heap_t *heap) {
  void *batch[HZ_CPU_BATCH];
  unsigned n;
  for (int c = 1; c < HZ_CPU_CLASSES; c++)
    while ((n = depot_pop((size_t)c, batch)) != 0)
      hz_heap_send_shared(heap, batch, n);
}

void hz_depot_fork_prepare(void) {
  for (int c = 0; c < HZ_CPU_CLASSES; c++)
    hz_lock(&depots[c].lock);
}

void hz_depot_fork_parent(void) {
  for (int c = 0; c < HZ_CPU_CLASSES; c++)
    hz_unlock(&depots[c].lock);
}

void hz_depot_fork_child(void) {
  for (int c = 0; c < HZ_CPU_CLASSES; c++)
    hz_lock_reinit(&depots[c].lock);
}

/* The blocks the depot of `cls` holds: its count read once, no lock
 * taken. */
static uint64_t depot_blocks(int cls) {
  const hz_depot_t *d = &depots[cls];
  uint64_t blocks = 0;
  uint32_t batches = HZ_SHARED_GET(d->batches);
  for (uint32_t i = 0; i < batches && i < HZ_DEPOT_BATCHES; i++)
    blocks += HZ_SHARED_GET(d->count[i]);
  return blocks;
}

uint64_t hz_depot_blocks(void) {
  uint64_t blocks = 0;
  for (int c = 1; c < HZ_CPU_CLASSES; c++)
    blocks += depot_blocks(c);
  return blocks;
}

void hz_depot_stats(hz_front_end_stats_t *out) {
  out->depot_puts = HZ_SHARED_GET(counts.puts);
  out->depot_takes = HZ_SHARED_GET(counts.takes);
  for (int c = 1; c < HZ_CPU_CLASSES; c++) {
    uint64_t blocks = depot_blocks(c);
    out->cached[c] += blocks;
    out->cached_blocks += blocks;
  }
}
