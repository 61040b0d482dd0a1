/* larson: a larson-style server workload.
 *
 * THREADS chains run at once.  Each chain owns a live set of BLOCKS blocks
 * (sizes uniform in MIN..MAX).  One generation of a chain is one thread:
 * it does CHUNK = 10 * BLOCKS random replacements in the live set (free a
 * random block, malloc a new one in its place), then creates a successor
 * thread that continues with the same array, and exits; the successor joins
 * its predecessor first.  So blocks are freed by threads other than the one
 * that allocated them, and most blocks outlive the thread that made them.
 * The initial live sets are allocated by the main thread before timing.
 *
 * The second argument is a number of generations per chain (deterministic
 * work, the default), or, with an "s" suffix ("3s"), a run time in seconds
 * (each chain keeps spawning generations until the deadline).
 *
 * Metric: ops/s = malloc+free pairs (all chains) / elapsed time, measured
 * from the start barrier until every chain's last thread has been joined
 * (thread creation and exit are part of the workload). */
#include <pthread.h>

#include "bench.h"

static const char *usage =
    "usage: larson [THREADS] [ROUNDS|SECONDSs] [BLOCKS_PER_THREAD] [MIN] "
    "[MAX]\n"
    "  THREADS            concurrent thread chains (default 4)\n"
    "  ROUNDS             generations (threads) per chain (default 2000);\n"
    "                     a value with an 's' suffix, e.g. 3s, runs for that\n"
    "                     many seconds instead\n"
    "  BLOCKS_PER_THREAD  live blocks per chain (default 1000); each\n"
    "                     generation does 10*BLOCKS free+malloc replacements\n"
    "  MIN MAX            block size range in bytes (default 16 1024)\n"
    "Each generation hands its live set to a newly created successor thread\n"
    "and exits, so blocks are freed by other threads than their allocator.\n"
    "Reports: ops/s = malloc+free pairs per second (all threads), seed 42.\n";

#define TAG 0x4c41525345ull /* written into each block, checked on free */

typedef struct chain {
  int id;
  void **blocks;
  size_t nblocks;
  size_t chunk;
  bench_rng_t rng;
  long gens_done;
  unsigned long long ops;
  pthread_t prev; /* predecessor to join (valid when gens_done > 0) */
  pthread_t last; /* final thread of the chain, joined by main */
} chain_t;

static size_t g_min, g_max;
static long g_rounds;     /* > 0: rounds mode */
static double g_deadline; /* time mode: stop spawning after this */
static int g_time_mode;
static pthread_barrier_t g_start;
static pthread_mutex_t g_done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_done_cv = PTHREAD_COND_INITIALIZER;
static int g_done;

static void *block_new(bench_rng_t *r) {
  size_t sz = (size_t)bench_rng_range(r, g_min, g_max);
  unsigned char *p = bench_xmalloc(sz);
  if (sz >= sizeof(uint64_t)) {
    uint64_t t = TAG;
    memcpy(p, &t, sizeof t);
  }
  p[sz - 1] = (unsigned char)sz;
  return p;
}

static void block_free(void *p) {
  if (g_min >= sizeof(uint64_t)) {
    uint64_t t;
    memcpy(&t, p, sizeof t);
    if (t != TAG) {
      fprintf(stderr, "larson: block %p corrupted (tag %llx)\n", p,
              (unsigned long long)t);
      abort();
    }
  }
  free(p);
}

static void *worker(void *arg) {
  chain_t *c = arg;
  if (c->gens_done == 0)
    pthread_barrier_wait(&g_start);
  else
    pthread_join(c->prev, NULL);

  void **blocks = c->blocks;
  size_t n = c->nblocks;
  for (size_t i = 0; i < c->chunk; i++) {
    size_t v = (size_t)(bench_rng_next(&c->rng) % n);
    block_free(blocks[v]);
    blocks[v] = block_new(&c->rng);
  }
  c->ops += c->chunk;
  c->gens_done++;

  int more = g_time_mode ? bench_now() < g_deadline : c->gens_done < g_rounds;
  if (more) {
    pthread_t next;
    c->prev = pthread_self();
    bench_thread(&next, worker, c);
    /* From here on c belongs to the successor. */
    return NULL;
  }
  pthread_mutex_lock(&g_done_mu);
  c->last = pthread_self();
  g_done++;
  pthread_cond_signal(&g_done_cv);
  pthread_mutex_unlock(&g_done_mu);
  return NULL;
}

