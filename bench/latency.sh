#!/bin/bash
# latency.sh: bench/latency under several libraries, interleaved round by
# round, threads unpinned; prints each library's median of every
# percentile, the minor faults, ops/s and peak RSS over the rounds. The
# library before the first name is nothing: "glibc=" runs the C library's.
#
# usage: bench/latency.sh RUNS NAME=LIB[,VAR=VALUE...] ... [-- ARGS...]
# e.g.   bench/latency.sh 3 hz=build/libhakozuna.so glibc= \
#          tcmalloc=/path/libtcmalloc.so,GLIBC_TUNABLES=glibc.pthread.rseq=0
# ARGS go to the program (THREADS STEPS SLOTS; default 4 500000 4096).
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '7,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
runs=$1
shift
specs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  specs+=("$1")
  shift
done
[ "${1:-}" = -- ] && shift
results=$(mktemp)
trap 'rm -f "$results"' EXIT
source "$(dirname "$0")/rounds.sh"
run_rounds "$runs" "$results" latency "$@" -- "${specs[@]}"

fields="all_p99_us all_p999_us all_p9999_us malloc_p999_us malloc_p9999_us
free_p999_us free_p9999_us minor_faults ops/s peak_rss_kb"
printf '%-12s' library
for f in $fields; do printf ' %14s' "$f"; done
printf '\n'
for spec in "${specs[@]}"; do
  name=${spec%%=*}
  printf '%-12s' "$name"
  for f in $fields; do
    grep "^$name " "$results" | grep -o " $f=[0-9.e+]*" | cut -d= -f2 |
      sort -g | awk '{v[NR] = $1} END {printf " %14s", NR ? v[int((NR + 1) / 2)] : "nan"}'
  done
  printf '\n'
done
