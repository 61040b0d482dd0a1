/* API edge values for every libc allocation entry point and the hz_ API.
 *
 * The same binary runs linked against libhakozuna, under LD_PRELOAD, and
 * against plain glibc 2.36; every expectation below is what glibc 2.36 does
 * (the semantics hakozuna promises to match). The hz_ checks are built only
 * with -DHAVE_HZ_API. Entry points are reached through a table of function
 * pointers so the compiler cannot fold or elide allocation calls, and every
 * size goes through opaque() so huge constants do not trigger
 * -Walloc-size-larger-than. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "overcommit.h"

#ifdef HAVE_HZ_API
#include "hakozuna.h"
#endif

/* C23 / glibc >= 2.38 names that glibc 2.36 lacks; cfree survives in glibc
 * only as a compat symbol. NULL when nothing defines them. */
void free_sized(void *ptr, size_t size) __attribute__((weak));
void free_aligned_sized(void *ptr, size_t alignment, size_t size)
    __attribute__((weak));
void cfree(void *ptr) __attribute__((weak));

void *__libc_malloc(size_t size);
void __libc_free(void *ptr);
void *__libc_calloc(size_t count, size_t size);
void *__libc_realloc(void *ptr, size_t size);
void *__libc_memalign(size_t alignment, size_t size);
void *__libc_valloc(size_t size);
void *__libc_pvalloc(size_t size);

#define KiB              ((size_t)1 << 10)
#define MiB              ((size_t)1 << 20)
#define MAX_ALIGN_TESTED (4 * MiB)
#define SENTINEL         ((void *)(uintptr_t)0x5a5a1230)

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */
static size_t opaque(size_t x) {
  volatile size_t v = x;
  return v;
}

static int aligned_to(const void *p, size_t alignment) {
  return ((uintptr_t)p & (alignment - 1)) == 0;
}

static size_t next_pow2(size_t x) {
  size_t p = 1;
  while (p < x)
    p <<= 1;
  return p;
}

/* The alignment glibc guarantees for memalign/aligned_alloc(alignment, n):
 * at least 16, non-powers of two rounded up to the next power of two. */
static size_t expected_alignment(size_t alignment) {
  size_t a = next_pow2(alignment);
  return a < 16 ? 16 : a;
}

/* The fill pattern: byte i of a block is byte (i % 8) of word(i / 8), so
 * bulk fills and checks go a word at a time; the word depends on the seed
 * and the offset, so blocks with different seeds never look alike. */
static uint64_t pattern_word(size_t k, unsigned seed) {
  return (uint64_t)k * 0x9E3779B97F4A7C15ull +
         ((uint64_t)seed + 1) * 0xD6E8FEB86659FD93ull;
}

static unsigned char pattern_byte(size_t i, unsigned seed) {
  return (unsigned char)(pattern_word(i >> 3, seed) >> ((i & 7) * 8));
}

static void fill_range(void *p, size_t from, size_t to, unsigned seed) {
  unsigned char *b = p;
  size_t i = from;
  for (; i < to && (i & 7) != 0; i++)
    b[i] = pattern_byte(i, seed);
  for (; i + 8 <= to; i += 8) {
    uint64_t w = pattern_word(i >> 3, seed);
    memcpy(b + i, &w, 8);
  }
  for (; i < to; i++)
    b[i] = pattern_byte(i, seed);
}

/* Index of the first byte in [0, n) that differs from the pattern, or n. */
static size_t verify_range(const void *p, size_t n, unsigned seed) {
  const unsigned char *b = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    if (w != pattern_word(i >> 3, seed)) break;
  }
  for (; i < n; i++)
    if (b[i] != pattern_byte(i, seed)) return i;
  return n;
}

static size_t first_nonzero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != 0) return i;
  return n;
}

/* Report the section a fatal signal hit: a crash loses check_report(). */
static const char *volatile current_section = "start";

