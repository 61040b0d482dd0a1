/* hakozuna — public API.
 *
 * The library also exports the whole libc/glibc allocation surface (malloc,
 * free, calloc, realloc, aligned_alloc, posix_memalign, malloc_usable_size,
 * operator new/delete, ...), so it can replace the system allocator through
 * LD_PRELOAD or static linking. The hz_ functions below are the same
 * allocator under names that never clash with libc.
 */
#ifndef HAKOZUNA_H
#define HAKOZUNA_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HZ_VERSION_MAJOR 0
#define HZ_VERSION_MINOR 1
#define HZ_VERSION_PATCH 0

/* ---------------------------------------------------------------------------
 * Allocation (semantics identical to the libc functions of the same name)
 * ------------------------------------------------------------------------- */
void *hz_malloc(size_t size);
void *hz_calloc(size_t count, size_t size);
void *hz_realloc(void *ptr, size_t size);
void *hz_reallocarray(void *ptr, size_t count, size_t size);
void hz_free(void *ptr);
void hz_free_sized(void *ptr, size_t size);
void hz_free_aligned_sized(void *ptr, size_t alignment, size_t size);

/* ---------------------------------------------------------------------------
 * Aligned allocation
 * ------------------------------------------------------------------------- */
void *hz_aligned_alloc(size_t alignment, size_t size);
void *hz_memalign(size_t alignment, size_t size);
int hz_posix_memalign(void **out, size_t alignment, size_t size);

/* ---------------------------------------------------------------------------
 * Introspection and maintenance
 * ------------------------------------------------------------------------- */
/* Bytes usable at ptr (>= the requested size); 0 for NULL. */
size_t hz_usable_size(const void *ptr);
/* Print the statistics report to stderr. */
void hz_stats_print(void);
/* Give cached memory back to the OS; force = do it now, regardless of delays.
 */
void hz_collect(bool force);

/* Heap profiling (HZ_PROF=1): write the live sampled allocations as a heap
 * profile (google-pprof's text format) to path, or to the next
 * HZ_PROF_PREFIX.pid.seq.api.heap when path is NULL. 0 on success; -1 with
 * errno ENOENT when the profiler is off, or the error of writing. */
int hz_prof_dump(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* HAKOZUNA_H */
