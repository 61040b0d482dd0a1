#!/usr/bin/python3
"""hakozuna benchmark harness: runs the benchmark suite under hakozuna and the
peer allocators and writes a reproducible comparison (`make bench`). The
harness is the package bench/hzbench (common, cases, stats, run, report,
charts, cli); `--help` explains every option."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hzbench.cli import main  # noqa: E402  (the path first)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
