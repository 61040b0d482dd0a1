#!/usr/bin/env bash
# Smoke test of the apps benchmark family: every case runs once on its
# small input (--quick) under libhakozuna.so, and its output must match the
# run without a preload (bench/apps.py checks it); one result line each.
# Usage: apps_smoke.sh SOURCE_DIR BUILD_DIR
source "$(dirname "$0")/script_util.sh"
SRC=$(realpath "$1")
BUILD=$(realpath "$2")
export APPS_DATA="$BUILD/apps-data"
for c in sqlite python ruby lua z3 ghostscript gcc sort rocksdb git; do
  out=$(bash "$SRC/bench/apps.sh" "$BUILD/libhakozuna.so" "$c" --quick 2>&1)
  if echo "$out" | grep -Eq "^bench=apps case=$c .* secs=[0-9.]+ peak_rss_kb=[0-9]+$"; then
    pass "$(echo "$out" | tail -1)"
  else
    fail "$c: $out"
  fi
done
finish apps.smoke "$passes passed"
