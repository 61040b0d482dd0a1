/* stress_test — multi-threaded allocation stress with cross-thread frees.
 *
 * usage: stress_test [threads=4] [rounds=6] [iters=20000]
 *
 * Every round creates `threads` threads. Each thread, `iters` times,
 * allocates a block of a mixed size (mostly 8 B..4 KiB, some up to 256 KiB,
 * rare ones of 1..4 MiB; some calloc, some aligned_alloc with alignments
 * 32 B..64 KiB, some grown or shrunk with realloc), writes a cookie into
 * every byte of it and swaps it into a random slot of a shared exchange
 * array with atomic_exchange. Whatever comes out of the slot (in general a
 * block of another thread, often of a thread that has already exited) is
 * verified and freed, or sometimes reallocated first. A few blocks stay in a
 * small thread-local ring and are freed by their own thread. Blocks left in
 * the array at the end of a round are freed by the next round's threads; the
 * main thread verifies and frees whatever is left at the end.
 *
 * Block layout: the requested size is `size`; the block holds the first
 * `size` bytes of the word sequence
 *   w[0] = size | tag << 48      (tag: serial number of the allocating thread)
 *   w[i] = cookie(p, size, i)    (i >= 1)
 * so any stray write, a block handed out twice, a realloc that loses
 * contents or a usable size smaller than requested is detected before the
 * block is freed. Hand-off between threads is only through the atomic slots
 * (acq_rel exchanges), so the test itself is free of data races and can run
 * under ThreadSanitizer (built with -DTEST_HZ_API).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "test_alloc.h"
#include "test_util.h"

#define NSLOTS      4096        /* shared exchange array */
#define LOCAL_RING  32          /* blocks a thread keeps and frees itself */
#define MAX_BLOCK   (16u << 20) /* sanity bound for a size read from a header */
#define SIZE_MASK   ((UINT64_C(1) << 48) - 1)
#define MAX_REPORTS 20 /* detailed failure lines printed at most */

/* The sanitizers' own aligned_alloc (used when a sanitizer build is not
 * built with -DTEST_HZ_API) rejects sizes that are not a multiple of the
 * alignment, as C11 originally required. */
#if !defined(TEST_HZ_API) &&                                                   \
    (defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__))
#define STRICT_ALIGNED_SIZES 1
#else
#define STRICT_ALIGNED_SIZES 0
#endif

static _Atomic(void *) slots[NSLOTS];

static atomic_ulong g_errors;
static atomic_ulong g_reports;
static atomic_ulong g_allocs, g_frees, g_remote_frees, g_outlived_frees;
static atomic_ulong g_reallocs, g_aligned, g_callocs, g_large;
static atomic_uint g_next_tag;

/* Tags of the threads of the current round are >= round_first_tag; a block
 * freed with a smaller tag outlived the thread that allocated it. Written by
 * main before it creates the round's threads (pthread_create orders it). */
static unsigned round_first_tag;

/* ---------------------------------------------------------------- helpers */

static inline uint64_t cookie(uintptr_t p, size_t size, size_t i) {
  return ((uint64_t)p ^ (uint64_t)size ^ UINT64_C(0x5a17c0debadf00d5)) +
         (uint64_t)i * UINT64_C(0x9E3779B97F4A7C15);
}

/* Word i of the layout of a block (p, size, tag). */
static inline uint64_t expected_word(uintptr_t p, size_t size, unsigned tag,
                                     size_t i) {
  if (i == 0) return (uint64_t)size | ((uint64_t)tag << 48);
  return cookie(p, size, i);
}

/* Every failure counts in g_errors; at most MAX_REPORTS are printed. */
#define report(...)                                                            \
  (atomic_fetch_add(&g_errors, 1),                                             \
   test_report("stress_test", &g_reports, MAX_REPORTS, __VA_ARGS__))

static void fill(void *p, size_t size, unsigned tag) {
  uint64_t *w = p;
  size_t n = size / 8;
  uintptr_t a = (uintptr_t)p;
  w[0] = expected_word(a, size, tag, 0);
  for (size_t i = 1; i < n; i++)
    w[i] = cookie(a, size, i);
  if (size % 8) {
    uint64_t c = expected_word(a, size, tag, n);
    memcpy((unsigned char *)p + n * 8, &c, size % 8);
  }
}

/* Check that the first m bytes at q follow the layout of block
 * (orig, size, tag). Returns 1 if good; otherwise reports and returns 0. */
