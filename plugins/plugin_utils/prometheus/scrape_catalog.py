# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scrape catalog: build's ``maand/prometheus`` KV (maand promconfig/workspace_catalog.go BuildCatalog) and
deploy's ``{{ scrapeConfigs }}`` (scrape_deploy.go RenderScrapeConfigsYAML). No Ansible imports.

Every job may read ``maand/prometheus``, so the configs of a ``scrape.yaml.tpl`` that read a secret
(``getSecret``, a ``secrets/`` namespace) are not kept there (maand keeps them in clear): they go to the
build-owned ``secrets/prometheus`` (``SEALED_NAMESPACE``: sealed with ``secrets/kv.key`` as every secret,
masked by ``cat kv``, readable by no job's templates or hooks), and so does the aggregate ``scrape_configs``
when it holds one. ``render_scrape`` tells the deploy whether its output carries such a secret.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Iterable, Mapping

from ..kv import functions
from .errors import NoActiveTargets, PrometheusError
from .files import collect, job_record, server_jobs
from .gojson import go_json
from .scrape import (ScrapeJob, as_text, expand_scrape_configs, requires_active_allocations, resolve_job_name,
                     scrape_configs_yaml)
from .scrape_template import job_scrape_configs

KV_NAMESPACE = "maand/prometheus"
SEALED_NAMESPACE = "secrets/prometheus"  # the scrape configs that read a secret (sealed, like secrets/job/<job>)


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
    upstream = upstream or (lambda name: functions.upstream_jobs(catalog, name))
    prom: dict[str, str] = {}
    sealed: dict[str, str] = {}
    out: dict[str, dict[str, str]] = {KV_NAMESPACE: prom}
    names: list[str] = []
    aggregate: list[dict] = []
    public: list[dict] = []  # the aggregate without the configs that read a secret
    owners: dict[str, str] = {}
    for folder in collect(bucket_dir, catalog):
        if folder.scrape_file is None:
            continue
        tracker = functions.SecretTracker()
        configs = job_scrape_configs(folder, job_record(catalog, folder.job), kv, upstream(folder.job), tracker)
        for config in configs:
            resolved = resolve_job_name(folder.job, as_text(config.get("job_name")))
            owner = owners.setdefault(resolved, folder.job)
            if owner != folder.job:
                raise PrometheusError("duplicate prometheus job_name '%s' (jobs %s and %s)" % (resolved, owner, folder.job),
                                      "%s/%s" % (folder.rel, folder.scrape_file))
        out[functions.job_ns(folder.job)] = {"job_name": resolve_job_name(folder.job, as_text(configs[0].get("job_name")))}
        (sealed if tracker.secret else prom)["scrape/%s" % folder.job] = go_json(configs)
        job = scrape_job(catalog, folder.job, configs)
        if requires_active_allocations(configs) and not job.active_workers:
            continue
        names.append(folder.job)
        aggregate.extend(configs)
        if not tracker.secret:
            public.extend(configs)
    prom.update({"scrape_configs": go_json(public), "scrape_jobs": ",".join(names),
                 "scrape_jobs_length": str(len(names))})
    if sealed:
        if len(public) != len(aggregate):
            sealed["scrape_configs"] = go_json(aggregate)
        out[SEALED_NAMESPACE] = sealed
    return out


@dataclasses.dataclass(frozen=True)
class RenderedScrape:
    """{{ scrapeConfigs }}: the YAML, whether it carries configs that read a secret (secret), and the jobs left
    out because their sealed configs were not revealed (hidden)."""

    text: str
    secret: bool = False
    hidden: tuple[str, ...] = ()


def render_scrape_configs(bucket_dir: str, catalog: Mapping[str, Any], kv: Mapping[str, Mapping[str, str]],
                          only: Iterable[str] = ()) -> str:
    """{{ scrapeConfigs }} as text (render_scrape)."""
    return render_scrape(bucket_dir, catalog, kv, only).text


def render_scrape(bucket_dir: str, catalog: Mapping[str, Any], kv: Mapping[str, Mapping[str, str]],
                  only: Iterable[str] = (), reveal: bool = True) -> RenderedScrape:
    """{{ scrapeConfigs }}: the scrape configs build stored in maand/prometheus (scrape_jobs) or sealed in
    secrets/prometheus, expanded with the catalog's ports and active allocations; without them, the workspace's
    scrape files. only: just these jobs (maand cat prometheus scrape --jobs); empty: all. reveal=False leaves
    out the sealed configs (kv holds them masked or not at all) and names their jobs in hidden."""
    only = set(only)
    stored = kv.get(KV_NAMESPACE) or {}
    sealed = kv.get(SEALED_NAMESPACE) or {}
    names = [n.strip() for n in str(stored.get("scrape_jobs") or "").split(",")
             if n.strip() and (not only or n.strip() in only)]
    jobs: list[ScrapeJob] = []
    secret, hidden = False, []
    for name in names:
        key = "scrape/%s" % name
        raw, ns = stored.get(key), KV_NAMESPACE
        if raw is None and key in sealed:
            if not reveal:
                hidden.append(name)
                continue
            raw, ns, secret = sealed[key], SEALED_NAMESPACE, True
        if raw is None:
            raise PrometheusError("key %s not found in namespace %s; build the bucket again" % (key, KV_NAMESPACE))
        try:
            jobs.append(scrape_job(catalog, name, json.loads(raw)))
        except ValueError:
            raise PrometheusError("%s %s is not JSON; build the bucket again" % (ns, key)) from None
    text = _expand_all(jobs)
    if text.strip() or names:
        return RenderedScrape(text, secret, tuple(hidden))
    jobs = []
    for folder in collect(bucket_dir, catalog):
        if folder.scrape_file and (not only or folder.job in only):
            tracker = functions.SecretTracker()
            configs = job_scrape_configs(folder, job_record(catalog, folder.job), kv,
                                         functions.upstream_jobs(catalog, folder.job), tracker)
            secret = secret or tracker.secret
            jobs.append(scrape_job(catalog, folder.job, configs))
    return RenderedScrape(_expand_all(jobs), secret)


def _expand_all(jobs: Iterable[ScrapeJob]) -> str:
    configs: list[dict] = []
    for job in jobs:
        try:
            configs.extend(expand_scrape_configs(job))
        except NoActiveTargets:
            continue
    return scrape_configs_yaml(configs)
