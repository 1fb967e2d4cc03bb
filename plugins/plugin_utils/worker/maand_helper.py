# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``maand`` module of job command scripts (staged next to each script as ``maand.py``).

It offers the functions of maand's own ``maand.py`` (maand-sh/maand jobcommand/maand.py) with the
same names, arguments and return values, so hook scripts written for maand run unchanged:
context (``allocation_id`` ... ``job_name`` and the ``get_*`` aliases), KV (``get_store_value``,
``get_kv_value``, ``put_job_variable``, ``put_job_secret``, ``delete_*``, ``list_job_keys``,
``put_rollout_order``/``get_rollout_order``), ``list_command_demands``, semaphores, and worker
SSH (``load_ssh``, ``run_ssh``, ``run_runner_target``, ``run_make_target``). Calls return a
Response with ``status_code``, ``ok``, ``text``, ``json()`` and ``raise_for_status()`` as the
``requests`` one does; only the standard library is used (maand's needs ``requests``), and of the collection
only the error family's base (errors/__init__.py, staged beside it as maand_errors.py; HTTPError derives it).

Differences, all on purpose: the API listens on MAAND_RUNTIME_API_PORT (8080 unless this user's
other run holds it) and every call carries the hook's token (the API answers only running hooks); ``run_ssh`` reaches a worker the way Ansible does (user,
port, key and options from MAAND_HOSTS_FILE, written by the run) and falls back to maand.conf.
The tutorial's ``maand.job()``, ``maand.worker()`` and ``maand.kv.get/put`` are here too.
"""

import http.client
import json
import os
import shlex
import subprocess
import urllib.parse
from pathlib import Path

try:
    from ..errors import MaandError
except ImportError:  # staged as maand.py beside a hook script: the error family's base staged beside it
    from maand_errors import MaandError

_RUNTIME_API_PORT = 8080
_ROUTE_STORE_KEYS = "/kv"
_ROUTE_STORE_KEYS_LIST = "/kv/keys"
_ROUTE_STORE_SECRET = "/kv/secret"
_ROUTE_DEMANDS = "/demands"
_ROUTE_SEMAPHORE_ACQUIRE = "/semaphore/acquire"
_ROUTE_SEMAPHORE_RELEASE = "/semaphore/release"
_ROUTE_SEMAPHORE_STATUS = "/semaphore/status"


class HTTPError(MaandError):
    """Raised by Response.raise_for_status (as requests.HTTPError), with the response attached."""

    kind = "http"

    def __init__(self, message, response=None):
        super().__init__(message)
        self.response = response


class Response:
    """The subset of requests.Response job command scripts use."""

    def __init__(self, status_code, body, url, reason=""):
        self.status_code = status_code
        self.content = body
        self.url = url
        self.reason = reason

    @property
    def text(self):
        return self.content.decode("utf-8", "replace")

    @property
    def ok(self):
        return self.status_code < 400

    def json(self):
        return json.loads(self.text)

    def raise_for_status(self):
        if not self.ok:
            raise HTTPError("%d %s for url %s: %s" % (self.status_code, self.reason, self.url, self.text.strip()),
                            response=self)
        return self

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return "<Response [%d]>" % self.status_code


def allocation_id():
    return os.environ.get("ALLOCATION_ID")


def allocation_ip():
    return os.environ.get("ALLOCATION_IP")


def allocation_index():
    return os.environ.get("ALLOCATION_INDEX")


def is_allocation_disabled():
    return os.environ.get("DISABLED") == "1"


def command_event():
    return os.environ.get("EVENT")


def command_name():
    return os.environ.get("COMMAND")


def job_name():
    return os.environ.get("JOB")


def _runtime_api_base_url():
    host = os.environ.get("JOB_COMMAND_API_HOST", "127.0.0.1")
    port = os.environ.get("MAAND_RUNTIME_API_PORT") or _RUNTIME_API_PORT
    return "http://%s:%s" % (host, port)


def _runtime_request_headers():
    return {
        "X-ALLOCATION-ID": allocation_id() or "",
        "COMMAND": command_name() or "",
        "EVENT": command_event() or "",
        "X-MAAND-TOKEN": os.environ.get("MAAND_RUNTIME_API_TOKEN", ""),
    }


def _request(method, route, body=None, params=None, timeout=60):
    """One call to the runtime API of this run (plain HTTP on localhost, stdlib http.client)."""
    base = urllib.parse.urlsplit(_runtime_api_base_url())
    path = route + ("?" + urllib.parse.urlencode(params) if params else "")
    url = _runtime_api_base_url() + path
    headers = _runtime_request_headers()
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection(base.hostname, base.port, timeout=timeout)
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return Response(resp.status, resp.read() or b"", url, resp.reason)
    finally:
        conn.close()


def get_store_value(namespace, key):
    """GET /kv: read a key from an allowed namespace."""
    return _request("GET", _ROUTE_STORE_KEYS, {"namespace": namespace, "key": key})


def put_rollout_order(order):
    """PUT rollout_order for the current job (pre_deploy or cli only); order: "ip,ip" or a list."""
    if isinstance(order, (list, tuple)):
        order = ",".join(str(ip).strip() for ip in order if str(ip).strip())
    return _request("PUT", _ROUTE_STORE_KEYS,
                    {"namespace": "maand/job/%s" % job_name(), "key": "rollout_order", "value": order})


def get_rollout_order():
    """GET rollout_order for the current job."""
    return get_store_value("maand/job/%s" % job_name(), "rollout_order")


def put_deploy_order(order):
    """put_rollout_order under its name in maand's maand.py and docs before June 2026 (deploy_order)."""
    return put_rollout_order(order)


