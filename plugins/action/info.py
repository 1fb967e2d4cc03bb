# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A summary of a bucket, as maand's `maand info` (docs: plugins/modules/info.py). Read-only."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import ops
from ansible_collections.maand.core.plugins.plugin_utils.catalog import stale_note

ARGUMENT_SPEC = adapter.spec_for("info")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        try:
            found = ops.info.info(args["bucket"])
        except ops.cat.CatError as exc:
            result.update(failed=True, changed=False, msg="maand.core.info: %s" % exc)
            return result
        data = found.to_dict()
        msg = "bucket %s: %d workers, %d jobs, %d allocations, update_seq %d" % (
            found.bucket_id, found.workers, found.jobs, found.allocations["total"], found.update_seq)
        adapter.publish(result, ops.report.Report(
            "info", summary=msg, lines=found.table().lines(), data=data, format=args["format"],
            counts={"workers": found.workers, "jobs": found.jobs, "allocations": found.allocations["total"]}))
        adapter.warn_stale(result, args["bucket"], task_vars, stale_note)  # catalog/freshness.py: info is read-only
        result.update(changed=False, info=data, msg=msg)
        return result
