# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The KV store and the template languages (stage 2).

store.py (data/kv.json with maand's versions and history), secrets.py (AES-GCM as maand), functions.py
(namespaces, read rules, the template function map), gotemplate.py (Go text/template). maand's Prometheus
support is the prometheus package.

The door: store.py (KVStore) for the KV, functions.py for what templates read.
"""
