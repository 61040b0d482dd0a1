/* mir: a compiler-IR-like workload (in the spirit of a small JIT that
 * compiles one function at a time and throws everything away after).
 *
 * Per "function":
 *   - 2..4 work buffers of 200..300 KiB (code, operand and label tables),
 *     every page written;
 *   - 96..160 IR nodes of 32..256 B appended to 4..12 basic-block lists,
 *     each node "emitted" into the code buffer;
 *   - an optimisation pass that unlinks and frees about 1/8 of the nodes
 *     and inserts a few new ones;
 *   - about half the buffers grown with realloc (x1.25..x1.5), the new
 *     part written;
 *   - then every node, list header and buffer is freed.
 *
 * Result: secs = wall time of ITERS functions (fixed work, lower is
 * better). */
#include "bench.h"

#define BUF_MIN  (200u << 10)
#define BUF_MAX  (300u << 10)
#define MAX_BUFS 4

static const char usage[] =
    "usage: mir [ITERS]\n"
    "  ITERS  functions to compile    (default 10000)\n"
    "Per function: 2-4 buffers of 200-300 KiB (all pages written), 96-160\n"
    "IR nodes of 32-256 B in 4-12 linked lists, ~1/8 of the nodes freed and\n"
    "a few inserted by an 'optimisation pass', about half the buffers grown\n"
    "by realloc (x1.25-1.5), then everything freed. Seed is fixed (1); an\n"
    "untimed warm-up of ITERS/100 functions runs first.\n"
    "Metric: secs (fixed work: wall time of ITERS functions; lower is\n"
    "better).\n";

typedef struct node {
  struct node *next;
  uint32_t op;
  uint32_t size;
  uint64_t operands[]; /* payload up to size */
} node_t;

typedef struct {
  node_t *head, *tail;
} block_t;

static node_t *new_node(bench_rng_t *rng, uint32_t op) {
  uint32_t size = (uint32_t)bench_rng_range(rng, 32, 256);
  node_t *n = bench_xmalloc(size);
  n->next = NULL;
  n->op = op;
  n->size = size;
  size_t nops = (size - sizeof(node_t)) / sizeof(uint64_t);
  for (size_t i = 0; i < nops && i < 4; i++)
    n->operands[i] = op + i;
  return n;
}

/* Compile one function; returns a checksum so nothing is optimised away. */
static uint64_t compile_function(bench_rng_t *rng) {
  uint64_t sum = 0;

  /* Work buffers. */
  int nbufs = (int)bench_rng_range(rng, 2, MAX_BUFS);
  unsigned char *buf[MAX_BUFS];
  size_t bsize[MAX_BUFS];
  for (int b = 0; b < nbufs; b++) {
    bsize[b] = (size_t)bench_rng_range(rng, BUF_MIN, BUF_MAX);
    buf[b] = bench_xmalloc(bsize[b]);
    bench_touch(buf[b], bsize[b]);
  }

  /* Basic blocks with their IR nodes; each node emitted into buf[0]. */
  int nblocks = (int)bench_rng_range(rng, 4, 12);
  block_t *blocks = bench_xmalloc(sizeof(block_t) * (size_t)nblocks);
  for (int k = 0; k < nblocks; k++)
    blocks[k].head = blocks[k].tail = NULL;
  int nnodes = (int)bench_rng_range(rng, 96, 160);
  size_t emit = 0;
  for (int i = 0; i < nnodes; i++) {
    node_t *n = new_node(rng, (uint32_t)i);
    block_t *bb = &blocks[bench_rng_next(rng) % (uint64_t)nblocks];
    if (bb->tail)
      bb->tail->next = n;
    else
      bb->head = n;
    bb->tail = n;
    memcpy(buf[0] + emit, n, 16);
    emit = (emit + 16) % (bsize[0] - 16);
  }

  /* Optimisation pass: drop ~1/8 of the nodes, insert a few new ones. */
  for (int k = 0; k < nblocks; k++) {
    node_t **link = &blocks[k].head;
    node_t *prev = NULL;
    while (*link) {
      node_t *n = *link;
      uint64_t r = bench_rng_next(rng);
      if ((r & 7) == 0) {
        *link = n->next;
        free(n);
        continue;
      }
      if (((r >> 8) & 15) == 0) { /* insert a new node after n */
        node_t *m = new_node(rng, n->op ^ 0x8000u);
        m->next = n->next;
        n->next = m;
        n = m;
      }
      sum += n->op;
      prev = n;
      link = &n->next;
    }
    blocks[k].tail = prev;
  }

  /* Grow about half of the buffers, write the new part. */
  for (int b = 0; b < nbufs; b++) {
    if (bench_rng_next(rng) & 1) continue;
    size_t grow = bsize[b] / 4 + (size_t)(bench_rng_next(rng) % (bsize[b] / 4));
    size_t nsize = bsize[b] + grow;
    unsigned char *p = bench_xrealloc(buf[b], nsize);
    bench_touch(p + bsize[b], grow);
    buf[b] = p;
    bsize[b] = nsize;
  }

  /* Tear down. */
  for (int k = 0; k < nblocks; k++) {
    node_t *n = blocks[k].head;
    while (n) {
      node_t *next = n->next;
      sum += n->size;
      free(n);
      n = next;
    }
  }
  free(blocks);
  for (int b = 0; b < nbufs; b++) {
    sum += buf[b][bsize[b] - 1];
    free(buf[b]);
  }
  return sum;
}

int main(int argc, char **argv) {
  if (bench_wants_help(argc, argv, usage)) return 0;
  long long iters = bench_arg(argc, argv, 1, 10000);
  if (iters < 0) return bench_bad_args(usage);
  bench_rng_t rng;
  bench_rng_seed(&rng, 1);
  uint64_t sum = 0;

  for (long long i = 0; i < iters / 100; i++)
    sum += compile_function(&rng);

  bench_rng_seed(&rng, 1);
  double t0 = bench_now();
  for (long long i = 0; i < iters; i++)
    sum += compile_function(&rng);
  double secs = bench_now() - t0;

  /* Keep the checksum live without printing it to stdout. */
  if (sum == 42) fputc('\n', stderr);
  bench_result("mir", "iters=%lld secs=%.4f", iters, secs);
  return 0;
}
