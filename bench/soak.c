/* soak: one long-lived process that alternates a server's life and
 * cross-thread hand-offs for MINUTES, to show whether its memory levels
 * off. Driven by bench/soak.py (`make soak`).
 *
 * Rounds of ROUND_S seconds alternate between:
 *   - server: 4 workers replace blocks in tables of 4000 slots each, sizes
 *     drifting from round to round (16 B to 4 KiB, now and then 64 KiB or
 *     1 MiB); one replacement in four hands the old block to the next
 *     worker, which frees it;
 *   - hand-off: 2 producers fill blocks of 16 B to 2 KiB and pass them
 *     through bounded rings to 2 consumers that free them.
 * At the end of each round every block is freed. A sampler prints the
 * resident size every SAMPLE_S seconds:
 *
 *   sample t=<s> rss_kb=<kb>
 *
 * and the last line is `bench=soak minutes=... rounds=... ops=... ops/s=...`.
 * With MINUTES 0 it only starts and joins its threads once: the baseline
 * of blocks libc itself keeps, for the live-block check. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "bench.h"

static const char usage[] =
    "usage: soak [MINUTES] [ROUND_S] [SAMPLE_S]\n"
    "  MINUTES   how long (default 30; 0: start and stop only)\n"
    "  ROUND_S   seconds per round (default 20)\n"
    "  SAMPLE_S  seconds between RSS samples (default 10)\n";

#define WORKERS 4
#define SLOTS   4000
#define RING    1024

static _Atomic bool round_over;
static _Atomic bool all_over;
static _Atomic unsigned long long ops;
static unsigned round_no;

/* ---------------------------------------------------------------------------
 * Server rounds
 * ------------------------------------------------------------------------- */
typedef struct {
  _Atomic(void *) inbox[256]; /* blocks handed over by the previous worker */
  int id;
} worker_t;
static worker_t workers[WORKERS];

static size_t server_size(bench_rng_t *rng) {
  uint64_t r = bench_rng_next(rng) % 1000;
  size_t drift = 1 + round_no % 7;
  if (r < 2) return (size_t)1 << 20;
  if (r < 20) return (size_t)64 << 10;
  if (r < 300) return 256 + bench_rng_next(rng) % (512 * drift);
  return 16 + bench_rng_next(rng) % (64 * drift);
}

static void hand_over(worker_t *to, void *p) {
  for (int i = 0; i < 256; i++) {
    void *none = NULL;
    if (atomic_compare_exchange_strong(&to->inbox[i], &none, p)) return;
  }
  free(p); /* the next worker is behind: free it here */
}

static void drain_inbox(worker_t *w) {
  for (int i = 0; i < 256; i++) {
    void *p = atomic_exchange(&w->inbox[i], NULL);
    free(p);
  }
}

static void *server_worker(void *arg) {
  worker_t *w = arg;
  worker_t *next = &workers[(w->id + 1) % WORKERS];
  bench_rng_t rng;
  bench_rng_seed(&rng, (uint64_t)w->id * 7919 + round_no);
  static _Thread_local void *table[SLOTS];
  unsigned long long n = 0;
  while (!atomic_load(&round_over)) {
    size_t slot = bench_rng_next(&rng) % SLOTS;
    if (table[slot] != NULL) {
      if (n % 4 == 0)
        hand_over(next, table[slot]);
      else
        free(table[slot]);
    }
    size_t size = server_size(&rng);
    table[slot] = malloc(size);
    if (table[slot] == NULL) abort();
    bench_touch(table[slot], size);
    if (++n % 64 == 0) drain_inbox(w);
  }
  for (size_t i = 0; i < SLOTS; i++) {
    free(table[i]);
    table[i] = NULL;
  }
  atomic_fetch_add(&ops, n);
  return NULL;
}

/* ---------------------------------------------------------------------------
 * Hand-off rounds: producer i feeds consumer i through a ring
 * ------------------------------------------------------------------------- */
typedef struct {
  _Atomic(void *) slots[RING];
  _Atomic unsigned head, tail;
  _Atomic bool done;
} ring_t;
static ring_t rings[2];

static void *producer(void *arg) {
  ring_t *ring = arg;
  bench_rng_t rng;
  bench_rng_seed(&rng, (uint64_t)(ring - rings) * 31 + round_no);
  unsigned long long n = 0;
  while (!atomic_load(&round_over)) {
    unsigned tail = atomic_load(&ring->tail);
    if (tail - atomic_load(&ring->head) == RING) continue; /* full */
    size_t size = 16 + bench_rng_next(&rng) % 2048;
    void *p = malloc(size);
    if (p == NULL) abort();
    bench_touch(p, size);
    atomic_store(&ring->slots[tail % RING], p);
    atomic_store(&ring->tail, tail + 1);
    n++;
  }
  atomic_store(&ring->done, true);
  atomic_fetch_add(&ops, n);
  return NULL;
}

static void *consumer(void *arg) {
  ring_t *ring = arg;
  for (;;) {
    unsigned head = atomic_load(&ring->head);
    if (head == atomic_load(&ring->tail)) {
      if (atomic_load(&ring->done) && head == atomic_load(&ring->tail)) break;
      continue;
    }
    free(atomic_load(&ring->slots[head % RING]));
    atomic_store(&ring->head, head + 1);
  }
  return NULL;
}

/* ---------------------------------------------------------------------------
 * Rounds and the sampler
 * ------------------------------------------------------------------------- */
static void run_round(bool server, double seconds) {
  pthread_t t[WORKERS];
  int n = 0;
  atomic_store(&round_over, false);
  if (server) {
    for (int i = 0; i < WORKERS; i++) {
      workers[i].id = i;
      bench_thread(&t[n++], server_worker, &workers[i]);
    }
  } else {
    for (int i = 0; i < 2; i++) {
      rings[i].head = rings[i].tail = 0;
      rings[i].done = false;
      bench_thread(&t[n++], producer, &rings[i]);
      bench_thread(&t[n++], consumer, &rings[i]);
    }
  }
  usleep((useconds_t)(seconds * 1e6));
  atomic_store(&round_over, true);
  for (int i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  if (server)
    for (int i = 0; i < WORKERS; i++)
      drain_inbox(&workers[i]);
  round_no++;
}

static double sample_every;

static void *sampler(void *arg) {
  double start = *(double *)arg, next = start + sample_every;
  while (!atomic_load(&all_over)) {
    double now = bench_now();
    if (now >= next) {
      printf("sample t=%.0f rss_kb=%ld\n", now - start, bench_rss_kb());
      fflush(stdout);
      next += sample_every;
    }
    usleep(100000);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (bench_wants_help(argc, argv, usage)) return 0;
  double minutes = (double)bench_arg(argc, argv, 1, 30);
  double round_s = (double)bench_arg(argc, argv, 2, 20);
  sample_every = (double)bench_arg(argc, argv, 3, 10);
  double start = bench_now();
  pthread_t s;
  bench_thread(&s, sampler, &start);
  if (minutes == 0) run_round(true, 0.01); /* threads once: the baseline */
  while (bench_now() - start < minutes * 60) {
    double left = minutes * 60 - (bench_now() - start);
    run_round(round_no % 2 == 0, left < round_s ? left : round_s);
  }
  atomic_store(&all_over, true);
  pthread_join(s, NULL);
  double elapsed = bench_now() - start;
  unsigned long long done = atomic_load(&ops);
  bench_result("soak", "minutes=%.1f rounds=%u ops=%llu ops/s=%.0f", minutes,
               round_no, done, elapsed > 0 ? (double)done / elapsed : 0.0);
  return 0;
}
