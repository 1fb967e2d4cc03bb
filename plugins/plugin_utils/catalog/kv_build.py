# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What build does for the KV store and the jobs' templates (called from catalog/service.py).

* ``check(bucket, report)`` (read-only, part of compute): parses every job's ``.tpl`` with the
  template engine and maand's function map (parse errors and unknown functions are errors naming
  job, file, line, column and a fix, as maand would only find them at deploy) and reads every
  job's ``vars.toml`` (ErrInvalidJobVars). Returns the vars for ``write``.
* ``write(bucket_dir, catalog, job_vars)`` (under the bucket lock build holds, not in check
  mode): computes the KV from the catalog (kv/functions.compute_kv) and applies it to data/kv.json
  (kv/store.py): build-owned namespaces replaced, vars.toml merged into vars/job/<job>, keys hooks
  wrote kept, secrets untouched.

No Ansible imports.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from . import catalog
from .. import gotemplate
from .. import prometheus
from ..kv import functions, store

# Not rendered as job templates: _modules/ holds job command scripts, _prometheus/ is
# read by maand's Prometheus assembly (scrape.yaml.tpl has its own function map).
SKIPPED_DIRS = ("_modules", "_prometheus")

KV_FILE = os.path.join("data", "kv.json")


@dataclasses.dataclass
class Prepared:
    """What check found, for write: vars.toml of every job that has one."""

    job_vars: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    # maand/prometheus and maand/job/<job> job_name (check_prometheus), merged into the KV by write
    prometheus: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)


def job_templates(job_root: str, suffix: str = ".tpl") -> list[str]:
    """The .tpl (or other suffix) files of a job folder (relative paths, sorted), as maand's transpile walks them."""
    found = []
    for current, dirs, files in os.walk(job_root):
        if current == job_root:
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        dirs.sort()
        rel_dir = os.path.relpath(current, job_root)
        for name in sorted(files):
            if name.endswith(suffix):
                found.append(os.path.normpath(os.path.join(rel_dir, name)))
    return found


def check(bucket: Any, report: Any) -> Prepared:
    """Parse every job's .tpl files and read its vars.toml; problems go to report."""
    prepared = Prepared()
    for name in sorted(bucket.jobs):
        job = bucket.jobs[name]
        root = os.path.join(bucket.path, job.path)
        walked = getattr(job, "template_files", None)  # found by the model's one walk of the job folder
        for rel in (job_templates(root) if walked is None else walked[".tpl"]):
            _check_syntax(name, job.path, root, rel, report, _go_syntax)
        for rel in (job_templates(root, ".j2") if walked is None else walked[".j2"]):
            _check_syntax(name, job.path, root, rel, report, _jinja_syntax)
        vars_path = os.path.join(root, "vars.toml")
        if os.path.isfile(vars_path):
            try:
                prepared.job_vars[name] = functions.load_vars_toml(vars_path)
            except (OSError, ValueError, functions.KVError) as exc:
                report.error("ErrInvalidJobVars", os.path.join(job.path, "vars.toml"), "",
                             "job %s: %s" % (name, _short(exc, vars_path)),
                             "write vars.toml as key = value lines of strings, numbers or booleans")
    return prepared


def _short(exc: Exception, path: str) -> str:
    return str(exc).replace(path + ": ", "")


def _go_syntax(text: str, rel: str) -> tuple[str, str, str] | None:
    """A .tpl's syntax error as (where, what, fix), None when it parses."""
    try:
        functions.parse_template(text, rel, prometheus.PARSE_FUNCS)
    except gotemplate.TemplateError as exc:
        where = "line %s, column %s" % (exc.line, exc.column) if exc.line else ""  # no line: nested too deeply
        return where, "does not parse: %s" % exc.cause, _fix(exc.cause)
    return None


def _jinja_syntax(text: str, rel: str) -> tuple[str, str, str] | None:
    """A .j2 is rendered with Jinja2 at deploy: its syntax is checked here (names and keys at deploy)."""
    import jinja2

    try:
        jinja2.Environment().parse(text, rel, rel)
    except jinja2.TemplateSyntaxError as exc:
        return ("line %s" % exc.lineno, "does not parse (Jinja2): %s" % exc.message,
                "fix the Jinja2 syntax (see docs/templates.md)")
    except RecursionError:
        return "", "is nested too deeply to parse (Jinja2)", "flatten the nested parentheses, expressions or blocks"
    return None


def _check_syntax(job: str, job_rel: str, root: str, rel: str, report: Any, syntax: Any) -> None:
    """Read one template of a job and report when it cannot be read or does not parse."""
    file_rel = os.path.join(job_rel, rel)
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        report.error("ErrInvalidJob", file_rel, "", "job %s: template %s cannot be read: %s"
                     % (job, rel, getattr(exc, "strerror", None) or exc),
                     "make it a readable UTF-8 text file")
        return
    problem = syntax(text, rel)
    if problem:
        where, what, fix = problem
        report.error("ErrInvalidJob", file_rel, where, "job %s: template %s %s" % (job, rel, what), fix)


def _fix(cause: str) -> str:
    if "not defined" in cause and cause.startswith("function"):
        return ("use maand's functions (%s) or Go's built-ins (%s)"
                % (" ".join(sorted(functions.TEMPLATE_FUNC_NAMES | set(prometheus.FUNC_NAMES))),
                   " ".join(sorted(gotemplate.BUILTINS))))
    return "fix the template syntax (Go text/template, see docs/templates.md)"


