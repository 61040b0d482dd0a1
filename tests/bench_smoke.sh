#!/usr/bin/env bash
# Smoke test of the benchmark programs: each runs briefly (tiny arguments)
# under hakozuna, must exit 0 and print one parseable result line
# ("bench=<name> key=value ... (ops/s|secs)=<number> peak_rss_kb=<n>"),
# and must answer --help.
# Usage: bench_smoke.sh BUILD_DIR
source "$(dirname "$0")/script_util.sh"
BUILD=$(realpath "$1")
LIB="$BUILD/libhakozuna.so"

# name -> tiny arguments
declare -A ARGS=(
  [mt_remote]="4 20000 100 16 32768 90 4096"
  [random_mixed]="200000 200 16 65536 1 app"
  [tiny_hot]="200000 16"
  [mid_large_mt]="2 20000 64"
  [vm_mixed]="300 8"
  [malloc_large]="40 4"
  [mir]="200"
  [larson]="2 3 200 16 1024"
  [kv]="100000 5000 1"
  [string_builder]="20000 1"
  [json]="20 1"
  [rss_plateau]="2 16 10 1"
  [thread_churn]="300 4"
  [long_run]="4 2 300 100 1"
  [prodcons]="1 2 20000 16 1024"
  [batch_queue]="2 2 20 8 2048 256 4"
  [exchange]="3 20000 256 64 8 16384 50"
  [thread_loop]="2 20000 200 4 32768"
  [size_loop]="200000 16 8192 8"
  [grow_late]="20000 16 512 16"
  [hot_pair]="malloc 20000 16 1024 random 100"
  [soak]="0"
  [latency]="2 20000 256"
)

for name in $(echo "${!ARGS[@]}" | tr ' ' '\n' | sort); do
  prog="$BUILD/bench/$name"
  if [ ! -x "$prog" ]; then
    fail "$name: $prog not built"
    continue
  fi
  if ! "$prog" --help | grep -qi "usage"; then
    fail "$name: --help prints no usage"
    continue
  fi
  # shellcheck disable=SC2086
  out=$(LD_PRELOAD="$LIB" timeout 60 "$prog" ${ARGS[$name]} 2>/dev/null)
  rc=$?
  line=$(echo "$out" | grep "^bench=$name ")
  if [ $rc -ne 0 ]; then
    fail "$name: exit code $rc"
  elif [ "$(echo "$out" | grep -c '^bench=')" != 1 ] ||
       ! echo "$line" | grep -Eq ' (ops/s|secs)=[0-9.]+(e[+-]?[0-9]+)? ' ||
       ! echo "$line" | grep -Eq ' peak_rss_kb=[0-9]+$'; then
    fail "$name: no parseable result line in: $out"
  else
    pass "$line"
  fi
done
# bench/ab.sh: two settings of the library interleaved, a median of each.
ab=$(BENCH_BUILD="$BUILD" "$(dirname "$0")/../bench/ab.sh" 2 \
  "tiny_hot ${ARGS[tiny_hot]}" a="$LIB" b="$LIB,HZ_CPU_CACHE=0" 2>&1)
if [ "$(echo "$ab" | grep -Ec '^[ab] +ops/s +[0-9.]+M  peak RSS +[0-9.]+ MiB  \(2 runs: [0-9.]+ [0-9.]+\)$')" = 2 ]; then
  pass "ab.sh: $(echo "$ab" | tr '\n' ' ')"
else
  fail "ab.sh: want a median line for a and b, got: $ab"
fi
finish bench_smoke "$passes passed"
