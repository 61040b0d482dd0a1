/* Large mappings of 4 MiB and more ask the kernel for transparent huge
 * pages (MADV_HUGEPAGE: "hg" among the mapping's VmFlags in smaps), smaller
 * ones do not, and HZ_THP=0 asks for none ("nh"). Each case runs in a child
 * so that it sees its own settings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "child_run.h"

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

int main(int argc, char **argv) {
  if (argc > 1) {
    if (strcmp(argv[1], "big") == 0) return child(8u << 20, "hg", 1);
    if (strcmp(argv[1], "small") == 0) return child(1u << 20, "hg", 0);
    if (strcmp(argv[1], "off") == 0) return child(8u << 20, "nh", 1);
    return 4;
  }
  expect(argv[0], "big", NULL);
  expect(argv[0], "small", NULL);
  expect(argv[0], "off", "HZ_THP=0");
  return check_report("large_thp");
}
