/* stats_test — the statistics as a program gets them, under LD_PRELOAD:
 * the JSON written at exit (HZ_STATS_JSON) and hz_stats_print().
 *
 * Run without arguments, the test re-executes itself (/proc/self/exe
 * child) with HZ_STATS_JSON naming a fresh file in /tmp. The child
 *   - allocates BLOCKS blocks of 48000 bytes (class 46, 49152-byte blocks,
 *     above the per-CPU caches, whose pops and pushes are not counted),
 *     frees LOCAL_FREES of them itself and REMOTE_FREES from a second
 *     thread (which allocated first, so it has a heap and its frees are
 *     remote frees), FREE_ONLY_FREES from a third thread that never allocates
 *     (it gets a heap on its first free, so its frees are batched like the
 *     second thread's), and keeps the other
 *     KEPT alive to the end; then one block of a class not used before
 *     (a malloc slow path, which takes the inbox home);
 *   - allocates large blocks: 4 of 1 MiB, frees 3, allocates and frees one
 *     more of 1 MiB (the cache can serve it) and one of 8 MiB, and keeps one
 *     1 MiB block alive;
 *   - calls hz_stats_print (found with dlsym) between two marker lines.
 * The parent reads the child's stderr and the JSON file (a small parser
 * made for this format: numbers looked up by key inside a given object)
 * and checks:
 *   - the JSON is balanced and has the expected keys;
 *   - class 46: block_size 49152, allocs >= BLOCKS, frees >= LOCAL_FREES +
 *     REMOTE_FREES, remote_frees >= REMOTE_FREES, live == allocs - frees,
 *     KEPT <= live <= KEPT + 10 (libc may hold a few blocks of that size),
 *     peak_live >= 900 (published every 64 blocks of change per thread, so
 *     within a bin refill plus 64 of the 1000 reached) and >= live;
 *   - every class: live == allocs - frees, peak_live >= live, frees >=
 *     remote_frees, classes in increasing order;
 *   - remote frees over all classes: the "remote" object's frees equal the
 *     sum of the classes' remote_frees, fewer than FREE_ONLY_FREES of them
 *     one by one, at least 4 blocks per batch on average, and the
 *     report's "remote frees" line counts them too; the slow paths of
 *     classes the inbox holds none of (at most 64 blocks onto pages each)
 *     took the REMOTE_FREES + FREE_ONLY_FREES blocks home (drained_blocks
 *     between that and the remote frees); between 1 in 16 and all of
 *     the stash lists were timed (stash_lists_timed), and they waited
 *     more than 0 ns and less than 10 s each on average (stash_wait_ns),
 *     and the report's "stash" line says so; pages_fresh_pending is at most
 *     pages_acquired;
 *   - sync (shared writes): ops >= the allocations and frees made,
 *     inbox_pushes == remote batches, segment_locks >= pages_acquired,
 *     pool_locks >= heaps, large_locks >= 6, cas_retries and inbox_takes
 *     present, segment_locks_per_mop == segment_locks * 1e6 / ops;
 *   - large: allocs >= 6, frees >= 5, live_bytes >= 1 MiB, reuses >= 1;
 *   - os.mmap > 0, os.mapped_bytes > 0, peak_rss_bytes >= rss_bytes > 0,
 *     0 <= huge_bytes <= rss_bytes, minor_faults > 0, major_faults >= 0,
 *     heaps >= 2, pages_acquired > 0;
 *   - hz_stats_print printed the per-class table header and a row for
 *     class 46 with the same story (allocs >= BLOCKS, ...), and the exit
 *     JSON counts at least what that report did.
 *
 * usage: stats_test [rss|exact|cached]
 *
 * With "exact": the per-class counts are exact, not bounds, while blocks
 * sit everywhere a free can leave them. A child allocates EXACT_MAIN
 * blocks of EXACT_SIZE (a class nothing else here uses); a second thread
 * allocates EXACT_OTHER of its own, frees EXACT_OTHER_LOCAL of them (into
 * its bin, kept when it exits) and EXACT_SENT of the first thread's
 * (remote: published to the first thread's inbox) and exits; the first
 * thread allocates EXACT_MAIN_AGAIN more (its slow paths take some of the
 * inbox into its bin, the rest stays in the backlog), frees
 * EXACT_MAIN_LOCAL of
 * its own (bin and pages) and EXACT_KEPT_IN_STASH of the second thread's
 * (fewer than a stash publishes at: they sit in its stash at exit). The
 * JSON at exit must count exactly those allocations, frees and remote
 * frees, once as is and once after malloc_trim(0) (bins spilled, the
 * pooled heap collected, the inbox taken home).
 *
 * With "cached": blocks another thread freed count as frees while they wait
 * on the shared pages' ladder. A child, every class on the shared pages
 * (HZ_SHARED_PAGES=-1), allocates CACHED_PER_CLASS blocks of each of
 * CACHED_CLASSES sizes (classes nothing else here uses, small enough for
 * the CPU caches) and a second thread, with a heap of its own, frees them
 * all: onto its bin, which overflows (more than a bin holds) onto its CPU's
 * cache and the depot. After the join, each class's counts at exit are
 * exactly CACHED_PER_CLASS allocations and frees and 0 live, in the JSON
 * and in the HZ_SHOW_STATS=1 report alike, and the JSON's
 * free_waiting.cpu_caches is the ladder's cached_blocks, more than 0; the
 * same with HZ_CPU_CACHE=0 (the depots) and with HZ_SHARED_PAGES=0 (the
 * threads' pages: every free through the stash, none on the ladder).
 * Where the blocks are when the report reads them (the ladder, or home
 * after a drain) does not matter: the counts are the same.
 *
 * With "rss": the peak RSS is never shown below the RSS shown with it
 * (peak_rss_bytes >= rss_bytes >= 16 MiB after touching 16 MiB, and at
 * least 8 minor faults: 16 MiB in huge pages at most), both in
 * the JSON of a child that printed no report before exit and in the first
 * hz_stats_print report of another. (The default run calls hz_stats_print
 * before the JSON is written, which hides an ordering problem there: each
 * report reads VmHWM before statm, and the first call of the RSS reader can
 * fault in code pages in between.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "child_run.h"

#define BLOCK_SIZE      48000
#define BLOCK_CLASS     46
#define CLASS_BYTES     49152
#define BLOCKS          1000
#define LOCAL_FREES     600
#define REMOTE_FREES    150
#define FREE_ONLY_FREES 100
#define KEPT            (BLOCKS - LOCAL_FREES - REMOTE_FREES - FREE_ONLY_FREES)
#define LIBC_SLACK      10
#define PEAK_MIN        900
/* Sizes of classes nothing else here uses: each first malloc is a slow
 * path, and each takes at most 64 blocks of a class whose bin is full
 * home to their pages, so together they take the 250 sent. */
