/* ladder: the shared pages' ladder. A class's refills come either from
 * each thread's own pages or from the class's shared pages (the class
 * decision judges, decision.h, by route.h's rule). A shared page belongs
 * to no thread but to its class heap (class_heap.h): its blocks go,
 * whoever frees them, into the freeing thread's bin; a bin that spills
 * passes them to the CPU's cache (cpu_cache.c), a full cache to the
 * class's depot, a full depot to the class heap (through a stash and its
 * inbox). A bin of a shared class that runs empty takes them back the
 * same way up: the CPU's cache, the depot, then the class heap's pages,
 * under its class's lock, once a bin. Memory is then bounded by the live
 * bytes and the ladder, not by the thread count: the shared pages empty
 * as the whole program's blocks do. */
#ifndef HZ_LADDER_H
#define HZ_LADDER_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "heap.h"
#include "stats.h"

/* The bin of a shared class is empty: a block for the thread of `heap`,
 * its bin refilled from the ladder (this CPU's cache, the depot, the class
 * heap's pages); NULL when out of memory. */
void *hz_ladder_malloc(hz_heap_t *heap, size_t size);
/* The bin of p's class is full as p, a block of `page`, is freed: its
 * older half leaves, the heap's own blocks onto their pages, the shared
 * pages' onto the ladder (this CPU's cache, the depot, the class heap). */
void hz_ladder_free_full(hz_heap_t *heap, hz_page_t *page, void *p);
/* Every block the CPU caches and the depots hold goes home to its class
 * heap through `heap`, the calling thread's (trim, an idle process). */
void hz_ladder_drain(hz_heap_t *heap);
/* The blocks the caches and depots hold now (a snapshot while threads
 * run), and the ladder's counts for the stats report. */
uint64_t hz_ladder_blocks(void);
void hz_ladder_stats(hz_front_end_stats_t *out);

#endif
