/* large: the cache of freed large mappings and resizing without copies.
 *
 * With a 64 MiB cache cap and no delayed purge (set before anything else):
 *   - hit: a freed mapping serves the next request of its size class, the
 *     newest of a class first, without a system call;
 *   - best fit: a request takes the newest mapping of a class from 4 below
 *     its own (grown with mremap) to 3 above, the one with the fewest pages
 *     to fault in, the smaller on a tie; never 4 or more classes above or 5
 *     or more below;
 *   - cap: over the cap the oldest mappings of the class just freed are
 *     unmapped first; a mapping bigger than the cap is never cached; when
 *     the cap is lowered at run time, the largest classes go next, oldest
 *     first, until the cache is back under the cap;
 *   - realloc: growth in place when the address space after the block is
 *     free, otherwise a move of the pages (mremap, no copy, no cache
 *     traffic); an over-aligned block that cannot grow in place is left
 *     alone; shrinking below half gives the tail back in place;
 *   - zeroing: a reused mapping is cleared for zero requests unless it is
 *     known to read as zeros (fresh, or purged with MADV_DONTNEED), and is
 *     then not touched at all; MADV_FREE leaves it to be cleared.
 * Unmapped mappings are recognised by the segment map: hz_segment_of() of
 * their block is NULL once they are gone. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "large.h"
#include "options.h"
#include "os.h"
#include "segment.h"
#include "stats.h"

#define KiB    ((size_t)1 << 10)
#define MiB    ((size_t)1 << 20)
#define HEADER HZ_LARGE_HEADER_SIZE
#define CAP    (64 * MiB)

/* Blocks the test keeps live to the end, so they stay out of the cache. */
static void *parked[256];
static int parked_count;

static void park(void *p) {
  CHECK(parked_count < 256);
  if (parked_count < 256) parked[parked_count++] = p;
}

static void set_option(const char *name, const char *value) {
  if (value != NULL)
    setenv(name, value, 1);
  else
    unsetenv(name);
  hz_options_init();
}

static hz_os_stats_t os_stats(void) {
  hz_os_stats_t s;
  hz_os_counts(&s);
  return s;
}

static size_t cached_regions(void) {
  size_t regions, bytes, dirty;
  hz_large_cached(&regions, &bytes, &dirty);
  return regions;
}

static size_t cached_bytes(void) {
  size_t regions, bytes, dirty;
  hz_large_cached(&regions, &bytes, &dirty);
  return bytes;
}

static size_t map_size_of(const void *p) {
  hz_segment_t *seg = hz_segment_of(p);
  return seg != NULL ? seg->map_size : 0;
}

/* A live block whose mapping is exactly `map` bytes (a class size). */
static void *alloc_mapping(size_t map) {
  void *p = hz_large_alloc(map - HEADER, 0, false);
  CHECK(p != NULL && map_size_of(p) == map);
  return p;
}

static void large_free(void *p) {
  hz_segment_t *seg = hz_segment_of(p);
  CHECK(seg != NULL && hz_large_owns(seg, p));
  if (seg != NULL) hz_large_free(seg);
}

/* Still mapped (registered) but not live: in the cache. */
static bool is_cached(const void *p) {
  hz_segment_t *seg = hz_segment_of(p);
  return seg != NULL && !hz_large_owns(seg, p);
}

static bool is_unmapped(const void *p) { return hz_segment_of(p) == NULL; }

/* Take the cached mappings a request for a `map`-byte mapping is served
 * from out of the cache (parked), until one comes freshly mapped. */
static void drain_class(size_t map) {
  for (;;) {
    size_t before = cached_regions();
    void *p = hz_large_alloc(map - HEADER, 0, false);
    CHECK(p != NULL);
    if (p == NULL) return;
    park(p);
    if (cached_regions() != before - 1) return; /* freshly mapped */
  }
}

/* Map `size` bytes of nothing at exactly addr; false if taken. */
static bool reserve_at(void *addr, size_t size) {
  void *r = mmap(addr, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (r == MAP_FAILED) return false;
  if (r != addr) { /* a kernel that took it as a hint */
    munmap(r, size);
    return false;
  }
  return true;
}

static bool all_bytes(const void *p, size_t n, unsigned char v) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) return false;
  return true;
}