def get_deploy_order():
    """get_rollout_order under its name in maand's maand.py and docs before June 2026 (deploy_order)."""
    return get_rollout_order()


def put_job_variable(key, value):
    """PUT /kv: write a key under vars/job/<current job>."""
    return _request("PUT", _ROUTE_STORE_KEYS, {"namespace": "vars/job/%s" % job_name(), "key": key, "value": value})


def list_job_keys(namespace=None):
    """GET /kv/keys: list keys under vars/job/<job> and secrets/job/<job>."""
    body = {}
    if namespace is not None:
        body["namespace"] = namespace
    return _request("GET", _ROUTE_STORE_KEYS_LIST, body)


def delete_job_variable(key):
    """DELETE /kv: remove a key under vars/job/<current job>."""
    return _request("DELETE", _ROUTE_STORE_KEYS, {"namespace": "vars/job/%s" % job_name(), "key": key})


def delete_job_secret(key):
    """DELETE /kv/secret: remove a key under secrets/job/<current job>."""
    return _request("DELETE", _ROUTE_STORE_SECRET, {"namespace": "secrets/job/%s" % job_name(), "key": key})


def put_job_secret(key, value):
    """PUT /kv/secret: write an encrypted key under secrets/job/<current job>."""
    return _request("PUT", _ROUTE_STORE_SECRET, {"namespace": "secrets/job/%s" % job_name(), "key": key,
                                                 "value": value})


def list_command_demands():
    """GET /demands: the job commands that depend on this command."""
    return _request("GET", _ROUTE_DEMANDS)


def acquire_semaphore(name, capacity=1, timeout_seconds=600):
    """POST /semaphore/acquire: block until this allocation holds a slot (scoped per job and event)."""
    return _request("POST", _ROUTE_SEMAPHORE_ACQUIRE,
                    {"name": name, "capacity": capacity, "timeout_seconds": timeout_seconds},
                    timeout=timeout_seconds + 30)


def release_semaphore(name):
    """POST /semaphore/release: release a slot held by this allocation."""
    return _request("POST", _ROUTE_SEMAPHORE_RELEASE, {"name": name})


def semaphore_status(name):
    """GET /semaphore/status: holders and waiters of a named semaphore."""
    return _request("GET", _ROUTE_SEMAPHORE_STATUS, params={"name": name})


# Backward-compatible aliases (maand's maand.py keeps them for older job command scripts).
def get_allocation_id():
    return allocation_id()


def get_allocation_ip():
    return allocation_ip()


def get_allocation_index():
    return allocation_index()


def get_event():
    return command_event()


def get_command():
    return command_name()


def get_job():
    return job_name()


def kv_get(namespace, key):
    return get_store_value(namespace, key)


def kv_put(key, value):
    return put_job_variable(key, value)


def kv_put_secret(key, value):
    return put_job_secret(key, value)


def get_demands():
    return list_command_demands()


def get_kv_value(namespace, key):
    """Read a KV value as a plaintext string."""
    response = get_store_value(namespace, key)
    response.raise_for_status()
    return response.json()["value"]


# The job-commands tutorial's spelling (maand docs/guides/job-commands-tutorial.md).
def job():
    return {"name": job_name(), "allocation_id": allocation_id(), "allocation_index": allocation_index(),
            "event": command_event(), "command": command_name(), "disabled": is_allocation_disabled()}


