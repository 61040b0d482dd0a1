/* A signal handler that mallocs and frees, landing inside each lock a
 * malloc or free can take (and malloc_trim: its drain and collection),
 * every time: the library calls hz_test_lock_taken with each lock just
 * taken (the executable exports it, tests/CMakeLists.txt), and a thread
 * that armed it for one lock raises SIGUSR1 there; the handler runs before
 * the raise returns, the lock held by its own thread.
 *
 * Usage: signal_test VARIANT [CASE...], the variant's library preloaded
 * (release, secure or debug; every case when none is named). Each case runs
 * in a child of its own (this program again, its HZ_* settings its own).
 * release: the child exits 0 with no line of the library's: the handler's
 * calls were served (blocks of their own, readable and writable, none the
 * same as a live one), the interrupted call went on, and blocks handed out
 * afterwards are never one still live. secure and debug: the handler's
 * first call stops the child with SIGABRT after one line "hakozuna: error:
 * re-entered slow path of ...". Before the routes that need no lock, 13 of
 * the 15 release children waited for themselves on the lock (killed by
 * their alarm; the drain and the collection round are no lock a malloc
 * waits for), and the secure and debug ones stopped only where the handler
 * entered its heap's slow path or met the pool lock (6 of 15), the others
 * waiting for themselves or going on without a word.
 *
 * The cases, by lock: the heap pool (a thread's first allocation, its
 * exit), the process's segments and a segment's own lock (a new thread's
 * first page), the large blocks' cache (a large malloc and free), a shared
 * pages' class heap (a young thread of a crowded program, which takes its
 * blocks under it; a bin refilled from the shared pages), the segments
 * the class heaps share (a page cut for one), their mapping (the first
 * young thread), a class's depot (a bin spilling into it and
 * refilled from it), the caches' drain and the collection round
 * (malloc_trim; a malloc refused by the kernel takes them too), and the
 * guard's line of slots (a guarded malloc and free). The profiler's lock
 * is not among them: its unwinder takes locks of its own (docs/safety.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"
#include "child_run.h"
#include "lock.h" /* the library's: which lock the hook is called at */

/* Through volatile pointers: the compiler keeps every call. */
static void *(*volatile xmalloc)(size_t) = malloc;
static void *(*volatile xcalloc)(size_t, size_t) = calloc;
static void *(*volatile xrealloc)(void *, size_t) = realloc;
static void *(*volatile xaligned)(size_t, size_t) = aligned_alloc;
static void (*volatile xfree)(void *) = free;

/* ---------------------------------------------------------------------------
 * Child side
 * ------------------------------------------------------------------------- */
#define fail(...)                                                              \
  do {                                                                         \
    child_say("fail: " __VA_ARGS__);                                                 \
    _exit(1);                                                                  \
  } while (0)

/* Every block the child holds, filled with a byte of its own: a block
 * handed out while it is live overlaps one here (or spoils its bytes). The
 * handler adds and takes blocks too, but only inside a call of its own
 * thread's, never while the thread changes the table. */
#define LIVE_MAX 4096
static struct {
  unsigned char *p;
  size_t n;
  unsigned char fill;
} live[LIVE_MAX];
static int live_count;
static unsigned char fills;

static void live_add(void *v, size_t n, const char *what) {
  unsigned char *p = v;
  if (p == NULL) fail("%s: malloc of %zu bytes returned NULL", what, n);
  for (int i = 0; i < live_count; i++)
    if (p < live[i].p + live[i].n && live[i].p < p + n)
      fail("%s: %p (%zu bytes) overlaps the live block %p (%zu bytes): a "
           "block handed out twice",
           what, (void *)p, n, (void *)live[i].p, live[i].n);
  if (live_count == LIVE_MAX) fail("%s: too many live blocks", what);
  unsigned char fill = (unsigned char)(++fills | 1);
  memset(p, fill, n);
  live[live_count].p = p;
  live[live_count].n = n;
  live[live_count].fill = fill;
  live_count++;
}

static void live_check(int i, const char *what) {
  for (size_t k = 0; k < live[i].n; k++)
    if (live[i].p[k] != live[i].fill)
      fail("%s: byte %zu of the live block %p (%zu bytes) changed: handed "
           "out twice?",
           what, k, (void *)live[i].p, live[i].n);
}

