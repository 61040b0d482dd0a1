/* malloc_large: a fixed amount of work with very large blocks (5..25 MiB),
 * at most LIVE of them live. Each iteration picks a random slot, frees the
 * block there (if any), mallocs a new one and touches every page of it
 * (or, with STRIDE, its first byte and one every STRIDE bytes: 65536 is
 * the sparse case). Slots start empty, so the first iterations fill them.
 *
 * Result: secs = wall time of the ITERS iterations (lower is better). */
#include "slots.h"

static const char usage[] =
    "usage: malloc_large [ITERS] [LIVE] [STRIDE]\n"
    "  ITERS  iterations (malloc + touch, plus a free once a slot is used)\n"
    "         (default 2000)\n"
    "  LIVE   most blocks live at once (slots)     (default 20)\n"
    "  STRIDE bytes between writes to a new block  (default 4096)\n"
    "Blocks are 5..25 MiB, one byte written every STRIDE bytes and the\n"
    "last; random slot replacement; slots start empty. Seed is fixed (1).\n"
    "Metric: secs (fixed work: wall time of the ITERS iterations; lower is\n"
    "better). Remaining blocks are freed after timing.\n";

int main(int argc, char **argv) {
  /* name, slots key, ITERS and slots by default, sizes, fill, fixed work */
  static const bench_slots_spec_t spec = {
      "malloc_large", "live", 2000, 20, 5u << 20, 25u << 20, false, true};
  return bench_slots_main(argc, argv, usage, &spec);
}
