# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand's KV store as templates read it: namespaces, read rules, the template function map.

Pure Python, no Ansible imports. A KV snapshot is ``{namespace: {key: str}}`` (secrets already
decrypted by the caller). maand's rules (maand-sh/maand data/ AllowedKVNamespaces,
AllowedKVNamespacesWithUpstream; deploy/templates.go templateFuncMap; docs/reference/templates.md):

* a job on a worker reads ``maand/bucket``, ``vars/bucket``, ``maand/worker``,
  ``maand/worker/<ip>``, ``maand/worker/<ip>/tags``, its own ``maand/job/<job>``,
  ``vars/bucket/job/<job>``, ``vars/job/<job>``, ``secrets/job/<job>``, its allocation
  ``maand/job/<job>/worker/<ip>``, ``maand/prometheus`` (the scrape catalog), and for every job it demands (upstream) ``maand/job/<up>``,
  ``vars/job/<up>``, ``secrets/job/<up>``; ports live in ``maand/bucket`` so every job reads them;
* ``get`` fails on a disallowed namespace and on a missing (or deleted) key; ``getOptional``
  returns "" for a missing key but still fails on a disallowed namespace.

``render_allocation`` renders one ``.tpl`` text for one allocation, as maand's deploy does.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import uuid
from typing import Any, Callable, Iterable, Mapping

from ..worker import layout
from .. import gotemplate
from ..bucket import readers
from ..errors import MaandError

KV = Mapping[str, Mapping[str, str]]

BUCKET_NS = "maand/bucket"
BUCKET_VARS_NS = "vars/bucket"
WORKERS_NS = "maand/worker"
PROMETHEUS_NS = "maand/prometheus"  # build's scrape catalog (prometheus/scrape_catalog.py); every job may read it


def worker_ns(ip: str) -> str:
    return "maand/worker/%s" % ip


def worker_tags_ns(ip: str) -> str:
    return "maand/worker/%s/tags" % ip


def job_ns(job: str) -> str:
    return "maand/job/%s" % job


def job_bucket_vars_ns(job: str) -> str:
    return "vars/bucket/job/%s" % job


def job_vars_ns(job: str) -> str:
    return "vars/job/%s" % job


def job_secrets_ns(job: str) -> str:
    return "secrets/job/%s" % job


def allocation_ns(job: str, ip: str) -> str:
    return "maand/job/%s/worker/%s" % (job, ip)


def is_secret_ns(namespace: str) -> bool:
    return namespace.startswith("secrets/")


def is_private_key(namespace: str, key: Any) -> bool:
    """A TLS leaf's private key (``certs/<name>.key`` of maand/job/<job>/worker/<ip>): kept where maand keeps
    it, in clear in the KV, but read as a secret (an output that reads it is secret-bearing; the lookup
    needs reveal)."""
    return (isinstance(key, str) and key.startswith("certs/") and key.endswith(".key")
            and namespace.startswith("maand/job/") and "/worker/" in namespace)


def allowed_namespaces(job: str, worker_ip: str, upstream_jobs: Iterable[str] = ()) -> list[str]:
    """The namespaces job's templates and commands on worker_ip may read (maand's read rules)."""
    allowed = [BUCKET_NS, BUCKET_VARS_NS, WORKERS_NS, worker_ns(worker_ip),
               worker_tags_ns(worker_ip), job_ns(job), job_bucket_vars_ns(job), job_vars_ns(job),
               job_secrets_ns(job), allocation_ns(job, worker_ip), PROMETHEUS_NS]
    for up in upstream_jobs:
        for ns in (job_ns(up), job_vars_ns(up), job_secrets_ns(up)):
            if ns not in allowed:
                allowed.append(ns)
    return allowed


class KVError(MaandError):
    """A read the rules refuse or a key that is not there; the message names namespace and key."""


def normalize_deleted(deleted: Any) -> set[tuple[str, str]]:
    """deleted as {namespace: [keys]} or [[namespace, key], ...] or ["namespace/key"...]? -> pairs.

    Only the first two forms are accepted: a namespace contains slashes, so "ns/key" is ambiguous.
    """
    pairs: set[tuple[str, str]] = set()
    if not deleted:
        return pairs
    if isinstance(deleted, Mapping):
        for ns, keys in deleted.items():
            if isinstance(keys, str) or not isinstance(keys, Iterable):
                raise KVError("deleted[%s] must be a list of keys, got %r" % (ns, keys))
            pairs.update((str(ns), str(k)) for k in keys)
        return pairs
    for item in deleted:
        if isinstance(item, str) or len(item) != 2:
            raise KVError("deleted must be {namespace: [keys]} or a list of [namespace, key]"
                          " pairs; got %r" % (item,))
        pairs.add((str(item[0]), str(item[1])))
    return pairs


