# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build-time checks of a job beyond its placement: health_check, restart_globs, the Makefile targets
the restart_policy needs, shutdown_delay, and the certs map (the `_prometheus/` folder: prometheus/checks.py). maand's rules and words, cited per check.

Pure Python (PyYAML for the Prometheus files, as ansible-core ships it); no Ansible imports. Every
problem goes into the Report with the file, the field, maand's wording and a fix.
"""

from __future__ import annotations

import json
import math
import os
import re

from .content import GlobError, validate_glob

HEALTH_TYPES = ("tcp", "http", "ssh")

# --- health_check (maand workspace/health_check.go ValidateHealthCheck) ------------------------------

# maand's Go types are int; maand.core's deploy honours fractions of a second for the two durations,
# so a number is accepted there (a superset: a maand bucket never has one); strings are refused.
_HEALTH_INT = ("timeout_seconds",)
_WAIT_INT = ("attempts", "interval_seconds")
_SECONDS = ("timeout_seconds", "interval_seconds")
_PROBE_STR = ("type", "port", "command", "path", "scheme")


def _is_int(value, key=None):
    if key in _SECONDS:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    return isinstance(value, int) and not isinstance(value, bool)


def _go_type_error(report, rel, field, value, go_field, want, job):
    """maand decodes the manifest into typed Go structs: a wrong JSON type fails the whole manifest."""
    got = "string" if isinstance(value, str) else "number" if isinstance(value, (int, float)) else type(value).__name__
    report.error("ErrInvalidManifest", rel, field,
                 "job %s: expected %s, got %r (maand: json: cannot unmarshal %s into Go struct field %s of type %s)" % (
                     job, "an integer" if want == "int" else "a string", value, got, go_field, want),
                 "write %s as %s" % (field, "a whole number, e.g. 5" if want == "int" else "a string"))


# The probes deploy's health gates and maand.core.health_check run (tcp and http from the controller,
# ssh on the worker), and the gate defaults. resolve_health turns a catalog job's health_check into the
# gate spec build stores in the catalog (job "health_gate"), so deploy does not re-validate it.
GATE_PROBES = ("tcp", "http", "ssh")
DEFAULT_HEALTH = {"timeout_seconds": 5, "attempts": 30, "interval_seconds": 1}


def resolve_health(job):
    """A job's health_check -> (gate spec or None, errors). Port names resolve through job.ports."""
    raw = job.get("health_check") or {}
    name = job.get("name")
    where = "jobs/%s/manifest.json health_check" % name
    if not isinstance(raw, dict):
        return None, ["%s: expected an object with \"checks\"" % where]
    checks = raw.get("checks") or []
    if not checks:
        return None, []
    if not isinstance(checks, list):
        return None, ["%s.checks: expected a list of probes" % where]
    errors = []
    ports = job.get("ports") or {}
    resolved = []
    for i, check in enumerate(checks):
        at = "%s.checks[%d]" % (where, i)
        if not isinstance(check, dict):
            errors.append("%s: expected an object like {\"type\": \"tcp\", \"port\": \"http_port\"}" % at)
            continue
        kind = check.get("type")
        kind = kind.strip().lower() if isinstance(kind, str) else kind
        if kind not in GATE_PROBES:
            errors.append("%s.type: %r is not supported by maand.core (use one of: %s)" % (at, kind, ", ".join(GATE_PROBES)))
            continue
        if kind == "ssh":
            command = check.get("command")
            if not isinstance(command, str) or not command.strip():
                errors.append("%s.command: an ssh probe needs the shell command to run on the worker" % at)
                continue
            resolved.append({"type": "ssh", "command": command.strip()})
            continue
        port = check.get("port")
        if isinstance(port, str) and not port.isdigit():
            if port not in ports:
                errors.append("%s.port: %r is not a port of job %s (its ports: %s)" % (
                    at, port, name, ", ".join(sorted(ports)) or "none"))
                continue
            port = ports[port]
        try:
            port = int(port)
        except (TypeError, ValueError):
            errors.append("%s.port: expected a port name or number, got %r" % (at, port))
            continue
        if not 0 < port < 65536:
            errors.append("%s.port: %d is not a valid port" % (at, port))
            continue
        probe = {"type": kind, "port": port}
        if kind == "http":
            probe["path"] = str(check.get("path") or "/")
            if not probe["path"].startswith("/"):
                probe["path"] = "/" + probe["path"]
            probe["scheme"] = str(check.get("scheme") or "http")
            if probe["scheme"] not in ("http", "https"):
                errors.append("%s.scheme: %r must be http or https" % (at, probe["scheme"]))
                continue
            try:
                probe["expect_status"] = int(check.get("expect_status") or 200)
            except (TypeError, ValueError):
                errors.append("%s.expect_status: expected an HTTP status code" % at)
                continue
            if check.get("insecure") is True and probe["scheme"] == "https":
                probe["insecure"] = True  # the certificate is not checked (only when asked: catalogs stay as they were)
        resolved.append(probe)
    wait = raw.get("wait") or {}
    spec = {"job": name, "checks": resolved}
    for key, src, default in (("timeout_seconds", raw.get("timeout_seconds"), DEFAULT_HEALTH["timeout_seconds"]),
                              ("attempts", wait.get("attempts") if isinstance(wait, dict) else None, DEFAULT_HEALTH["attempts"]),
                              ("interval_seconds", wait.get("interval_seconds") if isinstance(wait, dict) else None,
                               DEFAULT_HEALTH["interval_seconds"])):
        value = default if src is None else src
        try:
            value = float(value) if key != "attempts" else int(value)
        except (TypeError, ValueError):
            errors.append("%s.%s: expected a number, got %r" % (where, key, src))
            continue
        if value < 0 or (key == "attempts" and value < 1):
            errors.append("%s.%s: must be positive, got %r" % (where, key, src))
            continue
        spec[key] = value
    if errors:
        return None, errors
    return spec, []


