#!/bin/sh
# arm64-tests: the test suite inside the arm64 machine (`make test-arm64`
# boots it with scripts/arm64-vm.sh and runs this there, in the source
# folder). First it checks that the machine gives hakozuna what the
# per-CPU caches need: a program preloaded with it names them in its
# report, and names the depots alone with glibc's rseq off. Then ctest
# twice, as `make test`: as it is, and with glibc's rseq registration off,
# less the tests named by SKIP (and NO_RSEQ_SKIP the second time). PASSES
# (both) may name one of them: first or second.
# Usage: arm64-tests.sh BUILD_DIR SKIP NO_RSEQ_SKIP [PASSES]
set -u
BUILD=$1
SKIP=$2
NO_RSEQ_SKIP=$3
PASSES=${4:-both}
echo "arm64-tests: $(uname -srm), $(nproc) CPUs, $(ldd --version | head -1)"

# The front end a preloaded program reports (HZ_SHOW_STATS=1).
front_end() {
  env "$@" LD_PRELOAD="$BUILD/libhakozuna.so" HZ_SHOW_STATS=1 \
    "$BUILD/tests/stress.plain" 2 1 100 2>&1 >/dev/null |
    sed -n 's/^ *shared ladder *\(.*\): [0-9]* classes share.*/\1/p' | head -1
}

status=0
on=$(front_end)
off=$(front_end GLIBC_TUNABLES=glibc.pthread.rseq=0)
echo "arm64-tests: front end: \"$on\"; with glibc's rseq off: \"$off\""
if [ "$on" != "per-CPU caches (rseq) and depots" ] || [ "$off" != depots ]; then
  echo "arm64-tests: FAIL: the per-CPU caches are not on where rseq is"
  status=1
fi

cd "$BUILD" || exit 1
if [ "$PASSES" != second ]; then
  start=$(date +%s)
  ctest --output-on-failure -j "$(nproc)" -E "$SKIP" || status=1
  echo "arm64-tests: first pass: $(($(date +%s) - start)) s"
fi
if [ "$PASSES" != first ]; then
  start=$(date +%s)
  GLIBC_TUNABLES=glibc.pthread.rseq=0 ctest --output-on-failure \
    -j "$(nproc)" -E "$SKIP|$NO_RSEQ_SKIP" || status=1
  echo "arm64-tests: second pass (rseq off): $(($(date +%s) - start)) s"
fi
exit $status
