# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The server job's ``rules/`` and ``{{ ruleFiles }}`` (maand deploy/prometheus_rules.go, promconfig/alerts.go,
rule_files_deploy.go).

Every job's ``_prometheus/alerts/*.yaml`` ships to a Prometheus server job's tree as ``rules/<job>/<file>``,
an alert's ``annotations.runbook`` turned into ``runbook_url`` on that worker's Prometheus
(``inject_runbook_urls``), with maand's own ``rules/maand/certs.yaml``; ``{{ ruleFiles }}`` is the
``rule_files:`` block listing them (``rule_files_yaml``). No Ansible imports.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

from .errors import PrometheusError
from .files import SERVER_JOB, SERVER_PORT, collect, job_record, read_text, server_jobs
from .goyaml import Ordered, marshal, pairs

MAAND_ALERTS_JOB = "maand"
MAAND_CERT_ALERTS_FILE = "certs.yaml"


# --- the server job's rules/ (deploy/prometheus_rules.go, promconfig/alerts.go InjectRunbookURLs) --

# maand's promconfig/maand_certs_alerts.yaml (maand-sh/maand, MIT licence), shipped as maand ships it.
MAAND_CERT_ALERTS_YAML = """groups:
  - name: maand_certs
    rules:
      - alert: maand cert expiring soon
        expr: maand_cert_expiring == 1 and maand_cert_not_after_seconds > time()
        for: 1h
        labels:
          severity: warning
        annotations:
          summary: "TLS cert {{ $labels.cert }} expiring ({{ $labels.job }} on {{ $labels.worker }})"
          description: "Certificate {{ $labels.cert }} for job {{ $labels.job }} on {{ $labels.worker }} is within the maand renewal buffer."

      - alert: maand cert expired
        expr: maand_cert_not_after_seconds < time()
        for: 5m
        labels:
          severity: critical
        annotations:
          summary: "TLS cert {{ $labels.cert }} expired ({{ $labels.job }} on {{ $labels.worker }})"
          description: "Certificate {{ $labels.cert }} for job {{ $labels.job }} on {{ $labels.worker }} is past NotAfter. Run maand build && maand deploy."

      - alert: maand ca cert expiring soon
        expr: maand_cert_expiring{scope="ca"} == 1 and maand_cert_not_after_seconds{scope="ca"} > time()
        for: 1h
        labels:
          severity: critical
        annotations:
          summary: "maand CA certificate expiring soon"
          description: "Bucket CA is within the maand renewal buffer. Run maand build to rotate."

      - alert: maand ca cert expired
        expr: maand_cert_not_after_seconds{scope="ca"} < time()
        for: 5m
        labels:
          severity: critical
        annotations:
          summary: "maand CA certificate expired"
          description: "Bucket CA is past NotAfter. Run maand build && maand deploy immediately."
"""
RULE_FIELDS = ("alert", "record", "expr", "for", "labels", "annotations")  # maand's alertRule, in order


def _scalar_text(node: Any, where: str) -> str:
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return "" if node.style is None and node.value in ("", "~", "null", "Null", "NULL") else node.value
    raise PrometheusError("%s must be a scalar" % where)


def _string_map(node: Any, where: str) -> Ordered | dict:
    import yaml

    if isinstance(node, yaml.ScalarNode) and _scalar_text(node, where) == "":
        return {}
    if not isinstance(node, yaml.MappingNode):
        raise PrometheusError("%s must be a mapping" % where)
    return {_scalar_text(k, where): _scalar_text(v, where) for k, v in pairs(node, where)}


def _fields(node: Any, where: str) -> dict:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise PrometheusError("%s must be a mapping" % where)
    return {_scalar_text(k, where): v for k, v in pairs(node, where)}


def _items(node: Any, where: str) -> list:
    import yaml

    if node is None or isinstance(node, yaml.ScalarNode) and _scalar_text(node, where) == "":
        return []
    if not isinstance(node, yaml.SequenceNode):
        raise PrometheusError("%s must be a list" % where)
    return node.value


def parse_alert_file(text: str, what: str) -> Ordered:
    """yaml.Unmarshal into maand's alertRuleFile: only groups[].name and rules[].alert/record/expr/for/
    labels/annotations survive (maand re-marshals that struct when it injects runbook URLs)."""
    import yaml

    if not text.strip():
        raise PrometheusError("%s is empty" % what)
    try:
        root = yaml.compose(text, Loader=yaml.BaseLoader)
    except (yaml.YAMLError, RecursionError) as exc:
        raise PrometheusError("%s: invalid YAML: %s" % (what, " ".join(str(exc).split()))) from None
    groups = []
    for gi, group_node in enumerate(_items(_fields(root, what).get("groups"), what + " groups")):
        group = _fields(group_node, "%s groups[%d]" % (what, gi))
        rules = []
        for ri, rule_node in enumerate(_items(group.get("rules"), "%s groups[%d].rules" % (what, gi))):
            where = "%s groups[%d].rules[%d]" % (what, gi, ri)
            fields = _fields(rule_node, where)
            rule = Ordered()
            for name in RULE_FIELDS:
                node = fields.get(name)
                if name in ("labels", "annotations"):
                    rule[name] = _string_map(node, "%s.%s" % (where, name)) if node is not None else {}
                else:
                    rule[name] = _scalar_text(node, "%s.%s" % (where, name)) if node is not None else ""
            rules.append(rule)
        name = _scalar_text(group["name"], what) if "name" in group else ""
        groups.append(Ordered(name=name, rules=rules))
    if not groups:
        raise PrometheusError("%s must define at least one group" % what)
    return Ordered(groups=groups)