@dataclasses.dataclass(frozen=True)
class KVReader:
    """A read-only view of a KV snapshot for one job on one worker, with maand's rules."""

    kv: KV
    job: str
    worker_ip: str
    upstream_jobs: tuple[str, ...] = ()
    deleted: frozenset = frozenset()
    # None: a missing key is an error. A list: a missing key reads as "" and is noted here as (namespace,
    # key) (the deploy plan of a job whose pre_deploy hooks may write the key at its wave: deploy/pre_deploy)
    missing: list | None = None

    @functools.cached_property
    def allowed(self) -> frozenset:
        return frozenset(allowed_namespaces(self.job, self.worker_ip, self.upstream_jobs))

    def check(self, namespace: str) -> None:
        if namespace not in self.allowed:
            raise KVError("%s namespace is not available for job %s (it reads its own"
                          " namespaces, the bucket's, its worker's and those of the jobs it"
                          " demands)" % (namespace, self.job))

    def lookup(self, namespace: str, key: str) -> str | None:
        self.check(namespace)
        if (namespace, key) in self.deleted:
            return None
        value = (self.kv.get(namespace) or {}).get(key)
        return None if value is None else str(value)

    def get(self, namespace: str, key: str) -> str:
        value = self.lookup(namespace, key)
        if value is None and self.missing is not None:
            self.missing.append((namespace, key))
            return ""
        if value is None:
            raise KVError("key %s not found in namespace %s" % (key, namespace))
        return value

    def keys(self, namespace: str) -> list[str]:
        self.check(namespace)
        return sorted(k for k in (self.kv.get(namespace) or {})
                      if (namespace, k) not in self.deleted)


# --- maand's template function map (deploy/templates.go templateFuncMap + templates.md) --------

_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008" \
            "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _split(s: str, sep: str) -> list:
    """strings.Split: an empty separator splits after each character."""
    return list(s) if sep == "" else s.split(sep)


def go_trim_space(s: str) -> str:
    """Go's strings.TrimSpace."""
    return s.strip(_GO_SPACE)


def _trim(s: str) -> str:
    return go_trim_space(s)


def _join(a: list, sep: str) -> str:
    if not all(isinstance(x, str) for x in a):
        raise KVError("join needs a list of strings")
    return sep.join(a)


def _upper(s: str) -> str:
    return s.upper()


def _lower(s: str) -> str:
    return s.lower()


def _add(a: int, b: int) -> int:
    return a + b


def _sub(a: int, b: int) -> int:
    return a - b


def _mul(a: int, b: int) -> int:
    return a * b


def _div(a: int, b: int) -> int:
    if b == 0:
        raise KVError("runtime error: integer divide by zero")
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def _min(a: int, *rest: int) -> int:
    return min((a,) + rest)


def _max(a: int, *rest: int) -> int:
    return max((a,) + rest)


def _atoi(s: Any) -> int:
    """int: an int passes, a string is parsed as Go's strconv.Atoi, anything else fails."""
    if isinstance(s, int) and not isinstance(s, bool):
        return s
    if isinstance(s, str):
        body = s[1:] if s[:1] in "+-" else s
        if body and body.isascii() and body.isdigit():
            return int(s)
        raise KVError('strconv.Atoi: parsing %s: invalid syntax' % gotemplate.go_quote(s))
    raise KVError("expected a string or an int")


def _template_int(s: Any) -> int:
    """deploy/templates.go templateInt: a string is trimmed (strings.TrimSpace) before strconv.Atoi."""
    return _atoi(_trim(s) if isinstance(s, str) else s)


def template_funcs(reader: KVReader) -> dict[str, Callable]:
    """maand's FuncMap for a job's .tpl files, reading through reader's rules."""

    def get(ns: str, key: str) -> str:
        return reader.get(ns, key)

    def get_optional(ns: str, key: str) -> str:
        value = reader.lookup(ns, key)
        return "" if value is None else value

    def get_secret(key: str) -> str:
        return reader.get(job_secrets_ns(reader.job), key)

    def keys(ns: str) -> list:
        return reader.keys(ns)

    return {
        "get": get, "getOptional": get_optional, "getSecret": get_secret, "keys": keys,
        "split": _split, "trim": _trim, "join": _join, "upper": _upper, "lower": _lower,
        "add": _add, "sub": _sub, "mul": _mul, "div": _div, "min": _min, "max": _max,
        "int": _template_int,
    }


