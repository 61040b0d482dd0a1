/* untouched: a malloc writes nothing into a block whose memory can hold no
 * free mark, so memory nobody touched takes its first page fault where the
 * program writes it, not inside malloc (the free mark is cleared only in
 * blocks that may carry one: check.h, heap.h's hz_bin_take). Each case
 * runs in a child (preloaded release library, no purge thread, small
 * pages only; the thread's own pages but for `laddered`) that counts its
 * minor page faults:
 *   - fresh: 4,096 blocks of 1000 bytes cut from fresh pages fault less
 *     than FAULTS_QUIET times while malloc hands them out, and at least
 *     FAULTS_WRITTEN times when the program then writes them (the count
 *     sees faults at all);
 *   - trimmed: the same blocks written, all but every 64th freed,
 *     malloc_trim (their memory given back), then taken again: quiet while
 *     handed out, faulting when written;
 *   - laddered: blocks of the shared pages, round after round taken
 *     (written by the program) and freed, so the fresh blocks a bin never
 *     handed out go to the CPU caches and depots and come back from
 *     there: the faults inside the mallocs themselves (counted call by
 *     call) stay under FAULTS_QUIET, the program's writes fault;
 *   - reused: blocks of 64 bytes written and freed, their pages emptied
 *     and cut again, unpurged, for 32-byte blocks (whose starts include
 *     every 64-byte block's), and blocks freed into a bin that
 *     malloc_trim empties, the page's last carved among them (were they
 *     given back as never carved, they would be carved again with their
 *     marks), whose memory may hold old free marks: every block handed out
 *     is live (its free reports nothing, the program writing only its
 *     first word), and none is handed out twice.
 * Every case ends with no error line on stderr. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "check.h"
#include "child_run.h"

enum { BLOCKS = 4096, BLOCK_SIZE = 1000, KEEP_EVERY = 64 };
/* A malloc that wrote each block's second word faulted once an OS page:
 * about 1,000 for 4,096 blocks of 1000 bytes. The library's own metadata
 * (bins, page headers) faults a few times. */
enum { FAULTS_QUIET = 64, FAULTS_WRITTEN = 512 };

static long minor_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

static void *blocks[BLOCKS];

/* Take BLOCKS blocks into blocks[] (the ones at a multiple of KEEP_EVERY
 * left alone when `skip_kept`), and the faults that took. */
static long take_all(bool skip_kept) {
  long before = minor_faults();
  for (int i = 0; i < BLOCKS; i++)
    if (!(skip_kept && i % KEEP_EVERY == 0)) blocks[i] = malloc(BLOCK_SIZE);
  return minor_faults() - before;
}

static long write_all(bool skip_kept) {
  long before = minor_faults();
  for (int i = 0; i < BLOCKS; i++)
    if (!(skip_kept && i % KEEP_EVERY == 0)) memset(blocks[i], 1, BLOCK_SIZE);
  return minor_faults() - before;
}

static int case_fresh(void) {
  long taking = take_all(false);
  long writing = write_all(false);
  printf("fresh: %ld faults handing out, %ld writing\n", taking, writing);
  CHECK_MSG(taking < FAULTS_QUIET, "%ld faults inside malloc", taking);
  CHECK_MSG(writing >= FAULTS_WRITTEN, "%ld faults writing", writing);
  for (int i = 0; i < BLOCKS; i++)
    free(blocks[i]);
  return check_report("untouched fresh");
}

static int case_trimmed(void) {
  take_all(false);
  write_all(false);
  for (int i = 0; i < BLOCKS; i++)
    if (i % KEEP_EVERY != 0) free(blocks[i]);
  CHECK(malloc_trim(0) == 1);
  long taking = take_all(true);
  long writing = write_all(true);
  printf("trimmed: %ld faults handing out, %ld writing\n", taking, writing);
  CHECK_MSG(taking < FAULTS_QUIET, "%ld faults inside malloc", taking);
  CHECK_MSG(writing >= FAULTS_WRITTEN, "%ld faults writing", writing);
  for (int i = 0; i < BLOCKS; i++)
    free(blocks[i]);
  return check_report("untouched trimmed");
}

/* Blocks of the shared pages (HZ_SHARED_PAGES=-1: every class takes its
 * blocks there): a bin is refilled whole with fresh blocks, and a full
 * bin's older half, the fresh ones it never handed out among them, goes to
 * the ladder (the CPU caches and depots). Rounds of taking ever more
 * blocks, writing and freeing them all: each round's refills leave fresh
 * blocks in the bin, and the next round takes them back from the ladder. */
enum { LADDER_ROUNDS = 16, LADDER_STEP = 65, LADDER_SIZE = 4000 };

