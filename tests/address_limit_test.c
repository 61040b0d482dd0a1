/* address_limit_test — under an address-space limit (ulimit -v), memory
 * the program has freed must serve its next requests, whatever the
 * allocator still caches.
 *
 * Each scenario runs in this program started again with RLIMIT_AS at
 * LIMIT_MB, set before it starts as `ulimit -v` does, so the library's
 * arena is sized to the limit and small blocks past it take address space
 * of their own (a limit set later leaves the arena reserved before it
 * outside the limit, and the small blocks never reach it). The room is
 * the limit less the address space mapped when the scenario starts:
 *   - small_then_big: small blocks until the limit, all freed; then 3 MiB
 *     callocs, 2 MiB posix_memaligns and 2 MiB mallocs must fill half the
 *     room again;
 *   - large_then_bigger: 300 KB blocks until the limit, all freed; a
 *     50 MiB malloc must succeed, and after malloc_trim(0) the address
 *     space must be back near where it started;
 *   - threads_cross_free: 4 threads allocate small blocks until the limit
 *     and free each other's, then exit; a 10 MiB malloc must succeed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define MiB        ((size_t)1 << 20)
#define LIMIT_MB   512
#define MAX_BLOCKS (1 << 20)

static void *(*volatile xmalloc)(size_t) = malloc;

/* Fail from inside a child: one line, exit 1. */
#define child_fail(...)                                                        \
  do {                                                                         \
    fprintf(stderr, "address_limit: FAIL: " __VA_ARGS__);                      \
    fputc('\n', stderr);                                                       \
    _exit(1);                                                                  \
  } while (0)

static size_t address_space(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f == NULL || fscanf(f, "%lu", &pages) != 1) child_fail("statm");
  fclose(f);
  return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t limit_base; /* address space mapped at the scenario's start */
static size_t room;       /* the limit less that */

static void **blocks;

static bool fill_met_limit; /* the last fill ended on a failed malloc */

/* Allocate blocks of `size` (touched) until malloc fails or `max` bytes;
 * returns how many. */
static size_t fill(size_t size, size_t max) {
  size_t n = 0;
  fill_met_limit = false;
  for (; n < MAX_BLOCKS && n * size < max; n++) {
    blocks[n] = xmalloc(size);
    fill_met_limit = blocks[n] == NULL;
    if (fill_met_limit) break;
    memset(blocks[n], 0x33, size < 64 ? size : 64);
  }
  return n;
}

static void free_all(size_t n) {
  for (size_t i = 0; i < n; i++)
    free(blocks[i]);
}

/* --- small blocks, then big ones ----------------------------------------- */
static size_t count_big(int kind) {
  size_t n = 0;
  for (; n < MAX_BLOCKS; n++) {
    void *p = NULL;
    if (kind == 0) p = calloc(1, 3 * MiB);
    if (kind == 1 && posix_memalign(&p, 4096, 2 * MiB) != 0) p = NULL;
    if (kind == 2) p = xmalloc(2 * MiB);
    if (p == NULL) break;
    memset(p, 1, 4096);
    blocks[n] = p;
  }
  free_all(n);
  return n;
}

static void small_then_big(void) {
  static const char *const names[] = {"calloc(3 MiB)", "posix_memalign(2 MiB)",
                                      "malloc(2 MiB)"};
  static const size_t sizes[] = {3 * MiB, 2 * MiB, 2 * MiB};
  for (int kind = 0; kind < 3; kind++) {
    size_t n = fill(1024 + (size_t)kind * 512, LIMIT_MB * MiB);
    if (n < 1000) child_fail("only %zu small blocks before the limit", n);
    if (!fill_met_limit)
      child_fail("%zu small blocks never met the limit", n);
    free_all(n);
    size_t got = count_big(kind);
    size_t want = room / 2 / sizes[kind];
    if (got < want)
      child_fail("%zu %s after freeing %zu small blocks, expected %zu or more",
                 got, names[kind], n, want);
  }
}

