# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bucket model: read a maand bucket from disk into plain objects, collecting every problem.

Nothing here writes anything. Files read (paths relative to the bucket):
  maand.conf                              TOML: ssh_user, ssh_key, ssh_port, use_sudo, job_config_selector
  workspace/workers.json                  hosts, labels, tags, capacity
  workspace/jobs/<job>/manifest.json      + Makefile (or Makefile.tpl / Makefile.j2)
  workspace/bucket.conf                   TOML: port_min/port_max, other keys are bucket vars
  workspace/bucket.jobs[.<selector>].conf TOML: per-job memory/cpu reservations; every key a job var
  workspace/disabled.json                 drained jobs, allocations and workers
maand.conf may also hold `hardware` (bucket-wide hardware minimums) and `[constraint_groups]`
(named RFC 31 constraints); see docs/placement.md.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from typing import Any, Optional

from . import job_checks
from . import readers, runlog, schemas, state_pg, storage
from .units import ARCHES, normalize_arch
from .problems import Report, did_you_mean, edit_distance, near_miss
from .units import parse_cpu_mhz, parse_memory_mb, parse_version

MAAND_CONF = "maand.conf"
WORKERS_FILE = "workspace/workers.json"
BUCKET_CONF = "workspace/bucket.conf"
DISABLED_FILE = "workspace/disabled.json"
JOBS_DIR = "workspace/jobs"

MAAND_CONF_DEFAULTS = {
    "ssh_user": "agent",
    "ssh_key": "worker.key",
    "ssh_port": 22,
    "use_sudo": True,
    "certs_ttl": 60,
    "certs_renewal_buffer": 0,
    "job_config_selector": "",
}
NEAR_MISS_KEY = "near_miss_keys"  # maand.core's own: a manifest key within two edits of a known one is an "error" or a "warn"ing
MAAND_CONF_KEYS = frozenset(MAAND_CONF_DEFAULTS) | {"hardware", "constraint_groups", "state_url", "log_format", NEAR_MISS_KEY}
MAAND_CONF_UNHONOURED = {}  # maand keys maand.core reads but does not act on (none now: log_format is honoured, bucket/runlog.py)
DEFAULT_PORT_MIN, DEFAULT_PORT_MAX = 30000, 39999

# Job names become directory names on workers, group names and shell arguments: keep them plain.
JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")
# Worker hosts are IPs or DNS names (they become inventory host names and appear in paths).
HOST_NAME = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.:-]{0,252}[A-Za-z0-9_])?\Z")
SELECTOR_NAME = re.compile(r"^[A-Za-z0-9_.:-]+\Z")
PORT_NAME = re.compile(r"^[a-z][a-z0-9_]*\Z")
RESERVED_JOB_DIRS = ("data", "logs", "bin")
MAKEFILES = ("Makefile", "Makefile.tpl", "Makefile.j2")
COMMAND_EVENTS = frozenset(
    {"post_build", "pre_deploy", "post_deploy", "job_control", "health_check", "cli",
     "after_allocation_started", "after_allocation_stopped", "before_allocation_stopped"}
)


@dataclasses.dataclass(slots=True, eq=False, init=False)
class Worker:
    """A worker of workspace/workers.json as the model reads it (typed record; the loader sets every field)."""

    host: str
    hostname: Optional[str]
    labels: tuple  # lower-cased, sorted, with "worker"
    tags: dict  # lower-cased keys and values
    zone: str
    position: int
    memory_mb: Optional[float]
    cpu_mhz: Optional[float]
    cores: Optional[int]
    storage_mb: Optional[float]
    arch: Optional[str]  # Juju's name (amd64, arm64, ...)
    index: int  # rank in position order: the bit of this worker in every worker mask

    def as_catalog(self):
        return {
            "host": self.host, "hostname": self.hostname, "labels": list(self.labels), "tags": dict(self.tags),
            "zone": self.zone, "position": self.position, "memory_mb": self.memory_mb, "cpu_mhz": self.cpu_mhz,
            "cores": self.cores, "storage_mb": self.storage_mb, "arch": self.arch, "removed": False,
        }


@dataclasses.dataclass(slots=True, eq=False, init=False)
class Job:
    """A job of workspace/jobs/<name>/ as the model reads it (typed record; load_job sets every field)."""

    name: str
    file: str  # workspace/jobs/<name>/manifest.json
    path: str  # workspace/jobs/<name>
    version: str
    version_given: bool
    selectors: tuple
    min_memory_mb: Optional[float]
    max_memory_mb: Optional[float]
    memory_mb: float
    memory_source: Optional[str]
    min_cpu_mhz: Optional[float]
    max_cpu_mhz: Optional[float]
    cpu_mhz: float
    cpu_source: Optional[str]
    ports: dict  # port name -> fixed port, or None (from the bucket.conf pool)
    min_allocations_count: int
    max_concurrent_starts: Any  # a count, or "25%" of the job's allocations (resolved at build)
    max_concurrent_upgrades: Any
    start_gate: str  # "last_batch" (maand: one gate after the last start batch) or "every_batch"
    auto_revert: bool  # a failed upgrade batch gets the last promoted version back
    canary: int  # an upgrade rolls out to this many allocations first; the rest waits for maand_promote
    min_healthy_time: float  # seconds a batch stays healthy after its gate passed (0: none)
    progress_deadline: float  # seconds a batch may take to make progress (0: none)
    auto_promote: bool  # with canary: the rest rolls out in the same deploy once the canaries are healthy
    shutdown_delay: float  # seconds between before_allocation_stopped and a stop or restart (deploy/drain.py)
    restart_policy: str
    restart_globs: list
    commands: dict  # name -> Command
    health_check: dict
    constraints: Any
    hardware: Any
    placement: Any
    makefile: Optional[str]
    vars: dict
    manifest: dict
    rules: Any  # placement/select.Rules, compiled once every job is loaded
    top_entries: frozenset  # names directly in the job folder
    template_files: dict  # {".tpl": files, ".j2": files} from the one walk of the job folder
    certs: tuple  # job_checks.CertSpec of the manifest's certs map


