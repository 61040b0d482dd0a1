/* vm_mixed: one thread, random replacement of big blocks (512 KiB..2 MiB)
 * in a small working set, so the allocator's handling of sizes around the
 * usual mmap threshold and its reuse of freed big blocks is what counts.
 * Every page of each new block is touched.
 *
 * Result: ops/s = iterations / wall time of the measured loop (one
 * iteration = one free + one malloc + touch). */
#include "slots.h"

static const char usage[] =
    "usage: vm_mixed [ITERS] [WS] [STRIDE]\n"
    "  ITERS  measured iterations     (default 100000)\n"
    "  WS     working-set slots       (default 32)\n"
    "  STRIDE bytes between writes    (default 4096: every page)\n"
    "One thread. WS slots are filled first (untimed); each iteration picks\n"
    "a random slot, frees its block, mallocs a new 512 KiB..2 MiB block and\n"
    "touches every page of it (bench_touch). Seed is fixed (1).\n"
    "Metric: ops/s (throughput) = ITERS / wall time.\n";

int main(int argc, char **argv) {
  /* name, slots key, ITERS and slots by default, sizes, fill, fixed work */
  static const bench_slots_spec_t spec = {"vm_mixed", "ws",     100000, 32,
                                          512u << 10, 2u << 20, true,   false};
  return bench_slots_main(argc, argv, usage, &spec);
}
