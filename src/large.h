/* large: blocks above HZ_SMALL_MAX, each in its own mapping that starts
 * with a segment header (so pointer lookup works as for small blocks). */
#ifndef HZ_LARGE_H
#define HZ_LARGE_H

#include <stddef.h>

#include "segment.h"

/* A block of at least `size` bytes aligned to `align` (a power of two,
 * possibly 0 for the default); NULL with errno = ENOMEM on failure. */
void *hz_large_alloc(size_t size, size_t align);
void hz_large_free(hz_segment_t *seg, void *p);
size_t hz_large_usable_size(const hz_segment_t *seg, const void *p);
/* True if p is the block of this large segment. */
int hz_large_owns(const hz_segment_t *seg, const void *p);

#endif