@dataclasses.dataclass(slots=True, eq=False, init=False)
class Command:
    """A job command of a manifest (maand's job_commands; maand.core reads, orders and warns, never runs them)."""

    name: str
    executed_on: list
    demand_job: str
    demand_command: str
    demand_config: dict
    min_version: Optional[str]
    max_version: Optional[str]


@dataclasses.dataclass(eq=False)  # compared and hashed by identity, as before
class Bucket:
    """Everything read from one bucket directory (path made absolute)."""

    path: str
    conf: dict = dataclasses.field(default_factory=lambda: dict(MAAND_CONF_DEFAULTS))
    job_config_selector: str = ""
    job_config_file: str = "bucket.jobs.conf"
    bucket_vars: dict = dataclasses.field(default_factory=dict)
    port_min: int = DEFAULT_PORT_MIN
    port_max: int = DEFAULT_PORT_MAX
    port_range_problem: Optional[tuple] = None  # (key, message), reported only when a job asks the pool for a port (as maand)
    workers: list = dataclasses.field(default_factory=list)
    jobs: dict = dataclasses.field(default_factory=dict)
    job_configs: dict = dataclasses.field(default_factory=dict)
    disabled_jobs: dict = dataclasses.field(default_factory=dict)  # job -> None (whole job) or set of hosts
    disabled_workers: set = dataclasses.field(default_factory=set)

    def __post_init__(self):
        self.path = os.path.abspath(self.path)

    @property
    def ssh_key_path(self):
        return os.path.join(self.path, "secrets", str(self.conf.get("ssh_key") or ""))


def _read_text(bucket, rel, report, kind, required):
    full = os.path.join(bucket.path, rel)
    try:
        raw = readers.read_bytes(full)
    except readers.InputError as exc:
        report.error(kind, rel, "", exc.message, exc.fix)
        return None
    except FileNotFoundError:
        if required:
            report.error(kind, rel, "", "file not found", "create %s (ansible-playbook maand.core.init)" % rel)
        return None
    except OSError as exc:
        report.error(kind, rel, "", "cannot read: %s" % exc.strerror, "fix the file's permissions")
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        report.error(kind, rel, "", "not UTF-8 text (byte %d)" % exc.start, "save the file as UTF-8")
        return None


def _read_toml(bucket, rel, report, kind, required=False):
    text = _read_text(bucket, rel, report, kind, required)
    if text is None:
        return None
    try:
        return readers.parse_toml(text)
    except tomllib.TOMLDecodeError as exc:
        report.error(kind, rel, "", "invalid TOML: %s" % exc, "fix the TOML syntax at that line")
    except readers.InputError as exc:
        report.error(kind, rel, exc.field, exc.message, exc.fix)
    return None


def _read_json(bucket, rel, report, kind, required=False, check_depth=True, what="invalid JSON"):
    """The document, or None with the error reported. A syntax error is worded as Go's encoding/json words
    it (maand's reader), after `what` (maand's "invalid manifest.json: job a"), with its line and column."""
    text = _read_text(bucket, rel, report, kind, required)
    if text is None:
        return None
    try:
        return readers.parse_json(text, check_depth=check_depth)
    except readers.InputError as exc:
        report.error(kind, rel, exc.field, exc.message, exc.fix)
        return None
    except json.JSONDecodeError as exc:
        found = readers.go_json_error(text)
        if found is None:  # Python refuses what Go accepts: Python's words
            reason, line, column = exc.msg, exc.lineno, exc.colno
        else:
            reason, offset = found
            before = text.encode("utf-8", "surrogateescape")[:offset].decode("utf-8", "replace")
            line, column = before.count("\n") + 1, len(before) - before.rfind("\n")
        report.error(kind, rel, "", "%s: %s (line %d, column %d)" % (what, reason, line, column),
                     "fix the JSON syntax there")
        return None


def _too_deep(document, known, rel, report):
    """workers.json is large: its known keys are bounded by the schema, so only other keys are walked."""
    for index, item in enumerate(document if isinstance(document, list) else ()):
        for key in (set(item) - known) if isinstance(item, dict) else ():
            try:
                # levels counted from the worker's entry, as a manifest's from its object: the value is level 2
                readers.check_nesting(item[key], prefix="[%d].%s" % (index, key), start=2)
            except readers.InputError as exc:
                report.error("ErrInvalidWorkerJSON", rel, exc.field, exc.message, exc.fix)
                return True
    return False


def _schema_errors(document, schema, rel, kind, report, prefix=""):
    problems = schemas.check(document, schema)
    for path, message in problems:
        report.error(kind, rel, prefix + path[1:] if prefix else path, message,
                     "correct the value's type or shape (see the maand.core README, bucket format)")
    return bool(problems)


