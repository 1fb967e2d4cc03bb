# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build-time checks of the jobs' ``_prometheus/`` folders, as maand's build makes them.

The model calls ``check_prometheus`` after reading every job (build passes it to
``bucket.model.load_bucket`` as a job-set check), because the files are read with the Prometheus
YAML reader (goyaml.py), a package the bucket model does not import. No Ansible imports.
"""

from __future__ import annotations

import os

from ..bucket.job_checks import declared_port_names
from .errors import PrometheusError
from .files import MAX_FILE_BYTES, SERVER_FILES
from .goyaml import load_yaml
from .scrape import FORBIDDEN_SD, JOB_PLACEHOLDER, PORT_PREFIX


# --- _prometheus/ (maand promconfig/catalog.go BuildCatalog, alerts.go, scrape.go; guides/prometheus.md) --


def _isfile(*parts):
    return os.path.isfile(os.path.join(*parts))


def check_prometheus(bucket, report):
    """Every job: not both prometheus.yml and .tpl (build/build_jobs.go). When some job is a Prometheus
    server (has either file), validate every job's _prometheus/ as maand's build does; otherwise maand
    ignores _prometheus/ at build."""
    jobs = [bucket.jobs[name] for name in sorted(bucket.jobs)]
    server = False
    for job in jobs:
        root = os.path.join(bucket.path, job.path)
        present = [name for name in SERVER_FILES if name in job.top_entries and _isfile(root, name)]
        server = server or bool(present)
        if len(present) == 2:
            report.error("ErrInvalidJob", job.path, "prometheus.yml", "job %s cannot define both prometheus.yml and "
                         "prometheus.yml.tpl" % job.name, "keep one of %s/prometheus.yml(.tpl)" % job.path)
    if not server:
        return
    state = {"alerts": {}, "scrape_jobs": {}}
    for job in jobs:
        _check_job_prometheus(bucket, job, state, report)


def _check_job_prometheus(bucket, job, state, report):
    base = "%s/_prometheus" % job.path
    root = os.path.join(bucket.path, base)
    if "_prometheus" not in job.top_entries or not os.path.isdir(root):
        return
    has_yaml, has_tpl = _isfile(root, "scrape.yaml"), _isfile(root, "scrape.yaml.tpl")
    if has_yaml and has_tpl:
        report.error("ErrInvalidJob", base, "scrape.yaml", "job %s cannot define both scrape.yaml and scrape.yaml.tpl"
                     % job.name, "keep one of them")
    elif has_yaml:
        _check_scrape(bucket, job, base + "/scrape.yaml", state, report)
    runbooks = _runbook_slugs(os.path.join(root, "runbooks"))
    alerts_dir = os.path.join(root, "alerts")
    if os.path.isdir(alerts_dir):
        for name in sorted(os.listdir(alerts_dir)):
            if name.endswith((".yaml", ".yml")) and _isfile(alerts_dir, name):
                _check_alert_file(bucket, job, "%s/alerts/%s" % (base, name), runbooks, state, report)


def _runbook_slugs(folder):
    if not os.path.isdir(folder):
        return set()
    return {name[:-3] for name in os.listdir(folder) if name.endswith(".md") and _isfile(folder, name)}


def _load_yaml(bucket, rel, job, report):
    """The file read as maand reads it (go-yaml v3: YAML 1.2 scalars, merge keys), by goyaml.py's reader."""
    try:
        with open(os.path.join(bucket.path, rel), "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        report.error("ErrInvalidJob", rel, "", "cannot read: %s" % exc.strerror, "fix the file's permissions")
        return None, False
    if len(data) > MAX_FILE_BYTES:
        report.error("ErrInvalidJob", rel, "", "file is larger than %d MB" % (MAX_FILE_BYTES >> 20), "split it")
        return None, False
    if not data.strip():
        report.error("ErrInvalidJob", rel, "", "job %s _prometheus/%s is empty" % (job.name, rel.split("_prometheus/")[1]),
                     "remove the file or fill it in")
        return None, False
    try:
        return load_yaml(data.decode("utf-8"), "job %s" % job.name), True
    except UnicodeDecodeError:
        report.error("ErrInvalidJob", rel, "", "job %s: not UTF-8 text" % job.name, "save the file as UTF-8")
    except PrometheusError as exc:
        report.error("ErrInvalidJob", rel, "", str(exc), "fix the YAML syntax")
    return None, False


def _text(value):
    return value.strip() if isinstance(value, str) else ("" if value is None else str(value).strip())


def _check_alert_file(bucket, job, rel, runbooks, state, report):
    document, ok = _load_yaml(bucket, rel, job, report)
    if not ok:
        return
    short = rel.split("_prometheus/")[1]
    groups = document.get("groups") if isinstance(document, dict) else None
    if not isinstance(groups, list) or not groups:
        report.error("ErrInvalidJob", rel, "groups", "job %s _prometheus/%s must define at least one group" % (
            job.name, short), "write groups: [{name: ..., rules: [...]}]")
        return
    for gi, group in enumerate(groups):
        if not isinstance(group, dict) or not _text(group.get("name")):
            report.error("ErrInvalidJob", rel, "groups[%d].name" % gi, "job %s _prometheus/%s groups[%d] missing name" % (
                job.name, short, gi), "give the group a name")
            continue
        rules = group.get("rules") or []
        for ri, rule in enumerate(rules if isinstance(rules, list) else []):
            _check_rule(job, rel, short, gi, ri, rule if isinstance(rule, dict) else {}, runbooks, state, report)


def _check_rule(job, rel, short, gi, ri, rule, runbooks, state, report):
    field = "groups[%d].rules[%d]" % (gi, ri)
    where = "job %s _prometheus/%s %s" % (job.name, short, field)
    alert, record = _text(rule.get("alert")), _text(rule.get("record"))
    if alert and record:
        report.error("ErrInvalidJob", rel, field, "%s must define either alert or record, not both" % where,
                     "split it into two rules")
        return
    if not alert and not record:
        report.error("ErrInvalidJob", rel, field, "%s must define alert or record" % where, "add alert: or record:")
        return
    if not _text(rule.get("expr")):
        report.error("ErrInvalidJob", rel, field + ".expr", "%s %r missing expr" % (where, alert or record),
                     "add the PromQL expression as expr:")
        return
    if not alert:
        return
    annotations = rule.get("annotations") if isinstance(rule.get("annotations"), dict) else {}
    runbook = _text(annotations.get("runbook"))
    if runbook and runbook not in runbooks:
        report.error("ErrInvalidJob", rel, field + ".annotations.runbook", "job %s _prometheus/%s alert %r references "
                     "missing runbook %r" % (job.name, short, alert, runbook),
                     "add %s/_prometheus/runbooks/%s.md or fix the name" % (job.path, runbook))
    owner = state["alerts"].get(alert)
    state["alerts"][alert] = job.name
    if owner is not None:  # maand: unique across the whole bucket, the same job included
        report.error("ErrInvalidJob", rel, field + ".alert", "duplicate alert name %r (jobs %s and %s)" % (
            alert, owner, job.name), "alert names must be unique across the whole bucket: rename one")


def _check_scrape(bucket, job, rel, state, report):
    document, ok = _load_yaml(bucket, rel, job, report)
    if not ok:
        return
    if not isinstance(document, list) or not all(isinstance(item, dict) for item in document):
        report.error("ErrInvalidJob", rel, "", "job %s scrape.yaml: expected a YAML list of scrape_config items" % job.name,
                     "write - job_name: ... items")
        return
    if not document:
        report.error("ErrInvalidJob", rel, "", "scrape.yaml must contain at least one scrape item", "add one")
        return
    ports = declared_port_names(job)
    for index, item in enumerate(document):
        bad = [key for key in FORBIDDEN_SD if key in item]
        if bad:
            report.error("ErrInvalidJob", rel, "[%d].%s" % (index, bad[0]), "job %s scrape.yaml[%d] %s is not supported "
                         "(use static_configs with maand:port placeholders)" % (job.name, index, bad[0]),
                         "use static_configs")
            continue
        name = item.get("job_name")
        if not isinstance(name, str) or not name.strip():
            report.error("ErrInvalidJob", rel, "[%d].job_name" % index, "job %s scrape.yaml[%d] missing job_name" % (
                job.name, index), "add job_name (maand:job stands for the job's name)")
            continue
        resolved = job.name if name == JOB_PLACEHOLDER else name
        owner = state["scrape_jobs"].setdefault(resolved, job.name)
        if owner != job.name:
            report.error("ErrInvalidJob", rel, "[%d].job_name" % index, "duplicate prometheus job_name %r (jobs %s and "
                         "%s)" % (resolved, owner, job.name), "job_name must be unique across the bucket: rename one")
        _check_targets(job, rel, index, item, ports, report)


def _check_targets(job, rel, index, item, ports, report):
    blocks = item.get("static_configs")
    for bi, block in enumerate(blocks if isinstance(blocks, list) else []):
        targets = block.get("targets") if isinstance(block, dict) else None
        for ti, target in enumerate(targets if isinstance(targets, list) else []):
            if not isinstance(target, str) or not target.startswith(PORT_PREFIX):
                continue
            field = "[%d].static_configs[%d].targets[%d]" % (index, bi, ti)
            key = target[len(PORT_PREFIX):].split("/")[0]
            if key == "_implicit":
                key, problem = _implicit_port(job, ports)
                if problem:
                    report.error("ErrInvalidJob", rel, field, problem, "declare a metrics port or name it explicitly")
                    continue
            if not key:
                report.error("ErrInvalidJob", rel, field, "job %s scrape.yaml%s invalid placeholder %r" % (
                    job.name, field, target), "write maand:port/<port name>")
            elif key not in ports:
                report.error("ErrInvalidJob", rel, field, "job %s scrape.yaml%s port %r is not declared in manifest "
                             "resources.ports" % (job.name, field, key), "declare it in resources.ports or fix the name")


def _implicit_port(job, ports):
    for name in (job.name + "_metrics_port", "metrics_port"):
        if name in ports:
            return name, None
    matches = sorted(name for name in ports if name.endswith("_metrics_port"))
    if len(matches) == 1:
        return matches[0], None
    if not matches:
        return None, "job %s scrape.yaml uses maand:port/_implicit but no metrics port is declared in manifest" % job.name
    return None, "job %s ambiguous metrics ports %s; set an explicit port in scrape.yaml" % (job.name, matches)
