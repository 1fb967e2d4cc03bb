# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand run_command on the controller: choose the workers, report their output
(docs: plugins/modules/run_command.py)."""

from __future__ import annotations

from ansible import context
from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs
from ansible_collections.maand.core.plugins.plugin_utils.ops import run_command as _run_command

display = Display()

ARGUMENT_SPEC = specs.spec_for("run_command")


def _labels(hostvars, host):
    """The worker's labels from the inventory (maand_worker), [] when unknown."""
    try:
        return list((hostvars[host].get("maand_worker") or {}).get("labels") or ())
    except Exception:  # pylint: disable=broad-exception-caught
        return []


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        hostvars = (task_vars or {}).get("hostvars") or {}
        result["changed"] = False
        try:
            cmd = _run_command.check_command(args["cmd"])
            if args["step"] == "select":
                _run_command.check_split(context.CLIARGS.get("extra_vars") or ())
                workers = {h: _labels(hostvars, h) for h in args["catalog_workers"]}
                chosen = _run_command.select(workers, args["hosts"], _run_command.split_names(args["workers"]),
                                             _run_command.split_names(args["labels"]))
                result.update(hosts=chosen, msg="running `%s` on %s" % (cmd, ", ".join(chosen)))
                return result
        except _run_command.RunCommandError as exc:
            result.update(failed=True, msg="maand.core.run_command: %s" % exc)
            return result
        if self._task.check_mode:
            result["msg"] = "check mode: `%s` was not run" % cmd
            return result
        outcomes = [_run_command.outcome(h, args["answers"].get(h)) for h in args["hosts"]]
        lines, problems = _run_command.report(outcomes, cmd)
        display.display("\n".join(lines))
        result.update(changed=any(o.status != "not run" for o in outcomes), lines=lines, problems=problems,
                      outcomes=[o.__dict__ for o in outcomes])
        if problems:
            result.update(failed=True, msg="run_command failed on %d worker(s):\n  %s" % (len(problems), "\n  ".join(problems)))
        else:
            result["msg"] = lines[-1]
        return result
