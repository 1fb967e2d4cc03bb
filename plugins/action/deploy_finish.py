# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""End of a deploy: drop cleaned removed rows from the catalog, release the lock, report
(docs: plugins/modules/deploy_finish.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs
from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.adapter import controller as _controller
from ansible_collections.maand.core.plugins.plugin_utils.deploy import service as _service


ARGUMENT_SPEC = specs.spec_for("deploy_finish")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        request = _service.FinishRequest(args["bucket"], args["plan"], run_dir=args["run_dir"],
                                         release=args["release"], check_mode=bool(self._task.check_mode),
                                         run_pid=_controller.run_pid())
        result.update(_service.finish(request, _controller.controller(self._templar, task_vars)).as_result())
        return result