static int check_prefix(const void *q, size_t m, uintptr_t orig, size_t size,
                        unsigned tag, const char *what) {
  const uint64_t *w = q;
  size_t n = m / 8;
  size_t bad = 0, first = (size_t)-1;
  uint64_t first_exp = 0, first_got = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t e = expected_word(orig, size, tag, i);
    if (w[i] != e) {
      if (bad++ == 0) {
        first = i;
        first_exp = e;
        first_got = w[i];
      }
    }
  }
  if (m % 8) {
    uint64_t e = expected_word(orig, size, tag, n);
    if (memcmp((const unsigned char *)q + n * 8, &e, m % 8) != 0) {
      if (bad++ == 0) {
        first = n;
        first_exp = e;
        first_got = 0;
        memcpy(&first_got, (const unsigned char *)q + n * 8, m % 8);
      }
    }
  }
  if (bad) {
    report("%s: block %p (size %zu, layout of block 0x%lx, tag %u): %zu of %zu "
           "words corrupt, first at byte offset %zu: expected 0x%016llx "
           "got 0x%016llx",
           what, q, size, (unsigned long)orig, tag, bad, (m + 7) / 8, first * 8,
           (unsigned long long)first_exp, (unsigned long long)first_got);
    return 0;
  }
  return 1;
}

/* Read and sanity-check the header of a block: its size and tag.
 * Returns 1 if the block is intact (every byte checked). */
static int verify_block(void *p, size_t *size_out, unsigned *tag_out,
                        const char *what) {
  uint64_t h = *(const uint64_t *)p;
  size_t size = (size_t)(h & SIZE_MASK);
  unsigned tag = (unsigned)(h >> 48);
  if (size < 8 || size > MAX_BLOCK) {
    report("%s: block %p has a corrupt header 0x%016llx", what, p,
           (unsigned long long)h);
    return 0;
  }
  size_t us = t_usable_size(p);
  if (us < size) {
    report("%s: usable_size(%p) = %zu < requested size %zu", what, p, us, size);
    return 0;
  }
  *size_out = size;
  *tag_out = tag;
  return check_prefix(p, size, (uintptr_t)p, size, tag, what);
}

/* Size distribution: ~97.8% 8 B..4 KiB (log-uniform), ~2% 4..256 KiB,
 * ~0.02% 1..4 MiB. */
static size_t pick_size(uint64_t *rng) {
  uint64_t r = test_rng_next(rng);
  unsigned u = (unsigned)(r % 10000);
  r >>= 16;
  if (u < 2) return ((size_t)1 << 20) + (size_t)(r % (3u << 20));
  if (u < 202) {
    unsigned shift = 12 + (unsigned)(r % 6); /* 4 KiB .. 128 KiB */
    r >>= 8;
    return ((size_t)1 << shift) + (size_t)(r % ((size_t)1 << shift));
  }
  unsigned shift = 3 + (unsigned)(r % 9); /* 8 B .. 2 KiB */
  r >>= 8;
  return ((size_t)1 << shift) + (size_t)(r % ((size_t)1 << shift));
}

/* ---------------------------------------------------------------- workers */

struct counters {
  unsigned long allocs, frees, remote, outlived, reallocs, aligned, callocs,
      large;
};

struct worker {
  pthread_t th;
  unsigned tag;
  unsigned long iters;
  uint64_t seed;
};

static void free_block(void *p, unsigned my_tag, struct counters *c,
                       const char *what) {
  size_t size;
  unsigned tag;
  if (!verify_block(p, &size, &tag, what)) return; /* leak it: corrupt */
  if (tag != (my_tag & 0xffff)) c->remote++;
  if (tag < round_first_tag) c->outlived++; /* tags never wrap: see main */
  t_free(p);
  c->frees++;
}

