# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cat
short_description: Show a maand bucket's KV, allocations, jobs, workers, ports, deployments, certs or Prometheus files
version_added: 1.1.0
description:
  - Runs on the controller (an action plugin; no connection is opened). Read-only.
  - Prints one readable table, as maand's C(maand cat ...) commands do, from C(data/catalog.json) and the KV
    store build keeps in C(data/kv.json).
  - C(kv) lists every live key with its version and the time it was last written; secrets
    (C(secrets/job/<job>)) show as C(***) unless O(reveal=true), which decrypts them with C(secrets/kv.key).
  - C(deployments) lists the catalog's allocations with the version build placed, and, when the controller
    keeps a deploy run in C(data/.deploy-run/<run>) (a run that failed or is still running), what that run
    planned for each allocation and how far it got. What each worker runs is kept on the worker.
  - C(prometheus) lists the jobs that ship a C(_prometheus/) folder (as C(maand cat prometheus)), whether each
    has a scrape file and how many alert files, runbooks and dashboard files the deploy ships to a Prometheus
    server job; with O(file) it prints one file of one job's C(_prometheus/) (C(maand cat prometheus get));
    with O(scrape) the expanded scrape configs a deploy renders for C({{ scrapeConfigs }})
    (C(maand cat prometheus scrape)).
  - An unknown view, job or worker fails with the known names and a "did you mean".
author:
  - maand.core developers (@maand-sh)
options:
  view:
    description: What to show, one of C(kv), C(allocations), C(jobs), C(workers), C(ports), C(deployments), C(certs) or
      C(prometheus).
    type: str
    required: true
  jobs:
    description: Only these jobs (for C(kv), the namespaces of these jobs).
    type: list
    elements: str
    default: []
  workers:
    description: Only these workers (their workers.json C(host)); for C(kv), the namespaces of these workers.
    type: list
    elements: str
    default: []
  reveal:
    description: Decrypt and show secrets in the C(kv) view (needs C(secrets/kv.key)).
    type: bool
    default: false
  deleted:
    description: In the C(kv) view, also list deleted keys (kept as history).
    type: bool
    default: false
  file:
    description:
      - In the C(prometheus) view, print this file of the job's C(_prometheus/) folder (the job named in O(jobs), exactly
        one), for example C(alerts/slo.yaml); C(scrape) means C(scrape.yaml), C(scrape.tpl) C(scrape.yaml.tpl).
    type: str
    default: ""
  scrape:
    description:
      - In the C(prometheus) view, print the scrape configs with C(maand:port/...) and C(maand:job) expanded, as a
        deploy renders C({{ scrapeConfigs }}) (only the jobs in O(jobs) when given).
    type: bool
    default: false
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.bucket.cwd,
                                 maand.core.controller]
notes:
  - The playbook C(maand.core.cat) runs this module with C(-e maand_cat=VIEW), C(-e maand_jobs=a,b),
    C(-e maand_workers=10.0.0.1), C(-e maand_reveal=true), C(-e maand_file=alerts/slo.yaml) and
    C(-e maand_scrape=true).
"""

EXAMPLES = r"""
- name: The KV of the api job
  maand.core.cat:
    bucket: /srv/bucket
    view: kv
    jobs: [api]

- name: The ports the pool gave
  maand.core.cat:
    bucket: /srv/bucket
    view: ports

- name: One alert file of the api job's _prometheus/
  maand.core.cat:
    bucket: /srv/bucket
    view: prometheus
    jobs: [api]
    file: alerts/slo.yaml

- name: Allocations on one worker
  maand.core.cat:
    bucket: /srv/bucket
    view: allocations
    workers: [10.0.0.1]
"""

RETURN = r"""
table:
  description: The printed lines (title, header, rule, rows, notes).
  returned: success
  type: list
  elements: str
header:
  description: The column names.
  returned: success
  type: list
  elements: str
  sample: [NAMESPACE, KEY, VALUE, VERSION, MODIFIED]
rows:
  description: One dict per row, keyed by the lower-cased column names.
  returned: success
  type: list
  elements: dict
  sample: [{"namespace": "maand/bucket", "key": "api_http_port", "value": "30000", "version": "1",
            "modified": "2026-11-23 11:00:00Z"}]
"""
