#!/bin/bash
# guard lane, T4/T16 R0/R50/R90, >=1 s runs
cd "$(dirname "$0")/../.."  # the repository
RUNS=${RUNS:-5}
P=${PEERS:-../shared/peers}
L=/usr/lib/x86_64-linux-gnu
HZ=${HZ:-build/libhakozuna.so}
for T in 4 16; do
  if [ $T = 4 ]; then IT=12000000; else IT=3000000; fi
  for R in 0 50 90; do
    echo "== T$T R$R"
    bench/ab.sh $RUNS "mt_remote $T $IT 400 16 2048 $R 65536" hz=$HZ $EXTRA \
      tcg=$P/libtcmalloc-google.so,GLIBC_TUNABLES=glibc.pthread.rseq=0 \
      mi3=$P/libmimalloc-v3.so sn=$P/libsnmalloc.so tc=$L/libtcmalloc_minimal.so.4 je=$L/libjemalloc.so.2
  done
done
