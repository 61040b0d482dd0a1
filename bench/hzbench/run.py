"""Running: the allocators and their libraries, one run of a benchmark
under one of them, the peers' packages, the machine's load and
description, and the raw results file."""

import csv
import datetime
import os
import platform
import resource
import signal
import subprocess
import sys
import time

from .common import BENCH_SRC, HZ, LIBDIR, REPO, log, sh, to_num
from .cases import APPS_PROGRAMS

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
PEER_PACKAGES += sorted({p for _, p in APPS_PROGRAMS.values()} | {"time"})


# Environment settings an allocator runs with: NAME=/path/lib.so,VAR=VALUE
# (e.g. hakozuna-prof=build/libhakozuna.so,HZ_PROF=1).
ALLOCATOR_ENV = {}


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
