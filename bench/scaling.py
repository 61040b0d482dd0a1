"""scaling: how hakozuna's shared writes grow with the thread count.

This machine has 2 cores, so timing cannot show how 64 or 256 would
behave; counting can. Each run is mt_remote (guard lane 16-2048 B and main
lane 16-32768 B, R = 90 % remote frees, threads unpinned) with a fixed
number of iterations per thread, under hakozuna with HZ_STATS_JSON set;
the "sync" object of that JSON gives, per million operations, the lock
acquisitions of each lock, inbox pushes, CAS retries, inbox takes and
live-count publications. Flat lines mean nothing is shared per operation
more often with more threads.

Writes scaling.csv, scaling.md and (with matplotlib) scaling.png into the
results directory given. Used by `harness.py --scaling`.
"""
import csv
import json
import os
import subprocess
import tempfile

THREADS = [1, 4, 16, 64, 256]
# lane: (min, max, iterations per thread, slots per thread); main keeps
# fewer slots so 256 threads stay within a few hundred MiB.
LANES = {"guard": (16, 2048, 200_000, 400), "main": (16, 32768, 100_000, 100)}
R = 90
RING = 65536
COUNTS = ["segment_locks", "large_locks", "pool_locks", "collect_locks", "class_heap_locks",
          "inbox_pushes", "cas_retries", "inbox_takes", "live_publishes"]


def run_one(program, lib, lane, t, log):
    lo, hi, iters, ws = LANES[lane]
    fd, path = tempfile.mkstemp(prefix="hz-scaling-", suffix=".json")
    os.close(fd)
    env = dict(os.environ, LD_PRELOAD=lib, HZ_STATS_JSON=path, BENCH_NO_PIN="1")
    cmd = [program, str(t), str(iters), str(ws), str(lo), str(hi), str(R), str(RING)]
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=300)
        with open(path) as f:
            sync = json.load(f)["sync"]
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        log("scaling: %s T=%d failed: %s" % (lane, t, e))
        return None
    finally:
        os.unlink(path)
    if p.returncode != 0:
        log("scaling: %s T=%d exited %d" % (lane, t, p.returncode))
        return None
    row = {"lane": lane, "threads": t, "ops": sync["ops"]}
    for k in COUNTS:
        row[k] = sync[k]
        row[k + "_per_mop"] = sync[k + "_per_mop"]
    return row


def write_csv(path, rows):
    fields = ["lane", "threads", "ops"] + [k + s for k in COUNTS for s in ("", "_per_mop")]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def write_md(path, rows, chart):
    out = ["# Shared writes per million operations, by thread count", "",
           "mt_remote, R = %d %%, threads unpinned, fixed work per thread "
           "(guard: %d iterations, WS %d; main: %d iterations, WS %d); counts "
           "from hakozuna's HZ_STATS_JSON."
           % (R, LANES["guard"][2], LANES["guard"][3], LANES["main"][2],
              LANES["main"][3]), ""]
    head = "| lane | T | " + " | ".join(k.replace("_", " ") for k in COUNTS) + " |"
    out += [head, "|" + "---|" * (len(COUNTS) + 2)]
    for r in rows:
        out.append("| %s | %d | " % (r["lane"], r["threads"]) +
                   " | ".join("%.1f" % r[k + "_per_mop"] for k in COUNTS) + " |")
    if chart:
        out += ["", "![shared writes by thread count](%s)" % chart]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def draw(path, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    lanes = [l for l in LANES if any(r["lane"] == l for r in rows)]
    fig, axes = plt.subplots(1, len(lanes), figsize=(6 * len(lanes), 4.2), squeeze=False)
    for ax, lane in zip(axes[0], lanes):
        mine = [r for r in rows if r["lane"] == lane]
        for k in COUNTS:
            ax.plot([r["threads"] for r in mine], [r[k + "_per_mop"] for r in mine],
                    marker="o", label=k.replace("_", " "))
        ax.set_xscale("log", base=2)
        ax.set_yscale("symlog", linthresh=1)
        ax.set_xlabel("threads")
        ax.set_ylabel("per million operations")
        ax.set_title("mt_remote %s, R=%d" % (lane, R))
        ax.grid(True, alpha=0.3)
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def run(outdir, program, lib, log):
    """Run the sweep; returns the rows written (empty if every run failed)."""
    rows = []
    for lane in LANES:
        for t in THREADS:
            log("scaling: %s T=%d" % (lane, t))
            row = run_one(program, lib, lane, t, log)
            if row is not None:
                rows.append(row)
    if not rows:
        return rows
    os.makedirs(outdir, exist_ok=True)
    write_csv(os.path.join(outdir, "scaling.csv"), rows)
    chart = "scaling.png" if draw(os.path.join(outdir, "scaling.png"), rows) else ""
    write_md(os.path.join(outdir, "scaling.md"), rows, chart)
    return rows