static const size_t drain_triggers[] = {11000, 20000,  40000,
                                        70000, 100000, 150000};
#define DRAIN_TRIGGERS (sizeof drain_triggers / sizeof drain_triggers[0])
#define MIB            ((size_t)1 << 20)

/* exact mode (see the top): 57344-byte blocks, above the per-CPU caches'
 * sizes (their pops and pushes are not counted: a count in a section is
 * one more store on every call); fewer than 256 KiB of them stay in a
 * stash */
#define EXACT_SIZE          57000
#define EXACT_MAIN          1000
#define EXACT_MAIN_AGAIN    40
#define EXACT_OTHER         500
#define EXACT_OTHER_LOCAL   100
#define EXACT_SENT          300
#define EXACT_MAIN_LOCAL    200
#define EXACT_KEPT_IN_STASH 4

/* cached mode (see the top): 160, 768 and 2560-byte blocks, 40 of each:
 * fewer than the 64 a CPU's cache holds of each class */
static const size_t cached_sizes[] = {150, 700, 2500};
#define CACHED_CLASSES   (sizeof cached_sizes / sizeof cached_sizes[0])
#define CACHED_PER_CLASS 200

#define MARK_BEGIN "child: hz_stats_print begin\n"
#define MARK_END   "child: hz_stats_print end\n"

/* ---------------------------------------------------------------------------
 * Child
 * ------------------------------------------------------------------------- */
static void *volatile blocks[BLOCKS];
static void *volatile large_kept;
static void *volatile sink;
static void *volatile drained_by[DRAIN_TRIGGERS];

static void *remote_freer(void *arg) {
  (void)arg;
  void *own = malloc(100); /* a heap of its own: the frees below are remote */
  sink = own;
  for (int i = LOCAL_FREES; i < LOCAL_FREES + REMOTE_FREES; i++)
    free(blocks[i]);
  free(own);
  return NULL;
}

/* Never allocates: it gets a heap on its first free all the same. */
static void *free_only_freer(void *arg) {
  (void)arg;
  int from = LOCAL_FREES + REMOTE_FREES;
  for (int i = from; i < from + FREE_ONLY_FREES; i++)
    free(blocks[i]);
  return NULL;
}

static void say(const char *text) {
  if (write(STDERR_FILENO, text, strlen(text)) < 0) _exit(3);
}

static int child_main(void) {
  void (*stats_print)(void) =
      (void (*)(void))dlsym(RTLD_DEFAULT, "hz_stats_print");
  if (stats_print == NULL) {
    say("child: hz_stats_print not found (is hakozuna preloaded?)\n");
    return 1;
  }
  for (int i = 0; i < BLOCKS; i++) {
    char *p = malloc(BLOCK_SIZE);
    if (p == NULL) return 1;
    memset(p, i & 0xff, BLOCK_SIZE);
    blocks[i] = p;
  }
  for (int i = 0; i < LOCAL_FREES; i++)
    free(blocks[i]);
  pthread_t thread;
  if (pthread_create(&thread, NULL, remote_freer, NULL) != 0) return 1;
  pthread_join(thread, NULL);
  if (pthread_create(&thread, NULL, free_only_freer, NULL) != 0) return 1;
  pthread_join(thread, NULL);
  for (size_t i = 0; i < DRAIN_TRIGGERS; i++)
    drained_by[i] = malloc(drain_triggers[i]); /* empty bin: a drain */

  char *large[4];
  for (int i = 0; i < 4; i++) {
    large[i] = malloc(MIB);
    if (large[i] == NULL) return 1;
    memset(large[i], 1, MIB);
  }
  for (int i = 0; i < 3; i++)
    free(large[i]);
  large_kept = large[3];
  char *again = malloc(MIB); /* the cache has three of this size */
  char *big = malloc(8 * MIB);
  if (again == NULL || big == NULL) return 1;
  memset(again, 2, MIB);
  memset(big, 3, 8 * MIB);
  free(again);
  free(big);

  say(MARK_BEGIN);
  stats_print();
  say(MARK_END);
  return 0; /* blocks[LOCAL_FREES + REMOTE_FREES..] stay live */
}

/* exact mode's child (see the top); with `trim`, malloc_trim(0) before
 * exit. It says the block size of its class on stderr. */
