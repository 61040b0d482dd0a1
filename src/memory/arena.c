/* arena: one reservation of address space, cut into 4 MiB segments
 * committed in address order; a bitmap of the committed segments that are
 * free, the lowest handed out first so live memory stays low and dense.
 * The caller (the segment box) holds its lock around every call. */
#include "arena.h"

#include "options.h"
#include "os.h"

/* At most this much address space, and at most this fraction of an
 * address-space limit, so the rest of the limit stays for large blocks. */
#define ARENA_MAX       ((size_t)256 << 30)
#define ARENA_LIMIT_DIV 8
/* Refused reservations are retried at half the size down to this. */
#define ARENA_MIN      ((size_t)32 << 20)
#define ARENA_SEGMENTS (ARENA_MAX >> HZ_SEGMENT_SHIFT)

_Alignas(16) hz_arena_bounds_t hz_arena = {.start = 1, .mask = 0};

static size_t arena_size;   /* reserved bytes (0: none) */
static size_t arena_span;   /* committed bytes from the start (only grows) */
static bool arena_tried;    /* the reservation was attempted */
static size_t arena_in_use; /* segments handed out, in bytes */
static uint64_t arena_free[ARENA_SEGMENTS / 64]; /* committed and free */

/* Huge pages only where the segment box asks for them, region by region
 * (and never with HZ_THP=0): where the kernel's mode is "always" every
 * range would get them, so it says no first. Elsewhere the ranges keep the
 * kernel's default advice, which cannot be set again once left. */
static bool arena_says_no(void) {
  return !hz_option_enabled(HZ_OPTION_THP) || hz_os_thp_mode() == 2;
}

void hz_arena_advise(void *start, size_t size) {
  if (arena_says_no()) hz_os_huge_pages(start, size, false);
}

/* The kernel refuses MADV_COLLAPSE on a range advised no, so the no is
 * lifted first where it was said. */
void hz_arena_advise_huge(void *start, size_t size) {
  if (arena_says_no()) hz_os_huge_pages(start, size, true);
}

/* The largest power of two at most n (n > 0). */
static size_t arena_floor_pow2(size_t n) {
  return (size_t)1 << (63 - __builtin_clzll(n));
}

/* Reserve a power of two aligned to itself, readable: a free of any
 * address in it reads a segment header (zeros where nothing is
 * committed) instead of faulting. */
static void arena_reserve(void) {
  arena_tried = true;
  size_t size = ARENA_MAX;
  size_t limit = hz_os_address_limit();
  if (limit != SIZE_MAX && limit / ARENA_LIMIT_DIV < size)
    size = limit / ARENA_LIMIT_DIV < ARENA_MIN
               ? 0
               : arena_floor_pow2(limit / ARENA_LIMIT_DIV);
  for (; size >= ARENA_MIN; size /= 2) {
    void *start = hz_os_reserve(size, size);
    if (start == NULL) continue;
    hz_arena_advise(start, size);
    arena_size = size;
    hz_arena.start = (uintptr_t)start;
    hz_arena.mask = ~(uintptr_t)(size - 1);
    return;
  }
}

/* The lowest committed free segment's index, or -1. */
static long arena_lowest_free(void) {
  size_t committed = arena_span >> HZ_SEGMENT_SHIFT;
  for (size_t w = 0; w * 64 < committed; w++)
    if (arena_free[w] != 0)
      return (long)(w * 64 + (size_t)__builtin_ctzll(arena_free[w]));
  return -1;
}

void *hz_arena_take(void) {
  if (!arena_tried) arena_reserve();
  uintptr_t start = hz_arena.start;
  long index = arena_lowest_free();
  if (index >= 0) {
    arena_free[index / 64] &= ~((uint64_t)1 << (index % 64));
    arena_in_use += HZ_SEGMENT_SIZE;
    return (void *)(start + ((size_t)index << HZ_SEGMENT_SHIFT));
  }
  size_t span = arena_span;
  if (span + HZ_SEGMENT_SIZE > arena_size) return NULL;
  void *seg = (void *)(start + span);
  if (!hz_os_commit(seg, HZ_SEGMENT_SIZE)) return NULL;
  arena_span = span + HZ_SEGMENT_SIZE;
  arena_in_use += HZ_SEGMENT_SIZE;
  return seg;
}

void hz_arena_discard(void *seg) {
  hz_os_discard(seg, HZ_SEGMENT_SIZE, false);
}

void hz_arena_give(void *seg) {
  uintptr_t start = hz_arena.start;
  size_t index = ((uintptr_t)seg - start) >> HZ_SEGMENT_SHIFT;
  arena_free[index / 64] |= (uint64_t)1 << (index % 64);
  arena_in_use -= HZ_SEGMENT_SIZE;
}

size_t hz_arena_reserved(void) { return arena_size; }
size_t hz_arena_in_use(void) { return arena_in_use; }
