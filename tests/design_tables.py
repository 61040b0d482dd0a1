"""The tables docs/DESIGN.md keeps for the tests, between HTML comment
markers: `<!-- NAME: ... -->` opens one, `<!-- NAME end -->` closes it."""
import re


def table_rows(design, name, row):
    """The cells of each row of table NAME of `design` (a path) that
    matches the regular expression `row`, stripped."""
    rows = []
    inside = False
    for line in design.read_text().splitlines():
        if line.startswith("<!-- %s:" % name):
            inside = True
        elif line.startswith("<!-- %s end" % name):
            inside = False
        elif inside and re.match(row, line):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows
