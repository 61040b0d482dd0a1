/* options: the one table of runtime options, read once from the
 * environment as HZ_<NAME>. A bad value warns and keeps the default. */
#ifndef HZ_OPTIONS_H
#define HZ_OPTIONS_H

#include <stdbool.h>

typedef enum {
  HZ_OPTION_SHOW_STATS,      /* print the statistics report at exit */
  HZ_OPTION_VERBOSE,         /* print the effective options at start-up */
  HZ_OPTION_PURGE_DELAY_MS,  /* ms before free memory goes back (-1 never) */
  HZ_OPTION_PURGE_MADV_FREE, /* purge with MADV_FREE instead of DONTNEED */
  HZ_OPTION_PURGE_THREAD,    /* a background thread purges idle memory */
  HZ_OPTION_THP,             /* let the kernel back memory with huge pages */
  HZ_OPTION_LARGE_CACHE_MAX, /* bytes of freed large blocks kept mapped */
  HZ_OPTION_STATS_JSON,      /* write the exit report as JSON to this path */
  HZ_OPTION_ZERO_ON_FREE,    /* secure variants: zero blocks when freed */
  HZ_OPTION_PROF,            /* the sampling heap profiler (prof box) */
  HZ_OPTION_PROF_SAMPLE,     /* mean bytes between samples */
  HZ_OPTION_PROF_INTERVAL,   /* a profile per this much growth (0: none) */
  HZ_OPTION_PROF_LEAKS,      /* the leak report at exit */
  HZ_OPTION_PROF_SIGNAL,     /* a profile on SIGUSR2 */
  HZ_OPTION_PROF_PREFIX,     /* where profiles go: PREFIX.pid.seq.why.heap */
  HZ_OPTION_CPU_CACHE,       /* the ladder's per-CPU caches (rseq) */
  HZ_OPTION_SHARED_PAGES,    /* threads a CPU past which a program is crowded */
  HZ_OPTION_GUARD_SAMPLE,    /* one malloc in N on guarded pages (0: none) */
  HZ_OPTION_GUARD_MAX,       /* the largest request guarded */
  HZ_OPTION_GUARD_SLOTS,     /* the pool of guarded slots */
  HZ_OPTION_GUARD_MODE,      /* 0 alternate, 1 upper guard, 2 lower */
  HZ_OPTION_GUARD_RECOVER,   /* go on after a report */
  HZ_OPTION_GUARD_DWARF,     /* stacks by backtrace(), not frame pointers */
  HZ_OPTION_COUNT
} hz_option_t;

void hz_options_init(void);
long hz_option(hz_option_t option);
bool hz_option_enabled(hz_option_t option);
/* The value of a text option (HZ_STATS_JSON), NULL when unset. */
const char *hz_option_text(hz_option_t option);
/* What an option's value may be. */
typedef enum {
  HZ_OPTION_BOOL,  /* 1/0, on/off, yes/no, true/false */
  HZ_OPTION_BYTES, /* 0 or more, with an optional K/M/G suffix */
  HZ_OPTION_MS,    /* a count (milliseconds): 0 or more, or -1 */
  HZ_OPTION_TEXT   /* any text (a path) */
} hz_option_kind_t;

/* Parse one value of a number or boolean kind. Returns false when it is
 * malformed or out of the kind's range. */
bool hz_options_parse(const char *text, hz_option_kind_t kind, long *out);
void hz_options_print(void);

#endif
