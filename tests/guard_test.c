/* The guarded sample (guard box): with HZ_GUARD_SAMPLE=1 a one-byte
 * overflow, a one-byte underflow, a read and a write after free, of blocks
 * from 1 B to the size limit, in the main thread and in another, are each
 * reported with the right kind, offset, size and stacks, and the program
 * dies; with the default rate, a loop of 1M allocations that overflow by one
 * byte is reported; a program's own SIGSEGV handler still gets the faults
 * that are not ours; HZ_GUARD_RECOVER goes on; a freed slot is reused last
 * and stays inaccessible; realloc, malloc_usable_size, calloc and
 * posix_memalign know guarded blocks; double frees are reported. Every case runs in a child
 * (this program again) and is judged from its stderr and how it ended. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "child_run.h"

static int failures;

#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      failures++;                                                              \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                     \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

/* ---------------------------------------------------------------------------
 * The child's side: named sites, so the stacks can be checked
 * ------------------------------------------------------------------------- */
__attribute__((noinline)) char *guard_alloc_site(size_t size) {
  char *p = malloc(size);
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}

__attribute__((noinline)) void guard_free_site(char *p) {
  free(p);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void guard_bug_site(char *p, const char *kind,
                                              size_t size) {
  volatile char *v = p;
  if (strcmp(kind, "overflow-write") == 0) v[size] = 1;
  if (strcmp(kind, "overflow-read") == 0) (void)v[size];
  if (strcmp(kind, "underflow-write") == 0) v[-1] = 1;
  if (strcmp(kind, "underflow-read") == 0) (void)v[-1];
  if (strcmp(kind, "uaf-write") == 0) v[size / 2] = 1;
  if (strcmp(kind, "uaf-read") == 0) (void)v[size / 2];
}

typedef struct {
  const char *kind;
  size_t size;
} bug_t;

static void *bug_run(void *arg) {
  const bug_t *b = arg;
  char *p = guard_alloc_site(b->size);
  memset(p, 7, b->size);
  bool after_free = strncmp(b->kind, "uaf", 3) == 0;
  if (after_free) guard_free_site(p);
  guard_bug_site(p, b->kind, b->size);
  if (!after_free) guard_free_site(p);
  return NULL;
}

/* "bug:KIND:SIZE:main|thread": the bug, then exit 0 if nothing stopped it. */
static int child_bug(const char *arg) {
  char kind[32], where[16];
  size_t size;
  if (sscanf(arg, "bug:%31[^:]:%zu:%15s", kind, &size, where) != 3) return 2;
  bug_t b = {kind, size};
  if (strcmp(where, "thread") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, bug_run, &b);
    pthread_join(t, NULL);
  } else {
    bug_run(&b);
  }
  return 0;
}

/* The default rate: 1M mallocs, each written one byte past its end. */
static int child_default_loop(void) {
  for (int i = 0; i < 1000000; i++) {
    char *p = guard_alloc_site(24);
    guard_bug_site(p, "overflow-write", 24);
    guard_free_site(p);
  }
  return 0;
}

static sigjmp_buf own_jump;
static volatile sig_atomic_t own_calls;

static void own_handler(int sig, siginfo_t *info, void *context) {
  (void)sig, (void)info, (void)context;
  own_calls++;
  siglongjmp(own_jump, 1);
}

/* A program with its own SIGSEGV handler, installed before any guarded
 * block: a fault of its own (a PROT_NONE page) reaches it; so does a
 * guarded fault, after the report. */
static int child_chain(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = own_handler;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, NULL);
  char *guarded = guard_alloc_site(32); /* installs the guard's handler */
  char *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (sigsetjmp(own_jump, 1) == 0) none[0] = 1;
  fprintf(stderr, "own handler calls %d\n", (int)own_calls);
  if (sigsetjmp(own_jump, 1) == 0) guard_bug_site(guarded, "overflow-read", 32);
  fprintf(stderr, "own handler calls %d\n", (int)own_calls);
  return 0;
}

/* No handler of its own: a fault that is not ours kills it as before. */
static int child_wild(void) {
  char *guarded = guard_alloc_site(32);
  char *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  none[0] = guarded[0];
  return 0;
}

/* HZ_GUARD_RECOVER=1: reported, and the program goes on. */
static int child_recover(void) {
  char *p = guard_alloc_site(64);
  guard_bug_site(p, "overflow-read", 64);
  guard_bug_site(p, "overflow-write", 64);
  guard_free_site(p);
  fprintf(stderr, "went on\n");
  return 0;
}