static void live_check_all(const char *what) {
  for (int i = 0; i < live_count; i++)
    live_check(i, what);
}

/* The live block i is checked, leaves the table, and is freed (the
 * handler may have it again during the free). */
static void live_free(int i, const char *what) {
  live_check(i, what);
  unsigned char *p = live[i].p;
  live[i] = live[--live_count];
  xfree(p);
}

/* What the handler does and saw. */
static atomic_int raised, handled;
/* Blocks the child made before the signal, for the handler to free: a
 * small one and a large one. */
static void *gift_small, *gift_large;
static size_t gift_small_size = 48;

/* The lock whose next taking on this thread raises the signal (-1: none). */
static _Thread_local int armed = -1;

void hz_test_lock_taken(unsigned id) {
  if (armed != (int)id) return;
  armed = -1;
  atomic_fetch_add(&raised, 1);
  raise(SIGUSR1); /* delivered before raise returns */
}

static void arm(hz_lock_id_t id) { armed = (int)id; }

/* 100 blocks of 48 bytes first, the class the cases' own calls use: its
 * bin runs empty (a slow path whatever it held: the secure variants stop
 * there), and a young thread's handler asks for the lock its thread holds.
 * Then a large block, small ones of many classes, a calloc, an aligned
 * block and a realloc; the gifts freed; the 48-byte blocks freed (their bin
 * overflows) and half of the others, the rest left live for the thread to
 * free outside the handler. */
#define HANDLER_SAME 100
static void handler(int sig) {
  (void)sig;
  int saved = errno;
  const char *what = "in the handler";
  int first = live_count;
  for (int i = 0; i < HANDLER_SAME; i++)
    live_add(xmalloc(48), 48, what);
  int others = live_count;
  live_add(xmalloc((size_t)300 << 10), (size_t)300 << 10, what);
  for (int i = 0; i < 40; i++) {
    size_t n = 16 + (size_t)(i * 37) % 400;
    live_add(xmalloc(n), n, what);
  }
  unsigned char *z = xcalloc(100, 3);
  if (z == NULL) fail("%s: calloc returned NULL", what);
  for (int k = 0; k < 300; k++)
    if (z[k] != 0) fail("%s: calloc's byte %d is %d", what, k, z[k]);
  live_add(z, 300, what);
  unsigned char *a = xaligned(256, 200);
  if (((uintptr_t)a & 255) != 0)
    fail("%s: aligned_alloc(256) gave %p", what, (void *)a);
  live_add(a, 200, what);
  unsigned char *r = xmalloc(40);
  if (r == NULL) fail("%s: malloc(40) returned NULL", what);
  memset(r, 0x7e, 40);
  r = xrealloc(r, 5000);
  if (r == NULL) fail("%s: realloc returned NULL", what);
  for (int k = 0; k < 40; k++)
    if (r[k] != 0x7e) fail("%s: realloc lost byte %d", what, k);
  live_add(r, 5000, what);
  if (gift_small != NULL) xfree(gift_small);
  if (gift_large != NULL) xfree(gift_large);
  gift_small = gift_large = NULL;
  for (int i = live_count - 1; i >= others; i -= 2)
    live_free(i, what);
  /* The 48-byte blocks, the last first: each place emptied takes the
   * table's last entry, one of the others kept. */
  for (int i = others - 1; i >= first; i--)
    live_free(i, what);
  atomic_fetch_add(&handled, 1);
  errno = saved;
}

/* After the case: the signal landed once and the handler finished; every
 * live block is intact; blocks handed out now overlap none still live
 * (many, of the handler's sizes and others); everything freed, twice over. */
static void after(void) {
  const char *what = "after the handler";
  if (atomic_load(&raised) != 1 || atomic_load(&handled) != 1)
    fail("the signal was raised %d times and handled %d times, not once: "
         "is hz_test_lock_taken exported and called at the lock?",
         atomic_load(&raised), atomic_load(&handled));
  live_check_all(what);
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 600; i++) {
      size_t n =
          i % 50 == 0 ? (size_t)(100 + i) << 10 : 16 + (size_t)(i * 53) % 3000;
      live_add(xmalloc(n), n, what);
    }
    live_check_all(what);
    while (live_count > 0)
      live_free(live_count - 1, what);
  }
}

