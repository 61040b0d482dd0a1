#!/usr/bin/env bash
# Build the fuzzers with clang and run each for a while on its corpus.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [FUZZER...]
#
# FUZZER: api (default: all of api and options). The api fuzzer gets
# SECONDS, options a quarter of it. Inputs run from a copy of the
# committed corpus (tests/fuzz/corpus/NAME), so a run never changes the
# repository; with FUZZ_KEEP=1 new inputs are merged back into it.
# A crash leaves its input as BUILD_DIR/fuzz/crash-* and fails the run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run.sh BUILD_DIR SECONDS [FUZZER...]}/fuzz
seconds=${2:?usage: run.sh BUILD_DIR SECONDS [FUZZER...]}
shift 2
fuzzers=("$@")
[ ${#fuzzers[@]} -gt 0 ] || fuzzers=(api options)

command -v clang >/dev/null || { echo "run.sh: clang is not installed (scripts/install-deps.sh)" >&2; exit 1; }
cmake -S "$here" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null

status=0
for name in "${fuzzers[@]}"; do
  case $name in
    api) budget=$seconds; extra=(-max_len=1024 -timeout=20 -rss_limit_mb=4096) ;;
    options) budget=$(( (seconds + 3) / 4 )); extra=(-max_len=300) ;;
    *) echo "run.sh: no fuzzer $name" >&2; exit 2 ;;
  esac
  work=$(mktemp -d)
  cp -r "$here/corpus/$name/." "$work/"
  echo "fuzz.$name: ${budget}s from $(ls "$work" | wc -l) corpus inputs"
  if ! (cd "$build" && "./${name}_fuzz" -max_total_time="$budget" -print_final_stats=1 \
        "${extra[@]}" "$work" 2>"$build/$name.log"); then
    echo "fuzz.$name: FAILED; the end of $build/$name.log:" >&2
    grep -av '^#' "$build/$name.log" | tail -30 >&2
    status=1
  else
    grep -a 'stat::number_of_executed_units\|stat::peak_rss_mb' "$build/$name.log" | sed "s/^/fuzz.$name: /"
    if [ "${FUZZ_KEEP:-0}" = 1 ]; then
      (cd "$build" && "./${name}_fuzz" -merge=1 "$here/corpus/$name" "$work" >/dev/null 2>&1)
      echo "fuzz.$name: corpus now $(ls "$here/corpus/$name" | wc -l) inputs"
    fi
  fi
  rm -rf "$work"
done
exit $status
