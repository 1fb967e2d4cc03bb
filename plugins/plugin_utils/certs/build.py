# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What build and deploy do for TLS certificates (maand-sh/maand build/build_certs.go, deploy/certs.go).

* ``check(bucket_dir, catalog, conf, report)`` (read-only, part of compute): a half-present or
  corrupt CA is an error naming the file and the fix, before anything is written.
* ``issue(bucket_dir, catalog, conf, previous)`` (build, under the bucket lock): makes the CA
  (``secrets/ca.crt`` + ``ca.key``) the first time a job declares certs, then for every job's
  certs and every non-removed allocation (active and disabled, as maand) keeps the stored leaf or
  issues a new one when it is missing, unreadable, not signed by the CA (the CA changed), its
  config changed (subject, SANs, key format) or it is inside ``certs_renewal_buffer`` of expiry.
  Returns the KV keys (``maand/job/<job>/worker/<ip>``: ``certs/<name>.crt``, ``certs/<name>.key``,
  and the worker paths ``certs/<name>.crt_path``, ``.key_path``, ``certs/ca.crt_path``) that build
  merges into data/kv.json (mode 0600); a cert dropped from the manifest drops its keys there.
* the deploy lays the stored leaves over each allocation's tree (deploy/certs.py ``overlay_provider``): the files
  ``certs/<name>.crt`` (0644), ``certs/<name>.key`` (0600) and ``certs/ca.crt`` added to the
  allocation's staged tree, so they are hashed with it (a new cert restarts the job, as maand) and
  shipped by rsync to ``/opt/worker/<bucket_id>/jobs/<job>/certs/``.

No Ansible imports; the crypto is in ca.py and leaves.py (the ``cryptography`` package).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from ..worker import layout
from . import ca, leaves
from ..kv import functions

CERTS_DIR = layout.CERTS_DIR


@dataclasses.dataclass
class Issued:
    """What issue did: KV keys for build to merge, and lines for the build output."""

    kv: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    lines: list[str] = dataclasses.field(default_factory=list)


def job_specs(catalog: Mapping[str, Any]) -> dict[str, list[dict]]:
    """{job: its certs entries} of the non-removed jobs that declare certs."""
    return {j["name"]: list(j["certs"]) for j in catalog.get("jobs", []) if j.get("certs") and not j.get("removed")}


def _holders(catalog: Mapping[str, Any], jobs: Any) -> dict[str, list[str]]:
    """{job: the workers of its non-removed allocations, in workers.json order} for jobs (one pass)."""
    order = {w["host"]: i for i, w in enumerate(catalog.get("workers", []))}
    out: dict[str, set] = {job: set() for job in jobs}
    for a in catalog.get("allocations", []):
        if a["job"] in out and a.get("state") != "removed":
            out[a["job"]].add(a["worker"])
    return {job: sorted(hosts, key=lambda h: (order.get(h, len(order)), h)) for job, hosts in out.items()}


def settings(conf: Mapping[str, Any]) -> tuple[int, int]:
    """(certs_ttl days, certs_renewal_buffer days) as maand reads maand.conf."""
    buffer = conf.get("certs_renewal_buffer")
    return leaves.ttl_days(conf.get("certs_ttl")), buffer if isinstance(buffer, int) and buffer > 0 else 0


def check(bucket_dir: str, catalog: Mapping[str, Any], conf: Mapping[str, Any], report: Any) -> bool:
    """The CA is whole and readable when some job declares certs (or when its files exist)."""
    cert_path, key_path = ca.ca_paths(bucket_dir)
    present = os.path.exists(cert_path) or os.path.exists(key_path)
    if not job_specs(catalog) and not present:
        return True
    try:
        if present:
            ca.load_or_create_ca(bucket_dir, "")  # both present: only loads; half present: refuses
    except ca.CertError as exc:
        report.error("ErrInvalidCA", ca.CA_CERT_REL, "", str(exc), "see docs/certs.md (Bad input)")
        return False
    ttl, buffer = settings(conf)
    if job_specs(catalog) and buffer >= ttl:
        report.warn("ErrInvalidMaandConf", "maand.conf", "certs_renewal_buffer",
                    "certs_renewal_buffer (%d days) >= certs_ttl (%d days): every build issues every certificate"
                    " again and every deploy restarts the jobs that use them" % (buffer, ttl),
                    "set certs_renewal_buffer below certs_ttl, e.g. certs_ttl = 60, certs_renewal_buffer = 10")
    return True


