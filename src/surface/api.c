/* api: the hz_ entry points and the semantics the C library leaves to the
 * allocator (errno, overflow, zero sizes, alignment). Everything funnels
 * into the fast box's malloc/free (fast.h) or the large box. */
#define _GNU_SOURCE
#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fast.h"
#include "guard.h"
#include "hakozuna.h"
#include "heap.h"
#include "large.h"
#include "options.h"
#include "os.h"
#include "prof.h"
#include "purge.h"
#include "stats.h"
#include "thread.h"
#include "tool.h"

/* ---------------------------------------------------------------------------
 * Locating a pointer handed back to us
 * ------------------------------------------------------------------------- */
typedef struct {
  uint8_t *block; /* start of the block p lies in */
  size_t room;    /* bytes from p to the end of the block */
  unsigned cls;   /* size class; 0 for a large or guarded block */
  bool aligned;   /* p may be inside the block (memalign) */
  bool guarded;   /* in the guard's pool: its size is the size asked for */
} api_block_t;

/* Find the live block p belongs to; false, reported as `what`, when p is
 * not ours or not a block start (inside a block only where memalign put
 * it). Any thread may ask, so only blocks that fit the page are trusted,
 * not only those carved. */
static bool api_locate(const void *p, const char *what, api_block_t *out) {
  if (hz_guard_holds(p)) {
    size_t size = hz_guard_size(p, what);
    *out = (api_block_t){(uint8_t *)p, size, 0, false, true};
    return size != 0;
  }
  hz_segment_t *seg = hz_segment_of(p);
  if (seg == NULL) {
    hz_check_report(what, p, "not allocated by hakozuna");
    return false;
  }
  if (seg->kind == HZ_SEGMENT_LARGE) {
    if (!hz_large_owns(seg, p)) {
      if (hz_large_was_freed(seg, p))
        hz_check_fail(strcmp(what, "invalid free") == 0 ? "double free"
                                                        : "use after free",
                      p, 0, hz_large_usable_size(seg, p));
      else
        hz_check_report(what, p, "not an allocated block");
      return false;
    }
    *out = (api_block_t){(uint8_t *)p, hz_large_usable_size(seg, p), 0, false,
                         false};
    return true;
  }
  hz_page_t *page = hz_segment_page_of(seg, p);
  if (hz_page_owner(page) == NULL) {
    hz_check_report(what, p, "not an allocated block");
    return false;
  }
  out->cls = page->class_id;
  out->aligned = hz_page_has_aligned(page);
  out->block = (uint8_t *)hz_page_block_named(page, p, page->reserved);
  if (out->block == NULL) {
    char line[96];
    snprintf(line, sizeof line, "%s (not at the start of a block)", what);
    hz_check_fail(line, p, page->class_id, page->block_size);
    return false;
  }
  out->room = page->block_size - (size_t)((const uint8_t *)p - out->block);
  return true;
}

/* ---------------------------------------------------------------------------
 * Debug variant: every block carries a canary after the bytes asked for
 * (check box), and memcheck is told of every block (tool box); these wrap
 * the plain paths, which the other variants use directly. Whatever reads
 * or writes a block that is not the caller's runs quiet.
 * ------------------------------------------------------------------------- */
static void *api_debug_alloc(size_t size, size_t align, bool zeroed);

static size_t api_padded(size_t size) {
  return size > HZ_REQUEST_MAX - HZ_CHECK_EXTRA ? SIZE_MAX
                                                : size + HZ_CHECK_EXTRA;
}

static void *api_arm(void *p, size_t size, bool zeroed) {
  api_block_t b;
  if (p != NULL && api_locate(p, "canary", &b))
    hz_check_canary_arm(p, size, b.room, zeroed);
  return p;
}

/* The bytes the user asked for, after checking the canary. */
static size_t api_checked_size(const void *p, const api_block_t *b) {
  if (b->cls != 0 && !b->aligned && hz_check_is_marked(b->block))
    hz_check_fail("double free", p, b->cls, 0);
  return hz_check_canary_verify(p, b->room, b->cls);
}

