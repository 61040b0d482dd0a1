/* Helpers shared by the behaviour tests: a xorshift generator, the
 * process's resident set size and minor faults, a sleep, the purge delay
 * the allocator reads, a failure report capped at a number of lines, and
 * the parse of a numeric argument. */
#ifndef HZ_TEST_UTIL_H
#define HZ_TEST_UTIL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* RSS is not meaningful under a sanitizer (shadow memory, thread
 * histories): tests print it but do not enforce bounds on it. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TEST_RSS_ENFORCED 0
#else
#define TEST_RSS_ENFORCED 1
#endif

static inline uint64_t test_rng_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * UINT64_C(0x2545F4914F6CDD1D);
}

/* Resident bytes from /proc/self/statm; 0 if it cannot be read. */
static inline size_t test_rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) return 0;
  unsigned long size = 0, resident = 0;
  int got = fscanf(f, "%lu %lu", &size, &resident);
  fclose(f);
  if (got != 2) return 0;
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* Minor page faults of the process so far (getrusage). */
static inline long test_minor_faults(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

/* The monotonic clock in milliseconds. */
static inline double test_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Sleep ms milliseconds, through interruptions. */
static inline void test_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* HZ_PURGE_DELAY_MS as set in the environment, or its default (100). */
static inline long test_purge_delay_ms(void) {
  const char *text = getenv("HZ_PURGE_DELAY_MS");
  return text != NULL ? strtol(text, NULL, 10) : 100;
}

/* One "<test>: FAIL: ..." line on stderr; counts every call in *reports
 * and stays quiet once max lines were printed. */
static void test_vreport(const char *test, atomic_ulong *reports,
                         unsigned long max, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0), unused));
static void test_vreport(const char *test, atomic_ulong *reports,
                         unsigned long max, const char *fmt, va_list ap) {
  if (atomic_fetch_add(reports, 1) >= max) return;
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  fprintf(stderr, "%s: FAIL: %s\n", test, buf);
}

static void test_report(const char *test, atomic_ulong *reports,
                        unsigned long max, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), unused));
static void test_report(const char *test, atomic_ulong *reports,
                        unsigned long max, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  test_vreport(test, reports, max, fmt, ap);
  va_end(ap);
}

/* argv[i] as a number in 1..max, or `def` when absent; anything else
 * prints the usage line and exits with 2. */
static unsigned long test_arg(int argc, char **argv, int i, unsigned long def,
                              unsigned long max, const char *usage)
    __attribute__((unused));
static unsigned long test_arg(int argc, char **argv, int i, unsigned long def,
                              unsigned long max, const char *usage) {
  if (argc <= i) return def;
  char *end;
  unsigned long v = strtoul(argv[i], &end, 10);
  if (*end != '\0' || v == 0 || v > max) {
    fprintf(stderr, "bad argument '%s' (1..%lu)\nusage: %s\n", argv[i], max,
            usage);
    exit(2);
  }
  return v;
}

#endif
