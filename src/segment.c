/* segment: mapping, registering and recycling 4 MiB segments, and handing
 * out their pages. One mutex guards the per-kind lists; it is taken only
 * when a heap needs a fresh page or gives an empty one back, never on a
 * malloc/free fast path.
 *
 * Invariants: a segment is in lists[kind] iff it has a free page; a
 * segment with no used page is cached (up to SEGMENT_CACHE_MAX) or
 * unmapped; the map entry of a segment is set for exactly as long as it is
 * mapped. */
#include "segment.h"

#include <pthread.h>
#include <string.h>

#include "os.h"

/* Empty segments stay mapped (their pages resident) for reuse until they
 * have been idle for SEGMENT_IDLE_MS; at most SEGMENT_CACHE_MAX of them. */
#define SEGMENT_CACHE_MAX 64
#define SEGMENT_IDLE_MS   1000

_Atomic uint8_t hz_segment_map[HZ_SEGMENT_MAP_ENTRIES];

_Static_assert(sizeof(hz_segment_t) <= HZ_SEGMENT_HEADER_SIZE,
               "segment header too large");

static pthread_mutex_t segment_lock = PTHREAD_MUTEX_INITIALIZER;
static hz_segment_t *segment_lists[HZ_SEGMENT_KINDS];
static hz_segment_t *segment_cache; /* empty segments, newest first */
static hz_segment_t *segment_all;   /* mapped page segments, by all_next */
static size_t segment_cache_count;
static _Atomic size_t segment_live;

void hz_segment_register(hz_segment_t *seg) {
  size_t index = (uintptr_t)seg >> HZ_SEGMENT_SHIFT;
  atomic_store_explicit(&hz_segment_map[index], 1, memory_order_release);
  atomic_fetch_add_explicit(&segment_live, 1, memory_order_relaxed);
}

void hz_segment_unregister(hz_segment_t *seg) {
  size_t index = (uintptr_t)seg >> HZ_SEGMENT_SHIFT;
  atomic_store_explicit(&hz_segment_map[index], 0, memory_order_release);
  atomic_fetch_sub_explicit(&segment_live, 1, memory_order_relaxed);
}

size_t hz_segment_count(void) {
  return atomic_load_explicit(&segment_live, memory_order_relaxed);
}

hz_segment_kind_t hz_segment_kind_for(size_t block_size) {
  if (block_size <= HZ_SMALL_BLOCK_MAX) return HZ_SEGMENT_SMALL;
  if (block_size <= HZ_MEDIUM_BLOCK_MAX) return HZ_SEGMENT_MEDIUM;
  return HZ_SEGMENT_BIG;
}

hz_segment_t *hz_segment_of_page(const hz_page_t *page) {
  return (hz_segment_t *)((uintptr_t)page & ~(uintptr_t)HZ_SEGMENT_MASK);
}

static unsigned segment_page_shift(hz_segment_kind_t kind) {
  switch (kind) {
  case HZ_SEGMENT_SMALL: return HZ_SMALL_PAGE_SHIFT;
  case HZ_SEGMENT_MEDIUM: return HZ_MEDIUM_PAGE_SHIFT;
  default: return HZ_SEGMENT_SHIFT;
  }
}

/* Lay out the header for `kind` and push every page on the free stack. */
static void segment_format(hz_segment_t *seg, hz_segment_kind_t kind) {
  hz_segment_t *all_next = seg->all_next, *all_prev = seg->all_prev;
  memset(seg, 0, sizeof *seg);
  seg->all_next = all_next;
  seg->all_prev = all_prev;
  unsigned shift = segment_page_shift(kind);
  seg->kind = (uint8_t)kind;
  seg->page_shift = (uint8_t)shift;
  seg->page_count = (uint16_t)(HZ_SEGMENT_SIZE >> shift);
  seg->map_size = HZ_SEGMENT_SIZE;
  uint8_t *base = (uint8_t *)seg;
  for (int i = seg->page_count - 1; i >= 0; i--) {
    hz_page_t *page = &seg->pages[i];
    page->start = base + ((size_t)i << shift);
    if (i == 0) page->start = base + HZ_SEGMENT_HEADER_SIZE;
    page->area = (uint32_t)(base + ((size_t)(i + 1) << shift) - page->start);
    page->next = seg->free_pages;
    seg->free_pages = page;
  }
}

static void list_push(hz_segment_t **list, hz_segment_t *seg) {
  seg->prev = NULL;
  seg->next = *list;
  if (*list != NULL) (*list)->prev = seg;
  *list = seg;
}

