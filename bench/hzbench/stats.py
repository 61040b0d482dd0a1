"""Statistics of a case's runs: medians and their confidence intervals,
the summary of every case and allocator, and whether two ranges overlap."""

import math
import statistics

from .common import HZ, higher_is_better, to_num

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


def overlap(a, b):
    return a.get("min") is not None and b.get("min") is not None and \
        a["min"] <= b["max"] and b["min"] <= a["max"]
