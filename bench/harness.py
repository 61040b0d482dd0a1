#!/usr/bin/python3
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
  3. Runs the matrix of cases (benchmark x parameters, see CASE TABLE in this
     file or --list). Allocators are interleaved: for each case, for run in
     1..N, for each allocator (A B C A B C ...). Each run is a subprocess
     with the allocator switched by LD_PRELOAD (glibc = no preload) and a
     timeout; its stdout line starting "bench=" is parsed (key=value pairs,
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
  default   about 8 minutes here (2 cores): mt_remote lanes guard 16-2048,
            main 16-32768, cross128 16-131072 B x R = 0/50/90 % remote frees
            x T = 4, 16 threads (WS 400, ring 65536), threads left to the
            scheduler (BENCH_NO_PIN=1), as programs run; random_mixed app,
            tiny_hot, larson, kv, malloc_large, rss_plateau, redis-server,
            prodcons (1 producer, 3 consumers that only free; 16 B-1 KiB and
            16 B-32 KiB), batch_queue (batches of 4096 blocks of 64 B or
            8-2048 B through a mutex-and-condvar queue of 100 batches, 2
            producers and 2 consumers, 1 and 3), exchange (4 threads
            trade 8 B-16 KiB blocks through shared slots), thread_loop (4
            threads, private arrays, sizes ~ 1/size^2), size_loop (random sizes 16 B-8 KiB, each freed 8
            allocations later), grow_late (1M blocks of 16-512 B built up,
            filled, freed at the end), hot_pair (see below); 5 runs per
            case and allocator.
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

import argparse
import csv
import datetime
import json
import math
import os
import platform
import re
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_SRC = os.path.join(REPO, "bench")
LIBDIR = "/usr/lib/x86_64-linux-gnu"

# Built-in allocators, in the order they run within each round.
# (name, library or None for no preload, Debian package providing it)
ALLOCATORS = [
    ("hakozuna", os.path.join(REPO, "build", "libhakozuna.so"), None),
    ("glibc", None, "libc6"),
    ("mimalloc", LIBDIR + "/libmimalloc.so.2", "libmimalloc2.0"),
    ("jemalloc", LIBDIR + "/libjemalloc.so.2", "libjemalloc2"),
    ("tcmalloc", LIBDIR + "/libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
]
PEER_PACKAGES = ["libc6", "libmimalloc2.0", "libjemalloc2", "libtcmalloc-minimal4",
                 "redis-server", "redis-tools", "python3-matplotlib"]
# The programs of the apps family (bench/apps.py) and their packages.
APPS_PROGRAMS = {"sqlite": ("sqlite3", "sqlite3"), "python": ("python3", "python3"),
                 "ruby": ("ruby", "ruby"), "lua": ("lua5.4", "lua5.4"),
                 "z3": ("z3", "z3"), "ghostscript": ("gs", "ghostscript"),
                 "gcc": ("gcc", "gcc"), "sort": ("sort", "coreutils"),
                 "rocksdb": ("db_bench", "rocksdb-tools"), "git": ("git", "git")}
PEER_PACKAGES += sorted({p for _, p in APPS_PROGRAMS.values()} | {"time"})
HZ = "hakozuna"


class It:
    """An iteration-count argument: scaled by --scale (and the estimate with it)."""

    def __init__(self, n):
        self.n = n

    def render(self, scale):
        return str(max(1, int(round(self.n * scale))))


class Case:
    def __init__(self, bench, variant, args, est, sets, params=None,
                 program=None, lib_as_arg=False, env=None):
        self.bench = bench              # benchmark family (= program name)
        self.variant = variant          # short label of the parameters
        self.id = bench + ("/" + variant if variant else "")
        self.args = args                # positional arguments (str or It)
        self.est = est                  # estimated seconds per run at scale 1
        self.sets = sets                # {"default", "full"}
        self.params = params or {}      # parameters shown in tables/charts
        self.program = program or bench
        self.lib_as_arg = lib_as_arg    # allocator passed as argument (redis)
        self.env = env or {}            # extra environment of every run

    def argv(self, scale):
        return [a.render(scale) if isinstance(a, It) else str(a) for a in self.args]

    def est_secs(self, scale):
        scaled = any(isinstance(a, It) for a in self.args)
        return self.est * (scale if scaled else 1.0)

    def params_str(self, scale):
        p = dict(self.params)
        if not p:
            p["args"] = " ".join(self.argv(scale))
        return " ".join("%s=%s" % (k, v.render(scale) if isinstance(v, It) else v)
                        for k, v in p.items())


# ============================== CASE TABLE ==================================
# mt_remote: THREADS ITERS WS MIN MAX REMOTE_PCT RING (DESIGN 5).
# Lanes are size ranges in bytes; R is the % of frees handed to the next
# thread. ITERS is per thread and chosen as MT_OPS[lane][R] / THREADS, so the
# total work (and so one run's time, ~0.5-1 s on this 2-core machine) does not
# grow with the thread count.
MT_LANES = {"guard": (16, 2048), "main": (16, 32768), "cross128": (16, 131072)}
MT_R = [0, 50, 90]
MT_THREADS_DEFAULT = [4, 16]
MT_THREADS_FULL = [1, 2, 4, 8, 16]
MT_WS, MT_RING = 400, 65536
MT_OPS = {  # total malloc+free iterations per run (all threads)
    "guard":    {0: 60_000_000, 50: 20_000_000, 90: 16_000_000},
    "main":     {0: 24_000_000, 50: 5_000_000, 90: 3_000_000},
    "cross128": {0: 9_000_000, 50: 1_800_000, 90: 1_400_000},
}
MT_EST = 0.6  # seconds per run at MT_OPS (estimate used for the budget)
# Threads run where the scheduler puts them, as in real programs; --full
# repeats every cell with the benchmark pinning its threads round-robin to
# the CPUs (case ids ending in /pinned).
MT_UNPINNED_ENV = {"BENCH_NO_PIN": "1"}

# Every other benchmark: one row per case (arguments as in each program's
# --help). It(n) marks the iteration argument that --scale multiplies.
# Every row is in --full; rows marked default are also in the ~10-minute
# default set. Counts are sized for ~0.3-1.5 s per run on this machine.
OTHER = [
    # (benchmark, variant, positional args, est. s/run, in default set?)
    # random_mixed ITERS WS MIN MAX SEED DIST
    ("random_mixed", "app",      [It(30_000_000), 1000, 16, 65536, 1, "app"], 0.6, True),
    ("random_mixed", "uniform",  [It(4_000_000), 1000, 16, 65536, 1, "uniform"], 0.5, False),
    # tiny_hot ITERS [DEPTH]
    ("tiny_hot",     "",         [It(150_000_000), 16], 0.8, True),
    # mid_large_mt THREADS ITERS_PER_THREAD [WS]
    ("mid_large_mt", "",         [4, It(3_000_000), 256], 0.65, False),
    # vm_mixed ITERS [WS]
    ("vm_mixed",     "",         [It(20000), 32], 2.5, False),
    # larson THREADS ROUNDS BLOCKS_PER_THREAD MIN MAX
    ("larson",       "",         [4, It(1200), 1000, 16, 1024], 0.65, True),
    # kv OPS KEYS SEED (40% GET, 30% SET, 12% LPUSH, 12% LPOP, 6% DEL)
    ("kv",           "100k-keys", [It(3_000_000), 100_000, 1], 0.9, True),
    ("kv",           "1M-keys",  [It(2_000_000), 1_000_000, 1], 1.8, False),
    # string_builder ITERS SEED
    ("string_builder", "",       [It(3_000_000), 1], 0.7, False),
    # json DOCS SEED
    ("json",         "",         [It(3000), 1], 0.7, False),
    # mir ITERS (secs)
    ("mir",          "",         [It(20000)], 1.7, False),
    # malloc_large ITERS LIVE (secs)
    ("malloc_large", "",         [It(200), 20], 0.8, True),
    # the same blocks written sparsely: the first byte and every 64 KiB
    ("malloc_large", "sparse",   [It(2000), 20, 65536], 0.3, False),
    # rss_plateau THREADS TOTAL_MB IDLE_MS TRIM (secs + RSS per phase)
    ("rss_plateau",  "512MB",    [4, 512, 1000, 0], 1.3, True),
    ("rss_plateau",  "1GB",      [4, 1024, 2000, 0], 2.5, False),
    ("rss_plateau",  "1GB-trim", [4, 1024, 2000, 1], 2.5, False),
    # thread_churn THREADS_TOTAL CONCURRENT
    ("thread_churn", "",         [It(20000), 4], 0.9, False),
    # long_run PHASES [THREADS OPS WS IDLE_MS] (ten compressed minutes)
    ("long_run",     "",         [60], 1.6, False),
    # size_loop ITERS MIN MAX KEEP (log-uniform sizes, freed KEEP later)
    ("size_loop",    "",         [It(40_000_000), 16, 8192, 8], 0.4, True),
    # grow_late BLOCKS MIN MAX FREE_EVERY (secs; all freed at the end)
    ("grow_late",    "",         [It(1_000_000), 16, 512, 16], 0.5, True),
    # prodcons PRODUCERS CONSUMERS ITEMS MIN MAX (consumers only free)
    ("prodcons",     "1x3-1KiB",  [1, 3, It(4_000_000), 16, 1024], 0.3, True),
    ("prodcons",     "1x3-32KiB", [1, 3, It(2_000_000), 16, 32768], 0.5, True),
    ("prodcons",     "4x12-1KiB", [4, 12, It(4_000_000), 16, 1024], 0.4, False),
    ("prodcons",     "4x12-32KiB", [4, 12, It(2_000_000), 16, 32768], 0.6, False),
    # batch_queue PRODUCERS CONSUMERS BATCHES MIN MAX BATCH DEPTH: batches
    # of 4096 blocks through one mutex-and-condvar queue of 100 batches
    ("batch_queue",  "2x2-64B",   [2, 2, It(1000), 64, 64, 4096, 100], 0.3, True),
    ("batch_queue",  "1x3-64B",   [1, 3, It(1000), 64, 64, 4096, 100], 0.3, True),
    ("batch_queue",  "2x2-8-2048", [2, 2, It(500), 8, 2048, 4096, 100], 0.4, True),
    ("batch_queue",  "1x3-8-2048", [1, 3, It(500), 8, 2048, 4096, 100], 0.4, True),
    # exchange THREADS STEPS SHARED PRIVATE MIN MAX SHARE: threads trade
    # blocks (8 B-16 KiB, log-uniform) through a shared pool of slots
    ("exchange",     "4T",        [4, It(2_000_000), 4096, 1024, 8, 16384, 50], 0.3, True),
    # thread_loop THREADS ITERS SLOTS MIN MAX: free+malloc against a private
    # array per thread, sizes 4 B-32 KiB with P ~ 1/size^2
    ("thread_loop",  "4T",        [4, It(3_000_000), 2000, 4, 32768], 0.3, True),
]

# Real programs: the script gets the allocator library (or "") as argument.
REAL = [
    # (benchmark, variant, script under bench/, its arguments after the
    #  library, est. s/run, in default set?)
    ("redis", "", "redis_bench.sh", [], 2.3, True),
    # apps.sh LIB CASE: a program from Debian's archive on a generated input,
    # its output checked (bench/apps.py); two in the default set
    ("apps", "sqlite", "apps.sh", ["sqlite"], 3.0, True),
    ("apps", "python", "apps.sh", ["python"], 4.5, False),
    ("apps", "ruby", "apps.sh", ["ruby"], 3.2, False),
    ("apps", "lua", "apps.sh", ["lua"], 4.8, False),
    ("apps", "z3", "apps.sh", ["z3"], 10.0, False),
    ("apps", "ghostscript", "apps.sh", ["ghostscript"], 2.5, False),
    ("apps", "gcc", "apps.sh", ["gcc"], 11.5, False),
    ("apps", "sort", "apps.sh", ["sort"], 3.3, True),
    ("apps", "rocksdb", "apps.sh", ["rocksdb"], 5.7, False),
    ("apps", "git", "apps.sh", ["git"], 6.0, False),
    # hot_pair_count.sh LIB PATTERN MIN MAX: callgrind instructions per pair
    ("hot_pair", "lifo-8-64", "hot_pair_count.sh", ["lifo", 8, 64], 2.0, True),
    ("hot_pair", "random-16-1024", "hot_pair_count.sh", ["random", 16, 1024], 2.5, True),
]
# Benchmarks whose result is a count, the same in every run: one run each.
COUNTED = {"hot_pair"}

# Extra keys shown in the per-family Markdown tables and charts.
FAMILY_KEYS = {
    "mt_remote": ["remote_pct_eff", "fallback_pct", "inflight_peak"],
    "rss_plateau": None,   # every rss_*_kb key (see rss_keys())
    "redis": ["set_rps", "get_rps", "lpush_rps", "lpop_rps"],
    "thread_churn": ["rss_start_kb", "rss_end_kb"],
    "long_run": ["rss_q1_kb", "rss_q4_kb", "growth"],
    "prodcons": ["waits"],
    "batch_queue": ["waits", "jumps_pct"],
    "exchange": ["remote_pct"],
}
# ============================================================================


def mt_remote_case(lane, lo, hi, r, t, pinned):
    iters = max(1, MT_OPS[lane][r] // t)
    default = t in MT_THREADS_DEFAULT and not pinned
    return Case(
        "mt_remote", "%s/R%d/T%d%s" % (lane, r, t, "/pinned" if pinned else ""),
        [t, It(iters), MT_WS, lo, hi, r, MT_RING], MT_EST,
        {"full"} | ({"default"} if default else set()),
        params={"lane": lane, "R": r, "T": t, "size": "%d-%d" % (lo, hi),
                "iters": It(iters), "ws": MT_WS, "ring": MT_RING,
                "pinned": "yes" if pinned else "no"},
        env=None if pinned else MT_UNPINNED_ENV)


def build_cases():
    cases = []
    for pinned in (False, True):
        for lane, (lo, hi) in MT_LANES.items():
            for r in MT_R:
                for t in MT_THREADS_FULL:
                    cases.append(mt_remote_case(lane, lo, hi, r, t, pinned))
    for bench, variant, args, est, dflt in OTHER:
        cases.append(Case(bench, variant, args, est,
                          {"full"} | ({"default"} if dflt else set())))
    for bench, variant, script, script_args, est, dflt in REAL:
        cases.append(Case(bench, variant, script_args, est,
                          {"full"} | ({"default"} if dflt else set()),
                          program=script, lib_as_arg=True))
    return cases


# ------------------------------------------------------------------ helpers

def log(msg=""):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def fmt_dur(s):
    s = int(round(max(0, s)))
    if s >= 3600:
        return "%dh%02dm%02ds" % (s // 3600, s % 3600 // 60, s % 60)
    if s >= 60:
        return "%dm%02ds" % (s // 60, s % 60)
    return "%ds" % s


def fmt_num(v, metric=None):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if metric == "secs":
        return "%.3g s" % v
    if metric == "instr":
        return "%.1f" % v
    a = abs(v)
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return "%.3g%s" % (v / div, suf)
    return "%.3g" % v


def fmt_kb(v):
    if v is None:
        return "-"
    if v >= 1024 * 1024:
        return "%.2f GiB" % (v / 1048576.0)
    if v >= 1024:
        return "%.1f MiB" % (v / 1024.0)
    return "%d KiB" % v


def fmt_count(v):
    if not isinstance(v, (int, float)):
        return "-"
    if v >= 1e6:
        return "%.2fM" % (v / 1e6)
    if v >= 1e4:
        return "%.1fk" % (v / 1e3)
    return "%d" % v


def to_num(s):
    try:
        if re.fullmatch(r"[-+]?\d+", s):
            return int(s)
        v = float(s)
        return v if math.isfinite(v) else None
    except (TypeError, ValueError):
        return None


def sh(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, timeout=30).stdout.strip()
    except Exception:
        return ""


def by_family(summary):
    """The summary rows grouped by benchmark, in first-seen order."""
    families = {}
    for row in summary:
        families.setdefault(row[0].bench, []).append(row)
    return list(families.items())


def higher_is_better(metric):
    return metric not in ("secs", "instr")


# ------------------------------------------------------------------ stats

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365,
        8: 2.306, 9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145,
        15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086,
        21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056,
        27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000,
        120: 1.980}


def t975(df):
    if df in T975:
        return T975[df]
    for k in sorted(T975):
        if k >= df:
            return T975[k]
    return 1.960


def median_ci(xs):
    """Distribution-free 95% CI of the median from order statistics (n >= 6)."""
    n = len(xs)
    if n < 6:
        return None, None
    s = sorted(xs)
    # Largest k with P(Bin(n, .5) < k) <= 0.025: CI = [x_(k), x_(n-k+1)].
    cdf, k = 0.0, 0
    for i in range(n + 1):
        p = math.comb(n, i) / 2.0 ** n
        if cdf + p > 0.025:
            k = i
            break
        cdf += p
    k = max(k, 1)
    return s[k - 1], s[n - k]


def describe(xs):
    d = {"n": len(xs)}
    if not xs:
        return d
    d["median"] = statistics.median(xs)
    d["min"] = min(xs)
    d["max"] = max(xs)
    d["mean"] = statistics.fmean(xs)
    if len(xs) >= 2:
        sd = statistics.stdev(xs)
        d["cv_pct"] = 100.0 * sd / d["mean"] if d["mean"] else None
        h = t975(len(xs) - 1) * sd / math.sqrt(len(xs))
        d["ci95_mean_lo"], d["ci95_mean_hi"] = d["mean"] - h, d["mean"] + h
    lo, hi = median_ci(xs)
    if lo is not None:
        d["ci95_median_lo"], d["ci95_median_hi"] = lo, hi
    return d


# ------------------------------------------------------------------ running

def parse_result(stdout):
    line = None
    for ln in stdout.splitlines():
        if ln.startswith("bench="):
            line = ln
    if line is None:
        return None
    kv = {}
    for tok in line.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            kv[k] = v
    return kv


def run_once(cmd, env, timeout):
    """Run one benchmark process; return a dict describing the outcome."""
    t0 = time.monotonic()
    # Runs are one at a time: the children's fault count grows by this
    # run's (the benchmark and every process it waited for).
    faults0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=REPO,
                         start_new_session=True)
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        # The child leads its own process group (start_new_session): stop the
        # group politely (scripts clean up in their traps), then for good.
        for sig, grace in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                out, err = p.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            out, err = b"", b""
    except KeyboardInterrupt:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        raise
    wall = time.monotonic() - t0
    out = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
    err = err.decode("utf-8", "replace") if isinstance(err, bytes) else err
    rc = p.returncode
    res = {"wall_s": wall, "exit": rc, "stderr": err, "stdout": out, "kv": {}}
    if timed_out:
        res["status"], res["note"] = "TIMEOUT", "killed after %gs" % timeout
        return res
    if rc != 0:
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = "signal %d" % -rc
            res["note"] = name
        else:
            res["note"] = "exit %d" % rc
            if rc > 128 and rc - 128 < 65:  # a shell reporting a signal
                try:
                    res["note"] += " (%s)" % signal.Signals(rc - 128).name
                except ValueError:
                    pass
        res["status"] = "CRASH"
        return res
    kv = parse_result(out)
    if kv is None:
        res["status"], res["note"] = "ERROR", "no bench= line in output"
        return res
    kv["minor_faults"] = str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
                             - faults0)
    res["kv"] = kv
    if "ops/s" in kv and to_num(kv["ops/s"]) is not None:
        res["metric"], res["value"] = "ops/s", float(kv["ops/s"])
    elif "secs" in kv and to_num(kv["secs"]) is not None:
        res["metric"], res["value"] = "secs", float(kv["secs"])
    elif "instr" in kv and to_num(kv["instr"]) is not None:
        res["metric"], res["value"] = "instr", float(kv["instr"])
    else:
        res["status"], res["note"] = "ERROR", ("no numeric ops/s=, secs= or instr= "
                                               "in result line")
        return res
    res["status"], res["note"] = "ok", ""
    return res


# ------------------------------------------------------------------ setup

def install_peers(args):
    script = os.path.join(BENCH_SRC, "install-peers.sh")
    if args.no_install:
        return
    if os.geteuid() == 0:
        r = subprocess.run(["bash", script])
        if r.returncode != 0:
            log("harness: some packages could not be installed (see above); "
                "missing peers will be skipped")
    else:
        r = subprocess.run(["bash", script, "--check"], stdout=subprocess.PIPE, text=True)
        if r.returncode != 0:
            log("harness: not root, so not installing: %s" % r.stdout.strip())
            log("harness: run `sudo bench/install-peers.sh` to install them")


def peers_in(directory):
    """NAME=/path specs for every lib*.so in directory, named after the file
    (libmimalloc-v3.so -> mimalloc-v3); none, with a note, if it is missing."""
    if not directory:
        return []
    if not os.path.isdir(directory):
        log("harness: --peers-dir %s does not exist; running without it" % directory)
        return []
    specs = []
    for fn in sorted(os.listdir(directory)):
        if fn.startswith("lib") and fn.endswith(".so"):
            specs.append("%s=%s" % (fn[3:-3], os.path.join(directory, fn)))
    return specs


# Environment settings an allocator runs with: NAME=/path/lib.so,VAR=VALUE
# (e.g. hakozuna-prof=build/libhakozuna.so,HZ_PROF=1).
ALLOCATOR_ENV = {}


def allocator_table(args):
    """Built-in allocators plus NAME=/path ones (and those of --peers-dir),
    filtered by --allocators."""
    table = [(n, l) for n, l, _ in ALLOCATORS]
    for spec in peers_in(args.peers_dir) + args.extra:
        if "=" not in spec:
            sys.exit("harness: extra allocator must be NAME=/path/lib.so, got %r" % spec)
        name, path = spec.split("=", 1)
        path, *settings = path.split(",")
        ALLOCATOR_ENV[name] = dict(kv.split("=", 1) for kv in settings if "=" in kv)
        path = os.path.abspath(path) if path else None
        for i, (n, _) in enumerate(table):
            if n == name:
                table[i] = (name, path)
                break
        else:
            table.append((name, path))
    if args.allocators:
        want = [a.strip() for a in args.allocators.split(",") if a.strip()]
        known = {n for n, _ in table}
        unknown = [a for a in want if a not in known]
        if unknown:
            sys.exit("harness: unknown allocator(s): %s (known: %s; add others as "
                     "NAME=/path/lib.so)" % (", ".join(unknown), ", ".join(n for n, _ in table)))
        table = [t for t in table if t[0] in want]
        # Keep the order the user gave.
        table.sort(key=lambda t: want.index(t[0]))
    return table


def resolve_allocators(args):
    table = allocator_table(args)
    ok, skipped = [], []
    for name, lib in table:
        if lib is None:
            ok.append((name, None))
            continue
        if not os.path.exists(lib):
            if name == HZ:
                sys.exit("harness: %s not found: run `make` first to build "
                         "libhakozuna.so" % os.path.relpath(lib, REPO))
            skipped.append((name, "library not found: %s" % lib))
            continue
        r = subprocess.run(["/bin/true"], env=dict(os.environ, LD_PRELOAD=lib),
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0 or "cannot be preloaded" in r.stderr:
            skipped.append((name, "cannot be preloaded: %s" % r.stderr.strip()))
            continue
        ok.append((name, os.path.realpath(lib)))
    for name, why in skipped:
        log("harness: skipping allocator %s: %s" % (name, why))
    if not ok:
        sys.exit("harness: no allocator left to run")
    return ok, skipped


def select_cases(args):
    cases = build_cases()
    cases = [c for c in cases if ("full" if args.full else "default") in c.sets]
    if args.only:
        want = [b.strip() for b in args.only.split(",") if b.strip()]
        known = sorted({c.bench for c in build_cases()})
        bad = [b for b in want if b not in known]
        if bad:
            sys.exit("harness: unknown benchmark(s) in --only: %s (known: %s)"
                     % (", ".join(bad), ", ".join(known)))
        cases = [c for c in cases if c.bench in want]
    if args.filter:
        rx = re.compile(args.filter)
        cases = [c for c in cases if rx.search(c.id)]
    if not cases:
        sys.exit("harness: no case selected")
    return cases


RUN_OVERHEAD_S = 0.03  # process start-up and bookkeeping per run


def case_runs(case, runs):
    """Runs of a case: counted results are the same every time, so one."""
    return 1 if case.bench in COUNTED else runs


def estimate(cases, runs, n_alloc, scale):
    """Estimated seconds in total and per benchmark family."""
    fam = {}
    for c in cases:
        t = (c.est_secs(scale) + RUN_OVERHEAD_S) * case_runs(c, runs) * n_alloc
        n, s = fam.get(c.bench, (0, 0.0))
        fam[c.bench] = (n + 1, s + t)
    return sum(s for _, s in fam.values()), fam


def log_estimate(cases, runs, names, scale):
    total, fam = estimate(cases, runs, len(names), scale)
    log("harness: %d cases x %d runs x %d allocators (%s) = %d runs; estimated %s:"
        % (len(cases), runs, len(names), ",".join(names), sum(case_runs(c, runs) for c in cases) * len(names),
           fmt_dur(total)))
    log("         " + ", ".join("%s %s (%d case%s)" % (b, fmt_dur(t), n, "s" if n > 1 else "")
                               for b, (n, t) in fam.items()))
    return total


def program_path(case, args):
    if case.lib_as_arg:
        return os.path.join(BENCH_SRC, case.program)
    return os.path.join(args.bench_dir, case.program)


def check_programs(cases, args):
    missing, skipped_real = [], []
    for c in cases:
        p = program_path(c, args)
        if c.lib_as_arg:
            if c.bench == "redis":
                need = ["redis-server", "redis-cli", "redis-benchmark"]
                absent = [n for n in need if not shutil_which(n)]
                if absent:
                    skipped_real.append((c, "not installed: %s (apt-get install "
                                         "redis-server redis-tools)" % ", ".join(absent)))
            elif c.bench == "apps":
                prog, package = APPS_PROGRAMS[c.variant]
                for name, pkg in ((prog, package), ("time", "time")):
                    if not shutil_which(name):
                        skipped_real.append((c, "not installed: %s (apt-get install %s)"
                                             % (name, pkg)))
                        break
            elif c.bench == "hot_pair" and not shutil_which("valgrind"):
                skipped_real.append((c, "valgrind not installed (apt-get install "
                                     "valgrind)"))
            continue
        if not (os.path.isfile(p) and os.access(p, os.X_OK)):
            missing.append(nice_path(p))
    if missing:
        sys.exit("harness: benchmark program(s) missing: %s\n"
                 "harness: run `make` in %s first (the harness builds nothing)"
                 % (", ".join(sorted(set(missing))), REPO))
    for c, why in skipped_real:
        log("harness: skipping %s: %s" % (c.id, why))
    bad = {id(c) for c, _ in skipped_real}
    return [c for c in cases if id(c) not in bad], skipped_real


def shutil_which(name):
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def nice_path(p):
    rel = os.path.relpath(p, os.getcwd())
    return p if rel.startswith("..") else rel


def machine_busy_s():
    """CPU seconds spent busy by the whole machine so far (from /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def own_cpu_s():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def foreign_cpu_pct(busy0, own0, wall):
    """Share of the machine's CPU used by other processes since (busy0, own0)."""
    busy = machine_busy_s()
    if busy is None or busy0 is None or wall <= 0:
        return None
    other = (busy - busy0) - (own_cpu_s() - own0)
    return max(0.0, 100.0 * other / (wall * (os.cpu_count() or 1)))


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None


def git(*a):
    return sh(["git", "-C", REPO] + list(a))


def machine_info():
    info = {"nproc": os.cpu_count(), "kernel": platform.release(),
            "machine": platform.machine()}
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    info["cpu"] = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for ln in f:
                if ln.startswith("MemTotal:"):
                    info["mem_total_kb"] = int(ln.split()[1])
    except OSError:
        pass
    info["os"] = ""
    try:
        with open("/etc/os-release") as f:
            for ln in f:
                if ln.startswith("PRETTY_NAME="):
                    info["os"] = ln.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return info


def peer_versions():
    v = {}
    out = sh(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${Status}\n"] + PEER_PACKAGES)
    for ln in out.splitlines():
        parts = ln.split("\t")
        if len(parts) >= 3 and parts[2].endswith(" installed"):
            v[parts[0].split(":")[0]] = parts[1]
    try:
        v["glibc"] = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        pass
    rv = sh(["redis-server", "--version"])
    if rv:
        v["redis-server --version"] = rv
    return v


def make_outdir(args, commit):
    if args.out:
        d = os.path.abspath(args.out)
    else:
        base = os.path.join(REPO, "results", "%s-%s" % (
            datetime.date.today().isoformat(), commit or "nogit"))
        d, i = base, 2
        while os.path.exists(d) and os.listdir(d):
            d = "%s-%d" % (base, i)
            i += 1
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    return d


# ------------------------------------------------------------------ output

RAW_FIELDS = ["case", "benchmark", "params", "allocator", "run", "status", "note",
              "exit", "metric", "value", "peak_rss_kb", "wall_s"]


def write_raw(path, rows):
    extra = []
    for r in rows:
        for k in r["kv"]:
            if k not in ("bench", "ops/s", "secs", "instr", "peak_rss_kb") and k not in extra:
                extra.append(k)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(RAW_FIELDS + extra + ["command"])
        for r in rows:
            w.writerow([r["case"], r["benchmark"], r["params"], r["allocator"], r["run"],
                        r["status"], r["note"], r["exit"], r.get("metric", ""),
                        "" if r.get("value") is None else repr(r["value"]),
                        r["kv"].get("peak_rss_kb", ""), "%.3f" % r["wall_s"]]
                       + [r["kv"].get(k, "") for k in extra] + [r["command"]])
    os.replace(tmp, path)


def summarize(cases, allocs, rows):
    """Per case x allocator statistics, plus the ratios against hakozuna."""
    names = [a for a, _ in allocs]
    by = {}
    for r in rows:
        by.setdefault((r["case"], r["allocator"]), []).append(r)
    summary = []
    for c in cases:
        case_rows = {}
        for a in names:
            rs = by.get((c.id, a), [])
            if not rs:
                continue
            ok = [r for r in rs if r["status"] == "ok"]
            metric = ok[0]["metric"] if ok else None
            d = describe([r["value"] for r in ok])
            rss = [to_num(r["kv"].get("peak_rss_kb")) for r in ok]
            rss = [x for x in rss if x is not None]
            d["peak_rss_kb_median"] = statistics.median(rss) if rss else None
            extras = {}
            for r in ok:
                for k, v in r["kv"].items():
                    if k in ("bench", "ops/s", "secs", "instr", "peak_rss_kb"):
                        continue
                    x = to_num(v)
                    if x is not None and k.endswith("_kb") and x < 0:
                        continue  # a negative size means "not measured" (e.g. no trim)
                    if x is not None:
                        extras.setdefault(k, []).append(x)
                    else:
                        extras.setdefault(k, [])
                        extras.setdefault("_str_" + k, set()).add(v)
            ex, exr = {}, {}
            for k, xs in extras.items():
                if k.startswith("_str_"):
                    ex[k[5:]] = ",".join(sorted(xs))
                elif xs:
                    ex[k] = statistics.median(xs)
                    exr[k] = (min(xs), max(xs))
            fails = {}
            for r in rs:
                if r["status"] != "ok":
                    fails[r["status"]] = fails.get(r["status"], 0) + 1
            d.update({"case": c.id, "benchmark": c.bench, "allocator": a,
                      "metric": metric, "runs": len(rs), "fails": fails,
                      "fail_notes": sorted({r["note"] for r in rs if r["status"] != "ok"}),
                      "extras": ex, "extras_range": exr})
            case_rows[a] = d
        # Ratios and the best allocator (by median).
        metric = next((d["metric"] for d in case_rows.values() if d["metric"]), None)
        hz = case_rows.get(HZ)
        for a, d in case_rows.items():
            d["ratio"] = None
            if hz and hz.get("median") and d.get("median"):
                if higher_is_better(metric):
                    d["ratio"] = hz["median"] / d["median"]
                else:
                    d["ratio"] = d["median"] / hz["median"]
        cand = [(a, d["median"]) for a, d in case_rows.items() if d.get("median")]
        best = None
        if cand:
            best = (max if higher_is_better(metric) else min)(cand, key=lambda t: t[1])[0]
        for d in case_rows.values():
            d["best"] = best
        summary.append((c, metric, case_rows))
    return summary


SUM_FIELDS = ["case", "benchmark", "params", "allocator", "metric", "runs", "n_ok",
              "failures", "median", "min", "max", "mean", "cv_pct", "ci95_mean_lo",
              "ci95_mean_hi", "ci95_median_lo", "ci95_median_hi", "peak_rss_kb_median",
              "best", "hakozuna_vs_this"]


def write_summary_csv(path, summary, scale):
    extra = []
    for _, _, cr in summary:
        for d in cr.values():
            for k in d["extras"]:
                if k not in extra:
                    extra.append(k)
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(SUM_FIELDS + ["median_" + k for k in extra])
        for c, metric, cr in summary:
            for a, d in cr.items():
                row = [c.id, c.bench, c.params_str(scale), a, d["metric"] or "",
                       d["runs"], d["n"],
                       " ".join("%s:%d" % kv for kv in sorted(d["fails"].items()))]
                for k in ["median", "min", "max", "mean", "cv_pct", "ci95_mean_lo",
                          "ci95_mean_hi", "ci95_median_lo", "ci95_median_hi",
                          "peak_rss_kb_median"]:
                    v = d.get(k)
                    row.append("" if v is None else ("%.6g" % v))
                row.append(d["best"] or "")
                row.append("" if d["ratio"] is None else "%.4f" % d["ratio"])
                row += [("%.6g" % d["extras"][k]) if isinstance(d["extras"].get(k), (int, float))
                        else d["extras"].get(k, "") for k in extra]
                w.writerow(row)
    os.replace(path + ".tmp", path)


def status_cell(d):
    """Median text for a table cell, or the failure(s) when there is none."""
    if d is None:
        return "-"
    if d.get("median") is None:
        return "**" + "/".join(sorted(d["fails"])) + "**" if d["fails"] else "-"
    s = fmt_num(d["median"], d["metric"])
    if d["fails"]:
        s += " (**%s**)" % ", ".join("%d %s" % (n, st) for st, n in sorted(d["fails"].items()))
    return s


def overlap(a, b):
    return a.get("min") is not None and b.get("min") is not None and \
        a["min"] <= b["max"] and b["min"] <= a["max"]


def verdict(c, metric, cr, names):
    """The 'hakozuna vs the field' note for one case."""
    hz = cr.get(HZ)
    if hz is None:
        return ""
    if hz.get("median") is None:
        return "**hakozuna failed: %s**" % ", ".join(
            "%d %s" % (n, st) for st, n in sorted(hz["fails"].items()))
    best = hz["best"]
    notes = []
    if best and best != HZ:
        b = cr[best]
        hz_vs_best = b["ratio"]  # hakozuna vs the best one, < 1 here
        txt = "**hakozuna loses to %s by %.1f%%**" % (best, 100.0 * (1.0 - hz_vs_best))
        if overlap(hz, b):
            txt += " (min-max ranges overlap)"
        notes.append(txt)
    elif best == HZ:
        others = [(a, d) for a, d in cr.items() if a != HZ and d.get("median")]
        if others:
            second = (max if higher_is_better(metric) else min)(
                others, key=lambda t: t[1]["median"])
            margin = 100.0 * (second[1]["ratio"] - 1.0)
            txt = "hakozuna best, +%.1f%% vs %s" % (margin, second[0])
            if overlap(hz, second[1]):
                txt += " (ranges overlap)"
            notes.append(txt)
    if c.bench == "rss_plateau":
        # Memory given back is what this benchmark is about: compare RSS after idle.
        key = "rss_after_idle_kb"
        vals = [(a, d["extras"][key]) for a, d in cr.items()
                if isinstance(d["extras"].get(key), (int, float))]
        if vals and isinstance(hz["extras"].get(key), (int, float)):
            low = min(vals, key=lambda t: t[1])
            if low[0] != HZ and hz["extras"][key] > low[1]:
                notes.append("**RSS after idle: hakozuna %s, %s lowest (%s)**"
                             % (fmt_kb(hz["extras"][key]), low[0], fmt_kb(low[1])))
            else:
                notes.append("RSS after idle: hakozuna lowest (%s)" % fmt_kb(hz["extras"][key]))
    if hz["fails"]:
        notes.append("**hakozuna: %s**" % ", ".join(
            "%d %s" % (n, st) for st, n in sorted(hz["fails"].items())))
    return "; ".join(notes)


def rss_keys(cr, with_peak=False):
    keys = []
    for d in cr.values():
        for k in d["extras"]:
            if re.fullmatch(r"rss_.*_kb", k) and k not in keys:
                keys.append(k)
    if with_peak and not any("peak" in k for k in keys):
        keys.append("peak_rss_kb")
    order = ["before", "start", "baseline", "peak", "alloc", "after_free", "free",
             "after_trim", "trim", "after_idle", "idle", "end", "after"]

    def rank(k):
        for i, w in enumerate(order):
            if w in k:
                return i
        return len(order)
    return sorted(keys, key=rank)


def family_keys(bench, cr):
    ks = FAMILY_KEYS.get(bench, [])
    if ks is None:
        return rss_keys(cr, with_peak=True)
    return [k for k in ks if any(k in d["extras"] for d in cr.values())]


def extra_value(d, k):
    if d is None:
        return None
    if k == "peak_rss_kb":
        return d.get("peak_rss_kb_median")
    return d["extras"].get(k)


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(x).replace("|", "\\|") for x in r) + " |")
    return "\n".join(out)


def write_summary_md(path, meta, summary, allocs, skipped_allocs, skipped_cases,
                     charts, chart_note, rows, scale):
    names = [a for a, _ in allocs]
    peers = [a for a in names if a != HZ]
    L = []
    L.append("# hakozuna benchmark results")
    L.append("")
    state = "complete" if meta.get("complete") else "**incomplete (interrupted or running)**"
    L.append("- Date: %s (%s)" % (meta["date"], state))
    L.append("- Commit: `%s`%s" % (meta["commit"], " (working tree has uncommitted changes)"
                                   if meta.get("dirty") else ""))
    L.append("- Command: `%s`" % meta["command"])
    p = meta["parameters"]
    L.append("- Parameters: %s set, %d runs per case and allocator, timeout %ss, "
             "scale %s, %d cases, allocators interleaved per run (%s)"
             % ("full" if p["full"] else "default", p["runs"], p["timeout_s"], p["scale"],
                p["cases"], " ".join(names)))
    m = meta["machine"]
    L.append("- Machine: %s, %s CPUs, %s memory, kernel %s, %s"
             % (m.get("cpu", "?"), m.get("nproc"), fmt_kb(m.get("mem_total_kb")),
                m.get("kernel"), m.get("os", "")))
    L.append("- Allocators: " + "; ".join(
        "%s = %s" % (a, ("`%s`" % lib) if lib else "no preload") for a, lib in allocs))
    L.append("- Versions: " + "; ".join("%s %s" % kv for kv in meta["versions"].items()))
    if skipped_allocs:
        L.append("- Skipped allocators: " + "; ".join("%s (%s)" % s for s in skipped_allocs))
    if skipped_cases:
        L.append("- Skipped cases: " + "; ".join("%s (%s)" % (c.id, w) for c, w in skipped_cases))
    L.append("- Wall time: %s (estimated %s); CPU used by other processes: %s%% of the "
             "machine just before the start, %s%% during the run (benchmark threads "
             "themselves are excluded)"
             % (fmt_dur(meta.get("elapsed_s", 0)), fmt_dur(meta.get("estimated_s", 0)),
                meta.get("busy_pct_before_start", "?"), meta.get("foreign_cpu_pct", "?")))
    L.append("")
    L.append("Each cell is the median of the runs that completed; CRASH (non-zero exit "
             "or signal), TIMEOUT and ERROR (no parsable result line) runs are counted "
             "in bold next to it or replace it. Ratios are hakozuna vs that allocator "
             "from the same interleaved runs, oriented so that **> 1 means hakozuna is "
             "better** (ops/s: hakozuna/peer; secs: peer/hakozuna). The best column is "
             "the allocator with the best median. CV is the coefficient of variation; "
             "the 95% CI in the detailed table is the CI of the **mean** (Student t); "
             "summary.csv also has a distribution-free CI of the median when n >= 6.")
    L.append("")

    for fam, items in by_family(summary):
        metric = next((m for _, m, _ in items if m), None)
        L.append("## %s%s" % (fam, "" if metric is None else
                              " (%s, %s is better)" % (metric, "higher" if higher_is_better(metric)
                                                      else "lower")))
        L.append("")
        allcr = {}
        for _, _, cr in items:
            for a, d in cr.items():
                allcr.setdefault(a, d)
        xkeys = family_keys(fam, allcr)
        head = ["case"] + names + ["best"] + ["hz/%s" % p for p in peers] + ["note"]
        trs = []
        for c, m, cr in items:
            tr = [c.variant or c.id]
            tr += [status_cell(cr.get(a)) for a in names]
            tr.append(next(iter(cr.values()))["best"] or "-" if cr else "-")
            for pn in peers:
                d = cr.get(pn)
                tr.append("-" if d is None or d["ratio"] is None else "%.2f" % d["ratio"])
            tr.append(verdict(c, m, cr, names))
            trs.append(tr)
        L.append(md_table(head, trs))
        L.append("")
        if xkeys:
            L.append("Medians of extra keys; each cell is %s:" % " / ".join(
                "`%s`" % k for k in xkeys))
            L.append("")
            head = ["case"] + names
            trs = []
            for c, m, cr in items:
                cells = []
                for a in names:
                    parts = []
                    for k in xkeys:
                        v = extra_value(cr.get(a), k)
                        if isinstance(v, (int, float)):
                            parts.append(fmt_kb(v) if k.endswith("_kb") else
                                         fmt_num(v) if k.endswith("_rps") else ("%.4g" % v))
                        else:
                            parts.append(v if v else "-")
                    cells.append(" / ".join(parts))
                trs.append([c.variant or c.id] + cells)
            L.append(md_table(head, trs))
            L.append("")
        strs = {}
        for c, m, cr in items:
            for d in cr.values():
                for k, v in d["extras"].items():
                    if isinstance(v, str) and k != "preload":
                        strs.setdefault(k, {})[d["allocator"]] = v
        if fam == "redis":
            L.append("redis-server is Debian's build, linked against its own jemalloc "
                     "(allocator_builtin); under LD_PRELOAD the preloaded allocator takes "
                     "over malloc/free/realloc/calloc/malloc_usable_size; for glibc a "
                     "shim routing them to glibc's malloc is preloaded "
                     "(allocator_effective says what ran).")
            L.append("")
        if strs and fam == "redis":
            parts = []
            for k, per in strs.items():
                if len(set(per.values())) == 1:
                    parts.append("`%s=%s` (all)" % (k, next(iter(per.values()))))
                else:
                    parts.append("`%s`: %s" % (k, ", ".join("%s=%s" % kv for kv in per.items())))
            L.append("Reported by the runs: " + "; ".join(parts))
            L.append("")

    L.append("## Detailed statistics")
    L.append("")
    head = ["case", "allocator", "ok/runs", "median", "min", "max", "CV%",
            "95% CI of mean", "peak RSS (median)", "minor faults (median)",
            "hakozuna vs this"]
    trs = []
    for c, metric, cr in summary:
        for a in names:
            d = cr.get(a)
            if d is None:
                continue
            ci = "-"
            if d.get("ci95_mean_lo") is not None:
                ci = "%s – %s" % (fmt_num(d["ci95_mean_lo"], metric), fmt_num(d["ci95_mean_hi"], metric))
            trs.append([c.id, a, "%d/%d" % (d["n"], d["runs"]),
                        status_cell(d),
                        fmt_num(d.get("min"), metric), fmt_num(d.get("max"), metric),
                        "-" if d.get("cv_pct") is None else "%.1f" % d["cv_pct"], ci,
                        fmt_kb(d.get("peak_rss_kb_median")),
                        fmt_count(d["extras"].get("minor_faults")),
                        "-" if d["ratio"] is None else "%.3f" % d["ratio"]])
    L.append(md_table(head, trs))
    L.append("")

    fails = [r for r in rows if r["status"] != "ok"]
    L.append("## Failed runs (%d)" % len(fails))
    L.append("")
    if fails:
        L.append(md_table(["case", "allocator", "run", "status", "detail", "log"],
                          [[r["case"], r["allocator"], r["run"], r["status"], r["note"],
                            r.get("log", "")] for r in fails]))
    else:
        L.append("None.")
    L.append("")
    L.append("## Charts")
    L.append("")
    if chart_note:
        L.append(chart_note)
        L.append("")
    for ch in charts:
        L.append("![%s](%s)" % (os.path.splitext(ch)[0], ch))
        L.append("")
    L.append("## Cases")
    L.append("")
    L.append(md_table(["case", "command", "parameters"],
                      [[c.id, "`%s %s`" % (c.program, " ".join(c.argv(scale))),
                        c.params_str(scale)] for c, _, _ in summary]))
    L.append("")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(L))
    os.replace(path + ".tmp", path)


# ------------------------------------------------------------------ charts

def charts(outdir, summary, allocs, runs):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001 - any import problem means "no charts"
        return [], "Charts skipped: matplotlib is not available (%s); install the " \
            "Debian package python3-matplotlib." % e
    names = [a for a, _ in allocs]
    colors = {}
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, a in enumerate(names):
        colors[a] = palette[i % len(palette)]
    written = []
    for fam, items in by_family(summary):
        try:
            if fam == "mt_remote":
                fn = chart_mt_remote(plt, outdir, items, names, colors, runs)
            elif fam == "rss_plateau":
                fn = chart_keys(plt, outdir, fam, items, names, colors, runs,
                                lambda cr: [(k, "peak" if k == "peak_rss_kb" else k[4:-3])
                                            for k in rss_keys(cr, with_peak=True)],
                                "RSS (MiB, lower is better)", 1 / 1024.0, log_ok=False,
                                what="RSS by phase ")
            elif fam == "redis":
                fn = chart_keys(plt, outdir, fam, items, names, colors, runs,
                                lambda cr: [(k, k[:-4].upper()) for k in
                                            ("set_rps", "get_rps", "lpush_rps", "lpop_rps")],
                                "requests/s (higher is better)", 1.0,
                                rss_panel=True, what="requests/s by command ")
            else:
                fn = chart_bars(plt, outdir, fam, items, names, colors, runs)
            if fn:
                written.append(fn)
        except Exception as e:  # noqa: BLE001 - one bad chart must not lose the rest
            log("harness: chart for %s failed: %s" % (fam, e))
        finally:
            plt.close("all")
    try:
        fn = chart_ratios(plt, outdir, summary, names, colors)
        if fn:
            written.append(fn)
    except Exception as e:  # noqa: BLE001
        log("harness: ratio chart failed: %s" % e)
    finally:
        plt.close("all")
    return written, ""


def _fail_label(d):
    if d is None or not d["fails"]:
        return ""
    return "/".join(sorted(d["fails"]))


def chart_mt_remote(plt, outdir, items, names, colors, runs):
    items = [t for t in items if t[0].params.get("pinned") != "yes"]
    lanes = [l for l in MT_LANES if any(c.params.get("lane") == l for c, _, _ in items)]
    rs = [r for r in MT_R if any(c.params.get("R") == r for c, _, _ in items)]
    if not lanes or not rs:
        return None
    from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter
    fig, axes = plt.subplots(len(lanes), len(rs), figsize=(4.2 * len(rs), 3.4 * len(lanes)),
                             squeeze=False, sharey="row")
    any_log = False
    for i, lane in enumerate(lanes):
        # Log y for a lane whose values span an order of magnitude or more.
        vals = [d[k] for c, _, cr in items if c.params.get("lane") == lane
                for d in cr.values() if d.get("median") for k in ("min", "max")]
        logy = bool(vals) and max(vals) / max(min(vals), 1e-9) >= 10
        any_log = any_log or logy
        for j, r in enumerate(rs):
            ax = axes[i][j]
            sel = sorted([(c, cr) for c, _, cr in items
                          if c.params.get("lane") == lane and c.params.get("R") == r],
                         key=lambda t: t[0].params["T"])
            ts = [c.params["T"] for c, _ in sel]
            for k, a in enumerate(names):
                xs, ys, lo, hi = [], [], [], []
                for c, cr in sel:
                    d = cr.get(a)
                    if d and d.get("median"):
                        xs.append(c.params["T"])
                        ys.append(d["median"])
                        lo.append(d["median"] - d["min"])
                        hi.append(d["max"] - d["median"])
                    if d and d["fails"]:
                        ax.annotate("%s %s" % (a, _fail_label(d)),
                                    (c.params["T"], 0.02 + 0.07 * k), xycoords=("data", "axes fraction"),
                                    fontsize=7, color=colors[a], ha="center")
                if xs:
                    ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=4, capsize=3,
                                lw=1.6 if a == HZ else 1.1, color=colors[a], label=a)
            ax.set_xscale("log", base=2)
            if ts:
                ax.set_xticks(ts)
                ax.set_xticklabels([str(t) for t in ts])
            if logy:
                ax.set_yscale("log")
                ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                ax.yaxis.set_minor_formatter(NullFormatter())
            else:
                ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(EngFormatter(sep=""))
            lo_, hi_ = MT_LANES[lane]
            ax.set_title("%s %d–%d B, R=%d%%" % (lane, lo_, hi_, r), fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            if i == len(lanes) - 1:
                ax.set_xlabel("threads")
            if j == 0:
                ax.set_ylabel("ops/s (higher is better)")
    handles, labels = [], []
    for ax in axes.flat:
        h, l = ax.get_legend_handles_labels()
        for hh, ll in zip(h, l):
            if ll not in labels:
                handles.append(hh)
                labels.append(ll)
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False,
               bbox_to_anchor=(0.5, 0.995))
    fig.suptitle("mt_remote: throughput vs threads (median of %d runs, bars = min/max%s)"
                 % (runs, ", log y where a lane spans >= 10x" if any_log else ""),
                 y=0.955, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fn = "mt_remote.png"
    fig.savefig(os.path.join(outdir, fn), dpi=110)
    return fn


def _bars(ax, groups, names, colors, getter, ylabel, scale=1.0, log_ok=True, unit=""):
    """Grouped bars: one group per label, one bar per allocator; getter(g, a) -> d-like."""
    n = len(names)
    width = 0.8 / max(n, 1)
    vals = []
    for gi, g in enumerate(groups):
        for k, a in enumerate(names):
            med, mn, mx, fail = getter(g, a)
            x = gi - 0.4 + width * (k + 0.5)
            if med is not None:
                med, mn, mx = med * scale, mn * scale, mx * scale
                vals.append(med)
                ax.bar(x, med, width, color=colors[a], label=a if gi == 0 else None,
                       yerr=[[med - mn], [mx - med]], capsize=2, ecolor="0.25",
                       edgecolor="black" if a == HZ else "none", linewidth=1.2)
            else:
                ax.bar(x, 0, width, color=colors[a], label=a if gi == 0 else None)
            if fail:
                ax.annotate(fail, (x, 0.02), xycoords=("data", "axes fraction"),
                            rotation=90, fontsize=7, ha="center", va="bottom",
                            color="red")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g if isinstance(g, str) else g[1] for g in groups], fontsize=9)
    ax.set_ylabel(ylabel)
    if log_ok and vals and min(vals) > 0 and max(vals) / min(vals) > 30:
        ax.set_yscale("log")
    else:
        from matplotlib.ticker import EngFormatter
        ax.yaxis.set_major_formatter(EngFormatter(unit=unit, sep=" " if unit else ""))
    ax.grid(True, axis="y", which="both", alpha=0.3)


