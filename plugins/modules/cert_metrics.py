# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cert_metrics
short_description: Push a maand bucket's certificate expiry metrics to its Prometheus (remote write)
version_added: 1.1.0
description:
  - Runs on the controller (an action plugin). What maand does after every deploy (its C(certs/push.go)); the
    C(maand.core.deploy) role runs it at the end of every deploy with O(best_effort=true), and the playbook
    C(maand.core.cert_metrics) runs it on its own (from cron, to keep the gauges fresh between deploys).
  - "The target is the job named C(prometheus) when it ships C(prometheus.yml) or C(prometheus.yml.tpl):
    C(http://<its first non-removed allocation>:<prometheus_port_http>/api/v1/write). Without such a job or
    allocation, or without any certificate, nothing is pushed (not a failure). Prometheus must run with
    C(--web.enable-remote-write-receiver)."
  - Three gauges per certificate (C(secrets/ca.crt) and every job leaf in the KV), as C(maand cat certs) lists
    them, C(maand_cert_not_after_seconds), C(maand_cert_expiring) and C(maand_cert_expired), labelled C(scope),
    C(job), C(worker), C(cert), C(common_name), C(status); the alerts of C(rules/maand/certs.yaml) fire on them.
  - HTTP Basic auth when C(secrets/job/prometheus) holds C(admin_username) and C(admin_password) (one alone is an
    error). Network errors, 429 and 5xx are tried again, 5 attempts in all (2 s to 15 s apart).
  - Needs the Python packages C(protobuf) and C(cramjam) on the controller; without them it fails naming
    the install command.
author:
  - maand.core developers (@maand-sh)
options:
  best_effort:
    description:
      - V(true) (the deploy's use, as maand) turns a failure into a warning and an ok result; V(false) fails.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: Gathers and encodes the metrics and says where it would push them; sends nothing.
extends_documentation_fragment: [maand.core.attributes, maand.core.attributes.no_diff, maand.core.bucket.cwd,
                                 maand.core.controller]
requirements:
  - protobuf >= 4.21 and cramjam >= 2.7 on the controller (C(python3 -m pip install 'protobuf>=4.21' 'cramjam>=2.7'))
notes:
  - Prometheus keeps a pushed sample visible to instant queries (and alert rules) for its lookback delta, 5 minutes
    by default; push more often than that (cron) when the certificate alerts must keep firing between deploys.
"""

EXAMPLES = r"""
- name: Push the certificate expiry metrics
  maand.core.cert_metrics:
    bucket: /srv/bucket

- name: After a deploy, as maand (a failure only warns)
  maand.core.cert_metrics:
    bucket: /srv/bucket
    best_effort: true
"""

RETURN = r"""
state:
  description: V(pushed), V(skipped) (no Prometheus server job, allocation or certificate), V(check) (check mode)
    or V(failed) (with O(best_effort=true)).
  returned: always
  type: str
  sample: pushed
url:
  description: The remote write URL (empty when there is none).
  returned: success
  type: str
  sample: http://10.0.0.1:30001/api/v1/write
metrics:
  description: The number of certificates.
  returned: success
  type: int
series:
  description: The series pushed (or, in check mode, that would be), each with its labels, value and timestamp.
  returned: success
  type: list
  elements: dict
  sample: [{"labels": {"__name__": "maand_cert_expired", "cert": "tls", "job": "api", "scope": "job",
            "status": "ok", "worker": "10.0.0.1", "common_name": "api.internal"}, "value": 0.0,
            "timestamp_ms": 1796083200000}]
attempts:
  description: The attempt that was accepted (0 when nothing was sent).
  returned: success
  type: int
log:
  description: maand's retry lines (an attempt that failed and was tried again).
  returned: success
  type: list
  elements: str
"""
