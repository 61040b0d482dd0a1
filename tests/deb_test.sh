#!/usr/bin/env bash
# The Debian package: `cpack -G DEB` builds hakozuna_<version>_amd64.deb
# with the three libraries, the header, pkg-config and CMake files and the
# hakozuna command; dpkg -i installs it, `hakozuna run` preloads the
# installed library, a program builds against it with pkg-config and runs,
# and dpkg -r removes every file again (then -P forgets it). Needs root; skipped (77) without
# it, or when a hakozuna package is already installed (it is not ours to
# remove).
# Usage: deb_test.sh BUILD_DIR
set -u
BUILD=$(realpath "$1")
if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null; then
  echo "deb: skipped (needs root and dpkg)"
  exit 77
fi
status() { dpkg-query -W -f '${db:Status-Status}' hakozuna 2>/dev/null; }
if [ "$(status)" = installed ]; then
  echo "deb: skipped (a hakozuna package is installed already)"
  exit 77
fi
installed=0
on_exit() {
  [ $installed = 1 ] && dpkg -r hakozuna >/dev/null 2>&1
  dpkg -P hakozuna >/dev/null 2>&1
}
source "$(dirname "$0")/script_util.sh"

version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
if ! (cd "$BUILD" && cpack -G DEB -B "$WORK/out" >"$WORK/cpack.log" 2>&1); then
  echo "FAIL cpack:"; tail -20 "$WORK/cpack.log"; exit 1
fi
deb=$WORK/out/hakozuna_${version}_amd64.deb
[ -f "$deb" ] || { echo "FAIL no $deb: $(ls "$WORK/out")"; exit 1; }
pass "built $(basename "$deb")"

contents=$(dpkg-deb -c "$deb")
for f in lib/libhakozuna.so lib/libhakozuna-secure.so lib/libhakozuna-debug.so \
         lib/libhakozuna.a include/hakozuna.h lib/pkgconfig/hakozuna.pc \
         lib/cmake/hakozuna/hakozunaConfig.cmake bin/hakozuna \
         bin/hakozuna-flamegraph share/man/man1/hakozuna.1.gz \
         share/man/man3/hakozuna.3.gz; do
  grep -q " \./usr/$f\$" <<<"$contents" || fail "the package has no /usr/$f"
done

if ! dpkg -i "$deb" >"$WORK/dpkg.log" 2>&1; then
  echo "FAIL dpkg -i:"; cat "$WORK/dpkg.log"; exit 1
fi
installed=1
pass "dpkg -i"

# hakozuna run preloads the installed library.
if /usr/bin/hakozuna run cat /proc/self/maps | grep -q " /usr/lib/libhakozuna.so$"; then
  pass "/usr/bin/hakozuna run preloads /usr/lib/libhakozuna.so"
else
  fail "hakozuna run: /usr/lib/libhakozuna.so is not in the command's maps"
fi

# The manual pages: man finds and renders both (unless this machine's dpkg
# is told to leave manual pages out, as slim container images are).
if grep -rqs '^path-exclude=/usr/share/man' /etc/dpkg/dpkg.cfg.d/; then
  echo "note: dpkg excludes /usr/share/man here; man pages not checked"
elif command -v man >/dev/null; then
  for section in 1 3; do
    if MANPAGER=cat MANWIDTH=80 man "$section" hakozuna 2>/dev/null |
        grep -q "HAKOZUNA($section)"; then
      pass "man $section hakozuna"
    else
      fail "man $section hakozuna: no page"
    fi
  done
fi

# A program built with pkg-config against the installed package.
cat >"$WORK/use.c" <<'C'
#include <hakozuna.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  char *p = hz_malloc(100);
  if (p == NULL || hz_usable_size(p) < 100) return 1;
  strcpy(p, "built against the package");
  puts(p);
  hz_free(p);
  return 0;
}
C
if cc "$WORK/use.c" -o "$WORK/use" $(pkg-config --cflags --libs hakozuna) \
     2>"$WORK/cc.log" && out=$("$WORK/use") &&
   [ "$out" = "built against the package" ]; then
  pass "pkg-config build runs: $out"
else
  fail "pkg-config build: $(cat "$WORK/cc.log")"
fi

dpkg -r hakozuna >"$WORK/dpkg.log" 2>&1 || fail "dpkg -r: $(cat "$WORK/dpkg.log")"
installed=0
left=$(ls /usr/lib/libhakozuna* /usr/include/hakozuna.h /usr/bin/hakozuna 2>/dev/null)
[ -z "$left" ] || fail "files left after dpkg -r: $left"
[ "$(status)" = installed ] && fail "dpkg still lists hakozuna as installed"
[ $failures = 0 ] && pass "dpkg -r removed every file"

finish deb