/* Pages of [p, p + n) backed by memory (p page-aligned). */
static size_t resident_pages(void *p, size_t n) {
  size_t page = hz_os_page_size(), count = (n + page - 1) / page, resident = 0;
  unsigned char vec[4096];
  CHECK(count <= sizeof vec);
  if (count > sizeof vec || mincore(p, n, vec) != 0) return (size_t)-1;
  for (size_t i = 0; i < count; i++)
    resident += vec[i] & 1;
  return resident;
}

/* ---------------------------------------------------------------------------
 * Hits
 * ------------------------------------------------------------------------- */
static void test_hit(void) {
  CHECK(cached_regions() == 0);
  unsigned char *p = hz_large_alloc(MiB, 0, false);
  CHECK(p != NULL);
  if (p == NULL) return;
  hz_segment_t *seg = hz_segment_of(p);
  CHECK(seg != NULL && seg->kind == HZ_SEGMENT_LARGE);
  /* 1 MiB + header, rounded up to a 32nd of 1 MiB */
  CHECK(map_size_of(p) == MiB + 32 * KiB);
  CHECK(hz_large_usable_size(seg, p) == MiB + 32 * KiB - HEADER);
  memset(p, 0x5A, MiB);
  large_free(p);
  CHECK(is_cached(p));
  CHECK(cached_regions() == 1 && cached_bytes() == MiB + 32 * KiB);

  hz_os_stats_t s0 = os_stats();
  unsigned char *q = hz_large_alloc(MiB, 0, false);
  hz_os_stats_t s1 = os_stats();
  CHECK(q == p);
  CHECK(s1.mmap_calls == s0.mmap_calls && s1.munmap_calls == s0.munmap_calls);
  CHECK(cached_regions() == 0 && cached_bytes() == 0);
  CHECK(hz_large_owns(seg, q));

  /* Any size of the class fits the mapping. */
  large_free(q);
  q = hz_large_alloc(MiB + 200 * KiB, 0, false);
  CHECK(q == p);

  /* The newest of a class first. */
  void *older = hz_large_alloc(MiB, 0, false);
  large_free(older);
  large_free(q);
  void *first = hz_large_alloc(MiB, 0, false);
  void *second = hz_large_alloc(MiB, 0, false);
  CHECK(first == p && second == older);
  park(first);
  park(second);
  CHECK(cached_regions() == 0);
}

/* ---------------------------------------------------------------------------
 * Best fit: requests of class 8 (a 1 MiB mapping)
 * ------------------------------------------------------------------------- */
#define REQUEST (MiB - HEADER)

typedef enum { TAKEN, GROWN, NOT_TAKEN } borrow_t;

/* Free a mapping of `map` bytes, then make the request: it must take that
 * mapping as it is, grow it to 1 MiB (in place if the address space after
 * it is free, else by moving its pages), or leave it cached. */
static void check_borrow(size_t map, borrow_t expect) {
  CHECK(cached_regions() == 0);
  void *m = alloc_mapping(map);
  large_free(m);
  uint8_t *end = (uint8_t *)hz_segment_of(m) + map;
  bool room = map < MiB && reserve_at(end, MiB - map);
  if (room) munmap(end, MiB - map);
  hz_os_stats_t s0 = os_stats();
  void *p = hz_large_alloc(REQUEST, 0, false);
  hz_os_stats_t s1 = os_stats();
  CHECK(p != NULL);
  park(p);
  switch (expect) {
  case TAKEN:
    CHECK_MSG(p == m, "a %zu KiB mapping not lent to a 1 MiB request",
              map / KiB);
    CHECK(map_size_of(p) == map); /* the mapping keeps its size */
    CHECK(s1.mmap_calls == s0.mmap_calls && s1.mremap_calls == s0.mremap_calls);
    break;
  case GROWN:
    CHECK_MSG(room ? p == m : is_unmapped(m),
              "a %zu KiB mapping not grown for a 1 MiB request", map / KiB);
    CHECK(map_size_of(p) == MiB);
    CHECK(s1.mremap_calls == s0.mremap_calls + 1);
    CHECK(s1.mmap_calls == s0.mmap_calls + (room ? 0 : 1));
    CHECK(cached_regions() == 0);
    break;
  case NOT_TAKEN:
    CHECK_MSG(p != m, "a %zu KiB mapping lent to a 1 MiB request", map / KiB);
    CHECK(map_size_of(p) == MiB);
    CHECK(s1.mmap_calls == s0.mmap_calls + 1);
    CHECK(is_cached(m));
    drain_class(map);
    break;
  }
}

