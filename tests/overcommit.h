/* A request the kernel's overcommit heuristic refuses: twice the machine's
 * memory and swap, or 0 when the kernel grants any size (overcommit_memory
 * is 1) or the numbers cannot be read. Usable from C and C++. */
#ifndef HZ_TEST_OVERCOMMIT_H
#define HZ_TEST_OVERCOMMIT_H

#include <stdio.h>
#include <string.h>

static inline unsigned long long overcommit_meminfo_kb(const char *key) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (f == NULL) return 0;
  char line[256];
  unsigned long long kb = 0;
  size_t len = strlen(key);
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, key, len) == 0 && line[len] == ':')
      sscanf(line + len + 1, "%llu", &kb);
  fclose(f);
  return kb;
}

static inline size_t overcommit_refused_size(void) {
  FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
  if (f == NULL) return 0;
  int mode = -1;
  int got = fscanf(f, "%d", &mode);
  fclose(f);
  if (got != 1 || mode == 1) return 0;
  unsigned long long kb =
      overcommit_meminfo_kb("MemTotal") + overcommit_meminfo_kb("SwapTotal");
  return kb == 0 ? 0 : (size_t)(kb * 2 * 1024);
}

#endif
