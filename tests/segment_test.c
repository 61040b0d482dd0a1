/* segment: pointer -> segment lookup answers for interior, boundary and
 * foreign pointers; pages of every kind are cut from one segment without
 * overlap and within a 2 MiB region, the fullest region first; a freed
 * page's slices serve a page of another kind; an empty segment stays with
 * its set. */
#include <stdlib.h>

#include "check.h"
#include "large.h"
#include "options.h"
#include "segment.h"

static int stack_probe;
static int data_probe = 1;

int main(void) {
  hz_options_init(); /* what process start-up does: the large cache cap */
  /* Foreign pointers are never ours. */
  int local = 0;
  void *heap_block = malloc(64); /* libc's allocator in this test */
  CHECK(hz_segment_of(NULL) == NULL);
  CHECK(hz_segment_of((void *)1) == NULL);
  CHECK(hz_segment_of(&local) == NULL);
  CHECK(hz_segment_of(&stack_probe) == NULL);
  CHECK(hz_segment_of(&data_probe) == NULL);
  CHECK(hz_segment_of(heap_block) == NULL);
  CHECK(hz_segment_of((void *)(uintptr_t)-1) == NULL);
  CHECK(hz_segment_of((void *)((uintptr_t)1 << 60)) == NULL);
  free(heap_block);

  /* One page of each kind from one set: all in one segment, every byte
   * of a page's area (its later slices too) maps to the page. */
  static hz_segment_set_t set;
  hz_page_t *pages[HZ_KIND_COUNT];
  for (int kind = 0; kind < HZ_KIND_COUNT; kind++) {
    hz_page_t *page = pages[kind] = hz_segment_page_alloc(&set, kind);
    CHECK(page != NULL);
    if (page == NULL) return check_report("segment");
    hz_segment_t *seg = hz_segment_of_page(page);
    CHECK(((uintptr_t)seg & HZ_SEGMENT_MASK) == 0);
    CHECK(seg->kind == HZ_SEGMENT_PAGES);
    CHECK(seg == hz_segment_of_page(pages[0]));
    CHECK(hz_segment_of(hz_page_start(page)) == seg);
    CHECK(hz_segment_of(hz_page_end(page) - 1) == seg);
    for (uint8_t *p = hz_page_start(page); p < hz_page_end(page);
         p += HZ_SLICE_SIZE / 2)
      CHECK(hz_segment_page_of(seg, p) == page);
    CHECK(hz_segment_page_of(seg, hz_page_end(page) - 1) == page);
    /* The header itself is not a page area. */
    CHECK(hz_page_start(page) >= (uint8_t *)seg + HZ_SEGMENT_HEADER_SIZE);
  }
  /* Pages of different kinds never overlap; each lies in one 2 MiB
   * region; the small ones fill one region, the big one the other. */
  for (int a = 0; a < HZ_KIND_COUNT; a++) {
    uintptr_t sa = (uintptr_t)hz_page_start(pages[a]);
    CHECK(sa >> 21 == ((uintptr_t)hz_page_end(pages[a]) - 1) >> 21);
    for (int b = 0; b < a; b++)
      CHECK(hz_page_end(pages[a]) <= hz_page_start(pages[b]) ||
            hz_page_end(pages[b]) <= hz_page_start(pages[a]));
  }
  uintptr_t small_region = (uintptr_t)hz_page_start(pages[0]) >> 21;
  CHECK((uintptr_t)hz_page_start(pages[HZ_KIND_MEDIUM]) >> 21 == small_region);
  CHECK((uintptr_t)hz_page_start(pages[HZ_KIND_WIDE]) >> 21 == small_region);
  CHECK((uintptr_t)hz_page_start(pages[HZ_KIND_BIG]) >> 21 != small_region);

  /* The memory of a freed wide page serves medium pages: the first one
   * cut lands on it (its slices are resident). */
  uint8_t *wide_start = hz_page_start(pages[HZ_KIND_WIDE]);
  uint8_t *wide_end = hz_page_end(pages[HZ_KIND_WIDE]);
  hz_segment_page_free(pages[HZ_KIND_WIDE]);
  CHECK(hz_segment_page_of(hz_segment_of(wide_start), wide_start)->owner == 0);
  hz_page_t *medium = hz_segment_page_alloc(&set, HZ_KIND_MEDIUM);
  CHECK(medium != NULL && hz_page_start(medium) >= wide_start &&
        hz_page_end(medium) <= wide_end);
  hz_segment_page_free(medium);

  /* Every page back: the segment stays with the set for its next page. */
  hz_segment_t *seg = hz_segment_of_page(pages[0]);
  for (int kind = 0; kind < HZ_KIND_COUNT; kind++)
    if (kind != HZ_KIND_WIDE) hz_segment_page_free(pages[kind]);
  CHECK(set.empty == seg && seg->used_slices == 0);
  hz_page_t *again = hz_segment_page_alloc(&set, HZ_KIND_BIG);
  CHECK(again != NULL && hz_segment_of_page(again) == seg);
  hz_segment_page_free(again);

  /* Large blocks: the block start maps to its header, including a block
   * that starts exactly one segment after the header (4 MiB alignment). */
  size_t aligns[] = {
      0, 64, 4096, (size_t)1 << 21, (size_t)1 << 22, (size_t)1 << 23};
  for (size_t i = 0; i < sizeof aligns / sizeof *aligns; i++) {
    size_t align = aligns[i] ? aligns[i] : 16;
    uint8_t *p = hz_large_alloc((size_t)1 << 20, aligns[i], false);
    CHECK(p != NULL);
    if (p == NULL) continue;
    CHECK(((uintptr_t)p & (align - 1)) == 0);
    hz_segment_t *seg = hz_segment_of(p);
    CHECK(seg != NULL && seg->kind == HZ_SEGMENT_LARGE);
    if (seg == NULL) continue;
    CHECK(hz_large_owns(seg, p));
    CHECK(!hz_large_owns(seg, p + 16));
    CHECK(hz_large_usable_size(seg, p) >= ((size_t)1 << 20));
    p[0] = 1;
    p[((size_t)1 << 20) - 1] = 2;
    hz_large_free(seg);
    CHECK(!hz_large_owns(seg, p)); /* cached: a second free is invalid */
  }
  return check_report("segment");
}
