/* purge: when free memory goes back to the kernel. The segment and large
 * boxes keep what waits (free slices, cached mappings) in due order and
 * know how to give it back; this box decides when they do: from allocation
 * slow paths once the earliest item falls due, from the purge thread
 * (thread box) in threaded programs, or at once for malloc_trim. */
#ifndef HZ_PURGE_H
#define HZ_PURGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Give back everything that is due; with `force`, every free page's
 * memory, and the cached empty segments and large mappings are unmapped. */
void hz_purge_run(bool force);
/* Called on slow paths: runs hz_purge_run when something fell due and no
 * purge thread does the work. Cheap: a thread-local countdown first. */
void hz_purge_tick(void);
/* A large block of `bytes` was freed into the cache. With no purge thread
 * to give it back later (a single-threaded program, or HZ_PURGE_THREAD=0)
 * the cache keeps at most HZ_LARGE_DIRTY_KEEP resident, or this block if
 * larger: a program that frees its buffers and sleeps holds a bounded
 * amount, one that frees and takes blocks again keeps them. */
void hz_purge_large_freed(size_t bytes);
/* The purge thread took over (or stopped, e.g. in a fork child). */
void hz_purge_set_background(bool running);
/* The ms clock at which the next item falls due (UINT64_MAX: none). */
uint64_t hz_purge_next_due(void);

#endif
