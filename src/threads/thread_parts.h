/* thread_parts: what thread_pool.c (the heaps: the pool, the list of all,
 * the collection rounds) offers thread.c (binding, the purge thread, the
 * slow paths). Internal to the thread box: no other box includes it. */
#ifndef HZ_THREAD_PARTS_H
#define HZ_THREAD_PARTS_H

#include "heap.h"
#include "lock.h"
#include "thread.h"

typedef struct {
  hz_heap_t *first, *last;
} hz_heap_list_t;

/* The pool lock, and the list of every heap not retired (by next_all)
 * under it. A signal handler whose malloc or free interrupts a thread
 * holding it never asks for it again (thread.c, "Inside the allocator"). */
extern hz_lock_t hz_thread_pool_lock;
extern hz_heap_list_t hz_thread_heaps;
void hz_thread_pool_take(void);
void hz_thread_pool_give(void);
/* One collection round at a time (purge thread, malloc_trim, reclaim). */
extern hz_lock_t hz_thread_collect_lock;
/* A pooled heap, else a new one (mapped with the pool lock released). */
hz_heap_t *hz_thread_heap_take(void);
/* Into the pool, the pool lock held. */
void hz_thread_heap_pool_locked(hz_heap_t *heap);

#endif
