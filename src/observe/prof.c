/* prof: sampling decisions, the table of sampled blocks and their stacks,
 * and when profiles are written (see prof.h). What a profile looks like is
 * the profile-writer box's (prof_write.c); this box hands it the live
 * samples and the stacks.
 *
 * One mutex guards the tables. A sample unwinds its stack before taking
 * it; a signal handler that asks for a profile only tries it, and when it
 * is held, whoever holds it writes the profile as it lets go. */
#define _GNU_SOURCE
#include "prof.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "check.h"
#include "hakozuna.h"
#include "lock.h"
#include "options.h"
#include "os.h"
#include "prof_store.h"
#include "prof_write.h"

bool hz_prof_active;

/* Adaptive: held briefly by many threads, it spins before it sleeps. */
static hz_lock_t prof_lock = {PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP, 0,
                              HZ_LOCK_ID_PROF};
static double sample_mean;        /* HZ_PROF_SAMPLE, bytes */
static double live_bytes;         /* estimated, under prof_lock */
static double next_growth_dump;   /* live_bytes that triggers one */
static _Atomic bool dump_pending; /* a signal asked while it was held */
static unsigned dump_sequence;    /* under prof_lock */
static int (*unwind)(void **frames, int max); /* libunwind's unw_backtrace */
/* Held for reading while a thread unwinds, and for writing across fork:
 * libunwind takes locks of its own while it walks a stack, and a fork
 * child that found one held would wait for it forever. */
static pthread_rwlock_t unwind_gate = PTHREAD_RWLOCK_INITIALIZER;
static bool unwind_gate_closed;

static HZ_TLS bool prof_busy;    /* this thread is inside the profiler */
static HZ_TLS double large_left; /* bytes to the next large sample */

/* ---------------------------------------------------------------------------
 * Sampling decisions
 * ------------------------------------------------------------------------- */
/* Uniform in (0, 1], from the check box's per-thread generator. */
static double random_unit(void) {
  uint64_t bits = hz_check_random() >> 11;
  return ((double)bits + 1.0) / 9007199254740993.0;
}

/* Bytes to the next sample point of a Poisson process of the mean rate. */
static double random_gap(void) { return -log(random_unit()) * sample_mean; }

uint64_t hz_prof_blocks_to_skip(size_t block_size) {
  double blocks = random_gap() / (double)block_size;
  return blocks >= 1e18 ? (uint64_t)1e18 : (uint64_t)blocks + 1;
}

/* How many allocations of `unit` bytes one sample stands for. */
static double sample_weight(size_t unit) {
  return 1.0 / -expm1(-(double)unit / sample_mean);
}

/* ---------------------------------------------------------------------------
 * The tables: records of live sampled blocks, sampled blocks per page, and
 * the distinct stacks (prof_store.h's open-addressing maps and arrays).
 * ------------------------------------------------------------------------- */
static hz_prof_map_t records;     /* block -> record index */
static hz_prof_map_t page_counts; /* page -> sampled blocks on it */
static hz_prof_map_t stack_index; /* stack hash -> stack index */
static hz_prof_store_t store;     /* records and stacks */

static uint64_t stack_hash(void *const *frames, uint32_t depth) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ depth;
  for (uint32_t i = 0; i < depth; i++) {
    h ^= (uint64_t)(uintptr_t)frames[i];
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 32;
  }
  return h | 1; /* keys are never 0 */
}

/* The stack's index, adding it if new; UINT32_MAX when out of memory. */
static uint32_t stack_intern(void *const *frames, uint32_t depth) {
  uint64_t key = stack_hash(frames, depth);
  for (;;) {
    uintptr_t found;
    if (!hz_prof_map_get(&stack_index, key, &found)) break;
    const hz_prof_stack_t *s = &store.stacks[found];
    if (s->depth == depth &&
        memcmp(s->frames, frames, depth * sizeof frames[0]) == 0)
      return (uint32_t)found;
    key += 2; /* a different stack with the same hash: probe the next key */
  }
  uint32_t index = hz_prof_store_add_stack(&store, frames, depth);
  if (index != UINT32_MAX && !hz_prof_map_put(&stack_index, key, index))
    return UINT32_MAX;
  return index;
}