def inject_runbook_urls(job: str, text: str, base_url: str, what: str = "alerts") -> str:
    """maand's InjectRunbookURLs: an alert's annotations.runbook becomes runbook_url (unless set) on the
    server's console page; the file is re-marshalled only when something changed."""
    parsed = parse_alert_file(text, what)
    changed = False
    for group in parsed["groups"]:
        for rule in group["rules"]:
            runbook = rule["annotations"].get("runbook", "").strip()
            if not rule["alert"].strip() or not runbook:
                continue
            if not rule["annotations"].get("runbook_url", "").strip():
                rule["annotations"]["runbook_url"] = "%s/consoles/runbooks/%s/%s.html" % (
                    base_url.strip().rstrip("/"), job, runbook)
            del rule["annotations"]["runbook"]
            changed = True
    if not changed:
        return text
    for group in parsed["groups"]:  # maand writes `for: ""`, which Prometheus refuses: left out (docs/templates.md)
        for rule in group["rules"]:
            if rule["for"] == "":
                del rule["for"]
    return marshal(parsed)


def rule_files(bucket_dir: str, catalog: Mapping[str, Any], job: str, host: str) -> dict[str, bytes]:
    """The files maand's deploy adds to a server job's tree on host: rules/<job>/<file> for every alert
    file (runbook URLs on host's Prometheus) and rules/maand/certs.yaml. {} for any other job."""
    if job not in server_jobs(bucket_dir, catalog):
        return {}
    port = (job_record(catalog, SERVER_JOB).get("ports") or {}).get(SERVER_PORT)
    if port is None:
        raise PrometheusError("job %s has no port %s: maand links runbooks to http://<worker>:<%s>; declare it"
                              " in workspace/jobs/%s/manifest.json resources.ports" % (SERVER_JOB, SERVER_PORT,
                                                                                       SERVER_PORT, SERVER_JOB))
    base = "http://%s:%d" % (host, int(port))
    out: dict[str, bytes] = {}
    for folder in collect(bucket_dir, catalog):
        for rel in folder.alerts:
            path_rel = "%s/%s" % (folder.rel, rel)
            text = inject_runbook_urls(folder.job, read_text(os.path.join(folder.root, rel), path_rel), base, path_rel)
            out["rules/%s/%s" % (folder.job, rel.rsplit("/", 1)[-1])] = text.encode("utf-8")
    out["rules/%s/%s" % (MAAND_ALERTS_JOB, MAAND_CERT_ALERTS_FILE)] = MAAND_CERT_ALERTS_YAML.encode("utf-8")
    return out


def rules_provider(bucket_dir: str, catalog: Mapping[str, Any]) -> Callable[[str, str], dict[str, bytes]]:
    """For a deploy's overlays: (job, host) -> {rel: content} of rule_files (empty for non-server jobs)."""
    servers = set(server_jobs(bucket_dir, catalog))

    def provide(job: str, host: str) -> dict[str, bytes]:
        return rule_files(bucket_dir, catalog, job, host) if job in servers else {}
    return provide


def rule_files_yaml(alert_files: Iterable[tuple[str, str]], server_config: bool) -> str:
    """maand's RenderRuleFilesYAML: alert_files are (job, path under _prometheus/), sorted by job and path."""
    entries = sorted(alert_files)
    if not entries and not server_config:
        return ""
    lines = ["rule_files:"]
    if server_config:
        lines.append("  - rules/%s/%s" % (MAAND_ALERTS_JOB, MAAND_CERT_ALERTS_FILE))
    lines.extend("  - rules/%s/%s" % (job, rel.rsplit("/", 1)[-1]) for job, rel in entries)
    return "\n".join(lines) + "\n"


def render_rule_files(bucket_dir: str, catalog: Mapping[str, Any]) -> str:
    """{{ ruleFiles }}: rules/<job>/<file> of every alert file, rules/maand/certs.yaml first when the
    job named prometheus ships a server config (maand's RenderRuleFilesYAML)."""
    entries = [(f.job, rel) for f in collect(bucket_dir, catalog) for rel in f.alerts]
    return rule_files_yaml(entries, SERVER_JOB in server_jobs(bucket_dir, catalog))