TEMPLATE_FUNC_NAMES = frozenset(template_funcs(KVReader({}, "", "")))


class SecretTracker:
    """Notes whether a render read a secret (its output is then secret-bearing): getSecret, get/getOptional/keys
    of a secrets/ namespace or of a TLS private key, and a deploy function whose output carries one
    (``reads_secret``: scrapeConfigs of a scrape template that read a secret). The deploy's renders
    (deploy/stage.py) and build's scrape templates (prometheus/scrape_template.py) use it."""

    def __init__(self) -> None:
        self.secret = False
        self.values: set[str] = set()  # the secret values read, to keep them out of error messages

    def saw(self, value: Any) -> Any:
        self.secret = True
        if isinstance(value, str) and value:
            self.values.add(value)
        return value

    def funcs(self, reader: KVReader) -> dict[str, Callable]:
        """template_funcs(reader) with every secret read noted."""
        funcs = template_funcs(reader)
        for name in ("get", "getOptional", "keys"):
            funcs[name] = self._watch_ns(funcs[name])
        plain_secret = funcs["getSecret"]

        def get_secret(key: str) -> str:
            self.secret = True
            return self.saw(plain_secret(key))
        funcs["getSecret"] = get_secret
        return funcs

    def watch(self, funcs: Mapping[str, Callable]) -> dict[str, Callable]:
        """funcs, where one with a ``reads_secret`` probe (true once its output carried a secret) marks this
        render secret-bearing when it is called."""
        out = dict(funcs)
        for name, func in funcs.items():
            probe = getattr(func, "reads_secret", None)
            if probe is not None:
                out[name] = self._watch_call(func, probe)
        return out

    def _watch_call(self, func: Callable[[], str], probe: Callable[[], bool]) -> Callable[[], str]:
        def watched() -> str:
            value = func()
            if probe():
                self.saw(value)
            return value
        watched.__name__ = getattr(func, "__name__", "watched")
        return watched

    def _watch_ns(self, func: Callable) -> Callable:
        def watched(ns: str, *rest: Any) -> Any:
            if isinstance(ns, str) and (is_secret_ns(ns) or (rest and is_private_key(ns, rest[0]))):
                self.secret = True
                return self.saw(func(ns, *rest))
            return func(ns, *rest)
        return watched

    def redact(self, text: str) -> str:
        for value in sorted(self.values, key=len, reverse=True):
            text = text.replace(value, "***")
        return text


@dataclasses.dataclass
class AllocationData:
    """The dot of a job's .tpl (maand deploy/types.go AllocationData with WorkerData embedded)."""

    AllocationID: str = ""  # noqa: N815 - Go field names are the template's field names
    Job: str = ""  # noqa: N815
    CurrentVersion: str = ""  # noqa: N815
    NewVersion: str = ""  # noqa: N815
    BucketID: str = ""  # noqa: N815
    WorkerID: str = ""  # noqa: N815
    WorkerIP: str = ""  # noqa: N815
    Labels: list = dataclasses.field(default_factory=list)  # noqa: N815
    UpdateSeq: int = 0  # noqa: N815
    BucketPath: str = ""  # noqa: N815
    JobPath: str = ""  # noqa: N815

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "AllocationData":
        """Build from a mapping; an unknown field is refused (Go would fail on it at render)."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise KVError("unknown allocation field(s) %s; the fields are %s"
                          % (", ".join(map(str, unknown)), ", ".join(names)))
        values = dict(data)
        if "Labels" in values:
            values["Labels"] = [str(x) for x in values["Labels"] or []]
        if "UpdateSeq" in values:
            values["UpdateSeq"] = int(values["UpdateSeq"] or 0)
        for name in names:
            if name not in ("Labels", "UpdateSeq") and name in values:
                values[name] = "" if values[name] is None else str(values[name])
        out = cls(**values)
        if out.BucketID and not out.BucketPath:
            out.BucketPath = layout.bucket_root(out.BucketID)
        if out.BucketID and out.Job and not out.JobPath:
            out.JobPath = layout.job_root(out.BucketID, out.Job)
        return out


def parse_template(text: str, name: str,
                   extra_funcs: Mapping[str, Callable] | None = None) -> gotemplate.Template:
    """Parse a job .tpl with maand's function names (what build checks: syntax, unknown funcs).

    Parses are cached by (text, name, extra function names): deploy renders one template for
    many allocations and only the functions' KV view changes between them.
    """
    return _parse_cached(text, name, tuple(sorted((extra_funcs or {}).items(), key=lambda i: i[0])))


@functools.lru_cache(maxsize=256)
def _parse_cached(text: str, name: str, extra: tuple) -> gotemplate.Template:
    funcs = template_funcs(KVReader({}, "", ""))
    funcs.update(dict(extra))
    return gotemplate.parse(text, name, funcs)


def render_allocation(text: str, name: str, data: AllocationData, kv: KV,
                      upstream_jobs: Iterable[str] = (), deleted: Any = None,
                      extra_funcs: Mapping[str, Callable] | None = None) -> str:
    """Render one .tpl for one allocation as maand's deploy does; raise TemplateError."""
    reader = KVReader(kv, data.Job, data.WorkerIP, tuple(upstream_jobs),
                      frozenset(normalize_deleted(deleted)))
    funcs = template_funcs(reader)
    funcs.update(extra_funcs or {})
    return parse_template(text, name, extra_funcs).execute(data, funcs=funcs)


