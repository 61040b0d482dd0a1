/* lock: a mutex that counts how often it was taken. Every lock of the
 * allocator is one of these, so the stats report can show how many lock
 * acquisitions a workload costs per million operations (DESIGN: no lock
 * per block). The count lives beside the mutex and is written only by the
 * holder, so counting adds no shared line. */
#ifndef HZ_LOCK_H
#define HZ_LOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"

typedef struct {
  pthread_mutex_t mutex;
  uint64_t taken; /* written under the mutex, read with HZ_SHARED_GET */
} hz_lock_t;

#define HZ_LOCK_INIT                                                           \
  { PTHREAD_MUTEX_INITIALIZER, 0 }

HZ_INLINE void hz_lock(hz_lock_t *lock) {
  pthread_mutex_lock(&lock->mutex);
  HZ_SHARED_ADD(lock->taken, 1);
}

/* False (nothing taken) when another thread holds it. */
HZ_INLINE bool hz_lock_try(hz_lock_t *lock) {
  if (pthread_mutex_trylock(&lock->mutex) != 0) return false;
  HZ_SHARED_ADD(lock->taken, 1);
  return true;
}

HZ_INLINE void hz_unlock(hz_lock_t *lock) {
  pthread_mutex_unlock(&lock->mutex);
}

/* In a fork child, whose only thread may have found it held. */
HZ_INLINE void hz_lock_reinit(hz_lock_t *lock) {
  pthread_mutex_init(&lock->mutex, NULL);
}

HZ_INLINE uint64_t hz_lock_taken(const hz_lock_t *lock) {
  return HZ_SHARED_GET(lock->taken);
}

#endif
