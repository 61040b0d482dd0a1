/* options: hz_options_parse reads booleans (1/0, on/off, yes/no,
 * true/false, any case) and decimal integers with an optional K/M/G suffix
 * (KiB/MiB/GiB and KB/MB/GB spelled out too), exactly; anything else, an
 * overflowing scale included, is refused. */
#include <limits.h>
#include <stdbool.h>

#include "check.h"
#include "options.h"

/* `text` parses, to exactly `want`. */
static void good(const char *text, long want) {
  long got = 0x5a5a5a5a;
  bool ok = hz_options_parse(text, &got);
  CHECK_MSG(ok, "\"%s\" refused", text);
  if (ok)
    CHECK_MSG(got == want, "\"%s\" parsed as %ld, want %ld", text, got, want);
}

/* `text` is refused. */
static void bad(const char *text) {
  long got = 0x5a5a5a5a;
  bool ok = hz_options_parse(text, &got);
  CHECK_MSG(!ok, "\"%s\" accepted (as %ld)", text, got);
}

int main(void) {
  /* Plain integers. */
  good("0", 0);
  good("1", 1);
  good("-1", -1);
  good("42", 42);
  good("1000", 1000);
  good("-250", -250);

  /* Booleans, in any case. */
  static const char *const truthy[] = {"on",  "On",   "ON",   "yes", "Yes",
                                       "YES", "true", "True", "TRUE"};
  static const char *const falsy[] = {"off", "Off",   "OFF",   "no",   "No",
                                      "NO",  "false", "False", "FALSE"};
  for (size_t i = 0; i < sizeof truthy / sizeof truthy[0]; i++)
    good(truthy[i], 1);
  for (size_t i = 0; i < sizeof falsy / sizeof falsy[0]; i++)
    good(falsy[i], 0);

  /* Suffixes, binary multiples, either case, with i and/or B after. */
  good("64K", 64L << 10);
  good("64k", 64L << 10);
  good("2M", 2L << 20);
  good("2m", 2L << 20);
  good("1G", 1L << 30);
  good("1g", 1L << 30);
  good("1GiB", 1L << 30);
  good("1gib", 1L << 30);
  good("3MB", 3L << 20);
  good("3MiB", 3L << 20);
  good("4KB", 4L << 10);
  good("8Gi", 8L << 30);
  good("0K", 0);
  good("-2K", -2048);
  good("128M", 134217728L);
  /* The largest values a suffix still fits, and one past them. */
  good("8589934591G", 8589934591L << 30);
  bad("8589934592G");
  good("-8589934592G", LONG_MIN);
  bad("-8589934593G");
  good("9223372036854775807", LONG_MAX);

  /* Malformed values. */
  bad(NULL);
  bad("");
  bad("abc");
  bad("12x");
  bad("1.5");
  bad("K");
  bad("M");
  bad("--1");
  bad("99999999999999G");      /* the scaled value overflows */
  bad("99999999999999999999"); /* strtol itself overflows */
  bad("-99999999999999999999");
  bad("0x10"); /* decimal only */
  bad("1B");   /* B only after K, M or G */
  bad("1i");
  bad("1KK");
  bad("1KiBB");
  bad("1T");
  bad("5 ");
  bad("onn");
  bad("tru");
  bad("y");
  bad("nope");

  return check_report("options_test");
}
