# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cat
short_description: Show a maand bucket's KV, allocations, jobs, workers, ports, job commands, deployments, certs or Prometheus files
version_added: 1.1.0
description:
  - Runs on the controller (an action plugin; no connection is opened). Read-only.
  - Prints one readable table, as maand's C(maand cat ...) commands do, from C(data/catalog.json) and the KV
    store build keeps in C(data/kv.json).
  - C(kv) lists every live key with its version and the time it was last written; secrets
    (C(secrets/job/<job>)) show as C(***) unless O(reveal=true), which decrypts them with C(secrets/kv.key).
  - "C(kv) with O(namespace) and O(key) shows that one key in full (maand's C(maand cat kv get)); a missing or
    deleted key fails, naming the keys of the namespace."
  - "C(deployments) lists each allocation's rollout state (maand's C(maand cat deployments)), from the deploy
    records the deploy keeps in the state store (see M(maand.core.logs)): C(removed) and C(disabled) from the
    catalog (C(disabled_restart) when build placed another version than the one promoted); C(deploying) while a
    run that has not finished plans a change to it; C(new) when no record knows it; C(restart) when build placed
    another version than the one promoted; else what its last run left: C(promoted), C(health_failed) (its gate
    failed), C(failed), C(reverted), C(rolled_back), C(stopped), C(held) (a canary), C(pending) (planned, not run)
    or C(unreachable). Beside it the tree hash promoted on the worker, a failed attempt's hash, the promoted and
    catalog versions, the run that last touched it and what that run did."
  - C(job_commands) lists every job command with its events and what it demands (maand's C(maand cat job_commands)).
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
    description: What to show, one of C(kv), C(allocations), C(jobs), C(workers), C(ports), C(deployments), C(certs),
      C(job_commands) or C(prometheus).
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
    description: Decrypt and show secrets in the C(kv) view, and the scrape configs that read a secret with
      O(scrape) (needs C(secrets/kv.key)).
    type: bool
    default: false
  deleted:
    description: In the C(kv) view, also list deleted keys (kept as history).
    type: bool
    default: false
  active:
    description: Only active allocations, in the C(deployments) and C(allocations) views (maand's C(--active));
      refused for the other views.
    type: bool
    default: false
  namespace:
    description: With O(key), in the C(kv) view, the namespace of the one key to show.
    type: str
    default: ""
  key:
    description: With O(namespace), in the C(kv) view, the one key to show in full.
    type: str
    default: ""
  file:
    description:
      - In the C(prometheus) view, print this file of the job's C(_prometheus/) folder (the job named in O(jobs), exactly
        one), for example C(alerts/slo.yaml); C(scrape) means C(scrape.yaml), C(scrape.tpl) C(scrape.yaml.tpl).
    type: str
    default: ""
  scrape:
    description:
      - In the C(prometheus) view, print the scrape configs with C(maand:port/...) and C(maand:job) expanded, as a
        deploy renders C({{ scrapeConfigs }}) (only the jobs in O(jobs) when given); the configs of a
        C(scrape.yaml.tpl) that read a secret (sealed in C(secrets/prometheus)) only with O(reveal=true).
    type: bool
    default: false
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.read_only, maand.core.bucket.cwd,
                                 maand.core.controller]
notes:
  - "The playbook C(maand.core.cat) runs this module with C(-e maand_cat=VIEW), C(-e maand_jobs=a,b),
    C(-e maand_workers=10.0.0.1), C(-e maand_reveal=true), C(-e maand_deleted=true), C(-e maand_active=true),
    C(-e maand_namespace=NS), C(-e maand_key=KEY), C(-e maand_file=alerts/slo.yaml) and C(-e maand_scrape=true)."
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

- name: The rollout state of the active allocations
  maand.core.cat:
    bucket: /srv/bucket
    view: deployments
    active: true

- name: One KV key in full
  maand.core.cat:
    bucket: /srv/bucket
    view: kv
    namespace: maand/bucket
    key: bucket_id

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
