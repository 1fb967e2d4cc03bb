# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of one deploy step: fold the previous step (results, health gates), write this
step's agent requests (docs: plugins/modules/deploy_step.py)."""

from __future__ import annotations

from ansible import constants as C
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils import _action_support, _deploy_gate, _deploy_run, _hook_deploy

display = Display()


ARGUMENT_SPEC = {
    "run_dir": {"type": "path", "required": True},
    "step": {"type": "raw", "required": True},
}


def gate_runner(hostvars):
    def passed(gate):
        display.display("health gate passed: %s on %s" % (gate["job"], ", ".join(gate["hosts"])), color="green")
    return _deploy_gate.runner(_deploy_gate.host_addresses(hostvars), passed)


def hook_callbacks(run_dir, task_vars, probes, templar):
    """The gate runner and after_results with the bucket's job commands (_hook_deploy)."""
    return _hook_deploy.callbacks_for_run(run_dir, task_vars.get("hostvars") or {}, probes,
                                          _action_support.int_var(templar, task_vars, "maand_hook_timeout", 600),
                                          _action_support.int_var(templar, task_vars, "maand_deploy_output_tail", 20),
                                          lambda msg: display.display("hook: " + msg), _action_support.ssh_args(C.config, task_vars))


class ActionModule(ActionBase):
    """Any exception here fails the task, and with it the run (the role's finish refuses an unfolded state)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        hostvars = task_vars.get("hostvars") or {}
        try:
            key = _deploy_run.step_key(args["step"])
            with hook_callbacks(args["run_dir"], task_vars, gate_runner(hostvars), self._templar) as (gate, after):
                hosts, failures = _deploy_run.advance(args["run_dir"], key, gate, after)
        except (_deploy_run.RunError, ValueError, OSError) as exc:
            result.update(failed=True, changed=False, msg="deploy step %s: %s" % (args["step"], exc))
            return result
        for msg in failures:
            display.display("FAILED: %s" % msg, color="red", stderr=True)
        result.update(changed=False, hosts=hosts, step=key, new_failures=failures,
                      msg="step %s: %d host(s) act" % (key, len(hosts)))
        return result
