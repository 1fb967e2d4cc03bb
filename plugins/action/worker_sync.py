# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A job verb refuses a worker whose worker.json is out of sync with the catalog (maand's
ValidateBucketUpdateSeq; docs: plugins/modules/worker_sync.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import ops


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = adapter.spec_for("worker_sync")

    def act(self, result, args, task_vars):
        result["changed"] = False
        try:
            verdict = ops.worker_sync.check(args["bucket"], args["job"], args["hosts"], args["workers"], args["answers"],
                                            args["verb"])
        except ops.worker_sync.CatalogError as exc:
            result.update(failed=True, msg="%s: %s; nothing was run" % (args["verb"], exc))
            return result
        result.update(hosts=verdict.hosts, stale=[{"worker": s.host, "reason": s.reason} for s in verdict.stale],
                      msg=verdict.msg, failed=bool(verdict.stale))
        return result