def chart_bars(plt, outdir, fam, items, names, colors, runs):
    metric = next((m for _, m, _ in items if m), None)
    if metric is None:
        metric = "ops/s"
    groups = [(c.variant or fam, cr) for c, _, cr in items]

    def get_metric(g, a):
        d = g[1].get(a)
        if d is None:
            return None, None, None, ""
        if d.get("median") is None:
            return None, None, None, _fail_label(d)
        return d["median"], d["min"], d["max"], _fail_label(d)

    def get_rss(g, a):
        d = g[1].get(a)
        v = d.get("peak_rss_kb_median") if d else None
        return (v, v, v, "") if v is not None else (None, None, None, "")

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(max(7, 2.2 * len(groups) + 5), 4),
                                   gridspec_kw={"width_ratios": [3, 2]})
    _bars(ax1, [(g[0], g[1]) for g in groups], names, colors,
          lambda g, a: get_metric(g, a),
          "%s (%s is better)" % (metric, "higher" if higher_is_better(metric) else "lower"),
          unit="s" if metric == "secs" else "")
    ax1.set_xticklabels([g[0] for g in groups])
    ax1.set_title("%s: median of %d runs, bars = min/max" % (fam, runs), fontsize=10)
    _bars(ax2, [(g[0], g[1]) for g in groups], names, colors, get_rss,
          "peak RSS (MiB, lower is better)", 1 / 1024.0, log_ok=False)
    ax2.set_xticklabels([g[0] for g in groups])
    ax2.set_title("peak RSS (median)", fontsize=10)
    ax1.legend(fontsize=8)
    fig.tight_layout()
    fn = "%s.png" % fam
    fig.savefig(os.path.join(outdir, fn), dpi=110)
    return fn


