"""The PNG charts of a results directory (matplotlib, when installed)."""

import os

from .common import HZ, by_family, higher_is_better, log
from .cases import MT_LANES, MT_R
from .report import rss_keys

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
    items = [t for t in items if t[0].params.get("pinned") != "yes"
             and t[0].params.get("backpressure") != "no"]
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
