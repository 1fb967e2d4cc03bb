# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bucket: the workspace files read into the model, and the state store.

PRIVATE to the collection: it can change at any time. Do not import it from other collections or roles.

model.py (load_bucket: maand.conf, workers.json, bucket.conf, the jobs, disabled.json), readers.py (one
reader per format), schemas.py, units.py (resources, versions, architectures), problems.py (the
error report), naming.py, jobspec.py (the Maelstrom job-spec model), job_checks.py (per-job checks of
the manifest), content.py (content hashing of job trees), storage.py (the state store seam: store() picks the
bucket folder or PostgreSQL; the data/ folder, atomic writes, the bucket lock), state_pg.py (the
PostgreSQL state store and its deploy lock holder).

The door: model.py (load_bucket and the model's records); storage.py for what every stage persists.
"""