def check_health(job, manifest, rel, report):
    raw = manifest.get("health_check")
    if raw is None:
        return
    if not isinstance(raw, dict):
        report.error("ErrInvalidManifest", rel, "health_check", "job %s: expected an object with \"checks\"" % job.name,
                     "write \"health_check\": {\"checks\": [{\"type\": \"tcp\", \"port\": \"<port name>\"}]}")
        return
    for key in _HEALTH_INT:
        if key in raw and not _is_int(raw[key], key):
            _go_type_error(report, rel, "health_check.%s" % key, raw[key], "ManifestHealthCheck.%s" % key, "int", job.name)
    wait = raw.get("wait")
    if wait is not None and not isinstance(wait, dict):
        report.error("ErrInvalidManifest", rel, "health_check.wait", "job %s: expected an object" % job.name,
                     "write \"wait\": {\"attempts\": 30, \"interval_seconds\": 1}")
    for key in _WAIT_INT if isinstance(wait, dict) else ():
        if key in wait and not _is_int(wait[key], key):
            _go_type_error(report, rel, "health_check.wait.%s" % key, wait[key],
                           "HealthCheckWait.health_check.wait.%s" % key, "int", job.name)
    checks = raw.get("checks")
    if checks is None:
        return
    if not isinstance(checks, list):
        report.error("ErrInvalidManifest", rel, "health_check.checks", "job %s: expected a list of probes" % job.name,
                     "write \"checks\": [{\"type\": \"tcp\", \"port\": \"<port name>\"}]")
        return
    for index, probe in enumerate(checks):
        _check_probe(job, probe, index, rel, report)
        if isinstance(probe, dict) and isinstance(probe.get("type"), str):
            _check_insecure(job, probe, probe["type"].strip().lower(), "health_check.checks[%d]" % index, rel, report)


