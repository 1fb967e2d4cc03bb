# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand gc on the controller: plan, then commit the catalog and KV part (docs: plugins/modules/gc.py).

The workers' answers come in as arguments ({host: registered result}), as status does; the work is
ops/gc.py's (plan_bucket, commit)."""

from __future__ import annotations

import time

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import catalog
from ansible_collections.maand.core.plugins.plugin_utils import ops
from ansible_collections.maand.core.plugins.plugin_utils import kv


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = adapter.spec_for("gc")

    def act(self, result, args, task_vars):
        result["changed"] = False
        try:
            if args["step"] == "targets":
                named, forget = ops.gc.targets(args["bucket"], args["departed"], args["forget"])
                result.update(departed=list(named), forget=list(forget))
            elif args["step"] == "plan":
                self._plan(args, result, task_vars)
            else:
                self._commit(args, result, task_vars)
        except (ops.gc.GCError, catalog.CatalogError, kv.KVStoreError, OSError) as exc:
            result.update(failed=True, msg="maand.core.gc: %s" % exc)
        return result

    def _plan(self, args, result, task_vars=None):
        plan = ops.gc.plan_bucket(args["bucket"], args["states"], args["hosts"], time.time(), args["retain_days"],
                                  args["departed"], args["forget"])
        lines = plan.lines()
        title = "gc plan (check mode: nothing is deleted)" if self._task.check_mode else "gc plan"
        adapter.publish(result, ops.report.Report(
            "gc_plan", summary="%d item(s) to delete" % ops.gc.count(plan), format=adapter.output_format(task_vars),
            lines=["%s, bucket %s:" % (title, plan.bucket_id)] + ["  " + line for line in lines],
            counts={"items": ops.gc.count(plan)}, data={"plan": plan.as_dict()}))
        result.update(plan=plan.as_dict(), delete=plan.paths_by_host(), trees=plan.trees(), lines=lines)

    def _commit(self, args, result, task_vars=None):
        planned = ops.gc.Plan.from_dict(args["plan"] or {})
        fmt = adapter.output_format(task_vars)
        if self._task.check_mode:
            result.update(plan=planned.as_dict(), problems=list(planned.problems))
            _finish(result, planned.problems, "check mode: nothing was deleted (%d item(s) would be)" % ops.gc.count(planned),
                    fmt, [], "check")
            return
        outcome = ops.gc.commit(args["bucket"], planned, args["states"], args["deleted"], args["hosts"])
        lines = outcome.done.lines(done=True)
        result.update(changed=outcome.changed, plan=outcome.done.as_dict(), lines=lines, problems=outcome.problems)
        _finish(result, outcome.problems, "gc: %d item(s) deleted" % ops.gc.count(outcome.done), fmt,
                ["gc done, bucket %s:" % outcome.done.bucket_id] + ["  " + line for line in lines],
                "changed" if outcome.changed else "ok")


def _finish(result, problems, summary, fmt, lines, outcome):
    """The summary as the task's msg and the last line of its report (the callback prints each problem once)."""
    count = ops.gc.count(ops.gc.Plan.from_dict(result.get("plan") or {}))
    report = ops.report.Report("gc", outcome="failed" if problems else outcome, summary=summary, format=fmt,
                               lines=list(lines) + ([] if problems else [summary]),
                               counts={"items": count, "problems": len(problems)},
                               data={"plan": result.get("plan"), "problems": list(problems)})
    adapter.publish(result, report)
    if problems:
        result.update(failed=True, msg="%s, but gc met %d problem(s):\n  %s" % (
            summary, len(problems), "\n  ".join(problems)))
    else:
        result["msg"] = summary