# --- the KV store computed by build (maand build/variables.go + docs/reference/kv/) ----------

def stable_uuid(value: str) -> str:
    """maand's workspace.StableJobID: an MD5 (version 3 style) UUID of value."""
    return str(uuid.UUID(bytes=hashlib.md5(value.encode("utf-8")).digest(), version=3))


def _num(value: Any) -> str:
    """A catalog number as maand stores it in the KV: 512.0 -> "512"."""
    if value is None:
        return "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _by_position(workers: list[dict]) -> list[dict]:
    return sorted(workers, key=lambda w: (w.get("position") is None, w.get("position") or 0,
                                          w.get("host", "")))


def load_vars_toml(path: str) -> dict[str, str]:
    """A job's vars.toml as KV strings (nested tables are refused: the KV holds strings). Read by the
    bucket's one TOML reader (readers): size and nesting bounded, NaN/infinities and 64-bit overflow
    refused naming the key, never a traceback."""
    try:
        data = readers.parse_toml(readers.read_bytes(path).decode("utf-8"))
    except readers.InputError as exc:
        raise KVError("%s: %s%s (fix: %s)" % (path, "%s: " % exc.field if exc.field else "", exc.message,
                                              exc.fix)) from None
    except UnicodeDecodeError as exc:
        raise KVError("%s: not UTF-8 text (byte %d)" % (path, exc.start)) from None
    out = {}
    for key, value in data.items():
        if isinstance(value, (dict, list)):
            raise KVError("%s: %s is a %s; vars.toml values must be strings, numbers or booleans"
                          % (path, key, "table" if isinstance(value, dict) else "list"))
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def load_job_vars(bucket_dir: str, catalog: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """vars.toml of every job of the catalog that has one (workspace/jobs/<job>/vars.toml)."""
    out = {}
    for job in catalog.get("jobs", []):
        rel = job.get("path") or os.path.join("workspace", "jobs", job["name"])
        path = os.path.join(bucket_dir, rel, "vars.toml")
        if not job.get("removed") and os.path.isfile(path):
            out[job["name"]] = load_vars_toml(path)
    return out


@dataclasses.dataclass
class _View:
    """The parts of a catalog the KV is computed from."""

    catalog: Mapping[str, Any]
    workers: list[dict]
    jobs: dict[str, dict]
    live: list[dict]  # non-removed allocations, worker position order
    # jobs whose allocations are all removed: their build-owned job namespaces are purged
    # (maand build/build_variables.go jobShouldPurgeBuildKV; a job with no allocation keeps them)
    purged: frozenset = frozenset()

    @classmethod
    def of(cls, catalog: Mapping[str, Any]) -> "_View":
        workers = _by_position([w for w in catalog.get("workers", []) if not w.get("removed")])
        jobs = {j["name"]: j for j in catalog.get("jobs", []) if not j.get("removed")}
        order = {w["host"]: i for i, w in enumerate(workers)}
        allocations = catalog.get("allocations", [])
        live = [a for a in allocations if a.get("state") != "removed" and a["job"] in jobs and a["worker"] in order]
        live.sort(key=lambda a: (a["job"], order[a["worker"]]))
        purged = frozenset({a["job"] for a in allocations} - {a["job"] for a in allocations if a.get("state") != "removed"})
        return cls(catalog, workers, jobs, live, purged)

    def label_workers(self, label: str) -> list[str]:
        return [w["host"] for w in self.workers if label in (w.get("labels") or [])]

    def labels(self) -> list[str]:
        return sorted({label for w in self.workers for label in (w.get("labels") or [])})

    def job_workers(self, job: str, active_only: bool) -> list[str]:
        return [a["worker"] for a in self.live
                if a["job"] == job and (a.get("state") == "active" or not active_only)]


def _bucket_namespaces(view: _View) -> dict[str, dict[str, str]]:
    catalog = view.catalog
    active_jobs = sorted({a["job"] for a in view.live if a.get("state") == "active"})
    bucket = {"bucket_id": str(catalog.get("bucket_id") or ""), "jobs": ",".join(sorted(view.jobs)),
              "activejobs": ",".join(active_jobs)}
    for job in active_jobs:
        for name, port in sorted((view.jobs[job].get("ports") or {}).items()):
            bucket[name] = _num(port)
    bucket_vars = {k: str(v) for k, v in (catalog.get("bucket_vars") or {}).items()}
    for key in ("port_min", "port_max"):
        if catalog.get(key) is not None:
            bucket_vars.setdefault(key, _num(catalog[key]))
    return {BUCKET_NS: bucket, BUCKET_VARS_NS: bucket_vars}


def _shared_worker_namespace(view: _View, ca_cert: str | None) -> dict[str, str]:
    shared = {}
    for label in view.labels():
        hosts = view.label_workers(label)
        shared["%s_label_id" % label] = stable_uuid(label)
        shared["%s_workers" % label] = ",".join(hosts)
        shared["%s_workers_length" % label] = str(len(hosts))
        for idx, host in enumerate(hosts):
            shared["%s_%d" % (label, idx)] = host
    if ca_cert:
        shared["certs/ca.crt"] = ca_cert
    return shared


def _worker_namespaces(view: _View) -> dict[str, dict[str, str]]:
    out = {}
    for worker in view.workers:
        ip, labels = worker["host"], sorted(worker.get("labels") or [])
        ns = {"worker_ip": ip, "worker_id": str(worker.get("worker_id") or stable_uuid(ip)),
              "position": _num(worker.get("position")), "labels": ",".join(labels),
              "worker_memory_mb": _num(worker.get("memory_mb")),
              "worker_cpu_mhz": _num(worker.get("cpu_mhz")),
              "jobs": ",".join(sorted({a["job"] for a in view.live
                                       if a["worker"] == ip and a.get("state") == "active"}))}
        if worker.get("hostname"):
            ns["hostname"] = str(worker["hostname"])
        for label in labels:
            hosts = view.label_workers(label)
            peers = [h for h in hosts if h != ip]
            if peers:
                ns["%s_peers" % label] = ",".join(peers)
            ns["%s_allocation_index" % label] = str(hosts.index(ip))
        out[worker_ns(ip)] = ns
        out[worker_tags_ns(ip)] = {str(k): str(v) for k, v in (worker.get("tags") or {}).items()}
    return out


def _job_namespace(view: _View, name: str) -> dict[str, str]:
    job = view.jobs[name]
    active = view.job_workers(name, active_only=True)
    ns = {"name": name, "job_name": name, "job_id": stable_uuid(name), "version": str(job.get("version") or ""),
          "selectors": ",".join(job.get("selectors") or []), "workers": ",".join(active),
          "workers_length": str(len(active)), "rollout_order": ",".join(active), "deploy_order": ",".join(active),
          "memory": _num(job.get("memory_mb")), "cpu": _num(job.get("cpu_mhz")),
          "min_memory_mb": _num(job.get("min_memory_mb")),
          "max_memory_mb": _num(job.get("max_memory_mb")),
          "min_cpu_mhz": _num(job.get("min_cpu_mhz")), "max_cpu_mhz": _num(job.get("max_cpu_mhz"))}
    for idx, host in enumerate(active):
        ns["worker_%d" % idx] = host
    for kind, unit in (("memory", "memory_mb"), ("cpu", "cpu_mhz")):
        if ns["min_%s" % unit] == "0" and ns["max_%s" % unit] == "0":
            ns["min_%s" % unit] = ns["max_%s" % unit] = ns[kind]
    return ns


def _job_namespaces(view: _View) -> dict[str, dict[str, str]]:
    out = {}
    for name, job in view.jobs.items():
        if name in view.purged:
            continue
        out[job_ns(name)] = _job_namespace(view, name)
        out[job_bucket_vars_ns(name)] = {k: str(v) for k, v in (job.get("vars") or {}).items()}
        peers = view.job_workers(name, active_only=False)
        for idx, host in enumerate(peers):
            out[allocation_ns(name, host)] = {
                "peer_workers": ",".join(h for h in peers if h != host),
                "%s_allocation_index" % name: str(idx), "version": str(job.get("version") or "")}
    return out


def _user_namespaces(view: _View, job_vars: Mapping[str, Mapping[str, str]],
                     previous: KV) -> dict[str, dict[str, str]]:
    """vars/job/<job> (vars.toml merged over keys written by hooks) and secrets/job/<job> (kept)."""
    out = {}
    for name in view.jobs:
        merged = dict(previous.get(job_vars_ns(name)) or {})
        merged.update({k: str(v) for k, v in (job_vars.get(name) or {}).items()})
        out[job_vars_ns(name)] = merged
        if previous.get(job_secrets_ns(name)):
            out[job_secrets_ns(name)] = dict(previous[job_secrets_ns(name)])
    return out


def compute_kv(catalog: Mapping[str, Any], job_vars: Mapping[str, Mapping[str, str]] | None = None,
               previous: KV | None = None, ca_cert: str | None = None) -> dict[str, dict[str, str]]:
    """maand's KV namespaces for a catalog (pure).

    Build-owned namespaces (maand/*, vars/bucket, vars/bucket/job/*) are recomputed, so stale keys
    drop; vars/job/<job> merges vars.toml (job_vars) over previous keys; secrets/job/<job> is
    carried from previous. Namespaces of removed jobs and workers are gone.
    """
    view = _View.of(catalog)
    out: dict[str, dict[str, str]] = {}
    out.update(_bucket_namespaces(view))
    out[WORKERS_NS] = _shared_worker_namespace(view, ca_cert)
    out.update(_worker_namespaces(view))
    out.update(_job_namespaces(view))
    out.update(_user_namespaces(view, job_vars or {}, previous or {}))
    return {ns: keys for ns, keys in sorted(out.items()) if keys}


def purged_job_namespaces(catalog: Mapping[str, Any], namespaces: Iterable[str]) -> list[str]:
    """The vars/job/<job> and secrets/job/<job> among namespaces that `maand build --purge-job-kv` marks
    deleted (maand build/build_variables.go: a job whose allocations are all removed, or a job no longer in
    the workspace). A job with no allocation at all, or only disabled ones, keeps them."""
    jobs = {j["name"] for j in catalog.get("jobs", []) if not j.get("removed")}
    keep = jobs - _View.of(catalog).purged
    out = []
    for ns in namespaces:
        for prefix in ("vars/job/", "secrets/job/"):
            name = ns[len(prefix):] if ns.startswith(prefix) else ""
            if name and "/" not in name and name not in keep:
                out.append(ns)
    return sorted(out)


def upstream_jobs(catalog: Mapping[str, Any], job: str) -> list[str]:
    """The jobs job demands through its commands (maand's UpstreamDemandKVNamespaces)."""
    for entry in catalog.get("jobs", []):
        if entry["name"] == job:
            demands = [c.get("demands", {}).get("job") for c in (entry.get("commands") or {}).values()]
            return sorted({d for d in demands if d})
    return []


def allocation_data(catalog: Mapping[str, Any], job: str, worker_ip: str,
                    current_version: str = "", update_seq: int = 0) -> AllocationData:
    """The dot of job's templates on worker_ip, from the catalog."""
    view = _View.of(catalog)
    alloc = next((a for a in view.live if a["job"] == job and a["worker"] == worker_ip), None)
    worker = next((w for w in view.workers if w["host"] == worker_ip), None)
    if alloc is None or worker is None:
        raise KVError("no allocation of job %s on worker %s in the catalog" % (job, worker_ip))
    bucket_id = str(view.catalog.get("bucket_id") or "")
    return AllocationData(
        AllocationID=str(alloc.get("alloc_id") or ""), Job=job, CurrentVersion=current_version,
        NewVersion=str(view.jobs[job].get("version") or ""), BucketID=bucket_id,
        WorkerID=str(worker.get("worker_id") or stable_uuid(worker_ip)), WorkerIP=worker_ip,
        Labels=sorted(worker.get("labels") or []), UpdateSeq=update_seq,
        BucketPath=layout.bucket_root(bucket_id), JobPath=layout.job_root(bucket_id, job))
