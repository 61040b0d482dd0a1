/* sizeclass: request size -> size class -> block size.
 *
 * Classes step by 16 bytes up to 128, then four classes per power of two
 * (at most 25% internal waste) up to HZ_SMALL_MAX, eight from 4 KiB to
 * 8 KiB (12.5%) and sixteen from 128 KiB to 256 KiB (6.25%). Class 0 is
 * unused so that a zero-initialised class id means "none". */
#ifndef HZ_SIZECLASS_H
#define HZ_SIZECLASS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define HZ_CLASS_COUNT   69 /* classes 1..68; 52 is 128 KiB, 68 256 KiB */
#define HZ_CLASS_LUT_MAX 32768

/* The lookup tables hold class * HZ_CLASS_LUT_SCALE: a table of 64-byte
 * entries per class (a heap's bins) is indexed without a shift. */
#define HZ_CLASS_LUT_SCALE 64
extern const uint16_t hz_class_lut[HZ_CLASS_LUT_MAX / 16 + 1];
extern const uint32_t hz_class_block_size[HZ_CLASS_COUNT];
/* Per class: the inverse of the block size's odd part modulo 2^32 (low
 * half) and its power of two (high half), for hz_sizeclass_block_index. */
extern const uint64_t hz_class_divisor[HZ_CLASS_COUNT];

/* hz_class_lut_wide[(size - 1) >> 13] for 32 KiB < size <= 256 KiB: every
 * class there is a multiple of 8 KiB. */
extern const uint16_t hz_class_lut_wide[HZ_SMALL_MAX >> 13];

/* Class * HZ_CLASS_LUT_SCALE for HZ_CLASS_LUT_MAX < size <= HZ_SMALL_MAX. */
HZ_INLINE size_t hz_sizeclass_scaled_of_wide(size_t size) {
  return hz_class_lut_wide[(size - 1) >> 13];
}

/* Class * HZ_CLASS_LUT_SCALE for a request of `size` bytes,
 * 1 <= size <= HZ_SMALL_MAX. */
HZ_INLINE size_t hz_sizeclass_scaled_of(size_t size) {
  if (HZ_LIKELY(size <= HZ_CLASS_LUT_MAX))
    return hz_class_lut[(size + 15) >> 4];
  return hz_sizeclass_scaled_of_wide(size);
}

/* Class for a request of `size` bytes, 1 <= size <= HZ_SMALL_MAX. */
HZ_INLINE uint8_t hz_sizeclass_of(size_t size) {
  return (uint8_t)(hz_sizeclass_scaled_of(size) / HZ_CLASS_LUT_SCALE);
}

HZ_INLINE size_t hz_sizeclass_block_size(uint8_t cls) {
  return hz_class_block_size[cls];
}

/* offset / block size when offset is a multiple of it; otherwise a number
 * above (2^32 - 1) / block size, which no block index reaches. No
 * division: a multiply and a rotate (exact division by the inverse). */
HZ_INLINE uint32_t hz_sizeclass_index_rotated(uint32_t inverse, unsigned k,
                                              uint32_t offset) {
  uint32_t x = offset * inverse;
  return (x >> k) | (x << ((32 - k) & 31));
}

HZ_INLINE uint32_t hz_sizeclass_block_index(uint8_t cls, uint32_t offset) {
  uint64_t divisor = hz_class_divisor[cls];
  return hz_sizeclass_index_rotated((uint32_t)divisor,
                                    (unsigned)(divisor >> 32), offset);
}

#endif
