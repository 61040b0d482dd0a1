/* sizeclass: the class tables. Block sizes are written out so the mapping
 * is visible at a glance; the unit test checks both directions. */
#include "sizeclass.h"

/* 1..8: 16..128 by 16; then 4 per doubling: 160 192 224 256 | 320 ...,
 * except 8 from 4 KiB to 8 KiB, where a page-sized buffer with a small
 * header (4096 + 272 in sqlite's page cache) would otherwise waste a
 * sixth of its block, and 16 (by 8 KiB) from 128 KiB to 256 KiB, where a
 * block is a twentieth of its segment and a quarter's waste would be felt
 * in the address space a program fits under a limit. */
// clang-format off
#define CLASS_SIZES(X)                                                         \
  X(16) X(32) X(48) X(64) X(80) X(96) X(112) X(128)                            \
  X(160) X(192) X(224) X(256) X(320) X(384) X(448) X(512)                      \
  X(640) X(768) X(896) X(1024) X(1280) X(1536) X(1792) X(2048)                 \
  X(2560) X(3072) X(3584) X(4096)                                              \
  X(4608) X(5120) X(5632) X(6144) X(6656) X(7168) X(7680) X(8192)              \
  X(10240) X(12288) X(14336) X(16384) X(20480) X(24576) X(28672) X(32768)      \
  X(40960) X(49152) X(57344) X(65536) X(81920) X(98304) X(114688) X(131072)    \
  X(139264) X(147456) X(155648) X(163840) X(172032) X(180224) X(188416)        \
  X(196608) X(204800) X(212992) X(221184) X(229376) X(237568) X(245760)        \
  X(253952) X(262144)
// clang-format on

#define SIZE_ENTRY(s) s,
const uint32_t hz_class_block_size[HZ_CLASS_COUNT] = {0,
                                                      CLASS_SIZES(SIZE_ENTRY)};

/* size = odd << shift; the inverse of odd modulo 2^32 by Newton's
 * iteration (each step doubles the correct low bits: 3, 6, 12, 24, 48). */
#define ODD(s)       ((uint32_t)(s) >> __builtin_ctz(s))
#define NEWTON(d, x) ((uint32_t)((x) * (2u - (d) * (x))))
#define INVERSE(d)   NEWTON(d, NEWTON(d, NEWTON(d, NEWTON(d, d))))
#define DIVISOR_ENTRY(s)                                                       \
  ((uint64_t)INVERSE(ODD(s)) | (uint64_t)__builtin_ctz(s) << 32),
const uint64_t hz_class_divisor[HZ_CLASS_COUNT] = {0,
                                                   CLASS_SIZES(DIVISOR_ENTRY)};

/* Both tables hold a class times HZ_CLASS_LUT_SCALE (S below).
 *
 * hz_class_lut[(size + 15) / 16] for size <= 32768: above 1024 each class
 * spans 16 entries per power of two of its size over 1024, but half as
 * many from 4 KiB to 8 KiB. */
#define S(c)    ((c) * HZ_CLASS_LUT_SCALE)
#define R16(c)  S(c), S(c), S(c), S(c), S(c), S(c), S(c), S(c), \
                S(c), S(c), S(c), S(c), S(c), S(c), S(c), S(c),
#define R32(c)  R16(c) R16(c)
#define R64(c)  R32(c) R32(c)
#define R128(c) R64(c) R64(c)
#define R256(c) R128(c) R128(c)
const uint16_t hz_class_lut[HZ_CLASS_LUT_MAX / 16 + 1] = {
    S(1),                                                   /* size 0: 1 */
    S(1),  S(2),  S(3),  S(4),  S(5),  S(6),  S(7),  S(8),  /* 16..128 */
    S(9),  S(9),  S(10), S(10), S(11), S(11), S(12), S(12), /* ..256 */
    S(13), S(13), S(13), S(13), S(14), S(14), S(14), S(14), /* ..384 */
    S(15), S(15), S(15), S(15), S(16), S(16), S(16), S(16), /* ..512 */
    S(17), S(17), S(17), S(17), S(17), S(17), S(17), S(17), /* ..640 */
    S(18), S(18), S(18), S(18), S(18), S(18), S(18), S(18), /* ..768 */
    S(19), S(19), S(19), S(19), S(19), S(19), S(19), S(19), /* ..896 */
    S(20), S(20), S(20), S(20), S(20), S(20), S(20), S(20), /* ..1024 */
    R16(21) R16(22) R16(23) R16(24)                         /* ..2048 */
    R32(25) R32(26) R32(27) R32(28)                         /* ..4096 */
    R32(29) R32(30) R32(31) R32(32)                         /* ..6144 */
    R32(33) R32(34) R32(35) R32(36)                         /* ..8192 */
    R128(37) R128(38) R128(39) R128(40)                     /* ..16384 */
    R256(41) R256(42) R256(43) R256(44)                     /* ..32768 */
};

/* Entry i is the class of sizes 8192 * i + 1 .. 8192 * (i + 1); the first
 * four, where classes are finer, hold the class of the range's largest size
 * and are not read (the table above covers those sizes). */
const uint16_t hz_class_lut_wide[HZ_SMALL_MAX >> 13] = {
    S(36), S(40), S(42), S(44),                             /* ..32768 */
    S(45), S(46), S(47), S(48),                             /* ..65536 */
    S(49), S(49), S(50), S(50), S(51), S(51), S(52), S(52), /* ..131072 */
    S(53), S(54), S(55), S(56), S(57), S(58), S(59), S(60), /* ..196608 */
    S(61), S(62), S(63), S(64), S(65), S(66), S(67), S(68), /* ..262144 */
};
