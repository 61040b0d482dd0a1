/* sizeclass: every request size maps to the smallest class that holds it,
 * classes grow monotonically, waste stays within 25% above 128 bytes, and
 * blocks keep 16-byte alignment. */
#include "check.h"
#include "sizeclass.h"

int main(void) {
  for (int c = 2; c < HZ_CLASS_COUNT; c++)
    CHECK_MSG(hz_sizeclass_block_size(c) > hz_sizeclass_block_size(c - 1),
              "class %d not larger than class %d", c, c - 1);
  CHECK(hz_sizeclass_block_size(HZ_CLASS_COUNT - 1) == HZ_SMALL_MAX);
  CHECK(hz_sizeclass_of(0) == 1);
  size_t bad = 0;
  for (size_t size = 1; size <= HZ_SMALL_MAX; size++) {
    uint8_t c = hz_sizeclass_of(size);
    size_t block = hz_sizeclass_block_size(c);
    int ok = c >= 1 && c < HZ_CLASS_COUNT && block >= size &&
             hz_sizeclass_block_size(c - 1) < size && block % 16 == 0 &&
             (size <= 128 || (block - size) * 4 <= block);
    if (!ok && bad++ < 10)
      CHECK_MSG(ok, "size %zu -> class %u (block %zu)", size, c, block);
  }
  CHECK(bad == 0);
  /* Round trip: the block size of a class maps back to the class. */
  for (int c = 1; c < HZ_CLASS_COUNT; c++)
    CHECK(hz_sizeclass_of(hz_sizeclass_block_size(c)) == c);
  /* Block index without division: exact for multiples of the block size,
   * above any index a 4 MiB page can hold otherwise (offsets below a page
   * start wrap to near 2^32). */
  size_t wrong = 0;
  for (int c = 1; c < HZ_CLASS_COUNT; c++) {
    uint32_t size = (uint32_t)hz_sizeclass_block_size(c);
    uint32_t max_index = (uint32_t)(((size_t)4 << 20) / size);
    for (uint32_t off = 0; off < ((uint32_t)4 << 20);
         off += (off < 70000 ? 1 : 997)) {
      uint32_t got = hz_sizeclass_block_index(c, off);
      int ok = off % size == 0 ? got == off / size : got > max_index;
      if (!ok && wrong++ < 10)
        CHECK_MSG(ok, "class %d offset %u -> index %u", c, off, got);
    }
    for (uint32_t back = 1; back <= 16384; back++) {
      uint32_t got = hz_sizeclass_block_index(c, 0u - back);
      if (got <= max_index && wrong++ < 10)
        CHECK_MSG(0, "class %d offset -%u -> index %u", c, back, got);
    }
  }
  CHECK(wrong == 0);
  return check_report("sizeclass");
}
