/* sizeclass: request size -> size class -> block size.
 *
 * Classes step by 16 bytes up to 128, then four classes per power of two
 * (at most 25% internal waste) up to HZ_SMALL_MAX. Class 0 is unused so that
 * a zero-initialised class id means "none". */
#ifndef HZ_SIZECLASS_H
#define HZ_SIZECLASS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define HZ_CLASS_COUNT 53 /* classes 1..52; 52 is 256 KiB */
#define HZ_CLASS_LUT_MAX 1024

extern const uint8_t hz_class_lut[HZ_CLASS_LUT_MAX / 16 + 1];
extern const uint32_t hz_class_block_size[HZ_CLASS_COUNT];

uint8_t hz_sizeclass_of_large(size_t size);

/* Class for a request of `size` bytes, 1 <= size <= HZ_SMALL_MAX. */
HZ_INLINE uint8_t hz_sizeclass_of(size_t size) {
  if (HZ_LIKELY(size <= HZ_CLASS_LUT_MAX))
    return hz_class_lut[(size + 15) >> 4];
  return hz_sizeclass_of_large(size);
}

HZ_INLINE size_t hz_sizeclass_block_size(uint8_t cls) {
  return hz_class_block_size[cls];
}

#endif
