# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scrape catalog: build's ``maand/prometheus`` KV (maand promconfig/workspace_catalog.go BuildCatalog) and
deploy's ``{{ scrapeConfigs }}`` (scrape_deploy.go RenderScrapeConfigsYAML). No Ansible imports.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping

from ..kv import functions as _functions
from .errors import NoActiveTargets, PrometheusError
from .files import collect, job_record, server_jobs
from .gojson import go_json
from .scrape import (ScrapeJob, as_text, expand_scrape_configs, requires_active_allocations, resolve_job_name,
                     scrape_configs_yaml)
from .scrape_template import job_scrape_configs

KV_NAMESPACE = "maand/prometheus"


# --- the scrape catalog: build's maand/prometheus KV, deploy's scrapeConfigs ----------------------

def active_workers(catalog: Mapping[str, Any], job: str) -> tuple[str, ...]:
    """The job's active allocations, in worker position order."""
    position = {w["host"]: (w.get("position") is None, w.get("position") or 0, w["host"])
                for w in catalog.get("workers", [])}
    hosts = [a["worker"] for a in catalog.get("allocations", []) if a.get("job") == job and a.get("state") == "active"]
    return tuple(sorted(hosts, key=lambda h: position.get(h, (True, 0, h))))


def scrape_job(catalog: Mapping[str, Any], name: str, configs: Iterable[dict]) -> ScrapeJob:
    job = job_record(catalog, name)
    return ScrapeJob(name, tuple(configs), dict(job.get("ports") or {}), active_workers(catalog, name))


def compute_kv(bucket_dir: str, catalog: Mapping[str, Any], kv: Mapping[str, Mapping[str, str]],
               upstream: Callable[[str], Iterable[str]] | None = None) -> dict[str, dict[str, str]]:
    """maand's BuildCatalog KV: maand/prometheus {scrape_configs, scrape/<job>, scrape_jobs,
    scrape_jobs_length} and maand/job/<job> job_name; raises PrometheusError (file named)."""
    if not server_jobs(bucket_dir, catalog):
        return {KV_NAMESPACE: {"scrape_configs": "[]", "scrape_jobs": "", "scrape_jobs_length": "0"}}
    upstream = upstream or (lambda name: _functions.upstream_jobs(catalog, name))
    prom: dict[str, str] = {}
    out: dict[str, dict[str, str]] = {KV_NAMESPACE: prom}
    names: list[str] = []
    aggregate: list[dict] = []
    owners: dict[str, str] = {}
    for folder in collect(bucket_dir, catalog):
        if folder.scrape_file is None:
            continue
        configs = job_scrape_configs(folder, job_record(catalog, folder.job), kv, upstream(folder.job))
        for config in configs:
            resolved = resolve_job_name(folder.job, as_text(config.get("job_name")))
            owner = owners.setdefault(resolved, folder.job)
            if owner != folder.job:
                raise PrometheusError("duplicate prometheus job_name '%s' (jobs %s and %s)" % (resolved, owner, folder.job),
                                      "%s/%s" % (folder.rel, folder.scrape_file))
        out[_functions.job_ns(folder.job)] = {"job_name": resolve_job_name(folder.job, as_text(configs[0].get("job_name")))}
        prom["scrape/%s" % folder.job] = go_json(configs)
        job = scrape_job(catalog, folder.job, configs)
        if requires_active_allocations(configs) and not job.active_workers:
            continue
        names.append(folder.job)
        aggregate.extend(configs)
    prom.update({"scrape_configs": go_json(aggregate), "scrape_jobs": ",".join(names),
                 "scrape_jobs_length": str(len(names))})
    return out


def render_scrape_configs(bucket_dir: str, catalog: Mapping[str, Any], kv: Mapping[str, Mapping[str, str]],
                          only: Iterable[str] = ()) -> str:
    """{{ scrapeConfigs }}: the scrape configs build stored in maand/prometheus (scrape_jobs), expanded
    with the catalog's ports and active allocations; without them, the workspace's scrape files.
    only: just these jobs (maand cat prometheus scrape --jobs); empty: all."""
    only = set(only)
    stored = kv.get(KV_NAMESPACE) or {}
    names = [n.strip() for n in str(stored.get("scrape_jobs") or "").split(",")
             if n.strip() and (not only or n.strip() in only)]
    jobs: list[ScrapeJob] = []
    for name in names:
        raw = stored.get("scrape/%s" % name)
        if raw is None:
            raise PrometheusError("key scrape/%s not found in namespace %s; build the bucket again" % (name, KV_NAMESPACE))
        try:
            jobs.append(scrape_job(catalog, name, json.loads(raw)))
        except ValueError:
            raise PrometheusError("%s scrape/%s is not JSON; build the bucket again" % (KV_NAMESPACE, name)) from None
    text = _expand_all(jobs)
    if text.strip() or names:
        return text
    jobs = [scrape_job(catalog, f.job, job_scrape_configs(f, job_record(catalog, f.job), kv,
                                                          _functions.upstream_jobs(catalog, f.job)))
            for f in collect(bucket_dir, catalog) if f.scrape_file and (not only or f.job in only)]
    return _expand_all(jobs)


def _expand_all(jobs: Iterable[ScrapeJob]) -> str:
    configs: list[dict] = []
    for job in jobs:
        try:
            configs.extend(expand_scrape_configs(job))
        except NoActiveTargets:
            continue
    return scrape_configs_yaml(configs)