/* Allocate a block of a mixed kind and fill it. NULL on failure (reported). */
static void *alloc_block(uint64_t *rng, unsigned tag, struct counters *c) {
  size_t size = pick_size(rng);
  unsigned kind = (unsigned)(test_rng_next(rng) % 100);
  void *p;
  if (kind < 1) {
    uint64_t r = test_rng_next(rng);
    size_t align = (size_t)32 << (r % 12); /* 32 B .. 64 KiB */
    /* Half of the sizes are multiples of the alignment (strict C11), half
     * arbitrary (accepted by glibc and hakozuna, C17 DR 460). */
    if (STRICT_ALIGNED_SIZES || (r >> 8) % 2 == 0)
      size = (size + align - 1) & ~(align - 1);
    p = t_aligned_alloc(align, size);
    if (p == NULL) {
      report("aligned_alloc(%zu, %zu) returned NULL", align, size);
      return NULL;
    }
    if ((uintptr_t)p % align != 0) {
      report("aligned_alloc(%zu, %zu) = %p is misaligned", align, size, p);
    }
    c->aligned++;
  } else if (kind < 3) {
    p = t_calloc(1, size);
    if (p == NULL) {
      report("calloc(1, %zu) returned NULL", size);
      return NULL;
    }
    const unsigned char *b = p;
    for (size_t i = 0; i < size; i++) {
      if (b[i] != 0) {
        report("calloc(1, %zu) = %p: byte %zu is 0x%02x, not zero", size, p, i,
               b[i]);
        break;
      }
    }
    c->callocs++;
  } else {
    p = t_malloc(size);
    if (p == NULL) {
      report("malloc(%zu) returned NULL", size);
      return NULL;
    }
    size_t need = size >= 16 ? alignof(max_align_t) : 8;
    if ((uintptr_t)p % need != 0)
      report("malloc(%zu) = %p is not %zu-aligned", size, p, need);
  }
  size_t us = t_usable_size(p);
  if (us < size) report("usable_size(%p) = %zu < %zu after alloc", p, us, size);
  if (size >= ((size_t)1 << 20)) c->large++;
  c->allocs++;
  fill(p, size, tag);
  return p;
}

/* Verify p, realloc it to a new size (usually larger), check the preserved
 * prefix and refill under the new layout with tag `tag`. Returns the new
 * block, or NULL if the block was corrupt (then it is leaked) or realloc
 * failed (then the old block was freed). */
static void *realloc_block(void *p, uint64_t *rng, unsigned tag,
                           struct counters *c) {
  size_t size;
  unsigned old_tag;
  if (!verify_block(p, &size, &old_tag, "before realloc")) return NULL;
  uint64_t r = test_rng_next(rng);
  size_t nsize;
  if (r % 4 == 0) {
    nsize = 8 + (size_t)((r >> 8) % size); /* shrink */
  } else {
    size_t cap = size < (1u << 20) ? size * 3 : (1u << 20);
    nsize = size + 1 + (size_t)((r >> 8) % cap); /* grow */
  }
  if (nsize > (8u << 20)) nsize = 8u << 20;
  uintptr_t old_addr = (uintptr_t)p;
  void *q = t_realloc(p, nsize);
  if (q == NULL) {
    report("realloc(%p, %zu) returned NULL (old size %zu)", p, nsize, size);
    t_free(p);
    return NULL;
  }
  size_t us = t_usable_size(q);
  if (us < nsize)
    report("usable_size(%p) = %zu < %zu after realloc", q, us, nsize);
  size_t keep = size < nsize ? size : nsize;
  if (!check_prefix(q, keep, old_addr, size, old_tag, "contents after realloc"))
    return NULL;
  c->reallocs++;
  fill(q, nsize, tag);
  return q;
}

/* Swap p into a random slot; verify and free (or sometimes realloc and
 * re-publish) whatever was there. */
static void publish(void *p, uint64_t *rng, unsigned tag, struct counters *c) {
  for (int hops = 0; p != NULL && hops < 4; hops++) {
    size_t idx = (size_t)(test_rng_next(rng) % NSLOTS);
    void *old = atomic_exchange_explicit(&slots[idx], p, memory_order_acq_rel);
    p = NULL;
    if (old == NULL) return;
    if (test_rng_next(rng) % 32 == 0) {
      /* realloc a block that (usually) another thread allocated, then put
       * it back into circulation */
      p = realloc_block(old, rng, tag, c);
    } else {
      free_block(old, tag, c, "before free");
    }
  }
  if (p != NULL) free_block(p, tag, c, "before free");
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  uint64_t rng = w->seed;
  unsigned tag = w->tag & 0xffff;
  struct counters c = {0};
  void *ring[LOCAL_RING] = {0};

  for (unsigned long it = 0; it < w->iters; it++) {
    void *p = alloc_block(&rng, tag, &c);
    if (p == NULL) continue;
    uint64_t r = test_rng_next(&rng);
    if (r % 16 == 0) {
      p = realloc_block(p, &rng, tag, &c); /* grow/shrink our own block */
      if (p == NULL) continue;
    }
    if ((r >> 8) % 4 != 0) {
      publish(p, &rng, tag, &c);
    } else {
      size_t k = (size_t)((r >> 16) % LOCAL_RING);
      void *old = ring[k];
      ring[k] = p;
      if (old != NULL) free_block(old, tag, &c, "before local free");
    }
  }
  /* Free half of the ring ourselves, leave the rest to outlive us. */
  for (size_t k = 0; k < LOCAL_RING; k++) {
    if (ring[k] == NULL) continue;
    if (k % 2 == 0)
      free_block(ring[k], tag, &c, "before local free");
    else
      publish(ring[k], &rng, tag, &c);
  }

  atomic_fetch_add(&g_allocs, c.allocs);
  atomic_fetch_add(&g_frees, c.frees);
  atomic_fetch_add(&g_remote_frees, c.remote);
  atomic_fetch_add(&g_outlived_frees, c.outlived);
  atomic_fetch_add(&g_reallocs, c.reallocs);
  atomic_fetch_add(&g_aligned, c.aligned);
  atomic_fetch_add(&g_callocs, c.callocs);
  atomic_fetch_add(&g_large, c.large);
  return NULL;
}

