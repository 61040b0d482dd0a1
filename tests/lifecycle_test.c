/* Thread and process lifecycle corners: a thread whose first allocator call
 * is free; allocation inside pthread key destructors that run after the
 * allocator's own (forcing the thread to take a heap again while exiting);
 * allocation in atexit handlers and in ELF destructors; many threads at
 * once. Everything allocated is verified before it is freed. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "test_alloc.h"

#define ROUNDS       200
#define MANY_THREADS 1000

static pthread_key_t late_key;
static _Atomic int destructor_allocs;

static char *filled(size_t size, int seed) {
  char *p = t_malloc(size);
  if (p != NULL) memset(p, seed, size);
  return p;
}

static int verify_and_free(char *p, size_t size, int seed) {
  int ok = p != NULL;
  for (size_t i = 0; ok && i < size; i++)
    ok = p[i] == (char)seed;
  t_free(p);
  return ok;
}

/* Runs after the allocator's own key destructor (keys run in creation
 * order and this key is made after the first allocation). */
static void late_destructor(void *value) {
  uintptr_t round = (uintptr_t)value;
  char *p = filled(100 + round % 3000, 0x33);
  char *q = filled(300000, 0x44); /* large block too */
  if (verify_and_free(p, 100 + round % 3000, 0x33) &&
      verify_and_free(q, 300000, 0x44))
    atomic_fetch_add(&destructor_allocs, 1);
  if (round % 2 == 0) /* ask for one more destructor round */
    pthread_setspecific(late_key, (void *)(round + 1));
}

static void *first_call_free(void *arg) {
  t_free(arg); /* this thread has not allocated anything yet */
  char *p = filled(64, 0x11);
  int ok = verify_and_free(p, 64, 0x11);
  return (void *)(uintptr_t)ok;
}

static void *exiting_allocator(void *arg) {
  char *p = filled(48, 0x22);
  pthread_setspecific(late_key, arg);
  return (void *)(uintptr_t)verify_and_free(p, 48, 0x22);
}

static pthread_barrier_t many_barrier; /* all alive at once */
static void *many_worker(void *arg) {
  char *p = filled(32 + (uintptr_t)arg % 512, 0x55);
  pthread_barrier_wait(&many_barrier);
  return (void *)(uintptr_t)verify_and_free(p, 32 + (uintptr_t)arg % 512, 0x55);
}

/* Last-round destructor: glibc calls key destructors at most
 * PTHREAD_DESTRUCTOR_ITERATIONS (4) times; allocating in the last round
 * must not leave a heap bound to the dead thread (RSS would grow with
 * every thread). */
static pthread_key_t last_round_key;
static __thread int last_rounds;
static void last_round_destructor(void *value) {
  t_free(value);
  char *p = filled(2000, 0x21);
  if (++last_rounds < 4)
    pthread_setspecific(last_round_key, p);
  else
    t_free(p);
}

static void *last_round_thread(void *arg) {
  (void)arg;
  pthread_setspecific(last_round_key, filled(64, 0x23));
  return (void *)1;
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, rss = 0;
  if (f != NULL) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A fork handler registered before the allocator's own (from a constructor
 * that runs before any allocation) allocates in the child. */
static void early_child_handler(void) {
  char *p = filled(100000, 0x31);
  if (!verify_and_free(p, 100000, 0x31)) _exit(5);
}
__attribute__((constructor(101))) static void register_early_atfork(void) {
  pthread_atfork(NULL, NULL, early_child_handler);
}

static int fork_with_early_handler(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  for (int waited_ms = 0; waited_ms < 10000; waited_ms += 10) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  fprintf(stderr, "lifecycle: child deadlocked in an early fork handler\n");
  return 0;
}

static void *atexit_block;
static void at_exit_handler(void) {
  char *p = filled(5000, 0x66);
  if (!verify_and_free(p, 5000, 0x66) ||
      !verify_and_free(atexit_block, 777, 0x77)) {
    fprintf(stderr, "lifecycle: allocation in atexit handler failed\n");
    _exit(3);
  }
}

__attribute__((destructor)) static void elf_destructor(void) {
  char *p = filled(40000, 0x12);
  if (!verify_and_free(p, 40000, 0x12)) {
    fprintf(stderr, "lifecycle: allocation in ELF destructor failed\n");
    _exit(4);
  }
}

int main(void) {
  t_free(t_malloc(1)); /* the allocator's key exists before late_key */
  CHECK(pthread_key_create(&late_key, late_destructor) == 0);

  for (int i = 0; i < ROUNDS; i++) {
    pthread_t t;
    void *ok = NULL;
    pthread_create(&t, NULL, first_call_free, t_malloc(16 + i));
    pthread_join(t, &ok);
    CHECK(ok == (void *)1);
    pthread_create(&t, NULL, exiting_allocator, (void *)(uintptr_t)(i * 2));
    pthread_join(t, &ok);
    CHECK(ok == (void *)1);
  }
  CHECK_MSG(atomic_load(&destructor_allocs) >= ROUNDS,
            "%d destructor allocations", atomic_load(&destructor_allocs));

  static pthread_t many[MANY_THREADS];
  int created = 0;
  pthread_barrier_init(&many_barrier, NULL, MANY_THREADS + 1);
  for (int i = 0; i < MANY_THREADS; i++) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    if (pthread_create(&many[i], &attr, many_worker, (void *)(uintptr_t)i) == 0)
      created++;
    pthread_attr_destroy(&attr);
  }
  CHECK_MSG(created == MANY_THREADS, "created %d threads", created);
  if (created == MANY_THREADS) pthread_barrier_wait(&many_barrier);
  for (int i = 0; i < created; i++) {
    void *ok = NULL;
    pthread_join(many[i], &ok);
    CHECK(ok == (void *)1);
  }

  CHECK(pthread_key_create(&last_round_key, last_round_destructor) == 0);
  long rss_before = 0;
  for (int i = 0; i < 3000; i++) {
    pthread_t t;
    void *ok = NULL;
    if (i == 500) rss_before = rss_kb();
    pthread_create(&t, NULL, last_round_thread, NULL);
    pthread_join(t, &ok);
    CHECK(ok == (void *)1);
  }
  long growth = rss_kb() - rss_before;
  fprintf(stderr, "lifecycle: RSS growth over 2500 exiting threads: %ld KiB\n",
          growth);
  CHECK_MSG(growth < 16 * 1024, "RSS grew by %ld KiB over 2500 threads",
            growth);

  CHECK(fork_with_early_handler());

  atexit_block = filled(777, 0x77);
  CHECK(atexit(at_exit_handler) == 0);
  return check_report("lifecycle");
}
