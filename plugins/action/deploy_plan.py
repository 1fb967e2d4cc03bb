# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compute (and in check/diff mode show) the deploy plan on the controller (docs: plugins/modules/deploy_plan.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils.adapter import warn_unknown_extra_vars
from ansible_collections.maand.core.plugins.plugin_utils import deploy


ARGUMENT_SPEC = adapter.spec_for("deploy_plan")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        if not (args["target"] and task_vars.get("maand_job")):  # maand.core.job checked its own extra vars
            warn_unknown_extra_vars(self._loader)
        hostvars = task_vars.get("hostvars") or {}
        states = {h: adapter.worker_state(hostvars, h, args["state_var"]) for h in args["hosts"]}
        request = deploy.PlanRequest(
            args["bucket"], args["hosts"], states, jobs=args["jobs"], force=args["force"],
            sync_only=args["sync_only"], adopt_bucket_id=args["adopt_bucket_id"], slots=args["slots"],
            rollback=args["rollback"], promote=args["promote"], plan_hash=args["plan_hash"], check_mode=bool(self._task.check_mode),
            target=args["target"], target_workers=args["target_workers"],
            diff=bool(self._task.diff), run_pid=adapter.run_pid(), slice=args["slice"])
        result.update(deploy.prepare(request, adapter.deploy_controller(self._templar, task_vars)).as_result())
        return result
