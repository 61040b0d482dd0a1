#!/usr/bin/env bash
# The benchmark harness: mt_remote runs with threads left to the scheduler
# by default (BENCH_NO_PIN=1) and pinned only in --full's /pinned cases;
# --peers-dir adds every lib*.so of a folder as a peer named after the
# file, and meta.json records each allocator's file and size; every run's
# minor page faults are in raw.csv (a benchmark that touches memory takes
# some) and in summary.md's detailed table; a missing --peers-dir is noted
# and skipped.
# Usage: harness_test.sh SOURCE_DIR BUILD_DIR
SRC=$(realpath "$1")
BUILD=$(realpath "$2")
source "$(dirname "$0")/script_util.sh"
HARNESS=(/usr/bin/python3 "$SRC/bench/harness.py" --no-install --no-charts
         --bench-dir "$BUILD/bench")

mkdir -p "$WORK/peers"
cp "$BUILD/libhakozuna.so" "$WORK/peers/libpeer-a.so"
echo "not a peer" >"$WORK/peers/README.md"

# One tiny run of one default case with the folder's peer.
"${HARNESS[@]}" --runs 1 --scale 0.01 --only mt_remote \
  --filter 'guard/R90/T4$' --peers-dir "$WORK/peers" \
  --allocators hakozuna,peer-a --out "$WORK/out" >"$WORK/log" 2>&1 ||
  fail "the harness exited with $?: $(tail -5 "$WORK/log")"
raw="$WORK/out/raw.csv"
[ "$(grep -c ',ok,' "$raw" 2>/dev/null)" = 2 ] ||
  fail "expected 2 ok runs (hakozuna, peer-a) in raw.csv: $(cat "$raw" 2>/dev/null)"
grep -q 'peer-a' "$raw" 2>/dev/null || fail "no peer-a row in raw.csv"
/usr/bin/python3 - "$raw" <<'PY' ||
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
faults = [r.get("minor_faults") or "" for r in rows]
ok = rows and all(f.isdigit() and int(f) > 0 for f in faults)
sys.exit(0 if ok else "minor_faults in raw.csv: %s" % faults)
PY
  fail "raw.csv lacks the runs' minor faults"
grep -q 'minor faults (median)' "$WORK/out/summary.md" ||
  fail "summary.md's detailed table has no minor-fault column"
[ "$(grep -c 'BENCH_NO_PIN=1 LD_PRELOAD=' "$raw" 2>/dev/null)" = 2 ] ||
  fail "the default mt_remote runs are not unpinned: $(cut -c1-300 "$raw")"
/usr/bin/python3 - "$WORK/out/meta.json" "$WORK/peers/libpeer-a.so" <<'PY' ||
import json, os, sys
files = json.load(open(sys.argv[1]))["allocator_files"]
peer = files.get("peer-a")
ok = peer and peer["size"] == os.stat(sys.argv[2]).st_size and "hakozuna" in files
sys.exit(0 if ok else "allocator_files: %s" % files)
PY
  fail "meta.json lacks the peers' files and sizes"

# --full lists each mt_remote cell twice: unpinned, and pinned.
"${HARNESS[@]}" --list --full >"$WORK/list" 2>&1
unpinned=$(grep -c '^mt_remote/[^ ]*/T[0-9]* .*BENCH_NO_PIN=1 ' "$WORK/list")
pinned=$(grep '^mt_remote/.*/pinned ' "$WORK/list" | grep -vc BENCH_NO_PIN)
[ "$unpinned" = 45 ] && [ "$pinned" = 45 ] ||
  fail "--full: $unpinned unpinned and $pinned pinned mt_remote cells, want 45 each"
"${HARNESS[@]}" --list >"$WORK/list1" 2>&1
[ "$(grep -c '^mt_remote/.* BENCH_NO_PIN=1 ' "$WORK/list1")" = 18 ] ||
  fail "the default set does not have its 18 unpinned mt_remote cells"
grep -q '/pinned' "$WORK/list1" && fail "the default set has pinned cases"

# A missing folder is noted, and the run goes on with the built-in peers.
"${HARNESS[@]}" --list --peers-dir "$WORK/none" >"$WORK/list2" 2>&1 ||
  fail "--peers-dir of a missing folder stopped the harness"
grep -q "does not exist" "$WORK/list2" || fail "no note about the missing folder"

finish harness
