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
* the request: a ``prometheus.WriteRequest`` (protobuf), snappy block-compressed, POSTed with remote
  write 0.1.0's headers; HTTP Basic auth when ``secrets/job/prometheus`` holds both ``admin_username``
  and ``admin_password`` (one alone is an error); 5 attempts, retrying network errors, 429 and 5xx
  after 2 s, 4 s, 8 s, 15 s; 15 s per attempt.

The WriteRequest is a ``protobuf`` message built at run time from the four messages of Prometheus'
``prompb/types.proto`` and ``remote.proto`` (no generated code to keep in step with the protobuf
release); snappy is ``cramjam``'s raw (block) format, which Prometheus decodes. Both packages are
optional controller dependencies, imported only here: without them the push is refused naming the
install command (``MissingLibrary``).

No Ansible imports.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import http.client
import os
import time
import urllib.parse
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..bucket import model as _model
from .. import certs as _certs
from ..catalog import kv_build as _kv_build
from ..kv import functions as _functions, prometheus as _prometheus, store as _store

METRIC_NOT_AFTER = "maand_cert_not_after_seconds"
METRIC_EXPIRING = "maand_cert_expiring"
METRIC_EXPIRED = "maand_cert_expired"
SERVER_JOB = _prometheus.SERVER_JOB
SERVER_PORT = _prometheus.SERVER_PORT
SECRETS_NS = "secrets/job/%s" % SERVER_JOB
USER_KEY = "admin_username"
PASSWORD_KEY = "admin_password"
WRITE_PATH = "/api/v1/write"
ATTEMPTS = 5
BACKOFF = 2.0
MAX_BACKOFF = 15.0
TIMEOUT = 15.0
HEADERS = {"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy",
           "X-Prometheus-Remote-Write-Version": "0.1.0", "User-Agent": "maand.core"}
INSTALL = "python3 -m pip install 'protobuf>=4.21' 'cramjam>=2.7'"
PROTO_FILE = "maand_core/prompb_remote.proto"


class CertMetricsError(Exception):
    """The metrics cannot be gathered or pushed; the message says why and what to do."""


class MissingLibrary(CertMetricsError):
    """protobuf or cramjam is not installed on the controller; the message names the install command."""


