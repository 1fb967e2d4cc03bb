# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compute (and in check/diff mode show) the deploy plan on the controller (docs: plugins/modules/deploy_plan.py)."""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils import (
    _catalog,
    _deploy_files,
    _deploy_lock,
    _deploy_plan,
    _deploy_run,
    _fingerprint,
    _jobspec_deploy,
)

display = Display()

ARGUMENT_SPEC = {
    "bucket": {"type": "path", "required": True},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "jobs": {"type": "raw"},
    "force": {"type": "bool", "default": False},
    "sync_only": {"type": "bool", "default": False},
    "state_var": {"type": "str", "default": "deploy_state_read"},
    "adopt_bucket_id": {"type": "str", "default": ""},
    "slots": {"type": "int", "default": 0},
}


def _host_state(hostvars, host, var):
    try:
        hv = hostvars[host]
        reg = hv.get(var)
    except Exception:  # pragma: no cover - hostvars of an unknown host
        reg = None
    if not isinstance(reg, dict):
        return {"reachable": False, "error": "its state was not read (host skipped or failed earlier)"}
    if reg.get("unreachable"):
        return {"reachable": False, "error": (reg.get("msg") or "unreachable").strip().splitlines()[-1]}
    if reg.get("failed") or not isinstance(reg.get("state"), dict):
        return {"reachable": False, "error": (reg.get("msg") or "state read failed").strip()}
    state = dict(reg["state"])
    if state.get("reachable") is False:  # deploy_state reports a worker it could not read
        return {"reachable": False, "error": str(state.get("error") or "state read failed")}
    state["reachable"] = True
    return state


def _with_environments(catalog, content):
    """Expand every job spec's environment against the controller's environment and fold its
    digests into the job's content (a changed value restarts the job); errors name job and variable."""
    errors = []
    for name, spec in sorted(_jobspec_deploy.specs_of(catalog).items()):
        if name not in content:
            continue
        try:
            env = _jobspec_deploy.expand(name, spec, os.environ.get)
        except _jobspec_deploy.EnvError as exc:
            errors.append(str(exc))
            continue
        content[name] = _jobspec_deploy.with_env(content[name], catalog["bucket_id"], name, env)
    return errors


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def _fail(self, result, bucket, msg, plan=None):
        # a refused deploy must not keep the bucket locked until the playbook exits
        if not self._task.check_mode:
            try:
                _deploy_lock.release(bucket, os.getppid())
            except OSError:
                pass
        result.update(failed=True, changed=False, msg=msg)
        if plan is not None:
            result["plan"] = plan
            for line in plan["lines"]:
                display.display(line, color="red" if line.startswith(("ERROR", "FAILED")) else None)
        return result

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        bucket = os.path.abspath(os.path.expanduser(args["bucket"]))
        try:
            catalog = _catalog.read_catalog(bucket)
        except _catalog.CatalogError as exc:
            return self._fail(result, bucket, "%s: %s" % (bucket, exc))
        if catalog is None:
            return self._fail(result, bucket, "%s/data/catalog.json does not exist: run `ansible-playbook -i %s/maand.yml "
                              "maand.core.build` first" % (bucket, bucket))
        try:  # the inventory refuses a stale catalog too, but preview: true or a cached inventory gets past it
            changed = _fingerprint.stale(bucket, catalog)
        except OSError as exc:
            return self._fail(result, bucket, "%s: cannot read the workspace to compare it with the catalog: %s" % (bucket, exc))
        if changed:
            return self._fail(result, bucket, "ErrStaleCatalog: %s/data/catalog.json: workspace changed since the last build "
                              "(%s); nothing was changed (fix: run ansible-playbook maand.core.build -e maand_bucket=%s)"
                              % (bucket, ", ".join(changed[:10]), bucket))
        if args["adopt_bucket_id"]:  # written by maand.core.deploy_lock (not in check mode)
            catalog = dict(catalog, bucket_id=args["adopt_bucket_id"])
        hostvars = task_vars.get("hostvars") or {}
        hosts = args["hosts"]
        jobs_filter, errors = _deploy_plan.parse_jobs_filter(args["jobs"], [j["name"] for j in catalog.get("jobs", [])])
        if errors:
            return self._fail(result, bucket, "; ".join(errors))
        content = {}
        for job in catalog.get("jobs", []):
            if job.get("removed") or (jobs_filter is not None and job["name"] not in jobs_filter):
                continue
            path = os.path.join(bucket, job.get("path") or os.path.join("workspace", "jobs", job["name"]))
            try:
                content[job["name"]] = _deploy_files.hash_tree(path)
            except _deploy_files.ContentError as exc:
                content[job["name"]] = {"error": str(exc)}
        env_errors = _with_environments(catalog, content)
        if env_errors:
            return self._fail(result, bucket, "deploy refused, nothing was changed:\n  " + "\n  ".join(env_errors))
        states = {h: _host_state(hostvars, h, args["state_var"]) for h in hosts}
        try:
            plan = _deploy_plan.compute_plan(catalog, content, states, hosts,
                                             {"jobs": jobs_filter, "force": args["force"], "sync_only": args["sync_only"],
                                              "adopt_bucket_id": args["adopt_bucket_id"]})
        except _deploy_plan.PlanError as exc:
            return self._fail(result, bucket, str(exc))
        if plan["errors"]:
            return self._fail(result, bucket, "deploy refused, nothing was changed:\n  " + "\n  ".join(plan["errors"]),
                              plan=plan)
        workers = {w["host"]: w for w in catalog.get("workers", [])}
        plan["lines"].extend(_jobspec_deploy.attach(plan, _jobspec_deploy.specs_of(catalog), workers,
                                                    _jobspec_deploy.load_history(bucket), args["slots"]))
        work = plan["has_work"] or bool(plan["prune"])
        run_dir, segments = "", []
        if not self._task.check_mode:
            try:
                run_dir = _deploy_run.new_run(bucket, plan)
            except (OSError, _deploy_run.RunError) as exc:
                return self._fail(result, bucket, "cannot create the deploy run folder under %s/data: %s" % (bucket, exc))
            segments = _deploy_run.segments(plan, len(hosts))
        result.update(changed=bool(self._task.check_mode and work), plan=plan, bucket=bucket,
                      msg=plan["lines"][0], run_dir=run_dir, segments=segments)
        if self._task.diff:
            result["diff"] = {"prepared": "\n".join(plan["lines"]) + "\n"}
        else:
            for line in plan["lines"]:
                display.display(line, color="yellow" if work and line.startswith("  ") and " skip " not in line else None)
        return result