static void gifts(void) {
  gift_small = xmalloc(gift_small_size);
  gift_large = xmalloc((size_t)1 << 20);
  if (gift_small == NULL || gift_large == NULL) fail("gifts: malloc failed");
  memset(gift_small, 1, gift_small_size);
  memset(gift_large, 1, (size_t)1 << 20);
}

static void keep(int count, size_t size) {
  for (int i = 0; i < count; i++)
    live_add(xmalloc(size), size, "before the signal");
}

static void run_thread(void *(*body)(void *)) {
  pthread_t t;
  if (pthread_create(&t, NULL, body, NULL) != 0) fail("pthread_create");
  pthread_join(t, NULL);
}

/* --- the heap pool ---------------------------------------------------------
 */
static void *first_allocation(void *arg) {
  (void)arg;
  arm(HZ_LOCK_ID_POOL);
  live_add(xmalloc(32), 32, "first allocation");
  return NULL;
}

static void case_pool_first(void) { run_thread(first_allocation); }

static void *exit_after_allocation(void *arg) {
  (void)arg;
  xfree(xmalloc(32));
  arm(HZ_LOCK_ID_POOL); /* the pool lock's next taker: its exit */
  return NULL;
}

static void case_pool_exit(void) { run_thread(exit_after_allocation); }

/* --- segments: a new thread's first page ---------------------------------- */
static hz_lock_id_t new_thread_lock;

static void *first_page(void *arg) {
  (void)arg;
  arm(new_thread_lock);
  live_add(xmalloc(32), 32, "first page");
  return NULL;
}

static void case_segments(void) {
  new_thread_lock = HZ_LOCK_ID_SEGMENTS;
  run_thread(first_page);
}

static void case_segment(void) {
  new_thread_lock = HZ_LOCK_ID_SEGMENT;
  run_thread(first_page);
}

/* --- large blocks ------------------------------------------------------------
 */
static void case_large_malloc(void) {
  xfree(xmalloc((size_t)2 << 20)); /* one mapping in the cache */
  arm(HZ_LOCK_ID_LARGE);
  live_add(xmalloc((size_t)1 << 20), (size_t)1 << 20, "large malloc");
}

static void case_large_free(void) {
  void *p = xmalloc((size_t)1 << 20);
  if (p == NULL) fail("malloc of 1 MiB");
  arm(HZ_LOCK_ID_LARGE);
  xfree(p);
}

/* --- a crowded program's young threads (HZ_SHARED_PAGES=1) -----------------
 */
static pthread_mutex_t hold_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int holders_ready;
static bool holders_go;

static void *holder(void *arg) {
  (void)arg;
  xfree(xmalloc(64)); /* a heap of its own, held until it exits */
  pthread_mutex_lock(&hold_mutex);
  holders_ready++;
  pthread_cond_broadcast(&hold_cond);
  while (!holders_go)
    pthread_cond_wait(&hold_cond, &hold_mutex);
  pthread_mutex_unlock(&hold_mutex);
  return NULL;
}

static hz_lock_id_t young_lock;

static void *young(void *arg) {
  (void)arg;
  if (young_lock == HZ_LOCK_ID_CLASS) /* its class's heap set up already */
    xfree(xmalloc(48));
  arm(young_lock);
  live_add(xmalloc(48), 48, "young thread");
  return NULL;
}

/* More threads hold a heap than one a CPU (main and a holder a CPU), so a
 * thread that starts now goes without: its malloc takes a block from the
 * class's shared heap under the class's lock (and maps the shared heaps
 * first, under their make lock, if it is the first). The holders start
 * one after the other, each taking a heap while the program is not
 * crowded yet (none of them maps the shared heaps). */
