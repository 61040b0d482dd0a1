/* api: helpers shared by the public entry points (api.c, override.c,
 * cxx.c). */
#ifndef HZ_API_H
#define HZ_API_H

#include <stddef.h>

#include "stats.h"

/* Aligned allocation with glibc's memalign semantics: alignment rounded up
 * to a power of two, at least HZ_MIN_ALIGN. */
void *hz_api_memalign(size_t alignment, size_t size);
/* Allocation used by operator new: calls the new-handler on failure. */
void *hz_api_cxx_new(size_t size, size_t alignment, int nothrow);
/* What every heap counted, and what the segment and large boxes hold
 * (mapped, cached, not yet purged): everything a report needs. */
void hz_api_summarize(hz_heap_summary_t *heaps, hz_memory_summary_t *memory);
/* The process ends: the stats report and its JSON, if asked (a destructor;
 * _exit calls it itself). */
void hz_api_exit_report(void);

#endif