/* ---------------------------------------------------------------------------
 * Counting filters: how many live samples hash to each slot, by block and
 * by page. Changed under prof_lock, read without it: a 0 means none. The
 * thread that sampled a block raised its counts before handing it out, so
 * whoever frees it sees them; only the page's owner trusts a 0 for a page
 * (others only lower page counts, so the owner never reads one too low).
 * ------------------------------------------------------------------------- */
#define FILTER_SLOTS ((size_t)1 << 16)

static _Atomic uint32_t *block_filter, *page_filter;

static _Atomic uint32_t *filter_slot(_Atomic uint32_t *filter, const void *p) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ULL;
  return &filter[h >> (64 - 16)];
}

static bool filter_has(_Atomic uint32_t *filter, const void *p) {
  return atomic_load_explicit(filter_slot(filter, p), memory_order_relaxed) !=
         0;
}

static void filter_add(_Atomic uint32_t *filter, const void *p, int32_t n) {
  atomic_fetch_add_explicit(filter_slot(filter, p), (uint32_t)n,
                            memory_order_relaxed);
}

/* ---------------------------------------------------------------------------
 * Writing profiles
 * ------------------------------------------------------------------------- */
static const char *dump_prefix(void) {
  const char *prefix = hz_option_text(HZ_OPTION_PROF_PREFIX);
  return prefix != NULL && *prefix != 0 ? prefix : "hakozuna";
}

/* The program's name as it was started (no directory), so that the
 * profiles of the processes a command starts tell which is which. */
static const char *program_name(void) {
  const char *name = program_invocation_short_name;
  return name != NULL && *name != 0 ? name : "program";
}

/* Under prof_lock: write the profile to `path`, or to the next of the
 * prefix's names, marked with `why`. A profile that cannot be written is
 * reported once, in one line. */
static bool dump_locked(const char *path, const char *why) {
  static bool warned;
  char name[4096];
  if (path == NULL) {
    hz_prof_name(name, sizeof name, dump_prefix(), program_name(),
                 (unsigned long)getpid(), dump_sequence++, why);
    path = name;
  }
  bool ok = hz_prof_write_heap(path, &store);
  if (!ok && !warned) {
    warned = true;
    hz_os_message("warning: could not write the heap profile to %s", path);
  }
  return ok;
}

/* Take the tables, marking this thread as inside the profiler (its own
 * allocations are not sampled); returns what the mark was. */
static bool prof_lock_tables(void) {
  bool was_busy = prof_busy;
  prof_busy = true;
  hz_lock(&prof_lock);
  return was_busy;
}

/* Let go of the tables, first writing the profile a signal asked for. */
static void prof_unlock_tables(bool was_busy) {
  if (atomic_exchange_explicit(&dump_pending, false, memory_order_acquire))
    dump_locked(NULL, "signal");
  hz_unlock(&prof_lock);
  prof_busy = was_busy;
}

static void on_signal(int sig) {
  (void)sig;
  int saved = errno;
  if (hz_lock_try(&prof_lock)) {
    dump_locked(NULL, "signal");
    hz_unlock(&prof_lock);
  } else {
    atomic_store_explicit(&dump_pending, true, memory_order_release);
  }
  errno = saved;
}

/* Every HZ_PROF_INTERVAL bytes the live estimate grows past its high
 * mark, a profile. */
static void check_growth_locked(void) {
  long interval = hz_option(HZ_OPTION_PROF_INTERVAL);
  if (interval <= 0 || live_bytes < next_growth_dump) return;
  dump_locked(NULL, "growth");
  next_growth_dump = live_bytes + (double)interval;
}

HZ_EXPORT int hz_prof_dump(const char *path) {
  if (!hz_prof_active) {
    errno = ENOENT;
    return -1;
  }
  bool was_busy = prof_lock_tables();
  int saved = errno;
  errno = 0;
  bool ok = dump_locked(path, "api");
  int err = errno != 0 ? errno : EIO;
  prof_unlock_tables(was_busy);
  errno = ok ? saved : err;
  return ok ? 0 : -1;
}

/* ---------------------------------------------------------------------------
 * Recording and forgetting blocks
 * ------------------------------------------------------------------------- */