def load_maand_conf(bucket, report):
    if not os.path.lexists(os.path.join(bucket.path, MAAND_CONF)):  # maand: ErrNotInitialized (bucket/errors.go)
        report.error("ErrNotInitialized", MAAND_CONF, "", "maand is not initialized: file not found",
                     "run ansible-playbook maand.core.init -e maand_bucket=<the bucket folder>, or create %s" % MAAND_CONF)
        return
    conf = _read_toml(bucket, MAAND_CONF, report, "ErrInvalidMaandConf", required=True)
    if conf is None:
        return
    for key in sorted(set(conf) - MAAND_CONF_KEYS):
        if key in MAAND_CONF_UNHONOURED:
            report.unhonoured("ErrInvalidMaandConf", MAAND_CONF, key, MAAND_CONF_UNHONOURED[key], "remove it")
            continue
        report.unhonoured("ErrInvalidMaandConf", MAAND_CONF, key, "unknown key %r is ignored%s" % (
            key, did_you_mean(key, MAAND_CONF_KEYS)), "remove it or fix its spelling")
    checks = {
        "ssh_user": (str, "a user name string"), "ssh_key": (str, "a file name under secrets/"),
        "ssh_port": (int, "an integer port"), "use_sudo": (bool, "true or false"),
        "job_config_selector": (str, "a string such as \"prod\""), "log_format": (str, "kv, json or jsonl"),
        "certs_ttl": (int, "a number of days"), "certs_renewal_buffer": (int, "a number of days"),
        "state_url": (str, "a postgresql:// URL"),
    }
    for key, (typ, what) in checks.items():
        if key in conf and (not isinstance(conf[key], typ) or (typ is int and isinstance(conf[key], bool))):
            report.error("ErrInvalidMaandConf", MAAND_CONF, key, "expected %s, got %s %s" % (
                what, _toml_type(conf[key]), _short(conf[key])), "set %s to %s" % (key, what))
            conf.pop(key)
    if "log_format" in conf and runlog.format_problem(conf["log_format"]):
        report.error("ErrInvalidMaandConf", MAAND_CONF, "log_format", runlog.format_problem(conf["log_format"]),
                     "set log_format = \"kv\" or \"json\" in maand.conf, or remove it (kv)")
        conf.pop("log_format")
    if isinstance(conf.get("ssh_port"), int) and conf["ssh_port"] <= 0:
        conf["ssh_port"] = 22  # maand (bucket/config.go SSHPort): ssh_port <= 0 means 22; `maand init` writes 0
    if isinstance(conf.get("ssh_port"), int) and not 0 < conf["ssh_port"] < 65536:
        report.error("ErrInvalidMaandConf", MAAND_CONF, "ssh_port", "port %d is out of range" % conf["ssh_port"],
                     "use a port between 1 and 65535")
    key_name = conf.get("ssh_key")
    if isinstance(key_name, str) and (not key_name or "/" in key_name or key_name.startswith("..")):
        report.error("ErrInvalidMaandConf", MAAND_CONF, "ssh_key", "%r is not a file name under secrets/" % key_name,
                     "put the key in <bucket>/secrets/ and give only its file name")
        conf.pop("ssh_key")
    url = conf.get("state_url")
    if isinstance(url, str) and url and not state_pg.is_url(url):
        report.error("ErrInvalidMaandConf", MAAND_CONF, "state_url", "%r is not a postgresql:// URL" % state_pg.redact(url),
                     "set state_url = \"postgresql://[user@]host[:port]/database\" (password through PGPASSWORD, "
                     "~/.pgpass or a service file, never in maand.conf), or remove it to keep the state in data/")
        conf.pop("state_url")
    elif isinstance(url, str) and state_pg.has_password(url):
        report.error("ErrInvalidMaandConf", MAAND_CONF, "state_url", "the URL holds a password, and maand.conf is "
                     "committed", "remove the password from the URL: set PGPASSWORD, ~/.pgpass or a service file")
        conf.pop("state_url")
    key_rel = "secrets/%s" % (conf.get("ssh_key") or MAAND_CONF_DEFAULTS["ssh_key"])
    problem = storage.key_mode_problem(os.path.join(bucket.path, key_rel), key_rel, with_fix=False)
    if problem:  # ssh refuses such a key too; kv.key and ca.key are refused where they are read
        report.warn("ErrInvalidMaandConf", MAAND_CONF, "ssh_key", problem, "chmod 600 %s" % key_rel)
    if conf.get(NEAR_MISS_KEY, "error") not in ("error", "warn"):
        report.error("ErrInvalidMaandConf", MAAND_CONF, NEAR_MISS_KEY, "expected \"error\" or \"warn\", got %s"
                     % _short(conf[NEAR_MISS_KEY]), "set %s = \"warn\" (or remove it: a typo is an error)" % NEAR_MISS_KEY)
        conf.pop(NEAR_MISS_KEY)
    selector = conf.get("job_config_selector", "")
    if isinstance(selector, str) and selector and not re.match(r"^[A-Za-z0-9_-]+\Z", selector):
        report.error("ErrInvalidMaandConf", MAAND_CONF, "job_config_selector",
                     "%r cannot be part of a file name" % selector, "use letters, digits, '-' or '_'")
        conf.pop("job_config_selector")
    bucket.conf.update(conf)
    bucket.job_config_selector = bucket.conf.get("job_config_selector") or ""
    bucket.job_config_file = (
        "bucket.jobs.%s.conf" % bucket.job_config_selector if bucket.job_config_selector else "bucket.jobs.conf"
    )


def _string_values(conf, rel, report, prefix=""):
    """maand reads bucket.conf and bucket.jobs[.sel].conf into map[string]string: a value that is not a
    string fails its build (ErrInvalidBucketConf). Returns conf without the bad keys."""
    good = {}
    for key, value in conf.items():
        if isinstance(value, str):
            good[key] = value
            continue
        got = _toml_type(value)
        report.error("ErrInvalidBucketConf", rel, prefix + key,
                     "expected a string, got %s %s (maand: toml: cannot decode TOML %s into a Go value of type "
                     "string)" % (got, _short(value), got),
                     "quote the value: %s = \"%s\"" % (key, _short(value)))
    return good


def _toml_type(value):
    if isinstance(value, bool):
        return "boolean"
    for typ, name in ((int, "integer"), (float, "float"), (dict, "table"), (list, "array")):
        if isinstance(value, typ):
            return name
    return "date/time" if hasattr(value, "isoformat") else type(value).__name__


def _short(value):
    text = value.isoformat() if hasattr(value, "isoformat") else str(value).lower() if isinstance(value, bool) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _port_number(value):
    number = int(value.strip())  # maand: strconv.Atoi(strings.TrimSpace(raw))
    if not 0 < number < 65536:
        raise ValueError
    return number