static void list_remove(hz_segment_t **list, hz_segment_t *seg) {
  if (seg->prev != NULL)
    seg->prev->next = seg->next;
  else
    *list = seg->next;
  if (seg->next != NULL) seg->next->prev = seg->prev;
  seg->next = seg->prev = NULL;
}

static hz_segment_t *segment_new(hz_segment_kind_t kind) {
  hz_segment_t *seg = segment_cache;
  if (seg != NULL) {
    segment_cache = seg->next;
    segment_cache_count--;
  } else {
    seg = hz_os_map_aligned(HZ_SEGMENT_SIZE, HZ_SEGMENT_SIZE);
    if (seg == NULL) return NULL;
    hz_segment_register(seg);
    seg->all_next = segment_all;
    if (segment_all != NULL) segment_all->all_prev = seg;
    segment_all = seg;
  }
  segment_format(seg, kind);
  return seg;
}

static void segment_unmap(hz_segment_t *seg) {
  if (seg->all_prev != NULL)
    seg->all_prev->all_next = seg->all_next;
  else
    segment_all = seg->all_next;
  if (seg->all_next != NULL) seg->all_next->all_prev = seg->all_prev;
  hz_segment_unregister(seg);
  hz_os_unmap(seg, HZ_SEGMENT_SIZE);
}

/* Unmap cached segments idle for too long (the cache is newest first, so
 * they are at its end), or beyond the count limit. */
static void segment_cache_trim(uint64_t now) {
  hz_segment_t **link = &segment_cache;
  size_t kept = 0;
  while (*link != NULL) {
    hz_segment_t *seg = *link;
    if (kept < SEGMENT_CACHE_MAX && now - seg->idle_since < SEGMENT_IDLE_MS) {
      kept++;
      link = &seg->next;
      continue;
    }
    *link = seg->next;
    segment_unmap(seg);
  }
  segment_cache_count = kept;
}

static void segment_release(hz_segment_t *seg) {
  uint64_t now = hz_os_now_ms();
  seg->idle_since = now;
  seg->next = segment_cache;
  segment_cache = seg;
  segment_cache_trim(now);
}

void hz_segment_summarize(size_t *pages, size_t *blocks, size_t *bytes) {
  *pages = *blocks = *bytes = 0;
  pthread_mutex_lock(&segment_lock);
  for (hz_segment_t *seg = segment_all; seg != NULL; seg = seg->all_next) {
    for (int i = 0; i < seg->page_count; i++) {
      const volatile hz_page_t *page = &seg->pages[i];
      if (hz_page_heap((const hz_page_t *)page) == NULL) continue;
      size_t used = page->used;
      *pages += 1;
      *blocks += used;
      *bytes += used * page->block_size;
    }
  }
  pthread_mutex_unlock(&segment_lock);
}

hz_page_t *hz_segment_page_alloc(hz_segment_kind_t kind) {
  pthread_mutex_lock(&segment_lock);
  hz_segment_t *seg = segment_lists[kind];
  if (seg == NULL) {
    seg = segment_new(kind);
    if (seg != NULL) list_push(&segment_lists[kind], seg);
  }
  hz_page_t *page = NULL;
  if (seg != NULL) {
    page = seg->free_pages;
    seg->free_pages = page->next;
    page->next = page->prev = NULL;
    seg->used_pages++;
    if (seg->free_pages == NULL) list_remove(&segment_lists[kind], seg);
  }
  pthread_mutex_unlock(&segment_lock);
  return page;
}

void hz_segment_page_free(hz_page_t *page) {
  hz_segment_t *seg = hz_segment_of_page(page);
  pthread_mutex_lock(&segment_lock);
  hz_page_set_heap(page, NULL);
  page->class_id = 0;
  page->free = page->local_free = NULL;
  page->next = seg->free_pages;
  page->prev = NULL;
  if (seg->free_pages == NULL) list_push(&segment_lists[seg->kind], seg);
  seg->free_pages = page;
  seg->used_pages--;
  if (seg->used_pages == 0) {
    list_remove(&segment_lists[seg->kind], seg);
    segment_release(seg);
  }
  pthread_mutex_unlock(&segment_lock);
}

void hz_segment_fork_prepare(void) { pthread_mutex_lock(&segment_lock); }
void hz_segment_fork_parent(void) { pthread_mutex_unlock(&segment_lock); }
void hz_segment_fork_child(void) { pthread_mutex_init(&segment_lock, NULL); }
