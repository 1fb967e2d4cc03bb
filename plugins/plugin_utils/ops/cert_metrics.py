# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand's certificate expiry metrics, pushed to the bucket's Prometheus by remote write
(maand-sh/maand certs/push.go, certs/catalog.go; docs/reference/certs.md "Prometheus metrics").

What maand does after every deploy (best effort: a failure is logged, the deploy's outcome stands):

* the target: the job named ``prometheus`` when it ships ``prometheus.yml`` or ``prometheus.yml.tpl``,
  its first non-removed allocation (worker address order) and its port ``prometheus_port_http``:
  ``http://<worker>:<port>/api/v1/write``; no such job or no allocation: nothing is pushed;
* the certificates: ``secrets/ca.crt`` (scope ``ca``) and every ``certs/<name>.crt`` of the KV
  namespaces ``maand/job/<job>/worker/<ip>`` (scope ``job``), as ``maand cat certs`` lists them, with
  maand's status (``ok``, ``expiring`` inside ``certs_renewal_buffer``, ``expired``, ``invalid``);
* three gauges per certificate, one sample each at the push time: ``maand_cert_not_after_seconds``
  (NotAfter, Unix seconds; not for an invalid one), ``maand_cert_expiring`` and ``maand_cert_expired``
  (1 or 0), labelled ``scope``, ``job``, ``worker``, ``cert``, ``common_name``, ``status`` (sorted by
  name; a label whose value is empty, such as the CA's ``job``, is left out: Prometheus treats an empty
  label as absent and stores none);
* the request: remote write with Basic auth from ``secrets/job/prometheus`` and retries; with that auth over
  https only, verified against the bucket CA (maand sends it over plain http).

The target, the wire format (a protobuf WriteRequest, snappy) and the request with its retries are
Prometheus remote write (prometheus/remote_write.py); this module gathers the certificates, turns them into
series and says what a push did (``Outcome``). Whatever stops a push is a ``PushError`` of the prometheus
package: ``CertMetricsError`` (the KV or a certificate cannot be read) or one of remote write's own
(``MissingLibrary``, ``RemoteWriteError``).

No Ansible imports.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Iterable, Mapping

from .. import prometheus
from ..bucket import model
from .. import certs
from ..catalog import kv_build
from ..kv import functions

METRIC_NOT_AFTER = "maand_cert_not_after_seconds"
METRIC_EXPIRING = "maand_cert_expiring"
METRIC_EXPIRED = "maand_cert_expired"


class CertMetricsError(prometheus.PushError):
    """The metrics cannot be gathered (the KV, a certificate) or pushed; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class Metric:
    """One certificate as maand's certs.Metric (the same rows as maand.core.cat -e maand_cat=certs)."""

    scope: str  # "ca" or "job"
    job: str
    worker: str
    cert: str
    common_name: str
    not_after: int  # Unix seconds; 0 when the certificate is invalid
    status: str  # ok, expiring, expired, invalid


@dataclasses.dataclass
class Outcome:
    """What a push did: pushed, skipped (no Prometheus server job, no allocation, no certificate),
    would push (check mode) or failed (problem set)."""

    state: str
    message: str
    url: str = ""
    metrics: int = 0
    series: list[prometheus.Series] = dataclasses.field(default_factory=list)
    attempts: int = 0
    log: list[str] = dataclasses.field(default_factory=list)
    problem: str = ""

    def as_result(self) -> dict:
        return {"state": self.state, "msg": self.message, "url": self.url, "metrics": self.metrics,
                "series": [s.as_dict() for s in self.series], "attempts": self.attempts, "log": list(self.log)}


# --- the certificates (certs/catalog.go ListCertMetrics) ------------------------------------------

def renewal_buffer(bucket_dir: str) -> int:
    """maand.conf certs_renewal_buffer (days) as maand reads it for the metrics; 0 when unset or unreadable."""
    bucket = model.Bucket(bucket_dir)
    model.load_maand_conf(bucket, model.Report())  # maand.conf problems are the build's to report
    return certs.settings(bucket.conf)[1]


def _metric(scope: str, job: str, worker: str, cert: str, pem: str, buffer_days: int, now: Any) -> Metric:
    status = certs.cert_status(pem, buffer_days, now)
    return Metric(scope, job, worker, cert, status.common_name, status.not_after_seconds, status.status)


def list_metrics(bucket_dir: str, kv: Mapping[str, Mapping[str, str]], buffer_days: int,
                 now: Any = None) -> list[Metric]:
    """The CA (when secrets/ca.crt can be read) then every job leaf of the KV, by namespace and key."""
    out = []
    try:
        with open(os.path.join(bucket_dir, certs.CA_CERT_REL), encoding="utf-8", errors="replace") as handle:
            out.append(_metric("ca", "", "", "ca", handle.read(), buffer_days, now))
    except OSError:
        pass  # no bucket CA (no job asks for certs): only the leaves are reported
    for namespace in sorted(kv):
        job, worker = _job_worker(namespace)
        if not job or not worker:
            continue
        for key in sorted(k for k in kv[namespace] if k.startswith("certs/") and k.endswith(".crt")):
            out.append(_metric("job", job, worker, key[len("certs/"):-len(".crt")], kv[namespace][key],
                               buffer_days, now))
    return out


def _job_worker(namespace: str) -> tuple[str, str]:
    """maand's parseJobWorkerCertNamespace: maand/job/<job>/worker/<ip> -> (job, ip), else ("", "")."""
    prefix, part = "maand/job/", "/worker/"
    if not namespace.startswith(prefix) or part not in namespace[len(prefix):]:
        return "", ""
    job, worker = namespace[len(prefix):].split(part, 1)
    return (job, worker) if job and worker else ("", "")


# --- the series (certs/push.go remoteWriteMetrics) -------------------------------------------------

def series(metrics: Iterable[Metric], timestamp_ms: int) -> list[prometheus.Series]:
    """Per certificate: not_after (unless invalid or unknown), expiring and expired, at one timestamp."""
    out = []
    for metric in metrics:
        base = {"scope": metric.scope, "job": metric.job, "worker": metric.worker, "cert": metric.cert,
                "common_name": metric.common_name, "status": metric.status}
        if metric.status != "invalid" and metric.not_after:
            out.append(_series(base, METRIC_NOT_AFTER, float(metric.not_after), timestamp_ms))
        out.append(_series(base, METRIC_EXPIRING, 1.0 if metric.status == "expiring" else 0.0, timestamp_ms))
        out.append(_series(base, METRIC_EXPIRED, 1.0 if metric.status == "expired" else 0.0, timestamp_ms))
    return out


def _series(base: Mapping[str, str], name: str, value: float, timestamp_ms: int) -> prometheus.Series:
    labels = dict(base, __name__=name)
    return prometheus.Series(tuple(sorted((k, v) for k, v in labels.items() if v != "")), value, timestamp_ms)


# --- the whole push (PushMetrics) -----------------------------------------------------------------

def push(bucket_dir: str, catalog: Mapping[str, Any], check_mode: bool = False,
         log: Callable[[str], None] | None = None, kv: Mapping[str, Mapping[str, str]] | None = None,
         clock: Callable[[], float] = time.time, **retry: Any) -> Outcome:
    """maand's PushMetrics for a built bucket: the outcome; a PushError (CertMetricsError, MissingLibrary
    among them) when the metrics cannot be gathered or pushed. check_mode sends nothing and says what it would send;
    log gets maand's retry lines as they happen; kv: the bucket's KV (default: read it)."""
    url, why = prometheus.discover(bucket_dir, catalog)
    if not url:
        return Outcome("skipped", "cert metrics: nothing pushed: %s" % why)
    try:
        kv = kv_build.read_kv(bucket_dir) if kv is None else kv
    except functions.KVError as exc:
        raise CertMetricsError(str(exc)) from None
    try:
        metrics = list_metrics(bucket_dir, kv, renewal_buffer(bucket_dir))
    except certs.CertError as exc:
        raise CertMetricsError(str(exc)) from None
    if not metrics:
        return Outcome("skipped", "cert metrics: nothing pushed: the bucket has no certificate", url)
    items = series(metrics, int(clock() * 1000))
    body = prometheus.encode(items)  # in check mode too: a missing library shows in the preview
    username, password = prometheus.store_credentials(bucket_dir)
    target = prometheus.secure_target(url, username, password, certs.ca_paths(bucket_dir)[0])
    url = target.url  # https with credentials, verified against the bucket CA
    what = "%d series (%d certificate%s) to %s%s" % (len(items), len(metrics), "" if len(metrics) == 1 else "s",
                                                     url, " with Basic auth" if username else "")
    if check_mode:
        return Outcome("check", "cert metrics: would push %s" % what, url, len(metrics), items)
    lines: list[str] = []

    def note(line: str) -> None:
        lines.append(line)
        if log is not None:
            log(line)
    attempt = prometheus.send_with_retry(target, body, note, **retry)
    return Outcome("pushed", "cert metrics: pushed %s" % what, url, len(metrics), items, attempt, lines)
