/* prof_store: the profiler's memory. Open-addressing maps from a nonzero
 * word to a word, and the arrays of sample records and distinct stacks,
 * all in mappings of their own that double when full (never malloc).
 * Not thread-safe: the profiler box holds its lock around every call. */
#ifndef HZ_PROF_STORE_H
#define HZ_PROF_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HZ_PROF_DEPTH 48 /* frames kept per stack */

typedef struct {
  uintptr_t key; /* 0: empty slot */
  uintptr_t value;
} hz_prof_slot_t;

typedef struct {
  hz_prof_slot_t *slots;
  size_t capacity; /* a power of two, or 0 */
  size_t count;
} hz_prof_map_t;

/* True and *value when key is in the map. */
bool hz_prof_map_get(const hz_prof_map_t *map, uintptr_t key, uintptr_t *value);
/* Insert or replace; false when out of memory. */
bool hz_prof_map_put(hz_prof_map_t *map, uintptr_t key, uintptr_t value);
/* Remove key, handing back its value; false when absent. */
bool hz_prof_map_take(hz_prof_map_t *map, uintptr_t key, uintptr_t *value);

typedef struct {
  uint32_t depth;
  void *frames[HZ_PROF_DEPTH];     /* innermost first: return addresses */
  double alloc_count, alloc_bytes; /* estimated, since the start */
} hz_prof_stack_t;

/* A live sampled block. A free record has stack == HZ_PROF_NO_STACK and
 * links the next free one by `size`. */
#define HZ_PROF_NO_STACK UINT32_MAX
typedef struct {
  uint32_t stack;
  size_t size;   /* bytes asked for */
  double weight; /* allocations the sample stands for */
} hz_prof_record_t;

typedef struct {
  hz_prof_record_t *records;
  uint32_t record_capacity, record_used; /* used: slots ever handed out */
  uint32_t record_free;                  /* 1 + first free slot; 0: none */
  hz_prof_stack_t *stacks;
  uint32_t stack_capacity, stack_count;
} hz_prof_store_t;

/* Index of a new stack or record; UINT32_MAX when out of memory. */
uint32_t hz_prof_store_add_stack(hz_prof_store_t *store, void *const *frames,
                                 uint32_t depth);
uint32_t hz_prof_store_add_record(hz_prof_store_t *store, uint32_t stack,
                                  size_t size, double weight);
void hz_prof_store_drop_record(hz_prof_store_t *store, uint32_t index);

#endif