static void test_best_fit(void) {
  check_borrow(1280 * KiB, TAKEN);     /* class 9: 1 above */
  check_borrow(1792 * KiB, TAKEN);     /* class 11: 3 above */
  check_borrow(2 * MiB, TAKEN);        /* class 12: 4 above */
  check_borrow(4 * MiB, TAKEN);        /* class 16: 8 above */
  check_borrow(5 * MiB, NOT_TAKEN);    /* class 17: 9 above */
  check_borrow(768 * KiB, GROWN);      /* class 6: 2 below */
  check_borrow(512 * KiB, GROWN);      /* class 4: 4 below */
  check_borrow(448 * KiB, NOT_TAKEN);  /* class 3: 5 below */

  /* Both fit with nothing to fault in: the smaller, even if freed first. */
  CHECK(cached_regions() == 0);
  void *small = alloc_mapping(1280 * KiB), *big = alloc_mapping(1792 * KiB);
  large_free(small);
  large_free(big);
  void *p = hz_large_alloc(REQUEST, 0, false);
  void *q = hz_large_alloc(REQUEST, 0, false);
  CHECK(p == small && q == big);

  /* The one with fewer pages to fault in: the small one was purged. */
  large_free(p);
  hz_large_purge(hz_os_now_ms(), true);
  large_free(q);
  void *r = hz_large_alloc(REQUEST, 0, false);
  CHECK_MSG(r == big, "a purged mapping taken over one still resident");

  /* Both purged: a tie, the smaller. */
  large_free(r);
  hz_large_purge(hz_os_now_ms(), true);
  r = hz_large_alloc(REQUEST, 0, false);
  CHECK(r == small);
  park(r);
  drain_class(1792 * KiB);
  CHECK(cached_regions() == 0);

  /* Pages, not bytes: a block of an odd size left the last page of its
   * request resident, so nothing is to fault in for that size again. */
  void *odd = hz_large_alloc(MiB + 100, 0, false); /* 1.25 MiB mapping */
  void *odd_big = alloc_mapping(1536 * KiB);
  large_free(odd);
  large_free(odd_big);
  r = hz_large_alloc(MiB + 100, 0, false);
  CHECK_MSG(r == odd, "a bigger mapping taken over the one of the same "
                      "request, both resident");
  park(r);
  drain_class(1536 * KiB);
  drain_class(1280 * KiB);
  CHECK(cached_regions() == 0);
}

/* ---------------------------------------------------------------------------
 * The byte cap and eviction order
 * ------------------------------------------------------------------------- */
