# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: info
short_description: Print a summary of a maand bucket (maand info)
version_added: 1.0.0
description:
  - Runs on the controller (an action plugin; no connection is opened). Read-only.
  - "Prints maand's C(maand info) rows: the bucket id, the update sequence, the numbers of workers, jobs and
    allocations (active, disabled, removed); and the controller's own: where the state is kept (the bucket's
    C(data/) or a PostgreSQL state store), how many deploy records it keeps and the last deploy."
  - The update sequence lives on the workers (C(worker.json)); the controller knows it from the last deploy
    record (before any, from the update_seq a takeover from maand carried into the catalog, else 0).
  - A bucket without C(data/catalog.json) fails, naming the build to run.
author:
  - maand.core developers (@maand-sh)
options:
  format:  # description, type and default: maand.core.output
    choices: [table, json]
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.bucket.cwd,
                                 maand.core.controller, maand.core.output]
notes:
  - The playbook C(maand.core.info) runs this module; C(-e maand_format=json) prints JSON.
seealso:
  - module: maand.core.logs
  - module: maand.core.cat
"""

EXAMPLES = r"""
- name: Summarise the bucket
  maand.core.info:
    bucket: /srv/bucket

- name: The same as JSON
  maand.core.info:
    bucket: /srv/bucket
    format: json
  register: bucket_info
"""

RETURN = r"""
info:
  description: "The summary: bucket, bucket_id, update_seq, update_seq_from, workers, removed_workers, jobs,
    removed_jobs, allocations (total, active, disabled, removed), state_store, records_kept and last_deploy
    (run_id, outcome, finished, by, summary; null before the first recorded deploy)."
  returned: success
  type: dict
  sample: {"bucket_id": "0f2736e5-c303-4a3d-ad5b-4a78b488dbc0", "update_seq": 3, "workers": 3, "jobs": 2,
           "allocations": {"total": 5, "active": 5, "disabled": 0, "removed": 0}}
"""
