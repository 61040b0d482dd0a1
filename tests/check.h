/* Minimal test helper: CHECK records a failure with file:line and goes on;
 * check_report() prints the summary and gives the process exit code. */
#ifndef HZ_TEST_CHECK_H
#define HZ_TEST_CHECK_H

#include <stdio.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                            \
  do {                                                                         \
    check_count++;                                                             \
    if (!(cond)) {                                                             \
      check_failures++;                                                        \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

#define CHECK_MSG(cond, ...)                                                   \
  do {                                                                         \
    check_count++;                                                             \
    if (!(cond)) {                                                             \
      check_failures++;                                                        \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

static inline int check_report(const char *name) {
  fprintf(stderr, "%s: %d checks, %d failed\n", name, check_count,
          check_failures);
  return check_failures == 0 ? 0 : 1;
}

#endif
