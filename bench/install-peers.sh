#!/usr/bin/env bash
# Install the Debian packages the benchmark harness needs, if missing:
# the peer allocators (mimalloc, jemalloc, tcmalloc), matplotlib for the
# charts, redis-server/redis-tools and the programs of the apps family for
# the real-program benchmarks.
#
#   bench/install-peers.sh          install what is missing (needs root or sudo)
#   bench/install-peers.sh --check  only list what is missing; exit 1 if anything is
#
# Runs `apt-get update` once, and only when something is actually missing;
# waits up to 10 minutes for another apt-get or dpkg to let go of the lock.
# Exits 0 when everything is installed, non-zero when something could not be.
set -uo pipefail

packages=(libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4 python3-matplotlib
          redis-server redis-tools
          # the apps family (bench/apps.py)
          sqlite3 ruby lua5.4 z3 ghostscript gcc coreutils rocksdb-tools git time)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "${1:-}" = "--check" ]; then
  echo "missing: ${missing[*]}"
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    echo "install-peers: not root and no password-less sudo; cannot install: ${missing[*]}" >&2
    echo "install-peers: run as root: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

log="${TMPDIR:-/tmp}/hakozuna-install-peers.log"
echo "install-peers: installing Debian packages: ${missing[*]} (log: $log)" >&2
export DEBIAN_FRONTEND=noninteractive
: >"$log"
$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >>"$log" 2>&1 || echo "install-peers: apt-get update failed" >&2

# Install all at once; if that fails (e.g. one package unavailable), try one
# by one so the others still get installed.
if ! $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
  for p in "${missing[@]}"; do
    $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$p" >>"$log" 2>&1 ||
      { echo "install-peers: could not install $p" >&2; tail -n 5 "$log" >&2; }
  done
fi

# redis-server's package starts a system service on install in some setups;
# the harness starts its own instances on other ports, so that does not matter.

rc=0
for p in "${missing[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  if [ "$status" != "install ok installed" ]; then
    echo "install-peers: still missing: $p" >&2
    rc=1
  fi
done
exit $rc
