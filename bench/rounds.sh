# rounds.sh: sourced by ab.sh and latency.sh. The rounds they compare:
#   run_rounds RUNS OUT PROGRAM [ARGS...] -- NAME=LIB[,VAR=VALUE...] ...
# runs build/bench/PROGRAM (or $BENCH_BUILD/bench/PROGRAM) RUNS times under
# each library (LD_PRELOAD, nothing for the C library's; VAR=VALUE in its
# environment), interleaved round by round, threads unpinned, and appends
# "NAME LAST-LINE-OF-OUTPUT" to OUT for each run.
run_rounds() {
  local runs=$1 out=$2 program=()
  shift 2
  while [ "$1" != -- ]; do
    program+=("$1")
    shift
  done
  shift
  local build
  build=${BENCH_BUILD:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build}
  local round spec name rest lib line settings
  for ((round = 1; round <= runs; round++)); do
    for spec in "$@"; do
      name=${spec%%=*}
      rest=${spec#*=}
      lib=${rest%%,*}
      settings=()
      if [[ $rest == *,* ]]; then IFS=, read -r -a settings <<<"${rest#*,}"; fi
      line=$(env BENCH_NO_PIN=1 "${settings[@]}" LD_PRELOAD="$lib" \
        "$build/bench/${program[0]}" "${program[@]:1}" 2>/dev/null | tail -1)
      echo "$name $line" >>"$out"
    done
  done
}
