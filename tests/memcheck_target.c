/* The program tests/memcheck_test.sh runs under valgrind's memcheck with
 * the debug library preloaded.
 *
 *   memcheck_target clean   blocks of many sizes, realloc, calloc,
 *                           memalign, blocks freed by another thread:
 *                           no misuse, nothing leaked
 *   memcheck_target bugs    the same, then one write after free (byte 3 of
 *                           a 64-byte block), one leaked 200-byte block and
 *                           one leaked 3,000,000-byte block (a large block
 *                           starts its page: the page's record of where it
 *                           starts must not keep it reachable) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Through a volatile pointer: the compiler may not drop or see the bugs. */
static void (*volatile release)(void *) = free;

static void *free_half(void *blocks) {
  for (int i = 0; i < 200; i += 2)
    release(((char **)blocks)[i]);
  return NULL;
}

static void clean_work(void) {
  static char *blocks[200];
  for (int i = 0; i < 200; i++) {
    blocks[i] = malloc(16 + (size_t)i * 53);
    memset(blocks[i], i, 16 + (size_t)i * 53);
  }
  pthread_t t;
  pthread_create(&t, NULL, free_half, blocks);
  pthread_join(t, NULL);
  for (int i = 1; i < 200; i += 2) {
    blocks[i] = realloc(blocks[i], 100 + (size_t)i * 7);
    blocks[i][0] = 1;
  }
  for (int i = 1; i < 200; i += 2)
    release(blocks[i]);
  char *z = calloc(1000, 3);
  if (z[2999] != 0) abort();
  release(z);
  void *a = NULL;
  if (posix_memalign(&a, 256, 1000) != 0) abort();
  memset(a, 1, 1000);
  release(a);
  char *big = malloc(3 << 20);
  memset(big, 2, 3 << 20);
  release(big);
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  clean_work();
  if (strcmp(argv[1], "bugs") == 0) {
    char *kept[3];
    for (int i = 0; i < 3; i++) kept[i] = malloc(200);
    char *p = malloc(64);
    memset(p, 7, 64);
    release(p);
    p[3] = 9; /* write after free */
    char *leak = malloc(200); /* never freed */
    leak[0] = 1;
    leak = malloc(3000000); /* never freed */
    leak[0] = 1;
    leak = NULL;
    for (int i = 0; i < 3; i++) release(kept[i]);
  }
  puts("done");
  return 0;
}
