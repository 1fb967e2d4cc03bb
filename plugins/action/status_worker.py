# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one worker holds of its jobs, in one agent round trip (docs: plugins/modules/status_worker.py)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils.adapter import MaandAction
from ansible_collections.maand.core.plugins.plugin_utils import deploy
from ansible_collections.maand.core.plugins.plugin_utils import ops

ARGUMENT_SPEC = adapter.spec_for("status_worker")


class ActionModule(MaandAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = True

    def act(self, result, args, task_vars):
        host = task_vars.get("inventory_hostname")
        # a StatusError fails the task in MaandAction.run
        worker_ops = ops.status.worker_ops(task_vars.get("maand_bucket_dir"), host, task_vars.get("maand_allocations") or [],
                                           args["jobs"], task_vars.get("maand_catalog_jobs"))
        result.update(changed=False, host=host)
        if not worker_ops:
            result.update(answered=True, jobs={}, msg="no allocation on %s" % host)
            return result
        env_errors = {op["job"]: op.pop("env_error") for op in worker_ops if "env_error" in op}
        data = deploy.step_request(task_vars.get("maand_bucket_id"), worker_ops, timeout=args["timeout"], tail=5,
                                   slots=args["slots"])
        rc, stdout, stderr = deploy.call_agent(self, self.worker_python(task_vars), data)
        answer, err = deploy.parse_output(stdout, stderr, rc, "status of %s" % host)
        if err:
            result.update(failed=True, msg=err)
            return result
        jobs = {}
        for outcome in answer.get("ops") or []:
            keys = ("version", "deployed_at", "pending", "running", "note", "ok", "msg", "reverted_from",
                    "rolled_back_from", "unpromoted")
            entry = {k: outcome.get(k) for k in keys}
            entry["output_tail"] = (outcome.get("output_tail") or [])[-3:]
            if outcome.get("id") in env_errors:
                entry["note"] = env_errors[outcome["id"]]
            jobs[outcome.get("id")] = entry
        result.update(answered=True, jobs=jobs, msg="%d job(s)" % len(jobs))
        return result