static void *volatile exact_main[EXACT_MAIN];
static void *volatile exact_other[EXACT_OTHER];

static void *exact_other_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < EXACT_OTHER; i++)
    exact_other[i] = malloc(EXACT_SIZE);
  for (int i = 0; i < EXACT_OTHER_LOCAL; i++)
    free(exact_other[i]);
  for (int i = 0; i < EXACT_SENT; i++)
    free(exact_main[i]);
  return NULL;
}

static int child_exact_main(bool trim) {
  for (int i = 0; i < EXACT_MAIN; i++)
    if ((exact_main[i] = malloc(EXACT_SIZE)) == NULL) return 1;
  pthread_t thread;
  if (pthread_create(&thread, NULL, exact_other_thread, NULL) != 0) return 1;
  pthread_join(thread, NULL);
  for (int i = 0; i < EXACT_MAIN_AGAIN; i++)
    if ((sink = malloc(EXACT_SIZE)) == NULL) return 1;
  for (int i = EXACT_SENT; i < EXACT_SENT + EXACT_MAIN_LOCAL; i++)
    free(exact_main[i]);
  for (int i = EXACT_OTHER_LOCAL; i < EXACT_OTHER_LOCAL + EXACT_KEPT_IN_STASH;
       i++)
    free(exact_other[i]);
  if (trim) malloc_trim(0);
  char line[64];
  snprintf(line, sizeof line, "exact: block_size %zu\n",
           malloc_usable_size(exact_main[EXACT_MAIN - 1]));
  say(line);
  return 0;
}

/* cached mode's child (see the top). It says the block size of each class
 * on stderr. */
static void *volatile cached_blocks[CACHED_CLASSES][CACHED_PER_CLASS];

static void *cached_freer(void *arg) {
  (void)arg;
  void *own = malloc(100); /* a heap of its own: the frees below are remote */
  sink = own;
  for (size_t k = 0; k < CACHED_CLASSES; k++)
    for (int i = 0; i < CACHED_PER_CLASS; i++)
      free(cached_blocks[k][i]);
  free(own);
  return NULL;
}

static int child_cached_main(void) {
  for (size_t k = 0; k < CACHED_CLASSES; k++)
    for (int i = 0; i < CACHED_PER_CLASS; i++)
      if ((cached_blocks[k][i] = malloc(cached_sizes[k])) == NULL) return 1;
  char line[CACHED_CLASSES][64];
  for (size_t k = 0; k < CACHED_CLASSES; k++)
    snprintf(line[k], sizeof line[k], "cached: block_size %zu\n",
             malloc_usable_size(cached_blocks[k][0]));
  pthread_t thread;
  if (pthread_create(&thread, NULL, cached_freer, NULL) != 0) return 1;
  pthread_join(thread, NULL);
  for (size_t k = 0; k < CACHED_CLASSES; k++)
    say(line[k]);
  return 0;
}

/* rss mode: a program that touches 16 MiB and reports once, either with
 * hz_stats_print or only through the JSON at exit. */
static int child_rss_main(bool print) {
  void (*stats_print)(void) =
      (void (*)(void))dlsym(RTLD_DEFAULT, "hz_stats_print");
  if (stats_print == NULL) {
    say("child: hz_stats_print not found (is hakozuna preloaded?)\n");
    return 1;
  }
  char *p = malloc(16 * MIB);
  if (p == NULL) return 1;
  memset(p, 1, 16 * MIB);
  large_kept = p;
  if (print) {
    say(MARK_BEGIN);
    stats_print();
    say(MARK_END);
  }
  return 0;
}

/* ---------------------------------------------------------------------------
 * A parser for this JSON: numbers looked up by key within [from, to)
 * ------------------------------------------------------------------------- */
typedef struct {
  const char *from, *to;
} span_t;

/* The number after "key": inside the span; false when absent. */
static bool json_number(span_t s, const char *key, long long *out) {
  char needle[64];
  snprintf(needle, sizeof needle, "\"%s\":", key);
  size_t n = strlen(needle);
  for (const char *p = s.from; p + n <= s.to; p++) {
    if (memcmp(p, needle, n) != 0) continue;
    char *end;
    long long v = strtoll(p + n, &end, 10);
    if (end == p + n || end > s.to) return false;
    *out = v;
    return true;
  }
  return false;
}

/* The span from the opening `open` after "key": to its matching `close`. */
static bool json_nested(span_t s, const char *key, char open, char close,
                        span_t *out) {
  char needle[64];
  snprintf(needle, sizeof needle, "\"%s\":", key);
  size_t n = strlen(needle);
  for (const char *p = s.from; p + n <= s.to; p++) {
    if (memcmp(p, needle, n) != 0) continue;
    const char *q = p + n;
    while (q < s.to && *q == ' ')
      q++;
    if (q == s.to || *q != open) return false;
    int depth = 0;
    for (const char *e = q; e < s.to; e++) {
      if (*e == open) depth++;
      if (*e == close && --depth == 0) {
        *out = (span_t){q + 1, e};
        return true;
      }
    }
    return false;
  }
  return false;
}

/* Braces and brackets nest properly, the text is one object. */
static bool json_balanced(const char *text) {
  char stack[16];
  int depth = 0;
  const char *p = text;
  while (*p == ' ' || *p == '\n')
    p++;
  if (*p != '{') return false;
  for (; *p != 0; p++) {
    if (*p == '"') {
      p = strchr(p + 1, '"');
      if (p == NULL) return false;
      continue;
    }
    if (*p == '{' || *p == '[') {
      if (depth == (int)sizeof stack) return false;
      stack[depth++] = *p == '{' ? '}' : ']';
    } else if (*p == '}' || *p == ']') {
      if (depth == 0 || stack[--depth] != *p) return false;
      if (depth == 0) {
        for (p++; *p == ' ' || *p == '\n'; p++) {
        }
        return *p == 0;
      }
    }
  }
  return false;
}

