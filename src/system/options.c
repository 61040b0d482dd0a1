/* options: name, default and description of every HZ_* option in one
 * table; values are read from the environment on the first allocation. */
#include "options.h"

#include <ctype.h>
#include <limits.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "os.h"

typedef struct {
  const char *name; /* without the HZ_ prefix */
  hz_option_kind_t kind;
  long value; /* starts as the default; 1 when a text option is set */
  const char *description;
  const char *text; /* a text option's value */
} option_entry_t;

static option_entry_t option_table[HZ_OPTION_COUNT] = {
    [HZ_OPTION_SHOW_STATS] = {"SHOW_STATS", HZ_OPTION_BOOL, 0,
                              "print a statistics report to stderr at exit"},
    [HZ_OPTION_VERBOSE] = {"VERBOSE", HZ_OPTION_BOOL, 0,
                           "print the effective options at start-up"},
    [HZ_OPTION_PURGE_DELAY_MS] =
        {"PURGE_DELAY_MS", HZ_OPTION_MS, 100,
         "ms free memory waits before it is given back (0 at once, -1 "
         "never)"},
    [HZ_OPTION_PURGE_MADV_FREE] = {"PURGE_MADV_FREE", HZ_OPTION_BOOL, 0,
                                   "give memory back with MADV_FREE (lazy) "
                                   "instead of MADV_DONTNEED"},
    [HZ_OPTION_PURGE_THREAD] = {"PURGE_THREAD", HZ_OPTION_BOOL, 1,
                                "in threaded programs, a background thread "
                                "purges memory that idle threads left"},
    [HZ_OPTION_THP] = {"THP", HZ_OPTION_BOOL, 1,
                       "allow transparent huge pages (0: ask the kernel for "
                       "none, purge at page granularity)"},
    [HZ_OPTION_LARGE_CACHE_MAX] = {"LARGE_CACHE_MAX", HZ_OPTION_BYTES, 0,
                                   "bytes of freed large blocks kept for "
                                   "reuse (default: RAM/32, 64M..1G)"},
    [HZ_OPTION_STATS_JSON] = {"STATS_JSON", HZ_OPTION_TEXT, 0,
                              "write the statistics report as JSON to this "
                              "path at exit"},
    [HZ_OPTION_ZERO_ON_FREE] = {"ZERO_ON_FREE", HZ_OPTION_BOOL, 0,
                                "zero every block when it is freed (secure "
                                "and debug variants)"},
    [HZ_OPTION_PROF] = {"PROF", HZ_OPTION_BOOL, 0,
                        "sample allocations and write heap profiles "
                        "(PREFIX.program.pid.seq.why.heap) at exit"},
    [HZ_OPTION_PROF_SAMPLE] = {"PROF_SAMPLE", HZ_OPTION_BYTES, 512 << 10,
                               "mean bytes allocated between two samples"},
    [HZ_OPTION_PROF_INTERVAL] = {"PROF_INTERVAL", HZ_OPTION_BYTES, 0,
                                 "write a profile each time live memory grows "
                                 "by this much (0: never)"},
    [HZ_OPTION_PROF_LEAKS] = {"PROF_LEAKS", HZ_OPTION_BOOL, 0,
                              "print the sampled blocks still live at exit, "
                              "by stack"},
    [HZ_OPTION_PROF_SIGNAL] = {"PROF_SIGNAL", HZ_OPTION_BOOL, 0,
                               "write a profile when the process gets "
                               "SIGUSR2"},
    [HZ_OPTION_PROF_PREFIX] = {"PROF_PREFIX", HZ_OPTION_TEXT, 0,
                               "path prefix of the profiles (default "
                               "hakozuna, in the working directory)"},
    [HZ_OPTION_CPU_CACHE] = {"CPU_CACHE", HZ_OPTION_BOOL, 1,
                             "per-CPU caches of the shared pages' blocks "
                             "up to 32 KiB on glibc's rseq (release "
                             "build; 0: their depots only)"},
    [HZ_OPTION_SHARED_PAGES] = {"SHARED_PAGES", HZ_OPTION_MS, 4,
                                "threads a CPU past which a program is "
                                "crowded: its classes whose blocks other "
                                "threads free share pages even where the "
                                "frees come in runs, and its young "
                                "threads start without a heap (0: no "
                                "class ever shares pages; -1: every class "
                                "shares them from the start)"},
    [HZ_OPTION_GUARD_SAMPLE] = {"GUARD_SAMPLE", HZ_OPTION_BYTES,
                                HZ_GUARD_SAMPLE_DEFAULT,
                                "about one malloc in this many (up to "
                                "HZ_GUARD_MAX bytes) on pages of its own "
                                "between guard pages (0: none)"},
    [HZ_OPTION_GUARD_MAX] = {"GUARD_MAX", HZ_OPTION_BYTES, 4096,
                             "the largest request the guard samples"},
    [HZ_OPTION_GUARD_SLOTS] = {"GUARD_SLOTS", HZ_OPTION_BYTES, 16,
                               "guarded blocks live at once; when all are "
                               "taken, sampling waits"},
    [HZ_OPTION_GUARD_MODE] = {"GUARD_MODE", HZ_OPTION_BYTES, 0,
                              "0: each guarded block against the upper or "
                              "the lower guard at random, 1: the upper "
                              "(overflows fault), 2: the lower (underflows)"},
    [HZ_OPTION_GUARD_RECOVER] = {"GUARD_RECOVER", HZ_OPTION_BOOL, 0,
                                 "after a guarded block's report, open its "
                                 "page and go on instead of dying"},
    [HZ_OPTION_GUARD_DWARF] = {"GUARD_DWARF", HZ_OPTION_BOOL, 0,
                               "take guarded blocks' stacks with backtrace() "
                               "(whole stacks without frame pointers; loads "
                               "libgcc_s, about 0.5 MB) instead of walking "
                               "frame pointers"},
};

