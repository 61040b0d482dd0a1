/* options: hz_options_parse reads a value by its option's kind, exactly:
 *   - booleans: 1/0, on/off, yes/no, true/false in any case, nothing else;
 *   - byte counts: decimal integers of 0 or more with an optional K/M/G
 *     suffix (KiB/MiB/GiB and KB/MB/GB spelled out too);
 *   - milliseconds: decimal integers of 0 or more, or -1 (never).
 * Anything else, an overflowing scale included, is refused. */
#include <limits.h>
#include <stdbool.h>

#include "check.h"
#include "options.h"

#define BOOL  HZ_OPTION_BOOL
#define BYTES HZ_OPTION_BYTES
#define MS    HZ_OPTION_MS

/* `text` parses as `kind`, to exactly `want`. */
static void good(hz_option_kind_t kind, const char *text, long want) {
  long got = 0x5a5a5a5a;
  bool ok = hz_options_parse(text, kind, &got);
  CHECK_MSG(ok, "\"%s\" refused (kind %d)", text, kind);
  if (ok)
    CHECK_MSG(got == want, "\"%s\" parsed as %ld, want %ld", text, got, want);
}

/* `text` is refused as `kind`. */
static void bad(hz_option_kind_t kind, const char *text) {
  long got = 0x5a5a5a5a;
  bool ok = hz_options_parse(text, kind, &got);
  CHECK_MSG(!ok, "\"%s\" accepted as kind %d (as %ld)", text, kind, got);
}

static void booleans(void) {
  static const char *const truthy[] = {"on",  "On",   "ON",   "yes", "Yes",
                                       "YES", "true", "True", "TRUE"};
  static const char *const falsy[] = {"off", "Off",   "OFF",   "no",   "No",
                                      "NO",  "false", "False", "FALSE"};
  for (size_t i = 0; i < sizeof truthy / sizeof truthy[0]; i++)
    good(BOOL, truthy[i], 1);
  for (size_t i = 0; i < sizeof falsy / sizeof falsy[0]; i++)
    good(BOOL, falsy[i], 0);
  good(BOOL, "1", 1);
  good(BOOL, "0", 0);
  static const char *const refused[] = {"2",  "5",   "-1",  "10",   "1K",  "",
                                        "y",  "tru", "onn", "nope", "01x", "+1",
                                        "+0", "01",  "00",  " 1"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    bad(BOOL, refused[i]);
  bad(BOOL, NULL);
}

static void bytes(void) {
  good(BYTES, "0", 0);
  good(BYTES, "42", 42);
  good(BYTES, "64K", 64L << 10);
  good(BYTES, "64k", 64L << 10);
  good(BYTES, "2M", 2L << 20);
  good(BYTES, "2m", 2L << 20);
  good(BYTES, "1G", 1L << 30);
  good(BYTES, "1g", 1L << 30);
  good(BYTES, "1GiB", 1L << 30);
  good(BYTES, "1gib", 1L << 30);
  good(BYTES, "3MB", 3L << 20);
  good(BYTES, "3MiB", 3L << 20);
  good(BYTES, "4KB", 4L << 10);
  good(BYTES, "8Gi", 8L << 30);
  good(BYTES, "0K", 0);
  good(BYTES, "128M", 134217728L);
  /* The largest value a suffix still fits, and one past it. */
  good(BYTES, "8589934591G", 8589934591L << 30);
  bad(BYTES, "8589934592G");
  good(BYTES, "9223372036854775807", LONG_MAX);
  /* Negative sizes, words and malformed values. */
  static const char *const refused[] = {"-1",
                                        "-2K",
                                        "-9223372036854775808",
                                        "on",
                                        "yes",
                                        "",
                                        "abc",
                                        "12x",
                                        "1.5",
                                        "K",
                                        "M",
                                        "--1",
                                        "0x10",
                                        "1B",
                                        "1i",
                                        "1KK",
                                        "1KiBB",
                                        "1T",
                                        "5 ",
                                        " 5",
                                        "99999999999999G",
                                        "99999999999999999999",
                                        "+1",
                                        "+64K",
                                        "08",
                                        "007M",
                                        "1 K"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    bad(BYTES, refused[i]);
}

static void milliseconds(void) {
  good(MS, "-1", -1);
  good(MS, "0", 0);
  good(MS, "250", 250);
  good(MS, "1000", 1000);
  static const char *const refused[] = {"-2",   "-5",  "-9223372036854775808",
                                        "1K",   "on",  "",
                                        "soon", "1.5", "1s",
                                        "+1",   "08",  "-0",
                                        "-01",  "--1", "+0",
                                        " 5",   "-1 ", "00"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    bad(MS, refused[i]);
}

int main(void) {
  booleans();
  bytes();
  milliseconds();
  return check_report("options_test");
}
