"""The core's data flows one way (issue 9 item 5, issue 20 item 6).

plugins/plugin_utils is a set of stage packages. An import may only point down the stage order
(worker, gotemplate, bucket, jobspec, placement and kv, prometheus, certs, catalog, hooks, health, deploy, ops); only plugins/ import
adapter; no cycle between modules, counting late (function-level) imports; no action imports
another action; and inside placement, the rules never reach the explanation code."""

from __future__ import annotations

import ast
import functools
import graphlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CORE = REPO / "plugins" / "plugin_utils"
PACKAGE = "ansible_collections.maand.core.plugins.plugin_utils"
PLUGINS = "ansible_collections.maand.core.plugins"
# Rank of each stage: an import may only go to a lower rank (or within its own package).
ORDER = {"errors": -1, "doors": -1, "worker": 0, "gotemplate": 0.5, "bucket": 1, "jobspec": 1.5, "placement": 2, "kv": 2,
         "prometheus": 2.5, "certs": 2.5, "catalog": 3, "hooks": 4, "health": 4.5, "deploy": 5, "ops": 6, "adapter": 7}


def _targets(node, module_pkg):
    """Dotted core module names ('pkg.mod' or 'pkg') an import node names, resolved from module_pkg
    (the importing module's package under plugin_utils, or None outside it)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.level:
        if module_pkg is None:
            return []
        base = [module_pkg] if node.level == 1 else []
        base += (node.module or "").split(".") if node.module else []
        base = [b for b in base if b]
        if node.module and (node.level == 1 or len(base) > 1):
            return [".".join(base[:2])]
        return [".".join(base + [alias.name]) for alias in node.names]
    elif node.module == PACKAGE:
        return [alias.name for alias in node.names]
    elif node.module and node.module.startswith(PACKAGE + "."):
        rest = node.module[len(PACKAGE) + 1:].split(".")
        return [".".join(rest[:2])] if len(rest) > 1 else [rest[0] + "." + alias.name for alias in node.names]
    else:
        return []
    return [n[len(PACKAGE) + 1:] for n in names if n.startswith(PACKAGE + ".")]


def core_imports(source, module_pkg=None):
    """The core modules ('pkg.mod') a source imports, anywhere in the file (late imports too)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(_targets(node, module_pkg))
    return found


@functools.lru_cache(maxsize=None)  # parsed once per run, not once per test (callers only read it)
def import_graph(root=CORE):
    """{'pkg.mod': {'pkg.mod', ...}} of every module under root/<pkg>/."""
    graph = {}
    for path in sorted(root.glob("*/*.py")):
        if path.stem == "__init__":
            continue
        name = "%s.%s" % (path.parent.name, path.stem)
        graph[name] = core_imports(path.read_text(encoding="utf-8"), path.parent.name) - {name}
    return graph


