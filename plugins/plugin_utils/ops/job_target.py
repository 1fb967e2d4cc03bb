# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``maand.core.job``'s make target on one worker (the deploy_job action; pure, no Ansible imports).

``run`` checks the target and the job spec's environment (an unknown variable refuses before anything runs,
in check mode too), gives make the allocation's environment as the deploy does (``allocation_env``:
ALLOCATION_*, JOB, versions, ports) and the job spec's run fields, and sends the one op to the worker agent
through a deploy/remote.Shell (first contact installs the agent).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ..bucket import RunLog
from ..bucket.job_checks import target_problem
from ..catalog import catalog
from .. import jobspec
from ..deploy import plan, remote


@dataclasses.dataclass
class TargetRequest:
    """One make target of one job on one worker (the deploy_job task's arguments and variables)."""

    bucket_id: str
    job: str
    target: str
    host: str
    version: str
    bucket: str = ""  # the bucket folder (maand_bucket_dir): the allocation's environment from its catalog
    spec: Any = None  # the job's spec (maand_catalog_jobs[job].spec), when it has one
    timeout: int | None = None
    tail: int = 20
    check_mode: bool = False
    python: str = "python3"
    run_id: str = ""  # the verb's run in the bucket logs (shared by its workers); "" = a run of its own


def allocation_env(bucket, job, host, version):
    """(env, error): an allocation's environment as the deploy gives it (ALLOCATION_*, JOB, versions, ports),
    for maand.core.job's make targets; without a bucket only the versions."""
    if not bucket:
        return {"CURRENT_VERSION": version, "NEW_VERSION": version}, None
    try:
        cat = catalog.read_catalog(bucket)
    except catalog.CatalogError as exc:
        return None, "%s: %s" % (bucket, exc)
    if cat is None:
        return None, "%s/data/catalog.json does not exist: run maand.core.build first" % bucket
    return plan.catalog_allocation_env(cat, job, host, version, version), None


def _refused(msg):
    return {"failed": True, "msg": "%s; nothing was run" % msg}


def run(req: TargetRequest, shell: remote.Shell) -> dict:
    """The task's result of make req.target for req.job on req.host (check mode: only ``status`` runs)."""
    target = req.target
    problem = target_problem(target, None)
    if problem:
        return _refused(problem)
    spec = req.spec if isinstance(req.spec, dict) else None
    if spec is not None:
        try:
            jobspec.expand(req.job, spec, os.environ.get)
        except jobspec.EnvError as exc:
            return _refused(exc)
    if req.check_mode and target != "status":
        return {"changed": True, "skipped": False, "msg": "check mode: would run make %s" % target}
    env, err = allocation_env(req.bucket, req.job, req.host, req.version)
    if err:
        return _refused(err)
    op = {"id": "%s@%s" % (req.job, req.host), "kind": "run", "job": req.job,
          "host": req.host, "target": target, "env": env, "promote_now": False}
    if spec is not None:  # the job spec's environment and run fields, as the deploy runs them
        op["spec"] = jobspec.op_spec(spec)
        try:
            op = jobspec.runtime_op(op, os.environ.get)
        except jobspec.EnvError as exc:
            return _refused(exc)
    data = remote.step_request(req.bucket_id, [op], timeout=req.timeout, tail=req.tail)
    rc, stdout, stderr = remote.call_agent(shell, req.python, data)
    answer, err = remote.parse_output(stdout, stderr, rc, "make %s for %s" % (target, op["id"]))
    if err:
        return {"failed": True, "msg": err}
    answer = (answer.get("ops") or [{"ok": False, "msg": answer.get("msg") or "no answer for the operation"}])[0]
    warning = _log(req, answer)
    tail = answer.get("output_tail") or []
    out = {"changed": target != "status" and bool(answer.get("changed")), "output": tail, "target": target}
    if not answer.get("ok"):
        out.update(failed=True, rc=answer.get("rc"), msg=(answer.get("msg") or "failed") + (
            "\n--- last lines of output ---\n" + "\n".join(tail) if tail else ""))
    else:
        out["msg"] = "\n".join(tail) if target == "status" else "make %s ok" % target
    if warning:
        out["warnings"] = [warning]
    return out


def _log(req: TargetRequest, answer: dict) -> str:
    """The make target in the bucket logs (maand's jobcontrol: maand=job, phase job_control); "" or why not."""
    if not req.bucket:
        return ""
    try:
        RunLog.open(req.bucket, "job", run_id=req.run_id).agent_op(req.host, req.job, "job_control", answer)
    except OSError as exc:
        return "the bucket logs (%s/logs) could not be written: %s" % (req.bucket, exc)
    finally:
        answer.pop("commands", None)
    return ""
