# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""End of a deploy: drop cleaned removed rows from the catalog, release the lock, report
(docs: plugins/modules/deploy_finish.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import deploy
from ansible_collections.maand.core.plugins.plugin_utils import ops


ARGUMENT_SPEC = adapter.spec_for("deploy_finish")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        request = deploy.FinishRequest(args["bucket"], args["plan"], run_dir=args["run_dir"],
                                       release=args["release"], check_mode=bool(self._task.check_mode),
                                       run_pid=adapter.run_pid())
        result.update(deploy.finish(request, adapter.deploy_controller(self._templar, task_vars)).as_result())
        verdict = result.get("verdict") or []
        fmt = adapter.output_format(task_vars)
        # the verdict for -e maand_format=json and AWX; the table itself is printed by deploy.finish or the callback
        adapter.publish(result, ops.report.Report(
            "deploy", outcome="failed" if result.get("failed") else ("check" if request.check_mode else "ok"),
            summary=result.get("verdict_line") or result.get("summary") or "", format=fmt,
            counts=ops.report.counted(str(v.get("result")) for v in verdict),
            data={"verdict": verdict, "workers": result.get("workers") or {}, "problems": result.get("problems") or [],
                  "plan_summary": result.get("summary") or ""}))
        return result
