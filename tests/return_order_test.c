/* return_order: blocks another thread frees come back to malloc lowest
 * address first within their page, all of them, whatever order they were
 * freed in. A producer then reuses its memory as runs of addresses, which
 * hardware prefetchers follow, however its consumers free.
 *
 * The main thread allocates BLOCKS blocks of 64 B; a consumer thread (with
 * a heap of its own) frees them in a shuffled order and exits, which
 * publishes its stash. The main thread then allocates four times as many: the
 * blocks it had in its bin before and fresh ones come too, but the freed
 * blocks, picked out in the order malloc returns them, must rise through
 * each page (a drop only where malloc moves to another page), and nearly
 * every one must be its predecessor's neighbour. Bins filled from the
 * inbox returned them in the reverse of the order they were freed in.
 *
 * Run with HZ_PURGE_DELAY_MS=-1: no collector takes the blocks meanwhile. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#define BLOCKS 512
#define SIZE   64
#define PAGE   ((uintptr_t)64 << 10) /* blocks of 64 B live in 64 KiB pages */

static void *freed[BLOCKS];
static void *order[BLOCKS];
static void *again[4 * BLOCKS];

static void *consume(void *arg) {
  (void)arg;
  free(malloc(SIZE)); /* a heap of its own: its frees are stashed */
  for (int i = 0; i < BLOCKS; i++)
    free(order[i]);
  return NULL;
}

static int index_of(const void *p) {
  for (int i = 0; i < BLOCKS; i++)
    if (freed[i] == p) return i;
  return -1;
}

/* A fixed shuffle (xorshift), so a failure repeats. */
static void shuffle(void) {
  uint64_t x = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < BLOCKS; i++)
    order[i] = freed[i];
  for (int i = BLOCKS - 1; i > 0; i--) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int j = (int)(x % (uint64_t)(i + 1));
    void *t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

int main(void) {
  for (int i = 0; i < BLOCKS; i++) {
    freed[i] = malloc(SIZE);
    CHECK(freed[i] != NULL);
  }
  shuffle();
  pthread_t t;
  CHECK(pthread_create(&t, NULL, consume, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  for (int i = 0; i < 4 * BLOCKS; i++)
    again[i] = malloc(SIZE);
  int found = 0, neighbours = 0, drops = 0;
  uintptr_t prev = 0;
  for (int i = 0; i < 4 * BLOCKS; i++) {
    if (index_of(again[i]) < 0) continue;
    uintptr_t p = (uintptr_t)again[i];
    if (found > 0 && p == prev + SIZE) neighbours++;
    if (found > 0 && p < prev && (p & ~(PAGE - 1)) == (prev & ~(PAGE - 1)) &&
        drops++ < 3)
      fprintf(stderr, "allocation %d returned %p after %p, of the same page\n",
              i, (void *)p, (void *)prev);
    prev = p;
    found++;
  }
  CHECK_MSG(found == BLOCKS, "%d of the %d freed blocks came back", found,
            BLOCKS);
  CHECK_MSG(drops == 0, "%d freed blocks came back below their predecessor",
            drops);
  CHECK_MSG(neighbours >= BLOCKS * 95 / 100,
            "%d of %d freed blocks came back right after their neighbour",
            neighbours, BLOCKS - 1);
  for (int i = 0; i < 4 * BLOCKS; i++)
    free(again[i]);
  return check_report("return_order");
}
