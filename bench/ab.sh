#!/bin/bash
# ab.sh: one benchmark of build/bench, run under several libraries (or one
# library under several settings) interleaved, round by round, with threads
# unpinned; prints each build's median ops/s and median peak RSS. For
# comparing builds of hakozuna on one cell; comparisons with the peers go
# through bench/harness.py.
#
# usage: bench/ab.sh RUNS "PROGRAM ARGS..." NAME=LIB[,VAR=VALUE...] ...
# e.g.   bench/ab.sh 7 "larson 4 1200 1000 16 1024" \
#          hz=build/libhakozuna.so pt=build/libhakozuna.so,HZ_CPU_CACHE=0
# The programs are build/bench/PROGRAM, or $BENCH_BUILD/bench/PROGRAM.
set -euo pipefail

if [ $# -lt 3 ]; then
  sed -n '8,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
runs=$1
read -r -a command <<<"$2"
shift 2
build=${BENCH_BUILD:-$(cd "$(dirname "$0")/.." && pwd)/build}
results=$(mktemp)
trap 'rm -f "$results"' EXIT

for ((round = 1; round <= runs; round++)); do
  for spec in "$@"; do
    name=${spec%%=*}
    rest=${spec#*=}
    lib=${rest%%,*}
    settings=()
    if [[ $rest == *,* ]]; then IFS=, read -r -a settings <<<"${rest#*,}"; fi
    line=$(env BENCH_NO_PIN=1 "${settings[@]}" LD_PRELOAD="$lib" \
      "$build/bench/${command[0]}" "${command[@]:1}" 2>/dev/null | tail -1)
    ops=$(grep -o 'ops/s=[0-9.e+]*' <<<"$line" | cut -d= -f2)
    rss=$(grep -o 'peak_rss_kb=[0-9]*' <<<"$line" | cut -d= -f2)
    echo "$name ${ops:-nan} ${rss:-nan}" >>"$results"
  done
done

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for spec in "$@"; do
  name=${spec%%=*}
  ops=$(awk -v n="$name" '$1 == n {print $2}' "$results" | median)
  rss=$(awk -v n="$name" '$1 == n {print $3}' "$results" | median)
  all=$(awk -v n="$name" '$1 == n {printf " %.1f", $2 / 1e6}' "$results")
  awk -v n="$name" -v o="$ops" -v r="$rss" -v a="$all" -v k="$runs" 'BEGIN {
    printf "%-12s ops/s %6.1fM  peak RSS %6.1f MiB  (%d runs:%s)\n",
      n, o / 1e6, r / 1024, k, a }'
done