/* The number after "key": in the span, LLONG_MIN (fails every check)
 * when absent. */
static long long num(span_t s, const char *key) {
  long long v;
  return json_number(s, key, &v) ? v : LLONG_MIN;
}

typedef struct {
  long long cls, block_size, allocs, frees, remote_frees, live, peak_live;
} class_t;

static bool json_class(span_t s, class_t *c) {
  return json_number(s, "class", &c->cls) &&
         json_number(s, "block_size", &c->block_size) &&
         json_number(s, "allocs", &c->allocs) &&
         json_number(s, "frees", &c->frees) &&
         json_number(s, "remote_frees", &c->remote_frees) &&
         json_number(s, "live", &c->live) &&
         json_number(s, "peak_live", &c->peak_live);
}

/* The object of the "classes" array whose block_size is `block_size`;
 * false when there is none. */
static bool json_class_sized(span_t all, long long block_size, class_t *out) {
  span_t classes;
  if (!json_nested(all, "classes", '[', ']', &classes)) return false;
  for (const char *p = classes.from;
       (p = memchr(p, '{', (size_t)(classes.to - p))) != NULL;) {
    const char *close = memchr(p, '}', (size_t)(classes.to - p));
    if (close == NULL) return false;
    bool whole = json_class((span_t){p, close}, out);
    p = close + 1;
    if (whole && out->block_size == block_size) return true;
  }
  return false;
}

/* The row of class `cls` in the (first) class table of a report in
 * `text`; false when there is none. Lines are parsed one at a time: a
 * scanf across the newline would read the next line's numbers. */
