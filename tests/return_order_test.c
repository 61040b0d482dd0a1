/* return_order: blocks another thread frees come back to malloc in the
 * reverse of the order they were freed in, all of them, across bin refills.
 * A producer whose consumer frees in allocation order then reuses its
 * memory as one run of addresses, which hardware prefetchers follow.
 *
 * The main thread allocates BLOCKS blocks of 64 B; a consumer thread (with
 * a heap of its own) frees them in allocation order and exits, which
 * publishes its stash. The main thread then allocates twice as many: the
 * blocks it had in its bin before and fresh ones come too, but the freed
 * blocks, picked out in the order malloc returns them, must be exactly the
 * freed sequence reversed. Bins filled from the inbox bottom-up returned
 * them in runs of 32, each run in reverse order of its neighbour's.
 *
 * Run with HZ_PURGE_DELAY_MS=-1: no collector drains the inbox meanwhile
 * (a collector sends blocks to their pages, where the order is not kept). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#define BLOCKS 512
#define SIZE   64

static void *freed[BLOCKS];
static void *again[2 * BLOCKS];

static void *consume(void *arg) {
  (void)arg;
  free(malloc(SIZE)); /* a heap of its own: its frees are stashed */
  for (int i = 0; i < BLOCKS; i++)
    free(freed[i]);
  return NULL;
}

static int index_of(const void *p) {
  for (int i = 0; i < BLOCKS; i++)
    if (freed[i] == p) return i;
  return -1;
}

int main(void) {
  for (int i = 0; i < BLOCKS; i++) {
    freed[i] = malloc(SIZE);
    CHECK(freed[i] != NULL);
  }
  pthread_t t;
  CHECK(pthread_create(&t, NULL, consume, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  for (int i = 0; i < 2 * BLOCKS; i++)
    again[i] = malloc(SIZE);
  int expect = BLOCKS - 1, found = 0, out_of_order = 0;
  for (int i = 0; i < 2 * BLOCKS; i++) {
    int k = index_of(again[i]);
    if (k < 0) continue;
    if (k != expect && out_of_order++ < 3)
      fprintf(stderr, "allocation %d returned freed block %d, not %d\n", i, k,
              expect);
    expect = k - 1;
    found++;
  }
  CHECK_MSG(found == BLOCKS, "%d of the %d freed blocks came back", found,
            BLOCKS);
  CHECK_MSG(out_of_order == 0, "%d freed blocks came back out of order",
            out_of_order);
  for (int i = 0; i < 2 * BLOCKS; i++)
    free(again[i]);
  return check_report("return_order");
}