#define USAGE "stress_test [threads=4] [rounds=6] [iters=20000]"

int main(int argc, char **argv) {
  /* threads * rounds stays below 0xffff so thread tags fit in 16 bits */
  unsigned long nthreads = test_arg(argc, argv, 1, 4, 256, USAGE);
  unsigned long rounds = test_arg(argc, argv, 2, 6, 0xfffe / nthreads, USAGE);
  unsigned long iters = test_arg(argc, argv, 3, 20000, 100000000, USAGE);

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);

  struct worker *ws = calloc(nthreads, sizeof *ws);
  if (ws == NULL) {
    fprintf(stderr, "stress_test: out of memory\n");
    return 2;
  }
  atomic_store(&g_next_tag, 1);
  for (unsigned long r = 0; r < rounds; r++) {
    round_first_tag = atomic_load(&g_next_tag);
    for (unsigned long t = 0; t < nthreads; t++) {
      ws[t].tag = atomic_fetch_add(&g_next_tag, 1);
      ws[t].iters = iters;
      ws[t].seed = UINT64_C(0x9E3779B97F4A7C15) * (r * 1000 + t + 1) | 1;
      int rc = pthread_create(&ws[t].th, NULL, worker_main, &ws[t]);
      CHECK_MSG(rc == 0, "pthread_create failed: %s", strerror(rc));
      if (rc != 0) {
        ws[t].th = 0;
        break;
      }
    }
    for (unsigned long t = 0; t < nthreads; t++)
      if (ws[t].th) pthread_join(ws[t].th, NULL);
  }

  /* Drain: everything left in the exchange array was allocated by threads
   * that have exited; verify and free it from the main thread. */
  struct counters c = {0};
  round_first_tag = atomic_load(&g_next_tag);
  unsigned long left = 0;
  for (size_t i = 0; i < NSLOTS; i++) {
    void *p = atomic_exchange(&slots[i], NULL);
    if (p != NULL) {
      left++;
      free_block(p, 0xffff, &c, "before final free");
    }
  }
  atomic_fetch_add(&g_frees, c.frees);
  atomic_fetch_add(&g_remote_frees, c.remote);
  atomic_fetch_add(&g_outlived_frees, c.outlived);
  free(ws);

  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs =
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

  unsigned long allocs = atomic_load(&g_allocs);
  unsigned long frees = atomic_load(&g_frees);
  unsigned long errors = atomic_load(&g_errors);
  CHECK_MSG(errors == 0, "%lu corruption/allocation errors detected", errors);
  /* Every allocated block is freed exactly once unless it was corrupt (and
   * leaked on purpose) or realloc'ed (the old block is consumed by realloc,
   * the new one counted as a realloc, not an alloc). */
  CHECK_MSG(errors != 0 || frees == allocs,
            "allocated %lu blocks but freed %lu", allocs, frees);
  CHECK_MSG(atomic_load(&g_remote_frees) > 0 || nthreads == 1,
            "no block was freed by another thread");

  fprintf(stderr,
          "stress_test: threads=%lu rounds=%lu iters=%lu allocs=%lu "
          "frees=%lu remote_frees=%lu outlived_frees=%lu reallocs=%lu "
          "aligned=%lu callocs=%lu large=%lu drained=%lu errors=%lu "
          "secs=%.2f\n",
          nthreads, rounds, iters, allocs, frees, atomic_load(&g_remote_frees),
          atomic_load(&g_outlived_frees), atomic_load(&g_reallocs),
          atomic_load(&g_aligned), atomic_load(&g_callocs),
          atomic_load(&g_large), left, errors, secs);
  return check_report("stress_test");
}