/* Locate p (false, reported, if it is no block) and its size: in debug
 * the size asked for, after checking the canary (quietly: it reads bytes
 * memcheck does not count as the caller's), elsewhere the room. */
static bool api_find(const void *p, const char *what, api_block_t *b,
                     size_t *size) {
  if (!HZ_CANARY) {
    bool ok = api_locate(p, what, b);
    if (ok) *size = b->room;
    return ok;
  }
  hz_tool_quiet(true);
  bool ok = api_locate(p, what, b);
  if (ok) *size = api_checked_size(p, b);
  hz_tool_quiet(false);
  return ok;
}

static void api_debug_free(void *p) {
  api_block_t b;
  size_t size;
  if (p == NULL || !api_find(p, "invalid free", &b, &size)) return;
  hz_tool_freed(p); /* before another thread can have it again */
  hz_tool_quiet(true);
  hz_check_fill_freed(p, b.room);
  hz_fast_free(p);
  hz_tool_quiet(false);
}

/* ---------------------------------------------------------------------------
 * malloc, free, calloc, usable size, realloc
 * ------------------------------------------------------------------------- */
HZ_EXPORT HZ_HOT(2) void *hz_malloc(size_t size) {
  if (HZ_CANARY) return api_debug_alloc(size, 0, false);
  return hz_fast_malloc(size);
}

HZ_EXPORT HZ_HOT(3) void hz_free(void *ptr) {
  if (HZ_CANARY)
    api_debug_free(ptr);
  else
    hz_fast_free(ptr);
}

/* pvalloc's block: page-aligned, its size rounded up to whole pages. */
static bool api_pvalloc_size(const void *ptr, size_t size, size_t known) {
  size_t page = hz_os_page_size();
  size_t rounded = size == 0 ? page : HZ_ALIGN_UP(size, page);
  return ((uintptr_t)ptr & (page - 1)) == 0 && rounded == known;
}

/* Secure variants: the size a sized free names must be the size asked of
 * whichever function allocated the block. Secure checks that it fits the
 * block and could have got it: from its class, or at least half of it
 * (realloc keeps a block down to half), or any size up to the room for a
 * block that an aligned request may have served (memalign pads). Debug
 * knows the size asked for (pvalloc's: rounded up to pages). */
static void api_check_sized(void *ptr, size_t size, bool aligned) {
  api_block_t b;
  size_t known;
  if (ptr == NULL || !api_find(ptr, "invalid free", &b, &known)) return;
  bool wrong;
  if (HZ_CANARY)
    wrong = known != size && !api_pvalloc_size(ptr, size, known);
  else
    wrong =
        size > b.room || (b.cls != 0 && !aligned && !b.aligned &&
                          size < b.room / 2 && hz_sizeclass_of(size) != b.cls);
  if (wrong) {
    char what[96];
    snprintf(what, sizeof what, "sized delete mismatch (freed as %zu bytes)",
             size);
    hz_check_fail(what, ptr, b.cls, b.cls != 0 ? 0 : b.room);
  }
}

HZ_EXPORT void hz_free_sized(void *ptr, size_t size) {
  if (HZ_SECURE) api_check_sized(ptr, size, false);
  hz_free(ptr);
}

HZ_EXPORT void hz_free_aligned_sized(void *ptr, size_t alignment, size_t size) {
  (void)alignment;
  if (HZ_SECURE && size != 0) api_check_sized(ptr, size, true);
  hz_free(ptr);
}

static void *api_calloc(size_t total) {
  /* The large box knows whether a mapping still reads as zeros. */
  if (total > HZ_SMALL_MAX) return hz_thread_large_alloc(total, 0, true);
  void *p = hz_fast_malloc(total);
  if (p != NULL) memset(p, 0, total);
  return p;
}

HZ_EXPORT void *hz_calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  if (HZ_CANARY) return api_debug_alloc(total, 0, true);
  return api_calloc(total);
}