static void test_cap(void) {
  CHECK(cached_regions() == 0);
  void *a[5], *b[2];
  for (int i = 0; i < 5; i++)
    a[i] = alloc_mapping(8 * MiB); /* class 20 */
  for (int i = 0; i < 2; i++)
    b[i] = alloc_mapping(16 * MiB); /* class 24 */
  large_free(a[0]);
  large_free(a[1]);
  large_free(a[2]);
  large_free(b[0]);
  large_free(b[1]);
  large_free(a[3]); /* exactly at the cap: nothing goes */
  CHECK(cached_bytes() == CAP && cached_regions() == 6);

  /* Over the cap: the oldest of the class just freed, a[0]. */
  hz_os_stats_t s0 = os_stats();
  large_free(a[4]);
  hz_os_stats_t s1 = os_stats();
  CHECK_MSG(is_unmapped(a[0]), "the oldest 8 MiB mapping was kept");
  for (int i = 1; i < 5; i++)
    CHECK(is_cached(a[i]));
  CHECK(is_cached(b[0]) && is_cached(b[1]));
  CHECK(s1.munmap_calls == s0.munmap_calls + 1);
  CHECK(cached_bytes() == CAP && cached_regions() == 6);

  /* A class of its own: the mapping just freed is its class's oldest. */
  void *c = alloc_mapping(MiB);
  large_free(c);
  CHECK(is_unmapped(c));
  CHECK(cached_bytes() == CAP && cached_regions() == 6);

  /* Bigger than the cap: mapped to size, unmapped on free. */
  size_t page = hz_os_page_size();
  void *x = hz_large_alloc(80 * MiB, 0, false);
  CHECK(x != NULL && map_size_of(x) == HZ_ALIGN_UP(80 * MiB + HEADER, page));
  s0 = os_stats();
  large_free(x);
  s1 = os_stats();
  CHECK(is_unmapped(x));
  CHECK(s1.munmap_calls == s0.munmap_calls + 1);
  CHECK(cached_bytes() == CAP);

  /* Cap lowered to 40 MiB: d goes (its class first), then the largest
   * class oldest first: b[0], b[1]; the 8 MiB mappings stay. */
  set_option("HZ_LARGE_CACHE_MAX", "40M");
  void *d = alloc_mapping(MiB);
  large_free(d);
  CHECK(is_unmapped(d));
  CHECK_MSG(is_unmapped(b[0]) && is_unmapped(b[1]),
            "16 MiB mappings kept over the cap: b[0] %s, b[1] %s",
            is_unmapped(b[0]) ? "unmapped" : "cached",
            is_unmapped(b[1]) ? "unmapped" : "cached");
  for (int i = 1; i < 5; i++)
    CHECK_MSG(is_cached(a[i]),
              "8 MiB mapping a[%d] evicted before the "
              "larger ones",
              i);
  CHECK(cached_bytes() <= 40 * MiB);

  /* Several mappings of one class over a lowered cap all go as needed. */
  set_option("HZ_LARGE_CACHE_MAX", "64M");
  drain_class(8 * MiB);
  drain_class(16 * MiB);
  CHECK(cached_regions() == 0);
  void *e[3];
  for (int i = 0; i < 3; i++)
    e[i] = alloc_mapping(16 * MiB);
  for (int i = 0; i < 3; i++)
    large_free(e[i]);
  set_option("HZ_LARGE_CACHE_MAX", "20M");
  void *f = alloc_mapping(MiB);
  large_free(f);
  CHECK_MSG(cached_bytes() <= 20 * MiB,
            "%zu MiB cached over a 20 MiB cap (e[0] %s, e[1] %s, e[2] %s)",
            cached_bytes() / MiB, is_unmapped(e[0]) ? "unmapped" : "cached",
            is_unmapped(e[1]) ? "unmapped" : "cached",
            is_unmapped(e[2]) ? "unmapped" : "cached");
  CHECK(is_unmapped(f) && is_unmapped(e[0]) && is_unmapped(e[1]));
  CHECK(is_cached(e[2]));
  set_option("HZ_LARGE_CACHE_MAX", "64M");
  drain_class(16 * MiB);
  CHECK(cached_regions() == 0);
}

/* ---------------------------------------------------------------------------
 * realloc
 * ------------------------------------------------------------------------- */
static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i += 512)
    p[i] = (unsigned char)(seed + i / 512 * 7);
}

static bool filled(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i += 512)
    if (p[i] != (unsigned char)(seed + i / 512 * 7)) return false;
  return true;
}

/* A fresh 1 MiB block (1 MiB + 32 KiB mapping) with `room` bytes of free
 * address space after its mapping; NULL if none turned up. */
static unsigned char *block_with_room(size_t room) {
  for (int i = 0; i < 32; i++) {
    unsigned char *p = hz_large_alloc(MiB, 0, false);
    CHECK(p != NULL);
    if (p == NULL) return NULL;
    uint8_t *end = (uint8_t *)hz_segment_of(p) + map_size_of(p);
    if (reserve_at(end, room)) {
      munmap(end, room);
      return p;
    }
    park(p);
  }
  return NULL;
}