def find_cycle(graph):
    """A cycle of the graph as [a, b, ..., a], or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))
    return None


def reachable(graph, start):
    seen, stack = set(), [start]
    while stack:
        for nxt in graph.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def against_the_order(graph):
    """Imports that point up (or across) the stage order: ['a.x -> b.y', ...]."""
    bad = []
    for source, targets in graph.items():
        for target in targets:
            src, dst = source.split(".")[0], target.split(".")[0]
            if src != dst and ORDER.get(dst, 99) >= ORDER.get(src, -1):
                bad.append("%s -> %s" % (source, target))
    return sorted(bad)


# --- the detectors themselves, on synthetic graphs and sources -----------------------------------------


def test_cycle_detector_finds_a_synthetic_cycle():
    cycle = find_cycle({"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}})
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a.x", "a.y", "a.z"}
    assert find_cycle({"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": set()}) is None


def test_graph_builder_sees_every_import_form(tmp_path):
    for pkg in ("bucket", "placement", "kv"):
        (tmp_path / pkg).mkdir()
    (tmp_path / "bucket" / "model.py").write_text("from . import schemas\n\ndef load():\n    from ..placement import select\n")
    (tmp_path / "placement" / "select.py").write_text("from ..bucket.model import MAAND_CONF\n")
    (tmp_path / "bucket" / "schemas.py").write_text("import json\nfrom %s.kv import store as _s\n" % PACKAGE)
    (tmp_path / "kv" / "store.py").write_text("from %s.bucket.model import x\n" % PACKAGE)
    graph = import_graph(tmp_path)
    assert graph == {"bucket.model": {"bucket.schemas", "placement.select"}, "placement.select": {"bucket.model"},
                     "bucket.schemas": {"kv.store"}, "kv.store": {"bucket.model"}}
    assert set(against_the_order(graph)) == {"bucket.model -> placement.select", "bucket.schemas -> kv.store"}
    assert find_cycle(graph) is not None


# --- the real core ---------------------------------------------------------------------------------------


def test_plugin_utils_holds_stage_packages():
    loose = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 2, "loose modules in plugin_utils: %s" % loose
    packages = sorted(p.name for p in CORE.iterdir() if p.is_dir() and not p.name.startswith("__"))
    assert set(packages) == set(ORDER), "a package without a place in the stage order: %s" % packages


def test_the_core_import_graph_has_no_cycle():
    graph = import_graph()
    assert {"bucket.model", "placement.select", "placement.place", "placement.explain", "catalog.service"} <= set(graph)
    assert find_cycle(graph) is None, "import cycle: %s" % " -> ".join(find_cycle(graph))


def test_imports_point_down_the_stage_order():
    assert against_the_order(import_graph()) == []


def test_only_plugins_import_the_ansible_adapter():
    graph = import_graph()
    users = sorted(m for m, targets in graph.items() if not m.startswith("adapter.")
                   and any(t.startswith("adapter.") for t in targets))
    assert users == []


def test_the_core_imports_nothing_of_ansible():
    for path in sorted(CORE.glob("*/*.py")):
        if path.parent.name == "adapter":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert node.module.split(".")[0] != "ansible", "%s imports %s" % (path, node.module)
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] != "ansible" for a in node.names), path


def test_no_action_imports_another_action():
    for path in sorted((REPO / "plugins" / "action").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert PLUGINS + ".action" not in text and "from . import" not in text, path.name


SHIPPED = ("worker.agent", "worker.sandbox", "worker.journal", "worker.maand_helper")  # to workers, beside hook scripts
# what a shipped file may import of what is shipped with it: the agent loads its sandbox and journal, installed
# beside it;
# the sandbox and the hooks' maand module derive the error family's base, installed or staged beside them
SHIPPED_TOGETHER = {"worker.agent": {"worker.sandbox", "worker.journal"}, "worker.sandbox": {"errors.MaandError"},
                    "worker.maand_helper": {"errors.MaandError"}}


def test_worker_code_is_stdlib_only():
    """What ships to workers (worker/agent.py and the sandbox.py and errors/__init__.py installed beside it,
    worker/maand_helper.py with errors/__init__.py beside it) imports nothing else of the collection: it runs
    there alone. The rest of worker/ (layout) imports only
    within worker/."""
    graph = import_graph()
    assert set(SHIPPED) <= set(graph)
    for name, targets in graph.items():
        if name in SHIPPED:
            assert targets <= SHIPPED_TOGETHER.get(name, set()), "%s imports %s" % (name, targets)
        elif name.startswith("worker."):
            assert all(t.startswith("worker.") for t in targets), "%s imports %s" % (name, targets)
    base = CORE / "errors" / "__init__.py"  # shipped with them: imports nothing at all
    assert not [n for n in ast.walk(ast.parse(base.read_text(encoding="utf-8"))) if isinstance(n, (ast.Import, ast.ImportFrom))]


@pytest.mark.parametrize("source, never", [
    ("placement.place", "placement.explain"),  # placement returns shortfalls as data; explain words them
    ("placement.select", "bucket.model"),  # rules are compiled from the model, never the other way round
    ("placement.select", "placement.place"),
    ("placement.fleet", "placement.select"),
])
def test_data_flows_one_way(source, never):
    assert never not in reachable(import_graph(), source) | {source}


def test_one_worker_index():
    """Selection and placement use placement.fleet.WorkerIndex; nobody builds the libraries' own indexes."""
    for name in ("placement/select", "placement/place", "placement/explain", "catalog/service"):
        text = (CORE / ("%s.py" % name)).read_text(encoding="utf-8")
        for other in ("FleetIndex(", "HardwareIndex(", "class Fleet"):
            assert other not in text, "%s builds its own worker index (%s)" % (name, other)
    assert "placement.fleet" in import_graph()["placement.place"]
