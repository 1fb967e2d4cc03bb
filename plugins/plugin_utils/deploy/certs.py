# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The certificates a deploy ships with each allocation (maand deploy/certs.go updateCerts).

Build issues the leaves into data/kv.json (certs/build.py); the deploy lays them over the job's
tree as overlays: certs/<name>.crt, certs/<name>.key (private) and certs/ca.crt. No Ansible imports.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from . import stage
from .. import certs
from ..kv import functions, store


def overlay_provider(bucket_dir: str, catalog: Mapping[str, Any]) -> Callable[[str, str], list]:
    """For the deploy's overlays: (job, host) -> [deploy/stage.Overlay] of its certs (maand updateCerts)."""
    specs = certs.job_specs(catalog)
    snapshot: dict = {}
    if specs:
        snapshot = store.KVStore.load(bucket_dir).snapshot() if store.KVStore.exists(bucket_dir) else {}

    def provide(job: str, host: str) -> list:
        if job not in specs:
            return []
        ns = snapshot.get(functions.allocation_ns(job, host)) or {}
        ca = (snapshot.get(functions.WORKERS_NS) or {}).get("certs/ca.crt")
        files = []
        for spec in specs[job]:
            crt, key = ns.get("certs/%s.crt" % spec["name"]), ns.get("certs/%s.key" % spec["name"])
            if not crt or not key or not ca:
                raise stage.RenderError(
                    job, host, "%s/%s.crt" % (certs.CERTS_DIR, spec["name"]),
                    "certificate %s is not in data/kv.json (maand/job/%s/worker/%s)" % (spec["name"], job, host),
                    "build the bucket again (ansible-playbook maand.core.build -e maand_bucket=%s)" % bucket_dir)
            files.append(stage.Overlay("%s/%s.crt" % (certs.CERTS_DIR, spec["name"]), crt.encode(), origin="certs"))
            files.append(stage.Overlay("%s/%s.key" % (certs.CERTS_DIR, spec["name"]), key.encode(),
                                       origin="certs", private=True))
        files.append(stage.Overlay("%s/ca.crt" % certs.CERTS_DIR, ca.encode(), origin="certs"))
        return files
    return provide