int main(int argc, char **argv) {
  if (bench_wants_help(argc, argv, usage)) return 0;
  long threads = (long)bench_arg(argc, argv, 1, 4);
  double seconds = 0;
  g_rounds = 2000;
  if (argc > 2) {
    size_t l = strlen(argv[2]);
    if (l > 0 && argv[2][l - 1] == 's') {
      char *end = NULL;
      seconds = strtod(argv[2], &end);
      if (end != argv[2] + l - 1 || seconds <= 0) {
        fprintf(stderr, "larson: bad seconds argument: %s\n", argv[2]);
        return 2;
      }
      g_time_mode = 1;
    } else {
      g_rounds = (long)bench_arg(argc, argv, 2, 2000);
    }
  }
  long nblocks = (long)bench_arg(argc, argv, 3, 1000);
  g_min = (size_t)bench_arg(argc, argv, 4, 16);
  g_max = (size_t)bench_arg(argc, argv, 5, 1024);
  if (threads < 1 || (!g_time_mode && g_rounds < 1) || nblocks < 1 ||
      g_min < 1 || g_max < g_min)
    return bench_bad_args(usage);

  chain_t *chains = bench_xcalloc((size_t)threads, sizeof *chains);
  pthread_t *first = bench_xcalloc((size_t)threads, sizeof *first);
  for (long t = 0; t < threads; t++) {
    chain_t *c = &chains[t];
    c->id = (int)t;
    c->nblocks = (size_t)nblocks;
    c->chunk = (size_t)nblocks * 10;
    bench_rng_seed(&c->rng, 42 + (uint64_t)t);
    c->blocks = bench_xmalloc((size_t)nblocks * sizeof(void *));
    for (long i = 0; i < nblocks; i++)
      c->blocks[i] = block_new(&c->rng);
  }

  pthread_barrier_init(&g_start, NULL, (unsigned)threads + 1);
  for (long t = 0; t < threads; t++) {
    bench_thread(&first[t], worker, &chains[t]);
  }
  /* Set before the barrier, which publishes it to the workers. */
  if (g_time_mode) g_deadline = bench_now() + seconds;
  pthread_barrier_wait(&g_start);
  double t0 = bench_now();

  pthread_mutex_lock(&g_done_mu);
  while (g_done < threads)
    pthread_cond_wait(&g_done_cv, &g_done_mu);
  pthread_mutex_unlock(&g_done_mu);
  for (long t = 0; t < threads; t++) {
    pthread_join(chains[t].last, NULL);
  }
  double t1 = bench_now();
  pthread_barrier_destroy(&g_start);

  unsigned long long ops = 0;
  long gens = 0;
  for (long t = 0; t < threads; t++) {
    ops += chains[t].ops;
    gens += chains[t].gens_done;
  }
  double secs = t1 - t0;
  long rss = bench_rss_kb();

  for (long t = 0; t < threads; t++) {
    for (long i = 0; i < nblocks; i++)
      block_free(chains[t].blocks[i]);
    free(chains[t].blocks);
  }
  free(chains);
  free(first);

  bench_result(
      "larson",
      "threads=%ld rounds=%ld duration_s=%g blocks=%ld min=%zu "
      "max=%zu generations=%ld pairs=%llu rss_end_kb=%ld elapsed_s=%.3f "
      "ops/s=%.0f",
      threads, g_time_mode ? 0L : g_rounds, seconds, nblocks, g_min, g_max,
      gens, ops, rss, secs, (double)ops / secs);
  return 0;
}
