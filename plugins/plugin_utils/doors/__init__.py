# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Doors: how a package names what others may use, loaded when first used. PRIVATE to the collection: it can change at any time.

A package's ``__init__.py`` lists its door as a table, name -> the module of the package that defines it, and
hands it to ``lazy``::

    _DOOR = {"read_catalog": "catalog", "build": "service"}
    __all__ = sorted(_DOOR)
    __getattr__, __dir__ = lazy(__name__, _DOOR)

``from ..catalog import read_catalog`` then imports ``catalog/catalog.py`` only, when it is first asked for: an
action plugin, loaded in every forked worker, imports what it uses and nothing else. A table value of ``None``
names a module of the package itself (``ops.status``: the verb modules of ops are its doors).

An action plugin still resolves, when it is imported, every door name it uses (``load_used``, called by
adapter/action_base.MaandAction for each action class): the controller imports the plugin once, before it
forks a worker per task and host, and Ansible's collection loader compiles a module from its source at every
import (it keeps no bytecode), so a door first used inside a task would be compiled again in every fork.
tests/unit/collection/test_doors.py checks every package's door and that the plugins use doors only.
"""

from __future__ import annotations

import ast
import importlib
import sys
import types

__all__ = ["lazy", "load_used"]
_CORE = __name__.rsplit(".", 1)[0]  # plugins.plugin_utils: its packages are the doors


def lazy(package, table):
    """(__getattr__, __dir__) for the package named ``package`` whose door is ``table``."""
    module = importlib.import_module(package)

    def getattr_(name):
        if name not in table:
            raise AttributeError("module %r has no attribute %r" % (package, name))
        inner = importlib.import_module("." + (table[name] or name), package)
        value = inner if table[name] is None else getattr(inner, name)
        setattr(module, name, value)
        return value

    def dir_():
        return sorted(set(vars(module)) | set(table))

    return getattr_, dir_


def load_used(module_name):
    """Resolve every ``door.name`` the module ``module_name`` (an action plugin) uses, ``door`` being a package of
    the core it imported (``from ..plugin_utils import deploy``; then ``deploy.step`` loads deploy/service.py)."""
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        return
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):  # no readable source: its doors load when first used, in the task
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            door = vars(module).get(node.value.id)
            if isinstance(door, types.ModuleType) and hasattr(door, "__path__") \
                    and door.__name__.startswith(_CORE + "."):
                getattr(door, node.attr, None)  # None: a local of the same name (catalog.get), not a door name
