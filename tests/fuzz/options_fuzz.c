/* options_fuzz: libFuzzer feeds arbitrary text to the option parser and
 * arbitrary file names to the JSON statistics writer.
 *
 * Input: a byte choosing what to drive, then the text.
 *   - Parser (hz_options_parse), for each kind: it agrees with a model
 *     written here from the grammar in options.c (booleans: on/off,
 *     yes/no, true/false in any case, or the numbers 0 and 1; bytes: a
 *     number of 0 or more with an optional K/M/G[i][B] suffix; milliseconds:
 *     a number of -1 or more; numbers are decimal with an optional sign and
 *     must not overflow a long).
 *   - JSON writer (hz_stats_write_json): the text becomes a file name under
 *     a scratch directory, '/' allowed, so it may name a missing directory,
 *     a directory, or a name too long. The writer must return false or
 *     write a file that is one JSON object with balanced braces and
 *     brackets outside strings. */
#include <ctype.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "options.h"
#include "stats.h"

#define FAIL(...)                                                              \
  do {                                                                         \
    fprintf(stderr, "options_fuzz: " __VA_ARGS__);                             \
    fputc('\n', stderr);                                                       \
    abort();                                                                   \
  } while (0)

/* ---------------------------------------------------------------------------
 * The parser against the model
 * ------------------------------------------------------------------------- */
static bool model_word(const char *t, long *out) {
  static const char *const yes[] = {"on", "yes", "true"};
  static const char *const no[] = {"off", "no", "false"};
  for (int i = 0; i < 3; i++) {
    if (strcasecmp(t, yes[i]) == 0) return *out = 1, true;
    if (strcasecmp(t, no[i]) == 0) return *out = 0, true;
  }
  return false;
}

/* Decimal digits with no sign and no leading zero ("0" aside), then (bytes
 * only) an optional K, M or G, each optionally followed by i and then B,
 * in any case; the value must fit a long. */
static bool model_number(const char *t, bool suffix_ok, long *out) {
  if (!isdigit((unsigned char)*t)) return false;
  if (t[0] == '0' && isdigit((unsigned char)t[1])) return false;
  unsigned long long v = 0, limit = (unsigned long long)LONG_MAX;
  for (; isdigit((unsigned char)*t); t++) {
    unsigned digit = (unsigned)(*t - '0');
    if (v > (limit - digit) / 10) return false;
    v = v * 10 + digit;
  }
  int shift = 0;
  const char *s = *t != 0 ? strchr("kKmMgG", *t) : NULL;
  if (suffix_ok && s != NULL) {
    shift = (int)((s - "kKmMgG") / 2 + 1) * 10;
    t++;
    if (*t == 'i' || *t == 'I') t++;
    if (*t == 'b' || *t == 'B') t++;
  }
  if (*t != 0) return false;
  if (v > limit >> shift) return false;
  v <<= shift;
  *out = (long)v;
  return true;
}

static bool model_parse(const char *t, hz_option_kind_t kind, long *out) {
  long v;
  switch (kind) {
  case HZ_OPTION_BOOL:
    if (model_word(t, out)) return true;
    if (!model_number(t, false, &v) || (v != 0 && v != 1)) return false;
    break;
  case HZ_OPTION_BYTES:
    if (!model_number(t, true, &v)) return false;
    break;
  case HZ_OPTION_MS:
    if (strcmp(t, "-1") == 0)
      v = -1;
    else if (!model_number(t, false, &v))
      return false;
    break;
  default: return false;
  }
  *out = v;
  return true;
}

static void fuzz_parser(const char *text) {
  static const hz_option_kind_t kinds[] = {HZ_OPTION_BOOL, HZ_OPTION_BYTES,
                                           HZ_OPTION_MS};
  for (int i = 0; i < 3; i++) {
    long got = LONG_MIN, want = LONG_MIN;
    bool ok = hz_options_parse(text, kinds[i], &got);
    bool model_ok = model_parse(text, kinds[i], &want);
    if (ok != model_ok || (ok && got != want))
      FAIL("kind %d, \"%s\": parser %s %ld, model %s %ld", (int)kinds[i], text,
           ok ? "accepts" : "rejects", got, model_ok ? "accepts" : "rejects",
           want);
  }
}

/* ---------------------------------------------------------------------------
 * The JSON writer
 * ------------------------------------------------------------------------- */
static char scratch[64];

static void remove_scratch(void) { rmdir(scratch); }

/* One object; braces and brackets balance outside strings. */
static void check_json(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) FAIL("writer said it wrote %s, which does not open", path);
  int depth = 0, c, first = 0, last = 0;
  bool in_string = false, escaped = false, seen = false;
  while ((c = fgetc(f)) != EOF) {
    if (!seen && !isspace(c)) first = c, seen = true;
    if (!isspace(c)) last = c;
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') depth++;
    if (c == '}' || c == ']') depth--;
    if (depth < 0) FAIL("%s: a closing brace with none open", path);
  }
  fclose(f);
  if (first != '{' || last != '}' || depth != 0 || in_string)
    FAIL("%s: not one JSON object (first '%c', last '%c', depth %d)", path,
         first, last, depth);
}

static void fuzz_json_path(const char *name) {
  if (scratch[0] == 0) {
    snprintf(scratch, sizeof scratch, "/tmp/hz-options-fuzz-%d", (int)getpid());
    (void)!mkdir(scratch, 0700);
    atexit(remove_scratch);
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", scratch, name);
  if (strstr(name, "..") != NULL) return; /* stay inside the scratch dir */
  static hz_heap_summary_t heaps;
  static hz_memory_summary_t memory;
  hz_api_summarize(&heaps, &memory);
  if (hz_stats_write_json(path, &heaps, &memory)) {
    check_json(path);
    unlink(path);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  if (len == 0) return 0;
  char text[4097];
  size_t n = len - 1 < sizeof text - 1 ? len - 1 : sizeof text - 1;
  memcpy(text, data + 1, n);
  text[n] = 0;
  if (data[0] & 1)
    fuzz_json_path(text);
  else
    fuzz_parser(text);
  return 0;
}
