# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a Makefile target of a deployed job on a worker (ops/job_target.py; docs: plugins/modules/deploy_job.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils.adapter import MaandAction
from ansible_collections.maand.core.plugins.plugin_utils import ops

ARGUMENT_SPEC = adapter.spec_for("deploy_job")


class ActionModule(MaandAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = True

    def act(self, result, args, task_vars):
        request = ops.job_target.TargetRequest(
            args["bucket_id"], args["job"], args["target"], task_vars.get("inventory_hostname"), args["version"],
            bucket=task_vars.get("maand_bucket_dir"),
            spec=((task_vars.get("maand_catalog_jobs") or {}).get(args["job"]) or {}).get("spec"),
            timeout=args["timeout"], tail=args["tail"], check_mode=bool(self._task.check_mode),
            python=self.worker_python(task_vars), run_id=args["run_id"])
        result.update(ops.job_target.run(request, self))  # first contact installs the agent
        return result
