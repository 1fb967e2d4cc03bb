# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a Makefile target of a deployed job on a worker (docs: plugins/modules/deploy_job.py)."""

from __future__ import annotations


import os

from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs
from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import MaandAction
from ansible_collections.maand.core.plugins.plugin_utils import jobspec as _jobspec
from ansible_collections.maand.core.plugins.plugin_utils.deploy import remote as _remote, service as _service
from ansible_collections.maand.core.plugins.plugin_utils.bucket.job_checks import target_problem

ARGUMENT_SPEC = specs.spec_for("deploy_job")


class ActionModule(MaandAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = True

    def act(self, result, args, task_vars):
        target = args["target"]
        problem = target_problem(target, None)
        if problem:
            result.update(failed=True, msg="%s; nothing was run" % problem)
            return result
        spec = ((task_vars.get("maand_catalog_jobs") or {}).get(args["job"]) or {}).get("spec")
        if isinstance(spec, dict):  # an unknown variable refuses before anything runs, in check mode too
            try:
                _jobspec.expand(args["job"], spec, os.environ.get)
            except _jobspec.EnvError as exc:
                result.update(failed=True, msg="%s; nothing was run" % exc)
                return result
        if self._task.check_mode and target != "status":
            result.update(changed=True, skipped=False, msg="check mode: would run make %s" % target)
            return result
        host = task_vars.get("inventory_hostname")
        env, err = _service.allocation_env(task_vars.get("maand_bucket_dir"), args["job"], host, args["version"])
        if err:
            result.update(failed=True, msg="%s; nothing was run" % err)
            return result
        op = {"id": "%s@%s" % (args["job"], host), "kind": "run", "job": args["job"],
              "host": host, "target": target, "env": env, "promote_now": False}
        if isinstance(spec, dict):  # the job spec's environment and run fields, as the deploy runs them
            op["spec"] = _jobspec.op_spec(spec)
            try:
                op = _jobspec.runtime_op(op, os.environ.get)
            except _jobspec.EnvError as exc:
                result.update(failed=True, msg="%s; nothing was run" % exc)
                return result
        data = _remote.step_request(args["bucket_id"], [op], timeout=args["timeout"], tail=args["tail"])
        res = self.call_agent(self.worker_python(task_vars), data)  # first contact installs the agent
        answer, err = _remote.parse_output(res.get("stdout"), res.get("stderr"), res.get("rc"),
                                                  "make %s for %s" % (target, op["id"]))
        if not err:
            answer = (answer.get("ops") or [{"ok": False, "msg": answer.get("msg") or "no answer for the operation"}])[0]
        if err:
            result.update(failed=True, msg=err)
            return result
        tail = answer.get("output_tail") or []
        result.update(changed=target != "status" and bool(answer.get("changed")), output=tail, target=target)
        if not answer.get("ok"):
            result.update(failed=True, rc=answer.get("rc"), msg=(answer.get("msg") or "failed") + (
                "\n--- last lines of output ---\n" + "\n".join(tail) if tail else ""))
        else:
            result["msg"] = "\n".join(tail) if target == "status" else "make %s ok" % target
        return result
