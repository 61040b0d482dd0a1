/* lock: a mutex that counts how often it was taken. Every lock of the
 * allocator is one of these, so the stats report can show how many lock
 * acquisitions a workload costs per million operations (DESIGN: no lock
 * per block). The count lives beside the mutex and is written only by the
 * holder, so counting adds no shared line.
 *
 * Each thread also counts the locks it holds (hz_lock_depth, raised before
 * the mutex is asked for and lowered after it is let go): a signal handler
 * whose malloc or free finds it above 0 interrupted its own thread inside a
 * locked region, and takes a route that needs no lock (thread box), where
 * waiting for one would wait for itself. Each lock carries its id, passed
 * to a test's hook once it is held (hz_test_lock_taken): a test that raises
 * a signal there lands its handler inside that locked region every time. */
#ifndef HZ_LOCK_H
#define HZ_LOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"

/* Which lock it is, for a test's hook (tests/signal_test.c). */
typedef enum {
  HZ_LOCK_ID_OTHER,
  HZ_LOCK_ID_POOL,      /* thread: the heap pool */
  HZ_LOCK_ID_COLLECT,   /* thread: one collection round at a time */
  HZ_LOCK_ID_CLASS,     /* heap: a class heap */
  HZ_LOCK_ID_MAKE,      /* heap: the class heaps' mapping */
  HZ_LOCK_ID_CLASS_SET, /* heap: the segments the class heaps share */
  HZ_LOCK_ID_DEPOT,     /* cpu_cache: a class's depot */
  HZ_LOCK_ID_DRAIN,     /* cpu_cache: one drain of the caches at a time */
  HZ_LOCK_ID_SEGMENTS,  /* segment: the process's segments */
  HZ_LOCK_ID_SEGMENT,   /* segment: one segment's slices */
  HZ_LOCK_ID_LARGE,     /* large: the cache of mappings */
  HZ_LOCK_ID_GUARD,     /* guard: the pool's line of free slots */
  HZ_LOCK_ID_PROF,      /* prof: the profiler's tables */
  HZ_LOCK_ID_COUNT
} hz_lock_id_t;

typedef struct {
  pthread_mutex_t mutex;
  uint64_t taken; /* written under the mutex, read with HZ_SHARED_GET */
  uint8_t id;     /* hz_lock_id_t */
} hz_lock_t;

#define HZ_LOCK_INIT(id)                                                       \
  { PTHREAD_MUTEX_INITIALIZER, 0, (id) }

/* The locks the calling thread holds or waits for (defined by the os box:
 * this one has no object). */
extern HZ_TLS unsigned hz_lock_depth;

/* A test's hook, called with every lock just taken (the executable that
 * defines it exports it: tests/CMakeLists.txt). Weak: a program that
 * defines none pays a load and a compare per lock taken. */
extern void hz_test_lock_taken(unsigned id) __attribute__((weak));

HZ_INLINE void hz_lock_depth_add(int n) {
  atomic_signal_fence(memory_order_seq_cst);
  hz_lock_depth += (unsigned)n;
  atomic_signal_fence(memory_order_seq_cst);
}

HZ_INLINE void hz_lock_note_taken(hz_lock_t *lock) {
  HZ_SHARED_ADD(lock->taken, 1);
  if (HZ_UNLIKELY(hz_test_lock_taken != NULL)) hz_test_lock_taken(lock->id);
}

/* A lock set up at run time (in a zeroed array, or memory just mapped). */
HZ_INLINE void hz_lock_init(hz_lock_t *lock, hz_lock_id_t id) {
  pthread_mutex_init(&lock->mutex, NULL);
  lock->id = (uint8_t)id;
}

HZ_INLINE void hz_lock(hz_lock_t *lock) {
  hz_lock_depth_add(1); /* first: no moment held and not counted */
  pthread_mutex_lock(&lock->mutex);
  hz_lock_note_taken(lock);
}

/* False (nothing taken) when another thread holds it. */
HZ_INLINE bool hz_lock_try(hz_lock_t *lock) {
  hz_lock_depth_add(1);
  if (pthread_mutex_trylock(&lock->mutex) != 0) {
    hz_lock_depth_add(-1);
    return false;
  }
  hz_lock_note_taken(lock);
  return true;
}

HZ_INLINE void hz_unlock(hz_lock_t *lock) {
  pthread_mutex_unlock(&lock->mutex);
  hz_lock_depth_add(-1);
}

/* In a fork child, whose only thread may have found it held. */
HZ_INLINE void hz_lock_reinit(hz_lock_t *lock) {
  pthread_mutex_init(&lock->mutex, NULL);
}

/* The fork child's thread holds none (the locks it took in the parent's
 * handlers were set up again, not let go). */
HZ_INLINE void hz_lock_depth_reset(void) { hz_lock_depth = 0; }

HZ_INLINE uint64_t hz_lock_taken(const hz_lock_t *lock) {
  return HZ_SHARED_GET(lock->taken);
}

#endif
