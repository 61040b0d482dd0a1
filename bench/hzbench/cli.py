"""The command line: options, the run loop that interleaves allocators,
--report (rebuild a summary from raw.csv) and --scaling."""

import argparse
import csv
import datetime
import json
import os
import shlex
import sys
import time

from . import __doc__ as USAGE  # the package's docstring is --help's text
from .common import (
    BENCH_SRC, HZ, REPO, fmt_dur, fmt_kb, fmt_num, git, log, nice_path,
    to_num)
from .cases import (
    Case, It, RUN_OVERHEAD_S, build_cases, case_runs, check_programs,
    log_estimate, program_path, select_cases)
from .stats import summarize
from .run import (
    ALLOCATOR_ENV, RAW_FIELDS, allocator_table, foreign_cpu_pct,
    install_peers, loadavg, machine_busy_s, machine_info, make_outdir,
    own_cpu_s, peer_versions, resolve_allocators, run_once, write_raw)
from .report import write_summary_csv, write_summary_md
from .charts import charts

# The charts note of a run made with --no-charts (meta.json, summary.md).
NO_CHARTS = "Charts skipped (--no-charts)."

# ------------------------------------------------------------------ main

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="bench/harness.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=USAGE.split("\nWhat it does")[0],
        epilog="What it does" + USAGE.split("\nWhat it does", 1)[1] + """
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
    # A run made without charts is rebuilt without them, so --report
    # rewrites its directory as the run left it.
    if args.no_charts or meta.get("charts_note") == NO_CHARTS:
        chart_files, chart_note = [], NO_CHARTS
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
    sys.path.insert(0, BENCH_SRC)  # scaling.py
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
                chart_note = NO_CHARTS
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
