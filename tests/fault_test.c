/* fault: every mmap, mremap and madvise the allocator makes may fail.
 *
 * Linked against the fault-injection build of the hz_ API (os.h). A
 * workload walks every path that asks the kernel for memory: small,
 * medium and large blocks, calloc of fresh and of reused memory, a block
 * grown by realloc from 16 B to 16 MiB, a thread started and ended (its
 * blocks freed by the main thread, and main's by it), fork, and a full
 * collection that gives memory back. Every allocation either succeeds or
 * returns NULL with errno ENOMEM; every block that was handed out keeps
 * its bytes to the end; nothing crashes.
 *
 * A first run counts the calls (N). Then each n in 1..N runs the workload
 * in a child of its own with the n-th call failing, and with every call
 * from the n-th on failing (memory exhausted for good). The test fails if
 * a child dies or reports a problem, if no run met a failed allocation
 * (the injection reached nothing), or if N is implausibly small. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hakozuna.h"
#define HZ_FAULT_INJECTION /* the build linked in has it */
#include "os.h"

/* ---------------------------------------------------------------------------
 * The workload (runs in a child; any problem exits 1 with one line)
 * ------------------------------------------------------------------------- */
static int nulls; /* allocations that failed, as they may */

static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fault: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  _exit(1);
}

/* A NULL is fine only with ENOMEM. */
static bool got(void *p, size_t size, const char *what) {
  if (p != NULL) return true;
  if (errno != ENOMEM)
    problem("%s(%zu) returned NULL with errno %d, not ENOMEM", what, size,
            errno);
  nulls++;
  return false;
}

static unsigned char pattern(size_t tag, size_t k) {
  return (unsigned char)(tag * 29 + k * 13 + (k >> 9));
}

typedef struct {
  unsigned char *p;
  size_t size, tag;
} held_t;

enum { HELD_MAX = 4096 };
static held_t held[HELD_MAX];
static size_t held_count;

/* Keep a block; only its first and last 4 KiB get the pattern, so large
 * blocks stay cheap. */
static void hold(unsigned char *p, size_t size) {
  if (held_count == HELD_MAX) problem("too many blocks held");
  held_t *h = &held[held_count];
  *h = (held_t){p, size, held_count};
  held_count++;
  for (size_t k = 0; k < size; k++) {
    if (k == 4096 && size > 8192) k = size - 4096;
    p[k] = pattern(h->tag, k);
  }
}

static void verify(const held_t *h) {
  for (size_t k = 0; k < h->size; k++) {
    if (k == 4096 && h->size > 8192) k = h->size - 4096;
    if (h->p[k] != pattern(h->tag, k))
      problem("block %p of %zu bytes changed at byte %zu", (void *)h->p,
              h->size, k);
  }
}

static void alloc_some(size_t count, size_t min, size_t step) {
  for (size_t i = 0; i < count; i++) {
    size_t size = min + (i * step) % (min * 8 + 1);
    unsigned char *p = hz_malloc(size);
    if (got(p, size, "malloc")) hold(p, size);
  }
}

static void calloc_some(size_t size) {
  unsigned char *p = hz_calloc(1, size);
  if (!got(p, size, "calloc")) return;
  for (size_t k = 0; k < size; k++)
    if (p[k] != 0) problem("calloc(%zu): byte %zu is not zero", size, k);
  hold(p, size);
}

/* A large block freed dirty, then taken again by calloc: the reused
 * mapping must read as zeros whether or not its purge succeeded. */
static void large_reuse(void) {
  size_t size = (size_t)3 << 20;
  unsigned char *p = hz_malloc(size);
  if (!got(p, size, "malloc")) return;
  memset(p, 0xFF, size);
  hz_free(p);
  calloc_some(size);
}

/* Double a block from 16 B to 16 MiB; a failed step keeps the block. */
static void realloc_grow(void) {
  size_t size = 16;
  unsigned char *p = hz_malloc(size);
  if (!got(p, size, "malloc")) return;
  memset(p, 0x6B, size);
  while (size < ((size_t)16 << 20)) {
    unsigned char *q = hz_realloc(p, size * 2);
    if (!got(q, size * 2, "realloc")) break;
    for (size_t k = 0; k < size; k += 511)
      if (q[k] != 0x6B) problem("realloc to %zu lost byte %zu", size * 2, k);
    memset(q + size, 0x6B, size);
    p = q;
    size *= 2;
  }
  for (size_t k = 0; k < size; k += 4093)
    if (p[k] != 0x6B) problem("grown block of %zu lost byte %zu", size, k);
  hz_free(p);
}

/* A thread allocates, frees half of main's blocks, and leaves its own. */
static held_t thread_blocks[64];

static void *thread_body(void *arg) {
  (void)arg;
  for (size_t i = 0; i < 64; i++) {
    size_t size = 24 + i * 40;
    thread_blocks[i].p = hz_malloc(size);
    thread_blocks[i].size = size;
    if (got(thread_blocks[i].p, size, "malloc in a thread"))
      memset(thread_blocks[i].p, 0x3D, size);
  }
  for (size_t i = 0; i < held_count; i += 2) {
    verify(&held[i]);
    hz_free(held[i].p);
    held[i] = held[--held_count];
  }
  return NULL;
}

