/* sizeclass: the class tables. Block sizes are written out so the mapping
 * is visible at a glance; the unit test checks both directions. */
#include "sizeclass.h"

/* 1..8: 16..128 by 16; then 4 per doubling: 160 192 224 256 | 320 ... */
const uint32_t hz_class_block_size[HZ_CLASS_COUNT] = {
    0,      16,     32,     48,     64,     80,     96,     112,    128,
    160,    192,    224,    256,    320,    384,    448,    512,    640,
    768,    896,    1024,   1280,   1536,   1792,   2048,   2560,   3072,
    3584,   4096,   5120,   6144,   7168,   8192,   10240,  12288,  14336,
    16384,  20480,  24576,  28672,  32768,  40960,  49152,  57344,  65536,
    81920,  98304,  114688, 131072, 163840, 196608, 229376, 262144,
};

/* hz_class_lut[(size + 15) / 16] for size <= 1024. */
const uint8_t hz_class_lut[HZ_CLASS_LUT_MAX / 16 + 1] = {
    1,                                 /* size 0 is served as 1 */
    1,  2,  3,  4,  5,  6,  7,  8,     /* 16..128 */
    9,  9,  10, 10, 11, 11, 12, 12,    /* ..256 */
    13, 13, 13, 13, 14, 14, 14, 14,    /* ..384 */
    15, 15, 15, 15, 16, 16, 16, 16,    /* ..512 */
    17, 17, 17, 17, 17, 17, 17, 17,    /* ..640 */
    18, 18, 18, 18, 18, 18, 18, 18,    /* ..768 */
    19, 19, 19, 19, 19, 19, 19, 19,    /* ..896 */
    20, 20, 20, 20, 20, 20, 20, 20,    /* ..1024 */
};

/* Sizes above 1024: four classes per power of two. */
uint8_t hz_sizeclass_of_large(size_t size) {
  size_t s = size - 1;
  unsigned bit = 63u - (unsigned)__builtin_clzll(s); /* s in [2^bit, 2^bit+1) */
  unsigned quarter = (unsigned)(s >> (bit - 2)) & 3u;
  /* 1024 < size <= 1280 -> class 21 (bit 10, quarter 0). */
  return (uint8_t)(21 + (bit - 10) * 4 + quarter);
}
