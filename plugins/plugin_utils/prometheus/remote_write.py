# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus remote write, as maand pushes its certificate expiry metrics (maand-sh/maand certs/push.go
remoteWriteMetrics, discoverPrometheusRemoteWriteURL, prometheusRemoteWriteAuth).

* the target (``discover``): the job named ``prometheus`` when it ships ``prometheus.yml`` or
  ``prometheus.yml.tpl``, its first non-removed allocation (worker address order) and its port
  ``prometheus_port_http``: ``http://<worker>:<port>/api/v1/write``; no such job or no allocation: nothing
  is pushed;
* the request (``encode``, ``send_with_retry``): a ``prometheus.WriteRequest`` (protobuf) of ``Series``,
  snappy block-compressed, POSTed with remote write 0.1.0's headers; HTTP Basic auth when
  ``secrets/job/prometheus`` holds both ``admin_username`` and ``admin_password`` (one alone is an error,
  ``credentials``); 5 attempts, retrying network errors, 429 and 5xx after 2 s, 4 s, 8 s, 15 s; 15 s per
  attempt;
* Basic auth never goes over plain http (maand sends it so): a push with credentials goes to
  ``https://<worker>:<port>/api/v1/write`` (``secure_target``), its certificate verified against the bucket
  CA (``secrets/ca.crt``, the CA build issues the job's leaves with) and the address dialled; ``send``
  refuses credentials over ``http`` (``InsecureCredentials``, naming the fix).

The WriteRequest is a ``protobuf`` message built at run time from the four messages of Prometheus'
``prompb/types.proto`` and ``remote.proto`` (no generated code to keep in step with the protobuf
release); snappy is ``cramjam``'s raw (block) format, which Prometheus decodes. Both packages are
optional controller dependencies, imported only here: without them the push is refused naming the
install command (``MissingLibrary``). What is pushed (the certificates' gauges) is ops/cert_metrics.py's.

No Ansible imports.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import http.client
import os
import ssl
import time
import urllib.parse
from typing import Any, Callable, Mapping, Sequence

from ..errors import MaandError
from ..kv import store
from .files import SERVER_JOB, SERVER_PORT, server_jobs

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


class PushError(MaandError):
    """The samples cannot be pushed by remote write; the message says why and what to do."""


class MissingLibrary(PushError):
    """protobuf or cramjam is not installed on the controller; the message names the install command."""


class InsecureCredentials(PushError):
    """Basic auth would go over plain http; the message names the fix (serve Prometheus over TLS)."""


class RemoteWriteError(PushError):
    """The receiver answered with a status other than 2xx (maand's remoteWriteError)."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        self.status, self.body = status, body
        text = "remote write status %d %s" % (status, reason)
        super().__init__("%s: %s" % (text, body) if body else text)

    @property
    def retryable(self) -> bool:
        return self.status == 429 or self.status >= 500


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
    """Where the metrics go: the write URL, the Basic auth credentials (both empty: none) and, for https, the CA
    file its certificate is verified against (empty: the system's CAs)."""

    url: str
    username: str = ""
    password: str = dataclasses.field(default="", repr=False)
    ca_file: str = ""


def secure_target(url: str, username: str, password: str, ca_file: str) -> Target:
    """The Target of a push: with credentials over https (the discovered http URL's host and port), verified
    against ca_file (the bucket CA) when it exists; without credentials the URL as discovered (maand's)."""
    if not username:
        return Target(url)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "http":
        url = urllib.parse.urlunsplit(("https",) + tuple(parts[1:]))
    return Target(url, username, password, ca_file if ca_file and os.path.isfile(ca_file) else "")


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
    """(write URL, "") or ("", why nothing is pushed); PushError when the job has no port."""
    if SERVER_JOB not in server_jobs(bucket_dir, catalog):
        return "", "no job named %s ships prometheus.yml or prometheus.yml.tpl" % SERVER_JOB
    workers = sorted(a["worker"] for a in catalog.get("allocations", [])
                     if a.get("job") == SERVER_JOB and a.get("state") != "removed")
    if not workers:
        return "", "the %s job has no allocation" % SERVER_JOB
    job = next(j for j in catalog.get("jobs", []) if j.get("name") == SERVER_JOB)
    port = (job.get("ports") or {}).get(SERVER_PORT)
    if not isinstance(port, int) or isinstance(port, bool):
        raise PushError("job %s has no port %s (workspace/jobs/%s/manifest.json resources.ports): add it,"
                        " the remote write URL is http://<worker>:<%s>%s"
                        % (SERVER_JOB, SERVER_PORT, SERVER_JOB, SERVER_PORT, WRITE_PATH))
    host = workers[0]
    return "http://%s:%d%s" % ("[%s]" % host if ":" in host else host, port, WRITE_PATH), ""


def credentials(kv_store: Any) -> tuple[str, str]:
    """(admin_username, admin_password) of secrets/job/prometheus, both or neither."""
    username = kv_store.get(SECRETS_NS, USER_KEY, reveal_secrets=True) or ""
    password = kv_store.get(SECRETS_NS, PASSWORD_KEY, reveal_secrets=True) or ""
    if bool(username) != bool(password):
        raise PushError("prometheus remote write requires both %s and %s in %s (set the missing one, or"
                        " remove the other for an unauthenticated push)" % (USER_KEY, PASSWORD_KEY, SECRETS_NS))
    return username, password


def store_credentials(bucket_dir: str) -> tuple[str, str]:
    """credentials of the bucket's KV store; ("", "") without a store or without secrets/job/prometheus."""
    if not store.KVStore.exists(bucket_dir):
        return "", ""
    try:
        kv_store = store.KVStore.load(bucket_dir)
        if not (kv_store.namespaces.get(SECRETS_NS) or {}):
            return "", ""
        return credentials(kv_store)
    except store.KVStoreError as exc:
        raise PushError(str(exc)) from None


# --- the request (remoteWriteMetricsWithRetry) -----------------------------------------------------

Connect = Callable[..., http.client.HTTPConnection]


def _phrase(status: int, reason: str) -> str:
    """Go's http.StatusText (maand's wording), else what the server said."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return reason


def tls_context(ca_file: str) -> ssl.SSLContext:
    """Verifying TLS: the bucket CA (or the system's CAs without one), the host name or address checked."""
    ctx = ssl.create_default_context(cafile=ca_file or None)
    # maand's leaves (an empty subject with a non-critical SAN) are valid for OpenSSL and Go but not for the
    # RFC 5280 strict mode some Python versions turn on (as the deploy's https probes: deploy/gate.py)
    ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
    return ctx


def send(target: Target, body: bytes, connect: Connect | None = None) -> None:
    """One POST (stdlib http.client, as the deploy's http gate); RemoteWriteError for a non-2xx answer,
    OSError or http.client.HTTPException for a network failure (ssl.SSLError among them), InsecureCredentials
    for credentials over http (nothing is sent)."""
    url = urllib.parse.urlsplit(target.url)
    headers = dict(HEADERS)
    if target.username:
        if url.scheme != "https":
            raise InsecureCredentials(
                "remote write to %s: %s holds %s and %s, and Basic auth is never sent over plain http; serve"
                " Prometheus over TLS with a certificate of the bucket CA (tls_server_config in its"
                " --web.config.file, a leaf from the prometheus job's manifest \"certs\"): the push then goes to"
                " https://, verified against secrets/ca.crt; or remove both keys for an unauthenticated push"
                % (target.url, SECRETS_NS, USER_KEY, PASSWORD_KEY))
        token = base64.b64encode(("%s:%s" % (target.username, target.password)).encode("utf-8")).decode("ascii")
        headers["Authorization"] = "Basic %s" % token
    if url.scheme == "https":
        conn = (connect or http.client.HTTPSConnection)(url.hostname, url.port or 443, timeout=TIMEOUT,
                                                        context=tls_context(target.ca_file))
    else:
        conn = (connect or http.client.HTTPConnection)(url.hostname, url.port or 80, timeout=TIMEOUT)
    try:
        conn.request("POST", url.path or "/", body=body, headers=headers)
        response = conn.getresponse()
        text = response.read(4096).decode("utf-8", "replace").strip()
    finally:
        conn.close()
    if response.status // 100 != 2:
        raise RemoteWriteError(response.status, _phrase(response.status, response.reason), text)


def send_with_retry(target: Target, body: bytes, log: Callable[[str], None],
                    connect: Connect | None = None,
                    sleep: Callable[[float], None] = time.sleep, attempts: int = ATTEMPTS,
                    backoff: float = BACKOFF) -> int:
    """POST until accepted; network errors, 429 and 5xx are tried again (attempts in all, the wait doubling
    up to MAX_BACKOFF). Returns the attempt that succeeded; raises the last error."""
    for attempt in range(1, attempts + 1):
        try:
            send(target, body, connect)
        except ssl.SSLError as exc:  # not a passing failure: the server speaks no TLS, or another CA signed it
            raise _tls_error(target, exc) from None
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
    raise PushError("no attempt made")  # attempts < 1


def _tls_error(target: Target, exc: ssl.SSLError) -> PushError:
    why = "Basic auth goes over https only (%s holds %s and %s), " % (SECRETS_NS, USER_KEY, PASSWORD_KEY) \
        if target.username else ""
    return PushError("remote write to %s: TLS: %s; %sthe server's certificate is verified against %s and must name"
                     " %s: serve Prometheus over TLS with a leaf of the bucket CA (tls_server_config in its"
                     " --web.config.file)%s"
                     % (target.url, getattr(exc, "verify_message", "") or exc, why,
                        "secrets/ca.crt" if target.ca_file else "the system's CAs (the bucket has no secrets/ca.crt)",
                        urllib.parse.urlsplit(target.url).hostname,
                        ", or remove both keys for an unauthenticated push over http" if target.username else ""))


def _network_error(exc: Exception) -> PushError:
    return PushError("remote write request: %s" % (str(exc) or type(exc).__name__))
