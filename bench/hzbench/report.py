"""The report: summary.csv and summary.md from the summarised runs, with
the verdict of each row and the extra keys of each benchmark family."""

import csv
import os
import re

from .common import (
    HZ, by_family, fmt_count, fmt_dur, fmt_kb, fmt_num, higher_is_better)
from .cases import FAMILY_KEYS
from .stats import overlap

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
