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
#
# With an argument, another set (none of it needed by `make test`):
#   arm64     the cross-build and its tests under qemu-user (`make arm64`,
#             `make test-arm64-user`): Debian's aarch64 toolchain (its
#             libtsan2 and libstdc++ included) and qemu-user-static;
#   arm64-vm  the arm64 machine of `make test-arm64`: qemu-system-aarch64,
#             debootstrap (the root filesystem), e2fsprogs (its image) and
#             cpio (the initramfs); the arm64 kernel and packages come from
#             the archive as the image is built (scripts/arm64-vm.sh). The
#             machine needs nothing qemu-system-arm only recommends (boot
#             ROMs, UEFI firmware): it boots its kernel directly and has
#             no network device; .ci/arm64 checks that it starts without.
case ${1:-test} in
test)
  packages=(cmake make gcc g++ libtsan2 perl python3 coreutils pkgconf valgrind
            libpython3.11-testsuite clang libclang-rt-dev
            sqlite3 ruby lua5.4 z3 ghostscript rocksdb-tools git time
            libunwind8 google-perftools dpkg-dev man-db) ;;
arm64)
  packages=(cmake make gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
            libc6-dev-arm64-cross qemu-user-static) ;;
arm64-vm)
  packages=(qemu-system-arm debootstrap debian-archive-keyring e2fsprogs
            cpio gzip) ;;
*)
  echo "usage: install-deps.sh [test|arm64|arm64-vm]" >&2
  exit 2 ;;
esac
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
# The arm64 sets without recommends (qemu-system-arm's would bring a GUI).
recommends=()
[ "${1:-test}" = test ] || recommends=(--no-install-recommends)
$sudo apt-get "${wait_lock[@]}" install -y -qq "${recommends[@]}" "${missing[@]}"
