# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KV: the KV store (data/kv.json), its secrets and the template function map.

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

store.py (data/kv.json with maand's versions and history), secrets.py (AES-GCM as maand), functions.py
(namespaces, read rules, the template function map over the Go template engine, gotemplate/). maand's
Prometheus support is the prometheus package.

The door: store.py (KVStore) for the KV, functions.py for what templates read.
"""

from __future__ import annotations

from ..doors import lazy

# The door: name -> the module that defines it, imported when first used (an action loads only what it needs).
_DOOR = {"AllocationData": "functions", "KVError": "functions", "KVReader": "functions",
         "is_private_key": "functions", "is_secret_ns": "functions", "render_allocation": "functions",
         "KVStoreError": "store", "SecretError": "secrets", "load_key": "secrets"}
__all__ = sorted(_DOOR)

__getattr__, __dir__ = lazy(__name__, _DOOR)