def worker():
    return {"worker_ip": allocation_ip()}


class _KV:
    """maand.kv.get(ns, key) -> value (None when missing), maand.kv.put(key, value) into vars/job/<job>."""

    @staticmethod
    def get(namespace, key):
        response = get_store_value(namespace, key)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.json()["value"]

    @staticmethod
    def put(key, value):
        return put_job_variable(key, value).raise_for_status()

    @staticmethod
    def put_secret(key, value):
        return put_job_secret(key, value).raise_for_status()

    @staticmethod
    def delete(key):
        return delete_job_variable(key).raise_for_status()


kv = _KV()


def find_bucket_root():
    """Locate the bucket root (directory containing maand.conf)."""
    for start in (Path.cwd().resolve(), Path(__file__).resolve().parent):
        for directory in [start, *start.parents]:
            if (directory / "maand.conf").is_file():
                return directory
    raise FileNotFoundError("maand.conf not found (cwd=%s)" % Path.cwd())


def _hosts():
    path = os.environ.get("MAAND_HOSTS_FILE")
    if not path:
        return {}
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def load_ssh():
    """Return (ssh_user, key_path, use_sudo) from maand.conf and secrets/ (maand's rule)."""
    bucket = find_bucket_root()
    conf = {}
    conf_path = bucket / "maand.conf"
    if conf_path.is_file():
        for line in conf_path.read_text().splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, value = line.split("=", 1)
            conf[key.strip()] = value.strip().strip("'\"")
    user = conf.get("ssh_user", "root")
    key_name = conf.get("ssh_key", "worker.key")
    use_sudo = conf.get("use_sudo", "false").lower() in ("true", "1", "yes")
    key = bucket / "secrets" / key_name
    if not key.is_file():
        fallback = bucket / key_name
        if fallback.is_file():
            key = fallback
        else:
            raise FileNotFoundError("SSH key not found: %s (also checked %s)" % (key, fallback))
    return user, key, use_sudo


def _ssh_argv(worker_ip, connect_timeout):
    """ssh options for worker_ip: the run's Ansible connection settings, else maand.conf's. The run's options
    come first, so their host-key policy wins over accept-new (trust on first use, as maand's maand.py;
    docs/hooks.md, Host keys of run_ssh)."""
    host = _hosts().get(worker_ip)
    if host is None:
        user, key_path, use_sudo = load_ssh()
        host = {"address": worker_ip, "user": user, "key": str(key_path), "sudo": use_sudo}
    argv = ["ssh"] + list(host.get("options") or [])  # ssh keeps the first value of an option: the run's win
    argv += ["-o", "BatchMode=yes", "-o", "ConnectTimeout=%d" % connect_timeout, "-o", "StrictHostKeyChecking=accept-new"]
    if host.get("key"):
        argv += ["-i", host["key"]]
    if host.get("port"):
        argv += ["-p", str(host["port"])]
    target = host.get("address") or worker_ip
    argv.append("%s@%s" % (host["user"], target) if host.get("user") else target)
    return argv, bool(host.get("sudo"))


def run_ssh(worker_ip, remote_cmd, *, timeout=300, check=True, connect_timeout=15):
    """Run a remote command over SSH on a worker (returns subprocess.CompletedProcess)."""
    argv, use_sudo = _ssh_argv(worker_ip, connect_timeout)
    prefix = "sudo -E " if use_sudo else ""
    wrapped = "%stimeout %s %s" % (prefix, timeout, remote_cmd)
    return subprocess.run(argv + [wrapped], check=check, text=True, capture_output=True,
                          timeout=timeout + connect_timeout + 30)


def _bucket_id():
    return get_kv_value("maand/bucket", "bucket_id")


def run_runner_target(target, *, worker_ip=None, job=None, timeout=300):
    """Run the job's Makefile target on a worker the way deploy does (maand: runner.py <target>);
    maand.core's worker agent has no runner.py, so this runs make in the job directory."""
    return run_make_target(target, worker_ip=worker_ip, job=job, timeout=timeout)


def run_make_target(target, *, worker_ip=None, job=None, timeout=300):
    """Run make <target> in the job directory on a worker."""
    worker_ip = worker_ip or allocation_ip()
    job = job or job_name()
    remote = "make -C %s %s" % (shlex.quote("/opt/worker/%s/jobs/%s" % (_bucket_id(), job)), shlex.quote(target))
    return run_ssh(worker_ip, remote, timeout=timeout)
