#!/usr/bin/env bash
# Placement of the hot entries (src/system/config.h, HZ_HOT): in every
# shared library built, malloc starts a 4 KiB page of code and free,
# hz_malloc and hz_free follow it in that order within the same page, each
# at the start of a 64-byte line. An edit elsewhere in the library then
# cannot move them, not even within a page: an unplaced malloc that moved
# by 0x60 bytes made a single-threaded program 40% slower.
# Usage: placement_test.sh BUILD_DIR
set -u
build=$1
failures=0
for lib in "$build"/libhakozuna.so "$build"/libhakozuna-secure.so \
  "$build"/libhakozuna-debug.so; do
  [ -f "$lib" ] || { echo "FAIL $lib missing"; failures=$((failures + 1)); continue; }
  addr() { nm -D --defined-only "$lib" | awk -v s="$1" '$3 == s { print $1 }'; }
  page=""
  last=-1
  for sym in malloc free hz_malloc hz_free; do
    hex=$(addr "$sym")
    if [ -z "$hex" ]; then
      echo "FAIL $lib: no $sym"
      failures=$((failures + 1))
      continue
    fi
    at=$((16#$hex))
    [ -z "$page" ] && page=$((at / 4096))
    if [ "$sym" = malloc ] && [ $((at % 4096)) -ne 0 ]; then
      echo "FAIL $lib: malloc at 0x$hex, not at the start of a page"
      failures=$((failures + 1))
    elif [ $((at % 64)) -ne 0 ] || [ $((at / 4096)) -ne "$page" ] || [ "$at" -le "$last" ]; then
      echo "FAIL $lib: $sym at 0x$hex, not on its own line after the one before in malloc's page"
      failures=$((failures + 1))
    else
      printf 'ok   %s: %s at +0x%x\n' "$(basename "$lib")" "$sym" $((at % 4096))
    fi
    last=$at
  done
done
echo "placement: $failures failed"
[ "$failures" -eq 0 ]