HZ_EXPORT size_t hz_usable_size(const void *ptr) {
  api_block_t b;
  size_t size;
  if (ptr == NULL || !api_find(ptr, "invalid malloc_usable_size", &b, &size))
    return 0;
  return size;
}

/* The size of the block p starts, when p is the plain case a realloc
 * meets most: a block start on a page of the arena with no flag (no
 * memalign'd, sampled or retired blocks there). 0 otherwise: api_find
 * then decides, and reports what is wrong. Inline, with no call: realloc
 * of small blocks spent a third of its time in the generic lookup. */
static inline size_t api_plain_block_size(const void *p) {
  if (!hz_arena_holds(p)) return 0;
  hz_page_t *page = hz_segment_block_page(p);
  uintptr_t word = hz_page_owner_word(page);
  if (word == 0 || (word & HZ_PAGE_FLAG_MASK) != 0 ||
      !hz_page_is_block(page, p, page->reserved))
    return 0;
  return page->block_size;
}

/* Debug: always a fresh block, so the canary moves with the size. */
static void *api_realloc_copy(void *ptr, size_t size, size_t old) {
  void *fresh = hz_malloc(size);
  if (fresh == NULL) return NULL; /* the old block stays valid */
  memcpy(fresh, ptr, size < old ? size : old);
  hz_free(ptr);
  return fresh;
}

