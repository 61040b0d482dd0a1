/* Statistics read while other threads allocate, free each other's blocks
 * and are collected by the purge thread: built with ThreadSanitizer, this
 * fails on any unordered access between hz_stats_print and the heaps it
 * reads. The workers also check that every block keeps its bytes.
 *
 * Usage: stats_live_test [reports=4] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hakozuna.h"
#include "test_util.h"

#define WORKERS 3
#define SLOTS   256

/* Blocks a worker hands to the next one, which frees them. */
typedef struct {
  _Atomic(uint8_t *) slot[SLOTS];
} handoff_t;

static handoff_t handoffs[WORKERS];
static atomic_bool stop;
static atomic_ulong failures;

static void *worker(void *arg) {
  uintptr_t self = (uintptr_t)arg;
  handoff_t *out = &handoffs[(self + 1) % WORKERS];
  uint64_t rng = self * UINT64_C(0x9E3779B97F4A7C15) | 1;
  while (!atomic_load(&stop)) {
    size_t size = 16 + test_rng_next(&rng) % 4000;
    uint8_t *p = hz_malloc(size);
    if (p == NULL) continue;
    memset(p, (int)(size & 0xff), size);
    uint8_t *old = atomic_exchange(&out->slot[size % SLOTS], p);
    if (old == NULL) continue;
    size_t old_size = hz_usable_size(old);
    if (old_size < 16 || old[0] != old[15])
      test_report("stats_live_test", &failures, 10, "block %p changed",
                  (void *)old);
    hz_free(old);
  }
  return NULL;
}

int main(int argc, char **argv) {
  unsigned long reports =
      test_arg(argc, argv, 1, 4, 1000, "stats_live_test [reports=4]");
  pthread_t threads[WORKERS];
  for (uintptr_t t = 0; t < WORKERS; t++)
    if (pthread_create(&threads[t], NULL, worker, (void *)t) != 0) {
      fprintf(stderr, "stats_live_test: pthread_create failed\n");
      return 2;
    }
  for (unsigned long r = 0; r < reports; r++) {
    test_sleep_ms(50);
    hz_stats_print();
  }
  atomic_store(&stop, true);
  for (int t = 0; t < WORKERS; t++)
    pthread_join(threads[t], NULL);
  for (int w = 0; w < WORKERS; w++)
    for (int s = 0; s < SLOTS; s++)
      hz_free(atomic_load(&handoffs[w].slot[s]));
  unsigned long failed = atomic_load(&failures);
  fprintf(stderr, "stats_live_test: reports=%lu failures=%lu\n", reports,
          failed);
  return failed == 0 ? 0 : 1;
}