def _check_probe(job, probe, index, rel, report):
    at = "health_check.checks[%d]" % index
    if not isinstance(probe, dict):
        report.error("ErrInvalidManifest", rel, at, "job %s: expected an object like {\"type\": \"tcp\", \"port\": "
                     "\"http_port\"}" % job.name, "write each probe as an object")
        return
    for key in _PROBE_STR:
        if key in probe and not isinstance(probe[key], str):
            _go_type_error(report, rel, "%s.%s" % (at, key), probe[key], "HealthCheckProbe.%s" % key, "string", job.name)
            return
    if "expect_status" in probe and not _is_int(probe["expect_status"]):
        _go_type_error(report, rel, at + ".expect_status", probe["expect_status"], "HealthCheckProbe.expect_status",
                       "int", job.name)
        return
    kind = (probe.get("type") or "").strip().lower()
    if kind not in HEALTH_TYPES:
        report.error("ErrInvalidManifest", rel, at + ".type", "job %s health_check.checks[%d] type %r (want tcp, http, or "
                     "ssh)" % (job.name, index, probe.get("type", "")), "use type tcp, http or ssh")
        return
    if kind == "ssh":
        if not (probe.get("command") or "").strip():
            report.error("ErrInvalidManifest", rel, at + ".command", "job %s health_check.checks[%d] ssh probe requires "
                         "command" % (job.name, index), "add \"command\": \"<shell command run on the worker>\"")
        return
    port = (probe.get("port") or "").strip()
    if not port:
        report.error("ErrInvalidManifest", rel, at + ".port", "job %s health_check.checks[%d] missing port" % (
            job.name, index), "name one of the job's resources.ports")
        return
    if port not in job.ports and port not in declared_port_names(job):
        report.error("ErrInvalidManifest", rel, at + ".port", "job %s health_check.checks[%d] port %r not in "
                     "resources.ports" % (job.name, index, port),
                     "use one of: %s" % (", ".join(sorted(job.ports)) or "(declare a port in resources.ports first)"))
        return
    if kind == "http":
        path = probe.get("path") or "/"
        if not path.startswith("/"):
            report.error("ErrInvalidManifest", rel, at + ".path", "job %s health_check.checks[%d] path must start with /"
                         % (job.name, index), "write the path as /%s" % path)
        scheme = probe.get("scheme") or "http"
        if scheme not in ("http", "https"):
            report.error("ErrInvalidManifest", rel, at + ".scheme", "job %s: scheme %r must be http or https" % (
                job.name, scheme), "use http or https")


def _check_insecure(job, probe, kind, at, rel, report):
    """`insecure` (maand.core's own field): true skips the certificate check of an https probe, which
    otherwise verifies against the bucket CA (secrets/ca.crt) and the system's CAs; nothing else has a
    certificate to skip, so anywhere else it is an error rather than a field silently ignored."""
    if "insecure" not in probe:
        return
    value = probe["insecure"]
    if not isinstance(value, bool):
        report.error("ErrInvalidManifest", rel, at + ".insecure", "job %s: expected true or false, got %s" % (
            job.name, json.dumps(value)), "write \"insecure\": true (skip the certificate check) or leave it out")
        return
    if kind != "http" or (probe.get("scheme") or "http") != "https":
        what = {"http": "a plain http probe", "ssh": "an ssh probe"}.get(kind, "a %s probe" % kind)
        report.error("ErrInvalidManifest", rel, at + ".insecure", "job %s: insecure applies only to an http probe "
                     "with \"scheme\": \"https\" (this is %s)" % (job.name, what),
                     "remove \"insecure\", or set \"scheme\": \"https\"")


def declared_port_names(job):
    return set(((job.manifest.get("resources") or {}).get("ports") or {}))


# --- restart_globs (maand workspace/restart_policy.go ValidateRestartGlobs) ---------------------------