static bool printed_row(const char *text, long long cls, class_t *out) {
  const char *line = strstr(text, "\n  class ");
  while (line != NULL && (line = strchr(line + 1, '\n')) != NULL) {
    char buf[256];
    const char *nl = strchr(line + 1, '\n');
    size_t len = nl != NULL ? (size_t)(nl - line - 1) : strlen(line + 1);
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, line + 1, len);
    buf[len] = 0;
    char extra;
    if (sscanf(buf, "%lld %lld %lld %lld %lld %lld %lld %c", &out->cls,
               &out->block_size, &out->allocs, &out->frees, &out->remote_frees,
               &out->live, &out->peak_live, &extra) != 7)
      return false; /* past the table */
    if (out->cls == cls) return true;
  }
  return false;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return NULL;
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  size_t got;
  while (text != NULL && (got = fread(text + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (cap - len < 1024) {
      char *grown = realloc(text, cap * 2);
      if (grown == NULL) {
        free(text);
        text = NULL;
        break;
      }
      text = grown;
      cap *= 2;
    }
  }
  fclose(f);
  if (text != NULL) text[len] = 0;
  return text;
}

/* ---------------------------------------------------------------------------
 * Checks
 * ------------------------------------------------------------------------- */
/* Class 46 as either report shows it. */
static void check_block_class(const char *where, const class_t *c) {
  CHECK_MSG(c->block_size == CLASS_BYTES, "%s: class 46 block size %lld", where,
            c->block_size);
  CHECK_MSG(c->allocs >= BLOCKS, "%s: class 46 allocs %lld < %d", where,
            c->allocs, BLOCKS);
  CHECK_MSG(c->frees >= LOCAL_FREES + REMOTE_FREES + FREE_ONLY_FREES,
            "%s: class 46 frees %lld < %d", where, c->frees,
            LOCAL_FREES + REMOTE_FREES + FREE_ONLY_FREES);
  CHECK_MSG(c->remote_frees >= REMOTE_FREES + FREE_ONLY_FREES,
            "%s: class 46 remote frees %lld < %d", where, c->remote_frees,
            REMOTE_FREES + FREE_ONLY_FREES);
  CHECK_MSG(c->live == c->allocs - c->frees,
            "%s: class 46 live %lld != %lld - %lld", where, c->live, c->allocs,
            c->frees);
  CHECK_MSG(c->live >= KEPT && c->live <= KEPT + LIBC_SLACK,
            "%s: class 46 live %lld, want %d..%d", where, c->live, KEPT,
            KEPT + LIBC_SLACK);
  CHECK_MSG(c->peak_live >= PEAK_MIN && c->peak_live >= c->live,
            "%s: class 46 peak live %lld (live %lld, want >= %d)", where,
            c->peak_live, c->live, PEAK_MIN);
}

/* The hz_stats_print output between the markers: header and class 26. */
static bool check_printed(const char *err, class_t *row) {
  const char *begin = strstr(err, MARK_BEGIN);
  const char *end = begin != NULL ? strstr(begin, MARK_END) : NULL;
  CHECK_MSG(begin != NULL && end != NULL,
            "no hz_stats_print output between the markers; stderr:\n%s", err);
  if (begin == NULL || end == NULL) return false;
  const char *report = begin + strlen(MARK_BEGIN);
  CHECK_MSG(strncmp(report, "hakozuna: stats report\n", 23) == 0,
            "the report does not start with its title:\n%.*s",
            (int)(end - report), report);
  bool header = false, found = false, stash_line = false;
  for (const char *line = report; line < end;) {
    const char *nl = memchr(line, '\n', (size_t)(end - line));
    if (nl == NULL) nl = end;
    char buf[256];
    size_t len = (size_t)(nl - line) < sizeof buf - 1 ? (size_t)(nl - line)
                                                      : sizeof buf - 1;
    memcpy(buf, line, len);
    buf[len] = 0;
    line = nl + 1;
    char w[7][16];
    if (sscanf(buf, "%15s %15s %15s %15s %15s %15s %15s", w[0], w[1], w[2],
               w[3], w[4], w[5], w[6]) == 7 &&
        strcmp(w[0], "class") == 0 && strcmp(w[1], "block") == 0 &&
        strcmp(w[2], "allocs") == 0 && strcmp(w[3], "frees") == 0 &&
        strcmp(w[4], "remote") == 0 && strcmp(w[5], "live") == 0 &&
        strcmp(w[6], "peak") == 0 && strstr(buf, "peak live") != NULL) {
      CHECK_MSG(!header, "two class table headers");
      header = true;
      continue;
    }
    double waited_us;
    if (sscanf(buf, " stash a list waits %lf us", &waited_us) == 1) {
      stash_line = true;
      CHECK_MSG(waited_us > 0, "the report's stash line: %s", buf);
    }
    unsigned long long remote_line;
    if (sscanf(buf, " remote frees %llu in", &remote_line) == 1)
      CHECK_MSG(remote_line >= REMOTE_FREES + FREE_ONLY_FREES,
                "the report's remote frees line counts %llu, fewer than the "
                "%d remote and %d one-by-one frees made: %s",
                remote_line, REMOTE_FREES, FREE_ONLY_FREES, buf);
    class_t c;
    char extra;
    if (header &&
        sscanf(buf, "%lld %lld %lld %lld %lld %lld %lld %c", &c.cls,
               &c.block_size, &c.allocs, &c.frees, &c.remote_frees, &c.live,
               &c.peak_live, &extra) == 7 &&
        c.cls == BLOCK_CLASS) {
      CHECK_MSG(!found, "two rows for class 26");
      found = true;
      *row = c;
    }
  }
  CHECK_MSG(header,
            "no class table header (class block allocs frees remote "
            "live peak live) in:\n%.*s",
            (int)(end - report), report);
  CHECK_MSG(found, "no row for class 46 after the header in:\n%.*s",
            (int)(end - report), report);
  CHECK_MSG(stash_line, "no \"stash\" line in:\n%.*s", (int)(end - report),
            report);
  return header && found;
}

static void check_json(const char *text, const class_t *printed) {
  CHECK_MSG(json_balanced(text), "the JSON does not nest:\n%s", text);
  span_t all = {text, text + strlen(text)};

  span_t classes;
  bool have_classes = json_nested(all, "classes", '[', ']', &classes);
  CHECK_MSG(have_classes, "no \"classes\" array in:\n%s", text);
  bool found = false;
  int count = 0;
  long long last = 0, remote_sum = 0;
  for (const char *p = have_classes ? classes.from : classes.to;
       have_classes && (p = memchr(p, '{', (size_t)(classes.to - p))) != NULL;
       count++) {
    const char *close = memchr(p, '}', (size_t)(classes.to - p));
    if (close == NULL) {
      CHECK_MSG(false, "an unclosed class object");
      break;
    }
    span_t obj = {p, close};
    p = close + 1;
    class_t c;
    if (!json_class(obj, &c)) {
      CHECK_MSG(false, "a class object lacks a field: %.*s",
                (int)(close - obj.from + 1), obj.from);
      continue;
    }
    CHECK_MSG(c.cls > last, "class %lld after class %lld", c.cls, last);
    last = c.cls;
    CHECK_MSG(c.live == c.allocs - c.frees,
              "class %lld: live %lld != allocs %lld - frees %lld", c.cls,
              c.live, c.allocs, c.frees);
    CHECK_MSG(c.peak_live >= c.live, "class %lld: peak live %lld < live %lld",
              c.cls, c.peak_live, c.live);
    CHECK_MSG(c.frees >= c.remote_frees,
              "class %lld: frees %lld < remote frees %lld", c.cls, c.frees,
              c.remote_frees);
    remote_sum += c.remote_frees;
    if (c.cls != BLOCK_CLASS) continue;
    found = true;
    check_block_class("JSON", &c);
    if (printed != NULL) {
      /* The exit report comes later: it counts at least as much. */
      CHECK_MSG(c.allocs >= printed->allocs && c.frees >= printed->frees &&
                    c.remote_frees >= printed->remote_frees &&
                    c.peak_live >= printed->peak_live,
                "class 26: JSON %lld/%lld/%lld/%lld below hz_stats_print "
                "%lld/%lld/%lld/%lld (allocs/frees/remote/peak)",
                c.allocs, c.frees, c.remote_frees, c.peak_live, printed->allocs,
                printed->frees, printed->remote_frees, printed->peak_live);
    }
  }
  CHECK_MSG(found, "no class 46 in the JSON (%d classes):\n%s", count, text);

  span_t remote = {text, text};
  CHECK_MSG(json_nested(all, "remote", '{', '}', &remote), "no \"remote\"");
  long long remote_frees = num(remote, "frees");
  CHECK_MSG(remote_frees == remote_sum,
            "remote frees %lld, but the classes' remote frees add up to %lld",
            remote_frees, remote_sum);
  CHECK_MSG(num(remote, "one_by_one") < FREE_ONLY_FREES,
            "remote one_by_one %lld: the thread that only frees sent its %d "
            "frees home one by one",
            num(remote, "one_by_one"), FREE_ONLY_FREES);
  CHECK_MSG(num(remote, "batches") >= num(remote, "one_by_one") &&
                num(remote, "batches") * 4 <= remote_frees,
            "remote batches %lld for %lld frees (%lld one by one): not batched",
            num(remote, "batches"), remote_frees, num(remote, "one_by_one"));

  long long sent = REMOTE_FREES + FREE_ONLY_FREES;
  CHECK_MSG(
      num(remote, "drains") >= 1 && num(remote, "drained_blocks") >= sent &&
          num(remote, "drained_blocks") <= remote_frees,
      "remote drains %lld, drained_blocks %lld (want drains taking "
      "the %lld blocks sent, at most the %lld remote frees)",
      num(remote, "drains"), num(remote, "drained_blocks"), sent, remote_frees);
  long long lists = num(remote, "batches") - num(remote, "one_by_one");
  long long timed = num(remote, "stash_lists_timed");
  CHECK_MSG(timed >= 1 && timed <= lists && timed * 16 >= lists &&
                num(remote, "stash_wait_ns") > 0 &&
                num(remote, "stash_wait_ns") / timed < 10000000000LL,
            "remote stash_wait_ns %lld over %lld lists timed of %lld",
            num(remote, "stash_wait_ns"), timed, lists);
  CHECK_MSG(num(remote, "pages_fresh_pending") >= 0 &&
                num(remote, "pages_fresh_pending") <=
                    num(all, "pages_acquired"),
            "remote pages_fresh_pending %lld, pages_acquired %lld",
            num(remote, "pages_fresh_pending"), num(all, "pages_acquired"));

  span_t sync = {text, text};
  CHECK_MSG(json_nested(all, "sync", '{', '}', &sync), "no \"sync\"");
  long long ops = num(sync, "ops");
  int made_ops = BLOCKS + LOCAL_FREES + REMOTE_FREES + FREE_ONLY_FREES;
  CHECK_MSG(ops >= made_ops, "sync ops %lld < %d", ops, made_ops);
  CHECK_MSG(num(sync, "inbox_pushes") == num(remote, "batches"),
            "sync inbox_pushes %lld != remote batches %lld",
            num(sync, "inbox_pushes"), num(remote, "batches"));
  /* Pages come from each heap's own segments: the process-wide segment
   * lock is taken per segment that changes hands, not per page. */
  CHECK_MSG(num(sync, "segment_locks") >= 1 &&
                num(sync, "segment_locks") < num(all, "pages_acquired"),
            "segment_locks %lld for %lld pages acquired (want 1 or more, "
            "fewer than the pages)",
            num(sync, "segment_locks"), num(all, "pages_acquired"));
  CHECK_MSG(num(all, "arena_in_use") >= (4 << 20) &&
                num(all, "arena_in_use") <= num(all, "arena_reserved"),
            "arena_in_use %lld, arena_reserved %lld", num(all, "arena_in_use"),
            num(all, "arena_reserved"));
  CHECK_MSG(num(all, "free_held_bytes") >= 0 &&
                num(all, "free_held_bytes") <= num(all, "arena_in_use"),
            "free_held_bytes %lld", num(all, "free_held_bytes"));
  CHECK_MSG(num(sync, "pool_locks") >= num(all, "heaps"),
            "pool_locks %lld < heaps %lld", num(sync, "pool_locks"),
            num(all, "heaps"));
  CHECK_MSG(num(sync, "large_locks") >= 6,
            "large_locks %lld for 6 large allocs", num(sync, "large_locks"));
  CHECK_MSG(num(sync, "cas_retries") >= 0 && num(sync, "inbox_takes") >= 0,
            "cas_retries %lld, inbox_takes %lld (missing)",
            num(sync, "cas_retries"), num(sync, "inbox_takes"));
  double want = (double)num(sync, "segment_locks") * 1e6 / (double)ops;
  double got = 0;
  const char *at = strstr(sync.from, "\"segment_locks_per_mop\":");
  CHECK_MSG(at != NULL && sscanf(at + 24, " %lf", &got) == 1 &&
                got > want * 0.999 - 0.01 && got < want * 1.001 + 0.01,
            "segment_locks_per_mop %.3f, expected %.3f", got, want);

  span_t large = {text, text}, os = {text, text};
  CHECK_MSG(json_nested(all, "large", '{', '}', &large), "no \"large\"");
  CHECK_MSG(json_nested(all, "os", '{', '}', &os), "no \"os\"");
  long long v;
  CHECK_MSG((v = num(large, "allocs")) >= 6, "large allocs %lld", v);
  CHECK_MSG((v = num(large, "frees")) >= 5, "large frees %lld", v);
  CHECK_MSG((v = num(large, "live_bytes")) >= (long long)MIB,
            "large live bytes %lld", v);
  CHECK_MSG((v = num(large, "reuses")) >= 1, "large reuses %lld", v);
  CHECK_MSG((v = num(os, "mmap")) > 0, "os mmap %lld", v);
  CHECK_MSG((v = num(os, "mapped_bytes")) > 0, "os mapped_bytes %lld", v);
  long long rss = num(all, "rss_bytes"), peak = num(all, "peak_rss_bytes");
  CHECK_MSG(rss > 0 && peak >= rss,
            "rss_bytes %lld, peak_rss_bytes %lld (want peak >= rss > 0)", rss,
            peak);
  CHECK_MSG((v = num(all, "huge_bytes")) >= 0 && v <= rss, "huge_bytes %lld",
            v);
  CHECK_MSG((v = num(all, "minor_faults")) > 0, "minor_faults %lld", v);
  CHECK_MSG((v = num(all, "major_faults")) >= 0, "major_faults %lld", v);
  CHECK_MSG((v = num(all, "heaps")) >= 2, "heaps %lld", v);
  CHECK_MSG((v = num(all, "pages_acquired")) > 0, "pages_acquired %lld", v);
}

/* A fresh file name in /tmp and the HZ_STATS_JSON setting naming it. */
static void json_path(char *path, size_t cap, char *setting, size_t scap) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  snprintf(path, cap, "/tmp/hz_stats_test.%ld.%ld.json", (long)getpid(),
           (long)now.tv_nsec);
  unlink(path);
  snprintf(setting, scap, "HZ_STATS_JSON=%s", path);
}