/* The pool (HZ_GUARD_SLOTS=4): a freed slot is reused last and stays
 * inaccessible; a full pool hands out plain blocks. */
static int child_pool(void) {
  char *a = guard_alloc_site(100), *b = guard_alloc_site(100);
  uintptr_t a_page = (uintptr_t)a & ~(uintptr_t)4095;
  guard_free_site(a);
  char *c = guard_alloc_site(100), *d = guard_alloc_site(100);
  char *e = guard_alloc_site(100); /* the last free slot: a's */
  char *f = guard_alloc_site(100); /* the pool is full: a plain block */
  int fails = 0;
  if (((uintptr_t)c & ~(uintptr_t)4095) == a_page) fails++;
  if (((uintptr_t)d & ~(uintptr_t)4095) == a_page) fails++;
  if (((uintptr_t)e & ~(uintptr_t)4095) != a_page) fails++;
  if (labs((long)((uintptr_t)f - (uintptr_t)e)) < 8192 && f != NULL) fails++;
  fprintf(stderr, "pool order failures %d\n", fails);
  free(b), free(c), free(d), free(e), free(f);
  return fails;
}

/* realloc, malloc_usable_size and calloc of guarded blocks; a double free
 * reported (release goes on). */
static int child_calls(void) {
  int fails = 0;
  char *p = guard_alloc_site(40);
  if (malloc_usable_size(p) != 40) fails++;
  memset(p, 'x', 40);
  char *q = realloc(p, 400);
  if (q == NULL || q[0] != 'x' || q[39] != 'x') fails++;
  if (q != NULL && malloc_usable_size(q) != 400) fails++;
  char *z = calloc(10, 10);
  for (int i = 0; z != NULL && i < 100; i++)
    fails += z[i] != 0;
  free(z);
  /* An aligned request: aligned, its size exact, its canary moved. */
  void *a = NULL;
  if (posix_memalign(&a, 64, 100) != 0 || ((uintptr_t)a & 63) != 0 ||
      malloc_usable_size(a) != 100)
    fails++;
  free(a);
  guard_free_site(q);
  fprintf(stderr, "calls failures %d\n", fails);
  guard_free_site(q); /* a double free */
  fprintf(stderr, "after double free\n");
  return fails;
}

/* A memalign'd guarded block: one byte past its end is reported at its
 * free. */
static int child_aligned(void) {
  void *a = NULL;
  if (posix_memalign(&a, 256, 200) != 0) return 3;
  ((volatile char *)a)[200] = 1;
  guard_free_site(a);
  return 0;
}

static int child_main(const char *arg) {
  if (strncmp(arg, "bug:", 4) == 0) return child_bug(arg);
  if (strcmp(arg, "default") == 0) return child_default_loop();
  if (strcmp(arg, "chain") == 0) return child_chain();
  if (strcmp(arg, "wild") == 0) return child_wild();
  if (strcmp(arg, "recover") == 0) return child_recover();
  if (strcmp(arg, "pool") == 0) return child_pool();
  if (strcmp(arg, "calls") == 0) return child_calls();
  if (strcmp(arg, "aligned") == 0) return child_aligned();
  return 2;
}

/* ---------------------------------------------------------------------------
 * The parent's side
 * ------------------------------------------------------------------------- */
/* The lines of the report's stack titled `title`: the text up to the next
 * line that does not start with spaces. */
static bool stack_names(const char *err, const char *title, const char *name) {
  const char *s = strstr(err, title);
  if (s == NULL) return false;
  s = strchr(s, '\n');
  while (s != NULL && strncmp(s + 1, "    #", 5) == 0) {
    const char *end = strchr(s + 1, '\n');
    size_t len = end != NULL ? (size_t)(end - s) : strlen(s);
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)len, s);
    if (strstr(line, name) != NULL) return true;
    s = end;
  }
  return false;
}

/* One bug in a child, its stacks taken by frame pointers or (dwarf) with
 * backtrace(). */