def load_bucket_conf(bucket, report):
    conf = _string_values(_read_toml(bucket, BUCKET_CONF, report, "ErrInvalidBucketConf") or {}, BUCKET_CONF, report)
    for key in ("port_min", "port_max"):
        if conf.get(key, "").strip():
            try:
                setattr(bucket, key, _port_number(conf[key]))
            except (TypeError, ValueError):
                bucket.port_range_problem = (key, "%s %r is not a port number (1-65535)" % (key, conf[key]))
    if bucket.port_range_problem is None and bucket.port_min > bucket.port_max:
        bucket.port_range_problem = ("port_min", "port_min %d is greater than port_max %d" % (bucket.port_min,
                                                                                              bucket.port_max))
    bucket.bucket_vars = {k: v for k, v in conf.items() if k not in ("port_min", "port_max")}  # -> KV vars/bucket


def load_job_configs(bucket, report):
    rel = "workspace/" + bucket.job_config_file
    conf = _read_toml(bucket, rel, report, "ErrInvalidBucketJobsConf") or {}
    if bucket.job_config_selector and not os.path.exists(os.path.join(bucket.path, rel)):
        report.warn("ErrInvalidBucketJobsConf", rel, "", "job_config_selector is %r but this file does not exist: "
                    "reservations fall back to manifest max" % bucket.job_config_selector,
                    "create %s or fix job_config_selector in maand.conf" % rel)
    for name, section in conf.items():
        if not isinstance(section, dict):
            report.error("ErrInvalidBucketJobsConf", rel, name, "expected a [%s] table, got %r" % (name, section),
                         "write the job's settings under a [%s] section" % name)
            continue
        bucket.job_configs[name] = _string_values(section, rel, report, prefix=name + ".")
        # every key reaches the job through the KV (vars/bucket/job/<job>)


def load_workers(bucket, report):
    rel = WORKERS_FILE
    if not os.path.lexists(os.path.join(bucket.path, rel)):
        report.warn("ErrInvalidWorkerJSON", rel, "", "no workers.json: building with zero workers (as maand)",
                    "create %s (ansible-playbook maand.core.facts fills in capacity)" % rel)
        return
    document = _read_json(bucket, rel, report, "ErrInvalidWorkerJSON", required=True, check_depth=False)
    if document is None or _too_deep(document, frozenset(schemas.WORKER_KEYS), rel, report):
        return
    if _schema_errors(document, schemas.WORKERS, rel, "ErrInvalidWorkerJSON", report):
        return
    known = frozenset(schemas.WORKER_KEYS)
    seen = {}
    positions = {}
    workers = []
    for index, item in enumerate(document):
        field = "[%d]" % index
        extra = item.keys() - known
        for key in sorted(extra) if extra else ():
            report.unhonoured("ErrInvalidWorkerJSON", rel, "%s.%s" % (field, key), "unknown key %r is ignored%s" % (
                key, did_you_mean(key, known)), "remove it or fix its spelling")
        host = item["host"].strip()  # maand trims host and hostname (workspace/workspace.go GetWorkers)
        if not HOST_NAME.match(host):
            report.error("ErrInvalidWorkerJSON", rel, field + ".host", "%r is not an IP address or host name" % host,
                         "use an address like 10.0.0.1 or a DNS name, without spaces or slashes")
            continue
        if host in seen:
            report.error("ErrInvalidWorkerJSON", rel, field + ".host", "duplicate host %s (also at [%d])" % (host, seen[host]),
                         "list each host once")
            continue
        seen[host] = index
        worker = Worker()
        worker.host = host
        worker.hostname = (item.get("hostname") or "").strip() or None
        given = [label.strip().lower() for label in item.get("labels", ())]
        labels = set(given)
        if len(labels) < len(given):
            twice = sorted({label for label in given if given.count(label) > 1})
            report.error("ErrInvalidWorkerJSON", rel, field + ".labels", "worker %s have duplicate labels (%s)" % (
                host, ", ".join(twice)), "list each label once (labels are compared in lower case)")
        labels.add("worker")
        worker.labels = tuple(sorted(labels))
        # maand (workspace/worker.go NewWorker): tag keys and values trimmed and lower-cased
        worker.tags = {str(k).strip().lower(): str(v).strip().lower() for k, v in (item.get("tags") or {}).items()}
        worker.zone = worker.tags.get("zone", "")
        worker.position = item.get("position", index)
        if worker.position in positions:
            report.error("ErrInvalidWorkerJSON", rel, field + ".position", "position %d is also used by %s" % (
                worker.position, positions[worker.position]), "give every worker a distinct position, or omit it")
        positions[worker.position] = host
        for attr, key, parse in (("memory_mb", "memory", parse_memory_mb), ("cpu_mhz", "cpu", parse_cpu_mhz),
                                 ("storage_mb", "storage", parse_memory_mb)):
            value = None
            if key in item:
                try:
                    value = parse(item[key]) or None  # 0 / "" means "not declared", as maand
                except ValueError as exc:
                    report.error("ErrInvalidWorkerJSON", rel, "%s.%s" % (field, key), str(exc),
                                 "write e.g. \"8 gb\"" if key != "cpu" else "write e.g. \"4000 mhz\"")
            setattr(worker, attr, value)
        worker.cores = item.get("cores") or None
        arch = item.get("arch")
        worker.arch = None if arch is None else _worker_arch(arch, rel, field, report)
        workers.append(worker)
    workers.sort(key=lambda w: w.position)
    for i, worker in enumerate(workers):
        worker.index = i
    bucket.workers = workers


def _worker_arch(value, rel, field, report):
    """Juju's name for the worker's architecture (x86_64 -> amd64); an unknown name is kept as written
    (lower case) with a warning: no arch constraint matches it."""
    try:
        return normalize_arch(value)
    except ValueError:
        report.warn("ErrInvalidWorkerJSON", rel, field + ".arch", "architecture %r is not one of %s: no arch "
                    "constraint will match this worker" % (value, ", ".join(ARCHES)), "fix the name, or ignore this")
        return value.strip().lower()