def issue(bucket_dir: str, catalog: Mapping[str, Any], conf: Mapping[str, Any],
          previous: Mapping[str, Mapping[str, str]]) -> Issued:
    """Keep or issue every job's leaves (see the module doc). Raises ca.CertError."""
    out = Issued()
    specs = job_specs(catalog)
    holders = _holders(catalog, specs)
    if not any(holders.values()):
        return out  # no leaf to issue: the CA is made by the first build that needs it
    authority = ca.load_or_create_ca(bucket_dir, str(catalog.get("bucket_id") or "maand"))
    ttl, buffer = settings(conf)
    counts = {"issued": 0, "kept": 0}
    for job, entries in sorted(specs.items()):
        hosts = holders[job]
        for spec in entries:
            issued, reasons = _one_spec(authority, job, spec, hosts, previous, (ttl, buffer), out.kv)
            counts["issued"] += issued
            counts["kept"] += len(hosts) - issued
            for where, why in reasons:
                out.lines.append("  certs: %s/%s issued for %s (%s)" % (job, spec["name"], where, why))
    bucket_id = str(catalog.get("bucket_id") or "")
    for job, entries in specs.items():
        for host in holders[job]:
            out.kv.setdefault(functions.allocation_ns(job, host), {}).update(_path_keys(bucket_id, job, entries))
    if counts["issued"]:
        out.lines.insert(0, "certs: %d leaf certificate%s issued, %d kept (CA %s)" % (
            counts["issued"], "" if counts["issued"] == 1 else "s", counts["kept"], ca.CA_CERT_REL))
    return out


def _one_spec(authority: ca.CA, job: str, spec: Mapping[str, Any], hosts: list[str],
              previous: Mapping[str, Mapping[str, str]], policy: tuple[int, int],
              kv: dict[str, dict[str, str]]) -> tuple[int, list[tuple[str, str]]]:
    """Fill kv with spec's leaves on hosts; (how many issued now, [(where, why)])."""
    ttl, buffer = policy
    name, cn, pkcs8 = spec["name"], spec.get("common_name") or "", bool(spec.get("pkcs8"))
    stored = {h: _stored(previous, job, h, name) for h in hosts}
    if not hosts:
        return 0, []
    if spec.get("one"):  # one pair for every allocation, SANs 127.0.0.1 + every holder's IP
        first = stored[hosts[0]]
        why = leaves.leaf_problem(authority, first[0], first[1], cn, hosts, pkcs8, buffer)
        if why is None and any(stored[h] != first for h in hosts):
            why = "not the same on every allocation"
        pair = first if why is None else _pair(leaves.issue_leaf(authority, cn, hosts, ttl, pkcs8))
        for host in hosts:
            _put(kv, job, host, name, pair)
        return (len(hosts), [("all %d allocations (one: true)" % len(hosts), why)]) if why else (0, [])
    made = []
    for host in hosts:
        why = leaves.leaf_problem(authority, stored[host][0], stored[host][1], cn, [host], pkcs8, buffer)
        pair = stored[host] if why is None else _pair(leaves.issue_leaf(authority, cn, [host], ttl, pkcs8))
        _put(kv, job, host, name, pair)
        if why:
            made.append((host, why))
    return len(made), made


def _pair(leaf: leaves.Leaf) -> tuple[str, str]:
    return leaf.cert_pem, leaf.key_pem


def _stored(previous: Mapping[str, Mapping[str, str]], job: str, host: str, name: str) -> tuple:
    ns = previous.get(functions.allocation_ns(job, host)) or {}
    return ns.get("certs/%s.crt" % name), ns.get("certs/%s.key" % name)


def _put(kv: dict[str, dict[str, str]], job: str, host: str, name: str, pair: tuple) -> None:
    ns = kv.setdefault(functions.allocation_ns(job, host), {})
    ns["certs/%s.crt" % name], ns["certs/%s.key" % name] = pair


def _path_keys(bucket_id: str, job: str, entries: list[dict]) -> dict[str, str]:
    base = "%s/%s" % (layout.job_root(bucket_id, job), CERTS_DIR)
    out = {"certs/ca.crt_path": base + "/ca.crt"}
    for spec in entries:
        out["certs/%s.crt_path" % spec["name"]] = "%s/%s.crt" % (base, spec["name"])
        out["certs/%s.key_path" % spec["name"]] = "%s/%s.key" % (base, spec["name"])
    return out
