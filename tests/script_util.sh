# Sourced by the shell tests: a scratch directory $WORK (removed at exit),
# fail MESSAGE and pass MESSAGE (one "FAIL" or "ok" line, counted) and
# finish NAME [MESSAGE] (the verdict line; exit 1 if anything failed). A test with more to undo at
# exit defines on_exit before sourcing this.
set -u
WORK=$(mktemp -d)
failures=0
passes=0

script_exit() {
  if declare -F on_exit >/dev/null; then on_exit; fi
  rm -rf "$WORK"
}
trap script_exit EXIT

fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

pass() {
  echo "ok   $*"
  passes=$((passes + 1))
}

finish() {
  if [ "$failures" -gt 0 ]; then
    echo "$1: $failures failed"
    exit 1
  fi
  echo "$1: ${2:-all passed}"
}
