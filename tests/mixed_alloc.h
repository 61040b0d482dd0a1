/* A block from one of four calls picked at random, with each call's
 * promise checked: aligned_alloc (the alignment), calloc (zeroed memory),
 * realloc growing a block (its content kept) and plain malloc. The churn
 * and fork tests allocate through it. */
#ifndef HZ_TEST_MIXED_ALLOC_H
#define HZ_TEST_MIXED_ALLOC_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "test_alloc.h"
#include "test_util.h"

/* How often the special calls come and which alignments they ask for. */
typedef struct {
  unsigned one_in;       /* aligned_alloc, calloc, realloc: 1 in one_in each */
  size_t min_align;      /* aligned_alloc asks for min_align << 0.. */
  unsigned align_shifts; /* ..align_shifts - 1 */
} test_mix_t;

static inline void *mix_aligned(uint64_t *rng, size_t *size,
                                const test_mix_t *mix, char *why, size_t len) {
  size_t align = mix->min_align << (test_rng_next(rng) % mix->align_shifts);
  *size = (*size + align - 1) & ~(align - 1);
  void *p = t_aligned_alloc(align, *size);
  if (p != NULL && (uintptr_t)p % align != 0)
    snprintf(why, len, "aligned_alloc(%zu, %zu) = %p misaligned", align, *size,
             p);
  return p;
}

static inline void *mix_calloc(size_t size, char *why, size_t len) {
  unsigned char *p = t_calloc(1, size);
  for (size_t i = 0; p != NULL && i < size; i++)
    if (p[i] != 0) {
      snprintf(why, len, "calloc(1, %zu) = %p: byte %zu not zero", size,
               (void *)p, i);
      break;
    }
  return p;
}

/* Grown from size / 2 + 8 bytes, so size must be at least 16. */
static inline void *mix_realloc(size_t size, char *why, size_t len) {
  size_t first = size / 2 + 8;
  unsigned char *p = t_malloc(first);
  if (p == NULL) return NULL;
  memset(p, 0x5a, first);
  unsigned char *q = t_realloc(p, size);
  if (q == NULL) {
    t_free(p);
    return NULL;
  }
  for (size_t i = 0; i < first; i++)
    if (q[i] != 0x5a) {
      snprintf(why, len, "realloc(%zu -> %zu) lost byte %zu", first, size, i);
      break;
    }
  return q;
}

/* Where a broken promise or a failure is told: printf-like. */
typedef void test_report_fn(const char *fmt, ...);

/* A block of *size bytes (at least 16; raised to a multiple of the
 * alignment for aligned_alloc). A failure, a broken promise or a usable
 * size below the size asked for is reported as "who: what", and then the
 * result is NULL (the block freed), which the caller counts as an error. */
static inline void *test_mixed_alloc(uint64_t *rng, size_t *size,
                                     const test_mix_t *mix, const char *who,
                                     test_report_fn *report) {
  char why[200] = "";
  unsigned kind = (unsigned)(test_rng_next(rng) % mix->one_in);
  void *p;
  if (kind == 0)
    p = mix_aligned(rng, size, mix, why, sizeof why);
  else if (kind == 1)
    p = mix_calloc(*size, why, sizeof why);
  else if (kind == 2)
    p = mix_realloc(*size, why, sizeof why);
  else
    p = t_malloc(*size);
  if (p == NULL)
    snprintf(why, sizeof why, "allocation of %zu bytes (kind %u) failed", *size,
             kind);
  else if (why[0] == '\0' && t_usable_size(p) < *size)
    snprintf(why, sizeof why, "usable_size(%p) = %zu < %zu", p,
             t_usable_size(p), *size);
  if (why[0] == '\0') return p;
  report("%s: %s", who, why);
  t_free(p);
  return NULL;
}

#endif
