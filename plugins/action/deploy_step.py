# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of one deploy step: fold the previous step (results, health gates), write this
step's agent requests (docs: plugins/modules/deploy_step.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import deploy


ARGUMENT_SPEC = adapter.spec_for("deploy_step")


class ActionModule(ControllerAction):
    """Any exception here fails the task, and with it the run (the role's finish refuses an unfolded state)."""

    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = False

    def act(self, result, args, task_vars):
        stepped = deploy.step(args["run_dir"], args["step"], adapter.deploy_controller(self._templar, task_vars))
        result.update(stepped.as_result())
        return result
