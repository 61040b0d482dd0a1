#!/usr/bin/env bash
# memcheck sees through the debug library: a write after free and leaks
# (a small block and a large one) in a program running on
# libhakozuna-debug.so are reported as they are on glibc, with the stacks
# of the malloc and the free; a correct program, threads and all, gets no
# error and no leak.
#
#   tests/memcheck_test.sh LIB_DIR TARGET
#
# --soname-synonyms=somalloc=NONE keeps valgrind from putting its own
# malloc in place of the preloaded one.
set -uo pipefail
lib=${1:?LIB_DIR}/libhakozuna-debug.so
target=${2:?TARGET}
command -v valgrind >/dev/null || { echo "memcheck_test: valgrind not installed" >&2; exit 1; }
fail=0
check() { # DESCRIPTION PATTERN FILE
  if grep -qE "$2" "$3"; then echo "ok   $1"; else echo "FAIL $1 (no line matching: $2)"; fail=1; fi
}
run() { # MODE OUT
  LD_PRELOAD=$lib valgrind --soname-synonyms=somalloc=NONE --leak-check=full \
    --errors-for-leak-kinds=definite "$target" "$1" >"$2.stdout" 2>"$2"
}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT

run clean "$out/clean"
check "clean: the program ran" '^done$' "$out/clean.stdout"
check "clean: no error" 'ERROR SUMMARY: 0 errors' "$out/clean"
check "clean: nothing lost" 'definitely lost: 0 bytes|All heap blocks were freed' "$out/clean"
check "clean: memcheck saw the library's blocks" 'total heap usage: [0-9,]{3,} allocs' "$out/clean"

run bugs "$out/bugs"
check "bugs: the write after free" 'Invalid write of size 1' "$out/bugs"
check "bugs: ... inside the freed 64-byte block" 'is 3 bytes inside a block of size 64 free.d' "$out/bugs"
check "bugs: ... freed through hz_free" 'by 0x[0-9A-F]+: hz_free' "$out/bugs"
check "bugs: the small leak" '200 bytes in 1 blocks are definitely lost' "$out/bugs"
check "bugs: the large leak" '3,000,000 bytes in 1 blocks are definitely lost' "$out/bugs"
check "bugs: nothing else lost" 'definitely lost: 3,000,200 bytes in 2 blocks' "$out/bugs"
check "bugs: ... allocated in main" 'by 0x[0-9A-F]+: main \(memcheck_target.c' "$out/bugs"
if [ $fail -ne 0 ]; then
  echo "--- memcheck on the clean run:"; cat "$out/clean"
  echo "--- memcheck on the buggy run:"; cat "$out/bugs"
fi
exit $fail
