/* arena: what the reservation of address space promises.
 *   - outside: pointers that are no block of ours are reported (one line
 *     each) and the program goes on: a page of the test's own mapping, an
 *     address inside the reservation past everything committed, and a
 *     block whose segment went back to the arena after malloc_trim;
 *   - limit: under an address-space limit (ulimit -v) the reservation is
 *     at most an eighth of the limit; small blocks beyond it still come
 *     (segments mapped one by one), are given back, come again, and after
 *     a request the limit refuses (ENOMEM) the next ones succeed.
 * Each runs in a re-executed child (child_run.h); the parent checks what
 * it wrote. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "check.h"
#include "child_run.h"

#define MiB ((size_t)1 << 20)

static void *(*volatile xmalloc)(size_t) = malloc;
static void (*volatile xfree)(void *) = free;

/* The largest read-only anonymous private mapping (our reservation), in
 * bytes. */
static size_t largest_reservation(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (f == NULL) return 0;
  char line[512];
  size_t best = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long lo, hi, inode;
    char perms[8], path[8] = "";
    if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %7s", &lo, &hi, perms, &inode,
               path) >= 4 &&
        strcmp(perms, "r--p") == 0 && inode == 0 && path[0] == 0 &&
        hi - lo > best)
      best = hi - lo;
  }
  fclose(f);
  return best;
}

static int child_outside(void) {
  uint8_t *mine = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mine == MAP_FAILED) return 2;
  xfree(mine + 64);
  char *block = xmalloc(100);
  if (block == NULL) return 2;
  xfree(block + ((size_t)128 << 30)); /* reserved, never committed */
  xfree(block);
  malloc_trim(0); /* its segment, empty, goes back to the arena */
  xfree(block);
  fprintf(stderr, "outside: still running\n");
  return 0;
}

static int child_limit(void) {
  struct rlimit lim;
  getrlimit(RLIMIT_AS, &lim);
  xfree(xmalloc(64)); /* the reservation is made for the first segment */
  size_t reserved = largest_reservation();
  if (reserved == 0 || reserved > lim.rlim_cur / 8) {
    fprintf(stderr, "limit: FAIL reservation %zu MiB under a %zu MiB limit\n",
            reserved / MiB, (size_t)lim.rlim_cur / MiB);
    return 1;
  }
  enum { N = 96 * 4096 }; /* 96 MiB of 256-byte blocks */
  static char *blocks[N];
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < N; i++) {
      blocks[i] = xmalloc(256);
      if (blocks[i] == NULL) {
        fprintf(stderr, "limit: FAIL round %d block %d: NULL\n", round, i);
        return 1;
      }
      blocks[i][0] = (char)i;
    }
    for (int i = 0; i < N; i++) {
      if (blocks[i][0] != (char)i) {
        fprintf(stderr, "limit: FAIL block %d changed\n", i);
        return 1;
      }
      xfree(blocks[i]);
    }
    malloc_trim(0);
  }
  errno = 0;
  void *huge = xmalloc((size_t)1 << 40);
  if (huge != NULL || errno != ENOMEM) {
    fprintf(stderr, "limit: FAIL 1 TiB gave %p, errno %d\n", huge, errno);
    return 1;
  }
  char *after = xmalloc(10 * MiB), *small = xmalloc(64);
  if (after == NULL || small == NULL) {
    fprintf(stderr, "limit: FAIL no recovery after ENOMEM\n");
    return 1;
  }
  memset(after, 1, 10 * MiB);
  fprintf(stderr, "limit: ok, reservation %zu MiB\n", reserved / MiB);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "outside") == 0) return child_outside();
  if (argc > 1 && strcmp(argv[1], "limit") == 0) return child_limit();

  child_result_t r = child_run(argv[0], "outside", (const char *const[]){NULL});
  CHECK_MSG(r.status == 0, "outside: exit %d: %s", r.status, r.err);
  CHECK_MSG(count_of(r.err, "invalid free") == 3,
            "outside: %d invalid-free reports, want 3:\n%s",
            count_of(r.err, "invalid free"), r.err);
  CHECK_MSG(count_of(r.err, "\n") == 4, "outside: one line each:\n%s", r.err);
  CHECK(strstr(r.err, "outside: still running") != NULL);
  free(r.err);

  /* A fresh program under a 576 MiB limit: a reservation of at most
   * 72 MiB, and the 96 MiB of small blocks go past it. */
  struct rlimit saved;
  getrlimit(RLIMIT_AS, &saved);
  struct rlimit lim = saved;
  lim.rlim_cur = 512 * MiB + 64 * MiB;
  if (setrlimit(RLIMIT_AS, &lim) == 0) {
    r = child_run(argv[0], "limit", (const char *const[]){NULL});
    setrlimit(RLIMIT_AS, &saved);
    CHECK_MSG(r.status == 0 && strstr(r.err, "limit: ok") != NULL,
              "limit: exit %d:\n%s", r.status, r.err);
    free(r.err);
  } else {
    CHECK_MSG(0, "setrlimit failed: %s", strerror(errno));
  }
  return check_report("arena");
}