def _walk_job(bucket, name, rel_dir, report, manifest_rel):
    """Check the job tree: reserved dirs, Makefile, symlinks; list its templates (.tpl, .j2)."""
    root = os.path.join(bucket.path, rel_dir)
    top, tpl_files = {}, []
    stack = [root]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError as exc:
            report.error("ErrInvalidJob", rel_dir, os.path.relpath(current, root), "cannot list: %s" % exc.strerror,
                         "fix the permissions")
            continue
        if current == root:
            top = {entry.name: entry for entry in entries}
        for entry in entries:
            rel = entry.path[len(root) + 1:]
            if entry.is_symlink():
                _check_symlink(bucket, rel_dir, root, rel, report)
                if entry.name.endswith((".tpl", ".j2")) and not _in_skipped(rel) and not _is_dir(entry):
                    tpl_files.append(rel)  # a link to a file counts, as in os.walk's files
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.name.endswith((".tpl", ".j2")) and not _in_skipped(rel):
                tpl_files.append(rel)
    makefile = next((m for m in MAKEFILES if m in top and top[m].is_file()), None)  # follows a link, as os.stat
    if makefile is None:
        # maand's words (build/build_jobs.go; tests/build_bucket_test.go TestMakefileNotFound reads them)
        report.error("ErrInvalidJob", rel_dir, "Makefile", "invalid job: job %s, Makefile or Makefile.tpl not found" % name,
                     "add %s/Makefile with start, stop and restart targets" % rel_dir)
    for reserved in RESERVED_JOB_DIRS:
        if reserved in top:
            report.error("ErrInvalidJob", rel_dir, reserved, "job %s, %s directory is reserved (created on workers at "
                         "runtime)" % (name, reserved), "remove %s/%s from the workspace" % (rel_dir, reserved))
    # .tpl and .j2 files in the order of catalog/kv_build.job_templates (an os.walk, sorted): one walk per job
    tpl_files.sort(key=lambda rel: (tuple(rel.split("/")[:-1]), rel.rsplit("/", 1)[-1]))
    return makefile, frozenset(top), {suffix: tuple(r for r in tpl_files if r.endswith(suffix))
                                      for suffix in (".tpl", ".j2")}


TEMPLATE_SKIPPED_DIRS = ("_modules", "_prometheus")  # as catalog/kv_build.SKIPPED_DIRS


def _in_skipped(rel):
    return rel.split("/", 1)[0] in TEMPLATE_SKIPPED_DIRS and "/" in rel


def _is_dir(entry):
    try:
        return entry.is_dir()  # follows the link, as os.walk does to sort dirs from files
    except OSError:
        return False


def _check_symlink(bucket, rel_dir, root, rel, report):
    """A link is shipped as a link: its target must be relative and stay inside the job folder both as
    written (what it means on the worker) and as resolved here."""
    full = os.path.join(root, rel)
    try:
        target = os.readlink(full)
    except OSError as exc:
        report.error("ErrInvalidJob", rel_dir, rel, "cannot read the symlink: %s" % exc.strerror, "replace it by a file")
        return
    lexical = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    real_root = os.path.realpath(root)
    resolved = os.path.realpath(full)
    if os.path.isabs(target):
        problem = "symlink target %s is absolute (it would point elsewhere on the worker)" % target
    elif lexical == ".." or lexical.startswith(".." + os.sep):
        problem = "symlink target %s leaves the job folder" % target
    elif resolved != real_root and not resolved.startswith(real_root + os.sep):
        problem = "symlink leaves the job folder (resolves to %s)" % resolved
    else:
        return
    report.error("ErrInvalidJob", rel_dir, rel, problem,
                 "use a relative link to a file inside the job folder, or copy the file in")


def _bounds(job, manifest, key, parse, rel, report):
    spec = (manifest.get("resources") or {}).get(key) or {}
    values = []
    for side in ("min", "max"):
        try:
            values.append(parse(spec.get(side)))
        except ValueError as exc:
            report.error("ErrInvalidManifest", rel, "resources.%s.%s" % (key, side), "job %s: %s" % (job.name, exc),
                         "use maand units (%s)" % ("mb, gb, tb" if key == "memory" else "mhz, ghz, thz"))
            values.append(0.0)
    low, high = values
    if low and not high:
        high = low  # maand: min set, max omitted or 0 -> max defaults to min
    if low > high:
        report.error("ErrInvalidManifest", rel, "resources.%s" % key, "job %s: min %.2f > max %.2f" % (job.name, low, high),
                     "make resources.%s.min <= resources.%s.max" % (key, key))
    return low, high


def _reservation(bucket, job, key, unit, parse, low, high, report):
    """Reservation = bucket override, else manifest max; the override must be within the bounds."""
    section = bucket.job_configs.get(job.name) or {}
    rel = "workspace/" + bucket.job_config_file
    if key not in section:
        return low, high, high, "manifest"
    try:
        requested = parse(section[key])
    except ValueError as exc:
        report.error("ErrInvalidBucketJobsConf", rel, "%s.%s" % (job.name, key), str(exc),
                     "use maand units (%s)" % ("mb, gb, tb" if key == "memory" else "mhz, ghz, thz"))
        return low, high, high, "manifest"
    if low == 0 and high == 0:
        low = high = requested
    for bound, name, bad in ((high, "max", requested > high), (low, "min", requested < low)):
        if bad:
            report.error(
                "ErrUnsupportedResourceConfiguration", rel, "%s.%s" % (job.name, key),
                "%s, job %s %s_%s %.2f %s, requested %.2f %s" % (
                    bucket.job_config_file, job.name, name, "memory_mb" if key == "memory" else "cpu_mhz", bound, unit,
                    requested, unit),
                "keep %s within the manifest's resources.%s min/max, or widen those bounds" % (key, key))
    return low, high, requested, bucket.job_config_file