static void expect_bug_in(const char *argv0, const char *kind, size_t size,
                          const char *where, const char *mode, bool dwarf) {
  char arg[96], mode_setting[32];
  snprintf(arg, sizeof arg, "bug:%s:%zu:%s", kind, size, where);
  snprintf(mode_setting, sizeof mode_setting, "HZ_GUARD_MODE=%s", mode);
  const char *settings[] = {"HZ_GUARD_SAMPLE=1", mode_setting,
                            dwarf ? "HZ_GUARD_DWARF=1" : NULL, NULL};
  child_result_t r = child_run(argv0, arg, settings);
  const char *err = r.err != NULL ? r.err : "";
  bool uaf = strncmp(kind, "uaf", 3) == 0;
  bool over = strncmp(kind, "overflow", 8) == 0;
  bool write = strstr(kind, "write") != NULL;
  const char *what = uaf    ? "use after free"
                     : over ? "heap buffer overflow"
                            : "heap buffer underflow";
  long offset = uaf ? (long)(size / 2) : over ? (long)size : -1;
  char head[160];
  snprintf(head, sizeof head, "guarded block: %s (%s", what,
           write ? "write" : "read");
  char tail[96];
  snprintf(tail, sizeof tail, "offset %ld of a %zu-byte block", offset, size);
  EXPECT(strstr(err, head) != NULL, "%s mode %s: no '%s' in:\n%s", arg, mode,
         head, err);
  EXPECT(strstr(err, tail) != NULL, "%s mode %s: no '%s' in:\n%s", arg, mode,
         tail, err);
  EXPECT(stack_names(err, "allocated by thread", "guard_alloc_site"),
         "%s: allocation stack lacks guard_alloc_site:\n%s", arg, err);
  if (uaf)
    EXPECT(stack_names(err, "freed by thread", "guard_free_site"),
           "%s: free stack lacks guard_free_site:\n%s", arg, err);
  /* Found by the fault (the access's stack) or by the canary at free. */
  bool at_fault = strstr(err, "found when the block was freed") == NULL;
  if (at_fault)
    EXPECT(stack_names(err, "found by this thread at", "guard_bug_site"),
           "%s: access stack lacks guard_bug_site:\n%s", arg, err);
  EXPECT(r.signal == (at_fault ? SIGSEGV : SIGABRT),
         "%s mode %s: ended with signal %d, exit %d", arg, mode, r.signal,
         r.status);
  free(r.err);
}

static void expect_bug(const char *argv0, const char *kind, size_t size,
                       const char *where, const char *mode) {
  expect_bug_in(argv0, kind, size, where, mode, false);
}

static const size_t sizes[] = {1,   7,    8,    13,   16,  17,
                               100, 1000, 4000, 4095, 4096};
#define SIZES (sizeof sizes / sizeof sizes[0])

static void test_bugs(const char *argv0) {
  const char *wheres[] = {"main", "thread"};
  for (int w = 0; w < 2; w++)
    for (size_t i = 0; i < SIZES; i++) {
      size_t s = sizes[i];
      /* Against the upper guard: overflows at once (writes into the
       * alignment's slack by the canary); reads where the block ends at
       * the page's end. */
      expect_bug(argv0, "overflow-write", s, wheres[w], "1");
      if (s % 16 == 0 || s == 8)
        expect_bug(argv0, "overflow-read", s, wheres[w], "1");
      /* Against the lower guard: underflows at once. */
      expect_bug(argv0, "underflow-write", s, wheres[w], "2");
      expect_bug(argv0, "underflow-read", s, wheres[w], "2");
      /* Either side: writes on the other side by the canary. */
      expect_bug(argv0, "overflow-write", s, wheres[w], "2");
      expect_bug(argv0, "underflow-write", s, wheres[w], "1");
      expect_bug(argv0, "overflow-write", s, wheres[w], "0");
      expect_bug(argv0, "uaf-read", s, wheres[w], "0");
      expect_bug(argv0, "uaf-write", s, wheres[w], "0");
    }
  /* The stacks from the call frame information (HZ_GUARD_DWARF). */
  for (int w = 0; w < 2; w++) {
    expect_bug_in(argv0, "overflow-read", 64, wheres[w], "1", true);
    expect_bug_in(argv0, "overflow-write", 13, wheres[w], "1", true);
    expect_bug_in(argv0, "underflow-write", 100, wheres[w], "2", true);
    expect_bug_in(argv0, "uaf-write", 4096, wheres[w], "0", true);
  }
}

static void test_default_rate(const char *argv0) {
  child_result_t r = child_run(argv0, "default", (const char *const[]){NULL});
  const char *err = r.err != NULL ? r.err : "";
  EXPECT(strstr(err, "guarded block: heap buffer overflow (write") != NULL &&
             strstr(err, "offset 24 of a 24-byte block") != NULL,
         "the default rate found no overflow in 1M mallocs:\n%s", err);
  EXPECT(r.signal == SIGSEGV || r.signal == SIGABRT, "default: signal %d",
         r.signal);
  free(r.err);
}

