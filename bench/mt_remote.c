/* mt_remote: cross-thread (remote) free throughput.
 *
 * Each of THREADS threads owns WS slots. Every iteration a thread first
 * frees whatever its receive ring holds (blocks handed over by the
 * previous thread), then picks a random slot:
 *   empty -> malloc(uniform MIN..MAX), write the first and last byte;
 *   full  -> free the block: with probability REMOTE_PCT% it is handed to
 *            the next thread ((id+1) % THREADS) through a bounded
 *            single-producer/single-consumer ring, which that thread then
 *            frees (a remote free); if the ring is full the block is freed
 *            locally and counted as a fallback.
 * With one thread the ring leads back to the thread itself.
 *
 * Oversubscription (more threads than cores) means a consumer can be off
 * the CPU for whole time slices while its producer runs, so a plain ring
 * fills up: fallbacks, and up to RING blocks per ring held live (GiBs in
 * the 128 KiB lane). Hence backpressure: once the next thread is
 * min(1024, RING/2) hand-offs behind, the producer naps (20 us at a time,
 * still draining its own ring) until the backlog drops, giving up after
 * 50 ms. Naps are counted as stalls=. BENCH_NO_BACKPRESSURE=1 drops it: a
 * producer never waits, as in programs with unbounded queues (thread pools,
 * log pipelines), and with many threads on few CPUs the live set swings
 * by up to RING blocks a ring. Blocks waiting in rings are live
 * memory beyond the slots, and how many wait depends on the scheduling:
 * inflight_peak= adds up the most each ring was seen holding (sampled
 * every 256 hand-offs), to read peak RSS against. Threads are also pinned
 * round-robin to the allowed CPUs (thread i -> i-th CPU mod n), so each
 * producer/consumer pair lands the same way in every run; without that,
 * glibc results were bimodal (+-40%) depending on placement.
 *
 * Result: ops/s = all iterations of all threads / wall time of the
 * measured loop. */
#define _GNU_SOURCE /* CPU affinity */
#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define CACHE_LINE 64
/* Backpressure level: a producer waits while the next thread still has
 * this many hand-offs (or RING/2 if smaller) to free. Bounds the blocks in
 * flight to THREADS * SOFT_MAX however the threads are scheduled. */
#define SOFT_MAX 1024
/* How long a producer naps while waiting, and when it gives up waiting. */
#define STALL_NAP_NS    20000
#define STALL_GIVE_UP_S 0.05

static const char usage[] =
    "usage: mt_remote [THREADS] [ITERS] [WS] [MIN] [MAX] [REMOTE_PCT] [RING]\n"
    "  THREADS     worker threads                        (default 4)\n"
    "  ITERS       iterations per thread                 (default 4000000)\n"
    "  WS          slots per thread                      (default 400)\n"
    "  MIN, MAX    block size range in bytes, uniform    (default 16 2048)\n"
    "  REMOTE_PCT  % of frees handed to the next thread  (default 50)\n"
    "  RING        entries of each SPSC hand-off ring    (default 65536)\n"
    "Per iteration: free everything in the receive ring, then a random slot\n"
    "is filled (malloc + write first/last byte) or emptied (free, locally or\n"
    "remotely via the ring; full ring = local free counted as fallback).\n"
    "Backpressure: a producer whose next thread is min(1024, RING/2)\n"
    "hand-offs behind naps (20 us steps, draining its own ring, at most\n"
    "50 ms) until it catches up; naps are reported as stalls=.\n"
    "inflight_peak= is the sum over rings of the most blocks each held\n"
    "(sampled every 256 hand-offs): live memory beyond the slots.\n"
    "BENCH_NO_BACKPRESSURE=1 in the environment: producers never wait (a\n"
    "program with unbounded queues); a ring holds up to RING blocks.\n"
    "Threads are pinned round-robin to the allowed CPUs (BENCH_NO_PIN=1 in\n"
    "the environment turns that off). Slots start about half full (warm-up,\n"
    "untimed). Seeds are fixed per thread.\n"
    "Metric: ops/s (throughput) = THREADS*ITERS / wall time of the loop.\n"
    "Also reports remote_pct_eff (remote frees / all frees * 100) and\n"
    "fallback_pct (fallbacks / attempted remote frees * 100); a warning goes\n"
    "to stderr when fallback_pct exceeds 0.1.\n";

/* Bounded SPSC ring. head is written only by the consumer, tail only by
 * the producer; each sits on its own cache line. Indices grow without
 * bound (64-bit) and are reduced modulo the capacity. */
