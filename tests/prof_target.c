/* The program the profiler test (prof_test.sh) runs with hakozuna preloaded
 * and HZ_PROF=1. Each mode allocates from sites with known names (built
 * with -rdynamic, so dladdr names them) and checks what the profile says
 * of them; it exits non-zero, with a line saying why, when it is wrong.
 *   ratio PATH    two sites allocate live bytes 1:3; the profile written
 *                 to PATH must give each within 10% of the truth
 *   off PATH      (HZ_PROF unset) hz_prof_dump fails with ENOENT
 *   leak          plant_leak() leaks, freed_site() frees all it allocates
 *                 (the test reads the leak report printed at exit)
 *   busy PATH     threads allocate and free each other's blocks while
 *                 the process asks for profiles with SIGUSR2 (handled by
 *                 the profiler) and forks; at the end only kept_site()'s
 *                 blocks are live, and the profile written to PATH must
 *                 say so */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int (*prof_dump)(const char *path);

static void fail(const char *what) {
  printf("FAIL %s\n", what);
  exit(1);
}

/* Keep the compiler from turning a site's call into a jump (the site's
 * frame would vanish from the stack) or dropping the block. */
static void *touched(void *p) {
  if (p == NULL) fail("malloc returned NULL");
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}

/* An allocation site of its own, named in the stacks. */
#define SITE(name)                                                             \
  __attribute__((noinline)) void *name(size_t n) { return touched(malloc(n)); }
SITE(site_one)
SITE(site_three)
SITE(plant_leak)
SITE(freed_site)
SITE(kept_site)
SITE(churn_site)

/* Live bytes the profile at path gives stacks through the function named
 * `site`, and in all. */
static double profile_bytes(const char *path, const char *site, double *total) {
  FILE *f = fopen(path, "r");
  if (f == NULL) fail("cannot open the profile");
  char line[8192];
  double bytes = 0;
  *total = -1;
  if (fgets(line, sizeof line, f) == NULL ||
      sscanf(line, "heap profile: %*u: %lf", total) != 1)
    fail("the profile has no heap profile header");
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long count;
    double live;
    int at = 0;
    if (sscanf(line, " %lu: %lf [ %*u: %*u] @%n", &count, &live, &at) != 2 ||
        at == 0)
      break; /* the memory map follows */
    for (char *tok = strtok(line + at, " \n"); tok; tok = strtok(NULL, " \n")) {
      Dl_info info;
      void *pc = (void *)strtoul(tok, NULL, 16);
      if (dladdr(pc, &info) && info.dli_sname &&
          strcmp(info.dli_sname, site) == 0) {
        bytes += live;
        break;
      }
    }
  }
  fclose(f);
  return bytes;
}

static void expect_near(const char *what, double got, double want) {
  printf("%s: %.3g, truth %.3g (%+.1f%%)\n", what, got, want,
         100.0 * (got - want) / want);
  if (got < want * 0.9 || got > want * 1.1) fail(what);
}

static void dump(const char *path) {
  if (prof_dump == NULL || prof_dump(path) != 0) fail("hz_prof_dump failed");
}

/* 12.8 MB from site_one in 64-byte blocks, 38.4 MB from site_three in
 * 384-byte ones, interleaved, all live; churn between them. */
static int run_ratio(const char *path) {
  enum { ONES = 200000, THREES = 100000 };
  void **ones = touched(calloc(ONES, sizeof *ones));
  void **threes = touched(calloc(THREES, sizeof *threes));
  for (int i = 0; i < ONES; i++) {
    ones[i] = site_one(64);
    if (i % 2 == 0) threes[i / 2] = site_three(384);
    free(churn_site(100 + i % 1000));
  }
  dump(path);
  double total, one = profile_bytes(path, "site_one", &total);
  double three = profile_bytes(path, "site_three", &total);
  expect_near("site_one", one, 64.0 * ONES);
  expect_near("site_three", three, 384.0 * THREES);
  expect_near("site_three / site_one", three / one, 3.0);
  printf("ok   ratio\n");
  return 0;
}

static int run_leak(void) {
  for (int i = 0; i < 4000; i++)
    plant_leak(1000);
  for (int i = 0; i < 4000; i++)
    free(freed_site(1000));
  printf("ok   leak planted\n");
  return 0;
}

static int run_off(const char *path) {
  errno = 0;
  if (prof_dump(path) != -1 || errno != ENOENT)
    fail("hz_prof_dump with the profiler off: expected -1 and ENOENT");
  if (access(path, F_OK) == 0) fail("hz_prof_dump wrote a file while off");
  printf("ok   off\n");
  return 0;
}

/* --- busy: threads, signals, fork ------------------------------------- */
#define THREADS 4
#define ROUNDS  200
#define BATCH   500
static void *volatile handoff[THREADS][BATCH];
static pthread_barrier_t round_start, round_end;

/* Each round, thread t fills its row, and after the barrier frees the row
 * of thread t + 1: every block is freed by another thread. */
static void *busy_thread(void *arg) {
  int t = (int)(long)arg;
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < BATCH; i++)
      handoff[t][i] = churn_site(16 + (size_t)(i * 37 + r) % 3000);
    pthread_barrier_wait(&round_start);
    int from = (t + 1) % THREADS;
    for (int i = 0; i < BATCH; i++)
      free(handoff[from][i]);
    pthread_barrier_wait(&round_end);
  }
  return NULL;
}

static void fork_child_dumps(const char *path) {
  pid_t pid = fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    free(touched(malloc(5000)));
    char name[4096];
    snprintf(name, sizeof name, "%s.child", path);
    _exit(prof_dump(name) == 0 ? 0 : 3);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    fail("the fork child could not write its profile");
}

static int run_busy(const char *path) {
  pthread_barrier_init(&round_start, NULL, THREADS);
  pthread_barrier_init(&round_end, NULL, THREADS);
  pthread_t threads[THREADS];
  for (long t = 0; t < THREADS; t++)
    pthread_create(&threads[t], NULL, busy_thread, (void *)t);
  for (int i = 0; i < 50; i++) {
    kill(getpid(), SIGUSR2);
    if (i % 10 == 0) fork_child_dumps(path);
    usleep(2000);
  }
  for (int t = 0; t < THREADS; t++)
    pthread_join(threads[t], NULL);
  enum { KEPT = 20000 };
  static void *kept[KEPT];
  for (int i = 0; i < KEPT; i++)
    kept[i] = kept_site(1024);
  touched(kept); /* the blocks stay live */
  dump(path);
  double total, in_kept = profile_bytes(path, "kept_site", &total);
  expect_near("kept_site", in_kept, 1024.0 * KEPT);
  /* What else is live: the sampled blocks freed by other threads must be
   * gone from the profile; allow the program's own few. */
  if (total - in_kept > 0.1 * 1024.0 * KEPT) fail("freed blocks still live");
  printf("ok   busy\n");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  *(void **)&prof_dump = dlsym(RTLD_DEFAULT, "hz_prof_dump");
  if (prof_dump == NULL) fail("hz_prof_dump not found (not preloaded?)");
  if (argc == 3 && strcmp(argv[1], "ratio") == 0) return run_ratio(argv[2]);
  if (argc == 2 && strcmp(argv[1], "leak") == 0) return run_leak();
  if (argc == 3 && strcmp(argv[1], "off") == 0) return run_off(argv[2]);
  if (argc == 3 && strcmp(argv[1], "busy") == 0) return run_busy(argv[2]);
  fprintf(stderr, "usage: prof_target ratio|off|busy PATH | leak\n");
  return 2;
}
