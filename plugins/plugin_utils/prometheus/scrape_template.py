# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``scrape.yaml.tpl``: a job's scrape configs as a Go template, rendered at build (maand
promconfig/scrape_template.go), and ``job_scrape_configs``, a job's scrape configs as written or rendered.
A render notes its secret reads (``kv/functions.py`` SecretTracker, as the deploy's renders do): configs
that read a secret are kept sealed (scrape_catalog.py). No Ansible imports.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable, Mapping

from .. import gotemplate
from ..kv import functions
from .errors import PrometheusError
from .files import SCRAPE_TPL, JobFolder, read_text
from .scrape import parse_scrape, validate_configs


# --- scrape.yaml.tpl (scrape_template.go): job-level templates at build ----------------------

SCRAPE_TEMPLATE_FUNCS = ("get", "keys", "getSecret", "split", "upper", "lower", "join", "add", "sub", "mul", "div",
                         "int")


def scrape_template_namespaces(job: str, upstream_jobs: Iterable[str] = ()) -> list[str]:
    """maand's BuildScrapeTemplateNamespaces: bucket, the job's own and those of the jobs it demands."""
    out = [functions.BUCKET_NS, functions.BUCKET_VARS_NS, functions.job_ns(job), functions.job_bucket_vars_ns(job), functions.job_vars_ns(job),
           functions.job_secrets_ns(job)]
    for up in upstream_jobs:
        out.extend(ns for ns in (functions.job_ns(up), functions.job_vars_ns(up), functions.job_secrets_ns(up)) if ns not in out)
    return out


@dataclasses.dataclass(frozen=True)
class _ScrapeReader(functions.KVReader):
    @property
    def allowed(self) -> frozenset:  # type: ignore[override]
        return frozenset(scrape_template_namespaces(self.job, self.upstream_jobs))

    def check(self, namespace: str) -> None:
        if namespace not in self.allowed:
            raise functions.KVError("%s namespace is not available for job %s scrape template" % (namespace, self.job))


@dataclasses.dataclass
class ScrapeTemplateData:
    """The dot of scrape.yaml.tpl (maand ScrapeTemplateData): no per-allocation fields."""

    Job: str  # noqa: N815 - Go field names are the template's
    CurrentVersion: str  # noqa: N815
    NewVersion: str  # noqa: N815


def render_scrape_template(text: str, job: str, version: str, kv: Mapping[str, Mapping[str, str]],
                           upstream_jobs: Iterable[str] = (),
                           tracker: functions.SecretTracker | None = None) -> str:
    """Render scrape.yaml.tpl as maand's build does; raises gotemplate.TemplateError. tracker notes a
    secret read (getSecret, get of secrets/job/<job>): the result is then secret-bearing."""
    reader = _ScrapeReader(kv, job, "", tuple(upstream_jobs))
    tracker = tracker or functions.SecretTracker()
    funcs = {name: func for name, func in tracker.funcs(reader).items() if name in SCRAPE_TEMPLATE_FUNCS}
    funcs["int"] = functions._atoi  # scrape_template.go's int does not trim, unlike deploy's templateInt
    data = ScrapeTemplateData(job, version or "0.0.0", version or "0.0.0")
    return gotemplate.parse(text, SCRAPE_TPL, funcs).execute(data, funcs=funcs)


def job_scrape_configs(folder: JobFolder, job: Mapping[str, Any], kv: Mapping[str, Mapping[str, str]],
                       upstream_jobs: Iterable[str] = (),
                       tracker: functions.SecretTracker | None = None) -> list[dict]:
    """The job's scrape configs as written (scrape.yaml) or rendered (scrape.yaml.tpl), unexpanded.
    tracker (one per job) notes whether the template read a secret; an error never shows a value read."""
    folder.check()
    tracker = tracker or functions.SecretTracker()
    rel = "%s/%s" % (folder.rel, folder.scrape_file)
    text = read_text(os.path.join(folder.root, folder.scrape_file), rel)
    if folder.scrape_file == SCRAPE_TPL:
        try:
            text = render_scrape_template(text, folder.job, str(job.get("version") or ""), kv, upstream_jobs, tracker)
        except gotemplate.TemplateError as exc:
            raise PrometheusError(tracker.redact("job %s %s: %s" % (folder.job, SCRAPE_TPL, exc)), rel) from None
    try:
        configs = parse_scrape(text, folder.scrape_file)
        validate_configs(folder.job, folder.scrape_file, configs, (job.get("ports") or {}).keys())
    except PrometheusError as exc:
        raise PrometheusError(tracker.redact("job %s: %s" % (folder.job, exc) if not str(exc).startswith("job ")
                                             else str(exc)), rel) from None
    return configs