/* rss mode: peak RSS is never reported below the RSS it is shown with,
 * in the JSON of a program that printed no report before, and in the
 * first hz_stats_print report. */
static int rss_main(const char *self) {
  char path[128], setting[160];
  json_path(path, sizeof path, setting, sizeof setting);
  child_result_t r =
      child_run(self, "child-rss-json", (const char *const[]){setting, NULL});
  CHECK_MSG(r.status == 0, "child exit status %d; stderr:\n%s", r.status,
            r.err != NULL ? r.err : "");
  char *json = read_file(path);
  CHECK_MSG(json != NULL, "no JSON file %s", path);
  if (json != NULL) {
    span_t all = {json, json + strlen(json)};
    long long rss = num(all, "rss_bytes"), peak = num(all, "peak_rss_bytes");
    CHECK_MSG(rss >= (long long)(16 * MIB) && peak >= rss,
              "JSON: rss_bytes %lld, peak_rss_bytes %lld (want peak >= rss "
              ">= 16 MiB)",
              rss, peak);
    long long faults = num(all, "minor_faults");
    CHECK_MSG(faults >= 8, "JSON: %lld minor faults after touching 16 MiB",
              faults);
  }
  unlink(path);
  free(json);
  free(r.err);

  r = child_run(self, "child-rss-print", (const char *const[]){NULL});
  CHECK_MSG(r.status == 0, "child exit status %d; stderr:\n%s", r.status,
            r.err != NULL ? r.err : "");
  const char *line = r.err != NULL ? strstr(r.err, "\n  rss ") : NULL;
  unsigned long long rss = 0, peak = 0;
  bool parsed = line != NULL &&
                sscanf(line, " rss %llu bytes (peak %llu)", &rss, &peak) == 2;
  CHECK_MSG(parsed, "no rss line in the report; stderr:\n%s",
            r.err != NULL ? r.err : "");
  if (parsed)
    CHECK_MSG(rss >= 16 * MIB && peak >= rss,
              "hz_stats_print: rss %llu bytes, peak %llu (want peak >= rss "
              ">= 16 MiB)",
              rss, peak);
  free(r.err);
  return check_report("stats_test rss");
}

