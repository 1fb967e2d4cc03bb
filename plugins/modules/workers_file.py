#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

# This is a documentation stub: the work is done by the action plugin plugins/action/workers_file.py,
# on the controller (like ansible.builtin.debug).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: workers_file
short_description: Read a bucket's workers.json for probing, and write probed capacity back safely
version_added: "1.0.0"
description:
  - Controller-side half of the playbook C(maand.core.facts); runs on the controller, never on a worker.
  - With O(operation=load), reads C(<bucket>/maand.conf) and C(<bucket>/workspace/workers.json),
    validates them, and returns the workers to probe (filtered by O(labels) and O(hosts)) with the
    connection variables and inventory groups for M(ansible.builtin.add_host). Needs no prior build
    and no capacity in C(workers.json); C(host) (and C(labels)) are enough.
  - >-
    With O(operation=write), takes the registered M(maand.core.worker_facts) result of every
    targeted worker, compares it with C(workers.json), returns one line per changed worker
    (for example C(10.0.0.1: memory 4096 MB -> 7936 MB, cpu 2000 MHz -> 5600 MHz)), and writes
    C(memory) (V(<n> mb)), C(cpu) (V(<n> mhz)), C(cores) (an integer) and C(storage) (V(<n> mb), total size of the
    filesystem holding C(/opt/worker) or C(/opt), when the worker has one) back into the entries.
  - Every other field, the order of the workers and of their keys, and the file's style (2-space
    JSON indent, trailing newline) are kept. Nothing is written as V(null) and no field is added
    besides those three. A value already equal after unit conversion (V(8 gb) and 8192 MB) is
    left as written.
  - B(All or nothing.) If any targeted worker failed or was unreachable, nothing is written and
    the task fails listing every failed host by name with its reason.
  - The write is atomic. The new content goes to a temporary file in C(workspace/), is flushed and
    fsynced, gets the original file's mode (and owner when permitted), then replaces
    C(workers.json) with C(os.replace). An interrupt or crash leaves the old file intact; a temporary
    file left by a killed run is removed by the next write. The read-compare-write runs under the
    bucket lock C(<bucket>/data/.lock) shared with C(maand.core.build).
  - Unchanged values give C(changed=false) and nothing is written.
author:
  - maand.core developers (@maand-sh)
options:
  operation:
    description:
      - V(load) reads and validates the bucket and returns the targets; V(write) compares and writes.
    type: str
    choices: [load, write]
    default: write
  labels:
    description:
      - For O(operation=load), only workers carrying any of these labels (list or comma-separated
        string). Every worker carries the label C(worker).
    type: raw
  hosts:
    description:
      - For O(operation=load), only these workers (list or comma-separated string of C(host) values).
        A name not in C(workers.json) is an error. Combined with O(labels), both must match.
    type: raw
  results:
    description:
      - For O(operation=write), a dict of worker C(host) -> the registered result of
        M(maand.core.worker_facts) on that worker, for B(every) targeted worker, including the ones
        that failed or were unreachable (register with C(ignore_errors) and C(ignore_unreachable)).
    type: dict
  failed:
    description:
      - For O(operation=write), more failed workers, as a list of hosts or a dict host -> reason.
        Any entry makes the task fail without writing.
    type: raw
attributes:
  check_mode:
    support: full
    details: Computes the changes and returns them (and the diff) but writes nothing.
  diff_mode:
    support: full
    details: Returns the old and new C(workers.json) text.
extends_documentation_fragment: [maand.core.attributes, maand.core.bucket, maand.core.controller, maand.core.private]
notes:
  - Bad input fails with a message naming the file, the entry, the field and the fix, and writes
    nothing. This covers a C(workers.json) that is not valid JSON or not a list, an entry without
    C(host), duplicate hosts, and a missing C(maand.conf) or SSH key.
seealso:
  - module: maand.core.worker_facts
"""

EXAMPLES = r"""
- name: Workers to probe
  maand.core.workers_file:
    bucket: /srv/bucket
    operation: load
    labels: prod
  register: facts_load

- name: Write probed capacity (all or nothing)
  maand.core.workers_file:
    bucket: /srv/bucket
    results: "{{ dict(hosts | zip(hosts | map('extract', hostvars, 'probe'))) }}"
  vars:
    hosts: "{{ groups['maand_facts_targets'] }}"
"""

RETURN = r"""
needs:
  description: For O(operation=load), the commands the deploy will run on the workers (C(rsync), C(make),
    C(python3), and C(sudo) when maand.conf says C(use_sudo = true)), for M(maand.core.worker_facts).
  returned: operation=load
  type: list
  elements: str
lacking:
  description: For O(operation=write), the workers that lack one of those commands and which ones.
  returned: operation=write
  type: dict
needs_msg:
  description: For O(operation=write), what the workers lack, which worker, and the fix; empty when nothing.
  returned: operation=write
  type: str
targets:
  description: For O(operation=load), the selected workers in the build's order (C(position)).
  returned: operation=load
  type: list
  elements: dict
  contains:
    host:
      description: The worker's C(host).
      type: str
    labels:
      description: Its labels as build reads them (lower-cased, sorted, including C(worker)).
      type: list
      elements: str
    groups:
      description: C(maand_facts_targets) and C(label_<label>) (names as in the workspace inventory).
      type: list
      elements: str
  sample: [{"host": "10.0.0.1", "labels": ["prod", "worker"], "groups": ["maand_facts_targets", "label_prod", "label_worker"]}]
connection:
  description: For O(operation=load), connection variables from C(maand.conf).
  returned: operation=load
  type: dict
  sample: {"ansible_user": "agent", "ansible_port": 22, "ansible_ssh_private_key_file": "/srv/bucket/secrets/worker.key", "ansible_become": true}
warnings:
  description: For O(operation=load), build's warnings about C(maand.conf) and C(workers.json) (for example unknown keys).
  returned: operation=load, when there are any
  type: list
  elements: str
workers:
  description: For O(operation=load), the number of workers in C(workers.json).
  returned: operation=load
  type: int
path:
  description: Absolute path of C(workers.json).
  returned: success
  type: str
lines:
  description: One line per changed worker, in file order.
  returned: operation=write
  type: list
  elements: str
  sample: ["10.0.0.1: memory 4096 MB -> 7936 MB, cpu 2000 MHz -> 5600 MHz, cores unset -> 8, storage unset -> 102400 MB"]
updated:
  description: Hosts whose entry changed.
  returned: operation=write
  type: list
  elements: str
probed:
  description: Hosts whose facts were compared.
  returned: operation=write
  type: list
  elements: str
failed_hosts:
  description: Targeted workers that failed or were unreachable (nothing was written).
  returned: failure of operation=write
  type: list
  elements: str
msg:
  description: The changed lines, V(workers.json already up to date), or the error.
  returned: always
  type: str
"""
