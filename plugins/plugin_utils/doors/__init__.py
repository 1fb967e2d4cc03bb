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
tests/unit/collection/test_doors.py checks every package's door and that the plugins use doors only.
"""

from __future__ import annotations

import importlib

__all__ = ["lazy"]


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
