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
  return check_report("sizeclass");
}
