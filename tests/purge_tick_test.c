/* purge ticks: in a single-threaded program (no purge thread) the delayed
 * purge runs from allocation slow paths, and only there: a cached large
 * mapping that fell due is given back within PURGE_TICK_EVERY + 1 slow
 * paths, not before the delay has passed (nor is one freed later purged
 * with it), and never by a million fast-path malloc/free pairs; a delay of
 * 0 purges on the free itself and -1 never. Purges are counted by the os
 * box (madvise calls); the mapping's header (it stays mapped while cached)
 * says whether it was purged. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "hakozuna.h"
#include "large.h"
#include "options.h"
#include "os.h"
#include "purge.h"
#include "segment.h"
#include "stats.h"

#define KiB             ((size_t)1 << 10)
#define MiB             ((size_t)1 << 20)
#define DELAY_MS        300
#define TICK_EVERY      32 /* PURGE_TICK_EVERY in purge.c */
#define FAST_PAIRS      1000000
#define SLOW_SIZE       (300 * KiB) /* large: every malloc/free is slow */
#define PURGE_TRIES_MAX ((TICK_EVERY + 2) / 2) /* two slow paths per try */

static void set_option(const char *name, const char *value) {
  setenv(name, value, 1);
  hz_options_init();
}

static uint64_t madvise_calls(void) {
  hz_os_stats_t s;
  hz_os_counts(&s);
  return s.madvise_calls;
}

/* One malloc and one free, both through the slow path. */
static void slow_pair(void) {
  void *p = hz_malloc(SLOW_SIZE);
  CHECK(p != NULL);
  hz_free(p);
}

/* A 1 MiB block freed into the cache: its mapping stays (and its header
 * readable) while it is cached. */
static void *cache_one(void) {
  void *p = hz_malloc(MiB);
  CHECK(p != NULL);
  hz_segment_t *seg = hz_segment_of(p);
  CHECK(seg != NULL && seg->kind == HZ_SEGMENT_LARGE);
  hz_free(p);
  return p;
}

/* The cached mapping of block p was purged; false (and a failed check) if
 * it is no longer mapped. */
static bool purged(void *p) {
  hz_segment_t *seg = hz_segment_of(p);
  CHECK_MSG(seg != NULL, "the cached mapping was unmapped");
  return seg != NULL && seg->dirty_slices == 0 && seg->zeroed;
}

static void test_delayed(void) {
  for (int i = 0; i < 1000; i++) /* warm-up: the 64-byte bin is filled */
    hz_free(hz_malloc(64));
  hz_purge_run(true);
  /* The slow-path mapping exists and is cached, so that slow pairs take it
   * and not the 1 MiB mapping (which their requests may borrow). */
  slow_pair();

  uint64_t t0 = hz_os_now_ms();
  void *block = cache_one();
  CHECK(!purged(block));
  /* Not due yet: slow paths leave it alone. */
  uint64_t m0 = madvise_calls();
  for (int i = 0; i < 10 * TICK_EVERY; i++)
    slow_pair();
  if (hz_os_now_ms() < t0 + DELAY_MS) {
    CHECK_MSG(madvise_calls() == m0 && !purged(block),
              "purged before the %d ms delay", DELAY_MS);
  } else {
    fprintf(stderr, "purge_tick_test: the machine is too slow to check that "
                    "nothing is purged early\n");
  }

  hz_os_sleep_ms(DELAY_MS + 50);
  /* Due, but the fast path never purges. */
  m0 = madvise_calls();
  for (int i = 0; i < FAST_PAIRS; i++) {
    void *p = hz_malloc(64);
    hz_free(p);
  }
  CHECK_MSG(madvise_calls() == m0, "%llu madvise calls from the fast path",
            (unsigned long long)(madvise_calls() - m0));
  CHECK(!purged(block));

  /* Slow paths purge within one tick period, what is due only. */
  void *recent = hz_malloc(8 * MiB); /* no class near the 1 MiB one */
  CHECK(recent != NULL);
  hz_free(recent);
  int tries = 0;
  while (!purged(block) && tries < 4 * PURGE_TRIES_MAX) {
    slow_pair();
    tries++;
  }
  CHECK_MSG(purged(block) && tries <= PURGE_TRIES_MAX,
            "a due mapping %s after %d slow malloc/free pairs",
            purged(block) ? "purged" : "still not purged", tries);
  CHECK(madvise_calls() > m0);
  CHECK_MSG(!purged(recent), "a mapping freed just now was purged too");
}

static void test_at_once_and_never(void) {
  set_option("HZ_PURGE_DELAY_MS", "0");
  hz_purge_run(true);
  uint64_t m0 = madvise_calls();
  void *block = cache_one();
  CHECK_MSG(purged(block) && madvise_calls() == m0 + 1,
            "a delay of 0 did not purge on free");

  set_option("HZ_PURGE_DELAY_MS", "-1");
  hz_purge_run(true);
  m0 = madvise_calls();
  block = cache_one();
  hz_os_sleep_ms(20);
  for (int i = 0; i < 4 * TICK_EVERY; i++)
    slow_pair();
  CHECK_MSG(!purged(block) && madvise_calls() == m0,
            "a delay of -1 purged a cached mapping");
  CHECK(hz_large_purge_next() == UINT64_MAX);
}

int main(void) {
  setenv("HZ_LARGE_CACHE_MAX", "64M", 1);
  set_option("HZ_PURGE_DELAY_MS", "300");
  CHECK(hz_option(HZ_OPTION_PURGE_DELAY_MS) == DELAY_MS);
  test_delayed();
  test_at_once_and_never();
  return check_report("purge_tick");
}
