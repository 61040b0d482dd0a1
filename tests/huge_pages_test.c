/* huge_pages: huge pages back memory the program fills densely and no
 * other. In a threaded program (the purge thread runs), a region holding
 * one small block never gets a huge page; once 48 MiB of small blocks are
 * written, the regions they fill do (AnonHugePages of the mappings they
 * span, /proc/self/smaps) within a few seconds; freed, trimmed and filled
 * again, the same segments do again; with HZ_THP=0, none. Built as
 * huge_pages.always (the hz_ API's test build), the library takes the
 * kernel's mode for "always", where it advises its segments no huge pages
 * and must lift that advice from a region before collapsing it. Skipped,
 * with a note, where the kernel has no transparent huge pages or cannot
 * collapse memory into them (MADV_COLLAPSE, Linux 6.1). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "child_run.h"
#include "test_alloc.h"
#include "test_util.h"

#ifdef TEST_THP_ALWAYS
#define HZ_FAULT_INJECTION /* the build linked in has it */
#include "os.h"
#define t_trim() hz_collect(true)
#else
#define t_trim() malloc_trim(0)
#endif

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define MiB    ((size_t)1 << 20)
#define DENSE  (48 * MiB)
#define BLOCK  64
#define BLOCKS (DENSE / BLOCK)

static void *(*volatile xmalloc)(size_t) = t_malloc;

/* AnonHugePages of the mappings that overlap [lo, hi), in bytes. */
static size_t huge_bytes_between(uintptr_t lo, uintptr_t hi) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return 0;
  char line[512];
  bool inside = false;
  size_t total = 0, kb;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long start, end;
    if (sscanf(line, "%lx-%lx ", &start, &end) == 2 && strchr(line, '-') &&
        strstr(line, " kB") == NULL) {
      inside = start < hi && end > lo;
      continue;
    }
    if (inside && sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
      total += kb << 10;
  }
  fclose(f);
  return total;
}

static size_t huge_bytes_around(const void *p) {
  return huge_bytes_between((uintptr_t)p, (uintptr_t)p + 1);
}

static void *touch(void *arg) {
  (void)arg;
  t_free(xmalloc(100)); /* a second heap: the purge thread starts */
  return NULL;
}

/* Fill `blocks` with 48 MiB of written small blocks and poll, every
 * 100 ms, until half of it is in huge pages or `polls` ran out; print
 * "`name` <huge bytes> after <ms> ms". */
static void fill_and_wait(char **blocks, const char *name, int polls) {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (size_t i = 0; i < BLOCKS; i++) {
    blocks[i] = xmalloc(BLOCK);
    memset(blocks[i], 2, BLOCK);
    if ((uintptr_t)blocks[i] < lo) lo = (uintptr_t)blocks[i];
    if ((uintptr_t)blocks[i] + BLOCK > hi) hi = (uintptr_t)blocks[i] + BLOCK;
  }
  size_t huge = 0;
  int wait = 0;
  while (wait < polls && huge < DENSE / 2) {
    test_sleep_ms(100);
    wait++;
    huge = huge_bytes_between(lo, hi);
  }
  fprintf(stderr, "%s %zu after %d ms\n", name, huge, wait * 100);
}

static int child(void) {
#ifdef TEST_THP_ALWAYS
  hz_os_thp_mode_pretend(2);
#endif
  pthread_t t;
  pthread_create(&t, NULL, touch, NULL);
  pthread_join(t, NULL);
  char *one = xmalloc(BLOCK);
  memset(one, 1, BLOCK);
  test_sleep_ms(500);
  fprintf(stderr, "one-block %zu\n", huge_bytes_around(one));
  /* Up to 30 s (or WAIT_MS) a round: the purge thread's round comes late
   * on a loaded or emulated machine (an arm64 one under
   * qemu-system-aarch64 had none in the 3 s this waited before). */
  const char *limit = getenv("WAIT_MS");
  int polls = limit != NULL ? atoi(limit) / 100 : 300;
  char **blocks = xmalloc(BLOCKS * sizeof *blocks);
  fill_and_wait(blocks, "dense", polls);
  /* Every segment back to the arena, then the same segments filled. */
  for (size_t i = 0; i < BLOCKS; i++)
    t_free(blocks[i]);
  t_trim();
  fill_and_wait(blocks, "again", polls);
  return 0;
}

/* Why huge pages cannot be had here, or NULL. */
static const char *no_huge_pages(void) {
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f == NULL) return "no transparent huge pages in this kernel";
  char mode[128] = "";
  char *got = fgets(mode, sizeof mode, f);
  fclose(f);
  if (got == NULL || strstr(mode, "[never]") != NULL)
    return "transparent huge pages are off ([never])";
  size_t size = 4 * MiB;
  uint8_t *raw = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return "no memory";
  uint8_t *region = (uint8_t *)(((uintptr_t)raw + 2 * MiB - 1) & ~(2 * MiB - 1));
  memset(region, 1, 2 * MiB);
  int rc = madvise(region, 2 * MiB, MADV_COLLAPSE);
  munmap(raw, size);
  return rc == 0 ? NULL : "MADV_COLLAPSE fails here";
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) return child();
  const char *why = no_huge_pages();
  if (why != NULL) {
    printf("huge_pages: skipped: %s\n", why);
    return 0;
  }
  size_t one = 0, dense = 0, again = 0;
  int waited = 0, waited_again = 0;
  child_result_t r = child_run(argv[0], "child", (const char *const[]){NULL});
  CHECK_MSG(r.status == 0 && sscanf(strstr(r.err, "one-block") ?: "",
                                    "one-block %zu", &one) == 1 &&
                sscanf(strstr(r.err, "dense") ?: "", "dense %zu after %d ms",
                       &dense, &waited) == 2 &&
                sscanf(strstr(r.err, "again") ?: "", "again %zu after %d ms",
                       &again, &waited_again) == 2,
            "child: exit %d:\n%s", r.status, r.err);
  CHECK_MSG(one == 0, "%zu bytes of huge pages around one small block", one);
  CHECK_MSG(dense >= DENSE / 2,
            "%zu MiB of huge pages under 48 MiB of written small blocks",
            dense / MiB);
  CHECK_MSG(again >= DENSE / 2,
            "%zu MiB of huge pages under 48 MiB of small blocks written again "
            "after a trim",
            again / MiB);
  if (waited_again > waited) waited = waited_again;
  free(r.err);

  /* With HZ_THP=0, none in twice the time the default took (3 s at
   * least). */
  char wait_ms[32];
  snprintf(wait_ms, sizeof wait_ms, "WAIT_MS=%d",
           2 * waited > 3000 ? 2 * waited : 3000);
  r = child_run(argv[0], "child", (const char *const[]){"HZ_THP=0", wait_ms, NULL});
  CHECK_MSG(r.status == 0 &&
                sscanf(strstr(r.err, "dense") ?: "", "dense %zu", &dense) == 1 &&
                sscanf(strstr(r.err, "again") ?: "", "again %zu", &again) == 1 &&
                dense == 0 && again == 0,
            "HZ_THP=0: exit %d:\n%s", r.status, r.err);
  free(r.err);
  return check_report("huge_pages");
}