static void on_fatal(int sig) {
  static const char msg[] = "api_edge: fatal signal in section ";
  const char *s = current_section;
  ssize_t r = write(2, msg, sizeof msg - 1);
  r = write(2, s, strlen(s));
  r = write(2, "\n", 1);
  (void)r;
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_fatal_handlers(void) {
  signal(SIGSEGV, on_fatal);
  signal(SIGBUS, on_fatal);
  signal(SIGABRT, on_fatal);
  signal(SIGFPE, on_fatal);
}

/* ---------------------------------------------------------------------------
 * One family of entry points (libc names, __libc_ names, hz_ names);
 * a NULL member is a function the family does not have.
 * ------------------------------------------------------------------------- */
typedef struct {
  const char *name;
  void *(*malloc_fn)(size_t);
  void *(*calloc_fn)(size_t, size_t);
  void *(*realloc_fn)(void *, size_t);
  void *(*reallocarray_fn)(void *, size_t, size_t);
  void (*free_fn)(void *);
  void *(*aligned_alloc_fn)(size_t, size_t);
  void *(*memalign_fn)(size_t, size_t);
  int (*posix_memalign_fn)(void **, size_t, size_t);
  size_t (*usable_fn)(void *);
  void (*free_sized_fn)(void *, size_t);
  void (*free_aligned_sized_fn)(void *, size_t, size_t);
} api_t;

static size_t usable_of(const api_t *a, void *p) {
  return a->usable_fn ? a->usable_fn(p) : 0;
}

#ifdef HAVE_HZ_API
static size_t hz_usable_nonconst(void *p) { return hz_usable_size(p); }
#endif

/* The families, one row each, in the order of api_t's members: malloc,
 * calloc, realloc, reallocarray, free, aligned_alloc, memalign,
 * posix_memalign, usable size, free_sized, free_aligned_sized. */
static const api_t families[] = {
    {"", malloc, calloc, realloc, reallocarray, free, aligned_alloc, memalign,
     posix_memalign, malloc_usable_size, free_sized, free_aligned_sized},
    {"__libc_", __libc_malloc, __libc_calloc, __libc_realloc, NULL, __libc_free,
     NULL, __libc_memalign, NULL, malloc_usable_size, NULL, NULL},
#ifdef HAVE_HZ_API
    {"hz_", hz_malloc, hz_calloc, hz_realloc, hz_reallocarray, hz_free,
     hz_aligned_alloc, hz_memalign, hz_posix_memalign, hz_usable_nonconst,
     hz_free_sized, hz_free_aligned_sized},
#endif
};

/* A successful allocation of n bytes with the given alignment: non-NULL,
 * aligned, usable >= n. Returns the usable size to fill (n when the family
 * has no usable-size function). */
static size_t check_block(const api_t *a, const char *fn, const void *p,
                          size_t n, size_t alignment) {
  CHECK_MSG(p != NULL, "%s%s(size %zu, align %zu) returned NULL", a->name, fn,
            n, alignment);
  if (p == NULL) return 0;
  CHECK_MSG(aligned_to(p, alignment), "%s%s(size %zu): %p not %zu-aligned",
            a->name, fn, n, p, alignment);
  if (!a->usable_fn) return n;
  size_t u = a->usable_fn((void *)p);
  CHECK_MSG(u >= n, "%s%s(size %zu): usable %zu < requested", a->name, fn, n,
            u);
  return u >= n ? u : n;
}

/* NULL with errno == ENOMEM (errno was zeroed before the call). */
static void check_enomem(const api_t *a, const char *fn, void *p, int err,
                         size_t x, size_t y) {
  CHECK_MSG(p == NULL && err == ENOMEM,
            "%s%s(%zu, %zu): expected NULL/ENOMEM, got %p errno %d", a->name,
            fn, x, y, p, err);
  if (p != NULL) a->free_fn(p);
}

/* ---------------------------------------------------------------------------
 * Size tables
 * ------------------------------------------------------------------------- */
#define MAX_SIZES 512
static size_t good_sizes[MAX_SIZES];
static size_t n_good_sizes;

static void add_size(size_t n) {
  if (n_good_sizes < MAX_SIZES) good_sizes[n_good_sizes++] = n;
}

/* 0, 1, every 16 (and +-1) up to 1024, then four steps per power of two
 * (+-1) up to 1 MiB and powers of two +-1 up to 8 MiB. */
static void build_good_sizes(void) {
  add_size(0);
  add_size(1);
  for (size_t s = 16; s <= 1024; s += 16) {
    add_size(s - 1);
    add_size(s);
    add_size(s + 1);
  }
  for (size_t p = 1024; p <= 8 * MiB; p <<= 1) {
    size_t quarters = p < MiB ? 4 : 1;
    for (size_t q = 0; q < quarters; q++) {
      size_t s = p + q * (p / 4);
      if (s != 1024) add_size(s - 1);
      if (s != 1024) add_size(s);
      add_size(s + 1);
    }
  }
}

static const size_t huge_sizes[] = {
    SIZE_MAX,
    SIZE_MAX - 1,
    SIZE_MAX - 15,
    SIZE_MAX - 16,
    SIZE_MAX - 4095,
    SIZE_MAX - 4096,
    SIZE_MAX - (2 << 20) + 1,
    SIZE_MAX - (4 << 20),
    SIZE_MAX / 2,
    SIZE_MAX / 2 + 1,
    (size_t)PTRDIFF_MAX,
    (size_t)PTRDIFF_MAX - 15,
    (size_t)PTRDIFF_MAX + 1,
    (size_t)1 << 62,
    (size_t)1 << 48,
    (size_t)1 << 47,
};
#define N_HUGE (sizeof huge_sizes / sizeof huge_sizes[0])

/* ---------------------------------------------------------------------------
 * Every size in the table, all blocks live at once (so overlaps show up as
 * pattern damage), through each constructor of the family.
 * ------------------------------------------------------------------------- */
enum ctor {
  C_MALLOC,
  C_CALLOC,
  C_REALLOC_NULL,
  C_REALLOCARRAY_NULL,
  C_ALIGNED_ALLOC16,
  C_MEMALIGN16,
  C_POSIX_MEMALIGN16,
  C_COUNT
};
static const char *const ctor_names[C_COUNT] = {"malloc",
                                                "calloc",
                                                "realloc(NULL)",
                                                "reallocarray(NULL)",
                                                "aligned_alloc(16)",
                                                "memalign(16)",
                                                "posix_memalign(16)"};

static int ctor_available(const api_t *a, enum ctor c) {
  switch (c) {
  case C_REALLOCARRAY_NULL: return a->reallocarray_fn != NULL;
  case C_ALIGNED_ALLOC16: return a->aligned_alloc_fn != NULL;
  case C_MEMALIGN16: return a->memalign_fn != NULL;
  case C_POSIX_MEMALIGN16: return a->posix_memalign_fn != NULL;
  default: return 1;
  }
}

static void *construct(const api_t *a, enum ctor c, size_t n) {
  void *p = NULL;
  switch (c) {
  case C_MALLOC: return a->malloc_fn(n);
  case C_CALLOC: return a->calloc_fn(1, n);
  case C_REALLOC_NULL: return a->realloc_fn(NULL, n);
  case C_REALLOCARRAY_NULL: return a->reallocarray_fn(NULL, n, 1);
  case C_ALIGNED_ALLOC16: return a->aligned_alloc_fn(16, n);
  case C_MEMALIGN16: return a->memalign_fn(16, n);
  case C_POSIX_MEMALIGN16: {
    int r = a->posix_memalign_fn(&p, 16, n);
    CHECK_MSG(r == 0, "%sposix_memalign(16, %zu) returned %d", a->name, n, r);
    return r == 0 ? p : NULL;
  }
  default: return NULL;
  }
}

static void test_all_sizes_ctor(const api_t *a, enum ctor c) {
  static void *blocks[MAX_SIZES];
  static size_t filled[MAX_SIZES];
  for (size_t i = 0; i < n_good_sizes; i++) {
    size_t n = opaque(good_sizes[i]);
    blocks[i] = construct(a, c, n);
    filled[i] = check_block(a, ctor_names[c], blocks[i], n, 16);
    if (blocks[i] == NULL) continue;
    if (c == C_CALLOC) {
      size_t z = first_nonzero(blocks[i], n);
      CHECK_MSG(z == n, "%scalloc(1, %zu): byte %zu not zero", a->name, n, z);
    }
    fill_range(blocks[i], 0, filled[i], (unsigned)(i * 37 + c));
  }
  for (size_t i = 0; i < n_good_sizes; i++) {
    if (blocks[i] == NULL) continue;
    size_t bad = verify_range(blocks[i], filled[i], (unsigned)(i * 37 + c));
    CHECK_MSG(bad == filled[i],
              "%s%s(%zu): byte %zu of %zu usable changed while other blocks "
              "were written (overlap?)",
              a->name, ctor_names[c], good_sizes[i], bad, filled[i]);
    a->free_fn(blocks[i]);
  }
}

static void test_all_sizes(const api_t *a) {
  current_section = "all sizes";
  for (int c = 0; c < C_COUNT; c++)
    if (ctor_available(a, (enum ctor)c)) test_all_sizes_ctor(a, (enum ctor)c);
}

/* ---------------------------------------------------------------------------
 * Huge sizes: NULL + ENOMEM from every constructor.
 * ------------------------------------------------------------------------- */
static void test_huge_one(const api_t *a, size_t n) {
  void *p;
  errno = 0;
  p = a->malloc_fn(opaque(n));
  check_enomem(a, "malloc", p, errno, n, 0);
  errno = 0;
  p = a->calloc_fn(1, opaque(n));
  check_enomem(a, "calloc", p, errno, 1, n);
  errno = 0;
  p = a->calloc_fn(opaque(n), 1);
  check_enomem(a, "calloc", p, errno, n, 1);
  errno = 0;
  p = a->realloc_fn(NULL, opaque(n));
  check_enomem(a, "realloc(NULL)", p, errno, 0, n);
  if (a->reallocarray_fn) {
    errno = 0;
    p = a->reallocarray_fn(NULL, opaque(n), 1);
    check_enomem(a, "reallocarray(NULL)", p, errno, n, 1);
  }
  static const size_t aligns[] = {16, 64, 4096, 2 << 20, MAX_ALIGN_TESTED};
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
    size_t al = opaque(aligns[i]);
    if (a->aligned_alloc_fn) {
      errno = 0;
      p = a->aligned_alloc_fn(al, opaque(n));
      check_enomem(a, "aligned_alloc", p, errno, al, n);
    }
    if (a->memalign_fn) {
      errno = 0;
      p = a->memalign_fn(al, opaque(n));
      check_enomem(a, "memalign", p, errno, al, n);
    }
    if (a->posix_memalign_fn) {
      void *out = SENTINEL;
      int r = a->posix_memalign_fn(&out, al, opaque(n));
      CHECK_MSG(r == ENOMEM && out == SENTINEL,
                "%sposix_memalign(%zu, %zu): expected ENOMEM and *out "
                "untouched, got %d, *out %p",
                a->name, al, n, r, out);
      if (r == 0) a->free_fn(out);
    }
  }
}

