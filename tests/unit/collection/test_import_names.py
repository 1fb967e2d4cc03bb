"""Names are the files' own (issue 29 item 3): no import renames a module of the collection, so that
``grep "points\\."`` finds every caller of hooks/points.py. Not even ``_`` + the name: a local that clashes with a
module's name is renamed instead (``catalog = _catalog.read_catalog(...)`` became ``cat = catalog.read_catalog(...)``),
and Ansible's own modules are imported under theirs too (``constants``, not ``C``)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def renaming_imports(paths, root=REPO):
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for alias in node.names:
                name, rel = alias.name.rsplit(".", 1)[-1], path.relative_to(root).as_posix()
                if alias.asname and alias.asname != name:
                    found.append("%s:%d %s as %s" % (rel, node.lineno, alias.name, alias.asname))
    return found


def test_no_import_renames_a_module():
    found = renaming_imports(sorted((REPO / "plugins").rglob("*.py")))
    assert not found, "import it under its own name (rename the local that clashes):\n%s" % "\n".join(found)


def test_the_check_finds_a_renaming_import(tmp_path):
    (tmp_path / "a.py").write_text("from ..hooks import points as _hook_deploy\nfrom ..kv import store as _store\n")
    assert renaming_imports([tmp_path / "a.py"], tmp_path) == ["a.py:1 points as _hook_deploy", "a.py:2 store as _store"]
