"""What every part of the harness shares: the repository's paths, the
name of the allocator under test, logging, number formats, shell and git."""

import math
import os
import re
import subprocess
import sys


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH_SRC = os.path.join(REPO, "bench")
LIBDIR = "/usr/lib/x86_64-linux-gnu"
HZ = "hakozuna"


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


def git(*a):
    return sh(["git", "-C", REPO] + list(a))


def shutil_which(name):
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def nice_path(p):
    rel = os.path.relpath(p, os.getcwd())
    return p if rel.startswith("..") else rel


def higher_is_better(metric):
    return metric not in ("secs", "instr")


def by_family(summary):
    """The summary rows grouped by benchmark, in first-seen order."""
    families = {}
    for row in summary:
        families.setdefault(row[0].bench, []).append(row)
    return list(families.items())
