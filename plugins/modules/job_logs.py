# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: job_logs
short_description: Print the tail of a job's own logs on each of its workers (as nomad alloc logs, kubectl logs -l)
version_added: 1.0.0
description:
  - Runs on the controller (an action plugin; no connection is opened). Read-only.
  - "The playbook C(maand.core.job_logs) runs it twice: O(step=select) checks the job (a typo gets a did you mean),
    the workers and the number of lines and returns the workers holding an allocation of the job that is not
    removed (active or disabled), with the command that reads there; each worker then runs that command in
    C(/opt/worker/<bucket_id>/jobs/<job>): the newest file of the job's C(logs/) folder (as C(ls -t)), its last
    RV(lines) lines (of its last 64 KiB); O(step=report) prints one section per worker,
    C(=== <job>@<worker> logs/<file> ===) and the lines."
  - "The read never follows a link: C(logs/) is opened C(O_DIRECTORY|O_NOFOLLOW), the file C(O_NOFOLLOW) relative
    to it and checked to be a regular file with one link; a symlink or a hard link is named, not read (the
    folder is the job's, and the read may run as root)."
  - A worker where the logs could not be read (unreachable, the command failed) fails the task, naming it.
author:
  - maand.core developers (@maand-sh)
options:
  step:
    description: C(select) (the job's workers and the command) or C(report) (one section per worker).
    type: str
    required: true
    choices: [select, report]
  job:
    description: The job (C(-e maand_job)).
    type: str
    default: ""
  workers:
    description: Only these workers (C(-e maand_job_workers)); each must be a worker of the bucket.
    type: list
    elements: str
    default: []
  lines:
    description: How many lines of each worker's log (C(-e maand_lines)), 1 to 10000; 50 when not given.
    type: raw
  hosts:
    description: O(step=select), the play's hosts (C(--limit)); O(step=report), the workers read (the select step's
      RV(hosts)).
    type: list
    elements: str
    default: []
  answers:
    description: O(step=report), each worker's registered C(ansible.builtin.command) result.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details: Reads the logs in check mode too (nothing changes).
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.bucket,
                                 maand.core.controller]
notes:
  - "The playbook: C(ansible-playbook -i <bucket>/maand.yml maand.core.job_logs -e maand_job=api
    [-e maand_lines=N] [-e maand_job_workers=10.0.0.1,10.0.0.2] [--limit HOSTS])."
  - The job's own logs are what its processes write under C(logs/); what maand.core ran for it (make targets,
    hooks) is in the bucket logs (C(maand.core.logs)).
seealso:
  - module: maand.core.logs
"""

EXAMPLES = r"""
- name: The job's workers and the command that reads its logs there
  maand.core.job_logs:
    step: select
    bucket: /srv/bucket
    job: api
    lines: 20
    hosts: "{{ ansible_play_hosts_all }}"
  register: chosen

- name: Print one section per worker
  maand.core.job_logs:
    step: report
    bucket: /srv/bucket
    job: api
    hosts: "{{ chosen.hosts }}"
    answers: "{{ dict(chosen.hosts | zip(chosen.hosts | map('extract', hostvars, '_read') | map('default', {}))) }}"
"""

RETURN = r"""
hosts:
  description: The workers holding an allocation of the job (not removed), in the catalog's order.
  returned: step select
  type: list
  elements: str
argv:
  description: The command each worker runs (python3 -I -c <reader> N <job folder>).
  returned: step select
  type: list
  elements: str
lines:
  description: With O(step=select), the number of lines asked for; with O(step=report), the lines printed.
  returned: success
  type: raw
problems:
  description: The workers whose logs could not be read, and why.
  returned: step report
  type: list
  elements: str
"""
