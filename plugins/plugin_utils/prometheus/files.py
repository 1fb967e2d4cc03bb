# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bucket's ``_prometheus/`` folders (maand promconfig/workspace_catalog.go): their names, the
Prometheus server jobs, reading a file as maand does (4 MB at most, UTF-8).

A job opts in to monitoring with a ``_prometheus/`` folder (``scrape.yaml`` or ``scrape.yaml.tpl``,
``alerts/*.yaml``, ``runbooks/*.md``, ``dashboards/``); a job that ships ``prometheus.yml`` or
``prometheus.yml.tpl`` is a Prometheus server job. No Ansible imports.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping

from .errors import PrometheusError

FOLDER = "_prometheus"
SCRAPE_FILE = "scrape.yaml"
SCRAPE_TPL = "scrape.yaml.tpl"
SERVER_FILES = ("prometheus.yml", "prometheus.yml.tpl")
SERVER_JOB = "prometheus"  # maand's ruleFiles asks this job name whether it ships a server config
SERVER_PORT = "prometheus_port_http"  # maand reads it from the job named prometheus for runbook URLs
MAX_FILE_BYTES = 4 << 20


# --- the bucket's _prometheus/ folders ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class JobFolder:
    """One job's _prometheus/ folder: its scrape file (if any) and its alert files."""

    job: str
    rel: str  # bucket-relative path of the folder (workspace/jobs/<job>/_prometheus)
    root: str  # its absolute path
    scrape_file: str | None  # "scrape.yaml" or "scrape.yaml.tpl"
    alerts: tuple[str, ...]  # paths under _prometheus/ (alerts/slo.yaml), sorted
    both: bool = False  # scrape.yaml and scrape.yaml.tpl: refused where maand refuses it (a server job exists)

    def check(self) -> None:
        if self.both:
            raise PrometheusError("job %s cannot define both %s and %s; keep one" % (self.job, SCRAPE_FILE, SCRAPE_TPL),
                                  self.rel)


def live_jobs(catalog: Mapping[str, Any]) -> list[dict]:
    return sorted((j for j in catalog.get("jobs", []) if not j.get("removed")), key=lambda j: j["name"])


def job_rel(job: Mapping[str, Any]) -> str:
    return job.get("path") or "workspace/jobs/%s" % job["name"]


def collect(bucket_dir: str, catalog: Mapping[str, Any]) -> list[JobFolder]:
    """The _prometheus/ folders of the catalog's jobs, by job name."""
    out = []
    for job in live_jobs(catalog):
        rel = "%s/%s" % (job_rel(job), FOLDER)
        root = os.path.join(bucket_dir, rel)
        if not os.path.isdir(root):
            continue
        scrape = [name for name in (SCRAPE_TPL, SCRAPE_FILE) if os.path.isfile(os.path.join(root, name))]
        out.append(JobFolder(job["name"], rel, root, scrape[0] if scrape else None, _alert_files(root),
                             len(scrape) > 1))
    return out


def _alert_files(root: str) -> tuple[str, ...]:
    """alerts/**.yaml|.yml under root (maand lists every such file of the job's _prometheus/alerts/)."""
    found = []
    base = os.path.join(root, "alerts")
    for current, dirs, files in os.walk(base):
        dirs.sort()
        for name in files:
            if name.endswith((".yaml", ".yml")):
                found.append(os.path.relpath(os.path.join(current, name), root).replace(os.sep, "/"))
    return tuple(sorted(found))


def server_jobs(bucket_dir: str, catalog: Mapping[str, Any]) -> list[str]:
    """The jobs that ship prometheus.yml or prometheus.yml.tpl (maand's Prometheus server jobs)."""
    return [j["name"] for j in live_jobs(catalog)
            if any(os.path.isfile(os.path.join(bucket_dir, job_rel(j), f)) for f in SERVER_FILES)]


def read_text(path: str, rel: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PrometheusError("%s: cannot be read: %s" % (rel, exc.strerror)) from None
    if len(data) > MAX_FILE_BYTES:
        raise PrometheusError("%s: larger than %d MB" % (rel, MAX_FILE_BYTES >> 20))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PrometheusError("%s: not UTF-8 text" % rel) from None


def job_record(catalog: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return next((j for j in live_jobs(catalog) if j["name"] == name), {"name": name})