static void crowded(hz_lock_id_t id) {
  long cpus = sysconf(_SC_NPROCESSORS_CONF);
  int count = (int)(cpus > 0 ? cpus : 1);
  pthread_t *t = calloc((size_t)count, sizeof *t);
  if (t == NULL) fail("calloc");
  for (int i = 0; i < count; i++) {
    if (pthread_create(&t[i], NULL, holder, NULL) != 0) fail("pthread_create");
    pthread_mutex_lock(&hold_mutex);
    while (holders_ready < i + 1)
      pthread_cond_wait(&hold_cond, &hold_mutex);
    pthread_mutex_unlock(&hold_mutex);
  }
  young_lock = id;
  run_thread(young);
  pthread_mutex_lock(&hold_mutex);
  holders_go = true;
  pthread_cond_broadcast(&hold_cond);
  pthread_mutex_unlock(&hold_mutex);
  for (int i = 0; i < count; i++)
    pthread_join(t[i], NULL);
  free(t);
}

static void case_class_young(void) { crowded(HZ_LOCK_ID_CLASS); }
static void case_make(void) { crowded(HZ_LOCK_ID_MAKE); }

/* --- the shared pages' ladder (HZ_SHARED_PAGES=-1, HZ_CPU_CACHE=0) ---------
 */
/* The bin of 48-byte blocks runs empty again and refills from the class's
 * shared heap, under its lock. */
static void case_class_refill(void) {
  keep(200, 48);
  arm(HZ_LOCK_ID_CLASS);
  keep(200, 48);
}

/* The class heap cuts pages of 2,000-byte blocks (32 a page) from the
 * segments the class heaps share, under their lock. */
static void case_class_set(void) {
  arm(HZ_LOCK_ID_CLASS_SET);
  keep(200, 2000);
}

/* The bin overflows: half of it goes to the class's depot. */
static void case_depot_put(void) {
  keep(300, 48);
  arm(HZ_LOCK_ID_DEPOT);
  while (live_count > 0)
    live_free(live_count - 1, "depot put");
}

/* The bin runs empty: a batch comes from the depot. */
static void case_depot_take(void) {
  keep(300, 48);
  while (live_count > 0)
    live_free(live_count - 1, "depot take");
  xfree(xmalloc(48)); /* the bin's top, so the next ones run it empty */
  arm(HZ_LOCK_ID_DEPOT);
  keep(300, 48);
}

/* --- malloc_trim: the caches' drain and the collection round ---------------
 */
static void case_drain(void) {
  keep(300, 48);
  arm(HZ_LOCK_ID_DRAIN);
  malloc_trim(0);
}

static void case_collect(void) {
  keep(300, 48);
  arm(HZ_LOCK_ID_COLLECT);
  malloc_trim(0);
}

/* --- the guard (HZ_GUARD_SAMPLE=1: every small malloc while slots last) ----
 */
static void case_guard_malloc(void) {
  arm(HZ_LOCK_ID_GUARD);
  live_add(xmalloc(48), 48, "guarded malloc");
}

/* The handler frees a guarded block too, with the guard's lock held by its
 * own thread: that slot waits to join the line. */
static void case_guard_free(void) {
  void *p = xmalloc(48);
  if (p == NULL) fail("malloc(48)");
  arm(HZ_LOCK_ID_GUARD);
  xfree(p);
}

typedef struct {
  const char *name;
  void (*run)(void);
  const char *settings[4]; /* HZ_* beside the common ones */
} case_t;

#define SHARED "HZ_SHARED_PAGES=-1", "HZ_CPU_CACHE=0"
static const case_t cases[] = {
    {"pool.first_allocation", case_pool_first, {NULL}},
    {"pool.thread_exit", case_pool_exit, {NULL}},
    {"segments.first_page", case_segments, {NULL}},
    {"segment.first_page", case_segment, {NULL}},
    {"large.malloc", case_large_malloc, {NULL}},
    {"large.free", case_large_free, {NULL}},
    {"class.young_thread", case_class_young, {"HZ_SHARED_PAGES=1", NULL}},
    {"make.young_thread", case_make, {"HZ_SHARED_PAGES=1", NULL}},
    {"class.refill", case_class_refill, {SHARED, NULL}},
    {"class_set.cut", case_class_set, {SHARED, NULL}},
    {"depot.put", case_depot_put, {SHARED, NULL}},
    {"depot.take", case_depot_take, {SHARED, NULL}},
    {"drain.malloc_trim", case_drain, {SHARED, NULL}},
    {"collect.malloc_trim", case_collect, {NULL}},
    {"guard.malloc", case_guard_malloc, {"HZ_GUARD_SAMPLE=1", NULL}},
    {"guard.free", case_guard_free, {"HZ_GUARD_SAMPLE=1", NULL}},
};
enum { CASE_COUNT = sizeof cases / sizeof *cases };

