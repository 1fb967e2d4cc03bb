# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one worker holds of its jobs, in one agent round trip (docs: plugins/modules/status_worker.py)."""

from __future__ import annotations

import os


from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import MaandAction
from ansible_collections.maand.core.plugins.plugin_utils.build import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.deploy import remote as _deploy_remote, jobspec_deploy as _jobspec_deploy
from ansible_collections.maand.core.plugins.plugin_utils.ops import status as _status

ARGUMENT_SPEC = {
    "jobs": {"type": "list", "elements": "str", "default": []},
    "timeout": {"type": "int", "default": 60},
    "slots": {"type": "int", "default": 4},
}


def _spec_op(catalog_jobs):
    """op -> op with the job spec's environment and run fields, as the deploy runs make."""
    def add(op, job):
        spec = ((catalog_jobs or {}).get(job) or {}).get("spec")
        if not isinstance(spec, dict):
            return op
        op["spec"] = _jobspec_deploy.op_spec(spec)
        try:
            return _jobspec_deploy.runtime_op(op, os.environ.get)
        except _jobspec_deploy.EnvError as exc:  # make status would not get its environment: do not run it
            op = {k: v for k, v in op.items() if k != "spec"}
            op.update(target=None, env_error=str(exc))
            return op
    return add


class ActionModule(MaandAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = True

    def _call(self, python, data):
        res = self._low_level_execute_command(_deploy_remote.step_command(python), sudoable=True, in_data=data)
        if res.get("rc") == _deploy_remote.MISSING_AGENT_RC:  # first contact: install the agent, then retry
            self._low_level_execute_command(_deploy_remote.install_command(), sudoable=True,
                                            in_data=_deploy_remote.agent_source())
            res = self._low_level_execute_command(_deploy_remote.step_command(python), sudoable=True, in_data=data)
        return res

    def act(self, result, args, task_vars):
        host = task_vars.get("inventory_hostname")
        bucket = task_vars.get("maand_bucket_dir")
        try:
            catalog = _catalog.read_catalog(bucket) if bucket else None
        except _catalog.CatalogError as exc:
            result.update(failed=True, changed=False, msg="%s: %s" % (bucket, exc))
            return result
        if catalog is None:
            result.update(failed=True, changed=False,
                          msg="%s/data/catalog.json does not exist: run maand.core.build first" % bucket)
            return result
        ops = _status.status_ops(catalog, host, task_vars.get("maand_allocations") or [], args["jobs"],
                                 _spec_op(task_vars.get("maand_catalog_jobs")))
        result.update(changed=False, host=host)
        if not ops:
            result.update(answered=True, jobs={}, msg="no allocation on %s" % host)
            return result
        env_errors = {op["job"]: op.pop("env_error") for op in ops if "env_error" in op}
        data = _deploy_remote.step_request(task_vars.get("maand_bucket_id"), ops, timeout=args["timeout"], tail=5,
                                           slots=args["slots"])
        res = self._call(self.worker_python(task_vars), data)
        answer, err = _deploy_remote.parse_output(res.get("stdout"), res.get("stderr"), res.get("rc"),
                                                  "status of %s" % host)
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
