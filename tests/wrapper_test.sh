#!/usr/bin/env bash
# bin/hakozuna runs a command with hakozuna preloaded, or not at all: a
# library the loader would skip (a path with a space, a missing or broken
# file) stops it with one "hakozuna:" line and a non-zero exit, before the
# command runs. `stats` adds the report, `version` matches the header, each
# command has --help, and a command line it cannot follow gets one line
# and exit code 2.
# Usage: wrapper_test.sh SOURCE_DIR BUILD_DIR
WRAPPER=$(realpath "$1/bin/hakozuna")
LIB=$(realpath "$2/libhakozuna.so")
source "$(dirname "$0")/script_util.sh"
# The wrapper finds SOURCE_DIR/build's library by itself; a build elsewhere
# (the arm64 cross-build in build/arm64) is named to it.
[ "$("$WRAPPER" lib 2>/dev/null)" = "$LIB" ] || export HAKOZUNA_LIB="$LIB"

# expect_refused NAME ENV...: the wrapper must not run the command.
expect_refused() {
  local name=$1
  shift
  rm -f "$WORK/ran"
  env "$@" "$WRAPPER" run touch "$WORK/ran" 2>"$WORK/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$WORK/err")
  if [ "$rc" = 0 ]; then
    fail "$name: exit code 0"
  elif [ -e "$WORK/ran" ]; then
    fail "$name: the command ran without hakozuna"
  elif [ "$lines" != 1 ] || ! grep -q "^hakozuna: cannot" "$WORK/err"; then
    fail "$name: expected one 'hakozuna: cannot ...' line, got:"
    cat "$WORK/err"
  else
    pass "$name: $(cat "$WORK/err")"
  fi
}

# The command runs with the library mapped, with and without "--".
for sep in "" "--"; do
  out=$("$WRAPPER" run $sep cat /proc/self/maps 2>&1)
  if grep -q "libhakozuna.so" <<<"$out"; then
    pass "run ${sep:-(no --)}: the command has the library"
  else
    fail "run ${sep:-(no --)}: the library is not in the command's maps"
    head -3 <<<"$out"
  fi
done

# run --guard: every small allocation guarded; --guard=N one in N.
for arg in --guard --guard=50; do
  want=1
  [ "$arg" = --guard=50 ] && want=50
  got=$("$WRAPPER" run $arg -- /bin/sh -c 'echo "$HZ_GUARD_SAMPLE"' 2>&1)
  if [ "$got" = "$want" ]; then
    pass "run $arg: HZ_GUARD_SAMPLE=$got"
  else
    fail "run $arg: HZ_GUARD_SAMPLE='$got', want $want"
  fi
done

mkdir -p "$WORK/with space" "$WORK/with:colon"
cp "$LIB" "$WORK/with space/libhakozuna.so"
cp "$LIB" "$WORK/with:colon/libhakozuna.so"
echo "not a library" >"$WORK/broken.so"
expect_refused "space in HAKOZUNA_LIB" HAKOZUNA_LIB="$WORK/with space/libhakozuna.so"
expect_refused "colon in HAKOZUNA_LIB" HAKOZUNA_LIB="$WORK/with:colon/libhakozuna.so"
expect_refused "missing library" HAKOZUNA_LIB="$WORK/none.so"
expect_refused "broken library" HAKOZUNA_LIB="$WORK/broken.so"

# The wrapper's own directory has a space: the library it finds beside it
# has one too.
mkdir -p "$WORK/pre fix/bin" "$WORK/pre fix/lib"
cp "$WRAPPER" "$WORK/pre fix/bin/hakozuna"
cp "$LIB" "$WORK/pre fix/lib/libhakozuna.so"
WRAPPER="$WORK/pre fix/bin/hakozuna" expect_refused "space in the install path" \
  -u HAKOZUNA_LIB

# stats: the command runs and the report follows it, also from a program
# that closes stderr before it exits (coreutils' echo does).
for prog in "perl -e print(qq(ran\n))" "/bin/echo ran"; do
  out=$("$WRAPPER" stats -- $prog 2>&1)
  if grep -q "^ran$" <<<"$out" && grep -q "^hakozuna: stats report" <<<"$out"
  then
    pass "stats: $prog ran and the report was printed"
  else
    fail "stats: expected 'ran' and the stats report from $prog, got:"
    head -3 <<<"$out"
  fi
done

# stats: a program that ends with _exit (dash's exit builtin) runs no
# destructor; its report comes all the same, and its exit status stays.
if [ -x /bin/dash ]; then
  out=$("$WRAPPER" stats -- /bin/dash -c 'echo ran; exit 7' 2>&1)
  status=$?
  if [ "$status" = 7 ] && grep -q "^ran$" <<<"$out" &&
     grep -q "^hakozuna: stats report" <<<"$out"; then
    pass "stats: dash's exit 7 kept its status and the report was printed"
  else
    fail "stats: dash -c 'exit 7': status $status, want 7 and the report, got:"
    head -3 <<<"$out"
  fi
fi

# version: the one in include/hakozuna.h.
want=$(awk '/define HZ_VERSION_(MAJOR|MINOR|PATCH)/ { v = v (v ? "." : "") $3 }
            END { print v }' "$1/include/hakozuna.h")
got=$("$WRAPPER" version)
if [ "$got" = "hakozuna $want" ]; then
  pass "version: $got"
else
  fail "version: '$got', want 'hakozuna $want'"
fi

# Every command has its own help, on stdout, with exit code 0.
for cmd in run stats prof version lib; do
  if help=$("$WRAPPER" $cmd --help) && grep -q "^usage: hakozuna $cmd" <<<"$help"; then
    pass "$cmd --help"
  else
    fail "$cmd --help: '$help'"
  fi
done

# expect_misuse NAME ARGS...: exit code 2 and one "hakozuna:" line.
expect_misuse() {
  local name=$1
  shift
  "$WRAPPER" "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  if [ "$rc" = 2 ] && [ "$(wc -l <"$WORK/err")" = 1 ] &&
     grep -q "^hakozuna: " "$WORK/err" && [ ! -s "$WORK/out" ]; then
    pass "$name: $(cat "$WORK/err")"
  else
    fail "$name: exit code $rc, stderr:"
    cat "$WORK/err"
  fi
}
expect_misuse "no command"
expect_misuse "unknown command" frobnicate
expect_misuse "unknown option of run" run --frobnicate true
expect_misuse "unknown option of stats" stats -x true
expect_misuse "run with nothing to run" run
expect_misuse "stats with nothing to run" stats --
expect_misuse "unknown option of prof" prof --frobnicate true
expect_misuse "prof with nothing to run" prof --svg --
expect_misuse "version with an argument" version 2
expect_misuse "run --guard with no number" run --guard=x true

finish wrapper