typedef struct {
  _Alignas(CACHE_LINE) _Atomic uint64_t head; /* next slot to consume */
  char pad0[CACHE_LINE - sizeof(uint64_t)];
  _Alignas(CACHE_LINE) _Atomic uint64_t tail; /* next slot to produce */
  char pad1[CACHE_LINE - sizeof(uint64_t)];
  _Alignas(CACHE_LINE) void **buf;
  uint64_t cap;
  uint64_t mask; /* cap - 1 when cap is a power of two, else 0 */
  /* Producer-private cache of head, to avoid reading the consumer's line
   * on every push. */
  _Alignas(CACHE_LINE) uint64_t head_cache;
} ring_t;

typedef struct {
  _Alignas(CACHE_LINE) ring_t ring; /* this thread's receive ring */
  int id;
  void **slots;
  uint64_t local_frees;  /* frees done by the owner, incl. fallbacks */
  uint64_t remote_frees; /* successful hand-offs */
  uint64_t fallbacks;    /* hand-offs that found the ring full */
  uint64_t drained;      /* blocks freed out of the receive ring */
  uint64_t stalls;       /* naps waiting for the next thread */
  uint64_t backlog_peak; /* most blocks seen waiting in the send ring */
} worker_t;

static struct {
  int threads;
  uint64_t iters;
  uint64_t ws;
  uint64_t min, max;
  uint64_t remote_pct;
  uint64_t ring;
  uint64_t soft; /* backlog that makes a producer wait */
  worker_t *w;
  pthread_barrier_t start, stop;
  _Atomic int done;
  double t_end;
  int ncpus; /* CPUs to pin to; 0 = no pinning */
  int cpus[CPU_SETSIZE];
} g;

static inline uint64_t ring_index(const ring_t *r, uint64_t i) {
  return r->mask ? (i & r->mask) : (i % r->cap);
}

/* Producer side. Returns 0 if the ring is full. */
static inline int ring_push(ring_t *r, void *p) {
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  if (t - r->head_cache >= r->cap) {
    r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
    if (t - r->head_cache >= r->cap) return 0;
  }
  r->buf[ring_index(r, t)] = p;
  atomic_store_explicit(&r->tail, t + 1, memory_order_release);
  return 1;
}

/* Producer side: entries the consumer has not taken yet, as far as the
 * producer knows (refreshes its view of head when the cached one says the
 * ring is at least `level` full). */
static inline uint64_t ring_backlog(ring_t *r, uint64_t level) {
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  if (t - r->head_cache >= level)
    r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
  return t - r->head_cache;
}

/* Producer side, every BACKLOG_SAMPLE pushes: the exact backlog (a fresh
 * look at head, which the consumer's core owns, so not on every push). */
#define BACKLOG_SAMPLE 256
static inline uint64_t ring_backlog_exact(ring_t *r) {
  r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
  return atomic_load_explicit(&r->tail, memory_order_relaxed) - r->head_cache;
}

/* Consumer side: free everything currently in the ring. */
static inline uint64_t ring_drain(ring_t *r) {
  uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
  if (h == t) return 0;
  uint64_t n = t - h;
  for (; h != t; h++)
    free(r->buf[ring_index(r, h)]);
  atomic_store_explicit(&r->head, h, memory_order_release);
  return n;
}

/* Backpressure, taken when the next thread is at least g.soft hand-offs
 * behind. Nap (so the CPU goes to threads that can make progress) until
 * it catches up, emptying our own receive ring meanwhile so that a chain
 * of waiting threads cannot end up waiting on each other. After
 * STALL_GIVE_UP_S the producer carries on (and falls back to a local free
 * if the ring is really full), so a consumer that never runs cannot hang
 * the benchmark. Returns the number of naps. */
static uint64_t stall(ring_t *tx, ring_t *rx, uint64_t *drained) {
  uint64_t naps = 0;
  double t0 = bench_now();
  while (ring_backlog(tx, g.soft) >= g.soft) {
    *drained += ring_drain(rx);
    if (bench_now() - t0 > STALL_GIVE_UP_S) break;
    struct timespec nap = {0, STALL_NAP_NS};
    nanosleep(&nap, NULL);
    naps++;
  }
  return naps;
}

/* Pin thread `id` to the id-th CPU (round robin) of the process's
 * affinity mask, so the placement of producer/consumer pairs (same CPU or
 * not) is the same in every run. BENCH_NO_PIN=1 turns this off. */
