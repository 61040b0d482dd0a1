#!/usr/bin/env bash
# The heap profiler (HZ_PROF=1), through prof_target preloaded with
# hakozuna: byte estimates of two sites within 10% of 1:3, google-pprof
# reads the profile and names them, a planted leak is reported with its
# stack and nothing else, profiles on SIGUSR2 and in fork children while
# threads free each other's sampled blocks, and hz_prof_dump fails cleanly
# when the profiler is off. Also under the debug variant (invariants).
# `hakozuna prof --svg` leaves the profile, collapsed stacks and a flame
# graph that name the leaking site.
# Usage: prof_test.sh TARGET BUILD_DIR SOURCE_DIR
TARGET=$1
BUILD=$2
WRAPPER=$3/bin/hakozuna
source "$(dirname "$0")/script_util.sh"

# run LIB NAME ENV... -- ARGS...: prof_target under LIB with the profiler
# writing into $WORK; its output in $WORK/NAME.out and .err.
run() {
  local lib=$1 name=$2
  shift 2
  local env=()
  while [ "$1" != "--" ]; do env+=("$1"); shift; done
  shift
  env "${env[@]}" HZ_PROF_PREFIX="$WORK/$name" LD_PRELOAD="$lib" \
    "$TARGET" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  local rc=$?
  cat "$WORK/$name.out"
  [ $rc = 0 ] || fail "$name: exit code $rc: $(head -3 "$WORK/$name.err")"
}

LIB=$BUILD/libhakozuna.so
# A small mean gap, so the estimates rest on thousands of samples.
run "$LIB" ratio HZ_PROF=1 HZ_PROF_SAMPLE=4096 -- ratio "$WORK/ratio.heap"

# google-pprof reads the profile and finds both sites.
text=$(google-pprof --text "$TARGET" "$WORK/ratio.heap" 2>&1)
if grep -q "site_one" <<<"$text" && grep -q "site_three" <<<"$text"; then
  pass "google-pprof --text names both sites"
else
  fail "google-pprof --text: expected site_one and site_three, got:"
  head -20 <<<"$text"
fi

# The leak report: plant_leak's 4,000,000 bytes, its stack, nothing freed.
run "$LIB" leak HZ_PROF=1 HZ_PROF_LEAKS=1 HZ_PROF_SAMPLE=1024 -- leak
report=$WORK/leak.err
bytes=$(awk '/blocks allocated at:/ { b = $3 } /plant_leak/ { print b; exit }' \
        "$report")
if ! grep -q "^hakozuna: leak report" "$report"; then
  fail "leak: no leak report on stderr"
elif [ -z "$bytes" ]; then
  fail "leak: no stack through plant_leak in the report:"
  head -12 "$report"
elif [ "$bytes" -lt 3600000 ] || [ "$bytes" -gt 4400000 ]; then
  fail "leak: plant_leak's stack has $bytes bytes, expected 4000000 +-10%"
elif grep -q "freed_site" "$report"; then
  fail "leak: freed_site, whose blocks were all freed, is reported"
else
  pass "leak report: plant_leak with about $bytes bytes"
fi
ls "$WORK"/leak.*.exit.heap >/dev/null 2>&1 ||
  fail "leak: no profile written at exit"

# Threads, signals and fork, in release and debug.
for variant in hakozuna hakozuna-debug; do
  name=busy-$variant
  run "$BUILD/lib$variant.so" "$name" HZ_PROF=1 HZ_PROF_SIGNAL=1 \
    HZ_PROF_SAMPLE=1024 -- busy "$WORK/$name.heap"
  signal=$(ls "$WORK/$name".*.signal.heap 2>/dev/null | head -1)
  if [ -z "$signal" ]; then
    fail "$name: no profile written on SIGUSR2"
  elif ! head -1 "$signal" | grep -q "^heap profile: .* @ heapprofile$"; then
    fail "$name: the SIGUSR2 profile has no header: $(head -1 "$signal")"
  elif ! grep -q "^MAPPED_LIBRARIES:" "$signal"; then
    fail "$name: the SIGUSR2 profile was cut short"
  else
    pass "$name: $(ls "$WORK/$name".*.signal.heap | wc -l) profiles on SIGUSR2"
  fi
  [ -s "$WORK/$name.heap.child" ] || fail "$name: no profile from the fork child"
