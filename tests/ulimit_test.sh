#!/usr/bin/env bash
# Under an address-space limit (ulimit -v), hakozuna runs what glibc runs:
# every program below that runs under glibc with a limit of N MiB, N >= 64,
# also runs with hakozuna preloaded (and hakozuna is really loaded: the
# loader once refused the preload at 30 MiB and the program ran on glibc
# without a word). Below 64 MiB what fails is not counted, but a program
# that runs must run on hakozuna. Under 512 MiB hakozuna fits at least 95%
# as many blocks as glibc (200 KiB, 1 MB and 3 MiB blocks; it fit 89% of
# glibc's 200 KiB blocks and 86% of its 3 MiB ones when large mappings
# were rounded to a quarter power of two and 200 KiB blocks took 224 KiB).
# Usage: ulimit_test.sh BUILD_DIR
BUILD=$(realpath "$1")
LIB=$BUILD/libhakozuna.so
FILL=$BUILD/tests/limit_fill
source "$(dirname "$0")/script_util.sh"

printf 'b\na\nc\n' >"$WORK/lines"
programs=("ls /" "/usr/bin/python3 -c 'print(1)'" "sort $WORK/lines"
          "sh -c 'echo x | tr x y'" "git --version")

# under MIB COMMAND...: run COMMAND with the limit; its exit code.
under() {
  local mib=$1
  shift
  (ulimit -v $((mib * 1024)) && "$@")
}

for mib in 30 48 64 96; do
  for program in "${programs[@]}"; do
    command -v "${program%% *}" >/dev/null || continue
    under "$mib" sh -c "$program" >/dev/null 2>&1 || continue # glibc cannot
    if ! under "$mib" env HZ_VERBOSE=1 LD_PRELOAD="$LIB" sh -c "$program" \
        >/dev/null 2>"$WORK/err"; then
      [ "$mib" -ge 64 ] &&
        fail "ulimit -v ${mib} MiB: '$program' fails with hakozuna: $(grep -v 'option HZ_' "$WORK/err" | head -2)"
    elif ! grep -q "^hakozuna: option" "$WORK/err"; then
      fail "ulimit -v ${mib} MiB: '$program' ran without hakozuna"
    fi
  done
  pass "ulimit -v ${mib} MiB: what runs under glibc runs under hakozuna"
done

for size in 204800 1000000 3145728; do
  glibc=$(under 512 "$FILL" "$size")
  ours=$(under 512 env LD_PRELOAD="$LIB" "$FILL" "$size")
  if [ -z "$glibc" ] || [ -z "$ours" ] || [ $((ours * 100)) -lt $((glibc * 95)) ]; then
    fail "ulimit -v 512 MiB: ${ours:-no} blocks of $size B fit with hakozuna, ${glibc:-no} with glibc (95% wanted)"
  else
    pass "ulimit -v 512 MiB: $ours blocks of $size B fit with hakozuna, $glibc with glibc"
  fi
done

finish ulimit
