#!/bin/bash
# Profile each issue-30 pattern under two libraries: perf top symbols (self
# time, cpu-clock) and the exit statistics report where the build has one.
B=${BENCH:-build/bench}
out=${OUT:-profiles}
declare -A cmd=(
 [bq-2x2-64B]="$B/batch_queue 2 2 8000 64 64 4096 100"
 [bq-1x3-64B]="$B/batch_queue 1 3 8000 64 64 4096 100"
 [bq-2x2-8-2048]="$B/batch_queue 2 2 4000 8 2048 4096 100"
 [bq-1x3-8-2048]="$B/batch_queue 1 3 4000 8 2048 4096 100"
 [larson]="$B/larson 4 2400 1000 16 1024"
 [exchange]="$B/exchange 4 2000000 4096 1024 8 16384 50"
 [thread_loop]="$B/thread_loop 4 3000000 2000 4 32768"
)
for name in "${!cmd[@]}"; do
  for lib in before30 now; do
    so=${LIBDIR:?the folder of before30.so and now.so}/$lib.so
    f=$out/$name.$lib
    LD_PRELOAD=$so perf record -q -e cpu-clock -o $f.data ${cmd[$name]} > $f.result 2>/dev/null
    perf report -i $f.data --sort comm,dso,sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -14 > $f.perf
    HZ_SHOW_STATS=1 LD_PRELOAD=$so ${cmd[$name]} > /dev/null 2> $f.stats
    rm -f $f.data $f.result
  done
done
