/* central: the shared pages of crowded programs. While more threads hold a
 * heap than the CPUs can run and they free each other's blocks, the bins
 * of every small class refill from heaps that no thread owns, one a
 * class, each under its own lock taken once per refill (a bin), instead of
 * each thread cutting pages of its own for every class. Its blocks travel home
 * like any other heap's (per-CPU caches and depots, stashes, its inbox), and
 * the refill that takes the lock takes the inbox home first. Memory is then
 * bounded by the live bytes and the caches, not by the thread count: each
 * heap's own pages empty only as its own blocks come back, while the
 * shared pages empty as the whole program's do. The purge thread's rounds
 * turn it on and off (thread box) and give back what it keeps idle. */
#ifndef HZ_CENTRAL_H
#define HZ_CENTRAL_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "heap.h"

/* Every small class has its shared heap (class 0, the large blocks', is
 * unused). */
#define HZ_CENTRAL_CLASSES HZ_CLASS_COUNT

/* Written by the purge thread's rounds, read by the malloc slow path. */
extern bool hz_central_on;

/* A small malloc's slow path refills from the shared pages: every one
 * while they are on, whether the caches serve its class or not (a heap
 * whose refills went back and forth between its own pages and the shared
 * ones gave its pages' free memory back at each turn). */
HZ_INLINE bool hz_central_serves(void) {
  return __atomic_load_n(&hz_central_on, __ATOMIC_RELAXED);
}

/* A small block for the thread of `heap`, its bin refilled from the shared
 * pages of its class; NULL when out of memory. */
void *hz_central_malloc(hz_heap_t *heap, size_t size);
/* A small block for a thread without a heap (a young thread of a crowded
 * program: thread box), from the bin of its class's shared heap, under the
 * class's lock; NULL when out of memory. Works whether the shared pages are
 * on or off. */
void *hz_central_malloc_alone(size_t size);
/* Turn the shared pages on or off for the mallocs to come (blocks already
 * out come home either way). False when they cannot be had (no memory for
 * their heap). */
bool hz_central_set(bool on);
/* What the shared pages hold goes back: the inbox home, and with `all`
 * (trim, or idle for HZ_IDLE_FULL_MS) every empty page and the memory of
 * free blocks. The purge thread's rounds call it with all = false. */
void hz_central_collect(bool all);
/* The shared pages' heaps lie in [base, base + span): their owner words
 * name one of them (NULL and 0 before they are first used). */
const void *hz_central_base(void);
size_t hz_central_span(void);

/* The page is one of the shared pages. */
HZ_INLINE bool hz_central_holds(const hz_page_t *page) {
  return hz_heap_is_shared(hz_page_heap(page));
}
/* Add the shared pages' counters to `out`. */
void hz_central_summarize(hz_heap_summary_t *out);
uint64_t hz_central_lock_taken(void);

/* fork: the lock held across it. */
void hz_central_fork_prepare(void);
void hz_central_fork_parent(void);
void hz_central_fork_child(void);

#endif