COMMAND_SCRIPT_SUFFIXES = (".py", ".ts", ".js")


def _module_files(bucket, job):
    """The regular files in a job's _modules/ (one listing per job, not three stats per command)."""
    try:
        return {e.name for e in os.scandir(os.path.join(bucket.path, job.path, "_modules")) if e.is_file()}
    except OSError:
        return set()


def _check_command_script(job, name, listing, rel, report):
    """maand (jobcommand/runtime.go ResolveCommandScript): exactly one of _modules/<name>.py, .ts or .js."""
    modules = "%s/_modules" % job.path
    found = [name + suffix for suffix in COMMAND_SCRIPT_SUFFIXES if name + suffix in listing]
    field = "commands.%s" % name
    if not found:
        report.error("ErrJobCommandFileNotFound", rel, field,
                     "job %s command %s: job command file not found: expected %s.py, %s.ts, or %s.js under %s" % (
                         job.name, name, name, name, name, modules),
                     "add %s/%s.py (or .ts/.js), or remove the command from the manifest" % (modules, name))
    elif len(found) > 1:
        report.error("ErrInvalidJobCommandConfiguration", rel, field,
                     "job %s command %s: invalid job command configuration: multiple implementations for %s under %s "
                     "(use only one of .py, .ts, .js): %s" % (job.name, name, name, modules, ", ".join(found)),
                     "keep one of %s" % ", ".join(found))


def _load_commands(bucket, job, manifest, rel, report):
    commands = {}
    listing = _module_files(bucket, job) if manifest.get("commands") and "_modules" in job.top_entries else set()
    for name, spec in (manifest.get("commands") or {}).items():
        field = "commands.%s" % name
        if not name.startswith("command_"):
            report.error("ErrInvalidJobCommandConfiguration", rel, field, "job %s: command name must start with command_" % job.name,
                         "rename it to command_%s" % name)
            continue
        command = Command()
        command.name = name
        command.executed_on = list(spec.get("executed_on") or [])
        if not command.executed_on:  # maand build/build_jobs.go; tests/build_job_command_test.go TestJobCommandWithoutTrigger
            report.error("ErrInvalidJobCommandConfiguration", rel, field + ".executed_on",
                         "job %s, job_command %s missing executed_on" % (job.name, name),
                         "list the events that run it, e.g. \"executed_on\": [\"post_build\"]")
        _check_command_script(job, name, listing, rel, report)
        bad = [e for e in command.executed_on if e not in COMMAND_EVENTS]
        if bad:
            report.error("ErrInvalidJobCommandConfiguration", rel, field + ".executed_on",
                         "job %s: unknown events %s" % (job.name, ", ".join(bad)),
                         "use events from: %s" % ", ".join(sorted(COMMAND_EVENTS)))
        demands = spec.get("demands") or {}
        command.demand_job = demands.get("job") or ""
        command.demand_command = demands.get("command") or ""
        config = demands.get("config") or {}
        command.demand_config = config if isinstance(config, dict) else {}
        command.min_version = config.get("min_version")
        command.max_version = config.get("max_version")
        commands[name] = command
    return commands


def _load_version(job, manifest, rel, report):
    """maand keeps the version as written ("1.1" stays "1.1", tests/build_job_test.go TestJobVersionUpdate);
    every non-empty version must parse (build/validate_demands.go resolveJobVersion)."""
    raw = manifest.get("version")
    job.version_given = isinstance(raw, str) and bool(raw.strip())
    job.version = raw if job.version_given else "0.0.0"
    if raw is not None and not isinstance(raw, str):
        report.error("ErrInvalidManifest", rel, "version", "job %s: expected a version string, got %s %r (maand: json: "
                     "cannot unmarshal %s into Go struct field Manifest.version of type string)" % (
                         job.name, type(raw).__name__, raw, "number" if isinstance(raw, (int, float)) else "value"),
                     "quote it: \"version\": \"%s\"" % raw)
        return
    if job.version_given:
        try:
            parse_version(raw)
        except ValueError as exc:
            report.error("ErrInvalidJobVersion", rel, "version", "job %s: %s" % (job.name, exc), "write e.g. \"1.2.0\"")


def _report_unknown_keys(document, known, kind, rel, report, near_miss_error=False):
    """A warning per unknown key (maand tolerates them); with `near_miss_error`, a key within two edits of a
    known one ("helth_check") is an error: the job would deploy without what it meant (issue 31 item 3)."""
    for path, key, keys in schemas.unknown_keys(document, known):
        field = "%s.%s" % (path, key) if path else str(key)
        meant = near_miss(key, keys) if near_miss_error else None
        if meant is not None:
            report.error(kind, rel, field, "unknown key %r is %d edit%s from the known key %r: it would be ignored"
                         % (key, edit_distance(key, meant), "" if edit_distance(key, meant) == 1 else "s", meant),
                         "rename it \"%s\"; or, if %r is meant as it is, set %s = \"warn\" in %s"
                         % (meant, key, NEAR_MISS_KEY, MAAND_CONF))
            continue
        report.unhonoured(kind, rel, field, "unknown key %r is ignored%s" % (key, did_you_mean(key, keys)),
                          "remove it or fix its spelling (known here: %s)" % ", ".join(keys))


def _int_field(manifest, names, default):
    """(the field that holds it, its value): the first of names in manifest, else (names[0], default)."""
    for name in names:
        if name in manifest:
            return name, manifest[name]
    return names[0], default


