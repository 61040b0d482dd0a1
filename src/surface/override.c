/* override: the libc/glibc names, each a thin forward to the hz_ API, so
 * that LD_PRELOAD or static linking replaces the system allocator. Kept
 * apart from api.c so that a build can use hz_ without taking over malloc
 * (the ThreadSanitizer tests do). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "config.h"
#include "fast.h"
#include "hakozuna.h"
#include "heap.h"
#include "os.h"
#include "prof.h"
#include "stats.h"

/* The two hottest names get the inline fast paths themselves (no jump),
 * except in the debug variant, whose canaries live in the api box. */
HZ_EXPORT HZ_HOT(0) HZ_HOT_PAGE void *malloc(size_t size) {
  return HZ_CANARY ? hz_malloc(size) : hz_fast_malloc(size);
}
HZ_EXPORT HZ_HOT(1) void free(void *ptr) {
  if (HZ_CANARY)
    hz_free(ptr);
  else
    hz_fast_free(ptr);
}
HZ_EXPORT void *calloc(size_t n, size_t size) { return hz_calloc(n, size); }
HZ_EXPORT void *realloc(void *ptr, size_t size) {
  return hz_realloc(ptr, size);
}
HZ_EXPORT void *reallocarray(void *ptr, size_t n, size_t size) {
  return hz_reallocarray(ptr, n, size);
}
HZ_EXPORT void cfree(void *ptr) { hz_free(ptr); }
HZ_EXPORT void free_sized(void *ptr, size_t size) { hz_free_sized(ptr, size); }
HZ_EXPORT void free_aligned_sized(void *ptr, size_t alignment, size_t size) {
  hz_free_aligned_sized(ptr, alignment, size);
}

HZ_EXPORT void *aligned_alloc(size_t alignment, size_t size) {
  return hz_aligned_alloc(alignment, size);
}
HZ_EXPORT void *memalign(size_t alignment, size_t size) {
  return hz_memalign(alignment, size);
}
HZ_EXPORT int posix_memalign(void **out, size_t alignment, size_t size) {
  return hz_posix_memalign(out, alignment, size);
}

HZ_EXPORT void *valloc(size_t size) {
  return hz_memalign(hz_os_page_size(), size);
}

/* glibc: the size rounded up to whole pages (one page for 0). */
HZ_EXPORT void *pvalloc(size_t size) {
  size_t page = hz_os_page_size();
  if (size > HZ_REQUEST_MAX) {
    errno = ENOMEM;
    return NULL;
  }
  size_t rounded = size == 0 ? page : HZ_ALIGN_UP(size, page);
  return hz_memalign(page, rounded);
}

HZ_EXPORT size_t malloc_usable_size(void *ptr) { return hz_usable_size(ptr); }

/* The __libc_ forms some programs call to reach "the real malloc". */
HZ_EXPORT void *__libc_malloc(size_t size) { return hz_malloc(size); }
HZ_EXPORT void __libc_free(void *ptr) { hz_free(ptr); }
HZ_EXPORT void *__libc_calloc(size_t n, size_t size) {
  return hz_calloc(n, size);
}
HZ_EXPORT void *__libc_realloc(void *ptr, size_t size) {
  return hz_realloc(ptr, size);
}
HZ_EXPORT void *__libc_memalign(size_t alignment, size_t size) {
  return hz_memalign(alignment, size);
}
HZ_EXPORT void *__libc_valloc(size_t size) { return valloc(size); }
HZ_EXPORT void *__libc_pvalloc(size_t size) { return pvalloc(size); }
HZ_EXPORT int __posix_memalign(void **out, size_t alignment, size_t size) {
  return hz_posix_memalign(out, alignment, size);
}

/* ---------------------------------------------------------------------------
 * glibc extras
 * ------------------------------------------------------------------------- */
/* Purges every heap's free memory at once; 1 if memory was given back. */
HZ_EXPORT int malloc_trim(size_t pad) {
  (void)pad;
  hz_os_stats_t before, after;
  hz_os_counts(&before);
  hz_collect(true);
  hz_os_counts(&after);
  return after.purged_bytes != before.purged_bytes ||
         after.mapped_bytes < before.mapped_bytes;
}

/* glibc's fields, filled with what hakozuna has:
 *   arena     bytes mapped for small blocks (segments, cached ones too)
 *   ordblks   free chunks kept mapped: cached segments + large mappings
 *   hblks     live large mappings;  hblkhd  bytes mapped for large blocks
 *   uordblks  bytes handed out (small blocks at block size, large mappings)
 *   fordblks  mapped bytes not handed out;  fsmblks  large cache bytes
 *   keepcost  free bytes not yet purged and empty pages heaps keep (what
 *             malloc_trim would give back) */
HZ_EXPORT struct mallinfo2 mallinfo2(void) {
  hz_heap_summary_t heaps;
  hz_memory_summary_t memory;
  hz_api_summarize(&heaps, &memory);
  hz_os_stats_t os;
  hz_os_counts(&os);
  size_t mapped = os.mapped_bytes;
  size_t large_live = hz_stats_large_live_bytes();
  size_t large = large_live + memory.large_cached_bytes;
  size_t arena = mapped > large ? mapped - large : 0;
  size_t in_use = heaps.bytes_live + large_live;
  struct mallinfo2 info;
  memset(&info, 0, sizeof info);
  info.arena = arena;
  info.ordblks = memory.segments_cached + memory.large_cached;
  info.hblks = hz_stats_large_live_count();
  info.hblkhd = large;
  info.uordblks = in_use;
  info.fordblks = mapped > in_use ? mapped - in_use : 0;
  info.fsmblks = memory.large_cached_bytes;
  info.keepcost =
      memory.dirty_bytes + memory.large_dirty_bytes + heaps.bytes_kept_empty;
  return info;
}

static int clamp_int(size_t v) { return v > 0x7fffffff ? 0x7fffffff : (int)v; }

HZ_EXPORT struct mallinfo mallinfo(void) {
  struct mallinfo2 wide = mallinfo2();
  struct mallinfo info;
  memset(&info, 0, sizeof info);
  info.arena = clamp_int(wide.arena);
  info.ordblks = clamp_int(wide.ordblks);
  info.hblks = clamp_int(wide.hblks);
  info.hblkhd = clamp_int(wide.hblkhd);
  info.uordblks = clamp_int(wide.uordblks);
  info.fordblks = clamp_int(wide.fordblks);
  info.fsmblks = clamp_int(wide.fsmblks);
  info.keepcost = clamp_int(wide.keepcost);
  return info;
}

/* Options are set through HZ_* variables; accept and ignore glibc's. */
HZ_EXPORT int mallopt(int param, int value) {
  (void)param;
  (void)value;
  return 1;
}

HZ_EXPORT void malloc_stats(void) { hz_stats_print(); }

/* A program that ends with _exit or _Exit (dash's exit builtin, a child
 * after fork) runs no destructor: the exit reports asked for (statistics,
 * the profiler's last profile and leaks) are made here, then the process
 * ends as _exit ends it. */
static void override_exit(int status) __attribute__((noreturn));
static void override_exit(int status) {
  hz_prof_exit_report();
  hz_api_exit_report();
  hz_os_exit_process(status);
}
HZ_EXPORT void _exit(int status) { override_exit(status); }
HZ_EXPORT void _Exit(int status) { override_exit(status); }
