# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tail of a job's own logs/ on each of its workers, one section per worker (docs: plugins/modules/job_logs.py).
Read-only."""

from __future__ import annotations

from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import catalog
from ansible_collections.maand.core.plugins.plugin_utils import ops

display = Display()

ARGUMENT_SPEC = adapter.spec_for("job_logs")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = True

    def act(self, result, args, task_vars):
        result["changed"] = False
        try:
            if args["step"] == "select":
                chosen = ops.job_logs.select(catalog.read_catalog(args["bucket"]) or {}, args["job"].strip(),
                                             args["workers"], args["lines"], args["hosts"])
                result.update(hosts=list(chosen.hosts), argv=list(chosen.argv), lines=chosen.lines,
                              msg="reading the last %d line(s) of job %s's logs/ on %s"
                              % (chosen.lines, args["job"], ", ".join(chosen.hosts)))
                return result
        except ops.job_logs.JobLogsError as exc:
            result.update(failed=True, msg="maand.core.job_logs: %s" % exc)
            return result
        lines, problems = ops.job_logs.report(args["job"], args["hosts"], args["answers"])
        display.display("\n".join(lines))
        result.update(lines=lines, problems=problems, msg=lines[-1])
        if problems:
            result.update(failed=True, msg="maand.core.job_logs: %s" % "; ".join(problems))
        return result
