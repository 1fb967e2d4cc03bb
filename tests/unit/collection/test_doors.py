"""Doors are kept (issue 29 item 2).

Each package of plugins/plugin_utils names its door in ``__init__.py``: ``__all__`` lists what the other
packages and the plugins may use. The plugins (action, modules, filter, lookup, inventory, callback) import
the core only through those doors, and at most MAX_PLUGIN_DOORS distinct ones; every name a plugin takes
from a door is in its ``__all__``. Inside the core, a module that imports another package's inner module
is listed in CORE_REACH, an allowlist that may only shrink (an entry no longer needed fails the test).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CORE = REPO / "plugins" / "plugin_utils"
ROOT = "ansible_collections.maand.core.plugins.plugin_utils"
MAX_PLUGIN_DOORS = 12
# ops is a set of verbs: its door names the verb modules (ops.status, ops.gc, ...) and plugins use ops.<verb>.<name>.
NAMESPACE_DOORS = {"ops"}
# Core modules that reach past another package's door: importing module -> the inner modules of other packages it
# imports (the state of issue 29, when the doors were made). May only shrink: move an import to the door, drop it here.
_REACH = {
    "adapter.action_base": {"deploy.remote"},
    "adapter.controller": {"deploy.gate", "deploy.remote", "deploy.service", "hooks.run"},
    "adapter.extra_vars": {"ops.extra_vars"},
    "adapter.specs": {"hooks.run"},
    "catalog.catalog": {"bucket.schemas", "bucket.storage", "worker.layout"},
    "catalog.fingerprint": {"bucket.content"},
    "catalog.kv_build": {"kv.functions", "kv.store"},
    "catalog.prune": {"bucket.locks", "kv.store"},
    "catalog.service": {"bucket.job_checks", "bucket.locks", "bucket.model", "bucket.problems", "kv.store",
                        "placement.explain", "placement.place", "placement.select"},
    "catalog.validate": {"bucket.model", "bucket.units"},
    "certs.build": {"kv.functions", "worker.layout"},
    "certs.ca": {"bucket.storage"},
    "deploy.adopt": {"bucket.locks", "catalog.catalog"},
    "deploy.callbacks": {"catalog.catalog", "hooks.points", "hooks.run"},
    "deploy.certs": {"kv.functions", "kv.store"},
    "deploy.pin": {"bucket.storage", "worker.agent"},
    "deploy.pre_deploy": {"bucket.content"},
    "deploy.reconcile": {"bucket.content", "bucket.job_checks"},
    "deploy.record": {"bucket.storage"},
    "deploy.remote": {"worker.agent", "worker.journal", "worker.layout", "worker.sandbox"},
    "deploy.rsync": {"bucket.storage"},
    "deploy.run": {"bucket.storage", "catalog.catalog"},
    "deploy.scope": {"kv.functions", "worker.agent", "worker.layout"},
    "deploy.service": {"bucket.locks", "catalog.catalog", "catalog.fingerprint",
                       "catalog.maand_db", "catalog.prune", "hooks.commands", "hooks.points"},
    "deploy.stage": {"bucket.content", "bucket.storage", "catalog.kv_build", "kv.functions", "kv.secrets",
                     "kv.store", "worker.layout"},
    "health.probes": {"certs.ca"},
    "health.waiter": {"bucket.job_checks"},
    "hooks.points": {"bucket.storage", "catalog.catalog", "kv.store"},
    "hooks.run": {"kv.functions", "kv.store"},
    "hooks.runtime_api": {"kv.functions", "kv.store"},
    "jobspec.build": {"bucket.model", "bucket.storage"},
    "jobspec.deploy": {"bucket.content", "bucket.storage", "worker.agent"},
    "jobspec.image": {"bucket.readers"},
    "jobspec.layers": {"bucket.content", "bucket.storage"},
    "kv.functions": {"bucket.readers", "worker.layout"},
    "kv.secrets": {"bucket.storage"},
    "kv.store": {"bucket.locks", "bucket.storage"},
    "ops.cat": {"bucket.model", "bucket.problems", "bucket.storage", "catalog.catalog", "catalog.kv_build",
                "deploy.record", "deploy.run", "kv.functions", "kv.store"},
    "ops.cert_metrics": {"bucket.model", "catalog.kv_build", "kv.functions"},
    "ops.extra_vars": {"bucket.problems"},
    "ops.facts": {"bucket.locks", "bucket.model", "bucket.naming", "bucket.problems", "bucket.storage",
                  "bucket.units"},
    "ops.gc": {"bucket.locks", "catalog.catalog", "kv.store", "worker.layout"},
    "ops.health_check": {"bucket.job_checks", "bucket.problems", "catalog.catalog", "deploy.remote", "deploy.rsync",
                         "hooks.commands", "hooks.points", "hooks.run"},
    "ops.info": {"bucket.storage", "deploy.record"},
    "ops.job_target": {"bucket.job_checks", "catalog.catalog", "deploy.plan", "deploy.remote"},
    "ops.logs": {"bucket.problems", "bucket.storage", "deploy.record"},
    "ops.run_command": {"bucket.problems"},
    "ops.state_move": {"bucket.locks", "bucket.state_pg", "bucket.storage", "catalog.catalog", "deploy.run",
                       "kv.store"},
    "ops.status": {"bucket.problems", "catalog.catalog", "deploy.plan", "hooks.commands"},
    "ops.worker_sync": {"catalog.catalog", "deploy.plan", "worker.layout"},
    "placement.hardware": {"bucket.units"},
    "prometheus.checks": {"bucket.job_checks"},
    "prometheus.consoles": {"bucket.content", "kv.functions"},
    "prometheus.remote_write": {"kv.store"},
    "prometheus.scrape_catalog": {"kv.functions"},
    "prometheus.scrape_template": {"kv.functions"},
}
CORE_REACH = {(src, dst) for src, dsts in _REACH.items() for dst in dsts}


def packages():
    return sorted(p.parent.name for p in CORE.glob("*/__init__.py"))


def plugin_files():
    return sorted(p for p in (REPO / "plugins").glob("*/*.py") if p.parent.name != "plugin_utils")


def door(pkg):
    return importlib.import_module("%s.%s" % (ROOT, pkg))


def _core_imports(tree, own_pkg=None):
    """(lineno, package, inner module or None, names) of every import of the core in a parsed file."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if own_pkg is None or node.level != 2 or not node.module:
                continue
            parts = node.module.split(".")
        elif node.module and (node.module == ROOT or node.module.startswith(ROOT + ".")):
            parts = node.module[len(ROOT) + 1:].split(".") if node.module != ROOT else []
        else:
            continue
        names = [a.name for a in node.names]
        if not parts:  # from ROOT import pkg
            out.extend((node.lineno, name, None, []) for name in names)
        else:
            out.append((node.lineno, parts[0], parts[1] if len(parts) > 1 else None, names))
    return out


