/* adopt_test — a thread that adopts a pooled heap finds the bins the
 * exited thread left in it, instead of refilling them from pages.
 *
 * The test re-executes itself with HZ_SHOW_STATS=1. The child starts
 * GENERATIONS threads one after another (each joined before the next
 * starts, so the pool holds one heap and each thread adopts the heap of
 * the one before). Each thread allocates PER_CLASS blocks in each of
 * CLASSES size classes, writes and checks them, and frees them all: they
 * go into its bins, which it leaves behind when it exits.
 *
 * Then the child calls malloc_trim(0), which collects the pooled heap: its
 * bins too, since no thread can use them.
 *
 * The parent reads the report's "slow mallocs" line. A thread's first
 * malloc is always a slow path (it binds the heap). If the bins were
 * emptied at exit, every thread would also refill a bin per class: at
 * least 1 + CLASSES slow paths each. With the bins kept, the threads
 * together take fewer than 2 per generation (the background collector may
 * empty a pooled heap's bins between two generations now and then).
 * From the "small live" line: after the trim, fewer pages in use than
 * CLASSES / 2 (only the main thread's bin and the C library's own blocks
 * remain; a pooled heap that kept its bins would hold a page per class).
 *
 * usage: adopt_test (the child it runs is "adopt_test child") */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "child_run.h"

#define GENERATIONS 300
#define PER_CLASS   8

static const size_t class_sizes[] = {16,  48,  96,   160,  256,  384,
                                     512, 768, 1000, 1500, 2048, 3000};
#define CLASSES (sizeof class_sizes / sizeof class_sizes[0])

static void *generation(void *arg) {
  uintptr_t seed = (uintptr_t)arg;
  unsigned char *blocks[CLASSES][PER_CLASS];
  int ok = 1;
  for (size_t c = 0; c < CLASSES; c++)
    for (int i = 0; i < PER_CLASS; i++) {
      blocks[c][i] = malloc(class_sizes[c]);
      if (blocks[c][i] == NULL) return NULL;
      memset(blocks[c][i], (int)(seed + c + i), class_sizes[c]);
    }
  for (size_t c = 0; c < CLASSES; c++)
    for (int i = 0; i < PER_CLASS; i++) {
      unsigned char want = (unsigned char)(seed + c + i);
      ok &= blocks[c][i][0] == want && blocks[c][i][class_sizes[c] - 1] == want;
      free(blocks[c][i]);
    }
  return ok ? arg : NULL;
}

static int child_main(void) {
  void *keep = malloc(64); /* the main thread has its own heap */
  for (uintptr_t g = 1; g <= GENERATIONS; g++) {
    pthread_t th;
    void *result = NULL;
    if (pthread_create(&th, NULL, generation, (void *)g) != 0) return 2;
    pthread_join(th, &result);
    if (result != (void *)g) return 3;
  }
  free(keep);
  malloc_trim(0); /* collects the pooled heap, bins included */
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2) return child_main();
  /* No purge thread: its rounds (the per-CPU caches' churn rule, which a
   * starved round can turn on and off) would add slow mallocs by chance;
   * malloc_trim collects the pooled heap. */
  static const char *const settings[] = {"HZ_SHOW_STATS=1",
                                         "HZ_PURGE_THREAD=0", NULL};
  child_result_t r = child_run(argv[0], "child", settings);
  const char *line = r.err != NULL ? strstr(r.err, "slow mallocs") : NULL;
  long slow = -1;
  if (line != NULL) sscanf(line, "slow mallocs %ld", &slow);
  CHECK_MSG(r.status == 0 && slow >= 0, "child exit %d, no slow-mallocs line in:\n%s",
            r.status, r.err ? r.err : "(nothing)");
  if (slow >= 0) {
    fprintf(stderr, "adopt_test: %ld slow mallocs over %d generations\n", slow,
            GENERATIONS);
    CHECK_MSG(slow >= GENERATIONS, "%ld slow mallocs: each thread binds a heap",
              slow);
    CHECK_MSG(slow < 2 * GENERATIONS,
              "%ld slow mallocs for %d threads: adopted heaps lost their bins",
              slow, GENERATIONS);
  }
  const char *live = r.err != NULL ? strstr(r.err, "small live") : NULL;
  const char *pages = live != NULL ? strstr(live, "bytes, ") : NULL;
  long in_use = -1;
  if (pages != NULL) sscanf(pages, "bytes, %ld pages in use", &in_use);
  CHECK_MSG(in_use >= 0, "no small-live line in:\n%s", r.err ? r.err : "");
  if (in_use >= 0) {
    fprintf(stderr, "adopt_test: %ld pages in use after malloc_trim\n", in_use);
    CHECK_MSG(in_use < (long)CLASSES / 2,
              "%ld pages in use: the pooled heap's bins were not collected",
              in_use);
  }
  free(r.err);
  return check_report("adopt_test");
}
