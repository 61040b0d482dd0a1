/* Large mappings never get transparent huge pages: each asks the kernel
 * for none (MADV_NOHUGEPAGE: "nh" among the mapping's VmFlags in smaps),
 * with HZ_THP at its default or 0, and a 16 MiB block written once every
 * 64 KiB grows RSS by about the 256 pages written, not by 2 MiB per write
 * (the library before asked for huge pages from 4 MiB on: 16 MiB). Each
 * case runs in a child so that it sees its own settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "child_run.h"
#include "test_util.h"

/* The VmFlags line of the mapping holding p, or "" (not found). */
static const char *vm_flags_of(const void *p) {
  static char flags[512];
  char line[512];
  flags[0] = 0;
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return flags;
  int inside = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
      inside = (unsigned long)p >= lo && (unsigned long)p < hi;
    else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      snprintf(flags, sizeof flags, "%s", line + 8);
      break;
    }
  }
  fclose(f);
  return flags;
}

static int has_flag(const char *flags, const char *flag) {
  for (const char *s = flags; (s = strstr(s, flag)) != NULL; s += 2)
    if ((s == flags || s[-1] == ' ') && (s[2] == ' ' || s[2] == '\n'))
      return 1;
  return 0;
}

/* Child: report whether the mapping of a block of `size` bytes has `flag`. */
static int child(size_t size, const char *flag, int want) {
  char *p = malloc(size);
  if (p == NULL) return 3;
  p[0] = 1;
  const char *flags = vm_flags_of(p);
  if (flags[0] == 0) {
    fprintf(stderr, "no smaps entry for %p\n", (void *)p);
    return 2;
  }
  if (has_flag(flags, flag) != want) {
    fprintf(stderr, "%zu-byte block: VmFlags%s %s \"%s\"\n", size, flags,
            want ? "lacks" : "has", flag);
    return 1;
  }
  free(p);
  return 0;
}

static void expect(const char *argv0, const char *arg, const char *thp) {
  const char *settings[] = {thp, NULL};
  child_result_t r = child_run(argv0, arg, thp != NULL ? settings : NULL);
  CHECK_MSG(r.status == 0, "case %s%s%s: exit %d: %s", arg, thp ? " with " : "",
            thp ? thp : "", r.status, r.err ? r.err : "");
  free(r.err);
}

/* Child: a block written every 64 KiB must not grow RSS by more than
 * twice the pages written. */
static int child_sparse(void) {
  size_t size = (size_t)16 << 20, stride = (size_t)64 << 10;
  size_t rss0 = test_rss_bytes();
  char *p = malloc(size);
  if (p == NULL) return 3;
  for (size_t i = 0; i < size; i += stride)
    p[i] = 1;
  size_t rss = test_rss_bytes();
  size_t grown = rss > rss0 ? rss - rss0 : 0;
  size_t written = size / stride * 4096;
  free(p);
  if (TEST_RSS_ENFORCED && grown > 2 * written) {
    fprintf(stderr, "RSS grew by %zu KiB for %zu KiB written\n", grown >> 10,
            written >> 10);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1) {
    if (strcmp(argv[1], "big") == 0) return child(8u << 20, "nh", 1);
    if (strcmp(argv[1], "small") == 0) return child(1u << 20, "nh", 1);
    if (strcmp(argv[1], "sparse") == 0) return child_sparse();
    return 4;
  }
  expect(argv[0], "big", NULL);
  expect(argv[0], "small", NULL);
  expect(argv[0], "big", "HZ_THP=0");
  expect(argv[0], "sparse", NULL);
  return check_report("large_thp");
}