static void pin_thread(int id) {
  if (g.ncpus <= 1) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(g.cpus[id % g.ncpus], &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0)
    fprintf(stderr, "mt_remote: warning: cannot pin thread %d: %s\n", id,
            strerror(rc));
}

static void *worker(void *arg) {
  worker_t *self = arg;
  pin_thread(self->id);
  ring_t *rx = &self->ring;
  ring_t *tx = &g.w[(self->id + 1) % g.threads].ring;
  void **slots = self->slots;
  const uint64_t ws = g.ws, lo = g.min, hi = g.max, iters = g.iters;
  const uint64_t rpct = g.remote_pct;
  const uint64_t soft = g.soft;
  uint64_t local = 0, remote = 0, fallback = 0, drained = 0, stalls = 0;
  uint64_t backlog_peak = 0;
  bench_rng_t rng;
  bench_rng_seed(&rng, 0x6d7472ull * 1000 + (uint64_t)self->id + 1);

  /* Warm-up (untimed): fill about half the slots, the steady-state
   * occupancy of random fill/empty. */
  for (uint64_t i = 0; i < ws; i++) {
    if (bench_rng_next(&rng) & 1) {
      size_t n = (size_t)bench_rng_range(&rng, lo, hi);
      char *p = bench_xmalloc(n);
      p[0] = 1;
      p[n - 1] = 1;
      slots[i] = p;
    }
  }

  pthread_barrier_wait(&g.start);

  for (uint64_t i = 0; i < iters; i++) {
    drained += ring_drain(rx);
    uint64_t r = bench_rng_next(&rng);
    uint64_t s = (r & 0xffffffffu) % ws;
    char *p = slots[s];
    if (p == NULL) {
      size_t n = (size_t)bench_rng_range(&rng, lo, hi);
      p = bench_xmalloc(n);
      p[0] = (char)i;
      p[n - 1] = (char)i;
      slots[s] = p;
    } else {
      slots[s] = NULL;
      if ((r >> 32) % 100 < rpct) {
        if (soft != 0 && ring_backlog(tx, soft) >= soft)
          stalls += stall(tx, rx, &drained);
        if (ring_push(tx, p)) {
          if (++remote % BACKLOG_SAMPLE == 0) {
            uint64_t b = ring_backlog_exact(tx);
            if (b > backlog_peak) backlog_peak = b;
          }
          continue;
        }
        fallback++;
      }
      free(p);
      local++;
    }
  }

  /* The last thread to finish ends the measured interval. Until then keep
   * emptying the receive ring: the producer may still be running, and a
   * finished consumer that stopped draining would make its ring fill up
   * (fallbacks, and up to RING blocks held live). Sleep briefly between
   * drains so the threads still working get the CPUs. */
  if (atomic_fetch_add_explicit(&g.done, 1, memory_order_acq_rel) ==
      g.threads - 1) {
    g.t_end = bench_now();
  } else {
    struct timespec nap = {0, 50000};
    while (atomic_load_explicit(&g.done, memory_order_acquire) < g.threads) {
      drained += ring_drain(rx);
      nanosleep(&nap, NULL);
    }
  }
  /* Untimed: every producer has stopped, so the ring can be emptied for
   * good; then free this thread's own live blocks. */
  pthread_barrier_wait(&g.stop);
  drained += ring_drain(rx);
  for (uint64_t i = 0; i < ws; i++) {
    free(slots[i]);
    slots[i] = NULL;
  }
  self->local_frees = local;
  self->remote_frees = remote;
  self->fallbacks = fallback;
  self->drained = drained;
  self->stalls = stalls;
  self->backlog_peak = backlog_peak;
  return NULL;
}