def chart_keys(plt, outdir, fam, items, names, colors, runs, keys_of, ylabel, scale,
               rss_panel=False, log_ok=True, what=""):
    """One subplot per case; groups = extra keys (e.g. RSS phases, redis commands)."""
    ncol = len(items) + (1 if rss_panel else 0)
    fig, axes = plt.subplots(1, ncol, figsize=(max(7, 6.5 * ncol), 4.2), squeeze=False)
    for i, (c, m, cr) in enumerate(items):
        keys = keys_of(cr)
        ax = axes[0][i]

        def get(g, a, cr=cr):
            d = cr.get(a)
            if d is None:
                return None, None, None, ""
            if d.get("median") is None:
                return None, None, None, _fail_label(d)
            k = g[0]
            if k == "peak_rss_kb":
                v = d.get("peak_rss_kb_median")
                lo = hi = v
            else:
                v = d["extras"].get(k)
                lo, hi = d["extras_range"].get(k, (v, v))
            if not isinstance(v, (int, float)):
                return None, None, None, ""
            return v, lo, hi, _fail_label(d)
        _bars(ax, keys, names, colors, get, ylabel, scale, log_ok)
        ax.set_title("%s%s: %s(median of %d runs)" % (fam, "/" + c.variant if c.variant else "",
                                                      what, runs), fontsize=10)
        ax.legend(fontsize=8)
    if rss_panel:
        ax = axes[0][-1]
        groups = [(c.variant or fam, cr) for c, _, cr in items]

        def get_rss(g, a):
            d = g[1].get(a)
            v = d.get("peak_rss_kb_median") if d else None
            return (v, v, v, _fail_label(d) if d else "") if v is not None else \
                (None, None, None, _fail_label(d) if d else "")
        _bars(ax, groups, names, colors, get_rss, "server peak RSS (MiB, lower is better)",
              1 / 1024.0, log_ok=False)
        ax.set_xticklabels([g[0] for g in groups])
        ax.set_title("peak RSS (VmHWM, median)", fontsize=10)
    fig.tight_layout()
    fn = "%s.png" % fam
    fig.savefig(os.path.join(outdir, fn), dpi=110)
    return fn


