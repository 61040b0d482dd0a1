/* Helpers for tests that re-execute themselves (/proc/self/exe) under a
 * chosen environment and look at what the child wrote to stderr: the
 * child inherits the environment (LD_PRELOAD included) minus every HZ_*
 * variable, plus the settings given. */
#ifndef HZ_TEST_CHILD_RUN_H
#define HZ_TEST_CHILD_RUN_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* One line on stderr without stdio buffers or malloc: a child that tests
 * a misuse, or a signal handler, prints while the allocator may be broken
 * or busy. */
static inline void child_say(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static inline void child_say(const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  (void)!write(2, line, (size_t)n);
}

typedef struct {
  char *err;  /* everything the child wrote to stderr, NUL-terminated */
  size_t len; /* its length */
  int status; /* exit code, or -1 (killed, or could not be started) */
  int signal; /* the signal that killed it, else 0 */
} child_result_t;

/* Run /proc/self/exe `arg` with the environment described above; `settings`
 * is a NULL-terminated list of "NAME=value" strings. */
static inline child_result_t child_run(const char *argv0, const char *arg,
                                       const char *const *settings) {
  child_result_t r = {NULL, 0, -1, 0};
  size_t n_env = 0, n_set = 0;
  while (environ[n_env] != NULL)
    n_env++;
  while (settings != NULL && settings[n_set] != NULL)
    n_set++;
  char **envp = calloc(n_env + n_set + 1, sizeof *envp);
  if (envp == NULL) return r;
  size_t k = 0;
  for (size_t i = 0; i < n_env; i++)
    if (strncmp(environ[i], "HZ_", 3) != 0) envp[k++] = environ[i];
  for (size_t i = 0; i < n_set; i++)
    envp[k++] = (char *)settings[i];
  envp[k] = NULL;
  char *argv[] = {(char *)argv0, (char *)arg, NULL};

  int fds[2];
  if (pipe(fds) != 0) {
    free(envp);
    return r;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execve("/proc/self/exe", argv, envp);
    _exit(127);
  }
  close(fds[1]);
  free(envp);
  if (pid < 0) {
    close(fds[0]);
    return r;
  }
  size_t cap = 4096;
  r.err = malloc(cap);
  for (;;) {
    if (r.err == NULL) break;
    if (cap - r.len < 1024) {
      char *grown = realloc(r.err, cap * 2);
      if (grown == NULL) break;
      r.err = grown;
      cap *= 2;
    }
    ssize_t got = read(fds[0], r.err + r.len, cap - r.len - 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    r.len += (size_t)got;
  }
  if (r.err != NULL) r.err[r.len] = 0;
  close(fds[0]);
  int wstatus;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  r.signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
  return r;
}

/* How many times `needle` occurs in `text`. */
static inline int count_of(const char *text, const char *needle) {
  int n = 0;
  size_t len = strlen(needle);
  for (const char *s = text; (s = strstr(s, needle)) != NULL; s += len)
    n++;
  return n;
}

/* The line of `text` that starts with `prefix`, copied into line (at most
 * cap bytes, without the newline); false when there is none. */
static inline bool line_starting(const char *text, const char *prefix,
                                 char *line, size_t cap) {
  size_t plen = strlen(prefix);
  for (const char *s = text; *s != 0;) {
    const char *end = strchr(s, '\n');
    size_t len = end != NULL ? (size_t)(end - s) : strlen(s);
    if (len >= plen && strncmp(s, prefix, plen) == 0) {
      size_t copy = len < cap - 1 ? len : cap - 1;
      memcpy(line, s, copy);
      line[copy] = 0;
      return true;
    }
    if (end == NULL) break;
    s = end + 1;
  }
  return false;
}

#endif
