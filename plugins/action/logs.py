# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bucket logs with maand's filters, or the past deploy runs from their records, as maand's `maand logs show`
(docs: plugins/modules/logs.py). Read-only."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import ops

ARGUMENT_SPEC = adapter.spec_for("logs")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        request = ops.logs.Request(run=args["run"].strip(), jobs=ops.cat.split_names(args["jobs"]),
                                   workers=ops.cat.split_names(args["workers"]), limit=args["limit"], format=args["format"],
                                   phase=args["phase"].strip(), event=args["event"].strip(), tail=args["tail"])
        try:
            shown = ops.logs.logs(args["bucket"], request)
        except ops.logs.LogsError as exc:
            result.update(failed=True, changed=False, msg="maand.core.logs: %s" % exc)
            return result
        if request.of_lines():
            adapter.publish(result, ops.report.Report(
                "logs", summary=shown.msg, lines=list(shown.lines), format="json" if request.format == "json" else "table",
                data={"lines": shown.data["lines"]}, counts={"lines": len(shown.data["lines"])}))
            result.update(changed=False, bucket=args["bucket"], msg=shown.msg, lines=shown.data["lines"])
            return result
        data = shown.data if request.run else {"runs": shown.data["runs"]}
        adapter.publish(result, ops.report.Report(
            "logs", summary=shown.msg, lines=list(shown.lines), format="json" if request.format == "json" else "table",
            data=data, counts={"runs": len(data.get("runs") or [])} if not request.run else {}))
        result.update(changed=False, bucket=args["bucket"], msg=shown.msg,
                      **({"run": shown.data} if request.run else {"runs": shown.data["runs"]}))
        return result
