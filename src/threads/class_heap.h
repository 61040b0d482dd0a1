/* class_heap: the class heaps, one a size class: the owners of the shared
 * pages (ladder box), which belong to no thread. A class heap is a
 * heap's pages (hz_pages_t) and nothing of a thread's heap: no bins but
 * the one that serves threads without a heap, no stash, no collection
 * handshake; whoever holds its class's lock works on it. A shared class's
 * bins refill from its pages, a thread's own pages of the class lent to
 * it first (heap_lend.c); blocks come home to it through its inbox.
 *
 * The class heaps are mapped together at the first use, so that one range
 * of addresses tells a shared page by its owner word, and never unmapped:
 * blocks of their pages may be anywhere in the program for as long as it
 * runs. A class heap is set up by its first use. Those of blocks up to
 * 16 KiB cut their pages from one set of segments, under its own lock
 * (taken inside a class's). */
#ifndef HZ_CLASS_HEAP_H
#define HZ_CLASS_HEAP_H

#include "heap.h"

/* The class heaps lie this far apart, class by class: 29 lines, which a
 * free multiplies a class by in one instruction to find the owner word of
 * its class heap's pages (hz_class_heap_word); with 27 (the type's size)
 * it took three, with 32 (a shift) two, each on every free of a shared
 * page's block (hot_pair, shared pages: 85 and 86 against 84). */
#define HZ_CLASS_HEAP_STRIDE (29 * 64)

typedef struct hz_class_heap_s {
  hz_pages_t pages; /* first: its pages' owner words name the class heap */
  /* Threads without a heap malloc one block at a time through this bin
   * (one slot, empty between mallocs), counted and sampled as a thread's
   * bin is. */
  _Alignas(64) hz_bin_t bin;
  void *slot;
  hz_class_counts_t counts;
} hz_class_heap_t;

_Static_assert(sizeof(hz_class_heap_t) <= HZ_CLASS_HEAP_STRIDE,
               "a class heap fits its stride");

/* Where the class heaps lie, set once as they are mapped: [base, base +
 * span), or an empty range before. */
extern uintptr_t hz_class_heaps_base;
extern size_t hz_class_heaps_span;

/* `owner` (a page's: hz_page_owner) is one of the class heaps: told by
 * its address alone, so a thread freeing its block reads no line of it. */
HZ_INLINE bool hz_pages_of_class_heap(const hz_pages_t *owner) {
  return (uintptr_t)owner - HZ_SHARED_GET(hz_class_heaps_base) <
         HZ_SHARED_GET(hz_class_heaps_span);
}

/* The page is one of the shared pages: a class heap's. */
HZ_INLINE bool hz_class_heap_holds(const hz_page_t *page) {
  return hz_pages_of_class_heap(hz_page_owner(page));
}

/* The owner word of the pages of the class heap of `cls` (its address),
 * read from the range alone; before the class heaps exist, a word no page
 * holds. */
HZ_INLINE uintptr_t hz_class_heap_word(size_t cls) {
  return HZ_SHARED_GET(hz_class_heaps_base) + cls * HZ_CLASS_HEAP_STRIDE;
}

/* The class heaps exist: mapped now if they were not (false: no memory). */
bool hz_class_heaps_ready(void);

/* The empty bin `bin` of class `cls` of the thread heap `heap` filled from
 * the class heap's pages, as many as it takes, under the class's lock,
 * taken once: the class heap takes its inbox home and ages its kept pages
 * first, and the heap's pages of the class are lent to it (heap_lend.c;
 * with `probed`, but for the page the class's probes take from). The
 * blocks taken (0: out of memory). */
uint32_t hz_class_heap_fill(hz_heap_t *heap, hz_bin_t *bin, uint8_t cls,
                            bool probed);
/* A block of `size` bytes for a thread without a heap (a young thread of
 * a crowded program: thread box), from its class heap's pages, under the
 * class's lock; NULL when out of memory. */
void *hz_class_heap_malloc(size_t size);

/* What the class heaps hold goes back: the inbox home, and with `all`
 * (trim), or for a class heap idle for HZ_IDLE_FULL_MS, every empty page
 * and the memory of free blocks. The purge thread's rounds call it with
 * all = false. */
void hz_class_heaps_collect(bool all);
/* Add the class heaps' counters to `out`. */
void hz_class_heaps_summarize(hz_heap_summary_t *out);
/* The most times one class's lock was taken. */
uint64_t hz_class_heaps_lock_taken(void);

/* fork: the locks held across it. */
void hz_class_heaps_fork_prepare(void);
void hz_class_heaps_fork_parent(void);
void hz_class_heaps_fork_child(void);

#endif
