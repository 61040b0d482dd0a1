#!/usr/bin/python3
"""The sources follow docs/DESIGN.md's box table, read from the sources
themselves, headers included: every file of src/ belongs to one box, sits
in its box's layer folder (src/<layer>/), and calls only functions of its
own box, of `base`, or of a box its row names. The table itself keeps the
layers: each row's layer is one of the layer table's, rows come in layer
order, and a row names only boxes of its own layer or lower ones. Inline functions in headers
call across boxes without a trace in the objects of the box that wrote
them; this is the check that sees them (tests/boxes_test.sh checks the
objects).
Usage: layers_test.py SOURCE_DIR"""
import pathlib
import re
import sys

from design_tables import table_rows

CELL_FILE = re.compile(r"`src/([^`]+)`")
# A function declared or defined at the start of a line: the return type,
# then hz_name( (what clang-format leaves of every declaration here).
DECLARED = re.compile(r"^[A-Za-z_][\w \t*]*?\b(hz_\w+)\s*\(", re.M)
CALLED = re.compile(r"\b(hz_\w+)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
UNIVERSAL = "base"


def read_layers(design):
    """The layer table's names, bottom first."""
    return re.findall(r"^\| ([a-z]+) \| `src/\1/` \|", design.read_text(), re.M)


def check_table(rows, layers, failures):
    rank = {box: layers.index(layer) for box, layer, _, _ in rows
            if layer in layers}
    last = 0
    for box, layer, _, calls in rows:
        if layer not in layers:
            failures.append("box %s: %s is not a layer of the layer table" %
                            (box, layer))
            continue
        if rank[box] < last:
            failures.append("box %s (%s) comes after a box of a higher layer" %
                            (box, layer))
        last = max(last, rank[box])
        for callee in calls:
            if callee in rank and rank[callee] > rank[box]:
                failures.append("box %s (%s) may call %s, of a higher layer" %
                                (box, layer, callee))


def read_table(design):
    rows = []
    for cells in table_rows(design, "boxes", r"\| [a-z_]+ \| [a-z]+ \| `"):
        box, layer, files, calls = cells[:4]
        allowed = set(re.findall(r"[a-z_]+", calls))
        rows.append((box, layer, CELL_FILE.findall(files), allowed))
    return rows


def code_of(path):
    """A source file without its comments and string literals."""
    return STRING.sub('""', COMMENT.sub(" ", path.read_text()))


def main():
    root = pathlib.Path(sys.argv[1])
    src = root / "src"
    rows = read_table(root / "docs" / "DESIGN.md")
    layers = read_layers(root / "docs" / "DESIGN.md")
    failures = []
    if len(rows) < 10 or len(layers) < 3:
        failures.append("only %d boxes and %d layers in docs/DESIGN.md" %
                        (len(rows), len(layers)))
    check_table(rows, layers, failures)
    box_of, allowed = {}, {}
    for box, layer, files, calls in rows:
        allowed[box] = calls
        for f in files:
            if not f.startswith(layer + "/"):
                failures.append("src/%s of box %s is not in src/%s/" %
                                (f, box, layer))
            box_of[f] = box
    sources = sorted(p.relative_to(src).as_posix()
                     for p in src.rglob("*") if p.suffix in (".c", ".h"))
    for f in sources:
        if f not in box_of:
            failures.append("src/%s belongs to no box in docs/DESIGN.md" % f)
    for f in box_of:
        if not (src / f).exists():
            failures.append("docs/DESIGN.md names src/%s, which is missing" % f)
    owner = {}  # function -> box whose file declares or defines it
    codes = {f: code_of(src / f) for f in sources if f in box_of}
    for f, code in codes.items():
        for name in DECLARED.findall(code):
            owner.setdefault(name, box_of[f])
    crossings = 0
    for f, code in codes.items():
        mine = box_of[f]
        for name in sorted(set(CALLED.findall(code))):
            theirs = owner.get(name)
            if theirs is None or theirs == mine or theirs == UNIVERSAL:
                continue
            crossings += 1
            if theirs not in allowed[mine]:
                failures.append("src/%s (box %s) calls %s of box %s, which "
                                "its row does not name" % (f, mine, name, theirs))
    if crossings < 100:
        failures.append("only %d calls between boxes found" % crossings)
    for line in failures:
        print("FAIL " + line)
    if failures:
        print("layers: %d failed" % len(failures))
        return 1
    print("layers: %d boxes in %d layers and %d files, %d calls between "
          "boxes, all down" % (len(rows), len(layers), len(codes), crossings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
