"""The core's data flows one way (issue 9, item 5): the import graph of plugins/plugin_utils has no
cycle, counting late (function-level) imports too, and placement never reaches the explanation code."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[3] / "plugins" / "plugin_utils"
PACKAGE = "ansible_collections.maand.core.plugins.plugin_utils"


def core_imports(source, modules):
    """The core modules (names in `modules`) that `source` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 1 or node.module == PACKAGE:  # from . import _x / from ._x import y / absolute
                base = node.module if node.level == 1 else None
                names = [base] if base else [alias.name for alias in node.names]
            elif node.module and node.module.startswith(PACKAGE + "."):
                names = [node.module]
            else:
                names = []
        else:
            continue
        for name in names:
            if name and name.startswith(PACKAGE + "."):
                name = name[len(PACKAGE) + 1:]
            name = (name or "").split(".")[0]
            if name in modules:
                found.add(name)
    return found


def import_graph(root=CORE):
    files = {path.stem: path for path in sorted(root.glob("*.py")) if path.stem != "__init__"}
    return {name: core_imports(path.read_text(encoding="utf-8"), files) - {name} for name, path in files.items()}


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


# --- the detector itself, on synthetic graphs and sources ---------------------------------------------


def test_cycle_detector_finds_a_synthetic_cycle():
    cycle = find_cycle({"_a": {"_b"}, "_b": {"_c"}, "_c": {"_a"}, "_d": {"_a"}})
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"_a", "_b", "_c"}
    assert find_cycle({"_a": {"_b"}, "_b": {"_c"}, "_c": set()}) is None


def test_graph_builder_sees_every_import_form(tmp_path):
    (tmp_path / "_model.py").write_text("from . import _schemas\n\ndef load():\n    from . import _select\n")
    (tmp_path / "_select.py").write_text("from ._model import MAAND_CONF\n")
    (tmp_path / "_schemas.py").write_text("import json\nfrom %s import _units\n" % PACKAGE)
    (tmp_path / "_units.py").write_text("from %s._model import x\n" % PACKAGE)
    graph = import_graph(tmp_path)
    assert graph == {"_model": {"_schemas", "_select"}, "_select": {"_model"}, "_schemas": {"_units"},
                     "_units": {"_model"}}
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1]
    assert set(cycle) in ({"_model", "_select"}, {"_model", "_schemas", "_units"})


# --- the real core ---------------------------------------------------------------------------------------


def test_the_core_import_graph_has_no_cycle():
    graph = import_graph()
    assert {"_model", "_select", "_placement", "_explain", "_build"} <= set(graph)
    assert find_cycle(graph) is None, "import cycle: %s" % " -> ".join(find_cycle(graph))


@pytest.mark.parametrize("source, never", [
    ("_placement", "_explain"),  # placement returns shortfalls as data; _explain words them
    ("_select", "_model"),  # rules are compiled from the model, never the other way round
    ("_select", "_placement"),
    ("_placement", "_build"),
    ("_explain", "_build"),
    ("_fleet", "_select"),
])
def test_data_flows_one_way(source, never):
    assert never not in reachable(import_graph(), source) | {source}


def test_one_worker_index():
    """Selection and placement use _fleet.WorkerIndex; nobody builds the libraries' own indexes."""
    for name in ("_select", "_placement", "_explain", "_build"):
        text = (CORE / ("%s.py" % name)).read_text(encoding="utf-8")
        for other in ("FleetIndex(", "HardwareIndex(", "class Fleet"):
            assert other not in text, "%s builds its own worker index (%s)" % (name, other)
    assert "_fleet" in import_graph()["_placement"]