done

run "$LIB" off -- off "$WORK/off.heap"

# hakozuna prof --svg: the live bytes at exit are plant_leak's.
mkdir "$WORK/cmd"
(cd "$WORK/cmd" && HAKOZUNA_LIB=$LIB HZ_PROF_SAMPLE=4096 \
  "$WRAPPER" prof --svg -- "$TARGET" leak >/dev/null 2>"$WORK/cmd.err")
folded=$(ls "$WORK"/cmd/hakozuna.*.exit.folded 2>/dev/null)
svg=$(ls "$WORK"/cmd/hakozuna.*.exit.svg 2>/dev/null)
if [ -z "$folded" ] || [ -z "$svg" ]; then
  fail "hakozuna prof --svg: no .folded or .svg: $(ls "$WORK/cmd") $(cat "$WORK/cmd.err")"
elif ! grep -Eq ";plant_leak(<[0-9a-f]+>)? [1-9][0-9]*$" "$folded"; then
  fail "hakozuna prof: no live bytes under plant_leak in the collapsed stacks: $(cat "$folded")"
elif ! grep -q "<svg" "$svg" || ! grep -q ">plant_leak<" "$svg"; then
  fail "hakozuna prof --svg: the flame graph does not show plant_leak"
else
  pass "hakozuna prof --svg: $(basename "$svg") shows plant_leak"
fi

# A profile that cannot be written (its directory does not exist) gets one
# warning line; the program carries on.
HZ_PROF=1 HZ_PROF_PREFIX="$WORK/missing/dir/p" HZ_PROF_SAMPLE=4096 \
  LD_PRELOAD="$LIB" "$TARGET" leak >/dev/null 2>"$WORK/badprefix.err"
rc=$?
warnings=$(grep -c "^hakozuna: warning: could not write the heap profile to $WORK/missing/dir/p\.prof_target\." "$WORK/badprefix.err")
if [ $rc != 0 ]; then
  fail "bad HZ_PROF_PREFIX: exit code $rc"
elif [ "$warnings" != 1 ]; then
  fail "bad HZ_PROF_PREFIX: expected one warning line, got $warnings: $(cat "$WORK/badprefix.err")"
else
  pass "bad HZ_PROF_PREFIX: one warning line"
fi

# A command that starts other processes: a shell script whose child holds
# the live bytes. The profiles are named by program, the child's is the
# fullest, and the printed google-pprof command names its executable, not
# the script.
mkdir "$WORK/multi"
cat >"$WORK/multi/launch.sh" <<SCRIPT
#!/bin/sh
/bin/true
"$TARGET" leak
SCRIPT
chmod +x "$WORK/multi/launch.sh"
(cd "$WORK/multi" && HAKOZUNA_LIB=$LIB HZ_PROF_SAMPLE=4096 \
  "$WRAPPER" prof -- ./launch.sh >/dev/null 2>"$WORK/multi.err")
chosen=$(sed -n 's/^hakozuna: heap profile: \([^ ]*\) .*/\1/p' "$WORK/multi.err")
target_real=$(realpath "$TARGET")
if ! ls "$WORK"/multi/hakozuna.prof_target.*.exit.heap >/dev/null 2>&1; then
  fail "prof of a script: no profile named by its program: $(ls "$WORK/multi")"
elif [[ "$chosen" != hakozuna.prof_target.* ]]; then
  fail "prof of a script: picked $chosen, not prof_target's: $(cat "$WORK/multi.err")"
elif ! grep -q "google-pprof --text --inuse_space $target_real $chosen" "$WORK/multi.err"; then
  fail "prof of a script: the pprof command does not name $target_real: $(cat "$WORK/multi.err")"
else
  pass "prof of a script: $chosen, with $(basename "$target_real") in the pprof command"
fi

finish prof
