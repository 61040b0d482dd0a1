"""The case table: every benchmark, its parameters and its budget, which
cases a run selects, how long they take, and the programs they need."""

import os
import re
import sys

from .common import BENCH_SRC, REPO, fmt_dur, log, nice_path, shutil_which

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
MT_WS, MT_RING = 400, 65536


# ============================== CASE TABLE ==================================
# mt_remote: THREADS ITERS WS MIN MAX REMOTE_PCT RING.
# Lanes are size ranges in bytes; R is the % of frees handed to the next
# thread. ITERS is per thread and chosen as MT_OPS[lane][R] / THREADS, so the
# total work (and so one run's time, ~0.5-1 s on this 2-core machine) does not
# grow with the thread count.
MT_LANES = {"guard": (16, 2048), "main": (16, 32768), "cross128": (16, 131072)}
MT_R = [0, 50, 90]
MT_THREADS_DEFAULT = [4, 16]
MT_THREADS_FULL = [1, 2, 4, 8, 16]
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
# The regime without back-pressure: producers never wait for their
# consumers (programs with unbounded queues), so with many threads on few
# CPUs a ring fills while its consumer is off the CPU and the live set
# swings by hundreds of MiB. Its cells (case ids ending in /nobp, threads
# unpinned, in --full; select them with --filter nobp): these lanes, R and
# thread counts.
MT_FREE_RUN_ENV = {"BENCH_NO_PIN": "1", "BENCH_NO_BACKPRESSURE": "1"}
MT_FREE_RUN_LANES = ["main", "cross128"]
MT_FREE_RUN_R = [50, 90]
MT_FREE_RUN_THREADS = [4, 16]

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
    # the same with 8 in flight and 300 malloc/free pairs in a key
    # destructor as each thread exits (C++ and library destructors)
    ("thread_churn", "exit-allocs", [It(20000), 8, 300], 0.7, False),
    # thread_exit THREADS IDLE_MS (secs; RSS after join, idle and trim)
    ("thread_exit",  "2000",     [2000, 2000], 3.0, False),
    ("thread_exit",  "10000",    [10000, 2000], 7.0, False),
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
    "thread_exit": ["rss_joined_kb", "rss_idle_kb", "rss_trim_kb"],
    "long_run": ["rss_q1_kb", "rss_q4_kb", "growth"],
    "prodcons": ["waits"],
    "batch_queue": ["waits", "jumps_pct"],
    "exchange": ["remote_pct"],
}
# The programs of the apps family (bench/apps.py) and their packages.
APPS_PROGRAMS = {"sqlite": ("sqlite3", "sqlite3"), "python": ("python3", "python3"),
                 "ruby": ("ruby", "ruby"), "lua": ("lua5.4", "lua5.4"),
                 "z3": ("z3", "z3"), "ghostscript": ("gs", "ghostscript"),
                 "gcc": ("gcc", "gcc"), "sort": ("sort", "coreutils"),
                 "rocksdb": ("db_bench", "rocksdb-tools"), "git": ("git", "git")}
# ============================================================================


def mt_remote_case(lane, lo, hi, r, t, pinned, free_run=False):
    iters = max(1, MT_OPS[lane][r] // t)
    default = t in MT_THREADS_DEFAULT and not pinned and not free_run
    suffix = "/pinned" if pinned else "/nobp" if free_run else ""
    params = {"lane": lane, "R": r, "T": t, "size": "%d-%d" % (lo, hi),
              "iters": It(iters), "ws": MT_WS, "ring": MT_RING,
              "pinned": "yes" if pinned else "no"}
    if free_run:
        params["backpressure"] = "no"
    env = None if pinned else MT_FREE_RUN_ENV if free_run else MT_UNPINNED_ENV
    return Case(
        "mt_remote", "%s/R%d/T%d%s" % (lane, r, t, suffix),
        [t, It(iters), MT_WS, lo, hi, r, MT_RING], MT_EST,
        {"full"} | ({"default"} if default else set()), params=params, env=env)


def build_cases():
    cases = []
    for pinned in (False, True):
        for lane, (lo, hi) in MT_LANES.items():
            for r in MT_R:
                for t in MT_THREADS_FULL:
                    cases.append(mt_remote_case(lane, lo, hi, r, t, pinned))
    for lane in MT_FREE_RUN_LANES:
        lo, hi = MT_LANES[lane]
        for r in MT_FREE_RUN_R:
            for t in MT_FREE_RUN_THREADS:
                cases.append(mt_remote_case(lane, lo, hi, r, t, False, True))
    for bench, variant, args, est, dflt in OTHER:
        cases.append(Case(bench, variant, args, est,
                          {"full"} | ({"default"} if dflt else set())))
    for bench, variant, script, script_args, est, dflt in REAL:
        cases.append(Case(bench, variant, script_args, est,
                          {"full"} | ({"default"} if dflt else set()),
                          program=script, lib_as_arg=True))
    return cases


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
