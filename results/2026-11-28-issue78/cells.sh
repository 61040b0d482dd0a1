#!/bin/bash
# nl.sh OUT RUNS spec... : issue 78's nothing-lost cells (bench/ab.sh)
out=$1; runs=$2; shift 2
cd /work/main
while read -r cell; do
  [ -z "$cell" ] && continue
  nobp=""; case "$cell" in *" nobp") cell=${cell% nobp}; nobp=1;; esac
  specs=(); for s in "$@"; do if [ -n "$nobp" ]; then specs+=("$s,BENCH_NO_BACKPRESSURE=1"); else specs+=("$s"); fi; done
  echo "== $cell ${nobp:+nobp}" >> "$out"
  bench/ab.sh $runs "$cell" "${specs[@]}" >> "$out" 2>&1
done <<'CELLS'
mt_remote 4 15000000 400 16 2048 0 65536
mt_remote 4 5000000 400 16 2048 50 65536
mt_remote 4 4000000 400 16 2048 90 65536
mt_remote 16 1000000 400 16 2048 50 65536
mt_remote 16 1000000 400 16 2048 90 65536
mt_remote 4 6000000 400 16 32768 0 65536
mt_remote 4 1250000 400 16 32768 50 65536
mt_remote 4 750000 400 16 32768 90 65536
mt_remote 16 312500 400 16 32768 50 65536
mt_remote 16 187500 400 16 32768 90 65536
mt_remote 4 2250000 400 16 131072 0 65536
mt_remote 4 450000 400 16 131072 50 65536
mt_remote 4 350000 400 16 131072 90 65536
mt_remote 16 112500 400 16 131072 50 65536
mt_remote 16 87500 400 16 131072 90 65536
mt_remote 4 1250000 400 16 32768 50 65536 nobp
mt_remote 4 750000 400 16 32768 90 65536 nobp
mt_remote 16 312500 400 16 32768 50 65536 nobp
mt_remote 16 187500 400 16 32768 90 65536 nobp
mt_remote 4 450000 400 16 131072 50 65536 nobp
mt_remote 4 350000 400 16 131072 90 65536 nobp
mt_remote 16 112500 400 16 131072 50 65536 nobp
mt_remote 16 87500 400 16 131072 90 65536 nobp
batch_queue 2 2 3000 64 64 4096 100
batch_queue 2 2 3000 8 2048 4096 100
batch_queue 1 3 3000 64 64 4096 100
thread_exit 2000 2000
thread_churn 20000 4
exchange
larson 4 1200 1000 16 1024
tiny_hot 150000000 16
random_mixed 30000000 1000 16 65536 1 app
size_loop 40000000 16 8192 8
thread_loop 4 3000000 2000 4 32768
CELLS
