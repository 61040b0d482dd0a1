#!/usr/bin/env bash
# Install the Debian packages the build and the tests need, if missing.
# Needs root (or sudo) only when something is actually missing.
set -euo pipefail
# libpython3.11-testsuite: CPython's own tests, run under hakozuna by the
# real-program test. clang and libclang-rt-dev: the fuzzers (libFuzzer).
# sqlite3 … time: the apps benchmark family, smoke-run by the tests.
# libunwind8: the heap profiler's unwinder; google-perftools: google-pprof,
# which the profiler test and `hakozuna prof` read profiles with. dpkg-dev:
# dpkg-shlibdeps, which `make deb` (CPack) works out the dependencies with.
packages=(cmake make gcc g++ libtsan2 perl python3 coreutils pkgconf valgrind
          libpython3.11-testsuite clang libclang-rt-dev
          sqlite3 ruby lua5.4 z3 ghostscript rocksdb-tools git time
          libunwind8 google-perftools dpkg-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "hakozuna: installing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${missing[@]}"
