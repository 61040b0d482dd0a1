/* options_env_test — the HZ_* options as a program sees them, under
 * LD_PRELOAD: run without arguments, the test re-executes itself
 * (/proc/self/exe child) under chosen environments and reads the child's
 * stderr.
 *
 * Checks:
 *   - HZ_VERBOSE=1 prints one line "hakozuna: option HZ_<NAME>=<value>
 *     (<description>)" per option, each option exactly once, all of them
 *     by the time the first allocation returns, with the defaults
 *     (PURGE_DELAY_MS 100, LARGE_CACHE_MAX between 64 MiB and 1 GiB, ...);
 *   - without HZ_VERBOSE nothing of the kind is printed;
 *   - good values show up parsed (250, 128M = 134217728, on/off/yes/FALSE,
 *     a path for HZ_STATS_JSON);
 *   - a bad value prints one warning `ignoring bad value HZ_<NAME>="<text>"
 *     (keeping <default>)` and the option keeps its default, with or
 *     without HZ_VERBOSE;
 *   - values out of an option's range (HZ_GUARD_MODE 0..2, HZ_GUARD_SLOTS
 *     1..4096, HZ_GUARD_MAX 1 B..256 KiB) are bad values too;
 *   - HZ_SHOW_STATS=1 prints "hakozuna: stats report" once, at exit (after
 *     main returned), also when the program ends with _exit or _Exit
 *     (which run no destructor); 0 or a bad value prints none.
 *
 * usage: options_env_test [empty-json]
 *
 * With "empty-json": HZ_STATS_JSON set to the empty string counts as
 * unset (its value is 0): no attempt to write a file at exit, no warning.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "child_run.h"

#define MARK_ALLOCATED "child: allocated\n"
#define MARK_LEAVING   "child: leaving main\n"

/* Every option, in the order the library prints them. */
static const char *const option_names[] = {
    "SHOW_STATS",   "VERBOSE",       "PURGE_DELAY_MS",  "PURGE_MADV_FREE",
    "PURGE_THREAD", "THP",           "LARGE_CACHE_MAX", "STATS_JSON",
    "ZERO_ON_FREE", "PROF",          "PROF_SAMPLE",     "PROF_INTERVAL",
    "PROF_LEAKS",   "PROF_SIGNAL",   "PROF_PREFIX",     "CPU_CACHE",
    "SHARED_PAGES", "GUARD_SAMPLE",  "GUARD_MAX",       "GUARD_SLOTS",
    "GUARD_MODE",   "GUARD_RECOVER", "GUARD_DWARF"};
#define OPTION_COUNT (int)(sizeof option_names / sizeof option_names[0])

static void *volatile sink;

static int child_main(void) {
  /* The first allocation reads the options (if nothing did before main). */
  void *p = malloc(64);
  sink = p;
  if (write(STDERR_FILENO, MARK_ALLOCATED, strlen(MARK_ALLOCATED)) < 0)
    return 2;
  free(p);
  if (write(STDERR_FILENO, MARK_LEAVING, strlen(MARK_LEAVING)) < 0) return 2;
  return 0;
}

static const char *self;

static child_result_t run(const char *label, const char *const *settings) {
  child_result_t r = child_run(self, "child", settings);
  CHECK_MSG(r.err != NULL && r.status == 0, "%s: child exit status %d", label,
            r.status);
  if (r.err == NULL) r.err = calloc(1, 1);
  CHECK_MSG(strstr(r.err, MARK_LEAVING) != NULL,
            "%s: the child did not reach the end of main; stderr:\n%s", label,
            r.err);
  return r;
}

/* The value printed for option `name` (text between '=' and "  ("), into
 * value; false (reported) when the line is missing or malformed. */
