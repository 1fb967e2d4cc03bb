# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One worker's part of a deploy step (maand.core.deploy_agent; no Ansible imports).

``apply(call, transport)`` reads the worker's request of the step from the run folder, expands its ops'
job-spec environments once (an op whose expansion fails leaves the request, failed, before anything
reaches the worker), syncs the request's jobs (one rsync for all jobs named after their tree folder, one
more for each other: deploy/rsync.commands) and applies the step with the worker agent:

* the last rsync carries the agent call (its remote command is the agent, the request ahead of rsync's
  stream: deploy/remote.sync_step_path, request_header), one SSH session for the files and the step, once
  the syncs before it went through; an agent that saw the files arrive ran the step: never again;
* otherwise (nothing to sync, an rsync failed, the folded one did not reach the agent) a plain agent call
  (deploy/remote.call_agent, which reinstalls a missing agent).

Ops whose rsync failed fail; files shipped for a later step are done once their rsync is. The answer (or
why there is none) goes into the run folder; the next deploy_step folds it, and writes the measured make
targets of the whole step into data/job_history.json once (deploy/run.fold_in_flight).

The worker is reached through a ``Transport`` (the deploy_agent action implements it with Ansible's
connection and the controller's rsync; tests with a fake).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Protocol

from .. import jobspec
from ..bucket import LogCommand, RunLog, summarize
from . import remote, rsync, run, slices


class Transport(remote.Shell, Protocol):
    """How the controller reaches one worker in a step: exec (deploy/remote.Shell), rsync, rsync_target."""

    def rsync(self, argv: list[str], stdin: bytes | None = None,
              timeout: float | None = None) -> tuple[int | None, str, str]:
        """(rc, stdout, stderr) of an rsync on the controller (rc None: it could not run, stderr says why); stdin:
        what its remote command reads before rsync's stream (deploy/rsync.execute)."""

    def rsync_target(self) -> tuple[str, list[str], bool]:
        """(address, ssh argv, sudo): where rsync connects, the ssh command it connects with (rsync's -e) and
        whether its remote side runs under sudo. Raises when the connection cannot carry rsync."""


def run_rsync(argv: list[str], stdin: bytes | None = None, timeout: float | None = None) -> tuple[int | None, str, str]:
    """Transport.rsync of a transport whose rsync runs on the controller (deploy/rsync.execute)."""
    return rsync.execute(argv, stdin, timeout)


@dataclasses.dataclass
class AgentCall:
    """The deploy_agent task's arguments: which worker (host) in which step of which run, and its python."""

    bucket: str
    run_dir: str
    host: str
    step: Any
    timeout: int | None = None
    tail: int = 20
    verify_host: bool = True
    python: str = "python3"


@dataclasses.dataclass
class Applied:
    """apply()'s outcome: the agent's answer (ops: the controller's outcomes first) or why there is none."""

    host: str
    key: Any
    answer: dict | None = None
    reason: str | None = None
    changed: bool = False
    skipped: bool = False
    log_problem: str = ""

    def bad(self) -> list:
        """The ops and promotions that failed."""
        answer = self.answer or {}
        return ([o for o in answer.get("ops") or [] if not o.get("ok")]
                + [p for p in answer.get("promotions") or [] if not p.get("ok")])

    def as_result(self) -> dict:
        if self.skipped:
            return {"skipped": True, "changed": False, "msg": "nothing to do on %s in step %s" % (self.host, self.key)}
        if self.answer is None:
            return {"changed": False, "failed": False, "msg": "no answer from %s: %s" % (self.host, self.reason),
                    "warnings": ["%s gave no answer in step %s; its operations count as failed: %s"
                                 % (self.host, self.key, self.reason)]}
        ops = self.answer.get("ops") or []
        bad = self.bad()
        changed = self.changed or any(o.get("changed") for o in ops) or bool(self.answer.get("promotions"))
        out = {"changed": changed, "failed": False, "ops": [o.get("id") for o in ops],
               "msg": "%d operation(s) failed (reported by the next step)" % len(bad) if bad else "ok"}
        if self.log_problem:
            out["warnings"] = [self.log_problem]
        return out


def expanded_ops(ops: list, outcomes: list) -> list:
    """The ops with their job spec's environment expanded here, on the controller (the values travel only in
    the request on the agent's stdin), once, before anything reaches the worker: an op whose expansion failed
    leaves the request (its failed outcome appended to ``outcomes``), so its files are not shipped."""
    out = []
    for op in ops:
        try:
            out.append(jobspec.runtime_op(op, os.environ.get))
        except jobspec.EnvError as exc:
            outcomes.append({"id": op["id"], "ok": False, "msg": str(exc)})
    return out


def payload(request: dict, timeout: int | None, tail: int) -> str:
    """The agent's stdin for a worker's request of a step (its ops expanded already: expanded_ops), with the
    worker's slots (how many run ops of different jobs the agent runs side by side)."""
    slots = max([int(op.get("slots") or 1) for op in request["ops"]] or [1])
    return remote.step_request(request["bucket_id"], request["ops"], request["promote"], timeout=timeout, tail=tail,
                               slots=slots)


def apply(call: AgentCall, transport: Transport) -> Applied:
    """The worker's part of step call.step: sync, apply, record (module docstring). Whatever goes wrong on the
    way (unreachable, vanished, broken ssh) leaves no answer: the host's ops fail, the play goes on."""
    key = run.step_key(call.step)
    request = run.read_request(call.run_dir, key, call.host)
    if request is None:
        return Applied(call.host, key, skipped=True)
    outcomes = []
    answer, reason, changed = None, None, False
    ops = {op["id"]: op for op in request["ops"]}
    transport = _Timed(transport)
    try:
        request["ops"] = expanded_ops(request["ops"], outcomes)
        changed, answer, reason = _sync(call, transport, request, outcomes)
        if answer is None and reason is None:
            if request["ops"] or request["promote"]:
                data = payload(request, call.timeout, call.tail)
                rc, stdout, stderr = remote.call_agent(transport, call.python, data)
                answer, reason = remote.parse_output(stdout, stderr, rc, "agent on %s, step %s" % (call.host, key))
            else:
                answer = {"ok": True, "ops": [], "promotions": []}
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # the transport's own errors (an unreachable or vanished worker, broken ssh) are the answer's absence
        answer, reason = None, "%s: %s" % (type(exc).__name__, str(exc).strip()[-500:])
    if answer is not None:
        answer.setdefault("ops", [])
        answer["ops"] = outcomes + answer["ops"]
    problem = write_log(call, request, ops, transport.rsyncs, answer)
    done(call.run_dir, key, call.host, answer, reason)
    return Applied(call.host, key, answer, reason, changed, log_problem=problem)


class _Timed:
    """The transport, keeping each rsync it ran (argv, began, seconds, rc, stdout, stderr) for the bucket logs."""

    def __init__(self, inner):
        self.inner, self.rsyncs, self.ids = inner, [], []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def rsync(self, argv, stdin=None, timeout=None):
        began = time.time()
        rc, stdout, stderr = self.inner.rsync(argv, stdin, timeout) if stdin is not None else \
            self.inner.rsync(argv, timeout=timeout)
        self.rsyncs.append((self.ids, argv, began, time.time() - began, rc, stdout, stderr))
        return rc, stdout, stderr


def phase_of(op: dict) -> str:
    """maand's phase of a deploy op's make target: stops of disabled and removed allocations reconcile, the
    rest (start, restart, reload, a rollback's) roll out."""
    return "reconcile" if op.get("kind") in ("stop", "remove") else "rollout"


def write_log(call: AgentCall, request: dict, ops: dict, rsyncs: list, answer: dict | None) -> str:
    """The step's commands on this worker into the bucket logs (bucket/runlog.py, maand=deploy, the run's id),
    in the order they ran: the rsyncs (phase rsync), then the make targets of the ops; the lines leave the
    answer (results/ keeps the output tail only). Returns why the logs could not be written ("" when they were)."""
    log = RunLog.open(call.bucket, "deploy", request.get("update_seq"), os.path.basename(call.run_dir))
    try:
        for ids, argv, began, seconds, rc, stdout, stderr in rsyncs:
            jobs = sorted({ops[i]["job"] for i in ids if i in ops})
            lines = [(None, "stdout", l) for l in (stdout or "").splitlines()]
            lines += [(None, "stderr", l) for l in (stderr or "").splitlines() if not l.startswith("MAAND-")]
            log.command(call.host, LogCommand(",".join(jobs), "rsync", "rsync", summarize([" ".join(argv)])),
                        began, seconds, -1 if rc is None else rc, lines)
        for outcome in (answer or {}).get("ops") or ():
            op = ops.get(outcome.get("id")) or {}
            log.agent_op(call.host, op.get("job") or "", phase_of(op), outcome)
    except OSError as exc:
        return "the bucket logs (%s/logs) could not be written: %s" % (call.bucket, exc)
    finally:
        for outcome in (answer or {}).get("ops") or ():
            outcome.pop("commands", None)
    return ""


def _sync(call, transport, request, outcomes):
    """Sync the request's jobs. The last rsync also applies the step (its agent call folded into it, one SSH
    session) when that rsync succeeds: (changed, folded answer or None, reason). Failed syncs become failed
    op outcomes and leave the request; shipped files leave it too."""
    syncs = [op for op in request["ops"] if op.get("sync")]
    if not syncs:
        return False, None, None
    control_dir = rsync.control_dir(call.run_dir)
    address, ssh_argv, sudo = transport.rsync_target()
    ssh = rsync.ssh_command(ssh_argv, call.verify_host, control_dir)
    root = remote.worker_root(request["bucket_id"])
    cmds = rsync.commands(call.bucket, syncs, root, address, ssh, sudo=sudo)
    shipped = {op["id"] for op in syncs if op["kind"] == "files"}
    changed, failed = False, set()
    for pos, (ids, argv) in enumerate(cmds):
        transport.ids = ids  # the bucket logs name the jobs of each rsync (_Timed)
        rest = [op for op in request["ops"] if op["id"] not in failed and op["id"] not in shipped]
        if pos == len(cmds) - 1 and (rest or request["promote"]):
            folded = _folded(call, transport, dict(request, ops=rest), argv, sudo)
            if folded is not None:  # the step ran (or was attempted) on the worker: never again
                did, answer, reason = folded
                outcomes.extend({"id": i, "ok": True, "changed": did, "steps": ["sync"]}
                                for i in sorted(shipped - failed))
                request["ops"] = rest
                return changed or did, answer, reason
        ok, did, msg = rsync.outcome(*transport.rsync(argv, timeout=call.timeout))
        changed = changed or did
        if not ok:
            failed.update(ids)
            outcomes.extend({"id": i, "ok": False, "msg": msg} for i in ids)
    # files shipped for a later step need nothing more on the worker: done when their rsync is
    done_ids = sorted(shipped - failed)
    outcomes.extend({"id": i, "ok": True, "changed": changed, "steps": ["sync"]} for i in done_ids)
    request["ops"] = [op for op in request["ops"] if op["id"] not in failed and op["id"] not in shipped]
    return changed, None, None


def _folded(call, transport, request, argv, sudo):
    """The last rsync of the step with the agent as its remote command: the files, then the step, in one SSH
    session. (changed, answer, reason) once the agent saw the files arrive, else None (nothing ran after the
    files: the caller syncs and calls the agent apart, as without the fold)."""
    path = remote.sync_step_path(call.python, rsync.destination(argv), sudo)
    data = payload(request, call.timeout, call.tail)
    argv = rsync.with_rsync_path(argv, path)
    rc, stdout, stderr = transport.rsync(argv, remote.request_header(data))
    synced, line = remote.parse_folded(stderr)
    if not synced:
        return None
    answer, reason = remote.parse_output(line, stderr, 0 if line else rc,
                                         "agent on %s, step %s" % (call.host, call.step))
    return bool(stdout.strip()), answer, reason


def done(run_dir: str, key: Any, host: str, answer: dict | None, reason: str | None) -> None:
    """A worker's answer (or why there is none) into the run folder. Its timings reach the job history when the
    step is folded (deploy/run.fold_in_flight: one write of data/job_history.json per step, not per host)."""
    run.write_result(run_dir, key, host, answer, reason)
    slices.put_result(run_dir, key, host, {"answer": answer, "reason": reason})  # a hand of a sliced run only
