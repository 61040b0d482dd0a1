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
results=$(mktemp)
trap 'rm -f "$results"' EXIT
source "$(dirname "$0")/rounds.sh"
run_rounds "$runs" "$results" "${command[@]}" -- "$@"

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# field NAME KEY: the KEY= values of NAME's runs, one a line (nan if none).
field() {
  awk -v n="$1" '$1 == n' "$results" | while read -r line; do
    v=$(grep -o " $2=[0-9.e+]*" <<<" $line" | cut -d= -f2)
    echo "${v:-nan}"
  done
}
for spec in "$@"; do
  name=${spec%%=*}
  ops=$(field "$name" ops/s | median)
  rss=$(field "$name" peak_rss_kb | median)
  all=$(field "$name" ops/s | awk '{printf " %.1f", $1 / 1e6}')
  awk -v n="$name" -v o="$ops" -v r="$rss" -v a="$all" -v k="$runs" 'BEGIN {
    printf "%-12s ops/s %6.1fM  peak RSS %6.1f MiB  (%d runs:%s)\n",
      n, o / 1e6, r / 1024, k, a }'
done
