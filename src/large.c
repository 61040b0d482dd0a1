/* large: mapping and unmapping blocks too big for a size class.
 *
 * Layout of one large block: a 4 MiB-aligned segment header at `seg`, the
 * block at seg + round_up(header, align), the mapping ending at
 * seg + map_size. The block start is kept in pages[0].start so that a free
 * of any other address is recognised as invalid. No lock: each block has
 * its own mapping and map entry. */
#include "large.h"

#include <errno.h>
#include <string.h>

#include "os.h"
#include "stats.h"

void *hz_large_alloc(size_t size, size_t align) {
  size_t page = hz_os_page_size();
  if (align < HZ_MIN_ALIGN) align = HZ_MIN_ALIGN;
  /* Above 4 MiB the block sits one segment after the header, and the
   * mapping is placed so that the block lands on the alignment. */
  size_t offset = align <= HZ_SEGMENT_SIZE
                      ? HZ_ALIGN_UP(HZ_SEGMENT_HEADER_SIZE, align)
                      : HZ_SEGMENT_SIZE;
  size_t map_align = align <= HZ_SEGMENT_SIZE ? HZ_SEGMENT_SIZE : align;
  if (size > HZ_REQUEST_MAX || align > ((size_t)1 << 40) ||
      size > HZ_REQUEST_MAX - offset - page - map_align) {
    errno = ENOMEM;
    return NULL;
  }
  size_t map_size = HZ_ALIGN_UP(offset + size, page);
  hz_segment_t *seg = hz_os_map_aligned_at(
      map_size, map_align, align <= HZ_SEGMENT_SIZE ? 0 : HZ_SEGMENT_SIZE);
  if (seg == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  seg->kind = HZ_SEGMENT_LARGE;
  seg->page_shift = 63;
  seg->page_count = 1;
  seg->used_pages = 1;
  seg->map_size = map_size;
  seg->pages[0].start = (uint8_t *)seg + offset;
  hz_segment_register(seg);
  hz_stats_count_large_alloc(map_size);
  return seg->pages[0].start;
}

int hz_large_owns(const hz_segment_t *seg, const void *p) {
  return seg->kind == HZ_SEGMENT_LARGE &&
         (const uint8_t *)p == seg->pages[0].start;
}

void hz_large_free(hz_segment_t *seg, void *p) {
  (void)p;
  size_t map_size = seg->map_size;
  hz_segment_unregister(seg);
  hz_stats_count_large_free(map_size);
  hz_os_unmap(seg, map_size);
}

size_t hz_large_usable_size(const hz_segment_t *seg, const void *p) {
  return (size_t)((const uint8_t *)seg + seg->map_size - (const uint8_t *)p);
}
