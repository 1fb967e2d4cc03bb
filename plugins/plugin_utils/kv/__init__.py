# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""KV: the KV store (data/kv.json), its secrets and the template function map.

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

store.py (data/kv.json with maand's versions and history), secrets.py (AES-GCM as maand), functions.py
(namespaces, read rules, the template function map), gotemplate.py (Go text/template), prometheus.py
(maand's Prometheus support).

The door: store.py (KVStore) for the KV, functions.py for what templates read.
"""