static void child(const case_t *c) {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
  prctl(PR_SET_DUMPABLE, 0);
  alarm(60); /* a hang: killed (every case takes milliseconds here; the
              * emulated arm64 machine of make test-arm64 is slower) */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  bool guarded = strncmp(c->name, "guard.", 6) == 0;
  if (!guarded) gifts(); /* the guard's cases make theirs after a warm-up */
  if (guarded) {
    gift_small = xmalloc(gift_small_size); /* a guarded one */
    if (gift_small == NULL) fail("malloc(48)");
  }
  c->run();
  after();
  if (gift_small != NULL || gift_large != NULL) fail("the handler kept a gift");
  _exit(0);
}

/* ---------------------------------------------------------------------------
 * Parent side
 * ------------------------------------------------------------------------- */
#define REENTERED "hakozuna: error: re-entered slow path of "

static void evaluate(const case_t *c, bool release, const child_result_t *r) {
  int lines = 0, matching = 0, fails = 0;
  const char *text = r->err != NULL ? r->err : "";
  for (const char *line = text; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    if (strncmp(line, "hakozuna: ", 10) == 0) {
      lines++;
      matching += len >= strlen(REENTERED) &&
                  strncmp(line, REENTERED, strlen(REENTERED)) == 0;
    } else if (strncmp(line, "fail: ", 6) == 0) {
      fails++;
    }
    line = end != NULL ? end + 1 : line + len;
  }
  bool ok;
  if (release) {
    ok = r->status == 0 && lines == 0 && fails == 0;
    CHECK_MSG(ok,
              "%s: expected exit 0 and no line of the library's; got "
              "status %d, signal %d, %d lines",
              c->name, r->status, r->signal, lines);
  } else {
    ok = r->signal == SIGABRT && lines == 1 && matching == 1 && fails == 0;
    CHECK_MSG(ok,
              "%s: expected SIGABRT after one line \"%s...\"; got status "
              "%d, signal %d, %d lines (%d matching)",
              c->name, REENTERED, r->status, r->signal, lines, matching);
  }
  printf("%-24s %s\n", c->name, ok ? "ok" : "FAIL");
  if (!ok) fprintf(stderr, "%s", text);
}

static const case_t *find(const char *name) {
  for (int i = 0; i < CASE_COUNT; i++)
    if (strcmp(cases[i].name, name) == 0) return &cases[i];
  return NULL;
}

static void run_case(const char *argv0, const case_t *c, bool release) {
  const char *settings[8];
  int n = 0;
  settings[n++] = "HZ_PURGE_THREAD=0"; /* no round drains or judges meanwhile */
  if (strncmp(c->name, "guard.", 6) != 0) settings[n++] = "HZ_GUARD_SAMPLE=0";
  for (int i = 0; c->settings[i] != NULL; i++)
    settings[n++] = c->settings[i];
  settings[n] = NULL;
  char arg[64];
  snprintf(arg, sizeof arg, "--case=%s", c->name);
  child_result_t r = child_run(argv0, arg, settings);
  evaluate(c, release, &r);
  free(r.err);
}

int main(int argc, char **argv) {
  if (argc == 2 && strncmp(argv[1], "--case=", 7) == 0) {
    const case_t *c = find(argv[1] + 7);
    if (c == NULL) fail("no case %s", argv[1] + 7);
    child(c);
  }
  if (argc < 2) {
    fprintf(stderr, "usage: %s release|secure|debug [CASE...]\n", argv[0]);
    return 2;
  }
  bool release = strcmp(argv[1], "release") == 0;
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc == 2)
    for (int i = 0; i < CASE_COUNT; i++)
      run_case(argv[0], &cases[i], release);
  for (int i = 2; i < argc; i++) {
    const case_t *c = find(argv[i]);
    CHECK_MSG(c != NULL, "no case %s", argv[i]);
    if (c != NULL) run_case(argv[0], c, release);
  }
  return check_report("signal");
}
