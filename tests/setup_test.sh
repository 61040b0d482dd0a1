#!/usr/bin/env bash
# `make` alone, as a user who is not root, with nothing but a C compiler,
# make and CMake: it must build build/libhakozuna.so without installing
# anything. apt-get, apt, dpkg and sudo are stand-ins that note they were
# called and fail; g++ is a stand-in that fails (no C++ compiler), so the
# C++ test is left out and the rest still builds.
# Usage: setup_test.sh SOURCE_DIR
SRC=$(realpath "$1")
source "$(dirname "$0")/script_util.sh"

mkdir -p "$WORK/src" "$WORK/shims"
if [ -d "$SRC/.git" ]; then
  (cd "$SRC" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$WORK/src")
else
  (cd "$SRC" && tar --exclude=./build -cf - .) | (cd "$WORK/src" && tar -xf -)
fi
for tool in apt-get apt dpkg dpkg-query sudo g++ c++; do
  cat >"$WORK/shims/$tool" <<SHIM
#!/bin/sh
echo "$tool \$*" >>"$WORK/called"
exit 1
SHIM
  chmod +x "$WORK/shims/$tool"
done
chmod -R a+rwX "$WORK"
chmod a+rx "$WORK/.."

as_user=()
if [ "$(id -u)" -eq 0 ]; then
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi
"${as_user[@]}" env HOME="$WORK" PATH="$WORK/shims:$PATH" CXX="$WORK/shims/g++" \
  make -C "$WORK/src" BUILD="$WORK/build" JOBS="$(nproc)" >"$WORK/make.log" 2>&1
rc=$?
if [ $rc != 0 ]; then
  fail "make as $("${as_user[@]}" id -un): exit code $rc: $(tail -5 "$WORK/make.log")"
elif [ ! -f "$WORK/build/libhakozuna.so" ]; then
  fail "make: no build/libhakozuna.so"
else
  pass "make as $("${as_user[@]}" id -un) builds build/libhakozuna.so"
fi
if [ -s "$WORK/called" ] && grep -qv "^g++\|^c++" "$WORK/called"; then
  fail "make called the package tools: $(grep -v '^g++\|^c++' "$WORK/called" | head -3)"
else
  pass "make installed nothing"
fi
finish setup