static void test_huge_sizes(const api_t *a) {
  current_section = "huge sizes";
  for (size_t i = 0; i < N_HUGE; i++)
    test_huge_one(a, huge_sizes[i]);
  /* Round-up overflow in aligned paths: size just below SIZE_MAX - align. */
  static const size_t aligns[] = {32, 4096, 1 << 21};
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
    size_t al = aligns[i];
    size_t sizes[] = {SIZE_MAX - al + 1, SIZE_MAX - al, SIZE_MAX - 2 * al,
                      (size_t)PTRDIFF_MAX - al + 1};
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
      void *p;
      if (a->aligned_alloc_fn) {
        errno = 0;
        p = a->aligned_alloc_fn(opaque(al), opaque(sizes[j]));
        check_enomem(a, "aligned_alloc", p, errno, al, sizes[j]);
      }
      if (a->memalign_fn) {
        errno = 0;
        p = a->memalign_fn(opaque(al), opaque(sizes[j]));
        check_enomem(a, "memalign", p, errno, al, sizes[j]);
      }
    }
  }
}

/* Sizes the machine cannot back (twice its memory and swap, 1 TiB and
 * 64 TiB above that): the kernel refuses them (unless overcommit_memory is
 * 1), so every constructor must fail with ENOMEM as glibc's does, and a
 * realloc to one leaves the block as it was. */
static void test_beyond_machine(const api_t *a) {
  current_section = "sizes beyond the machine";
  size_t refused = overcommit_refused_size();
  if (refused == 0) {
    fprintf(stderr, "api_edge: note: overcommit_memory=1, the kernel grants "
                    "any size; skipping sizes beyond the machine\n");
    return;
  }
  const size_t sizes[] = {refused, (size_t)1 << 40, (size_t)64 << 40};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    if (sizes[i] < refused) continue;
    test_huge_one(a, sizes[i]);
    char *p = a->malloc_fn(opaque(1000));
    CHECK(p != NULL);
    if (p == NULL) continue;
    memset(p, 0x5C, 1000);
    errno = 0;
    void *q = a->realloc_fn(p, opaque(sizes[i]));
    check_enomem(a, "realloc", q, errno, 1000, sizes[i]);
    CHECK(p[0] == 0x5C && p[999] == 0x5C);
    a->free_fn(q != NULL ? q : p);
  }
}

/* ---------------------------------------------------------------------------
 * Zero-size requests: unique, non-NULL, freeable.
 * ------------------------------------------------------------------------- */
#define N_ZERO 64

static void *zero_request(const api_t *a, int kind) {
  void *p = NULL;
  switch (kind) {
  case 0: return a->malloc_fn(opaque(0));
  case 1: return a->calloc_fn(opaque(0), opaque(0));
  case 2: return a->calloc_fn(opaque(0), opaque(SIZE_MAX));
  case 3: return a->calloc_fn(opaque(SIZE_MAX), opaque(0));
  case 4: return a->realloc_fn(NULL, opaque(0));
  case 5: return a->reallocarray_fn ? a->reallocarray_fn(NULL, 0, 0) : NULL;
  case 6: return a->aligned_alloc_fn ? a->aligned_alloc_fn(64, 0) : NULL;
  case 7: return a->memalign_fn ? a->memalign_fn(4096, opaque(0)) : NULL;
  case 8:
    if (a->posix_memalign_fn && a->posix_memalign_fn(&p, 32, 0) != 0)
      return NULL;
    return p;
  default: return NULL;
  }
}

