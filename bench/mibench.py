"""mibench: a few programs of mimalloc-bench, run the way its bench.sh runs
them, under several allocators interleaved, with medians of time and peak RSS.

mimalloc-bench is not part of this project and is not downloaded by it: build
its `bench` directory with its own CMake and point this script at the build
directory (the one holding `larson`, `rptest`, ...):

    cmake -S mimalloc-bench/bench -B MB_BUILD -DCMAKE_BUILD_TYPE=Release
    cmake --build MB_BUILD --target larson larson-sized rptest xmalloc-test \
        glibc-simple mleak
    /usr/bin/python3 bench/mibench.py MB_BUILD 5 hakozuna=build/libhakozuna.so \
        glibc= snmalloc=PEERS/libsnmalloc.so \
        tcmalloc-google=PEERS/libtcmalloc-google.so,GLIBC_TUNABLES=glibc.pthread.rseq=0

Each NAME=LIB[,VAR=VALUE...] is preloaded (an empty LIB: no preload). The
time of a test is bench.sh's: larson's "relative time", rptest's 2,000,000
divided by its memory ops per CPU second, xmalloc-test's rtime, and the wall
time for the others; procs is the CPU count. Runs go round the allocators in
turn, threads unpinned; every line gives the median time, the median peak RSS
and the time over the best other allocator's (bold when above 1) for the
first allocator named (its own variants, the same library with other
settings, are left out of that best).
"""
import os
import re
import statistics
import sys
import time

PROCS = os.cpu_count() or 2
# name: (program, arguments, how to read the time from its output)
TESTS = {
    "larsonN": ("larson", "5 8 1000 5000 100 4141 {p}", "larson"),
    "larsonN-sized": ("larson-sized", "5 8 1000 5000 100 4141 {p}", "larson"),
    "rptestN": ("rptest", "{p} 0 1 2 500 1000 100 8 16000", "rptest"),
    "xmalloc-testN": ("xmalloc-test", "-w {p} -t 5 -s 64", "xmalloc"),
    "glibc-simple": ("glibc-simple", "", "wall"),
    "mleak10": ("mleak", "5", "wall"),
}


def read_time(kind, out, wall):
    if kind == "larson":
        m = re.search(r"relative time: ([0-9.]+)", out)
        return float(m.group(1)) if m else None
    if kind == "rptest":
        m = re.search(r"\.\.\.(\d+) memory ops", out)
        return 2_000_000 / int(m.group(1)) if m and int(m.group(1)) else None
    if kind == "xmalloc":
        m = re.search(r"rtime: ([0-9.]+)", out)
        return float(m.group(1)) if m else None
    return wall


def run_one(builddir, test, spec):
    program, args, kind = TESTS[test]
    lib, env = spec
    cmd = [os.path.join(builddir, program)] + args.format(p=PROCS).split()
    child_env = dict(os.environ, **env)
    if lib:
        child_env["LD_PRELOAD"] = lib
    else:
        child_env.pop("LD_PRELOAD", None)
    r, w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.chdir(builddir)
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.close(r)
        os.execve(cmd[0], cmd, child_env)
    os.close(w)
    chunks = []
    while True:
        data = os.read(r, 65536)
        if not data:
            break
        chunks.append(data)
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    out = b"".join(chunks).decode(errors="replace")
    if status != 0:
        return None, None
    return read_time(kind, out, wall), usage.ru_maxrss / 1024.0


def parse_spec(arg):
    name, _, rest = arg.partition("=")
    parts = rest.split(",")
    env = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    return name, (os.path.abspath(parts[0]) if parts[0] else "", env)


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    builddir, runs = argv[1], int(argv[2])
    specs = [parse_spec(a) for a in argv[3:]]
    tests = [t for t in TESTS if os.path.exists(os.path.join(builddir, TESTS[t][0]))]
    if os.environ.get("MIBENCH_ONLY"):
        tests = [t for t in tests if t in os.environ["MIBENCH_ONLY"].split(",")]
    first = specs[0][0]
    print("mimalloc-bench programs, procs %d, %d interleaved runs, medians; "
          "ratio = %s's time / the best other's" % (PROCS, runs, first))
    for test in tests:
        times = {name: [] for name, _ in specs}
        rss = {name: [] for name, _ in specs}
        for _ in range(runs):
            for name, spec in specs:
                t, m = run_one(builddir, test, spec)
                if t is not None:
                    times[name].append(t)
                    rss[name].append(m)
        med = {n: statistics.median(v) for n, v in times.items() if v}
        # the first allocator's own variants (same library) are not peers
        peers = {n for n, (lib, _) in specs if lib != specs[0][1][0]}
        others = [v for n, v in med.items() if n in peers]
        ratio = med[first] / min(others) if first in med and others else float("nan")
        cells = ", ".join("%s %.3f s %.0f MiB" % (n, med[n], statistics.median(rss[n]))
                          if n in med else "%s FAILED" % n for n, _ in specs)
        mark = "**" if ratio > 1 else ""
        print("%-14s %s%.2f%s | %s" % (test, mark, ratio, mark, cells))
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv)
