/* Shared helpers for the benchmark programs: timing, peak RSS, a fast
 * deterministic RNG, argument parsing, allocation and thread start-up that
 * stop the program with one line on failure, and the one result line every
 * benchmark prints:
 *
 *   bench=<name> <key>=<value> ... ops/s=<n>|secs=<s> peak_rss_kb=<n>
 *
 * The harness parses key=value pairs from the line starting "bench=". */
#ifndef HZ_BENCH_H
#define HZ_BENCH_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

extern char *program_invocation_short_name; /* glibc's, as errno.h has it */

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Peak resident set size of this program so far, in KiB: VmHWM, the
 * high-water mark of its own address space. getrusage's ru_maxrss is not
 * it: Linux keeps across exec the peak of the process before, so a
 * benchmark started by the harness would report at least the harness's
 * own RSS (18 MiB of Python). */
static inline long bench_peak_rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[128];
  long kb = -1;
  while (f != NULL && kb < 0 && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmHWM: %ld kB", &kb) != 1) kb = -1;
  if (f != NULL) fclose(f);
  if (kb >= 0) return kb;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* Current resident set size in KiB (from /proc/self/statm). */
static inline long bench_rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, rss = 0;
  if (f != NULL) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  return rss * 4;
}

/* Out of memory in a benchmark: one line on stderr and exit 1. */
__attribute__((cold, noreturn)) static inline void bench_oom(size_t n) {
  fprintf(stderr, "%s: out of memory (%zu bytes)\n",
          program_invocation_short_name, n);
  exit(1);
}

/* malloc, calloc and realloc that cannot fail: they stop the benchmark instead.
 */
static inline void *bench_xmalloc(size_t n) {
  void *p = malloc(n);
  if (p == NULL) bench_oom(n);
  return p;
}

static inline void *bench_xcalloc(size_t count, size_t size) {
  void *p = calloc(count, size);
  if (p == NULL) bench_oom(count * size);
  return p;
}

static inline void *bench_xrealloc(void *old, size_t n) {
  void *p = realloc(old, n);
  if (p == NULL) bench_oom(n);
  return p;
}

/* pthread_create that cannot fail: it stops the benchmark instead. */
static inline void bench_thread(pthread_t *tid, void *(*fn)(void *),
                                void *arg) {
  int rc = pthread_create(tid, NULL, fn, arg);
  if (rc != 0) {
    fprintf(stderr, "%s: pthread_create: %s\n", program_invocation_short_name,
            strerror(rc));
    exit(1);
  }
}

/* Start `n` threads running fn((void *)i), i = 0..n-1, which wait on
 * `start` (initialised here for them and the caller) before their work;
 * returns the seconds from the barrier until every thread is joined. */
static inline double bench_time_threads(int n, void *(*fn)(void *),
                                        pthread_barrier_t *start) {
  pthread_barrier_init(start, NULL, (unsigned)n + 1);
  pthread_t *th = bench_xcalloc((size_t)n, sizeof *th);
  for (int i = 0; i < n; i++)
    bench_thread(&th[i], fn, (void *)(uintptr_t)i);
  pthread_barrier_wait(start);
  double t0 = bench_now();
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  double secs = bench_now() - t0;
  free(th);
  return secs;
}

/* xorshift64*: fast, deterministic per seed, never returns the same
 * sequence for different non-zero seeds. */
typedef struct {
  uint64_t state;
} bench_rng_t;

static inline void bench_rng_seed(bench_rng_t *r, uint64_t seed) {
  r->state = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  if (r->state == 0) r->state = 1;
}

static inline uint64_t bench_rng_next(bench_rng_t *r) {
  uint64_t x = r->state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, 1), from the top 53 bits. */
static inline double bench_rng_unit(bench_rng_t *r) {
  return (double)(bench_rng_next(r) >> 11) / 9007199254740992.0;
}

/* Uniform in [lo, hi]. */
static inline uint64_t bench_rng_range(bench_rng_t *r, uint64_t lo,
                                       uint64_t hi) {
  return lo + bench_rng_next(r) % (hi - lo + 1);
}

/* Positional argument i as a number (K/M/G suffixes), or the default. */
static inline long long bench_arg(int argc, char **argv, int i,
                                  long long fallback) {
  if (i >= argc) return fallback;
  char *end = NULL;
  long long v = strtoll(argv[i], &end, 10);
  if (end == argv[i]) {
    fprintf(stderr, "bad numeric argument: %s\n", argv[i]);
    exit(2);
  }
  switch (*end) {
  case 'k':
  case 'K': v <<= 10; break;
  case 'm':
  case 'M': v <<= 20; break;
  case 'g':
  case 'G': v <<= 30; break;
  default: break;
  }
  return v;
}

/* Positional arguments 1..n into values[0..n-1]; each keeps the default it
 * holds when not given. */
static inline void bench_args(int argc, char **argv, long long *values, int n) {
  for (int i = 0; i < n; i++)
    values[i] = bench_arg(argc, argv, i + 1, values[i]);
}

/* Arguments out of range: one line and the usage on stderr; the exit code
 * to return from main. */
static inline int bench_bad_args(const char *usage) {
  fprintf(stderr, "%s: bad arguments\n%s", program_invocation_short_name,
          usage);
  return 2;
}

/* True if argv has --help or -h; prints usage then. */
static inline int bench_wants_help(int argc, char **argv, const char *usage) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      return 1;
    }
  return 0;
}

/* A benchmark's first step: prints the usage and returns 1 for --help;
 * otherwise reads positional arguments 1..n into values (see bench_args)
 * and returns 0. */
static inline int bench_start(int argc, char **argv, const char *usage,
                              long long *values, int n) {
  if (bench_wants_help(argc, argv, usage)) return 1;
  bench_args(argc, argv, values, n);
  return 0;
}

/* Print the result line: "bench=<name> " + caller's pairs + peak RSS. */
static inline void bench_result(const char *name, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  printf("bench=%s %s peak_rss_kb=%ld\n", name, buf, bench_peak_rss_kb());
  fflush(stdout);
}

/* Write a block's first byte, every `stride` bytes after it and its last
 * byte: with a 4 KiB stride every page is really used. */
static inline void bench_touch_every(void *p, size_t size, size_t stride) {
  volatile char *c = p;
  for (size_t i = 0; i < size; i += stride)
    c[i] = (char)i;
  if (size > 0) c[size - 1] = 1;
}

/* Touch every page of a block so its memory is really used. */
static inline void bench_touch(void *p, size_t size) {
  bench_touch_every(p, size, 4096);
}

#endif