static bool option_value(const char *label, const char *err, const char *name,
                         char *value, size_t cap) {
  char prefix[64], line[512];
  snprintf(prefix, sizeof prefix, "hakozuna: option HZ_%s=", name);
  if (!line_starting(err, prefix, line, sizeof line)) {
    CHECK_MSG(false, "%s: no line \"%s...\"; stderr:\n%s", label, prefix, err);
    return false;
  }
  const char *v = line + strlen(prefix);
  const char *open = strstr(v, "  (");
  size_t len = strlen(line);
  bool ok = open != NULL && len > 0 && line[len - 1] == ')' &&
            (size_t)(open - v) < cap;
  CHECK_MSG(ok, "%s: malformed option line \"%s\"", label, line);
  if (!ok) return false;
  memcpy(value, v, (size_t)(open - v));
  value[open - v] = 0;
  return true;
}

static void expect_value(const char *label, const char *err, const char *name,
                         const char *want) {
  char value[256];
  if (option_value(label, err, name, value, sizeof value))
    CHECK_MSG(strcmp(value, want) == 0, "%s: HZ_%s=%s, want %s", label, name,
              value, want);
}

/* Every option printed exactly once, no other option line, all before the
 * first allocation returned. */
static void expect_option_lines(const char *label, const char *err) {
  const char *allocated = strstr(err, MARK_ALLOCATED);
  for (int i = 0; i < OPTION_COUNT; i++) {
    char needle[64];
    snprintf(needle, sizeof needle, "hakozuna: option HZ_%s=", option_names[i]);
    int n = count_of(err, needle);
    CHECK_MSG(n == 1, "%s: %d lines for HZ_%s", label, n, option_names[i]);
    const char *at = strstr(err, needle);
    CHECK_MSG(at == NULL || (at == err || at[-1] == '\n'),
              "%s: HZ_%s not at the start of a line", label, option_names[i]);
    CHECK_MSG(at == NULL || (allocated != NULL && at < allocated),
              "%s: HZ_%s printed after the first allocation", label,
              option_names[i]);
  }
  int lines = count_of(err, "hakozuna: option ");
  CHECK_MSG(lines == OPTION_COUNT, "%s: %d option lines, want %d; stderr:\n%s",
            label, lines, OPTION_COUNT, err);
}

static void expect_no_option_lines(const char *label, const char *err) {
  CHECK_MSG(strstr(err, "hakozuna: option") == NULL,
            "%s: options printed without HZ_VERBOSE; stderr:\n%s", label, err);
}

static void expect_stats_report(const char *label, const char *err, bool want) {
  int n = count_of(err, "hakozuna: stats report\n");
  if (!want) {
    CHECK_MSG(n == 0, "%s: unexpected stats report; stderr:\n%s", label, err);
    return;
  }
  CHECK_MSG(n == 1, "%s: %d stats reports, want 1; stderr:\n%s", label, n, err);
  const char *report = strstr(err, "hakozuna: stats report\n");
  const char *leaving = strstr(err, MARK_LEAVING);
  CHECK_MSG(report == NULL || (leaving != NULL && report > leaving),
            "%s: the stats report came before main returned", label);
}

static void expect_warning(const char *label, const char *err, const char *name,
                           const char *text, const char *keeping) {
  char needle[256];
  snprintf(needle, sizeof needle,
           "hakozuna: warning: ignoring bad value HZ_%s=\"%s\" (keeping %s)\n",
           name, text, keeping);
  int n = count_of(err, needle);
  CHECK_MSG(n == 1, "%s: %d times \"%.*s\", want once; stderr:\n%s", label, n,
            (int)strlen(needle) - 1, needle, err);
  char short_needle[128];
  snprintf(short_needle, sizeof short_needle, "ignoring bad value HZ_%s", name);
  CHECK(count_of(err, short_needle) == 1);
}

/* empty-json mode: HZ_STATS_JSON set to nothing is off (the option's
 * value is 0), so nothing is written at exit and nothing warns. */
