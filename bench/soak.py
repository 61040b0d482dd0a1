"""soak: does hakozuna's memory level off over a long run, and does every
block come back?  (`make soak`, or /usr/bin/python3 bench/soak.py.)

Runs build/bench/soak under the library (default build/libhakozuna.so) for
--minutes (default 30), alternating server rounds and cross-thread
hand-offs in one process, and reads its RSS samples (every 10 s). Then
runs it with 0 minutes: the blocks libc itself keeps, the baseline. Both
write the statistics as JSON (HZ_STATS_JSON).

Passes when
  - the peak RSS of each later quarter of the samples is within +-10% of
    the first quarter's peak (memory levels off, neither creeping up nor
    collapsing), and
  - at exit the live small blocks (per class) and live large bytes equal
    the baseline's: everything the soak allocated came back.
Prints one line per check and the samples' quarter peaks; exit status 0
when all pass, 1 otherwise.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(program, lib, minutes, round_s, sample_s, json_path):
    env = dict(os.environ, LD_PRELOAD=lib, HZ_STATS_JSON=json_path)
    out = subprocess.run([program, str(minutes), str(round_s), str(sample_s)],
                         env=env, capture_output=True, text=True,
                         timeout=minutes * 60 + 600)
    if out.returncode != 0:
        sys.exit("soak: %s exited with %d:\n%s" % (program, out.returncode,
                                                   out.stderr))
    samples = [int(m.group(1)) for m in
               re.finditer(r"^sample t=\d+ rss_kb=(\d+)$", out.stdout, re.M)]
    with open(json_path) as f:
        return samples, json.load(f)


def live_blocks(stats):
    """Live blocks per class (classes with any), and live large bytes."""
    classes = {c["class"]: c["live"] for c in stats["classes"] if c["live"]}
    return classes, stats["large"]["live_bytes"]


def quarter_peaks(samples):
    n = len(samples)
    return [max(samples[n * q // 4:max(n * (q + 1) // 4, n * q // 4 + 1)])
            for q in range(4)]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--round", type=int, default=20, help="seconds per round")
    ap.add_argument("--sample", type=int, default=10, help="seconds between samples")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libhakozuna.so"))
    ap.add_argument("--program", default=os.path.join(ROOT, "build", "bench", "soak"))
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        samples, stats = run(args.program, args.lib, args.minutes, args.round,
                             args.sample, os.path.join(tmp, "soak.json"))
        _, base = run(args.program, args.lib, 0, args.round, args.sample,
                      os.path.join(tmp, "base.json"))
    if len(samples) < 8:
        sys.exit("soak: only %d RSS samples; run longer" % len(samples))
    peaks = quarter_peaks(samples)
    print("soak: %d samples, RSS peak per quarter (MiB): %s" % (
        len(samples), " ".join("%.1f" % (p / 1024) for p in peaks)))
    for q in range(1, 4):
        ratio = peaks[q] / peaks[0]
        good = 0.9 <= ratio <= 1.1
        ok &= good
        print("%s quarter %d peak is %.3f x the first quarter's" %
              ("ok  " if good else "FAIL", q + 1, ratio))
    got, want = live_blocks(stats), live_blocks(base)
    good = got == want
    ok &= good
    print("%s live at exit: %s small blocks by class, %d large bytes "
          "(baseline %s, %d)" % ("ok  " if good else "FAIL", got[0], got[1],
                                 want[0], want[1]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
