"""Names are the files' own (issue 29 item 3): no import renames a module of the collection, so that
``grep "points\\."`` finds every caller of hooks/points.py. Not even ``_`` + the name: a local that clashes with a
module's name is renamed instead (``catalog = _catalog.read_catalog(...)`` became ``cat = catalog.read_catalog(...)``)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# Ansible's own idioms (ansible.constants as C, the default callback's class), not modules of this collection.
ALLOWED = {("constants", "C"), ("CallbackModule", "DefaultCallback")}
# ``_`` + the name kept where the bare name is a public one of the same file (path, imported name, alias):
KEPT = {
    ("plugins/filter/collapse_spec.py", "collapse_spec", "_collapse_spec"),  # the filter maand.core.collapse_spec
    ("plugins/filter/schedule_order.py", "schedule_order", "_schedule_order"),  # the filter maand.core.schedule_order
    ("plugins/filter/gotemplate.py", "gotemplate", "_gotemplate"),  # the filter maand.core.gotemplate
    ("plugins/filter/gotemplate.py", "kv", "_kv"),  # the gotemplate filter's kv= option (playbooks pass it by name)
    ("plugins/plugin_utils/deploy/service.py", "callbacks", "_callbacks"),  # service.callbacks(run_dir, ctl), tests call it
    ("plugins/plugin_utils/ops/health_check.py", "run", "_run"),  # health_check.run, the action's and tests' entry point
    ("plugins/plugin_utils/ops/health_check.py", "status", "_status"),  # run()'s documented status= keyword (action, tests)
}


def renaming_imports(paths, root=REPO):
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for alias in node.names:
                name, rel = alias.name.rsplit(".", 1)[-1], path.relative_to(root).as_posix()
                if alias.asname and alias.asname != name and (name, alias.asname) not in ALLOWED \
                        and (rel, name, alias.asname) not in KEPT:
                    found.append("%s:%d %s as %s" % (rel, node.lineno, alias.name, alias.asname))
    return found


def test_no_import_renames_a_module():
    found = renaming_imports(sorted((REPO / "plugins").rglob("*.py")))
    assert not found, "import it under its own name (rename the local that clashes):\n%s" % "\n".join(found)


def test_the_check_finds_a_renaming_import(tmp_path):
    (tmp_path / "a.py").write_text("from ..hooks import points as _hook_deploy\nfrom ..kv import store as _store\n")
    assert renaming_imports([tmp_path / "a.py"], tmp_path) == ["a.py:1 points as _hook_deploy", "a.py:2 store as _store"]


def test_every_kept_alias_is_still_there():
    """A kept ``_name`` that is gone (renamed or removed) leaves KEPT, so it cannot hide a new one."""
    present = set()
    for path in sorted((REPO / "plugins").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                present.update((path.relative_to(REPO).as_posix(), a.name.rsplit(".", 1)[-1], a.asname) for a in node.names)
    assert KEPT <= present, sorted(KEPT - present)