def chart_ratios(plt, outdir, summary, names, colors):
    peers = [a for a in names if a != HZ]
    if HZ not in names or not peers:
        return None
    rows = [(c, cr) for c, _, cr in summary if HZ in cr]
    if not rows:
        return None
    h = 0.8 / len(peers)
    fig, ax = plt.subplots(figsize=(9, max(3, 0.32 * len(rows) * max(1, len(peers) / 3) + 1.5)))
    vals = []
    for k, p in enumerate(peers):
        ys, xs = [], []
        for i, (c, cr) in enumerate(rows):
            d = cr.get(p)
            if d and d["ratio"]:
                ys.append(i - 0.4 + h * (k + 0.5))
                xs.append(d["ratio"])
        vals += xs
        ax.barh(ys, [x - 1 for x in xs], h, left=1, color=colors[p], label="vs " + p)
    ax.axvline(1.0, color="black", lw=1)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([c.id for c, _ in rows], fontsize=8)
    ax.invert_yaxis()
    if vals and (max(vals) / min(vals) > 4):
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
        ax.set_xscale("log")
        lo, hi = min(vals + [1.0]), max(vals + [1.0])
        ticks = [v for v in (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10,
                             20, 50, 100) if lo / 1.3 <= v <= hi * 1.3]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g×" % v))
    ax.set_xlabel("hakozuna vs peer (median ratio; > 1 = hakozuna better)")
    ax.set_title("hakozuna relative to each peer, per case", fontsize=11)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fn = "ratios.png"
    fig.savefig(os.path.join(outdir, fn), dpi=110)
    return fn


