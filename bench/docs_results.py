#!/usr/bin/python3
"""Copy the per-benchmark tables and charts of one results directory into
docs/benchmarks.md, between the RESULTS markers.
Usage: bench/docs_results.py results/<dir> "<command that produced it>" [NAME]
NAME picks the marker pair <!-- NAME BEGIN --> / <!-- NAME END -->
(default RESULTS), so the page can hold more than one results set.
"""
import os
import pathlib
import re
import sys

BEGIN, END = "<!-- RESULTS BEGIN -->", "<!-- RESULTS END -->"


def markers(argv):
    name = argv[3] if len(argv) > 3 else "RESULTS"
    return "<!-- %s BEGIN -->" % name, "<!-- %s END -->" % name


def main():
    global BEGIN, END
    BEGIN, END = markers(sys.argv)
    out = pathlib.Path(sys.argv[1])
    command = sys.argv[2]
    summary = (out / "summary.md").read_text()
    header = summary.split("\n## ")[0]
    meta = [l for l in header.splitlines() if l.startswith("- ")]
    sections = re.split(r"\n(?=## )", summary)
    tables = []
    for sec in sections:
        title = sec.splitlines()[0]
        if not title.startswith("## ") or title.startswith(
                ("## Detailed", "## Charts", "## Cases", "## Failed")):
            continue
        lines = sec.splitlines()
        # keep the heading and the first table of the section
        first = []
        seen_table = False
        for line in lines[1:]:
            if line.startswith("|"):
                seen_table = True
                first.append(line)
            elif seen_table:
                break
        tables.append("### " + title[3:] + "\n\n" + "\n".join(first))
    charts = sorted(p.name for p in out.glob("*.png"))
    root = pathlib.Path(__file__).resolve().parent.parent
    page = root / "docs" / "benchmarks.md"
    rel = pathlib.Path(os.path.relpath(out.resolve(), page.parent)).as_posix()
    shown = pathlib.Path(os.path.relpath(out.resolve(), root)).as_posix()
    body = [BEGIN, "",
            f"Produced by `{command}` on this project's 2-core machine; "
            f"full data (raw runs, CI, CV, RSS) in [`{shown}/summary.md`]({rel}/summary.md).",
            "Ratios are hakozuna vs each peer from the same interleaved runs, "
            "> 1 means hakozuna is better; the note column says where hakozuna loses.",
            ""] + meta + [""] + tables + [""] + \
           [f"![{c}]({rel}/{c})" for c in charts] + ["", END]
    text = page.read_text()
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    page.write_text(text[:start] + "\n".join(body) + text[stop:])


if __name__ == "__main__":
    main()