static int zero_kind_available(const api_t *a, int kind) {
  if (kind == 5) return a->reallocarray_fn != NULL;
  if (kind == 6) return a->aligned_alloc_fn != NULL;
  if (kind == 7) return a->memalign_fn != NULL;
  if (kind == 8) return a->posix_memalign_fn != NULL;
  return 1;
}

static void test_zero_size(const api_t *a) {
  static const char *const kinds[] = {
      "malloc(0)",           "calloc(0,0)",      "calloc(0,SIZE_MAX)",
      "calloc(SIZE_MAX,0)",  "realloc(NULL,0)",  "reallocarray(NULL,0,0)",
      "aligned_alloc(64,0)", "memalign(4096,0)", "posix_memalign(32,0)"};
  current_section = "zero size";
  for (int k = 0; k < 9; k++) {
    if (!zero_kind_available(a, k)) continue;
    void *live[N_ZERO];
    for (int i = 0; i < N_ZERO; i++) {
      errno = 0;
      live[i] = zero_request(a, k);
      CHECK_MSG(live[i] != NULL, "%s%s returned NULL (errno %d)", a->name,
                kinds[k], errno);
      CHECK_MSG(aligned_to(live[i], 16), "%s%s: %p not 16-aligned", a->name,
                kinds[k], live[i]);
      for (int j = 0; j < i; j++)
        CHECK_MSG(live[i] == NULL || (uintptr_t)live[i] != (uintptr_t)live[j],
                  "%s%s: live blocks %d and %d are both %p", a->name, kinds[k],
                  i, j, live[i]);
    }
    for (int i = 0; i < N_ZERO; i++)
      a->free_fn(live[i]);
  }
}

/* ---------------------------------------------------------------------------
 * Alignment
 * ------------------------------------------------------------------------- */
static const size_t odd_alignments[] = {0, 3, 24, 48, 100, 4095};
#define N_ODD_ALIGN (sizeof odd_alignments / sizeof odd_alignments[0])

/* Sizes tried at each alignment: tiny, around the alignment, and sizes that
 * are not a multiple of it. */
static size_t alignment_sizes(size_t al, size_t *out) {
  size_t k = 0;
  out[k++] = 0;
  out[k++] = 1;
  out[k++] = 10;
  out[k++] = 1000;
  if (al > 1) out[k++] = al - 1;
  if (al > 0) out[k++] = al;
  out[k++] = al + 1;
  out[k++] = 3 * al + 5;
  return k;
}

typedef void *(*aligned_fn_t)(size_t, size_t);

static void test_aligned_fn(const api_t *a, const char *fn, aligned_fn_t f,
                            size_t al) {
  size_t sizes[8], filled[8];
  void *blocks[8];
  size_t n = alignment_sizes(al, sizes);
  size_t want = expected_alignment(al);
  for (size_t i = 0; i < n; i++) {
    errno = 0;
    blocks[i] = f(opaque(al), opaque(sizes[i]));
    filled[i] = check_block(a, fn, blocks[i], sizes[i], want);
    if (blocks[i]) fill_range(blocks[i], 0, filled[i], (unsigned)(al + i));
  }
  for (size_t i = 0; i < n; i++) {
    if (!blocks[i]) continue;
    size_t bad = verify_range(blocks[i], filled[i], (unsigned)(al + i));
    CHECK_MSG(bad == filled[i], "%s%s(%zu, %zu): byte %zu changed (overlap?)",
              a->name, fn, al, sizes[i], bad);
    a->free_fn(blocks[i]);
  }
}

static int posix_alignment_valid(size_t al) {
  return al >= sizeof(void *) && (al & (al - 1)) == 0;
}

static void test_posix_memalign_at(const api_t *a, size_t al) {
  size_t sizes[8];
  size_t n = alignment_sizes(al, sizes);
  for (size_t i = 0; i < n; i++) {
    void *out = SENTINEL;
    int r = a->posix_memalign_fn(&out, opaque(al), opaque(sizes[i]));
    if (!posix_alignment_valid(al)) {
      CHECK_MSG(r == EINVAL && out == SENTINEL,
                "%sposix_memalign(%zu, %zu): expected EINVAL and *out "
                "untouched, got %d, *out %p",
                a->name, al, sizes[i], r, out);
      if (r == 0) a->free_fn(out);
      continue;
    }
    CHECK_MSG(r == 0, "%sposix_memalign(%zu, %zu) returned %d", a->name, al,
              sizes[i], r);
    if (r != 0) continue;
    size_t u =
        check_block(a, "posix_memalign", out, sizes[i], expected_alignment(al));
    fill_range(out, 0, u, 7);
    size_t bad = verify_range(out, u, 7);
    CHECK_MSG(bad == u, "%sposix_memalign(%zu, %zu): byte %zu not writable",
              a->name, al, sizes[i], bad);
    a->free_fn(out);
  }
}

static void test_alignment_at(const api_t *a, size_t al) {
  if (a->aligned_alloc_fn)
    test_aligned_fn(a, "aligned_alloc", a->aligned_alloc_fn, al);
  if (a->memalign_fn) test_aligned_fn(a, "memalign", a->memalign_fn, al);
  if (a->posix_memalign_fn) test_posix_memalign_at(a, al);
}

/* Alignments beyond any address space: EINVAL above SIZE_MAX/2+1 for
 * memalign/aligned_alloc; SIZE_MAX/2+1 itself is valid and gives ENOMEM. */
