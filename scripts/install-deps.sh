#!/usr/bin/env bash
# Install the Debian packages `make test` (and `make fuzz`) needs, if
# missing. Building the libraries (`make`) needs only a C compiler, make and
# CMake, and does not call this. Needs root (or password-less sudo) only
# when something is actually missing; waits up to 10 minutes for another
# apt-get or dpkg to let go of the package lock.
set -euo pipefail
# g++: the C++ operator test. libtsan2: the ThreadSanitizer builds.
# valgrind: memcheck runs and the instruction counts of the fast-path test.
# libpython3.11-testsuite: CPython's own tests, run under hakozuna by the
# real-program test. clang and libclang-rt-dev: the fuzzers (libFuzzer).
# sqlite3 … time: the apps benchmark family, smoke-run by the tests.
# libunwind8: the heap profiler's unwinder; google-perftools: google-pprof,
# which the profiler test and `hakozuna prof` read profiles with. dpkg-dev:
# dpkg-shlibdeps, which `make deb` (CPack) works out the dependencies with.
# man-db: the manual pages' test renders them with man.
packages=(cmake make gcc g++ libtsan2 perl python3 coreutils pkgconf valgrind
          libpython3.11-testsuite clang libclang-rt-dev
          sqlite3 ruby lua5.4 z3 ghostscript rocksdb-tools git time
          libunwind8 google-perftools dpkg-dev man-db)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "hakozuna: installing Debian packages: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "hakozuna: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
wait_lock=(-o DPkg::Lock::Timeout=600)
$sudo apt-get "${wait_lock[@]}" update -qq
$sudo apt-get "${wait_lock[@]}" install -y -qq "${missing[@]}"