/* Options whose values must lie in a range beyond their kind's; a value
 * outside it is a bad value. */
static const struct {
  hz_option_t option;
  long min, max;
} option_ranges[] = {
    {HZ_OPTION_GUARD_MAX, 1, (long)HZ_SMALL_MAX},
    {HZ_OPTION_GUARD_SLOTS, 1, 4096},
    {HZ_OPTION_GUARD_MODE, 0, 2},
    {HZ_OPTION_SHARED_PAGES, -1, 4096},
};

static bool option_in_range(hz_option_t option, long value) {
  for (size_t i = 0; i < sizeof option_ranges / sizeof option_ranges[0]; i++)
    if (option_ranges[i].option == option)
      return value >= option_ranges[i].min && value <= option_ranges[i].max;
  return true;
}

/* Defaults that depend on the machine. */
static void options_machine_defaults(void) {
  size_t ram = hz_os_physical_memory();
  size_t cache = ram / 32;
  if (cache < ((size_t)64 << 20)) cache = (size_t)64 << 20;
  if (cache > ((size_t)1 << 30)) cache = (size_t)1 << 30;
  option_table[HZ_OPTION_LARGE_CACHE_MAX].value = (long)cache;
}

static bool parse_bool(const char *text, long *out) {
  static const char *const truthy[] = {"on", "yes", "true"};
  static const char *const falsy[] = {"off", "no", "false"};
  for (size_t i = 0; i < 3; i++) {
    if (strcasecmp(text, truthy[i]) == 0) return *out = 1, true;
    if (strcasecmp(text, falsy[i]) == 0) return *out = 0, true;
  }
  return false;
}

/* Decimal digits, no sign, no leading zero ("0" itself aside), at most
 * LONG_MAX; *end is left at the first other character. */
static bool parse_digits(const char *text, const char **end, long *out) {
  const char *s = text;
  long value = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (value > (LONG_MAX - (*s - '0')) / 10) return false;
    value = value * 10 + (*s - '0');
  }
  if (s == text || (text[0] == '0' && s - text > 1)) return false;
  *end = s;
  *out = value;
  return true;
}

/* Digits with an optional binary K/M/G suffix (then an optional i and
 * B); false when malformed or beyond a long. */
static bool parse_number(const char *text, bool suffix_ok, long *out) {
  const char *end;
  long value;
  if (!parse_digits(text, &end, &value)) return false;
  long scale = 1;
  switch (suffix_ok ? toupper((unsigned char)*end) : 0) {
  case 'K': scale = 1L << 10; break;
  case 'M': scale = 1L << 20; break;
  case 'G': scale = 1L << 30; break;
  default: break;
  }
  if (scale != 1) end++;
  if (scale != 1 && (*end == 'i' || *end == 'I')) end++;
  if (scale != 1 && (*end == 'b' || *end == 'B')) end++;
  if (*end != 0 || value > LONG_MAX / scale) return false;
  *out = value * scale;
  return true;
}

bool hz_options_parse(const char *text, hz_option_kind_t kind, long *out) {
  if (text == NULL || *text == 0) return false;
  long value;
  switch (kind) {
  case HZ_OPTION_BOOL:
    if (parse_bool(text, out)) return true;
    if (!parse_number(text, false, &value) || (value != 0 && value != 1))
      return false;
    break;
  case HZ_OPTION_BYTES:
    if (!parse_number(text, true, &value)) return false;
    break;
  case HZ_OPTION_MS:
    if (strcmp(text, "-1") == 0)
      value = -1;
    else if (!parse_number(text, false, &value))
      return false;
    break;
  default: return false;
  }
  *out = value;
  return true;
}

void hz_options_init(void) {
  options_machine_defaults();
  char name[64] = "HZ_";
  for (int i = 0; i < HZ_OPTION_COUNT; i++) {
    option_entry_t *entry = &option_table[i];
    size_t n = 3;
    for (const char *s = entry->name; *s && n < sizeof name - 1; s++)
      name[n++] = *s;
    name[n] = 0;
    const char *text = hz_os_getenv(name);
    if (text == NULL) continue;
    long value;
    if (entry->kind == HZ_OPTION_TEXT) {
      entry->text = text;
      entry->value = *text != 0;
    } else if (hz_options_parse(text, entry->kind, &value) &&
               option_in_range((hz_option_t)i, value))
      entry->value = value;
    else
      hz_os_message("warning: ignoring bad value %s=\"%s\" (keeping %ld)", name,
                    text, entry->value);
  }
  if (hz_option_enabled(HZ_OPTION_VERBOSE)) hz_options_print();
  if (hz_option_enabled(HZ_OPTION_SHOW_STATS) ||
      hz_option_enabled(HZ_OPTION_PROF_LEAKS))
    hz_os_keep_report_fd();
}

long hz_option(hz_option_t option) { return option_table[option].value; }

bool hz_option_enabled(hz_option_t option) {
  return option_table[option].value != 0;
}

const char *hz_option_text(hz_option_t option) {
  return option_table[option].text;
}

void hz_options_print(void) {
  for (int i = 0; i < HZ_OPTION_COUNT; i++) {
    const option_entry_t *entry = &option_table[i];
    if (entry->kind == HZ_OPTION_TEXT)
      hz_os_message("option HZ_%s=%s  (%s)", entry->name,
                    entry->text != NULL ? entry->text : "", entry->description);
    else
      hz_os_message("option HZ_%s=%ld  (%s)", entry->name, entry->value,
                    entry->description);
  }
}
