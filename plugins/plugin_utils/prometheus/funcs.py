# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The two job template functions maand adds for Prometheus (maand deploy/templates.go):

* ``{{ scrapeConfigs }}``: every job's scrape configs, expanded for its active allocations
  (scrape_catalog.py), as an indented YAML fragment; a job whose placeholders expand to no target is left out;
* ``{{ ruleFiles }}``: a ``rule_files:`` block listing ``rules/<job>/<file>`` of every alert file (rules.py).

Build parses every job template with ``PARSE_FUNCS`` (names only: calling one is an error); the deploy renders
with ``template_funcs`` of one bucket. No Ansible imports.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .errors import PrometheusError
from .rules import render_rule_files
from .scrape_catalog import render_scrape

FUNC_NAMES = ("scrapeConfigs", "ruleFiles")


def _not_at_build(name: str) -> Callable[[], str]:
    def func() -> str:
        raise PrometheusError("%s is rendered at deploy, with the catalog (template_funcs)" % name)
    func.__name__ = name
    return func


# The names build parses job templates with (maand's deploy FuncMap has them for every job).
PARSE_FUNCS: dict[str, Callable] = {name: _not_at_build(name) for name in FUNC_NAMES}


def template_funcs(bucket_dir: str, catalog: Mapping[str, Any],
                   kv: Mapping[str, Mapping[str, str]]) -> dict[str, Callable[[], str]]:
    """maand's scrapeConfigs and ruleFiles for the job templates of one deploy (each computed once).
    scrapeConfigs has a ``reads_secret()`` probe, true once its output carries the configs of a scrape
    template that read a secret: the deploy's render (kv/functions.py SecretTracker.watch) then makes the
    output secret-bearing (0600, an HMAC digest, hidden from --diff)."""
    cache: dict[str, Any] = {}

    def once(name: str, make: Callable[[], Any]) -> Callable[[], str]:
        def func() -> str:
            if name not in cache:
                cache[name] = make()
            value = cache[name]
            return value if isinstance(value, str) else value.text
        func.__name__ = name
        return func

    scrape = once("scrapeConfigs", lambda: render_scrape(bucket_dir, catalog, kv))
    scrape.reads_secret = lambda: bool(getattr(cache.get("scrapeConfigs"), "secret", False))  # type: ignore[attr-defined]
    return {"scrapeConfigs": scrape, "ruleFiles": once("ruleFiles", lambda: render_rule_files(bucket_dir, catalog))}