def check_restart_globs(job, rel, report):
    for index, pattern in enumerate(job.restart_globs):
        try:
            validate_glob(pattern)
        except GlobError as exc:
            report.error("ErrInvalidManifest", rel, "restart_globs[%d]" % index, "job %s restart_globs: invalid glob "
                         "pattern %r: %s" % (job.name, pattern, exc),
                         "use path.Match syntax (* ? [..]) with optional **/ prefixes")


# --- batch sizes: a count, or a percentage of the job's allocations (Ansible's serial, maxUnavailable) ---

_PERCENT = re.compile(r"^([0-9]{1,3})%\Z")


def batch_percent(value):
    """The percentage of a batch size written as "25%" (an int 1-100), or None for a count."""
    match = _PERCENT.match(value) if isinstance(value, str) else None
    return int(match.group(1)) if match else None


def batch_problem(value):
    """Why a max_concurrent_* value is not a batch size (None when it is): a count (an int), or "N%" with
    N from 1 to 100. A negative count is refused by the caller (its own words)."""
    if not isinstance(value, str):
        return None
    percent = batch_percent(value.strip())
    if percent is None:
        return "%r is neither a count nor a percentage such as \"25%%\"" % value
    if not 0 < percent <= 100:
        return "%r is out of range: a percentage must be from 1%% to 100%%" % value
    return None


