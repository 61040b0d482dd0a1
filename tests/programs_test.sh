#!/usr/bin/env bash
# Real programs under LD_PRELOAD must print byte-identical output to runs
# without it, and must really be using hakozuna (HZ_VERBOSE=1 makes the
# library announce itself on stderr at start-up; HZ_SHOW_STATS=1 adds the
# exit report where the program leaves stderr open).
# Usage: programs_test.sh path/to/libhakozuna.so
source "$(dirname "$0")/script_util.sh"
LIB=$(realpath "$1")

# run_case NAME CMD...: run CMD plain and preloaded, compare stdout.
run_case() {
  local name=$1
  shift
  "$@" >"$WORK/$name.plain" 2>"$WORK/$name.plain.err"
  local plain_rc=$?
  HZ_VERBOSE=1 HZ_SHOW_STATS=1 LD_PRELOAD="$LIB" "$@" \
    >"$WORK/$name.hz" 2>"$WORK/$name.hz.err"
  local hz_rc=$?
  if [ "$plain_rc" != "$hz_rc" ]; then
    fail "$name: exit code $hz_rc under hakozuna, $plain_rc without"
    head -5 "$WORK/$name.hz.err"
  elif ! cmp -s "$WORK/$name.plain" "$WORK/$name.hz"; then
    fail "$name: output differs under hakozuna"
    diff "$WORK/$name.plain" "$WORK/$name.hz" | head -10
  elif ! grep -q "^hakozuna: option" "$WORK/$name.hz.err"; then
    fail "$name: hakozuna was not loaded (no start-up line on stderr)"
  elif grep -q "hakozuna: error" "$WORK/$name.hz.err"; then
    fail "$name: hakozuna reported an error"
    grep "hakozuna: error" "$WORK/$name.hz.err" | head -5
  else
    pass "$name ($(wc -c <"$WORK/$name.hz") bytes of identical output)"
  fi
}

# expect_stats NAME: the exit report must be there too.
expect_stats() {
  if ! grep -q "hakozuna: stats report" "$WORK/$1.hz.err"; then
    fail "$1: no statistics report at exit"
  fi
}

PYTHON=/usr/bin/python3
cat >"$WORK/work.py" <<'PY'
import threading, json, hashlib
table = {f"key{i}": [i, str(i) * (i % 7), {"n": i}] for i in range(150000)}
words = sorted(("w%05d" % ((i * 7919) % 50000)) * (1 + i % 3) for i in range(60000))
results = [None] * 4
def worker(k):
    acc = []
    for i in range(40000):
        s = "".join(chr(97 + (i * k + j) % 26) for j in range(i % 40))
        acc.append(s.upper())
        if len(acc) > 500:
            acc = acc[250:]
    results[k] = hashlib.sha256("|".join(acc).encode()).hexdigest()
threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(len(table), sum(v[0] for v in table.values()))
print(hashlib.sha256("".join(words).encode()).hexdigest())
print(json.dumps(results))
print(json.dumps({k: table[k] for k in list(table)[:50]})[:2000])
PY
run_case python "$PYTHON" "$WORK/work.py"
expect_stats python

cat >"$WORK/work.pl" <<'PL'
use strict; use warnings;
my %h; my @a;
for my $i (1 .. 200000) { $h{"k$i"} = "v" x ($i % 50); push @a, $i * 7 % 1000; }
my @s = sort { $a <=> $b } @a;
my $txt = join(",", map { sprintf("%05d", $_) } @s[0 .. 999]);
(my $t2 = $txt) =~ s/(\d+)/<$1>/g;
my $total = 0; $total += length($h{$_}) for keys %h;
print scalar(keys %h), " $total ", length($t2), "\n", substr($t2, 0, 300), "\n";
PL
run_case perl perl "$WORK/work.pl"
expect_stats perl

awk 'BEGIN { srand(7); for (i = 0; i < 200000; i++) printf "%08d %s line-%d\n", int(rand() * 1e8), substr("abcdefghijklmnopqrstuvwxyz", 1 + i % 26), i }' >"$WORK/data.txt"
run_case sort sort -S 1M "$WORK/data.txt"
run_case sort-parallel sort --parallel=2 -k2,2 -k1,1n "$WORK/data.txt"

cat >"$WORK/prog.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct node { int key; struct node *left, *right; };
static struct node *insert(struct node *t, int key) {
  if (!t) { t = calloc(1, sizeof *t); t->key = key; return t; }
  if (key < t->key) t->left = insert(t->left, key); else t->right = insert(t->right, key);
  return t;
}
static long sum(const struct node *t) { return t ? t->key + sum(t->left) + sum(t->right) : 0; }
int main(void) {
  struct node *root = NULL;
  for (int i = 0; i < 1000; i++) root = insert(root, (i * 7919) % 1009);
  char buf[64]; snprintf(buf, sizeof buf, "%ld", sum(root));
  puts(buf);
  return (int)strlen(buf) - 6;
}
C
run_case gcc gcc -O2 -S -o - "$WORK/prog.c"
run_case gcc-link sh -c "gcc -O2 -o '$WORK/prog' '$WORK/prog.c' && '$WORK/prog'"

# CPython's own test suite (Debian's libpython3-testsuite): threads, fork
# from threads, and plenty of allocation. Each module must pass under
# hakozuna within the timeout; test_threading once hung for good
# (test_3_join_in_forked_from_thread: a fork child's last thread returned
# while the purge thread kept the process alive).
run_stdlib_tests() {
  local modules=(test_threading test_thread test_fork1 test_json test_dict
                 test_set test_re)
  local log="$WORK/stdlib.log"
  # The tests read their subprocesses' stderr: no HZ_VERBOSE here; the
  # maps of a process started the same way show the library instead.
  LD_PRELOAD="$LIB" timeout 300 "$PYTHON" -m test "${modules[@]}" >"$log" 2>&1
  local rc=$?
  if [ "$rc" = 124 ]; then
    fail "stdlib-tests: still running after 300 s (hung)"
    grep -E "^[0-9:]+ .*\[" "$log" | tail -3
  elif [ "$rc" != 0 ] || ! grep -q "^Tests result: SUCCESS" "$log"; then
    fail "stdlib-tests: exit code $rc"
    tail -20 "$log"
  elif ! LD_PRELOAD="$LIB" "$PYTHON" -c "print(open('/proc/self/maps').read())" |
    grep -q "$(basename "$LIB")"; then
    fail "stdlib-tests: hakozuna was not loaded"
  else
    pass "stdlib-tests (${modules[*]})"
  fi
}
run_stdlib_tests

finish programs "$passes passed"