@pytest.mark.parametrize("pkg", packages())
def test_every_package_names_its_door(pkg):
    mod = door(pkg)
    names = getattr(mod, "__all__", None)
    assert names, "plugins/plugin_utils/%s/__init__.py: no __all__ (the package's door)" % pkg
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, "plugins/plugin_utils/%s/__init__.py: __all__ names what it does not define: %s" % (pkg, missing)


def _plugin_use():
    """{plugin file: [(lineno, package, inner module or None, names taken)]} plus attribute uses of door aliases."""
    use = {}
    for path in plugin_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rows = _core_imports(tree)
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == ROOT:
                aliases.update({a.asname or a.name: a.name for a in node.names})
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                rows.append((node.lineno, aliases[node.value.id], None, [node.attr]))
        use[path.relative_to(REPO).as_posix()] = rows
    return use


def test_plugins_import_the_core_only_through_doors():
    bad = []
    for rel, rows in _plugin_use().items():
        for lineno, pkg, inner, names in rows:
            if inner is not None:
                bad.append("%s:%d imports %s.%s (use the door plugin_utils.%s)" % (rel, lineno, pkg, inner, pkg))
                continue
            exported = set(door(pkg).__all__)
            bad.extend("%s:%d takes %s.%s, which is not in its door's __all__" % (rel, lineno, pkg, n)
                       for n in names if n not in exported)
    assert not bad, "\n".join(bad)


def test_plugins_use_few_doors():
    used = {row[1] for rows in _plugin_use().values() for row in rows}
    assert len(used) <= MAX_PLUGIN_DOORS, sorted(used)


def test_namespace_doors_export_verb_modules_only():
    for pkg in NAMESPACE_DOORS:
        for name in door(pkg).__all__:
            assert (CORE / pkg / ("%s.py" % name)).is_file(), "%s.%s is not a verb module" % (pkg, name)


def _core_reach():
    found = set()
    for path in sorted(CORE.glob("*/*.py")):
        own = path.parent.name
        if path.stem == "__init__":
            continue
        for _lineno, pkg, inner, names in _core_imports(ast.parse(path.read_text(encoding="utf-8")), own):
            if pkg == own:
                continue
            targets = [inner] if inner else [n for n in names if (CORE / pkg / ("%s.py" % n)).is_file()]
            found.update(("%s.%s" % (own, path.stem), "%s.%s" % (pkg, t)) for t in targets)
    return found


def test_the_core_goes_through_doors_or_is_listed():
    reach = _core_reach()
    new = sorted(reach - CORE_REACH)
    gone = sorted(CORE_REACH - reach)
    assert not new, "imports past another package's door (use its door, or list them in CORE_REACH):\n%s" % (
        "\n".join("%s -> %s" % pair for pair in new))
    assert not gone, "CORE_REACH lists imports that are gone (drop them):\n%s" % "\n".join("%s -> %s" % p for p in gone)


def test_a_door_loads_what_it_names_when_asked_and_nothing_else():
    ops = door("ops")
    assert ops.status.__name__ == ROOT + ".ops.status"  # a verb module (None in the table)
    assert door("catalog").read_catalog.__module__ == ROOT + ".catalog.catalog"
    assert "read_catalog" in dir(door("catalog"))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        door("catalog").nope  # noqa: B018 (the attribute access is the test)