def load_job(bucket, name, report):
    rel_dir = "%s/%s" % (JOBS_DIR, name)
    rel = rel_dir + "/manifest.json"
    if not JOB_NAME.match(name):
        report.error("ErrInvalidJob", rel_dir, "", "job name %r is not allowed" % name,
                     "rename the folder using letters, digits, '.', '_' or '-' (no spaces, slashes or shell characters)")
        return None
    if os.path.islink(os.path.join(bucket.path, rel_dir)):
        report.error("ErrInvalidJob", rel_dir, "", "the job folder is a symlink", "make it a real folder in workspace/jobs")
        return None
    manifest = _read_json(bucket, rel, report, "ErrInvalidManifest", required=True,
                          what="invalid manifest.json: job %s" % name)
    makefile, top, tpl_files = _walk_job(bucket, name, rel_dir, report, rel)
    if manifest is None:
        return None
    if not isinstance(manifest, dict):
        report.error("ErrInvalidManifest", rel, "$", "expected a JSON object, got %s" % type(manifest).__name__,
                     "wrap the manifest in { }")
        return None
    if _schema_errors(manifest, schemas.MANIFEST, rel, "ErrInvalidManifest", report):
        return None
    _report_unknown_keys(manifest, schemas.MANIFEST_KNOWN, "ErrInvalidManifest", rel, report,
                         near_miss_error=bucket.conf.get(NEAR_MISS_KEY, "error") != "warn")
    job = Job()
    job.name = name
    job.file = rel
    job.path = rel_dir
    job.manifest = manifest
    job.makefile = makefile
    job.top_entries = top  # names directly in the job folder
    job.template_files = tpl_files  # {".tpl": files, ".j2": files} (relative, sorted as catalog/kv_build.job_templates)
    _load_version(job, manifest, rel, report)
    selectors = [s.lower() for s in manifest.get("selectors") or ()]
    for selector in selectors:
        if not SELECTOR_NAME.match(selector):
            report.error("ErrInvalidManifest", rel, "selectors", "job %s: selector %r has spaces or odd characters" % (
                name, selector), "use plain label names")
    job.selectors = tuple(dict.fromkeys(selectors or [name.lower()]))  # manifest order, as maand (PlacementSelectors)
    low, high = _bounds(job, manifest, "memory", parse_memory_mb, rel, report)
    job.min_memory_mb, job.max_memory_mb, job.memory_mb, job.memory_source = _reservation(
        bucket, job, "memory", "mb", parse_memory_mb, low, high, report)
    low, high = _bounds(job, manifest, "cpu", parse_cpu_mhz, rel, report)
    job.min_cpu_mhz, job.max_cpu_mhz, job.cpu_mhz, job.cpu_source = _reservation(
        bucket, job, "cpu", "mhz", parse_cpu_mhz, low, high, report)
    job.ports = {}
    for port_name, value in ((manifest.get("resources") or {}).get("ports") or {}).items():
        field = "resources.ports.%s" % port_name
        if not PORT_NAME.match(port_name):
            report.error("ErrPortKeyFormat", rel, field, "job %s: port name %r must be a lowercase identifier" % (
                name, port_name), "rename it like http_port")
            continue
        if value == {}:
            job.ports[port_name] = None
        elif isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536:
            job.ports[port_name] = value
        else:
            report.error("ErrInvalidManifestPort", rel, field, "job %s: %r is neither {} nor a port number" % (name, value),
                         "use {} to take a port from the bucket.conf pool, or a fixed port 1-65535")
    job.min_allocations_count = manifest.get("min_allocations_count", 0)
    # maand (workspace/manifest.go GetMaxConcurrentStarts/Upgrades) reads starts < 0 as 0 and upgrades <= 0
    # as 1; a negative count is refused here (it names no batch size), 0 upgrades is maand's 1
    starts_field, starts = _int_field(manifest, ("max_concurrent_starts", "deploy_parallel_count"), 0)
    upgrades_field, upgrades = _int_field(manifest, ("max_concurrent_upgrades", "update_parallel_count"), 1)
    for field, value, fix in ((starts_field, starts, "use 0 (every new allocation at once, maand's reading of a"
                               " negative count) or a batch size of 1 or more"),
                              (upgrades_field, upgrades, "use a batch size of 1 or more (0 means 1, as maand)")):
        problem = job_checks.batch_problem(value)  # "25%": a percentage of the job's allocations
        if problem:
            report.error("ErrInvalidManifest", rel, field, "job %s %s: %s" % (name, field, problem),
                         fix + ", or a percentage of the job's allocations such as \"25%\" (1% to 100%, rounded up)")
            starts, upgrades = (0, upgrades) if field == starts_field else (starts, 1)
        elif isinstance(value, int) and value < 0:
            report.error("ErrInvalidManifest", rel, field, "job %s %s must be >= 0, got %d" % (name, field, value), fix)
    job.max_concurrent_starts = starts.strip() if isinstance(starts, str) else max(0, starts)
    job.max_concurrent_upgrades = upgrades.strip() if isinstance(upgrades, str) else upgrades if upgrades > 0 else 1
    job.start_gate = manifest.get("start_gate") or "last_batch"  # the schema checked the value
    job.auto_revert = manifest.get("auto_revert") is True
    job.canary = manifest.get("canary") or 0
    job.min_healthy_time, job.progress_deadline, job.auto_promote = job_checks.read_rollout(job, manifest, rel, report)
    job.shutdown_delay = job_checks.read_shutdown_delay(job, manifest, rel, report)
    job.restart_policy = manifest.get("restart_policy") or "always"  # maand: "" means always
    job.restart_globs = list(manifest.get("restart_globs") or [])
    if job.restart_globs and job.restart_policy != "reload":
        report.error("ErrInvalidManifest", rel, "restart_globs", "job %s restart_globs requires restart_policy reload "
                     "(it is %s)" % (name, job.restart_policy),
                     "set restart_policy to \"reload\" or remove restart_globs")
    job_checks.check_restart_globs(job, rel, report)
    job_checks.check_reload_target(bucket.path, job, report)
    job.commands = _load_commands(bucket, job, manifest, rel, report)
    job_checks.check_health(job, manifest, rel, report)
    job.health_check = manifest.get("health_check") or {}
    job.certs = job_checks.read_certs(name, manifest, rel, report)  # TLS leaves from the bucket CA (certs/build.py)
    job.constraints = manifest.get("constraints")
    job.hardware = manifest.get("hardware")
    job.placement = manifest.get("placement")
    job.rules = None  # compiled by placement/select.compile_rules (called by catalog/service.py) once every job is loaded
    section = bucket.job_configs.get(name) or {}
    job.vars = dict(section)  # all of its bucket.jobs.conf section, memory and cpu too (maand vars/bucket/job/<job>)
    return job


