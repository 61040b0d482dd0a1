/* prof_store: the profiler's maps and arrays (see prof_store.h). */
#include "prof_store.h"

#include <string.h>

#include "os.h"

/* A mapping of `count` elements of `size` bytes holding the `used` first
 * of `old` (which is unmapped, `old_count` long); NULL when out of memory
 * (old is kept then). Mappings come zeroed. */
static void *grow(void *old, size_t old_count, size_t used, size_t count,
                  size_t size) {
  void *fresh = hz_os_map(count * size);
  if (fresh == NULL) return NULL;
  if (old != NULL) {
    memcpy(fresh, old, used * size);
    hz_os_unmap(old, old_count * size);
  }
  return fresh;
}

/* ---------------------------------------------------------------------------
 * Maps: linear probing, removal by shifting back, at most half full.
 * ------------------------------------------------------------------------- */
static size_t map_home(const hz_prof_map_t *map, uintptr_t key) {
  uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ULL;
  return (size_t)(h >> 17) & (map->capacity - 1);
}

/* The slot holding key, or the empty slot where it would go. */
static hz_prof_slot_t *map_find(const hz_prof_map_t *map, uintptr_t key) {
  size_t mask = map->capacity - 1;
  for (size_t i = map_home(map, key);; i = (i + 1) & mask) {
    hz_prof_slot_t *slot = &map->slots[i];
    if (slot->key == key || slot->key == 0) return slot;
  }
}

static bool map_grow(hz_prof_map_t *map) {
  size_t capacity = map->capacity != 0 ? map->capacity * 2 : 1024;
  hz_prof_map_t bigger = {grow(NULL, 0, 0, capacity, sizeof(hz_prof_slot_t)),
                          capacity, 0};
  if (bigger.slots == NULL) return false;
  for (size_t i = 0; i < map->capacity; i++)
    if (map->slots[i].key != 0)
      *map_find(&bigger, map->slots[i].key) = map->slots[i];
  bigger.count = map->count;
  if (map->slots != NULL)
    hz_os_unmap(map->slots, map->capacity * sizeof(hz_prof_slot_t));
  *map = bigger;
  return true;
}

bool hz_prof_map_get(const hz_prof_map_t *map, uintptr_t key,
                     uintptr_t *value) {
  if (map->capacity == 0) return false;
  const hz_prof_slot_t *slot = map_find(map, key);
  if (slot->key == 0) return false;
  *value = slot->value;
  return true;
}

bool hz_prof_map_put(hz_prof_map_t *map, uintptr_t key, uintptr_t value) {
  if ((map->count + 1) * 2 > map->capacity && !map_grow(map)) return false;
  hz_prof_slot_t *slot = map_find(map, key);
  if (slot->key == 0) map->count++;
  *slot = (hz_prof_slot_t){key, value};
  return true;
}

bool hz_prof_map_take(hz_prof_map_t *map, uintptr_t key, uintptr_t *value) {
  if (map->capacity == 0) return false;
  hz_prof_slot_t *hole = map_find(map, key);
  if (hole->key == 0) return false;
  *value = hole->value;
  map->count--;
  /* Shift back each later entry of the run that may sit in the hole. */
  size_t mask = map->capacity - 1;
  size_t i = (size_t)(hole - map->slots);
  for (size_t j = (i + 1) & mask; map->slots[j].key != 0; j = (j + 1) & mask) {
    size_t home = map_home(map, map->slots[j].key);
    bool may_move = ((j - home) & mask) >= ((j - i) & mask);
    if (may_move) {
      map->slots[i] = map->slots[j];
      i = j;
    }
  }
  map->slots[i].key = 0;
  return true;
}

/* ---------------------------------------------------------------------------
 * Records and stacks
 * ------------------------------------------------------------------------- */
uint32_t hz_prof_store_add_stack(hz_prof_store_t *store, void *const *frames,
                                 uint32_t depth) {
  if (store->stack_count == store->stack_capacity) {
    uint32_t capacity = store->stack_capacity ? store->stack_capacity * 2 : 256;
    void *fresh = grow(store->stacks, store->stack_capacity, store->stack_count,
                       capacity, sizeof(hz_prof_stack_t));
    if (fresh == NULL) return UINT32_MAX;
    store->stacks = fresh;
    store->stack_capacity = capacity;
  }
  hz_prof_stack_t *s = &store->stacks[store->stack_count];
  s->depth = depth;
  memcpy(s->frames, frames, depth * sizeof frames[0]);
  s->alloc_count = s->alloc_bytes = 0;
  return store->stack_count++;
}

uint32_t hz_prof_store_add_record(hz_prof_store_t *store, uint32_t stack,
                                  size_t size, double weight) {
  uint32_t index;
  if (store->record_free != 0) {
    index = store->record_free - 1;
    store->record_free = (uint32_t)store->records[index].size;
  } else {
    if (store->record_used == store->record_capacity) {
      uint32_t capacity =
          store->record_capacity ? store->record_capacity * 2 : 1024;
      void *fresh =
          grow(store->records, store->record_capacity, store->record_used,
               capacity, sizeof(hz_prof_record_t));
      if (fresh == NULL) return UINT32_MAX;
      store->records = fresh;
      store->record_capacity = capacity;
    }
    index = store->record_used++;
  }
  store->records[index] = (hz_prof_record_t){stack, size, weight};
  return index;
}

void hz_prof_store_drop_record(hz_prof_store_t *store, uint32_t index) {
  store->records[index] =
      (hz_prof_record_t){HZ_PROF_NO_STACK, store->record_free, 0};
  store->record_free = index + 1;
}
