/* The release library never writes to a pointer it did not allocate: a
 * free/realloc/malloc_usable_size of a foreign pointer is reported with one
 * line on stderr and ignored, and every other block survives intact. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

/* Run fn with stderr redirected to a temporary file; return its text. */
static char *capture_stderr(void (*fn)(void *), void *arg) {
  static char text[4096];
  FILE *tmp = tmpfile();
  int saved = dup(2);
  fflush(stderr);
  dup2(fileno(tmp), 2);
  fn(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t n = fread(text, 1, sizeof text - 1, tmp);
  text[n] = 0;
  fclose(tmp);
  return text;
}

static void do_free(void *p) { free(p); }
static void do_realloc(void *p) { (void)!realloc(p, 100); }
static void do_usable(void *p) { (void)malloc_usable_size(p); }

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++)
    n += *s == '\n';
  return n;
}

static void expect_report(void (*fn)(void *), void *p, const char *what) {
  char *text = capture_stderr(fn, p);
  char address[32];
  snprintf(address, sizeof address, "%p", p);
  CHECK_MSG(count_lines(text) == 1, "%s: expected one line, got \"%s\"", what,
            text);
  CHECK_MSG(strncmp(text, "hakozuna: error: ", 17) == 0, "%s: got \"%s\"", what,
            text);
  CHECK_MSG(strstr(text, address) != NULL, "%s: no address in \"%s\"", what,
            text);
}

int main(void) {
  enum { N = 64 };
  unsigned char *live[N];
  for (int i = 0; i < N; i++) {
    live[i] = malloc(24 + i * 40);
    memset(live[i], i, 24 + i * 40);
  }
  int on_stack = 42;
  static int in_data = 7;
  unsigned char *mapped =
      mmap(NULL, 1 << 16, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void *foreign[] = {(void *)1, &on_stack,     &in_data,
                     mapped,    mapped + 4096, (void *)((uintptr_t)1 << 50)};
  for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++) {
    expect_report(do_free, foreign[i], "free");
    expect_report(do_realloc, foreign[i], "realloc");
    expect_report(do_usable, foreign[i], "malloc_usable_size");
  }
  CHECK(on_stack == 42 && in_data == 7); /* never written */
  CHECK(mapped[0] == 0 && mapped[4096] == 0);
  /* A block of a page that holds no live block is not allocated either. */
  void *gone = malloc(300000);
  volatile uintptr_t gone_address =
      (uintptr_t)gone; /* hide the reuse from gcc */
  free(gone);
  gone = (void *)gone_address;
  expect_report(do_free, gone, "free of an unmapped large block");
  /* Nothing else was lost. */
  for (int i = 0; i < N; i++) {
    int intact = 1;
    for (int k = 0; k < 24 + i * 40; k++)
      intact &= live[i][k] == (unsigned char)i;
    CHECK_MSG(intact, "block %d corrupted", i);
    free(live[i]);
  }
  munmap(mapped, 1 << 16);
  return check_report("invalid_free");
}
