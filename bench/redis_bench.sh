#!/usr/bin/env bash
# Real-program benchmark: redis-server under an allocator, driven by
# redis-benchmark over loopback.
#
#   bench/redis_bench.sh ALLOCATOR_LIB_OR_EMPTY
#
# ALLOCATOR_LIB_OR_EMPTY is the shared library to LD_PRELOAD into
# redis-server (e.g. build/libhakozuna.so); an empty string means glibc
# (no preload). Only the server is preloaded, never redis-benchmark.
#
# Starts redis-server on the first free port from 127.0.0.1:$REDIS_PORT_BASE
# (persistence off), waits until it answers PING, runs
#   redis-benchmark --csv -P 16 -n $REDIS_N -r $REDIS_KEYSPACE -d $REDIS_VALUE_SIZE
#                   -t set,get,lpush,lpop
# bounded by $REDIS_TIMEOUT seconds, reads the server's peak RSS (VmHWM),
# shuts it down (always, via a trap) and prints one line:
#
#   bench=redis set_rps=… get_rps=… lpush_rps=… lpop_rps=… ops/s=<mean of the four>
#         peak_rss_kb=… allocator_builtin=… allocator_effective=… preload=…
#         preload_mapped=0|1 n=… port=…
#
# Debian's redis-server is linked against libjemalloc (INFO memory reports
# mem_allocator=jemalloc-…, recorded as allocator_builtin). Its malloc, calloc,
# realloc, free and malloc_usable_size are undefined symbols resolved through
# the global scope, so an LD_PRELOADed allocator still takes them over;
# preload_mapped=1 confirms the library was mapped into the server.
# Because of that link, "no preload" would measure jemalloc, not glibc: for
# the empty argument the script compiles (with cc, into its scratch
# directory) a tiny shim that routes the malloc family to glibc's
# __libc_malloc & co. and preloads it, so the glibc row really is glibc
# (allocator_effective=glibc). Without a C compiler, or with
# REDIS_GLIBC_SHIM=0, it runs without preload and says
# allocator_effective=<builtin>.
#
# Environment (defaults): REDIS_N (400000 requests per test),
# REDIS_KEYSPACE (100000), REDIS_VALUE_SIZE (128), REDIS_CLIENTS (50),
# REDIS_PIPELINE (16), REDIS_TIMEOUT (60 s), REDIS_PORT_BASE (6390).
# Exit status: 0 on success; non-zero (and no bench= line) on failure.
set -uo pipefail

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  exit 0
fi

lib="${1:-}"
N="${REDIS_N:-400000}"
KEYSPACE="${REDIS_KEYSPACE:-100000}"
VSIZE="${REDIS_VALUE_SIZE:-128}"
CLIENTS="${REDIS_CLIENTS:-50}"
PIPE="${REDIS_PIPELINE:-16}"
TMO="${REDIS_TIMEOUT:-60}"
PORT_BASE="${REDIS_PORT_BASE:-6390}"

for prog in redis-server redis-cli redis-benchmark; do
  if ! command -v "$prog" >/dev/null 2>&1; then
    echo "redis_bench: $prog not found (apt-get install redis-server redis-tools," \
         "or run bench/install-peers.sh)" >&2
    exit 3
  fi
done
if [ -n "$lib" ] && [ ! -e "$lib" ]; then
  echo "redis_bench: allocator library not found: $lib" >&2
  exit 3
fi
# Resolve to an absolute path: the server runs in a scratch directory.
[ -n "$lib" ] && lib="$(readlink -f "$lib")"

workdir="$(mktemp -d "${TMPDIR:-/tmp}/hz-redis.XXXXXX")"
effective=""
label="$(basename "${lib:-none}")"