# ------------------------------------------------------------------ main

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="bench/harness.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\nWhat it does")[0],
        epilog="What it does" + __doc__.split("\nWhat it does", 1)[1] + """
Examples
  make bench                                    default set (~8 min), 5 runs
  /usr/bin/python3 bench/harness.py --full      whole matrix, 10 runs
  /usr/bin/python3 bench/harness.py --only mt_remote --runs 5
  /usr/bin/python3 bench/harness.py --allocators hakozuna,tcmalloc --only tiny_hot
  /usr/bin/python3 bench/harness.py mine=/tmp/libmine.so --only larson
  /usr/bin/python3 bench/harness.py --list --full
""")
    ap.add_argument("extra", nargs="*", metavar="NAME=/path/lib.so",
                    help="extra peer allocator to preload (replaces a built-in one of the same name)")
    ap.add_argument("--peers-dir", metavar="DIR",
                    help="add every lib*.so in DIR as a peer, named after the file "
                         "(libmimalloc-v3.so -> mimalloc-v3); skipped with a note if DIR "
                         "does not exist")
    ap.add_argument("--full", action="store_true",
                    help="run the whole matrix (mt_remote T=1,2,4,8,16 x 3 lanes x R=0/50/90, "
                         "every benchmark and variant), 10 runs unless --runs is given")
    ap.add_argument("--runs", type=int, default=None,
                    help="runs per case and allocator (default 5, or 10 with --full)")
    ap.add_argument("--only", metavar="BENCH[,BENCH...]",
                    help="only these benchmarks (e.g. mt_remote,tiny_hot,redis)")
    ap.add_argument("--filter", metavar="REGEX",
                    help="only cases whose id matches REGEX (e.g. 'guard/R90')")
    ap.add_argument("--allocators", metavar="A[,B...]",
                    help="only these allocators, in this order (hakozuna, glibc, mimalloc, "
                         "jemalloc, tcmalloc, or names given as NAME=/path)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds before a run is killed and recorded as TIMEOUT (default 120)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply iteration counts (and the time estimate) by this; "
                         "e.g. 0.1 for a quick smoke run (default 1)")
    ap.add_argument("--out", metavar="DIR",
                    help="output directory (default results/<YYYY-MM-DD>-<short commit>/ "
                         "under the repo root)")
    ap.add_argument("--bench-dir", default=os.path.join(REPO, "build", "bench"),
                    help="where the benchmark programs are (default build/bench)")
    ap.add_argument("--no-install", action="store_true",
                    help="do not try to install missing Debian packages")
    ap.add_argument("--no-charts", action="store_true", help="do not draw PNG charts")
    ap.add_argument("--report", metavar="DIR",
                    help="do not run anything: rebuild summary.csv, summary.md and the charts "
                         "of an earlier results directory from its raw.csv and meta.json")
    ap.add_argument("--scaling", action="store_true",
                    help="instead of the comparison: run mt_remote under hakozuna at "
                         "T=1,4,16,64,256 and write its lock, CAS and other shared-write "
                         "counts per million operations (scaling.csv/.md/.png)")
    ap.add_argument("--list", action="store_true",
                    help="print the selected cases with commands and the time estimate, then exit")
    return ap.parse_args(argv)