static void test_absurd_alignments(const api_t *a) {
  static const size_t bad[] = {SIZE_MAX / 2 + 2, SIZE_MAX / 2 + 9, SIZE_MAX};
  const size_t top = SIZE_MAX / 2 + 1;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    void *p;
    if (a->memalign_fn) {
      errno = 0;
      p = a->memalign_fn(opaque(bad[i]), opaque(10));
      CHECK_MSG(p == NULL && errno == EINVAL,
                "%smemalign(%zu, 10): expected NULL/EINVAL, got %p errno %d",
                a->name, bad[i], p, errno);
    }
    if (a->aligned_alloc_fn) {
      errno = 0;
      p = a->aligned_alloc_fn(opaque(bad[i]), opaque(10));
      CHECK_MSG(p == NULL && errno == EINVAL,
                "%saligned_alloc(%zu, 10): expected NULL/EINVAL, got %p "
                "errno %d",
                a->name, bad[i], p, errno);
    }
    if (a->posix_memalign_fn) {
      void *out = SENTINEL;
      int r = a->posix_memalign_fn(&out, opaque(bad[i]), opaque(10));
      CHECK_MSG(r == EINVAL && out == SENTINEL,
                "%sposix_memalign(%zu, 10): expected EINVAL, got %d *out %p",
                a->name, bad[i], r, out);
    }
  }
  if (a->memalign_fn) {
    errno = 0;
    void *p = a->memalign_fn(opaque(top), opaque(10));
    check_enomem(a, "memalign", p, errno, top, 10);
  }
  if (a->aligned_alloc_fn) {
    errno = 0;
    void *p = a->aligned_alloc_fn(opaque(top), opaque(10));
    check_enomem(a, "aligned_alloc", p, errno, top, 10);
  }
  if (a->posix_memalign_fn) {
    void *out = SENTINEL;
    int r = a->posix_memalign_fn(&out, opaque(top), opaque(10));
    CHECK_MSG(r == ENOMEM && out == SENTINEL,
              "%sposix_memalign(%zu, 10): expected ENOMEM, got %d *out %p",
              a->name, top, r, out);
  }
}

static void test_alignment(const api_t *a) {
  current_section = "alignment";
  for (size_t i = 0; i < N_ODD_ALIGN; i++)
    test_alignment_at(a, odd_alignments[i]);
  for (size_t al = 1; al <= MAX_ALIGN_TESTED; al <<= 1)
    test_alignment_at(a, al);
  if (a->posix_memalign_fn) {
    static const size_t einval[] = {12, 40, 4104};
    for (size_t i = 0; i < sizeof einval / sizeof einval[0]; i++)
      test_posix_memalign_at(a, einval[i]);
  }
  test_absurd_alignments(a);
}

/* ---------------------------------------------------------------------------
 * calloc
 * ------------------------------------------------------------------------- */
static void test_calloc_overflow(const api_t *a) {
  static const size_t pairs[][2] = {
      {SIZE_MAX / 2 + 1, 2},
      {2, SIZE_MAX / 2 + 1},
      {SIZE_MAX, SIZE_MAX},
      {(size_t)1 << 32, (size_t)1 << 32},
      {((size_t)1 << 32) + 1, ((size_t)1 << 32) - 1},
      {SIZE_MAX, 1},
      {(size_t)PTRDIFF_MAX + 1, 1},
      {((size_t)PTRDIFF_MAX + 1) / 16, 16},
      {3, SIZE_MAX / 3 + 1},
      {65536, ((size_t)1 << 48) + 1},
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    errno = 0;
    void *p = a->calloc_fn(opaque(pairs[i][0]), opaque(pairs[i][1]));
    check_enomem(a, "calloc", p, errno, pairs[i][0], pairs[i][1]);
  }
}

static const size_t reuse_sizes[] = {1,     24,     100,        1000, 4096,
                                     20000, 100000, 300 * 1024, MiB,  5 * MiB};
#define N_REUSE (sizeof reuse_sizes / sizeof reuse_sizes[0])

static void dirty_and_free(const api_t *a, void **blocks) {
  for (size_t i = 0; i < N_REUSE; i++) {
    if (!blocks[i]) continue;
    memset(blocks[i], 0xAB,
           a->usable_fn ? usable_of(a, blocks[i]) : reuse_sizes[i]);
    a->free_fn(blocks[i]);
    blocks[i] = NULL;
  }
}

/* calloc must zero memory that a previous block dirtied; the same total is
 * also requested as (count, size) pairs other than (1, n). */
static void test_calloc_reuse(const api_t *a) {
  void *blocks[N_REUSE];
  for (size_t i = 0; i < N_REUSE; i++)
    blocks[i] = a->malloc_fn(reuse_sizes[i]);
  dirty_and_free(a, blocks);
  for (int round = 0; round < 24; round++) {
    for (size_t i = 0; i < N_REUSE; i++) {
      size_t n = reuse_sizes[i];
      size_t count =
          (round % 3 == 0 || n % 8) ? 1 : (round % 3 == 1 ? n / 8 : 8);
      size_t size = n / count;
      blocks[i] = a->calloc_fn(opaque(count), opaque(size));
      if (!check_block(a, "calloc", blocks[i], n, 16)) continue;
      size_t z = first_nonzero(blocks[i], n);
      CHECK_MSG(z == n,
                "%scalloc(%zu, %zu) round %d: byte %zu of reused memory is "
                "0x%02x, not zero",
                a->name, count, size, round, z,
                ((unsigned char *)blocks[i])[z < n ? z : 0]);
    }
    dirty_and_free(a, blocks);
  }
}

static void test_calloc(const api_t *a) {
  current_section = "calloc";
  test_calloc_overflow(a);
  test_calloc_reuse(a);
}

/* ---------------------------------------------------------------------------
 * realloc / reallocarray
 * ------------------------------------------------------------------------- */
#define CHAIN_MAX 512

/* Walks one block through the sizes in steps[]; after each step the common
 * prefix must still hold the pattern, and the new tail is filled. */
static void realloc_chain(const api_t *a, const char *what, const size_t *steps,
                          size_t nsteps) {
  unsigned char *p = NULL;
  size_t cur = 0;
  const unsigned seed = 0x3c;
  for (size_t i = 0; i < nsteps; i++) {
    size_t n = steps[i];
    unsigned char *q = a->realloc_fn(p, opaque(n));
    CHECK_MSG(q != NULL, "%srealloc chain %s: %zu -> %zu returned NULL",
              a->name, what, cur, n);
    if (q == NULL) break;
    check_block(a, "realloc", q, n, 16);
    size_t keep = cur < n ? cur : n;
    size_t bad = verify_range(q, keep, seed);
    CHECK_MSG(bad == keep,
              "%srealloc chain %s: %zu -> %zu lost content at byte %zu",
              a->name, what, cur, n, bad);
    fill_range(q, keep, n, seed);
    p = q;
    cur = n;
  }
  a->free_fn(p);
}