build_glibc_shim() {
  command -v cc >/dev/null 2>&1 || return 1
  cat >"$workdir/glibc_shim.c" <<'EOF'
/* Route the malloc family to glibc's own allocator. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
void cfree(void *p) { __libc_free(p); }
void *calloc(size_t a, size_t b) { return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void *reallocarray(void *p, size_t a, size_t b) {
  size_t n;
  if (__builtin_mul_overflow(a, b, &n)) { errno = ENOMEM; return NULL; }
  return __libc_realloc(p, n);
}
void *memalign(size_t al, size_t n) { return __libc_memalign(al, n); }
void *aligned_alloc(size_t al, size_t n) { return __libc_memalign(al, n); }
void *valloc(size_t n) { return __libc_valloc(n); }
void *pvalloc(size_t n) { return __libc_pvalloc(n); }
int posix_memalign(void **out, size_t al, size_t n) {
  if (al < sizeof(void *) || (al & (al - 1)) != 0) return EINVAL;
  void *p = __libc_memalign(al, n);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}
size_t malloc_usable_size(void *p) {
  static size_t (*real)(void *);
  if (real == NULL) {
    void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL) real = (size_t (*)(void *))dlsym(h, "malloc_usable_size");
  }
  return real != NULL ? real(p) : 0;
}
EOF
  cc -O2 -shared -fPIC -o "$workdir/glibc_shim.so" "$workdir/glibc_shim.c" -ldl \
    2>"$workdir/shim.err"
}

if [ -z "$lib" ] && [ "${REDIS_GLIBC_SHIM:-1}" != 0 ]; then
  if build_glibc_shim; then
    lib="$workdir/glibc_shim.so"
    effective=glibc
    label=glibc-shim
  else
    echo "redis_bench: could not build the glibc shim; running without preload," \
         "so the server uses its linked allocator" >&2
  fi
fi
pid=""
port=""

cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    [ -n "$port" ] && timeout 5 redis-cli -h 127.0.0.1 -p "$port" shutdown nosave \
      >/dev/null 2>&1
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null
    sleep 0.2
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

port_in_use() {
  # Something accepts connections on the port?
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start_server() {
  local p="$1"
  if [ -n "$lib" ]; then
    env LD_PRELOAD="$lib" redis-server --port "$p" --bind 127.0.0.1 \
      --save "" --appendonly no --daemonize no --dir "$workdir" \
      --logfile "$workdir/redis.log" --protected-mode yes &
  else
    env -u LD_PRELOAD redis-server --port "$p" --bind 127.0.0.1 \
      --save "" --appendonly no --daemonize no --dir "$workdir" \
      --logfile "$workdir/redis.log" --protected-mode yes &
  fi
  pid=$!
  # Wait up to 10 s for PING.
  for _ in $(seq 1 100); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null
      pid=""
      return 1
    fi
    if [ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$p" ping 2>/dev/null)" = "PONG" ]; then
      return 0
    fi
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  pid=""
  return 1
}

for off in $(seq 0 99); do
  p=$((PORT_BASE + off))
  port_in_use "$p" && continue
  if start_server "$p"; then
    port="$p"
    break
  fi
  # The server died: a crash under the allocator is fatal; a lost bind race
  # is not. Tell them apart by the log.
  if ! grep -qiE 'address already in use|could not create server tcp' \
       "$workdir/redis.log" 2>/dev/null; then
    echo "redis_bench: redis-server failed to start (preload: ${lib:-none})" >&2
    tail -n 20 "$workdir/redis.log" >&2 2>/dev/null
    exit 4
  fi
done
if [ -z "$port" ]; then
  echo "redis_bench: no free port in $PORT_BASE..$((PORT_BASE + 99))" >&2
  exit 4
fi

builtin_alloc="$(timeout 5 redis-cli -h 127.0.0.1 -p "$port" info memory 2>/dev/null |
  tr -d '\r' | sed -n 's/^mem_allocator://p')"
[ -n "$builtin_alloc" ] || builtin_alloc=unknown
if [ -z "$effective" ]; then
  if [ -n "$lib" ]; then effective="$label"; else effective="$builtin_alloc"; fi
fi
mapped=0
if [ -n "$lib" ] && grep -qF "$lib" "/proc/$pid/maps" 2>/dev/null; then
  mapped=1
fi

csv="$(env -u LD_PRELOAD timeout "$TMO" redis-benchmark -h 127.0.0.1 -p "$port" \
  --csv -c "$CLIENTS" -P "$PIPE" -n "$N" -r "$KEYSPACE" -d "$VSIZE" \
  -t set,get,lpush,lpop 2>"$workdir/bench.err")"
brc=$?

if ! kill -0 "$pid" 2>/dev/null; then
  wait "$pid" 2>/dev/null
  st=$?
  pid=""
  echo "redis_bench: redis-server died during the benchmark (status $st," \
       "preload: ${lib:-none})" >&2
  tail -n 20 "$workdir/redis.log" >&2 2>/dev/null
  exit 5
fi
if [ $brc -ne 0 ]; then
  if [ $brc -eq 124 ]; then
    echo "redis_bench: redis-benchmark timed out after ${TMO}s" >&2
  else
    echo "redis_bench: redis-benchmark failed (status $brc)" >&2
    tail -n 5 "$workdir/bench.err" >&2
  fi
  exit 6
fi

peak_kb="$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status")"

rps() {  # rps TEST -> requests/s from the CSV
  printf '%s\n' "$csv" | tr -d '\r' | awk -F'","' -v t="\"$1" '$1 == t { gsub(/"/, "", $2); print $2 }'
}
set_rps="$(rps SET)"
get_rps="$(rps GET)"
lpush_rps="$(rps LPUSH)"
lpop_rps="$(rps LPOP)"
for v in "$set_rps" "$get_rps" "$lpush_rps" "$lpop_rps"; do
  if [ -z "$v" ]; then
    echo "redis_bench: could not parse redis-benchmark output:" >&2
    printf '%s\n' "$csv" >&2
    exit 7
  fi
done
mean="$(awk -v a="$set_rps" -v b="$get_rps" -v c="$lpush_rps" -v d="$lpop_rps" \
  'BEGIN { printf "%.1f", (a + b + c + d) / 4 }')"

echo "bench=redis set_rps=$set_rps get_rps=$get_rps lpush_rps=$lpush_rps" \
     "lpop_rps=$lpop_rps ops/s=$mean peak_rss_kb=${peak_kb:-0}" \
     "allocator_builtin=$builtin_alloc allocator_effective=$effective preload=$label" \
     "preload_mapped=$mapped n=$N port=$port"
exit 0