/* Frames up to the allocator's caller are the allocator's own: those
 * whose address lies in the allocator's object, when it is a shared
 * library of its own (a static build shows them, which is harmless). */
static uintptr_t own_start, own_end;

static uint32_t capture(void **frames) {
  void *raw[HZ_PROF_DEPTH + 16];
  pthread_rwlock_rdlock(&unwind_gate);
  int n = unwind(raw, HZ_PROF_DEPTH + 16);
  pthread_rwlock_unlock(&unwind_gate);
  int first = 0;
  while (first < n && (uintptr_t)raw[first] >= own_start &&
         (uintptr_t)raw[first] < own_end)
    first++;
  uint32_t depth = 0;
  for (int i = first; i < n && depth < HZ_PROF_DEPTH; i++)
    frames[depth++] = raw[i];
  return depth;
}

static bool record_locked(void *block, size_t size, size_t unit,
                          const void *page, void *const *frames,
                          uint32_t depth) {
  uint32_t stack = stack_intern(frames, depth);
  if (stack == UINT32_MAX) return false;
  double weight = sample_weight(unit);
  uint32_t index = hz_prof_store_add_record(&store, stack, size, weight);
  if (index == UINT32_MAX) return false;
  if (!hz_prof_map_put(&records, (uintptr_t)block, index)) {
    hz_prof_store_drop_record(&store, index);
    return false;
  }
  if (page != NULL) {
    uintptr_t count = 0;
    hz_prof_map_get(&page_counts, (uintptr_t)page, &count);
    hz_prof_map_put(&page_counts, (uintptr_t)page, count + 1);
    filter_add(page_filter, page, 1);
  }
  filter_add(block_filter, block, 1);
  hz_prof_stack_t *s = &store.stacks[stack];
  s->alloc_count += weight;
  s->alloc_bytes += weight * (double)size;
  live_bytes += weight * (double)size;
  check_growth_locked();
  return true;
}

bool hz_prof_record(void *block, size_t size, size_t unit, const void *page) {
  if (prof_busy) return false;
  prof_busy = true; /* the unwinder may allocate */
  void *frames[HZ_PROF_DEPTH];
  uint32_t depth = capture(frames);
  hz_lock(&prof_lock);
  bool ok = record_locked(block, size, unit, page, frames, depth);
  prof_unlock_tables(false);
  return ok;
}

void hz_prof_large(void *block, size_t size) {
  if (prof_busy) return;
  large_left -= (double)size;
  if (large_left >= 0) return;
  large_left = random_gap();
  hz_prof_record(block, size, size, NULL);
}

/* Under prof_lock: drop the record of block, if any; true if the page
 * still holds sampled blocks. */
static bool forget_locked(const void *block, const void *page) {
  uintptr_t index;
  if (hz_prof_map_take(&records, (uintptr_t)block, &index)) {
    const hz_prof_record_t *r = &store.records[index];
    live_bytes -= r->weight * (double)r->size;
    hz_prof_store_drop_record(&store, (uint32_t)index);
    filter_add(block_filter, block, -1);
    uintptr_t count;
    if (page != NULL &&
        hz_prof_map_take(&page_counts, (uintptr_t)page, &count)) {
      filter_add(page_filter, page, -1);
      if (count > 1) hz_prof_map_put(&page_counts, (uintptr_t)page, count - 1);
    }
  }
  uintptr_t left = 0;
  return page != NULL && hz_prof_map_get(&page_counts, (uintptr_t)page, &left);
}

bool hz_prof_may_be_sampled(const void *block) {
  return filter_has(block_filter, block);
}

bool hz_prof_page_may_hold(const void *page) {
  return filter_has(page_filter, page);
}

bool hz_prof_forget(const void *block, const void *page) {
  if (!filter_has(block_filter, block))
    return page != NULL && filter_has(page_filter, page);
  bool was_busy = prof_lock_tables();
  bool left = forget_locked(block, page);
  prof_unlock_tables(was_busy);
  return left;
}

