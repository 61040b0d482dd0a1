/* api_fuzz: libFuzzer drives the hz_ API from four threads and checks
 * every answer against a model of what each thread holds.
 *
 * An input is cut into four equal parts, one program per thread. A program
 * is a run of operations, each an opcode byte and its argument bytes:
 * malloc, calloc, realloc, reallocarray, memalign, aligned_alloc,
 * posix_memalign, free, free_sized, usable_size, collect (malloc_trim),
 * sizes that must fail, and handing a block to another thread through a
 * shared mailbox (so frees and reallocs cross threads).
 *
 * The model: each thread keeps SLOTS blocks with the size asked for and a
 * tag; every byte of a block holds a pattern made from its tag, so a block
 * that overlaps another, or loses its contents in a realloc, shows as a
 * wrong byte the next time it is checked (before every free, realloc and
 * hand-over, and at the end). On top: alignment, usable size (its extra
 * bytes are written too), calloc's zeros, errno and NULL for sizes that
 * must fail, and no two live blocks of one thread or of the whole input
 * overlapping. Any mismatch prints one line and aborts, which libFuzzer
 * records as a crash with its input. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hakozuna.h"

#define THREADS 4
#define SLOTS   16
#define MAILBOX 8

#define FAIL(...)                                                              \
  do {                                                                         \
    fprintf(stderr, "api_fuzz: " __VA_ARGS__);                                 \
    fputc('\n', stderr);                                                       \
    abort();                                                                   \
  } while (0)

typedef struct {
  unsigned char *p;
  size_t size;   /* bytes asked for */
  size_t filled; /* bytes holding the pattern (size, or the usable size) */
  size_t align;  /* asked of memalign (freed with free_aligned_sized), or 0 */
  uint32_t tag;
} block_t;

/* One thread's program and what it holds. */
typedef struct {
  const uint8_t *data;
  size_t len, at;
  uint32_t id;
  uint32_t next_tag;
  block_t slots[SLOTS];
} program_t;

static pthread_mutex_t mailbox_lock = PTHREAD_MUTEX_INITIALIZER;
static block_t mailbox[MAILBOX];

/* ---------------------------------------------------------------------------
 * Reading the program
 * ------------------------------------------------------------------------- */
static uint8_t take_byte(program_t *prog) {
  return prog->at < prog->len ? prog->data[prog->at++] : 0;
}

static uint16_t take_u16(program_t *prog) {
  uint16_t lo = take_byte(prog);
  return (uint16_t)(lo | (uint16_t)take_byte(prog) << 8);
}

/* A size in one of four ranges: tiny, small, medium or large blocks. */
static size_t take_size(program_t *prog) {
  uint16_t v = take_u16(prog);
  switch (v >> 14) {
  case 0: return v & 63;
  case 1: return v & 1023;
  case 2: return (size_t)(v & 0x3FFF) * 8;         /* to 128 KiB */
  default: return (size_t)(v & 0x3FFF) * 97 + 1;  /* to 1.5 MiB */
  }
}

static block_t *take_slot(program_t *prog) {
  return &prog->slots[take_byte(prog) % SLOTS];
}

/* ---------------------------------------------------------------------------
 * The model's checks
 * ------------------------------------------------------------------------- */
static unsigned char pattern(uint32_t tag, size_t k) {
  return (unsigned char)(tag * 131u + (uint32_t)k * 7u + (uint32_t)(k >> 8));
}

static void fill(block_t *b, size_t from) {
  for (size_t k = from; k < b->filled; k++)
    b->p[k] = pattern(b->tag, k);
}

static void verify(const block_t *b, const char *when) {
  for (size_t k = 0; k < b->filled; k++)
    if (b->p[k] != pattern(b->tag, k))
      FAIL("%s: block %p of %zu bytes changed at byte %zu", when,
           (void *)b->p, b->size, k);
}

static bool overlap(const block_t *a, const block_t *b) {
  size_t ea = a->size ? a->size : 1, eb = b->size ? b->size : 1;
  return a->p < b->p + eb && b->p < a->p + ea;
}

/* A new block: aligned, not overlapping anything the thread holds, its
 * usable size at least what was asked; then it takes its pattern. */