HZ_EXPORT void *hz_realloc(void *ptr, size_t size) {
  if (ptr == NULL) return hz_malloc(size);
  if (size == 0) {
    hz_free(ptr); /* glibc: realloc(p, 0) frees and returns NULL */
    return NULL;
  }
  size_t plain = HZ_CANARY ? 0 : api_plain_block_size(ptr);
  if (plain != 0) {
    if (size <= plain && size >= plain / 2) return ptr;
    return api_realloc_copy(ptr, size, plain);
  }
  api_block_t b;
  size_t known;
  if (!api_find(ptr, "invalid realloc", &b, &known)) {
    errno = ENOMEM;
    return NULL;
  }
  if (HZ_CANARY) return api_realloc_copy(ptr, size, known);
  /* Large to large: resize the mapping, no copy (not inside the
   * allocator, hz_heap_inside: it takes the large box's lock). */
  if (b.cls == 0 && !b.guarded && size > HZ_SMALL_MAX &&
      !hz_heap_inside(hz_heap_current())) {
    void *moved = hz_large_realloc(hz_segment_base(ptr), ptr, size);
    if (HZ_UNLIKELY(hz_prof_active) && moved != NULL)
      hz_prof_moved(ptr, moved, size);
    if (moved != NULL) return moved;
  }
  /* Keep the block when it fits and would not waste more than half. */
  if (size <= b.room && size >= b.room / 2) return ptr;
  return api_realloc_copy(ptr, size, b.room);
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
 * be freed through interior pointers, and the block where (check.h). */
static void *api_aligned_small(size_t alignment, size_t size) {
  if (size == 0) size = 1; /* the aligned address must stay inside */
  size_t padded = size + alignment - HZ_MIN_ALIGN;
  uint8_t *block = hz_fast_malloc(padded);
  if (block == NULL) return NULL;
  uint8_t *aligned = (uint8_t *)HZ_ALIGN_UP((uintptr_t)block, alignment);
  if (hz_guard_holds(block)) { /* the guard's: it narrows the block */
    hz_guard_narrow(block, aligned, size);
    return aligned;
  }
  if (aligned != block) *(uintptr_t *)block = hz_check_inner_tag(aligned);
  /* The secure variants flag every page that served an aligned request:
   * a sized free of such a block may name any size up to its room. */
  if (aligned != block || HZ_SECURE) {
    hz_page_t *page = hz_segment_page_of(hz_segment_of(block), block);
    if (!hz_page_has_aligned(page))
      hz_page_set_flag(page, HZ_PAGE_ALIGNED, true);
  }
  return aligned;
}

static void *api_memalign(size_t alignment, size_t size) {
  if (alignment <= HZ_MIN_ALIGN) return hz_fast_malloc(size);
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
  /* Inside the allocator (hz_heap_inside) the large box's route serves
   * every size: a small block would come from there anyway. */
  if (size + alignment - HZ_MIN_ALIGN <= HZ_SMALL_MAX &&
      !hz_heap_inside(hz_heap_current()))
    return api_aligned_small(alignment, size);
  return hz_thread_large_alloc(size, alignment, false);
}

/* Debug: a block with room for the canary, armed, then shown to memcheck. */
static void *api_debug_alloc(size_t size, size_t align, bool zeroed) {
  size_t padded = api_padded(size);
  hz_tool_quiet(true);
  void *p = align != 0 ? api_memalign(align, padded)
            : zeroed   ? api_calloc(padded)
                       : hz_fast_malloc(padded);
  p = api_arm(p, size, zeroed);
  hz_tool_quiet(false);
  if (p != NULL) hz_tool_allocated(p, size, zeroed);
  return p;
}

void *hz_api_memalign(size_t alignment, size_t size) {
  if (HZ_CANARY) return api_debug_alloc(size, alignment, false);
  return api_memalign(alignment, size);
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

void hz_api_summarize(hz_heap_summary_t *heaps, hz_memory_summary_t *out) {
  hz_thread_summarize(heaps);
  out->segments = hz_segment_count();
  hz_segment_state_t state;
  hz_segment_state(&state);
  _Static_assert(HZ_FILL_BUCKETS == HZ_STATS_FILL_BUCKETS, "same buckets");
  out->segments_cached = state.cached;
  out->dirty_bytes = state.dirty_bytes;
  memcpy(out->regions, state.regions, sizeof out->regions);
  out->huge_regions = state.huge_regions;
  out->arena_reserved = state.arena_reserved;
  out->arena_in_use = state.arena_in_use;
  hz_large_cached(&out->large_cached, &out->large_cached_bytes,
                  &out->large_dirty_bytes);
  hz_guard_stats(&out->guard);
  out->locks_taken[HZ_LOCK_SEGMENT] = hz_segment_lock_taken();
  out->locks_taken[HZ_LOCK_LARGE] = hz_large_lock_taken();
  hz_thread_locks_taken(&out->locks_taken[HZ_LOCK_POOL],
                        &out->locks_taken[HZ_LOCK_COLLECT],
                        &out->locks_taken[HZ_LOCK_CLASS_HEAP]);
}

HZ_EXPORT void hz_stats_print(void) {
  hz_heap_summary_t summary;
  hz_memory_summary_t memory;
  hz_api_summarize(&summary, &memory);
  hz_stats_report(&summary, &memory);
}

/* The calling thread's heap gives back everything, bins included; with
 * `force`, every other heap gives back what it can without its owner and
 * all free memory is purged now. Otherwise only what fell due. */
HZ_EXPORT void hz_collect(bool force) {
  hz_heap_t *heap = hz_heap_current();
  hz_tool_quiet(true);
  if (force)
    hz_thread_give_back_all();
  else {
    if (heap != &hz_heap_empty) hz_heap_trim(heap);
    hz_purge_run(false);
  }
  hz_tool_quiet(false);
}

/* HZ_SHOW_STATS=1: one report when the process exits; HZ_STATS_JSON=path:
 * the same as JSON. */
void hz_api_exit_report(void) {
  if (hz_option_enabled(HZ_OPTION_SHOW_STATS)) hz_stats_print();
  const char *path = hz_option_text(HZ_OPTION_STATS_JSON);
  if (path == NULL || *path == 0) return;
  hz_heap_summary_t summary;
  hz_memory_summary_t memory;
  hz_api_summarize(&summary, &memory);
  hz_stats_write_json(path, &summary, &memory);
}

__attribute__((destructor)) static void api_exit_report(void) {
  hz_api_exit_report();
}
