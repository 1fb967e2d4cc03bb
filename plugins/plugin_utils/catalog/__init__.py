# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Catalog: the build stage (model, placement, validation, then data/catalog.json and the KV).

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

model -> placement -> validation -> catalog (+ KV); the door is service.py.

service.py (build, compute), validate.py, catalog.py (data/catalog.json), catalog_schema.py,
fingerprint.py, freshness.py (which verbs run on the last built catalog of a stale workspace),
kv_build.py, maand_db.py (taking over a bucket from maand), prune.py (the catalog and the KV after a
deploy cleaned removed allocations). Build runs the job-spec checks of jobspec/, issues the certificates of certs/
and runs the _prometheus/ checks of prometheus/ (prometheus/checks.py).
"""

from __future__ import annotations

from ..doors import lazy

# The door: name -> the module that defines it, imported when first used (an action loads only what it needs).
_DOOR = {"CATALOG_REL": "catalog", "CatalogError": "catalog", "catalog_path": "catalog", "dumps": "catalog",
         "read_catalog": "catalog", "stale": "fingerprint", "read_kv": "kv_build", "allocation_table": "service",
         "build": "service", "compute": "service", "explain_short_jobs": "service", "freshness": None,
         "stale_note": "catalog"}
__all__ = sorted(_DOOR)

__getattr__, __dir__ = lazy(__name__, _DOOR)