void hz_prof_moved(const void *from, void *to, size_t size) {
  if (!filter_has(block_filter, from)) return;
  bool was_busy = prof_lock_tables();
  uintptr_t index;
  if (hz_prof_map_take(&records, (uintptr_t)from, &index)) {
    hz_prof_record_t *r = &store.records[index];
    live_bytes += r->weight * ((double)size - (double)r->size);
    r->size = size;
    filter_add(block_filter, from, -1);
    if (hz_prof_map_put(&records, (uintptr_t)to, index))
      filter_add(block_filter, to, 1);
    else
      hz_prof_store_drop_record(&store, (uint32_t)index);
  }
  prof_unlock_tables(was_busy);
}

/* ---------------------------------------------------------------------------
 * Start, fork, exit
 * ------------------------------------------------------------------------- */
/* A program without a program interpreter (PT_INTERP) is linked
 * statically: a library loaded into it would bring a second C library,
 * and libunwind crashes there. */
static bool program_is_static(void) {
  const ElfW(Phdr) *phdr = (const ElfW(Phdr) *)getauxval(AT_PHDR);
  unsigned long count = getauxval(AT_PHNUM);
  if (phdr == NULL) return false;
  for (unsigned long i = 0; i < count; i++)
    if (phdr[i].p_type == PT_INTERP) return false;
  return true;
}

/* libunwind, loaded only now (a program that never profiles never loads
 * it), its symbols kept to ourselves (it also defines backtrace). */
static bool load_unwinder(void) {
  if (program_is_static()) {
    hz_os_message("HZ_PROF needs a dynamically linked program (it loads "
                  "libunwind.so.8); this one is static, profiling is off");
    return false;
  }
  void *lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (lib != NULL) *(void **)&unwind = dlsym(lib, "unw_backtrace");
  if (unwind == NULL) {
    hz_os_message("HZ_PROF needs libunwind.so.8 (Debian package libunwind8);"
                  " profiling is off");
    return false;
  }
  hz_prof_object_range((const void *)&hz_prof_start, &own_start, &own_end);
  void *warm[4];
  unwind(warm, 4); /* the unwinder sets itself up here, not in malloc */
  return true;
}

void hz_prof_start(void) {
  if (!hz_option_enabled(HZ_OPTION_PROF) || hz_prof_active) return;
  prof_busy = true; /* dlopen allocates */
  bool ok = load_unwinder();
  prof_busy = false;
  if (!ok) return;
  block_filter = hz_os_map(FILTER_SLOTS * sizeof *block_filter);
  page_filter = hz_os_map(FILTER_SLOTS * sizeof *page_filter);
  if (block_filter == NULL || page_filter == NULL) {
    hz_os_message("HZ_PROF: out of memory; profiling is off");
    return;
  }
  long mean = hz_option(HZ_OPTION_PROF_SAMPLE);
  sample_mean = mean > 0 ? (double)mean : 1.0;
  large_left = random_gap();
  next_growth_dump = (double)hz_option(HZ_OPTION_PROF_INTERVAL);
  if (hz_option_enabled(HZ_OPTION_PROF_SIGNAL)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR2, &action, NULL);
  }
  hz_prof_active = true;
}

void hz_prof_fork_wait_unwinds(void) {
  unwind_gate_closed = hz_prof_active;
  if (unwind_gate_closed) pthread_rwlock_wrlock(&unwind_gate);
}

void hz_prof_fork_prepare(void) {
  if (hz_prof_active) hz_lock(&prof_lock);
}

void hz_prof_fork_parent(void) {
  if (hz_prof_active) hz_unlock(&prof_lock);
  if (unwind_gate_closed) pthread_rwlock_unlock(&unwind_gate);
}

void hz_prof_fork_child(void) {
  if (hz_prof_active) hz_lock_reinit(&prof_lock);
  if (unwind_gate_closed) pthread_rwlock_init(&unwind_gate, NULL);
}

/* At exit: the final profile, and the leak report if asked. */
void hz_prof_exit_report(void) {
  if (!hz_prof_active) return;
  bool was_busy = prof_lock_tables();
  dump_locked(NULL, "exit");
  if (hz_option_enabled(HZ_OPTION_PROF_LEAKS))
    hz_prof_report_leaks(&store, sample_mean);
  prof_unlock_tables(was_busy);
}

__attribute__((destructor)) static void prof_exit(void) {
  hz_prof_exit_report();
}
