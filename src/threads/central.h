/* central: the shared pages' routes and their ladder. A class's refills
 * come either from each thread's own pages or from the class's shared
 * pages (the class decision judges, decision.h, by route.h's rule, and
 * sets it here). A shared page belongs to no thread but to its class heap
 * (class_heap.h): its blocks go, whoever frees them, into the freeing
 * thread's bin; a bin that spills passes them to the CPU's cache
 * (cpu_cache.c), a full cache to the class's depot, a full depot to the
 * class heap (through a stash and its inbox). A bin of a shared class that
 * runs empty takes them back the same way up: the CPU's cache, the depot,
 * then the class heap's pages, under its class's lock, once a bin. Memory
 * is then bounded by the live bytes and the ladder, not by the thread
 * count: the shared pages empty as the whole program's blocks do. */
#ifndef HZ_CENTRAL_H
#define HZ_CENTRAL_H

#include <stdbool.h>
#include <stddef.h>

#include "class_heap.h"
#include "config.h"
#include "heap.h"

/* Where a class's refills come from, one byte a class, written by the
 * purge thread's rounds: the threads' own pages, the shared pages, or the
 * shared pages with one refill in HZ_ROUTE_PROBE_EVERY from the own pages
 * (a program not crowded: route.h). */
typedef enum {
  HZ_CENTRAL_THREAD,
  HZ_CENTRAL_SHARED,
  HZ_CENTRAL_PROBED
} hz_central_route_t;
extern uint8_t hz_central_route[HZ_CLASS_COUNT];

/* [condition: class-route] */
HZ_INLINE bool hz_central_shares(size_t cls) {
  return __atomic_load_n(&hz_central_route[cls], __ATOMIC_ACQUIRE) !=
         HZ_CENTRAL_THREAD;
}

/* The bin of a shared class is empty: a block for the thread of `heap`,
 * its bin refilled from the ladder (this CPU's cache, the depot, the class
 * heap's pages); NULL when out of memory. */
void *hz_central_malloc(hz_heap_t *heap, size_t size);
/* The bin of p's class is full as p, a block of `page`, is freed: its
 * older half leaves, the heap's own blocks onto their pages, the shared
 * pages' onto the ladder (this CPU's cache, the depot, the class heap). */
void hz_central_free_full(hz_heap_t *heap, hz_page_t *page, void *p);
/* Set where the class's refills come from (blocks already out travel as
 * their pages say, whatever it is). False when the shared pages cannot be
 * had (no memory for their heaps): the class stays on the threads' pages. */
bool hz_central_set(size_t cls, hz_central_route_t route);
/* The classes sharing pages now, and the times a class turned. */
void hz_central_count(uint64_t *shared_classes, uint64_t *turns);

/* The page is one of the shared pages. */
HZ_INLINE bool hz_central_holds(const hz_page_t *page) {
  return hz_pages_of_class_heap(hz_page_owner(page));
}

#endif