static size_t arith(size_t *out, size_t from, size_t to, long step) {
  size_t k = 0;
  if (step > 0)
    for (size_t s = from; s <= to && k < CHAIN_MAX; s += (size_t)step)
      out[k++] = s;
  else
    for (size_t s = from, d = (size_t)-step; s >= to && k < CHAIN_MAX; s -= d) {
      out[k++] = s;
      if (s < d) break;
    }
  return k;
}

static void test_realloc_chains(const api_t *a) {
  static size_t steps[CHAIN_MAX];
  size_t k = 0;
  for (size_t s = 1; s <= 4 * MiB; s <<= 1)
    steps[k++] = s;
  realloc_chain(a, "doubling", steps, k);
  for (size_t i = 0; i < k / 2; i++) {
    size_t t = steps[i];
    steps[i] = steps[k - 1 - i];
    steps[k - 1 - i] = t;
  }
  realloc_chain(a, "halving", steps, k);
  k = arith(steps, 1, 3000, 40);
  realloc_chain(a, "+40 to 3000", steps, k);
  k = arith(steps, 1000, 700 * KiB, 8200);
  realloc_chain(a, "+8200 to 700K", steps, k);
  k = arith(steps, 100, 5 * MiB, 300 * KiB);
  realloc_chain(a, "+300K to 5M", steps, k);
  k = arith(steps, 700 * KiB, 1000, -8200);
  realloc_chain(a, "-8200 from 700K", steps, k);
  k = arith(steps, 3000, 1, -40);
  realloc_chain(a, "-40 from 3000", steps, k);
  static const size_t zigzag[] = {
      100,  300000,    50,        5 * MiB, 17,      4096,        4096, 4000,
      4100, 257 * KiB, 255 * KiB, 1,       2 * MiB, 2 * MiB - 1, 33};
  realloc_chain(a, "zigzag", zigzag, sizeof zigzag / sizeof zigzag[0]);
}

/* Filling to the usable size and realloc-ing to exactly that size (or a bit
 * less) must keep every byte. */
static void test_realloc_usable(const api_t *a) {
  if (!a->usable_fn) return;
  static const size_t sizes[] = {1, 17, 100, 1000, 5000, 70000, 300000, MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = a->malloc_fn(sizes[i]);
    size_t u = check_block(a, "malloc", p, sizes[i], 16);
    if (!p) continue;
    fill_range(p, 0, u, 9);
    unsigned char *q = a->realloc_fn(p, opaque(u));
    CHECK_MSG(q && verify_range(q, u, 9) == u,
              "%srealloc(p, usable %zu) lost content (malloc %zu)", a->name, u,
              sizes[i]);
    if (!q) continue;
    p = a->realloc_fn(q, opaque(u - u / 3));
    CHECK_MSG(p && verify_range(p, u - u / 3, 9) == u - u / 3,
              "%srealloc shrink to %zu lost content", a->name, u - u / 3);
    a->free_fn(p ? p : q);
  }
}

/* A malloc'ed block of n bytes of `fill`, checked; NULL (reported) if the
 * allocation failed. */
static unsigned char *filled_block(const api_t *a, size_t n, unsigned fill) {
  unsigned char *p = a->malloc_fn(n);
  if (!check_block(a, "malloc", p, n, 16)) return NULL;
  fill_range(p, 0, n, fill);
  return p;
}

/* reallocarray(p, count, size) or, without array, realloc(p, count * size)
 * (realloc's cases keep size 1 where count alone would overflow). */
static void *resize(const api_t *a, bool array, void *p, size_t count,
                    size_t size) {
  if (array) return a->reallocarray_fn(p, opaque(count), opaque(size));
  return a->realloc_fn(p, opaque(count * size));
}

/* Resizes that must fail, on one block: a block of n bytes of `fill` goes
 * through every call in bad, each of which must return NULL with ENOMEM
 * and leave the block as it was. The block must then still grow to 2n
 * bytes with its content; the grown block is returned (NULL, with the
 * block freed, if that failed). */
static unsigned char *grown_after_failures(const api_t *a, bool array, size_t n,
                                           const size_t (*bad)[2], size_t nbad,
                                           unsigned fill) {
  const char *call = array ? "reallocarray" : "realloc";
  unsigned char *p = filled_block(a, n, fill);
  if (p == NULL) return NULL;
  for (size_t j = 0; j < nbad; j++) {
    errno = 0;
    unsigned char *q = resize(a, array, p, bad[j][0], bad[j][1]);
    int err = errno;
    CHECK_MSG(q == NULL && err == ENOMEM,
              "%s%s(%zu-byte block, %zu, %zu): expected NULL/ENOMEM, got %p "
              "errno %d",
              a->name, call, n, bad[j][0], bad[j][1], (void *)q, err);
    if (q != NULL) {
      p = q;
      continue;
    }
    size_t damaged = verify_range(p, n, fill);
    CHECK_MSG(damaged == n,
              "%s%s(%zu-byte block, %zu, %zu) failed but damaged byte %zu",
              a->name, call, n, bad[j][0], bad[j][1], damaged);
  }
  unsigned char *q = resize(a, array, p, n, 2);
  CHECK_MSG(q && verify_range(q, n, fill) == n,
            "%s%s after failed calls: %zu -> %zu lost content", a->name, call,
            n, 2 * n);
  if (q == NULL) a->free_fn(p);
  return q;
}