def check_prometheus(bucket_dir: str, cat: Mapping[str, Any], prepared: Prepared, report: Any) -> bool:
    """maand's Prometheus catalog (promconfig BuildCatalog): render scrape.yaml.tpl files over the KV
    this build computes, validate them and keep the maand/prometheus keys for write. False on error."""
    try:
        view: Mapping[str, Any] = {}
        if any(f.scrape_file == prometheus.SCRAPE_TPL for f in prometheus.collect(bucket_dir, cat)):
            view = _kv_view(bucket_dir, cat, prepared)
        prepared.prometheus = prometheus.compute_kv(bucket_dir, cat, view)
    except prometheus.PrometheusError as exc:
        report.error("ErrInvalidJob", exc.file or "workspace/jobs", "", str(exc),
                     "fix the scrape file (maand's _prometheus/ rules: docs/templates.md, Prometheus)")
        return False
    except (functions.KVError, store.KVStoreError) as exc:
        report.error("ErrInvalidJob", KV_FILE, "", "scrape.yaml.tpl needs the KV: %s" % exc,
                     "restore data/kv.json (and secrets/kv.key) or remove the template's reads")
        return False
    return True


class _LazySecrets(Mapping):
    """A secrets/ namespace of the store, decrypted key by key when a scrape template reads it."""

    def __init__(self, kv_store: Any, ns: str, keys: list[str]) -> None:
        self._store, self._ns, self._keys = kv_store, ns, keys

    def __getitem__(self, key: str) -> str:
        value = self._store.get(self._ns, key, reveal_secrets=True)
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def _kv_view(bucket_dir: str, cat: Mapping[str, Any], prepared: Prepared) -> dict:
    """The KV as this build will write it (build-owned keys recomputed, hooks' keys kept), secrets lazy."""
    kv_store = store.KVStore.load(bucket_dir) if store.KVStore.exists(bucket_dir) else None
    previous = kv_store.snapshot() if kv_store is not None else {}
    view: dict = functions.compute_kv(cat, prepared.job_vars, previous=previous, ca_cert=_ca_cert(bucket_dir))
    if kv_store is not None:
        masked = kv_store.snapshot(mask="*")
        for ns, keys in masked.items():
            if functions.is_secret_ns(ns):
                view[ns] = _LazySecrets(kv_store, ns, sorted(keys))
    return view


def write(bucket_dir: str, cat: Mapping[str, Any], prepared: Prepared,
          extra: Mapping[str, Mapping[str, str]] | None = None, purge_job_kv: bool = False) -> list[str]:
    """Apply the catalog's KV to data/kv.json; lines for the build output (empty if unchanged).

    extra: more build-owned keys (e.g. certificates) merged into the computed namespaces.
    purge_job_kv: also mark deleted vars/job/<job> and secrets/job/<job> of jobs whose allocations are
    all removed or that left the workspace (maand build --purge-job-kv; kv/functions.purged_job_namespaces).
    """
    computed = functions.compute_kv(cat, prepared.job_vars, ca_cert=_ca_cert(bucket_dir))
    for ns, keys in list(prepared.prometheus.items()) + list((extra or {}).items()):
        computed.setdefault(ns, {}).update(keys)
    kv_store = store.KVStore.load(bucket_dir)
    changes = kv_store.apply_build(computed, catalog_jobs=[j["name"] for j in cat.get("jobs", [])])
    if purge_job_kv:
        for ns in functions.purged_job_namespaces(cat, list(kv_store.namespaces)):
            changes += kv_store.delete_namespace(ns)
    written = kv_store.save()
    if not changes:
        return ["KV: data/kv.json written"] if written else []
    counts = {kind: sum(1 for c in changes if c.kind == kind) for kind in ("added", "changed", "deleted")}
    return ["KV: %s in data/kv.json" % ", ".join("%d key%s %s" % (n, "" if n == 1 else "s", kind)
                                                 for kind, n in counts.items() if n)]


def _ca_cert(bucket_dir: str) -> str | None:
    """secrets/ca.crt when the bucket has one (maand's CA), for maand/worker certs/ca.crt."""
    try:
        with open(os.path.join(bucket_dir, "secrets", "ca.crt"), encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


# --- reading a bucket's KV ---------------------------------------------------------------------

def read_kv(bucket_dir: str, reveal_secrets: bool = False,
            mask: str | None = None) -> dict[str, dict[str, str]]:
    """The bucket's KV: the store build keeps in data/kv.json (kv/store.py), else computed from the
    catalog (a bucket built before the store existed; it has no secrets then).

    secrets/ namespaces are decrypted only with reveal_secrets (which needs secrets/kv.key);
    otherwise their values read as mask when one is given, else they are left out.
    """
    if store.KVStore.exists(bucket_dir):
        try:
            return store.KVStore.load(bucket_dir).snapshot(reveal_secrets=reveal_secrets, mask=mask)
        except store.KVStoreError as exc:
            raise functions.KVError(str(exc)) from None
    try:
        cat = catalog.read_catalog(bucket_dir)
    except catalog.CatalogError as exc:
        raise functions.KVError(str(exc)) from None
    if cat is None:
        raise functions.KVError("%s has no data/catalog.json; build the bucket first"
                                " (ansible-playbook maand.core.build -e maand_bucket=%s)"
                                % (bucket_dir, bucket_dir))
    return functions.compute_kv(cat, functions.load_job_vars(bucket_dir, cat))
