# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: job_create
short_description: "Scaffold a new job in a maand bucket"
version_added: 1.0.0
description:
  - "Writes C(workspace/jobs/<job>/) with a job that builds and deploys as it is - C(manifest.json) (version
    1.0.0, selector C(worker), one pool port C(<job>_port), a tcp and http health check on it), an idempotent
    C(Makefile) (start checks its pid file and is safe to retry; stop, restart, reload, status - exit code 0
    only when running), C(<job>.conf.tpl) that reads the pool port from the KV
    (C({{ get \"maand/bucket\" \"<job>_port\" }})) and C(server.py), a stdlib HTTP server listening on it."
  - "Never overwrites - an existing job folder is an error naming it, and nothing is written."
  - "The name must be lower-case letters, digits and C(_), starting with a letter (the port name is derived from it)."
author:
  - maand.core developers (@maand-sh)
options:
  job:
    description: The new job's name.
    type: str
    required: true
attributes:
  check_mode:
    support: full
    details: Checks the name and the bucket and lists the files it would write; writes nothing.
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.bucket,
                                 maand.core.controller]
notes:
  - The playbook C(maand.core.job_create) runs this module with C(-e maand_job=<name>) and C(-e maand_bucket=DIR).
"""

EXAMPLES = r"""
- name: Create the api job
  maand.core.job_create:
    bucket: /srv/bucket
    job: api
"""

RETURN = r"""
path:
  description: The new job folder.
  returned: success
  type: str
  sample: /srv/bucket/workspace/jobs/api
files:
  description: The files written (in check mode, the files that would be written).
  returned: success
  type: list
  elements: str
port:
  description: The name of the job's pool port (a key of the C(maand/bucket) KV namespace after build).
  returned: success
  type: str
  sample: api_port
"""
