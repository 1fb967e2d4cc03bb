# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Catalog (the build stage): model -> placement -> validation -> catalog (+ KV). Rank 3; the door is service.py.

service.py (build, compute), validate.py, catalog.py (data/catalog.json), catalog_schema.py,
fingerprint.py, certs.py and certs_build.py (the bucket CA and the jobs' leaves), kv_build.py,
prometheus_checks.py, jobspec_build.py, maand_db.py (taking over a bucket from maand), prune.py (the catalog
and the KV after a deploy cleaned removed allocations).
"""