/* --- 300 KB blocks, then one of 50 MiB ----------------------------------- */
static void large_then_bigger(void) {
  size_t n = fill(300000, LIMIT_MB * MiB);
  if (n < 100) child_fail("only %zu blocks of 300 KB before the limit", n);
  free_all(n);
  void *p = xmalloc(50 * MiB);
  if (p == NULL) child_fail("malloc(50 MiB) after freeing %zu of 300 KB", n);
  free(p);
  n = fill(300000, LIMIT_MB * MiB);
  free_all(n);
  malloc_trim(0);
  size_t now = address_space();
  if (now > limit_base + 64 * MiB)
    child_fail("%zu MiB of address space still mapped after malloc_trim(0)",
               (now - limit_base) / MiB);
}

/* --- threads that free each other's blocks -------------------------------- */
enum { THREADS = 4 };
static void **thread_blocks[THREADS];
static size_t thread_count[THREADS];
static pthread_barrier_t barrier, started;

static void *thread_main(void *arg) {
  int id = (int)(intptr_t)arg;
  void **mine = thread_blocks[id];
  size_t n = 0;
  /* Every thread exists (its stack mapped) before any fills the limit. */
  pthread_barrier_wait(&started);
  for (; n < MAX_BLOCKS / THREADS; n++) {
    mine[n] = xmalloc(512 + (size_t)(n % 7) * 1000);
    if (mine[n] == NULL) break;
  }
  thread_count[id] = n;
  pthread_barrier_wait(&barrier);
  int next = (id + 1) % THREADS; /* free the next thread's blocks */
  for (size_t i = 0; i < thread_count[next]; i++)
    free(thread_blocks[next][i]);
  return NULL;
}

static void threads_cross_free(void) {
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    thread_blocks[i] = blocks + (size_t)i * (MAX_BLOCKS / THREADS);
  pthread_barrier_init(&barrier, NULL, THREADS);
  pthread_barrier_init(&started, NULL, THREADS + 1);
  for (int i = 0; i < THREADS; i++)
    if (pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)i) != 0)
      child_fail("pthread_create");
  pthread_barrier_wait(&started);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  size_t total = 0;
  for (int i = 0; i < THREADS; i++)
    total += thread_count[i];
  if (total == MAX_BLOCKS)
    child_fail("%zu small blocks of 4 threads never met the limit", total);
  void *p = xmalloc(10 * MiB);
  if (p == NULL) child_fail("malloc(10 MiB) after the threads freed it all");
  free(p);
}

/* --- the limited program ------------------------------------------------- */
static const struct {
  const char *name;
  void (*scenario)(void);
} scenarios[] = {{"small_then_big", small_then_big},
                 {"large_then_bigger", large_then_bigger},
                 {"threads_cross_free", threads_cross_free}};
enum { SCENARIOS = sizeof scenarios / sizeof scenarios[0] };

static int run_limited(const char *name) {
  alarm(300); /* a hang guard: an emulated arm64 machine took over 60 s */
  struct rlimit r;
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur != LIMIT_MB * MiB)
    child_fail("%s: started without the limit", name);
  /* Allocated before the room is measured, outside the scenario's use. */
  blocks = calloc(MAX_BLOCKS, sizeof *blocks);
  if (blocks == NULL) child_fail("%s: no room for the block table", name);
  limit_base = address_space();
  if (limit_base + 128 * MiB > r.rlim_cur)
    child_fail("%s: %zu MiB mapped at the start, of a limit of %d MiB", name,
               limit_base / MiB, LIMIT_MB);
  room = r.rlim_cur - limit_base;
  for (int i = 0; i < SCENARIOS; i++)
    if (strcmp(name, scenarios[i].name) == 0) {
      scenarios[i].scenario();
      return 0;
    }
  child_fail("no scenario %s", name);
}

/* --- the parent ----------------------------------------------------------- */
static void run(const char *name) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit r = {LIMIT_MB * MiB, LIMIT_MB * MiB};
    if (setrlimit(RLIMIT_AS, &r) != 0) child_fail("setrlimit");
    execl("/proc/self/exe", "address_limit_test", name, (char *)NULL);
    child_fail("exec: %s", strerror(errno));
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "%s: child ended with status 0x%x", name, status);
}

int main(int argc, char **argv) {
  if (argc == 2) return run_limited(argv[1]);
  for (int i = 0; i < SCENARIOS; i++)
    run(scenarios[i].name);
  return check_report("address_limit_test");
}