/* exact mode: the child's class counts to the block, with and without a
 * trim before exit. */
static void exact_run(const char *self, const char *mode) {
  char path[128], setting[160];
  json_path(path, sizeof path, setting, sizeof setting);
  child_result_t r =
      child_run(self, mode, (const char *const[]){setting, NULL});
  CHECK_MSG(r.status == 0, "%s: exit status %d; stderr:\n%s", mode, r.status,
            r.err != NULL ? r.err : "");
  const char *said = r.err != NULL ? strstr(r.err, "exact: block_size ") : NULL;
  long long block_size = 0;
  CHECK_MSG(said != NULL &&
                sscanf(said, "exact: block_size %lld", &block_size) == 1,
            "%s: no block size on stderr", mode);
  char *json = read_file(path);
  CHECK_MSG(json != NULL, "%s: no JSON file %s", mode, path);
  span_t all = {json, json ? json + strlen(json) : 0};
  class_t c;
  bool found = json != NULL && json_class_sized(all, block_size, &c);
  if (found) {
    long long allocs = EXACT_MAIN + EXACT_MAIN_AGAIN + EXACT_OTHER;
    long long remote = EXACT_SENT + EXACT_KEPT_IN_STASH;
    long long frees = remote + EXACT_OTHER_LOCAL + EXACT_MAIN_LOCAL;
    CHECK_MSG(c.allocs == allocs && c.frees == frees &&
                  c.remote_frees == remote && c.live == allocs - frees,
              "%s: class %lld counts allocs %lld frees %lld remote %lld "
              "live %lld, want %lld %lld %lld %lld",
              mode, c.cls, c.allocs, c.frees, c.remote_frees, c.live, allocs,
              frees, remote, allocs - frees);
  }
  CHECK_MSG(found, "%s: no class of %lld-byte blocks in the JSON:\n%s", mode,
            block_size, json != NULL ? json : "");
  unlink(path);
  free(json);
  free(r.err);
}

/* cached mode: one class of the child's, in the JSON and the report on
 * stderr: every block allocated was freed, and none is live. */
static void check_cached_class(const char *mode, span_t json, const char *err,
                               long long block_size) {
  class_t j, t;
  bool in_json = json_class_sized(json, block_size, &j);
  CHECK_MSG(in_json, "%s: no class of %lld-byte blocks in the JSON", mode,
            block_size);
  if (!in_json) return;
  CHECK_MSG(j.allocs == CACHED_PER_CLASS && j.frees == CACHED_PER_CLASS &&
                j.live == 0 && j.remote_frees <= j.frees,
            "%s: class %lld (%lld B) in the JSON: allocs %lld frees %lld "
            "remote %lld live %lld, want %d allocs, %d frees, 0 live",
            mode, j.cls, block_size, j.allocs, j.frees, j.remote_frees, j.live,
            CACHED_PER_CLASS, CACHED_PER_CLASS);
  bool printed = printed_row(err, j.cls, &t);
  CHECK_MSG(printed, "%s: no row for class %lld in the report", mode, j.cls);
  /* Two reads: a drain between them may turn frees into remote ones. */
  if (printed)
    CHECK_MSG(t.allocs == j.allocs && t.frees == j.frees && t.live == j.live,
              "%s: class %lld: the report says allocs %lld frees %lld live "
              "%lld, the JSON %lld %lld %lld",
              mode, j.cls, t.allocs, t.frees, t.live, j.allocs, j.frees,
              j.live);
}

