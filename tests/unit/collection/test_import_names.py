"""Names are the files' own (issue 29 item 3): no import renames a module of the collection, so that
``grep "points\\."`` finds every caller of hooks/points.py. An alias may only be the name or ``_`` + the name."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# Ansible's own idioms (ansible.constants as C, the default callback's class), not modules of this collection.
ALLOWED = {("constants", "C"), ("CallbackModule", "DefaultCallback")}


def renaming_imports(paths, root=REPO):
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for alias in node.names:
                name = alias.name.rsplit(".", 1)[-1]
                if alias.asname and alias.asname not in (name, "_" + name) and (name, alias.asname) not in ALLOWED:
                    found.append("%s:%d %s as %s" % (path.relative_to(root), node.lineno, alias.name, alias.asname))
    return found


def test_no_import_renames_a_module():
    found = renaming_imports(sorted((REPO / "plugins").rglob("*.py")))
    assert not found, "import it under its own name (or _name):\n%s" % "\n".join(found)


def test_the_check_finds_a_renaming_import(tmp_path):
    (tmp_path / "a.py").write_text("from ..hooks import points as _hook_deploy\nfrom ..kv import store as _store\n")
    assert renaming_imports([tmp_path / "a.py"], tmp_path) == ["a.py:1 points as _hook_deploy"]