static void test_realloc(void) {
  CHECK(cached_regions() == 0);
  /* Growth in place: 1 MiB + 32 KiB -> 2 MiB + 64 KiB mapping. */
  unsigned char *p = block_with_room(MiB + 32 * KiB);
  CHECK_MSG(p != NULL, "no block with free address space after it");
  if (p == NULL) return;
  hz_segment_t *seg = hz_segment_of(p);
  fill(p, MiB, 1);
  hz_os_stats_t s0 = os_stats();
  unsigned char *q = hz_large_realloc(seg, p, 2 * MiB);
  hz_os_stats_t s1 = os_stats();
  CHECK(q != NULL);
  if (q == NULL) return;
  CHECK_MSG(q == p, "grew by moving although the space after was free");
  CHECK(map_size_of(q) == 2 * MiB + 64 * KiB);
  CHECK(hz_large_usable_size(hz_segment_of(q), q) ==
        2 * MiB + 64 * KiB - HEADER);
  CHECK(s1.mremap_calls == s0.mremap_calls + 1);
  CHECK(s1.mmap_calls == s0.mmap_calls && s1.munmap_calls == s0.munmap_calls);
  CHECK(s1.mapped_bytes == s0.mapped_bytes + MiB + 32 * KiB);
  CHECK(filled(q, MiB, 1));
  q[2 * MiB - 1] = 1; /* the new part is writable */
  if (q != p) return;

  /* A guard page right after the mapping: the pages must move (to a fresh
   * 4 MiB-aligned place) without a copy and without going through the
   * cache. */
  uint8_t *end = (uint8_t *)seg + map_size_of(p);
  bool guarded = reserve_at(end, hz_os_page_size()); /* else taken already */
  fill(p, 2 * MiB, 2);
  s0 = os_stats();
  size_t live0 = hz_stats_large_live_bytes();
  q = hz_large_realloc(seg, p, 6 * MiB);
  s1 = os_stats();
  if (guarded) munmap(end, hz_os_page_size());
  CHECK(q != NULL && q != p);
  if (q == NULL) return;
  CHECK(((uintptr_t)q - HEADER) % HZ_SEGMENT_SIZE == 0);
  CHECK(is_unmapped(p));
  CHECK(hz_segment_of(q) != NULL && hz_large_owns(hz_segment_of(q), q));
  CHECK(map_size_of(q) == 6 * MiB + 128 * KiB);
  CHECK(filled(q, 2 * MiB, 2));
  CHECK(s1.mremap_calls == s0.mremap_calls + 1);
  CHECK(s1.mmap_calls == s0.mmap_calls + 1); /* the destination only */
  CHECK_MSG(s1.mapped_bytes == s0.mapped_bytes + 4 * MiB + 64 * KiB,
            "mapped %zu -> %zu bytes: more than the growth", s0.mapped_bytes,
            s1.mapped_bytes);
  CHECK(hz_stats_large_live_bytes() == live0 + 4 * MiB + 64 * KiB);
  CHECK(cached_regions() == 0);
  q[6 * MiB - 1] = 1;

  /* Shrink below half: in place, to the page. */
  seg = hz_segment_of(q);
  s0 = os_stats();
  unsigned char *r = hz_large_realloc(seg, q, 3 * MiB);
  s1 = os_stats();
  CHECK(r == q);
  CHECK(map_size_of(r) == 3 * MiB + HEADER);
  CHECK(hz_large_usable_size(seg, r) == 3 * MiB);
  CHECK(s1.mremap_calls == s0.mremap_calls + 1);
  CHECK(s1.mapped_bytes == s0.mapped_bytes - (3 * MiB + 128 * KiB - HEADER));
  CHECK(filled(r, 2 * MiB, 2));
  /* Not below half: nothing changes. */
  s0 = os_stats();
  CHECK(hz_large_realloc(seg, r, 2 * MiB) == r);
  s1 = os_stats();
  CHECK(map_size_of(r) == 3 * MiB + HEADER);
  CHECK(s1.mremap_calls == s0.mremap_calls);
  /* The shrunk mapping serves requests of the class below it. */
  large_free(r);
  void *again = hz_large_alloc(3 * MiB - HEADER, 0, false);
  CHECK(again == r);
  park(again);

  /* Over-aligned (8 MiB): cannot grow in place, must not move. */
  unsigned char *o = hz_large_alloc(MiB, 8 * MiB, false);
  CHECK(o != NULL && (uintptr_t)o % (8 * MiB) == 0);
  if (o == NULL) return;
  hz_segment_t *oseg = hz_segment_of(o);
  end = (uint8_t *)oseg + oseg->map_size;
  guarded = reserve_at(end, hz_os_page_size()); /* else taken already */
  fill(o, MiB, 3);
  CHECK(hz_large_realloc(oseg, o, 4 * MiB) == NULL);
  CHECK(hz_large_owns(oseg, o) && oseg->map_size == 5 * MiB);
  CHECK(filled(o, MiB, 3));
  if (guarded) munmap(end, hz_os_page_size());
  park(o);
}

