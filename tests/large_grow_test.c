/* Threads that grow large blocks with realloc at the same time: mappings
 * move (mremap) while other threads map new ones, perhaps at the address
 * just given up. Every block must stay ours after each move: its usable
 * size covers the request, its bytes are kept, and free takes it back (no
 * large mapping is left live at the end: mallinfo2's hblks).
 *
 * Usage: large_grow_test [rounds=10000] */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define THREADS 4
#define GROWTHS 4

static atomic_ulong failures;
static unsigned long rounds;

/* A word at each end of the first `size` bytes, derived from the block's
 * identity, so a block mixed up with another is seen. */
static void mark(uint8_t *p, size_t size, uint64_t id) {
  memcpy(p, &id, sizeof id);
  memcpy(p + size - sizeof id, &id, sizeof id);
}

static int marked(const uint8_t *p, size_t size, uint64_t id) {
  uint64_t head, tail;
  memcpy(&head, p, sizeof head);
  memcpy(&tail, p + size - sizeof tail, sizeof tail);
  return head == id && tail == id;
}

static void *grower(void *arg) {
  uint64_t rng = (uintptr_t)arg * UINT64_C(0x9E3779B97F4A7C15) | 1;
  for (unsigned long r = 0; r < rounds; r++) {
    uint64_t id = test_rng_next(&rng);
    size_t size = 300000 + (size_t)(id % 16) * 4096;
    uint8_t *p = malloc(size);
    if (p == NULL) continue;
    mark(p, size, id);
    for (int g = 0; g < GROWTHS; g++) {
      size_t bigger = size * 2 + 4096;
      uint8_t *q = realloc(p, bigger);
      if (q == NULL) break;
      if (malloc_usable_size(q) < bigger || !marked(q, size, id))
        test_report("large_grow_test", &failures, 10,
                    "block %p of %zu bytes lost after realloc (usable %zu)",
                    (void *)q, bigger, malloc_usable_size(q));
      p = q;
      size = bigger;
      mark(p, size, id);
    }
    free(p);
  }
  return NULL;
}

int main(int argc, char **argv) {
  rounds = test_arg(argc, argv, 1, 10000, 10000000,
                    "large_grow_test [rounds=10000]");
  size_t live_before = mallinfo2().hblks;
  pthread_t threads[THREADS];
  for (uintptr_t t = 0; t < THREADS; t++)
    if (pthread_create(&threads[t], NULL, grower, (void *)(t + 1)) != 0) {
      fprintf(stderr, "large_grow_test: pthread_create failed\n");
      return 2;
    }
  for (int t = 0; t < THREADS; t++)
    pthread_join(threads[t], NULL);
  size_t live_after = mallinfo2().hblks;
  if (live_after != live_before)
    test_report("large_grow_test", &failures, 10,
                "%zu large blocks live before, %zu after all were freed",
                live_before, live_after);
  unsigned long failed = atomic_load(&failures);
  fprintf(stderr, "large_grow_test: threads=%d rounds=%lu failures=%lu\n",
          THREADS, rounds, failed);
  return failed == 0 ? 0 : 1;
}
