/* string_builder: tiny strings grown by realloc, copied, concatenated.
 *
 * One thread.  Each iteration:
 *   1. builds a string of target length 8..64 B the naive way: malloc a
 *      first piece of 1..6 bytes (+1 for the NUL), then append 1..6 bytes
 *      at a time, each append a realloc to the exact new size;
 *   2. copies the finished string (malloc + memcpy, like strdup) into a
 *      random slot of a pool of 1024 live strings, freeing the string that
 *      was there, and frees the builder;
 *   3. concatenates the copy with another random pool string into a fresh
 *      block (malloc + 2 memcpy), reads it, frees it.
 * So almost every block is 2..130 bytes and realloc mostly grows in place
 * within a size class.  The pool is freed at the end (not timed).
 *
 * Metric: ops/s = allocator calls (malloc + realloc + free) per second. */
#include "bench.h"

static const char *usage =
    "usage: string_builder [ITERS] [SEED]\n"
    "  ITERS  strings to build (default 9000000)\n"
    "  SEED   RNG seed (default 1)\n"
    "Builds 8-64 B strings by realloc'ing 1-6 bytes at a time, copies each\n"
    "into a pool of 1024 live strings (freeing the old one), concatenates it\n"
    "with another pooled string and frees the result.\n"
    "Reports: ops/s = malloc+realloc+free calls per second.\n";

#define POOL 1024

int main(int argc, char **argv) {
  long long a[] = {9000000, 1};
  if (bench_start(argc, argv, usage, a, 2)) return 0;
  long long iters = a[0], seed = a[1];
  if (iters < 1) return bench_bad_args(usage);
  bench_rng_t rng;
  bench_rng_seed(&rng, (uint64_t)seed);

  char *pool[POOL];
  size_t plen[POOL];
  for (int i = 0; i < POOL; i++) {
    pool[i] = NULL;
    plen[i] = 0;
  }

  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789 _-";
  unsigned long long calls = 0, mallocs = 0, reallocs = 0, frees = 0;
  uint64_t check = 0;

  double t0 = bench_now();
  for (long long it = 0; it < iters; it++) {
    size_t target = (size_t)bench_rng_range(&rng, 8, 64);
    size_t len = (size_t)bench_rng_range(&rng, 1, 6);
    char *s = bench_xmalloc(len + 1);
    mallocs++;
    for (size_t i = 0; i < len; i++)
      s[i] = alphabet[((size_t)it + i) % 39];
    while (len < target) {
      size_t add = (size_t)bench_rng_range(&rng, 1, 6);
      if (len + add > target) add = target - len;
      char *t = bench_xrealloc(s, len + add + 1);
      reallocs++;
      s = t;
      for (size_t i = 0; i < add; i++)
        s[len + i] = alphabet[(len + i) % 39];
      len += add;
    }
    s[len] = '\0';

    /* Copy into the pool. */
    size_t slot = (size_t)(bench_rng_next(&rng) % POOL);
    char *copy = bench_xmalloc(len + 1);
    mallocs++;
    memcpy(copy, s, len + 1);
    if (pool[slot] != NULL) {
      free(pool[slot]);
      frees++;
    }
    pool[slot] = copy;
    plen[slot] = len;
    free(s);
    frees++;

    /* Concatenate with another pooled string. */
    size_t other = (size_t)(bench_rng_next(&rng) % POOL);
    if (pool[other] != NULL) {
      size_t l2 = plen[other];
      char *cat = bench_xmalloc(len + l2 + 1);
      mallocs++;
      memcpy(cat, copy, len);
      memcpy(cat + len, pool[other], l2 + 1);
      check += (unsigned char)cat[(len + l2) / 2] + len + l2;
      free(cat);
      frees++;
    }
  }
  double secs = bench_now() - t0;

  for (int i = 0; i < POOL; i++)
    free(pool[i]);
  calls = mallocs + reallocs + frees;
  bench_result("string_builder",
               "iters=%lld seed=%lld mallocs=%llu reallocs=%llu frees=%llu "
               "calls=%llu check=%llu elapsed_s=%.3f ops/s=%.0f",
               iters, seed, mallocs, reallocs, frees, calls,
               (unsigned long long)check, secs, (double)calls / secs);
  return 0;
}