static void thread_round(void) {
  pthread_t t;
  int rc = pthread_create(&t, NULL, thread_body, NULL);
  if (rc != 0) return; /* glibc's own stack mmap failed: not ours */
  pthread_join(t, NULL);
  for (size_t i = 0; i < 64; i++) {
    if (thread_blocks[i].p == NULL) continue;
    for (size_t k = 0; k < thread_blocks[i].size; k++)
      if (thread_blocks[i].p[k] != 0x3D)
        problem("a thread's block lost byte %zu", k);
    hz_free(thread_blocks[i].p);
  }
}

static void fork_round(void) {
  pid_t pid = fork();
  if (pid < 0) return;
  if (pid == 0) {
    alloc_some(50, 32, 48);
    for (size_t i = 0; i < held_count; i++)
      verify(&held[i]);
    _exit(0);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    problem("the fork child failed (status 0x%x)", status);
}

static void free_all(void) {
  for (size_t i = 0; i < held_count; i++) {
    verify(&held[i]);
    hz_free(held[i].p);
  }
  held_count = 0;
}

static void workload(void) {
  alloc_some(1500, 16, 24);               /* small */
  alloc_some(60, 4096, 1500);             /* medium and big pages */
  alloc_some(6, (size_t)1 << 20, 700000); /* large */
  calloc_some(300);
  calloc_some((size_t)3 << 20);
  large_reuse();
  realloc_grow();
  thread_round();
  fork_round();
  free_all();
  hz_collect(true); /* purge: madvise */
  alloc_some(800, 16, 56);                /* reuse what was given back */
  calloc_some(100000);
  calloc_some((size_t)2 << 20);
  free_all();
  hz_collect(true);
}

/* ---------------------------------------------------------------------------
 * The sweep
 * ------------------------------------------------------------------------- */
/* Run the workload in a child with the nth call failing; returns the
 * child's count of failed allocations, or -1 after reporting a problem. */
static int run_child(unsigned long nth, bool from_then_on,
                     unsigned long *calls) {
  int fds[2];
  if (pipe(fds) != 0) return perror("pipe"), -1;
  pid_t pid = fork();
  if (pid < 0) return perror("fork"), -1;
  if (pid == 0) {
    close(fds[0]);
    alarm(60);
    hz_os_fault_inject(nth, from_then_on);
    workload();
    unsigned long result[2] = {(unsigned long)nulls, hz_os_fault_calls()};
    if (write(fds[1], result, sizeof result) != sizeof result) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  unsigned long result[2] = {0, 0};
  ssize_t n = read(fds[0], result, sizeof result);
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n != sizeof result) {
    fprintf(stderr, "fault: failing call %lu%s: child %s %d\n", nth,
            from_then_on ? " and every later one" : "",
            WIFSIGNALED(status) ? "killed by signal" : "exited with",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return -1;
  }
  if (calls != NULL) *calls = result[1];
  return (int)result[0];
}

/* One sweep under the options in the environment; returns failures. */
static int sweep(const char *label) {
  unsigned long calls = 0;
  if (run_child(0, false, &calls) != 0) {
    fprintf(stderr, "fault: %s: the workload fails with no fault injected\n",
            label);
    return 1;
  }
  printf("fault: %s: the workload makes %lu mmap/mremap/madvise calls\n",
         label, calls);
  if (calls < 20) {
    fprintf(stderr, "fault: too few calls counted: injection not wired\n");
    return 1;
  }
  int failures = 0, runs_with_nulls = 0, sticky_with_nulls = 0;
  for (unsigned long n = 1; n <= calls; n++)
    for (int sticky = 0; sticky < 2; sticky++) {
      int nulls_seen = run_child(n, sticky, NULL);
      if (nulls_seen < 0) failures++;
      if (nulls_seen > 0) runs_with_nulls++;
      if (nulls_seen > 0 && sticky) sticky_with_nulls++;
    }
  printf("fault: %s: %lu x 2 runs, %d failed; %d met a NULL with ENOMEM (%d "
         "of the %lu with every call failing from n on)\n",
         label, calls, failures, runs_with_nulls, sticky_with_nulls, calls);
  if (sticky_with_nulls == 0) {
    fprintf(stderr, "fault: %s: no run saw an allocation fail\n", label);
    failures++;
  }
  return failures;
}

/* CTest runs this twice: with the default options and with
 * HZ_PURGE_DELAY_MS=0 (freed memory given back at once, so reuse depends
 * on madvise having worked). */
int main(void) {
  const char *delay = getenv("HZ_PURGE_DELAY_MS");
  char label[64];
  snprintf(label, sizeof label, "HZ_PURGE_DELAY_MS=%s",
           delay != NULL ? delay : "(default)");
  return sweep(label) == 0 ? 0 : 1;
}
