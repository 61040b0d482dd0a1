/* last_thread_test — a process ends when its last thread ends, whatever
 * the allocator's own threads are doing.
 *
 * Each scenario runs in a process of its own, which the test waits for
 * with a timeout; one still running then is killed and reported as hung:
 *   - main_exits: the main thread starts threads that allocate (so the
 *     allocator has started its purge thread), then calls pthread_exit;
 *     the threads finish, and with them the process;
 *   - fork_worker_returns / fork_worker_exits: a worker thread forks
 *     while others run; the child's only thread (the worker's copy)
 *     allocates, starts and joins a thread of its own, and then returns
 *     from its start routine or calls pthread_exit. The child must end
 *     with status 0, as it does under glibc (CPython's
 *     test_threading.test_3_join_in_forked_from_thread does this).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "test_alloc.h"

#define TIMEOUT_MS 5000

/* Allocate and free a little, so the calling thread has a heap. */
static void *churn(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) {
    void *p = t_malloc(16 + (size_t)(i % 50) * 40);
    if (p == NULL) _exit(3);
    memset(p, i, 16);
    t_free(p);
  }
  return NULL;
}

static void start_churners(pthread_t *th, int n) {
  for (int i = 0; i < n; i++)
    if (pthread_create(&th[i], NULL, churn, NULL) != 0) _exit(3);
}

/* --- scenario: the main thread calls pthread_exit ------------------------ */
static void main_exits(void) {
  pthread_t th[3];
  start_churners(th, 3);
  pthread_exit(NULL);
}

/* --- scenario: a fork from a worker thread ------------------------------- */
static bool worker_calls_exit;

static void *forking_worker(void *arg) {
  (void)arg;
  churn(NULL);
  pid_t pid = fork();
  if (pid < 0) _exit(3);
  if (pid > 0) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    /* The child's status becomes this process's. */
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 4);
  }
  /* The child: this is its only thread. */
  pthread_t th[2];
  start_churners(th, 2);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  churn(NULL);
  if (worker_calls_exit) pthread_exit(NULL);
  return NULL;
}

static void fork_worker(bool calls_exit) {
  worker_calls_exit = calls_exit;
  pthread_t others[2], worker;
  start_churners(others, 2);
  if (pthread_create(&worker, NULL, forking_worker, NULL) != 0) _exit(3);
  pthread_join(worker, NULL); /* never returns: the worker _exits */
  _exit(5);
}

static void fork_worker_returns(void) { fork_worker(false); }
static void fork_worker_exits(void) { fork_worker(true); }

/* --- the parent ----------------------------------------------------------- */
/* The waitpid status, or -1 if pid ran past the timeout (then killed). */
static int wait_for(pid_t pid) {
  struct timespec nap = {0, 1000000};
  for (int waited = 0; waited < TIMEOUT_MS; waited++) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    nanosleep(&nap, NULL);
  }
  kill(pid, SIGKILL);
  /* The killed process's children (a hung fork child) go too. */
  kill(-pid, SIGKILL);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return -1;
}

static void run(const char *name, void (*scenario)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(2);
  }
  if (pid == 0) {
    setpgid(0, 0);
    scenario();
    _exit(6);
  }
  setpgid(pid, pid);
  int status = wait_for(pid);
  CHECK_MSG(status != -1, "%s: still running after %d ms (hung)", name,
            TIMEOUT_MS);
  if (status == -1) return;
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "%s: ended with status 0x%x, expected a normal exit with 0", name,
            status);
}

int main(void) {
  for (int round = 0; round < 5; round++) {
    run("main_exits", main_exits);
    run("fork_worker_returns", fork_worker_returns);
    run("fork_worker_exits", fork_worker_exits);
  }
  return check_report("last_thread_test");
}
