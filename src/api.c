/* api: the hz_ entry points and the semantics the C library leaves to the
 * allocator (errno, overflow, zero sizes, alignment). Everything funnels
 * into the heap box's malloc/free fast paths or the large box. */
#define _GNU_SOURCE
#include "api.h"

#include <errno.h>
#include <string.h>

#include "hakozuna.h"
#include "heap.h"
#include "large.h"
#include "options.h"
#include "purge.h"
#include "stats.h"
#include "thread.h"

HZ_EXPORT void *hz_malloc(size_t size) { return hz_heap_malloc(size); }

HZ_EXPORT void hz_free(void *ptr) { hz_heap_free(ptr); }

HZ_EXPORT void hz_free_sized(void *ptr, size_t size) {
  (void)size;
  hz_heap_free(ptr);
}

HZ_EXPORT void hz_free_aligned_sized(void *ptr, size_t alignment, size_t size) {
  (void)alignment;
  (void)size;
  hz_heap_free(ptr);
}

HZ_EXPORT void *hz_calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  /* The large box knows whether a mapping still reads as zeros. */
  if (total > HZ_SMALL_MAX) return hz_large_alloc(total, 0, true);
  void *p = hz_heap_malloc(total);
  if (p != NULL) memset(p, 0, total);
  return p;
}

HZ_EXPORT size_t hz_usable_size(const void *ptr) {
  if (ptr == NULL) return 0;
  hz_segment_t *seg = hz_segment_of(ptr);
  if (seg == NULL) {
    hz_heap_invalid_pointer("usable size", ptr, "not allocated by hakozuna");
    return 0;
  }
  if (seg->kind == HZ_SEGMENT_LARGE) {
    if (hz_large_owns(seg, ptr)) return hz_large_usable_size(seg, ptr);
    hz_heap_invalid_pointer("usable size", ptr, "not an allocated block");
    return 0;
  }
  hz_page_t *page = hz_segment_page_of(seg, ptr);
  if (hz_page_heap(page) == NULL) {
    hz_heap_invalid_pointer("usable size", ptr, "not an allocated block");
    return 0;
  }
  if (HZ_LIKELY(!hz_page_has_aligned(page))) return page->block_size;
  const uint8_t *block = (const uint8_t *)hz_page_block_of(page, ptr);
  return page->block_size - (size_t)((const uint8_t *)ptr - block);
}

HZ_EXPORT void *hz_realloc(void *ptr, size_t size) {
  if (ptr == NULL) return hz_heap_malloc(size);
  if (size == 0) {
    hz_heap_free(ptr); /* glibc: realloc(p, 0) frees and returns NULL */
    return NULL;
  }
  hz_segment_t *seg = hz_segment_of(ptr);
  if (seg == NULL) {
    hz_heap_invalid_pointer("invalid realloc", ptr,
                            "not allocated by hakozuna");
    errno = ENOMEM;
    return NULL;
  }
  /* Large to large: resize the mapping, no copy. */
  if (seg->kind == HZ_SEGMENT_LARGE && size > HZ_SMALL_MAX &&
      hz_large_owns(seg, ptr)) {
    void *moved = hz_large_realloc(seg, ptr, size);
    if (moved != NULL) return moved;
  }
  size_t usable = hz_usable_size(ptr);
  if (usable == 0) { /* reported by hz_usable_size */
    errno = ENOMEM;
    return NULL;
  }
  /* Keep the block when it fits and would not waste more than half. */
  if (size <= usable && size >= usable / 2) return ptr;
  void *fresh = hz_heap_malloc(size);
  if (fresh == NULL) return NULL; /* the old block stays valid */
  memcpy(fresh, ptr, size < usable ? size : usable);
  hz_heap_free(ptr);
  return fresh;
}

HZ_EXPORT void *hz_reallocarray(void *ptr, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return hz_realloc(ptr, total);
}

/* Small aligned blocks: over-allocate within the size classes and return
 * the first aligned address inside; the page remembers that its blocks may
 * be freed through interior pointers. */
static void *api_aligned_small(size_t alignment, size_t size) {
  if (size == 0) size = 1; /* the aligned address must stay inside */
  size_t padded = size + alignment - HZ_MIN_ALIGN;
  uint8_t *block = hz_heap_malloc(padded);
  if (block == NULL) return NULL;
  uint8_t *aligned = (uint8_t *)HZ_ALIGN_UP((uintptr_t)block, alignment);
  if (aligned != block) {
    hz_page_t *page = hz_segment_page_of(hz_segment_of(block), block);
    if (!hz_page_has_aligned(page))
      hz_page_set_flag(page, HZ_PAGE_ALIGNED, true);
  }
  return aligned;
}

void *hz_api_memalign(size_t alignment, size_t size) {
  if (alignment <= HZ_MIN_ALIGN) return hz_heap_malloc(size);
  if (alignment & (alignment - 1)) {
    if (alignment > ((size_t)1 << 63)) {
      errno = EINVAL;
      return NULL;
    }
    alignment = (size_t)1 << (64 - __builtin_clzll(alignment));
  }
  if (size > HZ_REQUEST_MAX || alignment > HZ_REQUEST_MAX) {
    errno = alignment > HZ_REQUEST_MAX + 1 ? EINVAL : ENOMEM;
    return NULL;
  }
  if (size + alignment - HZ_MIN_ALIGN <= HZ_SMALL_MAX)
    return api_aligned_small(alignment, size);
  return hz_large_alloc(size, alignment, false);
}

HZ_EXPORT void *hz_memalign(size_t alignment, size_t size) {
  return hz_api_memalign(alignment, size);
}

HZ_EXPORT void *hz_aligned_alloc(size_t alignment, size_t size) {
  return hz_api_memalign(alignment, size);
}

HZ_EXPORT int hz_posix_memalign(void **out, size_t alignment, size_t size) {
  if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0)
    return EINVAL;
  int saved = errno;
  void *p = hz_api_memalign(alignment, size);
  if (p == NULL) {
    int err = errno;
    errno = saved;
    return err == EINVAL ? EINVAL : ENOMEM;
  }
  *out = p;
  return 0;
}

void hz_api_memory_summary(hz_memory_summary_t *out) {
  out->segments = hz_segment_count();
  hz_segment_cached(&out->segments_cached, &out->dirty_bytes);
  hz_large_cached(&out->large_cached, &out->large_cached_bytes,
                  &out->large_dirty_bytes);
}

HZ_EXPORT void hz_stats_print(void) {
  hz_heap_summary_t summary;
  hz_thread_summarize(&summary);
  hz_memory_summary_t memory;
  hz_api_memory_summary(&memory);
  hz_stats_report(&summary, &memory);
}

/* The calling thread's heap gives back everything, bins included; with
 * `force`, every other heap gives back what it can without its owner and
 * all free memory is purged now. Otherwise only what fell due. */
HZ_EXPORT void hz_collect(bool force) {
  hz_heap_t *heap = hz_heap_current();
  if (heap != &hz_heap_empty) hz_heap_trim(heap);
  if (force) hz_thread_collect(false);
  hz_purge_run(force);
}

/* HZ_SHOW_STATS=1: one report when the process exits. */
__attribute__((destructor)) static void api_exit_report(void) {
  if (hz_option_enabled(HZ_OPTION_SHOW_STATS)) hz_stats_print();
}