static int case_laddered(void) {
  long inside = 0, writing = 0;
  for (int round = 1; round <= LADDER_ROUNDS; round++) {
    int n = round * LADDER_STEP;
    for (int i = 0; i < n; i++) {
      long before = minor_faults();
      blocks[i] = malloc(LADDER_SIZE);
      long after = minor_faults();
      inside += after - before;
      CHECK(blocks[i] != NULL);
      if (blocks[i] == NULL) return check_report("untouched laddered");
      memset(blocks[i], 1, LADDER_SIZE);
      writing += minor_faults() - after;
    }
    for (int i = 0; i < n; i++)
      free(blocks[i]);
  }
  printf("laddered: %ld faults inside malloc, %ld writing\n", inside, writing);
  CHECK_MSG(inside < FAULTS_QUIET, "%ld faults inside malloc", inside);
  CHECK_MSG(writing >= FAULTS_WRITTEN, "%ld faults writing", writing);
  return check_report("untouched laddered");
}

static int by_address(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* 12.8 MiB of 64-byte blocks: more than a heap keeps of emptied pages, so
 * most go back to their segments and are cut again, unpurged. */
enum { REUSE_BLOCKS = 200000, UNCARVED = 40 };
static void *small[2 * REUSE_BLOCKS];

/* n blocks of `size`, only their first word written; none twice. */
static void take_distinct(size_t size, int n) {
  for (int i = 0; i < n; i++) {
    small[i] = malloc(size);
    CHECK(small[i] != NULL);
    if (small[i] != NULL) *(uintptr_t *)small[i] = (uintptr_t)i;
  }
  void **sorted = malloc((size_t)n * sizeof *sorted);
  memcpy(sorted, small, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, by_address);
  int twice = 0;
  for (int i = 1; i < n; i++)
    twice += sorted[i] == sorted[i - 1];
  free(sorted);
  CHECK_MSG(twice == 0, "%d blocks of %zu bytes handed out twice", twice, size);
}

static void free_all(int n) {
  for (int i = 0; i < n; i++)
    free(small[i]);
}

static int case_reused(void) {
  /* first (while pages are cut from memory that reads as zeros), blocks of
   * a size not used before, freed into the bin highest address
   * first but for the lowest (which keeps its page in use): malloc_trim
   * empties the bin (the fresh blocks left in it go back uncarved, the
   * freed ones, marked, onto the page) and gives back the memory past the
   * page's last carved block but for the OS page that holds it; then they
   * are taken again */
  for (int round = 0; round < 4; round++) {
    take_distinct(48, UNCARVED); /* fewer than fill a bin */
    for (int i = UNCARVED; i-- > 1;)
      free(small[i]);
    malloc_trim(0);
    void *kept = small[0];
    take_distinct(48, UNCARVED);
    free(kept);
    free_all(UNCARVED);
  }
  /* every 64-byte block freed carries its mark at the start of a block of
   * 32 bytes too */
  take_distinct(64, REUSE_BLOCKS);
  free_all(REUSE_BLOCKS);
  take_distinct(32, 2 * REUSE_BLOCKS);
  free_all(2 * REUSE_BLOCKS);
  take_distinct(32, 2 * REUSE_BLOCKS);
  free_all(2 * REUSE_BLOCKS);
  return check_report("untouched reused");
}

/* Run a case in a child; `route` is its HZ_SHARED_PAGES setting. */
static void run_case(const char *argv0, const char *name, const char *route) {
  const char *const settings[] = {"HZ_THP=0", "HZ_PURGE_THREAD=0",
                                  "HZ_GUARD_SAMPLE=0", route, NULL};
  child_result_t r = child_run(argv0, name, settings);
  CHECK_MSG(r.status == 0, "case %s: exit %d, signal %d:\n%s", name, r.status,
            r.signal, r.err != NULL ? r.err : "");
  CHECK_MSG(r.err != NULL && strstr(r.err, "hakozuna: error") == NULL,
            "case %s reported an error:\n%s", name, r.err);
  free(r.err);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "fresh") == 0) return case_fresh();
  if (argc > 1 && strcmp(argv[1], "trimmed") == 0) return case_trimmed();
  if (argc > 1 && strcmp(argv[1], "laddered") == 0) return case_laddered();
  if (argc > 1 && strcmp(argv[1], "reused") == 0) return case_reused();
  run_case(argv[0], "fresh", "HZ_SHARED_PAGES=0");
  run_case(argv[0], "trimmed", "HZ_SHARED_PAGES=0");
  run_case(argv[0], "laddered", "HZ_SHARED_PAGES=-1");
  run_case(argv[0], "reused", "HZ_SHARED_PAGES=0");
  return check_report("untouched");
}