static void adopt(program_t *prog, block_t *slot, unsigned char *p,
                  size_t size, size_t align, const char *what) {
  if (p == NULL) FAIL("%s(%zu) returned NULL", what, size);
  size_t want = align < 16 ? 16 : align; /* every block is 16-aligned */
  if (((uintptr_t)p & (want - 1)) != 0)
    FAIL("%s(%zu) returned %p, not %zu-aligned", what, size, (void *)p, want);
  if (hz_usable_size(p) < size)
    FAIL("%s(%zu): usable size %zu", what, size, hz_usable_size(p));
  block_t fresh = {p, size, size, align, prog->next_tag++};
  for (int i = 0; i < SLOTS; i++)
    if (&prog->slots[i] != slot && prog->slots[i].p != NULL &&
        overlap(&prog->slots[i], &fresh))
      FAIL("%s(%zu) returned %p inside live block %p", what, size, (void *)p,
           (void *)prog->slots[i].p);
  *slot = fresh;
}

static void release(block_t *slot, bool sized) {
  if (slot->p == NULL) return;
  verify(slot, "free");
  if (sized && slot->align != 0)
    hz_free_aligned_sized(slot->p, slot->align, slot->size);
  else if (sized)
    hz_free_sized(slot->p, slot->size);
  else
    hz_free(slot->p);
  slot->p = NULL;
}

/* ---------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------- */
static void op_malloc(program_t *prog) {
  block_t *slot = take_slot(prog);
  size_t size = take_size(prog);
  release(slot, false);
  adopt(prog, slot, hz_malloc(size), size, 0, "malloc");
  fill(slot, 0);
}

static void op_calloc(program_t *prog) {
  block_t *slot = take_slot(prog);
  size_t count = take_byte(prog) % 16 + 1;
  size_t size = take_size(prog) / count;
  release(slot, false);
  adopt(prog, slot, hz_calloc(count, size), count * size, 0, "calloc");
  for (size_t k = 0; k < slot->size; k++)
    if (slot->p[k] != 0) FAIL("calloc: byte %zu of %zu is not zero", k, slot->size);
  fill(slot, 0);
}

/* realloc keeps the first min(old, new) bytes and the block's pattern; a
 * NULL block makes it a malloc, size 0 a free (glibc's rule). */
static void op_realloc(program_t *prog, bool array) {
  const char *what = array ? "reallocarray" : "realloc";
  block_t *slot = take_slot(prog);
  size_t size = take_size(prog);
  block_t old = *slot;
  if (old.p != NULL) verify(&old, what);
  unsigned char *p = array ? hz_reallocarray(old.p, 2, size / 2)
                           : hz_realloc(old.p, size);
  if (array) size = size / 2 * 2;
  slot->p = NULL;
  if (old.p != NULL && size == 0) {
    if (p != NULL) FAIL("%s(%p, 0) returned %p, not NULL", what, old.p, p);
    return;
  }
  adopt(prog, slot, p, size, 0, what);
  if (old.p == NULL) {
    fill(slot, 0);
    return;
  }
  slot->tag = old.tag;
  slot->filled = old.size < size ? old.size : size;
  verify(slot, what);
  size_t kept = slot->filled;
  slot->filled = size;
  fill(slot, kept);
}

static void op_aligned(program_t *prog) {
  block_t *slot = take_slot(prog);
  uint8_t how = take_byte(prog);
  size_t align = (size_t)1 << (how % 17); /* 1 B .. 64 KiB */
  size_t size = take_size(prog);
  release(slot, false);
  unsigned char *p = NULL;
  switch ((how >> 5) % 3) {
  case 0: p = hz_memalign(align, size); break;
  case 1: p = hz_aligned_alloc(align, size); break;
  default: {
    size_t a = align < sizeof(void *) ? sizeof(void *) : align;
    void *out = NULL;
    int rc = hz_posix_memalign(&out, a, size);
    if (rc != 0) FAIL("posix_memalign(%zu, %zu) returned %d", a, size, rc);
    p = out;
    align = a;
  }
  }
  adopt(prog, slot, p, size, align, "memalign");
  fill(slot, 0);
}

static void op_free(program_t *prog, bool sized) {
  release(take_slot(prog), sized);
}

/* The bytes past the size asked for are the caller's too. */
static void op_usable(program_t *prog) {
  block_t *slot = take_slot(prog);
  if (slot->p == NULL) return;
  verify(slot, "usable_size");
  size_t usable = hz_usable_size(slot->p);
  if (usable < slot->size)
    FAIL("usable size %zu of a %zu-byte block", usable, slot->size);
  size_t was = slot->filled;
  slot->filled = usable;
  fill(slot, was);
}

/* Sizes and alignments that must fail, leaving errno and every block as
 * they should be: ENOMEM for sizes and for an alignment of 2^63, EINVAL
 * for alignments past 2^63 (a smaller one that is no power of two is
 * rounded up, as glibc does). */