static void test_realloc_failure(const api_t *a) {
  static const size_t sizes[] = {100, 5000, 300 * KiB, MiB};
  static const size_t huge[][2] = {{SIZE_MAX, 1},
                                   {SIZE_MAX - 15, 1},
                                   {(size_t)PTRDIFF_MAX + 1, 1},
                                   {(size_t)1 << 62, 1}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    a->free_fn(grown_after_failures(a, false, sizes[i], huge,
                                    sizeof huge / sizeof huge[0], 0x11));
}

/* glibc: realloc(p, 0) frees p and returns NULL; realloc(NULL, 0) is
 * malloc(0). */
static void test_realloc_zero(const api_t *a) {
  static const size_t sizes[] = {1, 100, 5000, 300 * KiB, 3 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *p = a->malloc_fn(sizes[i]);
    if (!check_block(a, "malloc", p, sizes[i], 16)) continue;
    void *q = a->realloc_fn(p, opaque(0));
    CHECK_MSG(q == NULL, "%srealloc(%zu-byte block, 0) returned %p, not NULL",
              a->name, sizes[i], q);
    if (q) a->free_fn(q);
  }
}

static void test_realloc(const api_t *a) {
  current_section = "realloc";
  test_realloc_chains(a);
  test_realloc_usable(a);
  test_realloc_failure(a);
  test_realloc_zero(a);
}

static void test_reallocarray(const api_t *a) {
  if (!a->reallocarray_fn) return;
  current_section = "reallocarray";
  static const size_t bad[][2] = {{SIZE_MAX / 2 + 1, 2},
                                  {(size_t)1 << 32, (size_t)1 << 32},
                                  {SIZE_MAX, SIZE_MAX},
                                  {(size_t)PTRDIFF_MAX + 1, 1},
                                  {3, SIZE_MAX / 3 + 1}};
  static const size_t sizes[] = {64, 4000, 400 * KiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *q = grown_after_failures(a, true, sizes[i], bad,
                                            sizeof bad / sizeof bad[0], 0x22);
    if (q == NULL) continue;
    void *z = a->reallocarray_fn(q, opaque(0), opaque(5));
    CHECK_MSG(z == NULL, "%sreallocarray(p, 0, 5) returned %p, not NULL",
              a->name, z);
    if (z) a->free_fn(z);
  }
  errno = 0;
  void *p = a->reallocarray_fn(NULL, opaque(SIZE_MAX), opaque(2));
  check_enomem(a, "reallocarray(NULL)", p, errno, SIZE_MAX, 2);
}

/* ---------------------------------------------------------------------------
 * free, free_sized, free_aligned_sized, usable size
 * ------------------------------------------------------------------------- */
static void test_free_errno(const api_t *a) {
  static const size_t sizes[] = {0,      1,         100,     4096,
                                 100000, 300 * KiB, 3 * MiB, 64 * MiB};
  current_section = "free";
  errno = 12345;
  a->free_fn(NULL);
  CHECK_MSG(errno == 12345, "%sfree(NULL) changed errno to %d", a->name, errno);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *p = a->malloc_fn(sizes[i]);
    check_block(a, "malloc", p, sizes[i], 16);
    if (!p) continue;
    memset(p, 1, sizes[i]);
    errno = 12345;
    a->free_fn(p);
    CHECK_MSG(errno == 12345, "%sfree(%zu-byte block) changed errno to %d",
              a->name, sizes[i], errno);
  }
  /* Many frees in a row (page and segment release paths). */
  void *many[256];
  for (int i = 0; i < 256; i++)
    many[i] = a->malloc_fn((size_t)(i * 997) % 70000);
  errno = 12345;
  for (int i = 0; i < 256; i++)
    a->free_fn(many[i]);
  CHECK_MSG(errno == 12345, "%s256 frees changed errno to %d", a->name, errno);
}

static void test_free_sized(const api_t *a) {
  current_section = "free_sized";
  static const size_t sizes[] = {0,    1,     16,        100,    1024,
                                 5000, 70000, 300 * KiB, 3 * MiB};
  if (a->free_sized_fn) {
    errno = 12345;
    a->free_sized_fn(NULL, 0);
    a->free_sized_fn(NULL, 100);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      size_t n = sizes[i];
      void *p = a->malloc_fn(n);
      void *c = a->calloc_fn(n / 4 + 1, 4);
      void *r = a->realloc_fn(a->malloc_fn(7), n + 9);
      a->free_sized_fn(p, n);
      a->free_sized_fn(c, (n / 4 + 1) * 4);
      a->free_sized_fn(r, n + 9);
    }
    CHECK_MSG(errno == 12345, "%sfree_sized changed errno to %d", a->name,
              errno);
  }
  if (a->free_aligned_sized_fn && a->aligned_alloc_fn) {
    errno = 12345;
    a->free_aligned_sized_fn(NULL, 64, 0);
    for (size_t al = 16; al <= MAX_ALIGN_TESTED; al <<= 1) {
      size_t n1 = al, n2 = 3 * al + 5;
      void *p = a->aligned_alloc_fn(al, n1);
      void *q = a->aligned_alloc_fn(al, n2);
      CHECK_MSG(p && q && aligned_to(p, al) && aligned_to(q, al),
                "%saligned_alloc(%zu, ...) before free_aligned_sized: %p %p",
                a->name, al, p, q);
      a->free_aligned_sized_fn(p, al, n1);
      a->free_aligned_sized_fn(q, al, n2);
    }
    CHECK_MSG(errno == 12345, "%sfree_aligned_sized changed errno to %d",
              a->name, errno);
  }
}

static void test_usable_size(const api_t *a) {
  if (!a->usable_fn) return;
  current_section = "usable size";
  CHECK_MSG(a->usable_fn(NULL) == 0, "%susable_size(NULL) = %zu, not 0",
            a->name, a->usable_fn(NULL));
  /* Writing the usable tail of one block must not reach its neighbours:
   * many same-size blocks side by side, tails written, all verified. */
  static const size_t sizes[] = {1, 8, 24, 40, 100, 250, 1000, 3000, 10000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    void *b[64];
    size_t u[64];
    for (int j = 0; j < 64; j++) {
      b[j] = a->malloc_fn(sizes[i]);
      u[j] = check_block(a, "malloc", b[j], sizes[i], 16);
      if (b[j]) fill_range(b[j], 0, u[j], (unsigned)j);
    }
    for (int j = 0; j < 64; j++) {
      if (!b[j]) continue;
      size_t bad = verify_range(b[j], u[j], (unsigned)j);
      CHECK_MSG(bad == u[j],
                "%smalloc(%zu) block %d: byte %zu of usable %zu overwritten by "
                "a neighbour",
                a->name, sizes[i], j, bad, u[j]);
      a->free_fn(b[j]);
    }
  }
}

static void run_family(const api_t *a) {
  test_all_sizes(a);
  test_huge_sizes(a);
  test_beyond_machine(a);
  test_zero_size(a);
  test_alignment(a);
  test_calloc(a);
  test_realloc(a);
  test_reallocarray(a);
  test_free_errno(a);
  test_free_sized(a);
  test_usable_size(a);
}

