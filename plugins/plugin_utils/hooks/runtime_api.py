# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand's job command runtime API on localhost (maand-sh/maand jobcommand/runtime_*.go,
docs/reference/job-command-api.md), served with the standard library's http.server. No Ansible.

Routes, bodies, status codes and messages are maand's: GET/PUT/DELETE ``/kv``, PUT/DELETE
``/kv/secret``, GET ``/kv/keys``, GET ``/demands``, POST ``/semaphore/acquire|release``, GET
``/semaphore/status``. Reads follow maand's namespace rules (kv/functions.allowed_namespaces with the
job's demanded upstream jobs); writes go to ``vars/job/<job>`` and ``secrets/job/<job>`` of the
hook's own job (and ``maand/job/<job>`` ``rollout_order`` on pre_deploy and cli); no writes
during health_check. Every write is saved at once to data/kv.json under the bucket lock
(kv/store.KVStore.edit), so a later hook and the deploy's templates see it.

It listens where maand does, 127.0.0.1:8080 (jobcommand/runtime_api.go RuntimeAPIListenAddr), so
a hook that calls the API itself (raw HTTP, or maand's own maand.py copied into a bucket) runs
unchanged. When 8080 is taken by a process of this same user (another run on this machine) it
takes an ephemeral port, which hooks read from ``MAAND_RUNTIME_API_PORT`` (the maand module here
does), and says so (``notice``); when another user's process holds it, or one this user cannot
see, the API does not start and every hook of the run fails naming that process (``refusal``): a
hook calling 8080 itself would otherwise hand its secrets to a stranger.

A request is honoured only when it comes from a running hook: it carries that hook's token
(``X-MAAND-TOKEN``, which the maand module sends), or (Linux) the process on the other end of the
connection is the hook or one the hook started (hooks/peers: /proc/net/tcp and the process tree),
which is how maand's own raw-HTTP hooks are recognised. maand's headers (``X-ALLOCATION-ID``,
``EVENT``, ``COMMAND``) must then name that hook. Any other caller gets the same 403, whatever the
headers say (known and unknown allocation ids alike), and nothing changes. Requests are bounded:
the body (1 MiB, 413), a socket timeout, the handler threads, the Host header (loopback names
only, against DNS rebinding), the semaphores' numbers and names.

A write the API refuses is remembered for that hook (``refused``): the runner fails the hook with
it even when the script ignored the HTTP error, naming job, command and event.
"""

from __future__ import annotations

import dataclasses
import hmac
import http.server
import json
import math
import os
import re
import secrets
import threading
import time
import urllib.parse
from typing import Any, Mapping

from . import peers
from ..kv import functions, store
from ..errors import MaandError

HEADER_ALLOC = "X-ALLOCATION-ID"
HEADER_EVENT = "EVENT"
HEADER_COMMAND = "COMMAND"
HEADER_TOKEN = "X-MAAND-TOKEN"
MAAND_PORT = 8080  # maand jobcommand/runtime_api.go RuntimeAPIPort
ROLLOUT_ORDER_EVENTS = ("pre_deploy", "cli")
SEM_DEFAULT_TIMEOUT = 600
SEM_MAX_TIMEOUT = 3600
SEM_MAX_CAPACITY = 64
SEM_MAX_COUNT = 1024  # semaphores of one run
KEY_PATTERN = re.compile(r"[^\s\x00-\x1f\x7f]{1,256}")  # fullmatch
MAX_BODY = 1 << 20  # bytes of a request body
SOCKET_TIMEOUT = 30  # seconds a connection may sit idle or trickle
MAX_CONNECTIONS = 256  # handler threads at once (each hook holds at most a few)
HOST_NAMES = ("127.0.0.1", "localhost")


@dataclasses.dataclass
class Invocation:
    """One running hook process: who it is, and the writes the API refused it."""

    job: str
    worker: str
    alloc_id: str
    event: str
    command: str
    refused: list[str] = dataclasses.field(default_factory=list)
    writes: int = 0
    pid: int = 0  # the hook's process (set once started): its tree may call without the token


class ApiReply(MaandError):
    """An HTTP answer: status and maand's message (http.Error writes message + newline)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _err(name: str) -> ApiReply:
    status, message = ERRORS[name]
    return ApiReply(status, message)


# maand jobcommand/api_errors.go runtimeAPIErrors, errors.go httpErrors
ERRORS = {
    "content_type": (415, "Content-Type must be application/json"),
    "missing_alloc": (400, "X-ALLOCATION-ID header is missing"),
    "invalid_json": (400, "Invalid JSON format"),
    "empty_body": (400, "Request body is empty"),
    "missing_fields": (400, "Both namespace and key are required"),
    "namespace": (400, "Invalid or unauthorized namespace"),
    "not_found": (404, "KV get operation failed"),
    "health_write": (400, "KV writes are not allowed during health_check"),
    "sem_timeout": (408, "Timed out waiting for semaphore"),
    "sem_conflict": (409, "Semaphore acquire or release failed"),
    "missing_name": (400, "Semaphore name is required"),
    "forbidden": (403, "not a running hook: the runtime API answers only a running job command (its "
                       "MAAND_RUNTIME_API_TOKEN in X-MAAND-TOKEN, or a process the command started)"),
    "too_large": (413, "Request body too large (limit 1 MiB)"),
    "bad_length": (400, "Invalid Content-Length"),
    "bad_host": (403, "Host must be 127.0.0.1 or localhost (the runtime API answers loopback callers only)"),
    "bad_number": (400, "capacity and timeout_seconds must be numbers"),
    "too_many": (409, "too many semaphores in this run (limit 1024)"),
    "scope": (400, "EVENT/COMMAND headers do not match the running hook"),
    "bad_key": (400, "Invalid key: a key is 1-256 characters without whitespace or control characters"),
}


class Semaphores:
    """Named counting semaphores of one run, scoped by job + event + name (maand runtime_semaphore.go)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sems: dict[str, dict[str, Any]] = {}

    def acquire(self, scope: str, holder: str, capacity: int, timeout: float) -> None:
        if capacity < 1:
            capacity = 1
        if capacity > SEM_MAX_CAPACITY:
            raise ApiReply(409, "capacity %d exceeds maximum %d" % (capacity, SEM_MAX_CAPACITY))
        deadline = time.monotonic() + timeout
        with self._cond:
            if scope not in self._sems and len(self._sems) >= SEM_MAX_COUNT:
                raise _err("too_many")
            sem = self._sems.setdefault(scope, {"capacity": capacity, "holders": [], "waiting": 0})
            if sem["capacity"] != capacity:
                raise ApiReply(409, "semaphore capacity is %d, requested %d" % (sem["capacity"], capacity))
            if holder in sem["holders"]:
                return
            sem["waiting"] += 1
            try:
                while len(sem["holders"]) >= sem["capacity"]:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise _err("sem_timeout")
                    self._cond.wait(left)
                sem["holders"].append(holder)
            finally:
                sem["waiting"] -= 1

    def release(self, scope: str, holder: str) -> None:
        with self._cond:
            sem = self._sems.get(scope)
            if sem is None or holder not in sem["holders"]:
                raise _err("sem_conflict")
            sem["holders"].remove(holder)
            self._cond.notify_all()

    def release_all(self, holder: str) -> None:
        """A hook that ended holding slots (crashed, forgot): free them for the others."""
        with self._cond:
            for sem in self._sems.values():
                if holder in sem["holders"]:
                    sem["holders"].remove(holder)
            self._cond.notify_all()

    def status(self, scope: str, name: str) -> dict[str, Any]:
        with self._cond:
            sem = self._sems.get(scope) or {"capacity": 1, "holders": [], "waiting": 0}
            return {"name": name, "capacity": sem["capacity"], "holders": list(sem["holders"]),
                    "waiting": sem["waiting"], "available": max(0, sem["capacity"] - len(sem["holders"]))}


class RuntimeAPI:
    """The API of one run: the catalog it serves, the hooks it knows (by token), the semaphores."""

    def __init__(self, bucket_dir: str, catalog: Mapping[str, Any]):
        self.bucket_dir = bucket_dir
        self.catalog = catalog
        self.sessions: dict[str, Invocation] = {}
        self.semaphores = Semaphores()
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.notice = ""  # said once when the API is not on 8080
        self.refusal = ""  # why the API did not start: every hook of the run fails with it

    # --- lifetime -----------------------------------------------------------------------

    def start(self, port: int = MAAND_PORT) -> int:
        """Serve on 127.0.0.1:port (maand's 8080). When 8080 is taken by this user's own process, serve on an
        ephemeral port (``notice``); when a stranger holds it, do not serve (``refusal``, port 0)."""
        api = self

        class Handler(_Handler):
            runtime = api
        try:
            self._server = _Server(("127.0.0.1", port), Handler)
        except OSError as exc:
            if port != MAAND_PORT:
                raise
            uid, who = peers.listener(port)
            if uid is None or uid != os.geteuid():
                self.refusal = (
                    "the runtime API cannot listen on 127.0.0.1:%d (%s): it is held by %s, which is not this "
                    "user's; a job command calling 127.0.0.1:%d itself would hand its requests, secrets among "
                    "them, to that process, so no job command runs. Stop that process or free port %d, then run "
                    "again" % (port, exc.strerror or exc, who or "a process this user cannot see", port, port))
                return 0
            self._server = _Server(("127.0.0.1", 0), Handler)
            self.notice = ("127.0.0.1:%d is held by %s (this user's): the runtime API listens on port %d; job "
                           "commands using the maand module follow MAAND_RUNTIME_API_PORT, one calling %d itself "
                           "reaches that process instead" % (port, who or "another process", self.port, port))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="maand-runtime-api", daemon=True)
        self._thread.start()
        return self._server.server_address[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "RuntimeAPI":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._server.server_address[1] if self._server else 0

    def open_session(self, job: str, worker: str, alloc_id: str, event: str, command: str) -> tuple[str, Invocation]:
        token = secrets.token_urlsafe(24)
        inv = Invocation(job, worker, alloc_id, event, command)
        with self._lock:
            self.sessions[token] = inv
        return token, inv

    def close_session(self, token: str) -> None:
        with self._lock:
            inv = self.sessions.pop(token, None)
        if inv is not None:
            self.semaphores.release_all(inv.alloc_id + "|" + token)

    def set_pid(self, token: str, pid: int) -> None:
        """The hook's process started: requests from its process tree are its own."""
        with self._lock:
            inv = self.sessions.get(token)
            if inv is not None:
                inv.pid = pid

    # --- one request --------------------------------------------------------------------

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes,
               client_port: int | None = None) -> tuple[int, Any]:
        """(status, JSON-able payload or message string) for one request; client_port is the caller's end
        of the loopback connection (None: only the token can name the hook)."""
        url = urllib.parse.urlsplit(path)
        route = ROUTES.get(url.path)
        if route is None:
            return 404, "404 page not found"
        if method not in route:
            return 405, ""
        token, inv = self._caller(headers, client_port)
        if inv is None:
            return _err("forbidden").status, _err("forbidden").message
        try:
            self._authorize(inv, headers)
            return getattr(self, route[method])(inv, token, body, headers, urllib.parse.parse_qs(url.query))
        except ApiReply as reply:
            if method in ("PUT", "DELETE") and reply.status != 404:
                inv.refused.append("%s %s: %s" % (method, url.path, reply.message))
            return reply.status, reply.message

    def _caller(self, headers: Mapping[str, str], client_port: int | None) -> tuple[str, Invocation | None]:
        """(token, session) of the running hook that sent a request, or ("", None): its token when it sends
        one (it must be right), else the hook whose process tree holds the client's end of the connection."""
        sent = headers.get(HEADER_TOKEN) or ""
        with self._lock:
            sessions = list(self.sessions.items())
        if sent:
            for token, inv in sessions:
                if hmac.compare_digest(token.encode(), sent.encode("utf-8", "replace")):
                    return token, inv
            return "", None
        if client_port is None or self._server is None:
            return "", None
        by_pid = {inv.pid: (token, inv) for token, inv in sessions if inv.pid}
        root = peers.peer_root(client_port, self.port, by_pid)
        return by_pid[root] if root is not None else ("", None)

    def _authorize(self, inv: Invocation, headers: Mapping[str, str]) -> Invocation:
        """maand's headers of a known caller must name its own hook."""
        if not headers.get(HEADER_ALLOC):
            raise _err("missing_alloc")
        if headers.get(HEADER_ALLOC) != inv.alloc_id or headers.get(HEADER_EVENT) != inv.event or \
                headers.get(HEADER_COMMAND) != inv.command:
            raise _err("scope")
        return inv

    @staticmethod
    def _payload(body: bytes, headers: Mapping[str, str], required: bool = True) -> dict[str, Any]:
        if body and "application/json" not in (headers.get("Content-Type") or ""):
            raise _err("content_type")
        if not body:
            if required:
                raise _err("empty_body")
            return {}
        try:
            data = json.loads(body)
        except ValueError:
            raise _err("invalid_json") from None
        if not isinstance(data, dict):
            raise _err("invalid_json")
        return data

    @classmethod
    def _read_payload(cls, body: bytes, headers: Mapping[str, str], query: Mapping[str, list],
                      required: bool = True) -> dict[str, Any]:
        """A read's fields: maand's JSON body on the GET, or (no body) the query string, which is how
        maand.core's maand.ts asks (Bun's fetch refuses a GET with a body)."""
        if not body and query:
            return {name: values[0] for name, values in query.items() if values}
        return cls._payload(body, headers, required)

    @staticmethod
    def _ns_key(data: Mapping[str, Any], need_value: bool = False) -> tuple[str, str, str]:
        ns, key, value = (data.get(f) for f in ("namespace", "key", "value"))
        if not isinstance(ns, str) or not isinstance(key, str) or not ns or not key:
            raise _err("missing_fields")
        if need_value and (not isinstance(value, str) or value == ""):
            raise _err("missing_fields")
        return ns, key, value if isinstance(value, str) else ""

    def _readable(self, inv: Invocation) -> list[str]:
        return functions.allowed_namespaces(inv.job, inv.worker, functions.upstream_jobs(self.catalog, inv.job))

    def _check_write(self, inv: Invocation, key: str) -> None:
        if inv.event == "health_check":
            raise _err("health_write")
        if not KEY_PATTERN.fullmatch(key):
            raise _err("bad_key")

    # --- KV -----------------------------------------------------------------------------

    def kv_get(self, inv, token, body, headers, query):
        ns, key, _x = self._ns_key(self._read_payload(body, headers, query))
        if ns not in self._readable(inv):
            raise _err("namespace")
        try:
            value = store.KVStore.load(self.bucket_dir).get(ns, key, reveal_secrets=True)
        except store.KVStoreError as exc:
            raise ApiReply(500, "Internal server error: %s" % exc) from None
        if value is None:
            raise _err("not_found")
        return 200, {"namespace": ns, "key": key, "value": value}

    def kv_put(self, inv, token, body, headers, query):
        ns, key, value = self._ns_key(self._payload(body, headers), need_value=True)
        # deploy_order: the key's name in maand before June 2026 (its older put_deploy_order helpers)
        rollout = ns == functions.job_ns(inv.job) and key in (store.ROLLOUT_ORDER_KEY, "deploy_order")
        if ns != functions.job_vars_ns(inv.job) and not (rollout and inv.event in ROLLOUT_ORDER_EVENTS):
            raise _err("namespace")
        self._check_write(inv, key)
        self._edit(lambda kv_store: kv_store.put_rollout_order(inv.job, value) if rollout else kv_store.put(ns, key, value))
        inv.writes += 1
        return 200, ""

    def kv_delete(self, inv, token, body, headers, query):
        return self._delete(inv, body, headers, functions.job_vars_ns(inv.job))

    def secret_put(self, inv, token, body, headers, query):
        ns, key, value = self._ns_key(self._payload(body, headers), need_value=True)
        if ns != functions.job_secrets_ns(inv.job):
            raise _err("namespace")
        self._check_write(inv, key)
        self._edit(lambda kv_store: kv_store.put(ns, key, value))
        inv.writes += 1
        return 200, ""

    def secret_delete(self, inv, token, body, headers, query):
        return self._delete(inv, body, headers, functions.job_secrets_ns(inv.job))

    def _delete(self, inv, body, headers, allowed_ns):
        ns, key, _x = self._ns_key(self._payload(body, headers))
        if ns != allowed_ns:
            raise _err("namespace")
        if inv.event == "health_check":
            raise _err("health_write")
        if not self._edit(lambda kv_store: kv_store.delete(ns, key)):
            raise _err("not_found")
        inv.writes += 1
        return 200, ""

    def _edit(self, change) -> Any:
        try:
            with store.KVStore.edit(self.bucket_dir, wait=True) as kv_store:
                return change(kv_store)
        except store.KVStoreError as exc:
            raise ApiReply(500, "Internal server error: %s" % exc) from None

    def kv_keys(self, inv, token, body, headers, query):
        data = self._read_payload(body, headers, query, required=False)
        own = [functions.job_vars_ns(inv.job), functions.job_secrets_ns(inv.job)]
        wanted = data.get("namespace") or ""
        if wanted and wanted not in own:
            raise _err("namespace")
        kv_store = store.KVStore.load(self.bucket_dir)
        result = {}
        for ns in ([wanted] if wanted else own):
            result[ns] = sorted(k for k, e in (kv_store.namespaces.get(ns) or {}).items() if not e.deleted)
        return 200, {"namespaces": result}

    # --- demands and semaphores ---------------------------------------------------------

    def demands(self, inv, token, body, headers, query):
        out = []
        for entry in self.catalog.get("jobs", ()):
            for name, spec in sorted((entry.get("commands") or {}).items()):
                demand = spec.get("demands") or {}
                if demand.get("job") == inv.job and demand.get("command") == inv.command:
                    out.append({"job": entry["name"], "command": name, "demand_config": demand.get("config") or {}})
        return 200, out

    def _scope(self, inv: Invocation, name: str) -> str:
        return "%s|%s|%s" % (inv.job, inv.event, name)

    def sem_acquire(self, inv, token, body, headers, query):
        data = self._payload(body, headers)
        name = self._sem_name(data.get("name"))
        try:
            capacity = int(data.get("capacity") or 1)
            timeout = min(float(data.get("timeout_seconds") or SEM_DEFAULT_TIMEOUT), SEM_MAX_TIMEOUT)
        except (TypeError, ValueError, OverflowError):
            raise _err("bad_number") from None
        if isinstance(data.get("capacity"), bool) or math.isnan(timeout):
            raise _err("bad_number")
        self.semaphores.acquire(self._scope(inv, name), inv.alloc_id + "|" + token, capacity, timeout)
        return 200, {"name": name, "allocation_id": inv.alloc_id, "capacity": capacity, "acquired": True}

    @staticmethod
    def _sem_name(name: Any) -> str:
        if not isinstance(name, str) or not name:
            raise _err("missing_name")
        if not KEY_PATTERN.fullmatch(name):
            raise _err("bad_key")
        return name

    def sem_release(self, inv, token, body, headers, query):
        name = self._sem_name(self._payload(body, headers).get("name"))
        self.semaphores.release(self._scope(inv, name), inv.alloc_id + "|" + token)
        return 200, {"name": name, "released": True}

    def sem_status(self, inv, token, body, headers, query):
        name = (query.get("name") or [""])[0]
        if not name:
            raise _err("missing_name")
        status = self.semaphores.status(self._scope(inv, name), name)
        status["holders"] = [h.split("|", 1)[0] for h in status["holders"]]
        return 200, status


ROUTES = {
    "/kv": {"GET": "kv_get", "PUT": "kv_put", "DELETE": "kv_delete"},
    "/kv/secret": {"PUT": "secret_put", "DELETE": "secret_delete"},
    "/kv/keys": {"GET": "kv_keys"},
    "/demands": {"GET": "demands"},
    "/semaphore/acquire": {"POST": "sem_acquire"},
    "/semaphore/release": {"POST": "sem_release"},
    "/semaphore/status": {"GET": "sem_status"},
}


class _Server(http.server.ThreadingHTTPServer):
    # socketserver's listen backlog is 5: hooks of 64 allocations calling at once got their
    # connections reset (bench/bench_hooks.py found it)
    request_queue_size = 256

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        """At most MAX_CONNECTIONS handler threads: further connections wait in the backlog."""
        self._slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def host_allowed(host: str | None, port: int) -> bool:
    """A loopback Host header (with this port or none), or none at all (HTTP/1.0)."""
    if not host:
        return True
    name, _x, given = host.strip().partition(":")
    return name.lower() in HOST_NAMES and given in ("", str(port))


class _Handler(http.server.BaseHTTPRequestHandler):
    runtime: RuntimeAPI
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT

    def _body(self) -> tuple[bytes | None, str]:
        """(body, "") or (None, error name); a body over the limit is not read (the connection closes)."""
        text = self.headers.get("Content-Length")
        if text is None or text.strip() == "":
            return b"", ""
        if not text.strip().isdigit():
            return None, "bad_length"
        length = int(text)
        if length > MAX_BODY:
            return None, "too_large"
        return (self.rfile.read(length) if length else b""), ""

    def _serve(self) -> None:
        body, problem = self._body()
        if not problem and not host_allowed(self.headers.get("Host"), self.runtime.port):
            problem = "bad_host"
        if problem:
            self.close_connection = True
            status, payload = _err(problem).status, _err(problem).message
        else:
            status, payload = self.runtime.handle(self.command, self.path, self.headers, body or b"",
                                                  self.client_address[1])
        if isinstance(payload, (dict, list)):
            data, ctype = (json.dumps(payload) + "\n").encode(), "application/json"
        else:
            data, ctype = (payload + "\n").encode() if payload else b"", "text/plain; charset=utf-8"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_DELETE = do_POST = _serve

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep the hook's output clean
        return
