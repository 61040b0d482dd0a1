/* os: the only box that talks to the kernel. Mapping, unmapping and advice
 * on address space, the page size, the environment and stderr output. It
 * never calls libc's allocator. */
#ifndef HZ_OS_H
#define HZ_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

size_t hz_os_page_size(void);

/* What the box has done since the start, counted here so that the box
 * calls nothing above it; the stats box reads it. */
typedef struct {
  uint64_t mmap_calls, munmap_calls, mremap_calls, madvise_calls;
  size_t mapped_bytes; /* mapped now */
  size_t purged_bytes; /* given back with madvise, in total */
} hz_os_stats_t;
void hz_os_counts(hz_os_stats_t *out);

/* Fresh zeroed read-write memory, or NULL. */
void *hz_os_map(size_t size);
/* Like hz_os_map, but the result is aligned to `align` (a power of two). */
void *hz_os_map_aligned(size_t size, size_t align);
/* Like hz_os_map, but (result + offset) is aligned to `align`. */
void *hz_os_map_aligned_at(size_t size, size_t align, size_t offset);
void hz_os_unmap(void *addr, size_t size);
/* Address space only: `size` bytes aligned to `align`, reading as zeros,
 * not writable and charged to no memory until committed; NULL if
 * refused. */
void *hz_os_reserve(size_t size, size_t align);
/* Make part of a reservation read-write; false if refused. */
bool hz_os_commit(void *addr, size_t size);
/* The process's address-space limit (ulimit -v), SIZE_MAX when none. */
size_t hz_os_address_limit(void);
/* Give the range's physical memory back, keeping the mapping. With
 * `lazy` (MADV_FREE) the kernel takes it only under memory pressure.
 * Returns true when the range now reads as zeros. */
bool hz_os_discard(void *addr, size_t size, bool lazy);
/* Ask the kernel to back the range with transparent huge pages where it
 * can, also when its mode is "madvise" (`wanted`), or never to. */
void hz_os_huge_pages(void *addr, size_t size, bool wanted);
/* Bytes of [addr, addr + size) resident now (mincore; at most 2 MiB of
 * 4 KiB pages; 0 if unknown). */
size_t hz_os_resident(void *addr, size_t size);
/* Back the range with huge pages now, copying what is resident
 * (MADV_COLLAPSE); false if the kernel cannot or will not. */
bool hz_os_collapse(void *addr, size_t size);
/* The kernel's transparent huge page mode at the first call: 0 never, 1
 * madvise, 2 always. */
int hz_os_thp_mode(void);
/* Free physical blocks of a huge page's size (2 MiB) or more, counted in
 * 2 MiB units (/proc/buddyinfo, all zones): 0 means a huge-page fault
 * would have to compact memory first. */
size_t hz_os_free_huge_blocks(void);
/* Resize the mapping at addr in place; false if the address space after
 * it is taken (nothing changes then). */
bool hz_os_remap_in_place(void *addr, size_t old_size, size_t new_size);
/* Move the mapping at addr (old_size bytes) to `to`, replacing whatever
 * is mapped there, and resize it to new_size without copying. */
bool hz_os_remap_to(void *addr, size_t old_size, size_t new_size, void *to);
#ifdef HZ_FAULT_INJECTION
/* Test builds: from now on, count mmap, mremap and madvise calls and fail
 * the nth (0: none) with ENOMEM, and every later one with from_then_on. */
void hz_os_fault_inject(unsigned long nth, bool from_then_on);
/* Calls counted since the last hz_os_fault_inject. */
unsigned long hz_os_fault_calls(void);
/* Test builds: take `mode` (as hz_os_thp_mode returns it) for the
 * kernel's, before anything has asked. */
void hz_os_thp_mode_pretend(int mode);
#endif
/* Make a range inaccessible (guard pages) or read-write again. */
void hz_os_protect(void *addr, size_t size, bool accessible);
/* Whether the 8 bytes at p can be read, asked of the kernel (no signal). */
bool hz_os_readable(const void *p);
/* End the process at once with `status`, as _exit does. */
void hz_os_exit_process(int status) __attribute__((noreturn));
/* The calling thread's id (gettid). */
long hz_os_thread_id(void);
/* Leave a range out of core dumps (MADV_DONTDUMP). Its mapping then has
 * flags of its own: the kernel never merges it with its neighbours. */
void hz_os_no_dump(void *addr, size_t size);
/* Fill buf with random bytes from the kernel (getrandom); false if it
 * could not, and then buf holds a weaker mix of clock and addresses. */
bool hz_os_random(void *buf, size_t size);
/* Installed physical memory in bytes (0 if unknown). */
size_t hz_os_physical_memory(void);

/* A memory barrier on every running thread of the process (membarrier),
 * so one side of a handshake can use a plain compiler barrier. False if
 * the kernel does not offer it. */
bool hz_os_barrier_all_threads(void);
void hz_os_sleep_ms(uint64_t ms);
void hz_os_yield(void);

const char *hz_os_getenv(const char *name);

/* A monotonic clock in milliseconds (coarse: a few ms resolution). */
uint64_t hz_os_now_ms(void);
/* A monotonic clock in nanoseconds (the vDSO's: some 20 ns a call). */
uint64_t hz_os_now_ns(void);

/* printf-style output to stderr, prefixed "hakozuna: ". */
void hz_os_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The unprefixed form, for multi-line reports. */
void hz_os_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* From now on, hz_os_print writes to a copy of stderr as it is now, which
 * stays open when the program closes stderr. */
void hz_os_keep_report_fd(void);
/* Where hz_os_print writes: stderr or the copy. */
int hz_os_report_fd(void);

/* Resident set size of the process in bytes, now and at its peak (0 if
 * unknown). */
size_t hz_os_rss(void);
size_t hz_os_peak_rss(void);
/* Page faults of the process so far (getrusage: every thread). */
void hz_os_faults(uint64_t *minor, uint64_t *major);
/* Anonymous memory of the process backed by transparent huge pages, in
 * bytes (AnonHugePages of /proc/self/smaps_rollup; 0 if unknown). */
size_t hz_os_huge_bytes(void);

/* Create (or truncate) the file at path and write the text to it; false
 * on any error. */
bool hz_os_write_file(const char *path, const char *text, size_t size);

#endif