/* ---------------------------------------------------------------------------
 * Zero requests
 * ------------------------------------------------------------------------- */
#define ZSIZE (3 * MiB) /* a 3 MiB + 64 KiB mapping */

static void test_zero(void) {
  CHECK(cached_regions() == 0);
  /* Fresh: reads as zeros, and a zero request does not touch it. */
  unsigned char *p = hz_large_alloc(ZSIZE, 0, true);
  CHECK(p != NULL);
  if (p == NULL) return;
  CHECK(resident_pages(p, ZSIZE) == 0);
  CHECK(all_bytes(p, ZSIZE, 0));

  /* Reused, not purged: cleared for zero requests only. */
  memset(p, 0xAB, ZSIZE);
  large_free(p);
  unsigned char *q = hz_large_alloc(ZSIZE, 0, true);
  CHECK(q == p);
  CHECK_MSG(all_bytes(q, ZSIZE, 0), "a reused mapping was not cleared");
  memset(q, 0xCD, ZSIZE);
  large_free(q);
  q = hz_large_alloc(ZSIZE, 0, false);
  CHECK(q == p);
  CHECK_MSG(all_bytes(q, ZSIZE, 0xCD), "a cached mapping lost its content "
                                       "with the purge delay at -1");

  /* Purged with MADV_DONTNEED: zeros without being touched. */
  large_free(q);
  hz_os_stats_t s0 = os_stats();
  hz_large_purge(hz_os_now_ms(), true);
  hz_os_stats_t s1 = os_stats();
  CHECK(s1.madvise_calls == s0.madvise_calls + 1);
  CHECK(s1.purged_bytes == s0.purged_bytes + ZSIZE + 64 * KiB - HEADER);
  q = hz_large_alloc(ZSIZE, 0, true);
  CHECK(q == p);
  CHECK_MSG(resident_pages(q, ZSIZE) == 0,
            "a purged mapping was cleared by hand (%zu pages resident)",
            resident_pages(q, ZSIZE));
  CHECK(all_bytes(q, ZSIZE, 0));
  memset(q, 0xEF, ZSIZE);
  large_free(q);
  hz_large_purge(hz_os_now_ms(), true);
  q = hz_large_alloc(ZSIZE, 0, false);
  CHECK(q == p);
  CHECK(all_bytes(q, ZSIZE, 0));

  /* Purged with MADV_FREE: the pages may still hold the old bytes. */
  set_option("HZ_PURGE_MADV_FREE", "1");
  memset(q, 0x11, ZSIZE);
  large_free(q);
  hz_large_purge(hz_os_now_ms(), true);
  q = hz_large_alloc(ZSIZE, 0, true);
  CHECK(q == p);
  CHECK_MSG(all_bytes(q, ZSIZE, 0), "a MADV_FREE-purged mapping was not "
                                    "cleared");
  set_option("HZ_PURGE_MADV_FREE", NULL);
  park(q);
}

int main(void) {
  setenv("HZ_LARGE_CACHE_MAX", "64M", 1);
  setenv("HZ_PURGE_DELAY_MS", "-1", 1);
  setenv("HZ_THP", "0", 1); /* page-sized residency for mincore */
  hz_options_init();
  CHECK(hz_option(HZ_OPTION_LARGE_CACHE_MAX) == (long)CAP);
  test_hit();
  test_best_fit();
  test_cap();
  test_realloc();
  test_zero();
  for (int i = 0; i < parked_count; i++)
    large_free(parked[i]);
  CHECK(cached_bytes() <= CAP);
  return check_report("large");
}
