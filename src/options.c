/* options: name, default and description of every HZ_* option in one
 * table; values are read from the environment on the first allocation. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <strings.h>

#include "os.h"

typedef struct {
  const char *name; /* without the HZ_ prefix */
  long value;       /* starts as the default; 1 when a text option is set */
  const char *description;
  bool is_text; /* the value is the text itself (a path) */
  const char *text;
} option_entry_t;

static option_entry_t option_table[HZ_OPTION_COUNT] = {
    [HZ_OPTION_SHOW_STATS] = {"SHOW_STATS", 0,
                              "print a statistics report to stderr at exit"},
    [HZ_OPTION_VERBOSE] = {"VERBOSE", 0,
                           "print the effective options at start-up"},
    [HZ_OPTION_PURGE_DELAY_MS] =
        {"PURGE_DELAY_MS", 1000,
         "ms free memory waits before it is given back (0 at once, -1 "
         "never)"},
    [HZ_OPTION_PURGE_MADV_FREE] = {"PURGE_MADV_FREE", 0,
                                   "give memory back with MADV_FREE (lazy) "
                                   "instead of MADV_DONTNEED"},
    [HZ_OPTION_PURGE_THREAD] = {"PURGE_THREAD", 1,
                                "in threaded programs, a background thread "
                                "purges memory that idle threads left"},
    [HZ_OPTION_THP] = {"THP", 1,
                       "allow transparent huge pages (0: ask the kernel for "
                       "none, purge at page granularity)"},
    [HZ_OPTION_LARGE_CACHE_MAX] = {"LARGE_CACHE_MAX", 0,
                                   "bytes of freed large blocks kept for "
                                   "reuse (default: RAM/32, 64M..1G)"},
    [HZ_OPTION_STATS_JSON] = {"STATS_JSON", 0,
                              "write the statistics report as JSON to this "
                              "path at exit",
                              .is_text = true},
    [HZ_OPTION_ZERO_ON_FREE] = {"ZERO_ON_FREE", 0,
                                "zero every block when it is freed (secure "
                                "and debug variants)"},
};

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

bool hz_options_parse(const char *text, long *out) {
  if (text == NULL || *text == 0) return false;
  if (parse_bool(text, out)) return true;
  int saved = errno;
  errno = 0;
  char *end = NULL;
  long value = strtol(text, &end, 10);
  bool ok = errno == 0 && end != text;
  errno = saved;
  if (!ok) return false;
  long scale = 1;
  switch (toupper((unsigned char)*end)) {
  case 'K':
    scale = 1L << 10;
    end++;
    break;
  case 'M':
    scale = 1L << 20;
    end++;
    break;
  case 'G':
    scale = 1L << 30;
    end++;
    break;
  default: break;
  }
  if (scale != 1 && (*end == 'i' || *end == 'I')) end++;
  if (scale != 1 && (*end == 'b' || *end == 'B')) end++;
  if (*end != 0) return false;
  if (value > LONG_MAX / scale || value < LONG_MIN / scale) return false;
  *out = value * scale;
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
    if (entry->is_text) {
      entry->text = text;
      entry->value = *text != 0;
    } else if (hz_options_parse(text, &value))
      entry->value = value;
    else
      hz_os_message("warning: ignoring bad value %s=\"%s\" (keeping %ld)", name,
                    text, entry->value);
  }
  if (hz_option_enabled(HZ_OPTION_VERBOSE)) hz_options_print();
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
    if (entry->is_text)
      hz_os_message("option HZ_%s=%s  (%s)", entry->name,
                    entry->text != NULL ? entry->text : "", entry->description);
    else
      hz_os_message("option HZ_%s=%ld  (%s)", entry->name, entry->value,
                    entry->description);
  }
}
