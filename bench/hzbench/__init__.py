"""hakozuna benchmark harness: runs the benchmark suite under hakozuna and the
peer allocators and writes a reproducible comparison.

Usage (from the repo root; `make bench ARGS...` does the same):

  /usr/bin/python3 bench/harness.py [options] [NAME=/path/lib.so ...]

What it does
  1. When run as root, installs missing Debian packages (peer allocators,
     python3-matplotlib, redis) with bench/install-peers.sh (--no-install
     skips this).
  2. Checks that build/bench/<program> exists for every selected benchmark
     (run `make` first; the harness builds nothing) and that each allocator
     library exists and can be preloaded; missing peers are reported and
     skipped.
  3. Runs the matrix of cases (benchmark x parameters: the CASE TABLE in
     bench/hzbench/cases.py, or --list). Allocators are interleaved: for
     each case, for run in 1..N, for each allocator (A B C A B C ...).
     Each run is a subprocess with the allocator switched by LD_PRELOAD
     (glibc = no preload) and a timeout; its stdout line starting "bench="
     is parsed (key=value pairs,
     ops/s= higher is better or secs= lower is better, peak_rss_kb=, extra
     keys), and the run's minor page faults (getrusage of the children:
     the benchmark and the processes it waited for) are added to them as
     minor_faults. A non-zero exit or a signal is recorded as CRASH, a
     timeout as TIMEOUT, output without a parsable result line as ERROR;
     those appear in every table, never silently dropped.
  4. Writes results/<YYYY-MM-DD>-<short commit>/ (relative to the repo root;
     -2, -3 ... appended if it exists; --out overrides):
       raw.csv      one row per run (case, benchmark, params, allocator, run,
                    status, metric, value, peak_rss_kb, every extra key
                    with minor_faults, wall time, command)
       summary.csv  per case x allocator: n, median, min, max, mean, CV%,
                    95% CI of the mean (Student t) and of the median (order
                    statistics, n >= 6), peak RSS median, ratio hakozuna vs
                    this allocator (>1 = hakozuna better, for ops/s and secs),
                    the median of every extra key (median_minor_faults)
       summary.md   header (date, commit, command, parameters, machine, peer
                    versions), per-family tables with the best allocator and
                    "hakozuna loses to X by Y%" notes, a detailed table
                    (with peak RSS and minor faults),
                    failures, charts
       meta.json    the header as JSON
       *.png        one chart per benchmark family plus ratios.png
                    (skipped, and said so, when matplotlib is unavailable)
       logs/        stderr of every failed run
     Files are rewritten after every case, so an interrupted run still
     leaves everything measured so far.

Sets (see --list for the exact commands and the time estimate)
  default   about 12 minutes here (2 cores): mt_remote lanes guard 16-2048,
            main 16-32768, cross128 16-131072 B x R = 0/50/90 % remote frees
            x T = 4, 16 threads (WS 400, ring 65536), threads left to the
            scheduler (BENCH_NO_PIN=1), as programs run; random_mixed app,
            tiny_hot, larson, kv, malloc_large, rss_plateau, redis-server,
            prodcons (1 producer, 3 consumers that only free; 16 B-1 KiB and
            16 B-32 KiB), batch_queue (batches of 4096 blocks of 64 B or
            8-2048 B through a mutex-and-condvar queue of 100 batches, 2
            producers and 2 consumers, 1 and 3), exchange (4 threads
            trade 8 B-16 KiB blocks through shared slots), thread_loop (4
            threads, private arrays, sizes ~ 1/size^2), size_loop (random
            sizes 16 B-8 KiB, each freed 8 allocations later), grow_late
            (1M blocks of 16-512 B built up, filled, freed at the end),
            hot_pair (see below), apps sqlite and sort (real programs,
            bench/apps.py); 5 runs per case and allocator.
  --full    mt_remote at T = 1, 2, 4, 8, 16, unpinned and again with the
            threads pinned round-robin to the CPUs (ids ending in /pinned),
            and every other
            benchmark and variant (random_mixed uniform, mid_large_mt,
            vm_mixed, malloc_large sparse (5-25 MiB blocks written every
            64 KiB), kv with 1M keys, string_builder, json, mir, thread_churn,
            long_run, rss_plateau 1 GiB with and without malloc_trim,
            prodcons with 4 producers and 12 consumers); 10 runs.
  Each mt_remote run does a fixed total of operations per lane and R (ITERS
  per thread = total / T), about 0.5 s on average here. The estimate printed
  before starting is the sum of per-run estimates from the case table; the
  ETA during the run is corrected by the measured pace.
  A warning is printed when the load average exceeds half the CPUs: other
  work on the machine makes absolute numbers noisy; ratios from the same
  interleaved runs suffer least.

Allocators
  hakozuna  build/libhakozuna.so (LD_PRELOAD)
  glibc     no preload
  mimalloc  /usr/lib/x86_64-linux-gnu/libmimalloc.so.2        (libmimalloc2.0)
  jemalloc  /usr/lib/x86_64-linux-gnu/libjemalloc.so.2        (libjemalloc2)
  tcmalloc  /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 (libtcmalloc-minimal4)
  NAME=/path/lib.so adds a peer (or replaces a built-in one's library);
  NAME=/path/lib.so,VAR=VALUE,... runs it with those environment settings
  (hakozuna-prof=build/libhakozuna.so,HZ_PROF=1: the heap profiler on).
  --peers-dir DIR adds every lib*.so in DIR, named after the file
  (libmimalloc-v3.so -> mimalloc-v3); a missing DIR is noted and skipped.
  meta.json records each allocator's library file and size.

hot_pair (needs valgrind; skipped, and said so, without it)
  Runs through bench/hot_pair_count.sh LIB PATTERN MIN MAX: callgrind counts
  the instructions of build/bench/hot_pair under the allocator and of the
  same loop without one, and reports instr= per malloc+free pair (lower is
  better), for 8-64 B LIFO pairs and 16-1024 B pairs in random order. A
  count is the same in every run, so it runs once per allocator.

redis-server
  Runs through bench/redis_bench.sh LIB (the library is given as an argument,
  only the server is preloaded). Debian's redis-server links libjemalloc; the
  script preloads a small glibc shim for the glibc row so that row really is
  glibc (allocator_effective= in raw.csv says what ran).
"""
# The docstring above is the harness's --help text (cli.py prints it).