int main(int argc, char **argv) {
  long long a[] = {4, 4000000, 400, 16, 2048, 50, 65536};
  if (bench_start(argc, argv, usage, a, 7)) return 0;
  long long threads = a[0], iters = a[1], ws = a[2], min = a[3], max = a[4],
            rpct = a[5], ring = a[6];
  if (threads < 1 || threads > 4096 || iters < 0 || ws < 1 || min < 1 ||
      max < min || rpct < 0 || rpct > 100 || ring < 1)
    return bench_bad_args(usage);
  g.threads = (int)threads;
  g.iters = (uint64_t)iters;
  g.ws = (uint64_t)ws;
  g.min = (uint64_t)min;
  g.max = (uint64_t)max;
  g.remote_pct = (uint64_t)rpct;
  g.ring = (uint64_t)ring;
  g.soft = g.ring < 2 ? g.ring : g.ring / 2;
  if (g.soft > SOFT_MAX) g.soft = SOFT_MAX;
  const char *free_run = getenv("BENCH_NO_BACKPRESSURE");
  if (free_run != NULL && strcmp(free_run, "1") == 0) g.soft = 0;

  /* Cache-line aligned worker array carved out of a malloc'd block. */
  size_t wbytes = sizeof(worker_t) * (size_t)threads + CACHE_LINE;
  void *wraw = bench_xmalloc(wbytes);
  memset(wraw, 0, wbytes);
  g.w = (worker_t *)(((uintptr_t)wraw + CACHE_LINE - 1) &
                     ~(uintptr_t)(CACHE_LINE - 1));
  for (int i = 0; i < g.threads; i++) {
    worker_t *w = &g.w[i];
    w->id = i;
    w->slots = bench_xcalloc((size_t)ws, sizeof(void *));
    w->ring.buf = bench_xcalloc((size_t)ring, sizeof(void *));
    w->ring.cap = g.ring;
    w->ring.mask = (g.ring & (g.ring - 1)) == 0 ? g.ring - 1 : 0;
    atomic_init(&w->ring.head, 0);
    atomic_init(&w->ring.tail, 0);
    w->ring.head_cache = 0;
  }

  const char *nopin = getenv("BENCH_NO_PIN");
  cpu_set_t allowed;
  g.ncpus = 0;
  if ((nopin == NULL || strcmp(nopin, "1") != 0) &&
      sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &allowed)) g.cpus[g.ncpus++] = c;

  pthread_barrier_init(&g.start, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&g.stop, NULL, (unsigned)threads + 1);
  atomic_init(&g.done, 0);
  pthread_t *tids = bench_xmalloc(sizeof(pthread_t) * (size_t)threads);
  for (int i = 0; i < g.threads; i++) {
    bench_thread(&tids[i], worker, &g.w[i]);
  }

  pthread_barrier_wait(&g.start);
  double t0 = bench_now();
  pthread_barrier_wait(&g.stop);
  double t1 = g.t_end; /* published by the barrier */
  for (int i = 0; i < g.threads; i++)
    pthread_join(tids[i], NULL);

  uint64_t local = 0, remote = 0, fallback = 0, drained = 0, stalls = 0;
  uint64_t inflight = 0;
  for (int i = 0; i < g.threads; i++) {
    stalls += g.w[i].stalls;
    inflight += g.w[i].backlog_peak;
    local += g.w[i].local_frees;
    remote += g.w[i].remote_frees;
    fallback += g.w[i].fallbacks;
    drained += g.w[i].drained;
    free(g.w[i].slots);
    free(g.w[i].ring.buf);
  }
  free(tids);
  free(wraw);
  pthread_barrier_destroy(&g.start);
  pthread_barrier_destroy(&g.stop);

  if (drained != remote)
    fprintf(stderr, "mt_remote: internal error: %llu handed off, %llu freed\n",
            (unsigned long long)remote, (unsigned long long)drained);

  double secs = t1 - t0;
  double total = (double)g.iters * (double)g.threads;
  double ops = secs > 0 ? total / secs : 0.0;
  uint64_t frees = local + remote;
  double eff = frees ? 100.0 * (double)remote / (double)frees : 0.0;
  uint64_t attempted = remote + fallback;
  double fb = attempted ? 100.0 * (double)fallback / (double)attempted : 0.0;
  if (fb > 0.1)
    fprintf(stderr,
            "mt_remote: warning: fallback %.3f%% of remote frees "
            "(%llu of %llu) exceeds 0.1%%; ring too small or a consumer "
            "starved\n",
            fb, (unsigned long long)fallback, (unsigned long long)attempted);

  bench_result("mt_remote",
               "threads=%d iters=%llu ws=%llu min=%llu max=%llu "
               "remote_pct=%llu ring=%llu remote_pct_eff=%.2f "
               "fallback_pct=%.4f stalls=%llu inflight_peak=%llu ops/s=%.0f",
               g.threads, (unsigned long long)g.iters, (unsigned long long)g.ws,
               (unsigned long long)g.min, (unsigned long long)g.max,
               (unsigned long long)g.remote_pct, (unsigned long long)g.ring,
               eff, fb, (unsigned long long)stalls,
               (unsigned long long)inflight, ops);
  return 0;
}
