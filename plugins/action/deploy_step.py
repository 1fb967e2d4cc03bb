# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of one deploy step: fold the previous step (results, health gates), write this
step's agent requests (docs: plugins/modules/deploy_step.py)."""

from __future__ import annotations

from ansible import constants as C
from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs
from ansible_collections.maand.core.plugins.plugin_utils.adapter import support as _action_support
from ansible_collections.maand.core.plugins.plugin_utils.deploy import progress as _deploy_progress, run as _deploy_run

display = Display()


ARGUMENT_SPEC = specs.spec_for("deploy_step")


def watched():
    """Whether the maand.core.deploy stdout callback shows this run (it reads the progress file, so
    the task's own lines go there instead of the screen, where they would break its live line)."""
    return C.DEFAULT_STDOUT_CALLBACK in ("maand.core.deploy", "deploy")


def sayer(run_dir):
    """say(msg, color=None): a line for the operator, on the screen or (watched) in the progress file."""
    writer = _deploy_progress.Writer(run_dir)

    def say(msg, color=None):
        if watched():
            writer.say(msg, color)
        else:
            display.display(msg, color=color)
    return say


def gate_runner(run_dir, task_vars):
    """The health gates of the run: probes with progress records, status tails when one fails."""
    say = sayer(run_dir)

    def passed(gate):
        if not watched():  # the callback shows the pass from the progress record
            say("health gate passed: %s on %s" % (gate["job"], ", ".join(gate["hosts"])), "green")
    return _deploy_progress.runner_for_run(run_dir, task_vars.get("hostvars") or {},
                                           _action_support.ssh_args(C.config, task_vars), passed)


def hook_callbacks(run_dir, task_vars, probes, templar):
    """The gate runner and after_results with the bucket's job commands (_hook_deploy)."""
    say = sayer(run_dir)
    return _deploy_progress.callbacks_for_run(run_dir, task_vars.get("hostvars") or {}, probes,
                                          _action_support.int_var(templar, task_vars, "maand_hook_timeout", 600),
                                          _action_support.int_var(templar, task_vars, "maand_deploy_output_tail", 20),
                                          lambda msg: say("hook: " + msg), _action_support.ssh_args(C.config, task_vars))


class ActionModule(ControllerAction):
    """Any exception here fails the task, and with it the run (the role's finish refuses an unfolded state)."""

    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = False

    def act(self, result, args, task_vars):
        try:
            key = _deploy_run.step_key(args["step"])
            with hook_callbacks(args["run_dir"], task_vars, gate_runner(args["run_dir"], task_vars),
                                self._templar) as (gate, after):
                hosts, failures = _deploy_run.advance(args["run_dir"], key, gate, after)
        except (_deploy_run.RunError, ValueError, OSError) as exc:
            result.update(failed=True, changed=False, msg="deploy step %s: %s" % (args["step"], exc))
            return result
        if not watched():  # the callback prints new_failures from the result
            for msg in failures:
                display.display("FAILED: %s" % msg, color="red", stderr=True)
        result.update(changed=False, hosts=hosts, step=key, new_failures=failures,
                      msg="step %s: %d host(s) act" % (key, len(hosts)))
        return result
