/* reuse: free memory of one page size serves pages of another, read
 * through the stats. Small blocks fill some 20 MiB of 64 KiB pages; all
 * but one block per 4 MiB segment are freed, so every segment stays in
 * use while most of its pages are empty. Then 48 KiB blocks (512 KiB
 * pages) worth 16 MiB must come from that free memory: no new segment,
 * the free bytes held (free slices, and the empty pages the heap keeps
 * for reuse, which must give way) drop by about as much, and the blocks
 * are written with few page faults, their memory being resident already.
 *
 * Run with HZ_PURGE_DELAY_MS=-1, so nothing is given back meanwhile. */
#include <stdint.h>
#include <string.h>

#include "api.h"
#include "check.h"
#include "hakozuna.h"
#include "test_util.h"

#define SMALL       600
#define SMALL_COUNT 36000 /* about 21 MiB */
#define WIDE        (48 << 10)
#define WIDE_COUNT  336 /* about 16 MiB */
#define MiB         ((size_t)1 << 20)

static void *small[SMALL_COUNT];
static void *wide[WIDE_COUNT];

/* Free bytes held: free slices not yet purged and kept empty pages. */
static size_t free_held(hz_memory_summary_t *m) {
  hz_heap_summary_t heaps;
  hz_api_summarize(&heaps, m);
  return m->dirty_bytes + heaps.bytes_kept_empty;
}

int main(void) {
  uintptr_t kept_segment = 0;
  for (int i = 0; i < SMALL_COUNT; i++) {
    small[i] = hz_malloc(SMALL);
    CHECK(small[i] != NULL);
    memset(small[i], 1, SMALL);
  }
  /* Keep the first block of each segment; free the rest. */
  for (int i = 0; i < SMALL_COUNT; i++) {
    uintptr_t seg = (uintptr_t)small[i] >> 22;
    if (seg != kept_segment) {
      kept_segment = seg;
      continue;
    }
    hz_free(small[i]);
    small[i] = NULL;
  }
  hz_memory_summary_t before;
  size_t held_before = free_held(&before);
  CHECK_MSG(held_before >= 16 * MiB,
            "only %zu bytes of free memory held after freeing ~20 MiB",
            held_before);

  long faults = test_minor_faults();
  for (int i = 0; i < WIDE_COUNT; i++) {
    wide[i] = hz_malloc(WIDE);
    CHECK(wide[i] != NULL);
    memset(wide[i], 2, WIDE);
  }
  faults = test_minor_faults() - faults;
  hz_memory_summary_t after;
  size_t held_after = free_held(&after);
  CHECK_MSG(after.segments <= before.segments,
            "segments %zu -> %zu: wide pages did not reuse the free slices",
            before.segments, after.segments);
  CHECK_MSG(held_after + 12 * MiB <= held_before,
            "free bytes held %zu -> %zu: wide pages did not take them",
            held_before, held_after);
  /* 16 MiB is 4096 pages of 4 KiB: nearly all were resident already. */
  CHECK_MSG(faults < 1024, "%ld page faults writing 16 MiB of reused memory",
            faults);

  for (int i = 0; i < WIDE_COUNT; i++)
    hz_free(wide[i]);
  for (int i = 0; i < SMALL_COUNT; i++)
    hz_free(small[i]);
  return check_report("reuse");
}
