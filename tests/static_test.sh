#!/usr/bin/env bash
# Static linking, as the README says: its exact command (the line marked
# "# static") links build/libhakozuna.a into a program whose malloc is then
# hakozuna's; a fully static program (-static) runs too, and with
# HZ_PROF=1 the profiler says in one line that it cannot work there and
# the program carries on.
# Usage: static_test.sh SOURCE_DIR BUILD_DIR
SRC=$(realpath "$1")
BUILD=$(realpath "$2")
source "$(dirname "$0")/script_util.sh"

cat >"$WORK/app.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  char *blocks[1000];
  for (int i = 0; i < 1000; i++) {
    blocks[i] = malloc((size_t)(i % 300) * 16 + 1);
    if (blocks[i] == NULL) return 1;
    memset(blocks[i], i, (size_t)(i % 300) * 16 + 1);
  }
  for (int i = 0; i < 1000; i++)
    free(blocks[i]);
  puts("app done");
  return 0;
}
C
ln -s "$BUILD" "$WORK/build"

# The README's command, run as written from a directory with app.c and build/.
command=$(sed -n 's/^\(cc .*libhakozuna\.a.*[^ ]\) *# static$/\1/p' "$SRC/README.md")
if [ -z "$command" ]; then
  fail "README: no line ending in '# static'"
elif ! (cd "$WORK" && eval "$command -o app_linked") >"$WORK/link.err" 2>&1; then
  fail "README's static command failed: $command: $(head -5 "$WORK/link.err")"
else
  out=$(HZ_VERBOSE=1 "$WORK/app_linked" 2>&1)
  if ! grep -q "^hakozuna: option" <<<"$out" || ! grep -q "^app done" <<<"$out"; then
    fail "README's static command: the program does not run on hakozuna: $out"
  else
    pass "README's static command links and runs: $command"
  fi
fi

# A fully static program, with the profiler asked for.
if ! (cd "$WORK" && cc -static app.c build/libhakozuna.a -pthread -lm \
      -o app_static) >"$WORK/static.err" 2>&1; then
  fail "cc -static: $(grep -v 'warning' "$WORK/static.err" | head -5)"
else
  HZ_PROF=1 "$WORK/app_static" >"$WORK/prof.out" 2>"$WORK/prof.err"
  rc=$?
  lines=$(grep -c "^hakozuna: " "$WORK/prof.err")
  if [ $rc != 0 ]; then
    fail "static program with HZ_PROF=1: exit code $rc: $(head -3 "$WORK/prof.err")"
  elif ! grep -q "^app done" "$WORK/prof.out"; then
    fail "static program with HZ_PROF=1 did not finish"
  elif [ "$lines" != 1 ] ||
       ! grep -q "^hakozuna: HZ_PROF needs a dynamically linked program" "$WORK/prof.err"; then
    fail "static program with HZ_PROF=1: expected one line saying profiling is off: $(cat "$WORK/prof.err")"
  else
    pass "static program with HZ_PROF=1 runs on, profiler off in one line"
  fi
fi

finish static
