#!/usr/bin/env bash
# `cmake --install` produces a usable package: a consumer project finds it
# with find_package(hakozuna), links it (shared and static), and its
# malloc is hakozuna's; pkg-config reports the right flags; the manual
# pages are in share/man.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
BUILD=$(realpath "$1")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PREFIX="$WORK/prefix"

cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
for f in include/hakozuna.h bin/hakozuna share/man/man1/hakozuna.1.gz \
         share/man/man3/hakozuna.3.gz; do
  [ -e "$PREFIX/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
LIBDIR=$(dirname "$(find "$PREFIX" -name libhakozuna.so | head -1)")

mkdir -p "$WORK/app"
cat >"$WORK/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(hakozuna REQUIRED)
add_executable(app_shared app.c)
target_link_libraries(app_shared PRIVATE hakozuna::hakozuna)
add_executable(app_static app.c)
target_link_libraries(app_static PRIVATE hakozuna::hakozuna_static)
CM
cat >"$WORK/app/app.c" <<'C'
#include <hakozuna.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  void *p = malloc(100);         /* must come from hakozuna */
  size_t usable = hz_usable_size(p);
  void *q = hz_malloc(10);
  free(q);                       /* and hz_ blocks free through libc names */
  free(p);
  printf("usable=%zu\n", usable);
  return usable >= 100 ? 0 : 1;
}
C
cmake -S "$WORK/app" -B "$WORK/app/build" -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$WORK/app/build" >/dev/null
for app in app_shared app_static; do
  out=$(LD_LIBRARY_PATH="$LIBDIR" HZ_VERBOSE=1 "$WORK/app/build/$app" 2>&1)
  echo "$out" | grep -q "^hakozuna: option" || { echo "FAIL: $app not using hakozuna: $out"; exit 1; }
  echo "ok   find_package consumer $app"
done

if command -v pkg-config >/dev/null; then
  flags=$(PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --cflags --libs hakozuna)
  echo "$flags" | grep -q -- "-lhakozuna" || { echo "FAIL: pkg-config flags: $flags"; exit 1; }
  cc "$WORK/app/app.c" $flags -o "$WORK/app_pc"
  LD_LIBRARY_PATH="$LIBDIR" "$WORK/app_pc" >/dev/null
  echo "ok   pkg-config consumer"
else
  echo "FAIL: pkg-config not found"
  exit 1
fi
echo "install: all passed"