def resolve_batch_size(value, count):
    """The batch size a max_concurrent_* value gives a job with `count` allocations: a count as it is, a
    percentage of count rounded up, at least 1 (Ansible's serial and Kubernetes' maxUnavailable)."""
    percent = batch_percent(value)
    if percent is None:
        return value
    return max(1, -(-count * percent // 100))


# --- Makefile targets the restart_policy needs --------------------------------------------------------

_TARGET_LINE = re.compile(r"^([^\s:#=][^:#=]*?)\s*::?(?!=)")


def makefile_targets(text):
    """The explicit targets a Makefile defines (rule lines `a b: deps`; not variable assignments)."""
    targets = set()
    for line in text.splitlines():
        match = _TARGET_LINE.match(line)
        if match:
            targets.update(match.group(1).split())
    return targets


# maand job run --target: "any safe custom name"; never a make option (-f, --eval=...) or a variable assignment.
SAFE_TARGET = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_INCLUDE = re.compile(r"^\s*-?include\s", re.MULTILINE)


LIFECYCLE_TARGETS = ("start", "stop", "restart", "reload", "status")


def target_problem(target, makefile_text, makefile_name="Makefile"):
    """Why `make <target>` cannot run for maand.core.job (None when it can): an unsafe name, or a custom
    target the job's Makefile does not define (not checked when it includes other makefiles). maand's
    lifecycle targets are always accepted, as in maand (a Makefile without one fails at make, named)."""
    if not isinstance(target, str) or not SAFE_TARGET.match(target):
        return ("target %r is not a safe Makefile target name (letters, digits, '_', '.', '-'; not starting with "
                "'-' or '.')" % (target,))
    if makefile_text is None or target in LIFECYCLE_TARGETS:
        return None
    if target in makefile_targets(makefile_text) or _INCLUDE.search(makefile_text):
        return None
    known = sorted(t for t in makefile_targets(makefile_text) if not t.startswith(".") and "%" not in t)
    return "the job's %s defines no target %r; its targets: %s" % (makefile_name, target, ", ".join(known) or "none")


def check_reload_target(bucket_path, job, report):
    """restart_policy reload runs `make reload` on a content change: a Makefile without that target would
    fail mid-rollout, so build says so (maand would also fail, at deploy)."""
    if job.restart_policy != "reload" or job.makefile is None:
        return
    rel = "%s/%s" % (job.path, job.makefile)
    try:
        with open(os.path.join(bucket_path, rel), "rb") as handle:
            text = handle.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return
    if "reload" in makefile_targets(text):
        return
    includes = re.search(r"^\s*-?include\s", text, re.MULTILINE) is not None
    say = report.warn if includes else report.error
    say("ErrInvalidJob", rel, "reload", "job %s has restart_policy reload but %s defines no reload target%s" % (
        job.name, job.makefile, " (it includes other makefiles: not checked)" if includes else ""),
        "add a `reload:` target to %s, or set restart_policy to \"always\"" % rel)


# --- certs (maand workspace/types.go Manifest.Certs, build/build_certs.go, docs/reference/certs.md) ----

CERT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")


class CertSpec:
    """One entry of a manifest's certs map: files certs/<name>.crt and .key on every allocation."""

    __slots__ = ("name", "pkcs8", "one", "common_name")

    def __init__(self, name, pkcs8, one, common_name):
        self.name, self.pkcs8, self.one, self.common_name = name, pkcs8, one, common_name

    def as_catalog(self):
        return {"name": self.name, "pkcs8": self.pkcs8, "one": self.one, "common_name": self.common_name}


def read_certs(job, manifest, rel, report):
    """The manifest's certs as CertSpecs (sorted by name); bad entries are errors naming the field."""
    out = []
    for name, entry in sorted((manifest.get("certs") or {}).items()):
        field = "certs.%s" % name
        if not CERT_NAME.match(name) or name.endswith(".") or name == "ca":
            report.error("ErrInvalidManifest", rel, field, "job %s: cert name %r cannot be a file name under certs/%s"
                         % (job, name, " (ca.crt is the bucket CA)" if name == "ca" else ""),
                         "rename it with letters, digits, '.', '_' or '-' (not \"ca\")")
            continue
        if not isinstance(entry, dict):
            _cert_type_error(report, rel, field, entry, job, "an object", '{"subject": {"common_name": "api.internal"}}')
            continue
        spec = _cert_spec(job, name, entry, rel, report)
        if spec is not None:
            out.append(spec)
    return tuple(out)


def _cert_spec(job, name, entry, rel, report):
    field = "certs.%s" % name
    ok = True
    for flag in ("pkcs8", "one"):
        if flag in entry and not isinstance(entry[flag], bool):
            _cert_type_error(report, rel, "%s.%s" % (field, flag), entry[flag], job, "true or false", "false")
            ok = False
    subject = entry.get("subject")
    if subject is not None and not isinstance(subject, dict):
        _cert_type_error(report, rel, field + ".subject", subject, job, "an object", '{"common_name": "api.internal"}')
        return None
    common_name = (subject or {}).get("common_name")
    if common_name is not None and not isinstance(common_name, str):
        _cert_type_error(report, rel, field + ".subject.common_name", common_name, job, "a string", '"api.internal"')
        return None
    if common_name and len(common_name) > 64:
        report.error("ErrInvalidManifest", rel, field + ".subject.common_name", "job %s: cert %s common_name is %d"
                     " characters; X.509 allows at most 64 (RFC 5280 ub-common-name)" % (job, name, len(common_name)),
                     "shorten it to 64 characters or fewer")
        return None
    if not common_name:
        report.warn("ErrInvalidManifest", rel, field + ".subject.common_name",
                    "job %s: cert %s has no subject common_name: its certificate gets an empty subject (as maand)"
                    % (job, name), "set subject.common_name, e.g. the service's DNS name")
    if not ok:
        return None
    return CertSpec(name, bool(entry.get("pkcs8")), bool(entry.get("one")), common_name or "")


def _cert_type_error(report, rel, field, value, job, want, example):
    """maand decodes certs into typed Go structs: a wrong JSON type fails the manifest there too."""
    report.error("ErrInvalidManifest", rel, field, "job %s: expected %s, got %s" % (job, want, json.dumps(value)),
                 "write %s as %s, e.g. %s" % (field, want, example))


# --- rollout timing and promotion (docs/deploy.md: min_healthy_time, progress_deadline, auto_promote) ----

def _seconds(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def read_rollout(job, manifest, rel, report):
    """(min_healthy_time, progress_deadline, auto_promote) of a manifest, 0 / 0 / False when unset: seconds a
    batch must stay healthy after its gate passed (>= 0), seconds a batch may take to make progress (> 0), and
    whether a canary rollout goes on by itself once its canaries are healthy (needs canary). A bad value is
    reported with the field and the fix, and read as unset. job: the model's Job (name, canary set)."""
    name, checks = job.name, ((manifest.get("health_check") or {}) if isinstance(manifest.get("health_check"), dict)
                              else {}).get("checks")
    hold = _rollout_seconds(manifest, "min_healthy_time", 0, name, rel, report, checks,
                            "seconds every allocation of a batch must stay healthy after its gate passed, "
                            "before the next batch, e.g. 10")
    deadline = _rollout_seconds(manifest, "progress_deadline", None, name, rel, report, checks,
                                "seconds a batch may take, from the previous batch's progress, to pass its gate, "
                                "e.g. 600 (remove it for no deadline)")
    if hold and deadline and deadline <= hold:
        report.error("ErrInvalidManifest", rel, "progress_deadline", "job %s: progress_deadline (%g s) must be longer "
                     "than min_healthy_time (%g s): a batch could never make progress in time" % (name, deadline, hold),
                     "raise progress_deadline above %g, or lower min_healthy_time" % hold)
        deadline = 0
    promote = manifest.get("auto_promote", False)
    if not isinstance(promote, bool):
        report.error("ErrInvalidManifest", rel, "auto_promote", "job %s: auto_promote must be true or false, got %s"
                     % (name, json.dumps(promote)), "write \"auto_promote\": true (or remove it)")
        promote = False
    elif promote and not job.canary:
        report.error("ErrInvalidManifest", rel, "auto_promote", "job %s: auto_promote promotes a canary rollout, "
                     "but the job has no canary" % name,
                     "add \"canary\": 1 (the allocations upgraded first), or remove auto_promote")
        promote = False
    return float(hold or 0), float(deadline or 0), promote


def _rollout_seconds(manifest, field, floor, name, rel, report, checks, meaning):
    """A rollout duration: a number of seconds (>= 0; > 0 when floor is None), which needs health_check.checks."""
    if field not in manifest:
        return 0
    value = manifest[field]
    low = "> 0" if floor is None else ">= 0"
    if not _seconds(value) or (value <= 0 if floor is None else value < 0):
        report.error("ErrInvalidManifest", rel, field, "job %s: %s must be a number of seconds %s, got %s"
                     % (name, field, low, json.dumps(value)), "write \"%s\": <%s>" % (field, meaning))
        return 0
    if value and not checks:
        report.error("ErrInvalidManifest", rel, field, "job %s: %s needs the job's health gate, but the job has no "
                     "health_check.checks (the probes a batch's gate runs)" % (name, field),
                     "add health_check.checks (a tcp, http or ssh probe), or remove %s" % field)
        return 0
    return value


# --- shutdown_delay (maand.core's, Nomad's shutdown_delay: deploy/drain.py) ---------------------------

def read_shutdown_delay(job, manifest, rel, report):
    """The manifest's shutdown_delay in seconds (a number >= 0, default 0): the wait between a job's
    before_allocation_stopped commands and the stop or restart of its batch."""
    value = manifest.get("shutdown_delay", 0)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return value
    got = "%r (%s)" % (value, "a string" if isinstance(value, str) else "a boolean" if isinstance(value, bool)
                       else "negative" if isinstance(value, (int, float)) and value < 0 else type(value).__name__)
    report.error("ErrInvalidManifest", rel, "shutdown_delay",
                 "job %s shutdown_delay must be a number of seconds >= 0, got %s" % (job.name, got),
                 'set "shutdown_delay" to a number of seconds such as 5 (0 or absent: no wait before a stop)')
    return 0
