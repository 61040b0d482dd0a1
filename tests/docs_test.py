#!/usr/bin/python3
"""The README and the pages under docs/ hold together: every relative link
leads to a file of the repository, every #anchor to a heading of the page
it names (GitHub's slugs), no page sends the reader outside the project
(../shared), the README stays short (at most 250 lines), and
docs/DESIGN.md's table of run-time conditions of a block's route names
each condition the sources mark ([condition: NAME]) once, and no other,
in the file that marks it.
Usage: docs_test.py SOURCE_DIR"""
import pathlib
import re
import sys

from design_tables import table_rows

README_MAX_LINES = 250
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(text):
    """The lines of a Markdown text outside code fences."""
    inside = False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            yield line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    found = set()
    for line in prose(path.read_text()):
        m = re.match(r"#{1,6} (.*)", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else "%s-%d" % (base, n))
    return found


def check_page(root, page, failures):
    text = page.read_text()
    name = page.relative_to(root)
    if "../shared" in text:
        failures.append("%s sends the reader to ../shared" % name)
    links = 0
    for line in prose(text):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            links += 1
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            if root.resolve() not in dest.parents and dest != root.resolve():
                failures.append("%s: %s leaves the repository" % (name, target))
            elif not dest.exists():
                failures.append("%s: %s names no file" % (name, target))
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                failures.append("%s: %s names no heading of %s" %
                                (name, target, dest.name))
    return links


CONDITION = re.compile(r"\[condition: ([a-z-]+)\]")


def check_conditions(root, failures):
    """The conditions table of docs/DESIGN.md against the marks in src/."""
    marked = {}
    for path in sorted((root / "src").rglob("*.[ch]")):
        for name in CONDITION.findall(path.read_text()):
            if name in marked:
                failures.append("condition %s marked twice (%s, %s)" %
                                (name, marked[name], path.name))
            marked[name] = path.name
    rows = {}
    for cells in table_rows(root / "docs" / "DESIGN.md", "conditions",
                            r"\| [a-z-]+ \| `"):
        if cells[3] not in ("yes", "no"):
            failures.append("condition %s: switch is %r, not yes or no" %
                            (cells[0], cells[3]))
        rows[cells[0]] = cells[1]
    for name, file in marked.items():
        if name not in rows:
            failures.append("condition %s (%s) has no row in docs/DESIGN.md" %
                            (name, file))
        elif "`%s`" % file not in rows[name]:
            failures.append("condition %s: docs/DESIGN.md says %s, marked in %s"
                            % (name, rows[name], file))
    for name in rows:
        if name not in marked:
            failures.append("condition %s of docs/DESIGN.md is marked nowhere"
                            % name)
    if len(marked) < 10:
        failures.append("only %d conditions marked: is %s the repository?" %
                        (len(marked), root))
    return len(marked)


def main():
    root = pathlib.Path(sys.argv[1])
    pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    failures = []
    links = sum(check_page(root, page, failures) for page in pages)
    conditions = check_conditions(root, failures)
    lines = len((root / "README.md").read_text().splitlines())
    if lines > README_MAX_LINES:
        failures.append("README.md has %d lines, more than %d" %
                        (lines, README_MAX_LINES))
    if links < 20:
        failures.append("only %d links found: is %s the repository?" %
                        (links, root))
    for f in failures:
        print("FAIL " + f)
    if failures:
        print("docs: %d failed" % len(failures))
        return 1
    print("docs: %d pages, %d links, all lead somewhere; %d conditions of a "
          "route, each in docs/DESIGN.md" % (len(pages), links, conditions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
