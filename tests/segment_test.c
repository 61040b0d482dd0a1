/* segment: pointer -> segment lookup answers for interior, boundary and
 * foreign pointers; pages of each kind tile their segment; empty segments
 * are recycled. */
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

  for (int kind = HZ_SEGMENT_SMALL; kind <= HZ_SEGMENT_BIG; kind++) {
    hz_page_t *page = hz_segment_page_alloc((hz_segment_kind_t)kind);
    CHECK(page != NULL);
    if (page == NULL) continue;
    hz_segment_t *seg = hz_segment_of_page(page);
    CHECK(((uintptr_t)seg & HZ_SEGMENT_MASK) == 0);
    CHECK(seg->kind == kind);
    /* Every byte of the page's area maps to this segment and page. */
    CHECK(hz_segment_of(hz_page_start(page)) == seg);
    CHECK(hz_segment_of(hz_page_end(page) - 1) == seg);
    CHECK(hz_segment_page_of(seg, hz_page_start(page)) == page);
    CHECK(hz_segment_page_of(seg, hz_page_end(page) - 1) == page);
    CHECK(hz_segment_page_of(
              seg, hz_page_start(page) +
                       (hz_page_end(page) - hz_page_start(page)) / 2) == page);
    /* The header itself is not a page area. */
    CHECK(hz_page_start(page) >= (uint8_t *)seg + HZ_SEGMENT_HEADER_SIZE);
    /* Pages of a kind tile the segment without overlap. */
    for (int i = 1; i < seg->page_count; i++)
      CHECK(hz_page_start(&seg->pages[i]) == hz_page_end(&seg->pages[i - 1]));
    CHECK(hz_page_end(&seg->pages[seg->page_count - 1]) ==
          (uint8_t *)seg + HZ_SEGMENT_SIZE);
    hz_segment_page_free(page);
  }

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
