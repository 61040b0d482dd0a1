/* large_reuse_test — a program whose large-block demand holds steady
 * reuses the pages it freed, and gives them back when it stops.
 *
 * SLOTS blocks of 5..25 MiB live at once; ROUNDS times a random slot's
 * block is freed and one of another random size takes its place, every
 * page of it written (the malloc_large pattern with fewer slots). After a
 * warm-up of WARMUP rounds (the slots filled, the freed pages cached) the
 * minor faults (getrusage) per allocation must stay under FAULT_BUDGET
 * pages: the library before this test faulted in about half of every
 * block again (its cache purged and unmapped what the next request
 * needed). Then every block is freed and malloc_trim(0) must bring RSS
 * back within RSS_SLACK of where it started. CTest runs it with HZ_THP=0,
 * so that a fault is one page. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "test_util.h"

#define MiB          ((size_t)1 << 20)
#define SLOTS        8
#define ROUNDS       600
#define WARMUP       100
#define FAULT_BUDGET 16 /* pages per allocation */
#define RSS_SLACK    (32 * MiB)

static void write_pages(char *p, size_t size) {
  for (size_t i = 0; i < size; i += 4096)
    p[i] = (char)i;
  p[size - 1] = 1;
}

int main(void) {
  size_t rss0 = test_rss_bytes();
  char *slot[SLOTS] = {0};
  uint64_t rng = 0x9E3779B97F4A7C15u;
  long faults0 = 0;
  for (int round = 0; round < ROUNDS; round++) {
    if (round == WARMUP) faults0 = test_minor_faults();
    uint64_t r = test_rng_next(&rng);
    int k = (int)((r >> 32) % SLOTS);
    size_t size = 5 * MiB + (size_t)(r & 0xffffffffu) % (20 * MiB + 1);
    free(slot[k]);
    slot[k] = malloc(size);
    CHECK(slot[k] != NULL);
    if (slot[k] == NULL) return check_report("large_reuse");
    write_pages(slot[k], size);
  }
  double per_alloc =
      (double)(test_minor_faults() - faults0) / (double)(ROUNDS - WARMUP);
  printf("large_reuse: %.1f page faults per allocation after warm-up "
         "(budget %d)\n",
         per_alloc, FAULT_BUDGET);
  CHECK_MSG(per_alloc <= FAULT_BUDGET,
            "%.1f page faults per allocation of a steady large-block load",
            per_alloc);

  for (int k = 0; k < SLOTS; k++)
    free(slot[k]);
  malloc_trim(0);
  size_t rss = test_rss_bytes();
  printf("large_reuse: RSS %.1f MiB at the start, %.1f MiB after the "
         "blocks were freed and trimmed\n",
         (double)rss0 / (double)MiB, (double)rss / (double)MiB);
  if (TEST_RSS_ENFORCED)
    CHECK_MSG(rss <= rss0 + RSS_SLACK,
              "RSS %.1f MiB after trim, %.1f MiB at the start",
              (double)rss / (double)MiB, (double)rss0 / (double)MiB);
  return check_report("large_reuse");
}
