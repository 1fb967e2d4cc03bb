"""docs/architecture.md's code map is the layout (issue 29 item 3).

The code map (the table under "## Code map": package, rank, what it is) has one row per package of
plugins/plugin_utils (a folder with an __init__.py), its rank is the package's rank in the stage order
(tests/unit/collection/test_imports.py ORDER), and its description is the first line of the package's
__init__.py docstring, normalised: stripped, and without a trailing "PRIVATE to the collection." sentence (a
first line may end with it, "Name: what it is. PRIVATE to the collection."; with ": it can change at any
time" too). Every package says it is PRIVATE to the collection in that docstring.

PLANNED names the packages of the target layout that other branches of issue 29 are creating: a row may name one
before it exists. The set may only shrink: a PLANNED package that exists fails here until it leaves the set, and
from then on its row is checked like any other.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.unit.collection.test_imports import ORDER

REPO = Path(__file__).resolve().parents[3]
CORE = REPO / "plugins" / "plugin_utils"
DOC = REPO / "docs" / "architecture.md"
PLANNED = frozenset()
PRIVATE = re.compile(r"\s*PRIVATE to the collection(?:: it can change at any time)?\.\s*\Z")
ROW = re.compile(r"\|\s*`([a-z_]+)/`\s*\|\s*([-0-9.]+)\s*\|\s*(.+?)\s*\|\s*\Z")


def packages():
    return sorted(p.name for p in CORE.iterdir() if (p / "__init__.py").is_file())


def docstring(package):
    return ast.get_docstring(ast.parse((CORE / package / "__init__.py").read_text(encoding="utf-8"))) or ""


def description(package):
    """The first line of the package's docstring, normalised (see the module docstring)."""
    first = docstring(package).splitlines()[0] if docstring(package) else ""
    return PRIVATE.sub("", first.strip()).strip()


def code_map():
    """{package: (rank, description)} from docs/architecture.md's code map."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Code map\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = ROW.match(line.strip())
        if match:
            name, rank, what = match.groups()
            assert name not in rows, "code map: %s twice" % name
            rows[name] = (float(rank), what)
    return rows


def test_the_code_map_names_every_package_and_only_those():
    rows, present = code_map(), set(packages())
    landed = sorted(PLANNED & present)
    assert not landed, "drop %s from PLANNED in %s: the package exists, so its row is checked now" % (
        landed, Path(__file__).name)
    assert present - set(rows) == set(), "packages without a row in docs/architecture.md's code map"
    assert set(rows) - present - PLANNED == set(), "code map rows naming no package of plugins/plugin_utils"


def test_each_row_is_its_packages_first_docstring_line():
    rows = code_map()
    wrong = ["%s/: code map %r, __init__.py %r" % (name, rows[name][1], description(name))
             for name in packages() if name in rows and rows[name][1] != description(name)]
    assert not wrong, "the code map's descriptions are the packages' first docstring lines:\n" + "\n".join(wrong)


def test_each_row_has_its_packages_rank():
    rows = code_map()
    wrong = ["%s/: code map %s, ORDER %s" % (name, rank, ORDER.get(name)) for name, (rank, _what) in rows.items()
             if name not in PLANNED and ORDER.get(name) != rank]
    assert not wrong, "ranks in docs/architecture.md against test_imports.ORDER:\n" + "\n".join(wrong)
    ranks = [rank for rank, _what in rows.values()]
    assert ranks == sorted(ranks), "the code map lists the packages in the stage order"


def test_every_package_says_it_is_private():
    loud = [name for name in packages() if "PRIVATE to the collection" not in docstring(name)]
    assert not loud, "say 'PRIVATE to the collection: it can change at any time' in the docstring of %s" % loud


def test_the_normalisation():
    assert PRIVATE.sub("", "Go templates: Go's text/template engine. PRIVATE to the collection.") == \
        "Go templates: Go's text/template engine."
    assert PRIVATE.sub("", "KV: the store. PRIVATE to the collection: it can change at any time.") == "KV: the store."
    assert PRIVATE.sub("", "Ops: the day-2 verbs.") == "Ops: the day-2 verbs."