class _Skipped:
    def __init__(self, cid):
        self.id = cid


def report_only(args):
    """Rebuild summary.csv/.md and charts from DIR/raw.csv and DIR/meta.json."""
    d = os.path.abspath(args.report)
    try:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        with open(os.path.join(d, "raw.csv"), newline="") as f:
            raw = list(csv.DictReader(f))
    except (OSError, ValueError) as e:
        sys.exit("harness: cannot read %s/meta.json and raw.csv: %s" % (d, e))
    scale = meta.get("parameters", {}).get("scale", 1.0)
    known = {c.id: c for c in build_cases()}
    cases = []
    for mc in meta.get("cases", []):
        c = known.get(mc["id"])
        if c is None or c.argv(scale) != mc.get("args", c.argv(scale)):
            variant = mc["id"].split("/", 1)[1] if "/" in mc["id"] else ""
            c = Case(mc["benchmark"], variant, mc.get("args", []), 0.0, set(),
                     params=mc.get("params") or None, program=mc.get("program"))
        cases.append(c)
    fixed = set(RAW_FIELDS) | {"command"}
    rows = []
    for r in raw:
        kv = {k: v for k, v in r.items() if k not in fixed and v not in ("", None)}
        if r.get("peak_rss_kb"):
            kv["peak_rss_kb"] = r["peak_rss_kb"]
        row = {"case": r["case"], "benchmark": r["benchmark"], "params": r["params"],
               "allocator": r["allocator"], "run": int(r["run"]), "status": r["status"],
               "note": r["note"], "exit": r["exit"], "metric": r["metric"] or None,
               "value": float(r["value"]) if r["value"] else None, "kv": kv,
               "wall_s": float(r["wall_s"] or 0), "command": r.get("command", "")}
        if row["status"] != "ok":
            row["log"] = "logs/%s-%s-run%d.txt" % (row["case"].replace("/", "_"),
                                                   row["allocator"], row["run"])
        rows.append(row)
    allocs = list(meta.get("allocators", {}).items())
    skipped_allocs = list(meta.get("skipped_allocators", {}).items())
    skipped_cases = [(_Skipped(k), v) for k, v in meta.get("skipped_cases", {}).items()]
    done_ids = {r["case"] for r in rows}
    cases = [c for c in cases if c.id in done_ids]
    summary = summarize(cases, allocs, rows)
    write_summary_csv(os.path.join(d, "summary.csv"), summary, scale)
    runs = meta.get("parameters", {}).get("runs", 0)
    if args.no_charts:
        chart_files, chart_note = [], "Charts skipped (--no-charts)."
    else:
        chart_files, chart_note = charts(d, summary, allocs, runs)
    meta["charts"], meta["charts_note"] = chart_files, chart_note
    write_summary_md(os.path.join(d, "summary.md"), meta, summary, allocs, skipped_allocs,
                     skipped_cases, chart_files, chart_note, rows, scale)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2, default=str)
        f.write("\n")
    log("harness: rebuilt %s/{summary.csv,summary.md,meta.json%s}"
        % (nice_path(d), "".join("," + f for f in chart_files)))
    return 0


def run_scaling(args):
    """--scaling: the shared-write counts of hakozuna by thread count."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import scaling
    lib = os.path.join(REPO, "build", "libhakozuna.so")
    program = os.path.join(os.path.abspath(args.bench_dir), "mt_remote")
    for path in (lib, program):
        if not os.path.exists(path):
            sys.exit("harness: %s is missing (run make first)" % path)
    outdir = make_outdir(args, git("rev-parse", "--short", "HEAD"))
    rows = scaling.run(outdir, program, lib, log)
    if not rows:
        sys.exit("harness: every scaling run failed")
    log("harness: wrote %s/scaling.{csv,md%s}" % (
        nice_path(outdir), ",png" if os.path.exists(os.path.join(outdir, "scaling.png")) else ""))
    return 0


def main(argv):
    args = parse_args(argv)
    if args.report:
        return report_only(args)
    if args.runs is None:
        args.runs = 10 if args.full else 5
    if args.runs < 1:
        sys.exit("harness: --runs must be >= 1")
    if args.scaling:
        return run_scaling(args)
    cases = select_cases(args)

    if args.list:
        names = [n for n, _ in allocator_table(args)]
        for c in cases:
            cmd = program_path(c, args)
            log("%-32s %5.2fs/run  %s%s %s" % (c.id, c.est_secs(args.scale),
                                                "".join("%s=%s " % kv for kv in
                                                        sorted(c.env.items())),
                                                os.path.relpath(cmd, REPO),
                                              " ".join((["LIB"] if c.lib_as_arg else []) + c.argv(args.scale))))
        log_estimate(cases, args.runs, names, args.scale)
        return 0

    install_peers(args)
    allocs, skipped_allocs = resolve_allocators(args)
    cases, skipped_cases = check_programs(cases, args)
    if not cases:
        sys.exit("harness: no runnable case left")

    commit = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    outdir = make_outdir(args, commit)
    started = time.time()
    meta = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "commit": commit or "unknown", "commit_full": git("rev-parse", "HEAD"),
        "dirty": dirty,
        "command": " ".join(shlex.quote(a) for a in ["/usr/bin/python3", "bench/harness.py"] + argv),
        "parameters": {"full": args.full, "runs": args.runs, "timeout_s": args.timeout,
                       "scale": args.scale, "only": args.only, "filter": args.filter,
                       "cases": len(cases), "bench_dir": args.bench_dir},
        "allocators": {a: lib for a, lib in allocs},
        "skipped_allocators": dict(skipped_allocs),
        "skipped_cases": {c.id: w for c, w in skipped_cases},
        "machine": machine_info(),
        "versions": peer_versions(),
        "cases": [{"id": c.id, "benchmark": c.bench, "program": c.program,
                   "args": c.argv(args.scale), "params": {k: (v.render(args.scale) if
                                                            isinstance(v, It) else v)
                                                        for k, v in c.params.items()}}
                  for c in cases],
        "complete": False,
    }
    meta["allocator_files"] = {
        a: {"path": lib, "size": os.stat(lib).st_size} for a, lib in allocs if lib}
    hzlib = dict(allocs).get(HZ)
    if hzlib:
        st = os.stat(hzlib)
        meta["hakozuna_lib"] = {"path": hzlib, "size": st.st_size,
                                "mtime": datetime.datetime.fromtimestamp(st.st_mtime)
                                .isoformat(timespec="seconds")}

    est_total = log_estimate(cases, args.runs, [a for a, _ in allocs], args.scale)
    meta["estimated_s"] = round(est_total)
    meta["loadavg_start"] = loadavg()
    b0, o0, t0 = machine_busy_s(), own_cpu_s(), time.time()
    time.sleep(1.0)
    busy = foreign_cpu_pct(b0, o0, time.time() - t0)
    meta["busy_pct_before_start"] = None if busy is None else round(busy, 1)
    if busy is not None and busy > 25:
        log("harness: warning: other processes use %.0f%% of the machine's CPU right now; "
            "absolute numbers will be noisy (ratios from the interleaved runs suffer least)"
            % busy)
    busy0, own0, busy_t0 = machine_busy_s(), own_cpu_s(), time.time()
    log("harness: results in %s" % nice_path(outdir))

    rows = []
    done_est = 0.0
    env_base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    interrupted = False

    def flush(final=False):
        meta["elapsed_s"] = round(time.time() - started, 1)
        meta["loadavg_end"] = loadavg()
        fc = foreign_cpu_pct(busy0, own0, time.time() - busy_t0)
        meta["foreign_cpu_pct"] = None if fc is None else round(fc, 1)
        meta["complete"] = final and not interrupted
        meta["runs_recorded"] = len(rows)
        meta["failed_runs"] = sum(1 for r in rows if r["status"] != "ok")
        done_ids = {r["case"] for r in rows}
        done_cases = [c for c in cases if c.id in done_ids]
        write_raw(os.path.join(outdir, "raw.csv"), rows)
        summary = summarize(done_cases, allocs, rows)
        write_summary_csv(os.path.join(outdir, "summary.csv"), summary, args.scale)
        chart_files, chart_note = [], ""
        if final:
            if args.no_charts:
                chart_note = "Charts skipped (--no-charts)."
            else:
                chart_files, chart_note = charts(outdir, summary, allocs, args.runs)
            if chart_note:
                log("harness: " + chart_note)
            meta["charts"] = chart_files
            meta["charts_note"] = chart_note
        write_summary_md(os.path.join(outdir, "summary.md"), meta, summary, allocs,
                         skipped_allocs, skipped_cases, chart_files, chart_note, rows,
                         args.scale)
        with open(os.path.join(outdir, "meta.json"), "w") as f:
            json.dump(meta, f, indent=2, default=str)
            f.write("\n")

    try:
        for ci, c in enumerate(cases):
            est = c.est_secs(args.scale)
            n_runs = case_runs(c, args.runs)
            for run in range(1, n_runs + 1):
                for aname, lib in allocs:
                    elapsed = time.time() - started
                    remaining = est_total - done_est
                    eta = remaining * (elapsed / done_est) if done_est > 0 else remaining
                    prog = program_path(c, args)
                    settings = dict(c.env, **ALLOCATOR_ENV.get(aname, {}))
                    env = dict(env_base, **settings)
                    if c.lib_as_arg:
                        cmd = ["bash", prog, lib or ""] + c.argv(args.scale)
                    else:
                        cmd = [prog] + c.argv(args.scale)
                        if lib:
                            env["LD_PRELOAD"] = lib
                    log("[%d/%d %s] run %d/%d %-9s | cases left %d | elapsed %s | ETA %s"
                        % (ci + 1, len(cases), c.id, run, n_runs, aname,
                           len(cases) - ci - 1, fmt_dur(elapsed), fmt_dur(eta)))
                    res = run_once(cmd, env, args.timeout)
                    done_est += est + RUN_OVERHEAD_S
                    command = "".join("%s=%s " % kv for kv in sorted(settings.items())) + \
                        ("LD_PRELOAD=%s " % lib if lib and not c.lib_as_arg else "") + \
                        " ".join(shlex.quote(os.path.relpath(x, REPO) if x.startswith(REPO)
                                             else x) for x in cmd)
                    row = {"case": c.id, "benchmark": c.bench,
                           "params": c.params_str(args.scale), "allocator": aname,
                           "run": run, "status": res["status"], "note": res["note"],
                           "exit": res["exit"], "metric": res.get("metric"),
                           "value": res.get("value"), "kv": res["kv"],
                           "wall_s": res["wall_s"], "command": command}
                    if res["status"] != "ok":
                        lname = "%s-%s-run%d.txt" % (c.id.replace("/", "_"), aname, run)
                        with open(os.path.join(outdir, "logs", lname), "w") as f:
                            f.write("command: %s\nstatus: %s %s\nwall: %.2fs\n--- stdout\n%s"
                                    "\n--- stderr\n%s\n" % (command, res["status"], res["note"],
                                                           res["wall_s"], res["stdout"][-20000:],
                                                           res["stderr"][-20000:]))
                        row["log"] = "logs/" + lname
                        log("    -> %s %s (%.1fs); log: %s" % (res["status"], res["note"],
                                                               res["wall_s"], row["log"]))
                        tail = res["stderr"].strip().splitlines()[-3:]
                        for t in tail:
                            log("       " + t[:200])
                    else:
                        log("    -> %s=%s peak_rss=%s (%.2fs)"
                            % (res["metric"], fmt_num(res["value"], res["metric"]),
                               fmt_kb(to_num(res["kv"].get("peak_rss_kb", ""))),
                               res["wall_s"]))
                        warn = [ln for ln in res["stderr"].splitlines() if ln.strip()]
                        if warn:
                            log("       stderr: " + warn[-1][:200])
                    rows.append(row)
            flush()
    except KeyboardInterrupt:
        interrupted = True
        log("harness: interrupted; writing what was measured so far")
    flush(final=True)
    n_fail = sum(1 for r in rows if r["status"] != "ok")
    log("harness: done in %s (estimated %s); %d runs, %d failed"
        % (fmt_dur(time.time() - started), fmt_dur(est_total), len(rows), n_fail))
    log("harness: wrote %s/{raw.csv,summary.csv,summary.md,meta.json%s}"
        % (nice_path(outdir), "".join("," + f for f in meta.get("charts", []))))
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