/* ---------------------------------------------------------------------------
 * libc-only entry points: valloc, pvalloc, cfree, maintenance
 * ------------------------------------------------------------------------- */
static void test_valloc_pvalloc(void) {
  current_section = "valloc/pvalloc";
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t sizes[] = {
      0, 1, 100, page - 1, page, page + 1, 3 * page + 5, MiB + 3, 5 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    void *v = valloc(opaque(n));
    CHECK_MSG(v && aligned_to(v, page), "valloc(%zu) = %p", n, v);
    if (v) {
      size_t u = malloc_usable_size(v);
      CHECK_MSG(u >= n, "valloc(%zu): usable %zu", n, u);
      memset(v, 0x5c, u);
      free(v);
    }
    void *p = pvalloc(opaque(n));
    CHECK_MSG(p && aligned_to(p, page), "pvalloc(%zu) = %p", n, p);
    if (p) {
      size_t u = malloc_usable_size(p);
      size_t rounded = (n + page - 1) & ~(page - 1);
      CHECK_MSG(u >= rounded, "pvalloc(%zu): usable %zu < %zu (whole pages)", n,
                u, rounded);
      memset(p, 0x5d, u);
      free(p);
    }
  }
  const size_t huge[] = {SIZE_MAX, SIZE_MAX - page + 2, SIZE_MAX - page + 1,
                         (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    errno = 0;
    void *v = valloc(opaque(huge[i]));
    CHECK_MSG(v == NULL && errno == ENOMEM,
              "valloc(%zu): expected NULL/ENOMEM, got %p errno %d", huge[i], v,
              errno);
    errno = 0;
    void *p = pvalloc(opaque(huge[i]));
    CHECK_MSG(p == NULL && errno == ENOMEM,
              "pvalloc(%zu): expected NULL/ENOMEM, got %p errno %d", huge[i], p,
              errno);
  }
}

static void test_cfree(void) {
  current_section = "cfree";
  if (!cfree) return;
  errno = 12345;
  cfree(NULL);
  for (size_t n = 1; n <= 4 * MiB; n *= 7)
    cfree(malloc(n));
  CHECK_MSG(errno == 12345, "cfree changed errno to %d", errno);
}

static void test_maintenance(void) {
  current_section = "maintenance";
  void *keep = malloc(3 * MiB);
  int t = malloc_trim(0);
  CHECK_MSG(t == 0 || t == 1, "malloc_trim(0) = %d", t);
  free(keep);
  t = malloc_trim(0);
  CHECK_MSG(t == 0 || t == 1, "malloc_trim(0) = %d", t);
  t = malloc_trim(opaque(MiB));
  CHECK_MSG(t == 0 || t == 1, "malloc_trim(1 MiB) = %d", t);
  struct mallinfo2 mi = mallinfo2();
  (void)mi;
  int r = mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  CHECK_MSG(r == 0 || r == 1, "mallopt(M_TRIM_THRESHOLD) = %d", r);
  r = mallopt(12345, 1);
  CHECK_MSG(r == 0 || r == 1, "mallopt(12345, 1) = %d", r);
  malloc_stats();
  /* Allocation still works after all of the above. */
  void *p = malloc(100);
  CHECK(p != NULL);
  free(p);
#ifdef HAVE_HZ_API
  hz_stats_print();
  hz_collect(false);
  hz_collect(true);
  p = hz_malloc(100);
  CHECK(p != NULL);
  hz_free(p);
#endif
}

/* ---------------------------------------------------------------------------
 * Mixing entry points: all names reach the same allocator.
 * ------------------------------------------------------------------------- */
static void test_mixing(void) {
  current_section = "mixing __libc_* and libc names";
  void *p = __libc_malloc(opaque(100));
  CHECK(p && malloc_usable_size(p) >= 100);
  free(p);
  p = malloc(opaque(200));
  __libc_free(p);
  p = __libc_calloc(opaque(10), opaque(30));
  CHECK(p && first_nonzero(p, 300) == 300);
  p = realloc(p, opaque(5000));
  CHECK(p != NULL);
  __libc_free(p);
  p = __libc_memalign(opaque(256), opaque(1000));
  CHECK(p && aligned_to(p, 256));
  p = __libc_realloc(p, opaque(3 * MiB));
  CHECK(p != NULL);
  free(p);
  p = aligned_alloc(opaque(4096), opaque(4096));
  CHECK(p && aligned_to(p, 4096));
  __libc_free(p);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  p = __libc_valloc(opaque(100));
  CHECK(p && aligned_to(p, page) && malloc_usable_size(p) >= 100);
  free(p);
  p = __libc_pvalloc(opaque(100));
  CHECK(p && aligned_to(p, page) && malloc_usable_size(p) >= page);
  __libc_free(p);
#ifdef HAVE_HZ_API
  current_section = "mixing hz_ and libc names";
  static const size_t sizes[] = {0, 1, 100, 5000, 300 * KiB, 3 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    p = malloc(n);
    CHECK_MSG(hz_usable_size(p) == malloc_usable_size(p),
              "malloc(%zu): hz_usable_size %zu != malloc_usable_size %zu", n,
              hz_usable_size(p), malloc_usable_size(p));
    hz_free(p);
    p = hz_malloc(n);
    CHECK_MSG(malloc_usable_size(p) == hz_usable_size(p),
              "hz_malloc(%zu): malloc_usable_size %zu != hz_usable_size %zu", n,
              malloc_usable_size(p), hz_usable_size(p));
    p = realloc(p, n + 100);
    p = hz_realloc(p, n * 2 + 1);
    free(p);
    p = aligned_alloc(64, n);
    hz_free_sized(p, n);
    p = hz_aligned_alloc(128, n);
    CHECK(p && aligned_to(p, 128));
    free(p);
    p = hz_calloc(1, n);
    __libc_free(p);
    p = __libc_malloc(n);
    hz_free(p);
    if (free_sized) free_sized(hz_malloc(n), n);
  }
#endif
}

int main(void) {
  install_fatal_handlers();
  build_good_sizes();
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
    run_family(&families[i]);
  test_valloc_pvalloc();
  test_cfree();
  test_maintenance();
  test_mixing();
  current_section = "report";
  return check_report("api_edge");
}
