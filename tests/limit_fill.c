/* limit_fill SIZE: malloc SIZE-byte blocks (first and last byte written)
 * until malloc fails, then print how many it got. The ulimit test runs it
 * under an address-space limit with and without hakozuna preloaded. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: limit_fill SIZE\n");
    return 2;
  }
  size_t size = strtoul(argv[1], NULL, 10);
  if (size == 0) return 2;
  unsigned long count = 0;
  for (;;) {
    char *p = malloc(size);
    if (p == NULL) break;
    p[0] = p[size - 1] = 1;
    count++;
  }
  printf("%lu\n", count);
  return 0;
}