class RemoteWriteError(CertMetricsError):
    """The receiver answered with a status other than 2xx (maand's remoteWriteError)."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        self.status, self.body = status, body
        text = "remote write status %d %s" % (status, reason)
        super().__init__("%s: %s" % (text, body) if body else text)

    @property
    def retryable(self) -> bool:
        return self.status == 429 or self.status >= 500


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


@dataclasses.dataclass(frozen=True)
class Series:
    """One remote-write time series with one sample: its labels sorted by name, __name__ among them."""

    labels: tuple[tuple[str, str], ...]
    value: float
    timestamp_ms: int

    @property
    def name(self) -> str:
        return dict(self.labels).get("__name__", "")

    def as_dict(self) -> dict:
        return {"labels": dict(self.labels), "value": self.value, "timestamp_ms": self.timestamp_ms}


@dataclasses.dataclass(frozen=True)
class Target:
    """Where the metrics go: the write URL and the Basic auth credentials (both empty: none)."""

    url: str
    username: str = ""
    password: str = dataclasses.field(default="", repr=False)


@dataclasses.dataclass
class Outcome:
    """What a push did: pushed, skipped (no Prometheus server job, no allocation, no certificate),
    would push (check mode) or failed (problem set)."""

    state: str
    message: str
    url: str = ""
    metrics: int = 0
    series: list[Series] = dataclasses.field(default_factory=list)
    attempts: int = 0
    log: list[str] = dataclasses.field(default_factory=list)
    problem: str = ""

    def as_result(self) -> dict:
        return {"state": self.state, "msg": self.message, "url": self.url, "metrics": self.metrics,
                "series": [s.as_dict() for s in self.series], "attempts": self.attempts, "log": list(self.log)}


# --- the certificates (certs/catalog.go ListCertMetrics) ------------------------------------------

def renewal_buffer(bucket_dir: str) -> int:
    """maand.conf certs_renewal_buffer (days) as maand reads it for the metrics; 0 when unset or unreadable."""
    bucket = _model.Bucket(bucket_dir)
    _model.load_maand_conf(bucket, _model.Report())  # maand.conf problems are the build's to report
    return _certs.settings(bucket.conf)[1]


def _metric(scope: str, job: str, worker: str, cert: str, pem: str, buffer_days: int, now: Any) -> Metric:
    status = _certs.cert_status(pem, buffer_days, now)
    return Metric(scope, job, worker, cert, status.common_name, status.not_after_seconds, status.status)


def list_metrics(bucket_dir: str, kv: Mapping[str, Mapping[str, str]], buffer_days: int,
                 now: Any = None) -> list[Metric]:
    """The CA (when secrets/ca.crt can be read) then every job leaf of the KV, by namespace and key."""
    out = []
    try:
        with open(os.path.join(bucket_dir, _certs.CA_CERT_REL), encoding="utf-8", errors="replace") as handle:
            out.append(_metric("ca", "", "", "ca", handle.read(), buffer_days, now))
    except OSError:
        pass
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

def series(metrics: Iterable[Metric], timestamp_ms: int) -> list[Series]:
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


def _series(base: Mapping[str, str], name: str, value: float, timestamp_ms: int) -> Series:
    labels = dict(base, __name__=name)
    return Series(tuple(sorted((k, v) for k, v in labels.items() if v != "")), value, timestamp_ms)


# --- the wire format: protobuf WriteRequest, snappy ----------------------------------------------

def _libraries() -> tuple[Any, Any]:
    """(the WriteRequest message class, cramjam.snappy); MissingLibrary naming the install command."""
    try:
        import cramjam  # pylint: disable=import-outside-toplevel
        from google.protobuf import descriptor_pb2  # noqa: F401 pylint: disable=import-outside-toplevel,unused-import
    except ImportError as exc:
        raise MissingLibrary("pushing the certificate expiry metrics (Prometheus remote write) needs the Python"
                             " packages protobuf and cramjam on the controller (%s): run %s (an execution"
                             " environment: add them to its Python requirements)" % (exc, INSTALL)) from None
    return _write_request_class(), cramjam.snappy


@functools.lru_cache(maxsize=1)
def _write_request_class() -> Any:
    """prometheus.WriteRequest of prompb (Sample, Label, TimeSeries, WriteRequest), in a pool of its own."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # pylint: disable=import-outside-toplevel

    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name=PROTO_FILE, package="prometheus", syntax="proto3")

    def message(name: str, *fields: tuple) -> None:
        msg = proto.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            added = msg.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:  # set only on message fields (an empty one still counts as set)
                added.type_name = type_name

    one, many = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    message("Sample", ("value", 1, field.TYPE_DOUBLE, one, ""), ("timestamp", 2, field.TYPE_INT64, one, ""))
    message("Label", ("name", 1, field.TYPE_STRING, one, ""), ("value", 2, field.TYPE_STRING, one, ""))
    message("TimeSeries", ("labels", 1, field.TYPE_MESSAGE, many, ".prometheus.Label"),
            ("samples", 2, field.TYPE_MESSAGE, many, ".prometheus.Sample"))
    message("WriteRequest", ("timeseries", 1, field.TYPE_MESSAGE, many, ".prometheus.TimeSeries"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    descriptor = pool.FindMessageTypeByName("prometheus.WriteRequest")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.21
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)  # pragma: no cover - older protobuf


def encode(items: Sequence[Series]) -> bytes:
    """The request body: the WriteRequest serialized, then snappy block-compressed."""
    write_request, snappy = _libraries()
    request = write_request()
    for item in items:
        ts = request.timeseries.add()
        for name, value in item.labels:
            ts.labels.add(name=name, value=value)
        ts.samples.add(value=item.value, timestamp=item.timestamp_ms)
    return bytes(snappy.compress_raw(request.SerializeToString()))


def decode(body: bytes) -> list[Series]:
    """A request body back to its series (what a receiver reads; the tests' check of encode)."""
    write_request, snappy = _libraries()
    request = write_request()
    request.ParseFromString(bytes(snappy.decompress_raw(body)))
    return [Series(tuple((label.name, label.value) for label in ts.labels), sample.value, sample.timestamp)
            for ts in request.timeseries for sample in ts.samples]


# --- the target (discoverPrometheusRemoteWriteURL, prometheusRemoteWriteAuth) --------------------

def discover(bucket_dir: str, catalog: Mapping[str, Any]) -> tuple[str, str]:
    """(write URL, "") or ("", why nothing is pushed); CertMetricsError when the job has no port."""
    if SERVER_JOB not in _prometheus.server_jobs(bucket_dir, catalog):
        return "", "no job named %s ships prometheus.yml or prometheus.yml.tpl" % SERVER_JOB
    workers = sorted(a["worker"] for a in catalog.get("allocations", [])
                     if a.get("job") == SERVER_JOB and a.get("state") != "removed")
    if not workers:
        return "", "the %s job has no allocation" % SERVER_JOB
    job = next(j for j in catalog.get("jobs", []) if j.get("name") == SERVER_JOB)
    port = (job.get("ports") or {}).get(SERVER_PORT)
    if not isinstance(port, int) or isinstance(port, bool):
        raise CertMetricsError("job %s has no port %s (workspace/jobs/%s/manifest.json resources.ports): add it,"
                               " the remote write URL is http://<worker>:<%s>%s"
                               % (SERVER_JOB, SERVER_PORT, SERVER_JOB, SERVER_PORT, WRITE_PATH))
    host = workers[0]
    return "http://%s:%d%s" % ("[%s]" % host if ":" in host else host, port, WRITE_PATH), ""


def credentials(store: Any) -> tuple[str, str]:
    """(admin_username, admin_password) of secrets/job/prometheus, both or neither."""
    username = store.get(SECRETS_NS, USER_KEY, reveal_secrets=True) or ""
    password = store.get(SECRETS_NS, PASSWORD_KEY, reveal_secrets=True) or ""
    if bool(username) != bool(password):
        raise CertMetricsError("prometheus remote write requires both %s and %s in %s (set the missing one, or"
                               " remove the other for an unauthenticated push)" % (USER_KEY, PASSWORD_KEY, SECRETS_NS))
    return username, password


def _store_credentials(bucket_dir: str) -> tuple[str, str]:
    if not _store.KVStore.exists(bucket_dir):
        return "", ""
    try:
        store = _store.KVStore.load(bucket_dir)
        if not (store.namespaces.get(SECRETS_NS) or {}):
            return "", ""
        return credentials(store)
    except _store.KVStoreError as exc:
        raise CertMetricsError(str(exc)) from None


# --- the request (remoteWriteMetricsWithRetry) -----------------------------------------------------

Connect = Callable[..., http.client.HTTPConnection]


def _phrase(status: int, reason: str) -> str:
    """Go's http.StatusText (maand's wording), else what the server said."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return reason


def send(target: Target, body: bytes, connect: Connect = http.client.HTTPConnection) -> None:
    """One POST (stdlib http.client, as the deploy's http gate); RemoteWriteError for a non-2xx answer,
    OSError or http.client.HTTPException for a network failure."""
    url = urllib.parse.urlsplit(target.url)
    headers = dict(HEADERS)
    if target.username:
        token = base64.b64encode(("%s:%s" % (target.username, target.password)).encode("utf-8")).decode("ascii")
        headers["Authorization"] = "Basic %s" % token
    conn = connect(url.hostname, url.port or 80, timeout=TIMEOUT)
    try:
        conn.request("POST", url.path or "/", body=body, headers=headers)
        response = conn.getresponse()
        text = response.read(4096).decode("utf-8", "replace").strip()
    finally:
        conn.close()
    if response.status // 100 != 2:
        raise RemoteWriteError(response.status, _phrase(response.status, response.reason), text)


def send_with_retry(target: Target, body: bytes, log: Callable[[str], None],
                    connect: Connect = http.client.HTTPConnection,
                    sleep: Callable[[float], None] = time.sleep, attempts: int = ATTEMPTS,
                    backoff: float = BACKOFF) -> int:
    """POST until accepted; network errors, 429 and 5xx are tried again (attempts in all, the wait doubling
    up to MAX_BACKOFF). Returns the attempt that succeeded; raises the last error."""
    for attempt in range(1, attempts + 1):
        try:
            send(target, body, connect)
        except (RemoteWriteError, OSError, http.client.HTTPException) as exc:
            error = exc if isinstance(exc, RemoteWriteError) else _network_error(exc)
            if attempt == attempts or (isinstance(exc, RemoteWriteError) and not exc.retryable):
                raise error from None
            log("cert metrics: attempt %d/%d failed: %s; retrying in %gs" % (attempt, attempts, error, backoff))
            sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
            continue
        if attempt > 1:
            log("cert metrics: push succeeded on attempt %d/%d" % (attempt, attempts))
        return attempt
    raise CertMetricsError("no attempt made")  # attempts < 1


def _network_error(exc: Exception) -> CertMetricsError:
    return CertMetricsError("remote write request: %s" % (str(exc) or type(exc).__name__))


# --- the whole push (PushMetrics) -----------------------------------------------------------------

def push(bucket_dir: str, catalog: Mapping[str, Any], check_mode: bool = False,
         log: Callable[[str], None] | None = None, kv: Mapping[str, Mapping[str, str]] | None = None,
         clock: Callable[[], float] = time.time, **retry: Any) -> Outcome:
    """maand's PushMetrics for a built bucket: the outcome; CertMetricsError (MissingLibrary among them)
    when the metrics cannot be gathered or pushed. check_mode sends nothing and says what it would send;
    log gets maand's retry lines as they happen; kv: the bucket's KV (default: read it)."""
    url, why = discover(bucket_dir, catalog)
    if not url:
        return Outcome("skipped", "cert metrics: nothing pushed: %s" % why)
    try:
        kv = _kv_build.read_kv(bucket_dir) if kv is None else kv
    except _functions.KVError as exc:
        raise CertMetricsError(str(exc)) from None
    try:
        metrics = list_metrics(bucket_dir, kv, renewal_buffer(bucket_dir))
    except _certs.CertError as exc:
        raise CertMetricsError(str(exc)) from None
    if not metrics:
        return Outcome("skipped", "cert metrics: nothing pushed: the bucket has no certificate", url)
    items = series(metrics, int(clock() * 1000))
    body = encode(items)  # in check mode too: a missing library shows in the preview
    username, password = _store_credentials(bucket_dir)
    what = "%d series (%d certificate%s) to %s%s" % (len(items), len(metrics), "" if len(metrics) == 1 else "s",
                                                     url, " with Basic auth" if username else "")
    if check_mode:
        return Outcome("check", "cert metrics: would push %s" % what, url, len(metrics), items)
    lines: list[str] = []

    def note(line: str) -> None:
        lines.append(line)
        if log is not None:
            log(line)
    attempt = send_with_retry(Target(url, username, password), body, note, **retry)
    return Outcome("pushed", "cert metrics: pushed %s" % what, url, len(metrics), items, attempt, lines)
