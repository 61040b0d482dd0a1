/* Lets one threaded test source run against the libc names (linked or
 * LD_PRELOAD) or, built with -DTEST_HZ_API, against the hz_ API (used by the
 * ThreadSanitizer build, which must not replace the sanitizer's malloc). */
#ifndef HZ_TEST_ALLOC_H
#define HZ_TEST_ALLOC_H

#include <stdlib.h>

#ifdef TEST_HZ_API
#include "hakozuna.h"
#define t_malloc        hz_malloc
#define t_calloc        hz_calloc
#define t_realloc       hz_realloc
#define t_free          hz_free
#define t_aligned_alloc hz_aligned_alloc
#define t_usable_size   hz_usable_size
#else
#include <malloc.h>
#define t_malloc        malloc
#define t_calloc        calloc
#define t_realloc       realloc
#define t_free          free
#define t_aligned_alloc aligned_alloc
#define t_usable_size   malloc_usable_size
#endif

#endif
