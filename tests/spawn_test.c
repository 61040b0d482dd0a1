/* spawn_test — fork, vfork and posix_spawn from threads while other threads
 * trade blocks (every free a remote one, so with the per-CPU front end the
 * CPU caches are busy the whole time).
 *
 * TRADERS threads allocate blocks of 16..2048 bytes, write a pattern, and
 * free the blocks the previous trader left (checking its pattern first).
 * Meanwhile SPAWNERS threads each, ROUNDS times: posix_spawn /bin/true;
 * vfork and exec /bin/true (the child calls nothing else); fork, and in the
 * child allocate, check and free blocks on the main thread and a new
 * thread, then _exit. Every child must exit 0 within CHILD_TIMEOUT_S; the
 * traders must never see a spoilt pattern. Exit code 0 when all holds. */
#define _GNU_SOURCE
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum {
  TRADERS = 3,
  SPAWNERS = 3,
  ROUNDS = 20,
  SLOTS = 256,
  CHILD_TIMEOUT_S = 10
};

static _Atomic(unsigned char *) slots[TRADERS][SLOTS];
static atomic_bool stop;
static atomic_int failures;

static void fail(const char *what) {
  atomic_fetch_add(&failures, 1);
  fprintf(stderr, "spawn_test: %s\n", what);
}

static size_t size_of(unsigned char *p) { return 16 + (size_t)p[0] * 8; }

static unsigned char *make_block(unsigned seed) {
  unsigned char tag = (unsigned char)(seed % 254 + 1);
  size_t size = 16 + (size_t)tag * 8;
  unsigned char *p = malloc(size);
  if (p == NULL) return NULL;
  memset(p, tag, size);
  return p;
}

static bool intact(unsigned char *p) {
  size_t size = size_of(p);
  for (size_t i = 1; i < size; i++)
    if (p[i] != p[0]) return false;
  return true;
}

static void *trader(void *arg) {
  int me = (int)(intptr_t)arg;
  unsigned seed = (unsigned)me * 7919u;
  while (!atomic_load(&stop)) {
    for (int s = 0; s < SLOTS; s++) {
      unsigned char *theirs =
          atomic_exchange(&slots[(me + TRADERS - 1) % TRADERS][s], NULL);
      if (theirs != NULL) {
        if (!intact(theirs)) fail("a traded block was spoilt");
        free(theirs);
      }
      unsigned char *old = atomic_exchange(&slots[me][s], make_block(seed++));
      if (old != NULL) free(old);
    }
  }
  return NULL;
}

/* In a fork child: blocks on the main thread and on a new thread. */
static void *child_thread(void *arg) {
  (void)arg;
  for (unsigned i = 0; i < 1000; i++) {
    unsigned char *p = make_block(i);
    if (p == NULL || !intact(p)) return (void *)1;
    free(p);
  }
  return NULL;
}

static int fork_child(void) {
  for (unsigned i = 0; i < 1000; i++) {
    unsigned char *p = make_block(i * 3);
    if (p == NULL || !intact(p)) return 2;
    free(p);
  }
  pthread_t t;
  void *result = (void *)1;
  if (pthread_create(&t, NULL, child_thread, NULL) != 0) return 2;
  pthread_join(t, &result);
  return result == NULL ? 0 : 2;
}

/* Wait for a child: it must exit 0 within CHILD_TIMEOUT_S. */
static void reap(pid_t pid, const char *how) {
  if (pid < 0) {
    fail(how);
    return;
  }
  time_t until = time(NULL) + CHILD_TIMEOUT_S;
  int status = 0;
  pid_t got;
  while ((got = waitpid(pid, &status, WNOHANG)) == 0 && time(NULL) < until)
    usleep(1000);
  if (got == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail(how);
  } else if (got != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail(how);
  }
}

static void *spawner(void *arg) {
  (void)arg;
  char *const argv[] = {"/bin/true", NULL};
  for (int r = 0; r < ROUNDS; r++) {
    pid_t pid;
    if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0)
      pid = -1;
    reap(pid, "posix_spawn child failed");
    pid = vfork();
    if (pid == 0) {
      execve("/bin/true", argv, environ);
      _exit(127);
    }
    reap(pid, "vfork child failed");
    pid = fork();
    if (pid == 0) _exit(fork_child());
    reap(pid, "fork child failed or hung");
  }
  return NULL;
}

int main(void) {
  pthread_t traders[TRADERS], spawners[SPAWNERS];
  for (int i = 0; i < TRADERS; i++)
    pthread_create(&traders[i], NULL, trader, (void *)(intptr_t)i);
  for (int i = 0; i < SPAWNERS; i++)
    pthread_create(&spawners[i], NULL, spawner, NULL);
  for (int i = 0; i < SPAWNERS; i++)
    pthread_join(spawners[i], NULL);
  atomic_store(&stop, true);
  for (int i = 0; i < TRADERS; i++)
    pthread_join(traders[i], NULL);
  for (int i = 0; i < TRADERS; i++)
    for (int s = 0; s < SLOTS; s++) {
      unsigned char *p = atomic_exchange(&slots[i][s], NULL);
      if (p != NULL && !intact(p)) fail("a block left was spoilt");
      free(p);
    }
  int n = atomic_load(&failures);
  fprintf(stderr, "spawn_test: %d failures\n", n);
  return n == 0 ? 0 : 1;
}