/* cached mode on the shared pages, with the CPU caches (unless the
 * environment has no rseq) or the depots alone, or on the threads' pages. */
typedef enum { CACHED_LADDER, CACHED_DEPOTS, CACHED_THREADS } cached_how_t;

static void cached_run(const char *self, cached_how_t how) {
  const char *mode = how == CACHED_LADDER   ? "cached"
                     : how == CACHED_DEPOTS ? "cached, HZ_CPU_CACHE=0"
                                            : "cached, HZ_SHARED_PAGES=0";
  int failures_before = check_failures;
  char path[128], setting[160];
  json_path(path, sizeof path, setting, sizeof setting);
  const char *const settings[] = {
      setting, "HZ_SHOW_STATS=1",
      how == CACHED_THREADS ? "HZ_SHARED_PAGES=0" : "HZ_SHARED_PAGES=-1",
      how == CACHED_DEPOTS ? "HZ_CPU_CACHE=0" : NULL, NULL};
  child_result_t r = child_run(self, "child-cached", settings);
  const char *err = r.err != NULL ? r.err : "";
  CHECK_MSG(r.status == 0, "%s: exit status %d; stderr:\n%s", mode, r.status,
            err);
  char *json = read_file(path);
  CHECK_MSG(json != NULL, "%s: no JSON file %s", mode, path);
  span_t all = {json, json != NULL ? json + strlen(json) : NULL};
  const char *said = err;
  for (size_t k = 0; json != NULL && k < CACHED_CLASSES; k++) {
    long long block_size = 0;
    said = strstr(said, "cached: block_size ");
    bool have = said != NULL &&
                sscanf(said++, "cached: block_size %lld", &block_size) == 1;
    CHECK_MSG(have, "%s: block size %zu not said on stderr:\n%s", mode, k, err);
    if (!have) break;
    check_cached_class(mode, all, err, block_size);
  }
  span_t waiting, front;
  CHECK_MSG(json != NULL &&
                json_nested(all, "free_waiting", '{', '}', &waiting) &&
                json_nested(all, "front_end", '{', '}', &front) &&
                num(waiting, "cpu_caches") >= 0 &&
                num(waiting, "cpu_caches") == num(front, "cached_blocks"),
            "%s: free_waiting.cpu_caches is not front_end.cached_blocks", mode);
  CHECK_MSG(json == NULL || (num(front, "cached_blocks") > 0) ==
                                (how != CACHED_THREADS),
            "%s: %lld blocks on the ladder", mode,
            json != NULL ? num(front, "cached_blocks") : -1);
  if (check_failures != failures_before)
    fprintf(stderr, "%s: stderr:\n%s", mode, err);
  unlink(path);
  free(json);
  free(r.err);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) return child_main();
  if (argc > 1 && strcmp(argv[1], "child-exact") == 0)
    return child_exact_main(false);
  if (argc > 1 && strcmp(argv[1], "child-exact-trim") == 0)
    return child_exact_main(true);
  if (argc > 1 && strcmp(argv[1], "child-cached") == 0)
    return child_cached_main();
  if (argc > 1 && strcmp(argv[1], "child-rss-json") == 0)
    return child_rss_main(false);
  if (argc > 1 && strcmp(argv[1], "child-rss-print") == 0)
    return child_rss_main(true);
  if (getenv("LD_PRELOAD") == NULL)
    fprintf(stderr, "stats_test: note: LD_PRELOAD is not set; the child "
                    "needs hakozuna preloaded\n");
  if (argc > 1 && strcmp(argv[1], "rss") == 0) return rss_main(argv[0]);
  if (argc > 1 && strcmp(argv[1], "exact") == 0) {
    exact_run(argv[0], "child-exact");
    exact_run(argv[0], "child-exact-trim");
    return check_report("stats_test exact");
  }
  if (argc > 1 && strcmp(argv[1], "cached") == 0) {
    cached_run(argv[0], CACHED_LADDER);
    cached_run(argv[0], CACHED_DEPOTS);
    cached_run(argv[0], CACHED_THREADS);
    return check_report("stats_test cached");
  }

  char path[128], setting[160];
  json_path(path, sizeof path, setting, sizeof setting);

  child_result_t r =
      child_run(argv[0], "child", (const char *const[]){setting, NULL});
  CHECK_MSG(r.status == 0, "child exit status %d; stderr:\n%s", r.status,
            r.err != NULL ? r.err : "");
  class_t printed;
  bool have_printed = r.err != NULL && check_printed(r.err, &printed);
  if (have_printed) check_block_class("hz_stats_print", &printed);

  char *json = read_file(path);
  CHECK_MSG(json != NULL, "no JSON file %s", path);
  if (json != NULL) {
    check_json(json, have_printed ? &printed : NULL);
    if (check_failures != 0) fprintf(stderr, "the JSON:\n%s", json);
  }
  unlink(path);
  free(json);
  free(r.err);
  return check_report("stats_test");
}
