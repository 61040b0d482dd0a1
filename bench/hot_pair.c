/* hot_pair: the cost of one malloc+free pair, made to be counted with
 * callgrind (instructions are exact, unlike time on a shared machine).
 *
 * Patterns:
 *   lifo    malloc a block, write a byte, free it at once; sizes cycle
 *           through a fixed pseudo-random table of MIN..MAX.
 *   random  WS slots, filled before the loop; each pair frees a random
 *           slot's block and mallocs one of a random size (MIN..MAX).
 * Sizes and slots come from tables made before the loop, so the loop's own
 * work does not depend on the allocator.
 *
 * Mode `null` runs the same loop against two do-nothing functions in this
 * program instead of malloc and free, so that its instruction count is the
 * loop's own cost: the harness subtracts it (and each count at two loop
 * lengths, which removes start-up) to get the allocator's instructions per
 * pair.
 *
 * Result: ops/s = pairs / wall time of the loop. */
#include "bench.h"

#include <stdbool.h>

static const char usage[] =
    "usage: hot_pair [MODE] [PAIRS] [MIN] [MAX] [PATTERN] [WS]\n"
    "  MODE     malloc | null (same loop, no allocator) (default malloc)\n"
    "  PAIRS    malloc+free pairs in the loop           (default 10000000)\n"
    "  MIN,MAX  block sizes in bytes, uniform           (default 8 64)\n"
    "  PATTERN  lifo | random                           (default lifo)\n"
    "  WS       live slots of the random pattern        (default 1000)\n"
    "lifo: each malloc is freed at once. random: a random slot's block is\n"
    "freed and replaced by a new one. One byte is written into each block.\n"
    "Metric: ops/s (throughput) = PAIRS / wall time (one op = malloc+free).\n";

#define TABLE 4096 /* sizes and slots, cycled; a power of two */

/* The stand-ins of mode null: one instruction each besides the return,
 * kept out of line so that the call stays as it is with malloc. */
static char null_block[256 << 10];
__attribute__((noinline)) static void *null_malloc(size_t n) {
  (void)n;
  return null_block;
}
__attribute__((noinline)) static void null_free(void *p) {
  __asm__ volatile("" : : "r"(p) : "memory");
}

typedef struct {
  void *(*alloc)(size_t);
  void (*release)(void *);
  unsigned sizes[TABLE];
  unsigned slots[TABLE];
} pair_ops_t;

static void *checked(const pair_ops_t *ops, size_t n) {
  void *p = ops->alloc(n);
  if (p == NULL) {
    fprintf(stderr, "hot_pair: malloc(%zu) failed\n", n);
    exit(1);
  }
  ((volatile char *)p)[0] = 1;
  return p;
}

static void run_lifo(const pair_ops_t *ops, long long pairs) {
  for (long long i = 0; i < pairs; i++)
    ops->release(checked(ops, ops->sizes[i & (TABLE - 1)]));
}

static void run_random(const pair_ops_t *ops, long long pairs, void **slot) {
  for (long long i = 0; i < pairs; i++) {
    unsigned s = ops->slots[i & (TABLE - 1)];
    ops->release(slot[s]);
    slot[s] = checked(ops, ops->sizes[(i + 1) & (TABLE - 1)]);
  }
}

int main(int argc, char **argv) {
  if (bench_wants_help(argc, argv, usage)) return 0;
  const char *mode = argc > 1 ? argv[1] : "malloc";
  long long pairs = bench_arg(argc, argv, 2, 10000000);
  long long min = bench_arg(argc, argv, 3, 8);
  long long max = bench_arg(argc, argv, 4, 64);
  const char *pattern = argc > 5 ? argv[5] : "lifo";
  long long ws = bench_arg(argc, argv, 6, 1000);
  bool is_null = strcmp(mode, "null") == 0;
  bool random = strcmp(pattern, "random") == 0;
  if ((!is_null && strcmp(mode, "malloc") != 0) ||
      (!random && strcmp(pattern, "lifo") != 0) || pairs < 0 || min < 1 ||
      max < min || max > (long long)sizeof null_block || ws < 1 || ws > TABLE)
    return bench_bad_args(usage);

  static pair_ops_t ops;
  ops.alloc = is_null ? null_malloc : malloc;
  ops.release = is_null ? null_free : free;
  bench_rng_t rng;
  bench_rng_seed(&rng, 1);
  for (int i = 0; i < TABLE; i++) {
    ops.sizes[i] =
        (unsigned)bench_rng_range(&rng, (uint64_t)min, (uint64_t)max);
    ops.slots[i] = (unsigned)bench_rng_range(&rng, 0, (uint64_t)ws - 1);
  }

  static void *slot[TABLE];
  if (random)
    for (long long s = 0; s < ws; s++)
      slot[s] = checked(&ops, ops.sizes[s]);
  double t0 = bench_now();
  if (random)
    run_random(&ops, pairs, slot);
  else
    run_lifo(&ops, pairs);
  double secs = bench_now() - t0;
  if (random)
    for (long long s = 0; s < ws; s++)
      ops.release(slot[s]);

  double rate = secs > 0 ? (double)pairs / secs : 0.0;
  bench_result("hot_pair",
               "mode=%s pattern=%s pairs=%lld min=%lld max=%lld "
               "ops/s=%.0f",
               mode, pattern, pairs, min, max, rate);
  return 0;
}
