/* large: blocks above HZ_SMALL_MAX, each in its own mapping that starts
 * with a segment header (so pointer lookup works as for small blocks), and
 * a cache of freed mappings by size class that gives their memory back
 * after the purge delay. */
#ifndef HZ_LARGE_H
#define HZ_LARGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "segment.h"

/* A block of at least `size` bytes aligned to `align` (a power of two,
 * possibly 0 for the default), zeroed when `zero`; NULL with
 * errno = ENOMEM on failure. */
void *hz_large_alloc(size_t size, size_t align, bool zero);
/* The same without a lock, for any size (a signal handler's malloc that
 * interrupted the allocator inside a lock or a slow path: thread box): a
 * mapping of its own, never the cache's; for a small request one of 64 KiB
 * that such a request freed before, if one waits. Freed as any large block,
 * such a small one waits for the next (up to 64 of them), or goes back to
 * the kernel; it never joins the cache. */
void *hz_large_alloc_fresh(size_t size, size_t align, bool zero);
void hz_large_free(hz_segment_t *seg);
/* The same without a lock: the mapping waits as above, or goes back to the
 * kernel, never into the cache. */
void hz_large_free_unmap(hz_segment_t *seg);
size_t hz_large_usable_size(const hz_segment_t *seg, const void *p);
/* True if p is the live block of this large segment. */
int hz_large_owns(const hz_segment_t *seg, const void *p);
/* True if p was the block of this large segment and has been freed (the
 * mapping is cached): a second free. */
bool hz_large_was_freed(const hz_segment_t *seg, const void *p);
/* Resize the block p of seg to `size` (above HZ_SMALL_MAX) without
 * copying: in place, or by moving its pages with mremap. NULL when it
 * cannot (p is unchanged then). */
void *hz_large_realloc(hz_segment_t *seg, void *p, size_t size);

/* Purge cached mappings freed at least the purge delay ago, as far as the
 * large-block demand of the last half to whole delay could not take them
 * again (all when `force`); returns when the next one falls due
 * (UINT64_MAX: none). */
uint64_t hz_large_purge(uint64_t now, bool force);
/* Dirty cached bytes a cache miss leaves resident (or the request's size,
 * if larger), and a free where no purge thread runs (or the block freed):
 * enough for the blocks a program reuses, not for buffers it has left
 * behind (16 MiB cost malloc_large 8% more page faults, 64 MiB 0.8%). */
#define HZ_LARGE_DIRTY_KEEP ((size_t)64 << 20)
/* Purge the oldest cached mappings until at most `keep` bytes of the cache
 * are resident. */
void hz_large_purge_dirty_over(size_t keep);
/* Unmap every cached mapping: address space back too, not only memory. */
void hz_large_unmap_cached(void);
uint64_t hz_large_purge_next(void);
/* Mappings in the cache, their bytes, and the bytes not yet purged. */
void hz_large_cached(size_t *regions, size_t *bytes, size_t *dirty);

/* How often the large lock was taken (stats). */
uint64_t hz_large_lock_taken(void);
void hz_large_fork_prepare(void);
void hz_large_fork_parent(void);
void hz_large_fork_child(void);

#endif