def load_jobs(bucket, report, job_set_checks=()):
    root = os.path.join(bucket.path, JOBS_DIR)
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        report.warn("ErrInvalidJob", JOBS_DIR, "", "no jobs folder: nothing will be placed",
                    "create %s/<job>/manifest.json" % JOBS_DIR)
        return
    except OSError as exc:
        report.error("ErrInvalidJob", JOBS_DIR, "", "cannot list: %s" % exc.strerror, "fix the permissions")
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if not entry.is_dir():
            report.warn("ErrInvalidJob", "%s/%s" % (JOBS_DIR, entry.name), "", "not a folder: ignored",
                        "move stray files out of workspace/jobs")
            continue
        manifest_path = os.path.join(entry.path, "manifest.json")
        if os.path.lexists(manifest_path) and not os.path.isfile(manifest_path):
            # maand reads every workspace/jobs/*/manifest.json it globs and fails on a folder ("is a directory")
            report.error("ErrInvalidManifest", "%s/%s/manifest.json" % (JOBS_DIR, entry.name), "",
                         "job %s: manifest.json is %s, not a file" % (
                             entry.name, "a folder" if os.path.isdir(manifest_path) else "a broken link or special file"),
                         "make %s/%s/manifest.json a JSON file (it may be just {}), or move the folder out of "
                         "workspace/jobs" % (JOBS_DIR, entry.name))
            continue
        if not os.path.isfile(manifest_path):
            # maand lists jobs as workspace/jobs/*/manifest.json (workspace/workspace.go GetJobs;
            # tests/build_job_test.go TestJobWithoutManifest): a folder without one is not a job.
            report.warn("ErrInvalidJob", "%s/%s" % (JOBS_DIR, entry.name), "manifest.json",
                        "no manifest.json: not a job, ignored (as maand)",
                        "add %s/%s/manifest.json (it may be just {}) or move the folder out" % (JOBS_DIR, entry.name))
            continue
        job = load_job(bucket, entry.name, report)
        if job is not None:
            bucket.jobs[job.name] = job
    for check in job_set_checks:  # checks of later stages (build: the _prometheus/ folders)
        check(bucket, report)
    for name in sorted(set(bucket.job_configs) - set(bucket.jobs)):
        report.warn("ErrInvalidBucketJobsConf", "workspace/" + bucket.job_config_file, name,
                    "section for unknown job %s is ignored" % name, "remove it or fix the job name")


def load_disabled(bucket, report):
    rel = DISABLED_FILE
    document = _read_json(bucket, rel, report, "ErrInvalidDisabledJSON")
    if document is None:
        return
    if _schema_errors(document, schemas.DISABLED, rel, "ErrInvalidDisabledJSON", report):
        return
    _report_unknown_keys(document, schemas.DISABLED_KNOWN, "ErrInvalidDisabledJSON", rel, report)
    hosts = {w.host for w in bucket.workers}
    for host in document.get("workers") or ():
        if host not in hosts:
            report.unhonoured("ErrInvalidDisabledJSON", rel, "workers", "unknown worker %s is ignored%s" % (
                host, did_you_mean(host, hosts)), "remove it or fix the host")
        bucket.disabled_workers.add(host)
    for job, spec in (document.get("jobs") or {}).items():
        if job not in bucket.jobs:
            report.unhonoured("ErrInvalidDisabledJSON", rel, "jobs.%s" % job, "unknown job %s is ignored%s" % (
                job, did_you_mean(job, bucket.jobs)), "remove it or fix the job name")
        allocations = (spec or {}).get("allocations") or []
        for host in allocations:
            if host not in hosts:
                report.unhonoured("ErrInvalidDisabledJSON", rel, "jobs.%s.allocations" % job,
                                  "unknown worker %s is ignored%s" % (host, did_you_mean(host, hosts)),
                                  "remove it or fix the host")
        bucket.disabled_jobs[job] = set(allocations) if allocations else None


def data_dir_problem(bucket_dir):
    """A bucket whose data/ is a symlink would have build and deploy write through it: refused."""
    data = os.path.join(bucket_dir, "data")
    if os.path.islink(data):
        return "data/ is a symlink (to %s): maand.core writes the catalog and locks there" % os.readlink(data)
    if os.path.lexists(data) and not os.path.isdir(data):
        return "data exists but is not a folder"
    return None


def load_bucket(path, report=None, job_set_checks=()):
    """Read the whole bucket. Returns (Bucket, Report); check report.ok before using the bucket.
    job_set_checks: callables (bucket, report) run once every job is read, in order."""
    report = report if report is not None else Report()
    bucket = Bucket(path)
    if not os.path.isdir(bucket.path):
        report.error("ErrInvalidMaandConf", path, "", "bucket directory not found",
                     "pass the bucket folder (the one holding maand.conf and workspace/)")
        return bucket, report
    problem = data_dir_problem(bucket.path)
    if problem:
        report.error("ErrInvalidCatalog", "data", "", problem, "make data/ a real folder inside the bucket")
    load_maand_conf(bucket, report)
    load_bucket_conf(bucket, report)
    load_job_configs(bucket, report)
    load_workers(bucket, report)
    load_jobs(bucket, report, job_set_checks)
    load_disabled(bucket, report)
    return bucket, report  # job.rules are compiled next by catalog/service.py (placement/select.compile_rules)
