# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Move a bucket's state between its folder and a PostgreSQL store (docs: plugins/modules/state.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import bucket
from ansible_collections.maand.core.plugins.plugin_utils import ops

ARGUMENT_SPEC = adapter.spec_for("state")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        target = args["to"].strip()
        shown = target if target == ops.state_move.FILES else bucket.redact(target)
        try:
            moved = ops.state_move.move(args["bucket"], target, force=args["force"], check_mode=bool(self._task.check_mode))
        except ops.state_move.MoveError as exc:
            result.update(failed=True, changed=False, msg="state not moved: %s" % exc)
            return result
        verb = "copied" if moved.written else "check mode: would copy"
        next_step = ("now set state_url = \"%s\" in maand.conf (or MAAND_STATE_URL) on every controller; data/ keeps "
                     "the old files: remove them (and any data/ files from git)" % shown
                     if target != ops.state_move.FILES else
                     "now remove state_url from maand.conf (and unset MAAND_STATE_URL): the bucket folder is the store")
        result.update(changed=moved.written, source=moved.source, target=shown, documents=moved.documents,
                      runs=moved.runs, records=moved.records, msg="%s %s from %s to %s (%s)%s" % (
                          verb, ", ".join(moved.documents), moved.source, shown, "; ".join(moved.lines),
                          "; " + next_step if moved.written else ""))
        # the playbook's next task prints the msg: the report is for -e maand_format=json and AWX
        adapter.publish(result, ops.report.Report(
            "state", outcome="changed" if moved.written else "ok", summary=result["msg"],
            counts={"documents": len(moved.documents), "runs": moved.runs, "records": moved.records},
            data={"source": moved.source, "target": shown, "documents": list(moved.documents),
                  "written": bool(moved.written)}))
        return result
