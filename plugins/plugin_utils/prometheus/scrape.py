# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scrape configs as maand reads, checks and expands them (maand promconfig/scrape.go).

``parse_scrape`` reads ``scrape.yaml`` (a non-empty YAML list of scrape_config mappings), ``validate_configs``
checks it at build (no service discovery, declared ports), ``expand_scrape_configs`` turns
``maand:port/<port>`` into ``<worker_ip>:<port>`` of the job's active allocations and ``maand:job`` into the
job's name, and ``scrape_configs_yaml`` writes the result as the indented YAML fragment ``{{ scrapeConfigs }}``
gives (yaml.v3's layout, each line prefixed with a newline and two spaces). No Ansible imports.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterable, Mapping

from .. import gotemplate
from .errors import NoActiveTargets, PrometheusError
from .files import SCRAPE_FILE
from .goyaml import load_yaml, marshal, v3_copy

PORT_PREFIX = "maand:port/"
JOB_PLACEHOLDER = "maand:job"
IMPLICIT_PORT = "_implicit"


def parse_scrape(text: str, what: str = SCRAPE_FILE) -> list[dict]:
    """maand's ParseScrapeFile: a non-empty YAML list of scrape_config mappings."""
    if not text.strip():
        raise PrometheusError("%s is empty" % what)
    data = load_yaml(text, what)
    if data is None:
        data = []
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise PrometheusError("%s: expected a YAML list of scrape_config mappings (- job_name: ...)" % what)
    if not data:
        raise PrometheusError("%s must contain at least one scrape item" % what)
    return data


# --- placeholders (scrape.go) ------------------------------------------------------------------

def resolve_job_name(job: str, value: str) -> str:
    """maand:job -> the maand job's name; anything else as it is."""
    return job if value == JOB_PLACEHOLDER else value


def resolve_metrics_port_key(job: str, ports: Iterable[str]) -> str:
    """maand:port/_implicit: <job>_metrics_port, then metrics_port, then the only *_metrics_port."""
    ports = set(ports)
    for name in (job + "_metrics_port", "metrics_port"):
        if name in ports:
            return name
    matches = sorted(p for p in ports if p.endswith("_metrics_port"))
    if not matches:
        raise PrometheusError("job %s scrape.yaml uses maand:port/_implicit but no metrics port is declared"
                              " in manifest" % job)
    if len(matches) > 1:
        raise PrometheusError("job %s ambiguous metrics ports [%s]; set an explicit port in scrape.yaml"
                              % (job, " ".join(matches)))
    return matches[0]


def _targets(config: Mapping[str, Any]) -> Iterable[Any]:
    static = config.get("static_configs")
    for block in static if isinstance(static, list) else []:
        targets = block.get("targets") if isinstance(block, dict) else None
        yield from targets if isinstance(targets, list) else []


def requires_active_allocations(configs: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a target uses maand:port/ (the job is scraped only with active allocations)."""
    return any(isinstance(t, str) and t.startswith(PORT_PREFIX) for c in configs for t in _targets(c))


@dataclasses.dataclass(frozen=True)
class ScrapeJob:
    """What one job's scrape configs expand with: its ports and its active allocations."""

    name: str
    configs: tuple  # unexpanded scrape_config mappings, as the file has them
    ports: Mapping[str, int]  # declared port name -> assigned number
    active_workers: tuple[str, ...]


def expand_scrape_configs(job: ScrapeJob) -> list[dict]:
    """maand's ExpandScrapeConfigs (copies; raises NoActiveTargets or PrometheusError)."""
    out = []
    for index, config in enumerate(job.configs):
        try:  # maand stores scrape/<job> as JSON in the KV, then copies each config through YAML
            copy = v3_copy(json.loads(json.dumps(config, allow_nan=False)))
        except ValueError:
            raise PrometheusError("job %s scrape.yaml[%d]: json: unsupported value (.inf or .nan): maand stores scrape"
                                  " configs as JSON; quote it" % (job.name, index)) from None
        if isinstance(copy.get("job_name"), str):
            copy["job_name"] = resolve_job_name(job.name, copy["job_name"])
        try:
            copy["static_configs"] = _expand_static(job, copy)
        except NoActiveTargets:
            raise
        except PrometheusError as exc:
            raise PrometheusError("job %s scrape.yaml[%d]: %s" % (job.name, index, exc)) from None
        out.append(copy)
    return out


def _expand_static(job: ScrapeJob, config: dict) -> list:
    if "static_configs" not in config:
        raise PrometheusError("static_configs is required")
    static = config["static_configs"]
    if not isinstance(static, list) or not static:
        raise PrometheusError("static_configs must be a non-empty list")
    blocks = []
    for index, block in enumerate(static):
        if not isinstance(block, dict):
            raise PrometheusError("static_configs[%d] must be a mapping" % index)
        labels = block.get("labels")
        if isinstance(labels, dict):
            block["labels"] = {k: resolve_job_name(job.name, v) if isinstance(v, str) else v
                               for k, v in labels.items()}
        if "targets" not in block:
            raise PrometheusError("static_configs[%d].targets is required" % index)
        targets = block["targets"]
        if not isinstance(targets, list) or not targets:
            raise PrometheusError("static_configs[%d].targets must be a non-empty list" % index)
        if not all(isinstance(t, str) for t in targets):
            raise PrometheusError("static_configs[%d].targets entries must be strings" % index)
        block = v3_copy(block)  # maand copies each static block through YAML once more
        block["targets"] = [item for target in block["targets"] for item in _expand_target(job, target)]
        if not block["targets"]:
            raise NoActiveTargets("no active allocation targets after expanding scrape config: job %s" % job.name)
        blocks.append(block)
    return blocks


def _expand_target(job: ScrapeJob, target: str) -> list[str]:
    if not target.startswith(PORT_PREFIX):
        return [target]
    parts = target[len(PORT_PREFIX):].split("/")
    key = parts[0]
    if not key:
        raise PrometheusError("invalid maand port placeholder %s" % gotemplate.go_quote(target))
    if key == IMPLICIT_PORT:
        key = resolve_metrics_port_key(job.name, job.ports)
    if key not in job.ports:
        raise PrometheusError("port %s is not declared in manifest resources.ports" % gotemplate.go_quote(key))
    number = job.ports[key]
    if number is None:
        raise PrometheusError("port %s has no assigned number (run maand build)" % gotemplate.go_quote(key))
    workers = list(job.active_workers)
    if len(parts) > 1 and parts[1]:
        if parts[1] not in workers:
            raise PrometheusError("worker %s is not an active allocation for job %s"
                                  % (gotemplate.go_quote(parts[1]), job.name))
        workers = [parts[1]]
    return ["%s:%d" % (ip, int(number)) for ip in workers]


# --- YAML out: the {{ scrapeConfigs }} fragment (scrape.go ScrapeConfigsYAML) --------------------

def scrape_configs_yaml(configs: list) -> str:
    """maand's ScrapeConfigsYAML: the YAML of configs, every line as "\\n  " + line ("" when none)."""
    if not configs:
        return ""
    return "".join("\n  " + line for line in marshal(configs).rstrip("\n").split("\n") if line)


# --- build-time checks (scrape.go ValidateScrapeConfigs, ValidateScrapePortReferences) -----------

FORBIDDEN_SD = (
    "kubernetes_sd_configs", "dns_sd_configs", "file_sd_configs", "consul_sd_configs", "ecs_sd_configs",
    "ec2_sd_configs", "openstack_sd_configs", "azure_sd_configs", "gce_sd_configs", "hetzner_sd_configs",
    "ionos_sd_configs", "linode_sd_configs", "digitalocean_sd_configs", "docker_sd_configs",
    "dockerswarm_sd_configs", "eureka_sd_configs", "http_sd_configs", "kuma_sd_configs", "marathon_sd_configs",
    "nerve_sd_configs", "serverset_sd_configs", "triton_sd_configs", "uyuni_sd_configs",
)


def validate_configs(job: str, what: str, configs: list[dict], ports: Iterable[str]) -> None:
    """maand's ValidateScrapeConfigs and ValidateScrapePortReferences (build time)."""
    ports = set(ports)
    for index, config in enumerate(configs):
        bad = [key for key in FORBIDDEN_SD if key in config]
        if bad:
            raise PrometheusError("job %s %s[%d] %s is not supported (use static_configs with maand:port placeholders)"
                                  % (job, what, index, bad[0]))
        if not as_text(config.get("job_name")).strip():
            raise PrometheusError("job %s %s[%d] missing job_name" % (job, what, index))
        static = config.get("static_configs")
        for bi, block in enumerate(static if isinstance(static, list) else []):
            targets = block.get("targets") if isinstance(block, dict) else None
            for ti, target in enumerate(targets if isinstance(targets, list) else []):
                if isinstance(target, str) and target.startswith(PORT_PREFIX):
                    _check_placeholder(job, "%s[%d].static_configs[%d].targets[%d]" % (what, index, bi, ti),
                                       target, ports)


def _check_placeholder(job: str, where: str, target: str, ports: set) -> None:
    key = target[len(PORT_PREFIX):].split("/")[0]
    if not key:
        raise PrometheusError("job %s %s invalid placeholder %s" % (job, where, gotemplate.go_quote(target)))
    if key == IMPLICIT_PORT:
        key = resolve_metrics_port_key(job, ports)
    if key not in ports:
        raise PrometheusError("job %s %s port '%s' is not declared in manifest resources.ports" % (job, where, key))


def as_text(value: Any) -> str:
    """value when it is a string, else "" (a job_name maand reads as a Go string)."""
    return value if isinstance(value, str) else ""