static void test_chain(const char *argv0) {
  const char *sample[] = {"HZ_GUARD_SAMPLE=1", "HZ_GUARD_MODE=1", NULL};
  child_result_t r = child_run(argv0, "chain", sample);
  const char *err = r.err != NULL ? r.err : "";
  const char *first = strstr(err, "own handler calls 1\n");
  const char *report = strstr(err, "guarded block: heap buffer overflow (read");
  EXPECT(first != NULL && (report == NULL || report > first),
         "the program's handler missed its own fault:\n%s", err);
  EXPECT(report != NULL && strstr(err, "own handler calls 2\n") > report,
         "a guarded fault was not reported, then passed on:\n%s", err);
  EXPECT(r.status == 0, "chain: exit %d signal %d", r.status, r.signal);
  free(r.err);

  r = child_run(argv0, "wild", sample);
  err = r.err != NULL ? r.err : "";
  EXPECT(r.signal == SIGSEGV && strstr(err, "guarded block") == NULL,
         "a fault not ours: signal %d, stderr:\n%s", r.signal, err);
  free(r.err);
}

static void test_recover(const char *argv0) {
  const char *settings[] = {"HZ_GUARD_SAMPLE=1", "HZ_GUARD_MODE=1",
                            "HZ_GUARD_RECOVER=1", "HZ_SHOW_STATS=1", NULL};
  child_result_t r = child_run(argv0, "recover", settings);
  const char *err = r.err != NULL ? r.err : "";
  EXPECT(r.status == 0 && strstr(err, "went on") != NULL,
         "recover: exit %d signal %d:\n%s", r.status, r.signal, err);
  EXPECT(count_of(err, "guarded block: heap buffer overflow (read") == 1,
         "recover: one report of the read expected:\n%s", err);
  EXPECT(strstr(err, "1 errors reported") != NULL,
         "recover: the stats count no report:\n%s", err);
  free(r.err);
}

static void test_pool(const char *argv0) {
  const char *settings[] = {"HZ_GUARD_SAMPLE=1", "HZ_GUARD_SLOTS=4",
                            "HZ_GUARD_MODE=1", "HZ_SHOW_STATS=1", NULL};
  child_result_t r = child_run(argv0, "pool", settings);
  const char *err = r.err != NULL ? r.err : "";
  EXPECT(r.status == 0 && strstr(err, "pool order failures 0") != NULL,
         "pool: exit %d:\n%s", r.status, err);
  EXPECT(strstr(err, "guarded        1 malloc in 1 sampled") != NULL &&
             strstr(err, "of 4 slots in use") != NULL,
         "pool: stats line missing:\n%s", err);
  free(r.err);
}

static void test_aligned(const char *argv0) {
  const char *settings[] = {"HZ_GUARD_SAMPLE=1", "HZ_GUARD_MODE=2", NULL};
  child_result_t r = child_run(argv0, "aligned", settings);
  const char *err = r.err != NULL ? r.err : "";
  EXPECT(strstr(err, "guarded block: heap buffer overflow (write") != NULL &&
             strstr(err, "offset 200 of a 200-byte block") != NULL &&
             r.signal == SIGABRT,
         "an aligned guarded block overrun: signal %d:\n%s", r.signal, err);
  free(r.err);
}

static void test_calls(const char *argv0) {
  const char *settings[] = {"HZ_GUARD_SAMPLE=1", "HZ_GUARD_MODE=0", NULL};
  child_result_t r = child_run(argv0, "calls", settings);
  const char *err = r.err != NULL ? r.err : "";
  EXPECT(strstr(err, "calls failures 0") != NULL, "calls:\n%s", err);
  EXPECT(strstr(err, "guarded block: double free") != NULL &&
             stack_names(err, "freed by thread", "guard_free_site") &&
             strstr(err, "after double free") != NULL && r.status == 0,
         "double free of a guarded block: exit %d:\n%s", r.status, err);
  free(r.err);
}

int main(int argc, char **argv) {
  if (argc > 1) return child_main(argv[1]);
  /* The children die of their bugs: no core files. */
  setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});
  test_bugs(argv[0]);
  test_default_rate(argv[0]);
  test_chain(argv[0]);
  test_recover(argv[0]);
  test_pool(argv[0]);
  test_calls(argv[0]);
  test_aligned(argv[0]);
  if (failures == 0) printf("guard_test: ok\n");
  return failures != 0;
}
