# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A job verb refuses a worker whose worker.json is out of sync with the catalog (maand's
ValidateBucketUpdateSeq; docs: plugins/modules/worker_sync.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs
from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.build import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.ops import worker_sync as _worker_sync

ARGUMENT_SPEC = specs.spec_for("worker_sync")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        result["changed"] = False
        try:
            catalog = _catalog.read_built(args["bucket"])
        except _catalog.CatalogError as exc:
            result.update(failed=True, msg="%s: %s; nothing was run" % (args["verb"], exc))
            return result
        targets = _worker_sync.targets(catalog, args["job"], args["hosts"], args["workers"])
        found = _worker_sync.stale(catalog, str(catalog.get("bucket_id") or ""),
                                   _worker_sync.states(args["answers"]), targets, args["job"])
        result.update(hosts=targets, stale=[{"worker": s.host, "reason": s.reason} for s in found])
        if found:
            result.update(failed=True, msg=_worker_sync.refusal(found, args["verb"]))
        else:
            result["msg"] = "in sync with the catalog: %s" % (", ".join(targets) or "no worker")
        return result