static int empty_json_main(void) {
  const char *label = "HZ_STATS_JSON=";
  child_result_t r =
      run(label, (const char *const[]){"HZ_STATS_JSON=", "HZ_VERBOSE=1", NULL});
  expect_option_lines(label, r.err);
  expect_value(label, r.err, "STATS_JSON", "");
  CHECK_MSG(strstr(r.err, "warning") == NULL, "%s: a warning:\n%s", label,
            r.err);
  free(r.err);
  return check_report("options_env_test empty-json");
}

/* The child ends with _exit(7) (child-_exit) or _Exit(7) (child-_Exit). */
static int child_quick_exit(const char *how) {
  child_main();
  if (strcmp(how, "_exit") == 0) _exit(7);
  _Exit(7);
}

/* A program that ends with _exit or _Exit gets its report too. */
static void expect_report_at_quick_exit(const char *how) {
  char arg[32], label[64];
  snprintf(arg, sizeof arg, "child-%s", how);
  snprintf(label, sizeof label, "HZ_SHOW_STATS=1, %s(7)", how);
  child_result_t r =
      child_run(self, arg, (const char *const[]){"HZ_SHOW_STATS=1", NULL});
  CHECK_MSG(r.status == 7, "%s: child exit status %d", label, r.status);
  if (r.err == NULL) return;
  expect_stats_report(label, r.err, true);
  free(r.err);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) return child_main();
  if (argc > 1 && strncmp(argv[1], "child-", 6) == 0)
    return child_quick_exit(argv[1] + 6);
  self = argv[0];
  if (getenv("LD_PRELOAD") == NULL)
    fprintf(stderr, "options_env_test: note: LD_PRELOAD is not set; the "
                    "options only show when hakozuna is the allocator\n");
  if (argc > 1 && strcmp(argv[1], "empty-json") == 0) return empty_json_main();

  /* Nothing set: silence. */
  {
    child_result_t r = run("no options", (const char *const[]){NULL});
    expect_no_option_lines("no options", r.err);
    expect_stats_report("no options", r.err, false);
    CHECK_MSG(strstr(r.err, "hakozuna:") == NULL,
              "no options: unexpected output:\n%s", r.err);
    free(r.err);
  }

  /* HZ_VERBOSE=1: every option with its default. */
  char large_default[64] = "";
  {
    const char *label = "HZ_VERBOSE=1";
    child_result_t r = run(label, (const char *const[]){"HZ_VERBOSE=1", NULL});
    expect_option_lines(label, r.err);
    expect_value(label, r.err, "SHOW_STATS", "0");
    expect_value(label, r.err, "VERBOSE", "1");
    expect_value(label, r.err, "PURGE_DELAY_MS", "100");
    expect_value(label, r.err, "PURGE_MADV_FREE", "0");
    expect_value(label, r.err, "PURGE_THREAD", "1");
    expect_value(label, r.err, "THP", "1");
    expect_value(label, r.err, "STATS_JSON", "");
    expect_value(label, r.err, "ZERO_ON_FREE", "0");
    expect_value(label, r.err, "PROF", "0");
    expect_value(label, r.err, "PROF_SAMPLE", "524288");
    expect_value(label, r.err, "PROF_INTERVAL", "0");
    expect_value(label, r.err, "PROF_LEAKS", "0");
    expect_value(label, r.err, "PROF_SIGNAL", "0");
    expect_value(label, r.err, "PROF_PREFIX", "");
    if (option_value(label, r.err, "LARGE_CACHE_MAX", large_default,
                     sizeof large_default)) {
      char *end;
      long v = strtol(large_default, &end, 10);
      CHECK_MSG(*end == 0 && v >= (64L << 20) && v <= (1L << 30),
                "HZ_LARGE_CACHE_MAX default %s outside 64M..1G", large_default);
    }
    CHECK_MSG(strstr(r.err, "warning") == NULL, "%s: a warning:\n%s", label,
              r.err);
    expect_stats_report(label, r.err, false);
    free(r.err);
  }

  /* Good values, in the spellings the parser takes. */
  {
    const char *label = "good values";
    child_result_t r =
        run(label, (const char *const[]){
                       "HZ_VERBOSE=yes", "HZ_PURGE_DELAY_MS=250",
                       "HZ_LARGE_CACHE_MAX=128M", "HZ_ZERO_ON_FREE=on",
                       "HZ_PURGE_THREAD=off", "HZ_THP=FALSE",
                       "HZ_PURGE_MADV_FREE=True", "HZ_STATS_JSON=/dev/null",
                       "HZ_PROF_SAMPLE=64K", "HZ_PROF_INTERVAL=1G", NULL});
    expect_option_lines(label, r.err);
    expect_value(label, r.err, "VERBOSE", "1");
    expect_value(label, r.err, "PURGE_DELAY_MS", "250");
    expect_value(label, r.err, "LARGE_CACHE_MAX", "134217728");
    expect_value(label, r.err, "ZERO_ON_FREE", "1");
    expect_value(label, r.err, "PURGE_THREAD", "0");
    expect_value(label, r.err, "THP", "0");
    expect_value(label, r.err, "PURGE_MADV_FREE", "1");
    expect_value(label, r.err, "STATS_JSON", "/dev/null");
    expect_value(label, r.err, "SHOW_STATS", "0");
    expect_value(label, r.err, "PROF_SAMPLE", "65536");
    expect_value(label, r.err, "PROF_INTERVAL", "1073741824");
    /* (The release variant warns that it ignores HZ_ZERO_ON_FREE.) */
    CHECK_MSG(strstr(r.err, "bad value") == NULL, "%s: a warning:\n%s", label,
              r.err);
    free(r.err);
  }

  /* Bad values: a warning each, the defaults stay. */
  {
    const char *label = "bad values, verbose";
    child_result_t r = run(
        label, (const char *const[]){"HZ_VERBOSE=1", "HZ_PURGE_DELAY_MS=soon",
                                     "HZ_LARGE_CACHE_MAX=12x", NULL});
    expect_option_lines(label, r.err);
    expect_warning(label, r.err, "PURGE_DELAY_MS", "soon", "100");
    expect_value(label, r.err, "PURGE_DELAY_MS", "100");
    if (large_default[0] != 0) {
      expect_warning(label, r.err, "LARGE_CACHE_MAX", "12x", large_default);
      expect_value(label, r.err, "LARGE_CACHE_MAX", large_default);
    }
    CHECK(count_of(r.err, "warning") == 2);
    free(r.err);
  }
  {
    const char *label = "bad values, quiet";
    child_result_t r =
        run(label, (const char *const[]){
                       "HZ_PURGE_DELAY_MS=", "HZ_SHOW_STATS=maybe", NULL});
    expect_no_option_lines(label, r.err);
    expect_warning(label, r.err, "PURGE_DELAY_MS", "", "100");
    expect_warning(label, r.err, "SHOW_STATS", "maybe", "0");
    expect_stats_report(label, r.err, false);
    free(r.err);
  }

  /* Well-formed numbers out of an option's range: negative delays other
   * than -1, negative sizes, booleans other than 0 and 1. */
  {
    const char *label = "out of range, verbose";
    child_result_t r =
        run(label, (const char *const[]){"HZ_VERBOSE=1", "HZ_PURGE_DELAY_MS=-5",
                                         "HZ_LARGE_CACHE_MAX=-1", "HZ_THP=2",
                                         "HZ_PURGE_THREAD=-1",
                                         "HZ_PURGE_MADV_FREE=5", NULL});
    expect_option_lines(label, r.err);
    expect_warning(label, r.err, "PURGE_DELAY_MS", "-5", "100");
    expect_value(label, r.err, "PURGE_DELAY_MS", "100");
    if (large_default[0] != 0) {
      expect_warning(label, r.err, "LARGE_CACHE_MAX", "-1", large_default);
      expect_value(label, r.err, "LARGE_CACHE_MAX", large_default);
    }
    expect_warning(label, r.err, "THP", "2", "1");
    expect_warning(label, r.err, "PURGE_THREAD", "-1", "1");
    expect_warning(label, r.err, "PURGE_MADV_FREE", "5", "0");
    expect_value(label, r.err, "THP", "1");
    free(r.err);
  }
  {
    const char *label = "out of range, quiet";
    child_result_t r = run(
        label, (const char *const[]){"HZ_PURGE_DELAY_MS=-9223372036854775808",
                                     "HZ_SHOW_STATS=2", "HZ_VERBOSE=on", NULL});
    expect_warning(label, r.err, "PURGE_DELAY_MS", "-9223372036854775808",
                   "100");
    expect_warning(label, r.err, "SHOW_STATS", "2", "0");
    expect_stats_report(label, r.err, false);
    free(r.err);
  }

  /* The guarded sample's options have ranges of their own. */
  {
    const char *label = "guard options out of range";
    child_result_t r =
        run(label, (const char *const[]){"HZ_VERBOSE=1", "HZ_GUARD_MODE=3",
                                         "HZ_GUARD_SLOTS=99999999999",
                                         "HZ_GUARD_MAX=1G", NULL});
    expect_warning(label, r.err, "GUARD_MODE", "3", "0");
    expect_warning(label, r.err, "GUARD_SLOTS", "99999999999", "16");
    expect_warning(label, r.err, "GUARD_MAX", "1G", "4096");
    expect_value(label, r.err, "GUARD_MODE", "0");
    expect_value(label, r.err, "GUARD_SLOTS", "16");
    expect_value(label, r.err, "GUARD_MAX", "4096");
    free(r.err);
  }
  {
    const char *label = "guard options zero";
    child_result_t r =
        run(label,
            (const char *const[]){"HZ_GUARD_SLOTS=0", "HZ_GUARD_MAX=0", NULL});
    expect_warning(label, r.err, "GUARD_SLOTS", "0", "16");
    expect_warning(label, r.err, "GUARD_MAX", "0", "4096");
    free(r.err);
  }
  {
    const char *label = "guard options at their bounds";
    child_result_t r =
        run(label, (const char *const[]){"HZ_VERBOSE=1", "HZ_GUARD_MODE=2",
                                         "HZ_GUARD_SLOTS=4096",
                                         "HZ_GUARD_MAX=256K", NULL});
    expect_value(label, r.err, "GUARD_MODE", "2");
    expect_value(label, r.err, "GUARD_SLOTS", "4096");
    expect_value(label, r.err, "GUARD_MAX", "262144");
    CHECK_MSG(strstr(r.err, "bad value") == NULL, "%s: a warning:\n%s", label,
              r.err);
    free(r.err);
  }

  /* HZ_SHOW_STATS: the report at exit. */
  expect_report_at_quick_exit("_exit");
  expect_report_at_quick_exit("_Exit");
  {
    const char *label = "HZ_SHOW_STATS=1";
    child_result_t r =
        run(label, (const char *const[]){"HZ_SHOW_STATS=1", NULL});
    expect_no_option_lines(label, r.err);
    expect_stats_report(label, r.err, true);
    free(r.err);
  }
  {
    const char *label = "HZ_SHOW_STATS=ON with HZ_VERBOSE=1";
    child_result_t r = run(
        label, (const char *const[]){"HZ_SHOW_STATS=ON", "HZ_VERBOSE=1", NULL});
    expect_option_lines(label, r.err);
    expect_value(label, r.err, "SHOW_STATS", "1");
    expect_stats_report(label, r.err, true);
    free(r.err);
  }
  {
    const char *label = "HZ_SHOW_STATS=0";
    child_result_t r =
        run(label, (const char *const[]){"HZ_SHOW_STATS=0", NULL});
    expect_stats_report(label, r.err, false);
    free(r.err);
  }

  return check_report("options_env_test");
}
