# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus: maand's Prometheus support (maand-sh/maand promconfig/), one package. PRIVATE to the collection.

Rank 2.5: it reads the bucket (bucket/) and the KV (kv/); build (catalog/), the deploy (deploy/) and the
day-2 verbs (ops/) call it through this door.

errors.py (PrometheusError), files.py (the ``_prometheus/`` folders, the server jobs), goyaml.py (YAML in
and out as go-yaml v3), gojson.py (JSON as Go writes it), scrape.py (scrape.yaml: parse, check, expand),
scrape_template.py (scrape.yaml.tpl), scrape_catalog.py (build's ``maand/prometheus`` KV and the sealed
``secrets/prometheus``, deploy's ``{{ scrapeConfigs }}``), rules.py (the server job's ``rules/``, ``{{ ruleFiles }}``), funcs.py (the two
template functions), checks.py (build's checks of ``_prometheus/``), consoles.py (the server job's runbook
and dashboard pages, what the deploy adds to its tree), remote_write.py (pushing samples to the server).
"""

from __future__ import annotations

from .checks import check_prometheus
from .consoles import ORIGIN, server_files_provider
from .errors import PrometheusError
from .files import FOLDER, MAX_FILE_BYTES, SCRAPE_TPL, collect, server_jobs
from .funcs import FUNC_NAMES, PARSE_FUNCS, template_funcs
from .remote_write import (InsecureCredentials, MissingLibrary, PushError, RemoteWriteError, Series, Target, discover,
                           encode, secure_target, send_with_retry, store_credentials)
from .scrape_catalog import SEALED_NAMESPACE, RenderedScrape, compute_kv, render_scrape, render_scrape_configs

__all__ = [
    "PrometheusError", "FOLDER", "MAX_FILE_BYTES", "SCRAPE_TPL", "collect", "server_jobs",  # the folders
    "FUNC_NAMES", "PARSE_FUNCS", "template_funcs", "compute_kv", "render_scrape_configs",  # build and deploy
    "render_scrape", "RenderedScrape", "SEALED_NAMESPACE",  # scrape configs that read a secret (sealed)
    "check_prometheus",  # build's checks
    "ORIGIN", "server_files_provider",  # the deploy's overlays of a server job
    "PushError", "MissingLibrary", "RemoteWriteError", "InsecureCredentials", "Series", "Target", "discover", "encode",
    "secure_target", "send_with_retry", "store_credentials",  # remote write (ops/cert_metrics.py)
]
