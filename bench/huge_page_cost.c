/* huge_page_cost: what it costs on this machine to back memory with
 * transparent huge pages, by each way Linux offers, against small pages.
 * Not an allocator benchmark (run it without LD_PRELOAD): it informs when
 * the allocator should ask for a huge page.
 *
 * For each method a fresh 2 MiB-aligned region of REGIONS x 2 MiB is
 * mapped, made resident and unmapped; the time is reported per 2 MiB,
 * with the MiB of AnonHugePages the method produced:
 *   small         MADV_NOHUGEPAGE, every 4 KiB page written
 *   small-pop     MADV_NOHUGEPAGE, MADV_POPULATE_WRITE
 *   huge-fault    MADV_HUGEPAGE, one write per 2 MiB (a fault that may
 *                 compact memory under defrag=madvise)
 *   huge-pop      MADV_HUGEPAGE, MADV_POPULATE_WRITE
 *   collapse      no advice, every page written first (untimed: small
 *                 pages unless THP is "always"), then MADV_COLLAPSE of each
 *                 2 MiB (timed)
 * The kernel's free 2 MiB and larger blocks (/proc/buddyinfo) decide
 * whether a huge page is cheap: run it several times. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define HUGE ((size_t)2 << 20)

static const char usage[] =
    "usage: huge_page_cost [REGIONS]\n"
    "  REGIONS  2 MiB regions per method (default 64)\n"
    "Prints, per method, microseconds per 2 MiB and the MiB of huge pages\n"
    "it produced (see the comment in bench/huge_page_cost.c).\n";

static long anon_huge_mib(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (f == NULL) return -1;
  char line[256];
  long kb = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "AnonHugePages:", 14) == 0) kb = atol(line + 14);
  fclose(f);
  return kb / 1024;
}

/* size bytes, 2 MiB-aligned (the slack before and after is left mapped:
 * the program is short). */
static char *map_aligned(size_t size) {
  char *p = mmap(NULL, size + HUGE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  return (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
}

static void write_every(char *p, size_t size, size_t step) {
  for (size_t i = 0; i < size; i += step)
    p[i] = 1;
}

typedef enum { SMALL, SMALL_POP, HUGE_FAULT, HUGE_POP, COLLAPSE } method_t;

/* Seconds the method took to make `size` bytes at p resident. */
static double run(method_t m, char *p, size_t size) {
  /* collapse: no advice, so the writes fault small pages (THP "madvise"
   * or "never"; under "always" they may come huge already). */
  if (m != COLLAPSE)
    madvise(p, size, m <= SMALL_POP ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
  else
    write_every(p, size, 4096);
  double t0 = bench_now();
  int rc = 0;
  switch (m) {
  case SMALL: write_every(p, size, 4096); break;
  case HUGE_FAULT: write_every(p, size, HUGE); break;
  case SMALL_POP:
  case HUGE_POP: rc = madvise(p, size, MADV_POPULATE_WRITE); break;
  case COLLAPSE:
    for (size_t i = 0; i < size; i += HUGE)
      rc |= madvise(p + i, HUGE, MADV_COLLAPSE);
    break;
  }
  double secs = bench_now() - t0;
  if (rc != 0) perror("madvise");
  return secs;
}

int main(int argc, char **argv) {
  long long a[] = {64};
  if (bench_start(argc, argv, usage, a, 1)) return 0;
  if (a[0] < 1) return bench_bad_args(usage);
  size_t regions = (size_t)a[0], size = regions * HUGE;
  static const char *const names[] = {"small", "small-pop", "huge-fault",
                                      "huge-pop", "collapse"};
  for (method_t m = SMALL; m <= COLLAPSE; m++) {
    char *p = map_aligned(size);
    long huge0 = anon_huge_mib();
    double secs = run(m, p, size);
    long huge = anon_huge_mib() - huge0;
    munmap(p, size);
    printf("%-10s %8.0f us per 2 MiB, %ld MiB in huge pages\n", names[m],
           secs * 1e6 / (double)regions, huge);
  }
  return 0;
}
