# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a bucket: the workspace files into the model (stage 1).

model.py (load_bucket: maand.conf, workers.json, bucket.conf, the jobs, disabled.json), readers.py (one
reader per format), schemas.py, units.py (resources, versions, architectures), problems.py (the
error report), naming.py, job_checks.py (per-job checks of the manifest), content.py (content hashing
of job trees), storage.py (the state store seam: store() picks the bucket folder or PostgreSQL; the
data/ folder, atomic writes), locks.py (the bucket lock and the deploy lock, in either store),
state_pg.py (the PostgreSQL state store, its side of both locks and the deploy lock's holder process).

The door: model.py (load_bucket and the model's records); storage.py for what every stage persists;
locks.py for the locks.
"""
