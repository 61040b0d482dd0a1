#!/usr/bin/env bash
# Instructions per malloc+free pair under an allocator, counted by callgrind.
#
#   bench/hot_pair_count.sh ALLOCATOR_LIB_OR_EMPTY PATTERN MIN MAX
#
# Runs build/bench/hot_pair (PATTERN lifo or random, sizes MIN..MAX) under
# `valgrind --tool=callgrind` four times: with the allocator preloaded
# (empty: glibc) for HOT_PAIR_SHORT and HOT_PAIR_LONG pairs, and in mode
# null (the same loop calling two do-nothing functions) for both lengths.
# The difference between the lengths removes start-up and warm-up; the null
# loop's count, less its two stand-ins' own instructions (read from the
# callgrind profile), is the loop's cost. What is left is the allocator's
# malloc and free, slow paths included as often as the loop meets them:
#
#   bench=hot_pair pattern=… min=… max=… instr=<per pair> loop=<per pair>
#
# Exit status: 0 on success; non-zero (and no bench= line) on failure.
set -uo pipefail

lib=${1-}
pattern=${2:-lifo}
min=${3:-8}
max=${4:-64}
short=${HOT_PAIR_SHORT:-200000}
long=${HOT_PAIR_LONG:-400000}
here=$(cd "$(dirname "$0")" && pwd)
prog=${HOT_PAIR_PROGRAM:-$here/../build/bench/hot_pair}

command -v valgrind >/dev/null || { echo "hot_pair_count: valgrind not installed" >&2; exit 1; }
command -v callgrind_annotate >/dev/null || { echo "hot_pair_count: callgrind_annotate not installed" >&2; exit 1; }
[ -x "$prog" ] || { echo "hot_pair_count: $prog missing (run make)" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# count MODE PAIRS PRELOAD: total instructions of one run; the profile stays
# in $tmp/MODE-PAIRS.out.
count() {
  local out=$tmp/$1-$2.out
  if ! env ${3:+LD_PRELOAD=$3} valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$prog" "$1" "$2" "$min" "$max" "$pattern" >/dev/null 2>"$tmp/err"; then
    echo "hot_pair_count: hot_pair $1 $2 failed:" >&2
    cat "$tmp/err" >&2
    return 1
  fi
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err"
}

# stand_ins PAIRS: instructions spent inside null_malloc and null_free.
stand_ins() {
  callgrind_annotate --threshold=100 "$tmp/null-$1.out" 2>/dev/null |
    awk '/:null_(malloc|free)( |$)/ { gsub(",", "", $1); sum += $1 } END { print sum + 0 }'
}

a1=$(count malloc "$short" "$lib") && a2=$(count malloc "$long" "$lib") &&
  n1=$(count null "$short" "") && n2=$(count null "$long" "") || exit 1
s1=$(stand_ins "$short")
s2=$(stand_ins "$long")
if [ -z "$a1" ] || [ -z "$a2" ] || [ "$s2" -le "$s1" ]; then
  echo "hot_pair_count: could not read the callgrind counts" >&2
  exit 1
fi
awk -v a1="$a1" -v a2="$a2" -v n1="$n1" -v n2="$n2" -v s1="$s1" -v s2="$s2" \
    -v pairs=$((long - short)) -v pattern="$pattern" -v min="$min" -v max="$max" 'BEGIN {
  loop = (n2 - n1 - (s2 - s1)) / pairs
  printf "bench=hot_pair pattern=%s min=%s max=%s instr=%.1f loop=%.1f\n",
         pattern, min, max, (a2 - a1) / pairs - loop, loop
}'