static void op_must_fail(program_t *prog) {
  uint8_t which = take_byte(prog) % 7;
  uint8_t below = take_byte(prog);
  size_t huge = SIZE_MAX - below;
  size_t past_top_bit = ((size_t)1 << 63) + 1 + below; /* no power of two */
  errno = 0;
  void *p = NULL;
  int want = ENOMEM;
  switch (which) {
  case 0: p = hz_malloc(huge); break;
  case 1: p = hz_calloc(huge / 2 + 2, 2); break;
  case 2: p = hz_aligned_alloc(64, huge); break;
  case 3: p = hz_memalign(past_top_bit, 64), want = EINVAL; break;
  case 6: p = hz_memalign((size_t)1 << 63, 64); break; /* valid, too big */
  case 4: {
    block_t *slot = take_slot(prog);
    p = hz_realloc(slot->p, huge);
    if (slot->p != NULL) verify(slot, "failed realloc");
    break;
  }
  default: {
    void *out = (void *)1;
    int rc = hz_posix_memalign(&out, 24, 64);
    if (rc != EINVAL || out != (void *)1)
      FAIL("posix_memalign(24, 64) returned %d", rc);
    return;
  }
  }
  if (p != NULL) FAIL("request %u of a huge size returned %p", which, p);
  if (errno != want)
    FAIL("request %u: errno %d, expected %d", which, errno, want);
}

/* Hand a block to whichever thread takes it from the mailbox next. */
static void op_send(program_t *prog) {
  block_t *slot = take_slot(prog);
  if (slot->p == NULL) return;
  verify(slot, "send");
  pthread_mutex_lock(&mailbox_lock);
  block_t *box = &mailbox[take_byte(prog) % MAILBOX];
  block_t swap = *box;
  *box = *slot;
  *slot = swap; /* whatever was in the box comes back */
  pthread_mutex_unlock(&mailbox_lock);
}

static void op_collect(program_t *prog) { hz_collect(take_byte(prog) & 1); }

static void run(program_t *prog) {
  while (prog->at < prog->len) {
    switch (take_byte(prog) % 12) {
    case 0: op_malloc(prog); break;
    case 1: op_calloc(prog); break;
    case 2: op_realloc(prog, false); break;
    case 3: op_realloc(prog, true); break;
    case 4: op_aligned(prog); break;
    case 5: op_free(prog, false); break;
    case 6: op_free(prog, true); break;
    case 7: op_usable(prog); break;
    case 8: op_must_fail(prog); break;
    case 9: op_send(prog); break;
    case 10: op_collect(prog); break;
    default: op_malloc(prog); break;
    }
  }
}

static void *run_thread(void *arg) {
  run(arg);
  return NULL;
}

/* ---------------------------------------------------------------------------
 * One input
 * ------------------------------------------------------------------------- */
static int by_start(const void *a, const void *b) {
  const block_t *x = a, *y = b;
  return x->p < y->p ? -1 : x->p > y->p;
}

/* Every live block of the input, across threads and the mailbox: intact
 * and disjoint; then all are freed. */
static void check_and_free_all(program_t *progs) {
  static block_t all[THREADS * SLOTS + MAILBOX];
  size_t n = 0;
  for (int t = 0; t < THREADS; t++)
    for (int i = 0; i < SLOTS; i++)
      if (progs[t].slots[i].p != NULL) all[n++] = progs[t].slots[i];
  for (int i = 0; i < MAILBOX; i++)
    if (mailbox[i].p != NULL) all[n++] = mailbox[i];
  memset(mailbox, 0, sizeof mailbox);
  qsort(all, n, sizeof all[0], by_start);
  for (size_t i = 0; i < n; i++) {
    verify(&all[i], "end of input");
    if (i > 0 && overlap(&all[i - 1], &all[i]))
      FAIL("live blocks %p and %p overlap", (void *)all[i - 1].p,
           (void *)all[i].p);
  }
  for (size_t i = 0; i < n; i++)
    release(&all[i], i & 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  static program_t progs[THREADS];
  size_t part = len / THREADS;
  for (int t = 0; t < THREADS; t++) {
    memset(&progs[t], 0, sizeof progs[t]);
    progs[t].data = data + (size_t)t * part;
    progs[t].len = t == THREADS - 1 ? len - (size_t)t * part : part;
    progs[t].id = (uint32_t)t;
    progs[t].next_tag = (uint32_t)t << 24;
  }
  pthread_t threads[THREADS];
  for (int t = 1; t < THREADS; t++)
    if (pthread_create(&threads[t], NULL, run_thread, &progs[t]) != 0)
      FAIL("pthread_create failed");
  run(&progs[0]);
  for (int t = 1; t < THREADS; t++)
    pthread_join(threads[t], NULL);
  check_and_free_all(progs);
  return 0;
}
