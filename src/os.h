/* os: the only box that talks to the kernel. Mapping, unmapping and advice
 * on address space, the page size, the environment and stderr output. It
 * never calls libc's allocator. */
#ifndef HZ_OS_H
#define HZ_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

size_t hz_os_page_size(void);

/* Fresh zeroed read-write memory, or NULL. */
void *hz_os_map(size_t size);
/* Like hz_os_map, but the result is aligned to `align` (a power of two). */
void *hz_os_map_aligned(size_t size, size_t align);
/* Like hz_os_map, but (result + offset) is aligned to `align`. */
void *hz_os_map_aligned_at(size_t size, size_t align, size_t offset);
void hz_os_unmap(void *addr, size_t size);
/* Tell the kernel the range's contents are no longer needed. */
void hz_os_discard(void *addr, size_t size);

const char *hz_os_getenv(const char *name);

/* A monotonic clock in milliseconds (coarse: a few ms resolution). */
uint64_t hz_os_now_ms(void);

/* printf-style output to stderr, prefixed "hakozuna: ". */
void hz_os_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The unprefixed form, for multi-line reports. */
void hz_os_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Resident set size of the process in bytes (0 if unknown). */
size_t hz_os_rss(void);

#endif
