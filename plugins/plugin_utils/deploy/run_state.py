# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run state of one deploy and how each step advances it (pure, no Ansible imports).

The controller keeps a RunState in a file under the bucket between steps. For each step:

    requests_for_step(state, step)                 -> {host: AgentRequest}   what each worker does now
    fold_results(state, step, answers)             -> (RunState, ok ops)     what the workers did
    gates_to_run(state, step)                      -> [gate]                 the gates to run now
    fold_gates(state, step, ok_ops, gate_outcomes) -> RunState               what the gates said

(deploy/run.py folds a step so; fold_step does both folds at once, for tests.)

`answers` maps every host that got a request to the agent's answer, or to None when there is no
answer (unreachable, crashed, vanished): all of that host's ops and promotions fail. Gate outcomes
map a job to None (passed) or to a list of problems. final_report() says whether the run failed:
any failure, or any planned step that did not complete.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field

from . import plan
from ..errors import MaandError

FORMAT = 1
FINAL = "final"  # the step key of the last promote pass


class StateError(MaandError):
    """A run state file that cannot be used."""


@dataclass
class AgentRequest:
    """What one worker does in one step: promotions of earlier steps, then its ops."""

    host: str
    ops: list = field(default_factory=list)
    promote: list = field(default_factory=list)

    def to_dict(self):
        return asdict(self)


@dataclass
class RunState:
    run_id: str
    bucket_id: str
    job_waves: dict = field(default_factory=dict)
    failed_by_job: dict = field(default_factory=dict)   # job -> [message]
    errors: list = field(default_factory=list)          # failures not tied to a rolled-out job
    blocked: list = field(default_factory=list)         # jobs that must not run further
    done: list = field(default_factory=list)            # [{"id", "kind", "job", "host", "action"}]
    pending: dict = field(default_factory=dict)         # host -> [promotion]
    steps_completed: list = field(default_factory=list)
    in_flight: object = None                            # the step whose agents ran but is not folded yet
    failed_ops: dict = field(default_factory=dict)      # op id -> "failed" | "unreachable" | "gate" | "reverted" |
    #                                                     "unpromoted" (the verdict)
    awaiting: dict = field(default_factory=dict)        # job -> [promotion]: start batches waiting for the gate after
    #                                                     the job's last start batch (maand's start semantics)
    failed_at: dict = field(default_factory=dict)       # job -> index of the step where it first failed (auto_revert)
    pre_deploy_waves: list = field(default_factory=list)  # waves whose pre_deploy hooks ran (deploy/pre_deploy)
    deadlines: dict = field(default_factory=dict)       # job -> its progress_deadline (seconds; from the plan's gates)
    progress_at: dict = field(default_factory=dict)     # job -> when it last made progress (wall clock, seconds)

    def to_dict(self):
        data = asdict(self)
        data["format"] = FORMAT
        return data

    @classmethod
    def from_dict(cls, data):
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise StateError("not a deploy run state (format %r)" % (data.get("format") if isinstance(data, dict) else data))
        kwargs = {k: copy.deepcopy(v) for k, v in data.items() if k != "format"}
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise StateError("deploy run state: %s" % exc) from exc

    def failed(self):
        return bool(self.errors or self.failed_by_job)


@dataclass
class Report:
    failed: bool
    problems: list
    done: list
    blocked_not_deployed: list

    def to_dict(self):
        return asdict(self)


def new_state(run_id, the_plan):
    deadlines = {g["job"]: g["progress_deadline"] for s in the_plan.get("steps") or [] for g in s.get("gates") or []
                 if g.get("progress_deadline")}
    return RunState(run_id=run_id, bucket_id=the_plan["bucket_id"], job_waves=dict(the_plan.get("job_waves") or {}),
                    deadlines=deadlines)


# --- progress_deadline: "progress" is a batch of the job completing (its targets ran and its gate, with
# min_healthy_time, passed); the clock starts when the job's first batch is sent, and every progress restarts it.

def start_clocks(state, step, now=None):
    """The step's requests go out: the clock of each job with a progress_deadline starts at its first step."""
    for job in (step or {}).get("jobs") or []:
        if job in state.deadlines and job not in state.progress_at and job not in state.blocked:
            state.progress_at[job] = time.time() if now is None else now


def deadline_at(state, job):
    """When the job's progress_deadline comes (wall clock), or None (no deadline, or its clock has not started)."""
    if job not in state.deadlines or job not in state.progress_at:
        return None
    return float(state.progress_at[job]) + float(state.deadlines[job])


def _progress(state, step, gated, now):
    """After a step's gates: each job of the step that did not fail made progress (its clock restarts); one
    whose batch had no gate of its own (a start batch before the last) but took longer than its deadline fails."""
    now = time.time() if now is None else now
    for job in (step or {}).get("jobs") or []:
        at = deadline_at(state, job)
        if at is None or job in state.failed_by_job or job in state.blocked:
            continue
        if job not in gated and now > at:
            since = now - state.progress_at[job]
            _fail(state, step, job, "job %s: progress_deadline %g s passed: no progress for %.1f s; it was waiting "
                  "for the make targets of %s" % (job, float(state.deadlines[job]), since, step.get("label")))
            continue
        state.progress_at[job] = now


def requests_for_step(state, step):
    """{host: AgentRequest}: the step's ops minus blocked jobs, plus each host's pending promotions.

    step None is the final promote pass (promotions only). A host with pending promotions gets them
    in this step's request even when it has no op in the step, so promotions never wait long.
    """
    blocked = set(state.blocked)
    out = {}
    for host, ops in sorted(((step or {}).get("ops") or {}).items()):
        mine = [op for op in ops if _wanted(state, op, blocked)]
        if mine:
            out[host] = AgentRequest(host=host, ops=copy.deepcopy(mine))
    for host, promos in sorted(state.pending.items()):
        if promos:
            out.setdefault(host, AgentRequest(host=host)).promote = copy.deepcopy(promos)
    return out


def _wanted(state, op, blocked):
    """An op of this step runs unless its job is blocked; a revert (auto_revert) runs only when its job
    failed in the step whose batch it undoes."""
    if op.get("revert_of") is not None:
        return state.failed_at.get(op.get("job")) == op["revert_of"]
    return op.get("job") is None or op.get("job") not in blocked


def reverted_id(op):
    """The allocation's op id ("api@h1") of a revert op ("api@h1/revert")."""
    return "%s@%s" % (op.get("job"), op.get("host"))


def _fail(state, step, job, msg):
    if job is None or step is None or step.get("wave") is None:
        state.errors.append(msg)
    else:
        state.failed_by_job.setdefault(job, []).append(msg)
        state.failed_at.setdefault(job, step.get("index"))


def _reverted(state, step, job, ops):
    """Revert ops whose gate passed (or that had none): their allocations' verdict is "reverted"."""
    if not ops:
        return
    for op in ops:
        state.failed_ops[reverted_id(op)] = "reverted"
    _fail(state, step, job, "job %s: auto_revert put the last promoted version back on %s (restarted%s); the "
          "job's later batches were not deployed" % (job, ", ".join(op["host"] for op in ops),
                                                     "" if ops[0].get("promote_now") else ", gate passed"))


def fail_before_wave(state, job, wave, msg):
    """A job that fails before its wave's first step (its pre_deploy hooks): none of its ops run, nor any
    job of a later wave (the earlier waves keep what they rolled out; the wave's other jobs go on)."""
    state.failed_by_job.setdefault(job, []).append(msg)
    later = {j for j, w in state.job_waves.items() if (w or 0) > wave}
    state.blocked = sorted(set(state.blocked) | {job} | later)


def fail_untouched(state, step, job, msg):
    """A job whose batch must not run (its before_allocation_stopped failed: deploy/drain.py), failed and blocked
    before the step's requests are written, so none of its ops of the step run; the batch's verdict is "failed"
    (no failed_at: nothing of the batch ran, so auto_revert has nothing to put back)."""
    state.failed_by_job.setdefault(job, []).append(msg)
    state.blocked = sorted(set(state.blocked) | {job})
    for ops in (step.get("ops") or {}).values():
        for op in ops:
            if op.get("job") == job and op.get("kind") in ("run", "stop") and op.get("revert_of") is None:
                state.failed_ops.setdefault(op["id"], "failed")


def record_failure(state, step, job, msg):
    """A failure found outside the agent's answers (a hook after a stop) fails its job like a failed op."""
    _fail(state, step, job, msg)


def _fail_promotion(state, job, msg):
    if job is None:
        state.errors.append(msg)
    else:
        state.failed_by_job.setdefault(job, []).append(msg)


def _fold_promotions(state, host, request, answer, reachable=True):
    by_id = {p.get("id"): p for p in (answer or {}).get("promotions") or []}
    for promo in request.promote:
        got = by_id.get(promo["id"])
        if answer is None or got is None or not got.get("ok"):
            state.failed_ops[promo["id"]] = "unreachable" if answer is None and not reachable else "failed"
        if answer is None or got is None:
            _fail_promotion(state, promo.get("job"), "%s: promote failed: %s" % (
                promo["id"], "no answer from the worker" if answer is None else "the agent did not report it"))
        elif not got.get("ok"):
            _fail_promotion(state, promo.get("job"), "%s: promote failed: %s" % (promo["id"], got.get("msg") or "failed"))
    state.pending.pop(host, None)


def _op_message(op, got, answer, why):
    if answer is None:
        return "%s: %s failed: no result from the worker (%s)" % (op["id"], op.get("action"), why or "unreachable")
    if got is None:
        return "%s: %s failed: the agent did not report it (%s)" % (op["id"], op.get("action"), answer.get("msg") or "")
    msg = got.get("msg") or "failed"
    if got.get("output_tail"):
        msg += "\n--- last lines of output ---\n" + "\n".join(got["output_tail"])
    return "%s: %s failed: %s" % (op["id"], op.get("action"), msg)


def fold_results(state, step, answers, reasons=None):
    """Advance the state with the agent answers of one step (before its health gates).

    Returns (new state, ok ops of the step)."""
    state = copy.deepcopy(state)
    reasons = reasons or {}
    requests = requests_for_step(state, step)
    ok_ops = []
    for host, request in sorted(requests.items()):
        answer = answers.get(host)
        reachable = answer is not None
        if answer is not None and not answer.get("ok", True) and not answer.get("ops"):
            reasons[host] = answer.get("msg") or "the agent failed"
            answer = None
        _fold_promotions(state, host, request, answer, reachable)
        by_id = {o.get("id"): o for o in (answer or {}).get("ops") or []}
        for op in request.ops:
            got = by_id.get(op["id"])
            if answer is None or got is None or not got.get("ok"):
                if op.get("revert_of") is None:  # a failed revert leaves the allocation's verdict as it was
                    # files shipped early (kind "files") fail the allocation they are for, and so its job
                    state.failed_ops[op.get("of") or op["id"]] = "unreachable" if not reachable else "failed"
                _fail(state, step, op.get("job"), _op_message(op, got, answer, reasons.get(host)))
                continue
            if op["kind"] == "files":  # the allocation is done when its own op is
                continue
            if op.get("revert_of") is not None and op.get("promote_now"):  # no gate: reverted once it ran
                _reverted(state, step, op["job"], [op])
            ok_ops.append(op)
            state.done.append({"id": op["id"], "kind": op["kind"], "job": op.get("job"), "host": host,
                               "action": op.get("action")})
    return state, ok_ops


def measured(requests, answers):
    """The make targets the agents of a step timed, for data/job_history.json (jobspec/deploy.record_history):
    [(job, target, seconds, failed, host)] from {host: AgentRequest} and {host: answer or None}."""
    runs = []
    for host, request in sorted(requests.items()):
        answer = answers.get(host)
        if not answer:
            continue
        ops = {op["id"]: op for op in request.ops}
        for outcome in answer.get("ops") or []:
            op = ops.get(outcome.get("id"))
            if op and op.get("target") and isinstance(outcome.get("seconds"), (int, float)):
                runs.append((op["job"], op["target"], outcome["seconds"], not outcome.get("ok"), op.get("host")))
    return runs


def gates_to_run(state, step):
    """The step's health gates whose job has not failed and is not blocked; a revert's gate (auto_revert)
    when its job failed in the step it undoes, on the workers whose revert ran."""
    if step is None:
        return []
    skip = set(state.failed_by_job) | set(state.blocked)
    done = {d.get("id") for d in state.done}
    out = []
    for gate in step.get("gates") or []:
        if gate.get("revert_of") is None:
            if gate["job"] not in skip:
                at = deadline_at(state, gate["job"])  # the job's progress_deadline (a revert gets its whole budget)
                out.append(gate if at is None else dict(gate, deadline_at=at))
        elif state.failed_at.get(gate["job"]) == gate["revert_of"]:
            hosts = [h for h in gate.get("hosts") or [] if "%s@%s/revert" % (gate["job"], h) in done]
            if hosts:
                out.append(dict(gate, hosts=hosts))
    return out


def _block(state, step):
    """Failed jobs are blocked; a finished wave with a failure blocks every later wave."""
    blocked = set(state.blocked) | set(state.failed_by_job)
    step_wave = None if step is None else step.get("wave")
    for job in sorted(state.failed_by_job):
        wave = state.job_waves.get(job, 0)
        if step is None or step_wave is None or wave < step_wave:
            blocked = set(plan.block_after_failures([job], state.job_waves, wave, True, blocked))
        else:
            blocked = set(plan.block_after_failures([job], state.job_waves, step_wave,
                                                    step.get("last_in_wave"), blocked))
    state.blocked = sorted(blocked)


def _gate_failed_ops(state, gate, ok_ops, problems):
    """The ops of a failed gate's batch: those on the workers its problems name, else all of them."""
    hosts = list(gate.get("hosts") or [])
    named = [h for h in hosts if any(str(p).startswith(h + ":") for p in problems)]
    for op in ok_ops:
        if op.get("job") == gate["job"] and op.get("host") in (named or hosts):
            state.failed_ops[op["id"]] = "gate"


def _promotion(op, step):
    return {"id": op["id"], "job": op["job"], "host": op["host"], "record": op["record"], "step": step.get("index")}


def fold_gates(state, step, ok_ops, gate_outcomes, now=None):
    """Record the health gates of a step: passed jobs' gated starts become pending promotions (with the
    start batches that waited for this gate); a start batch before the job's last (ops "held") waits for
    that gate; a passed revert gate (auto_revert) promotes the reverted records; the jobs that made progress
    restart their progress_deadline's clock (now: the wall clock)."""
    state = copy.deepcopy(state)
    passed, reverts = set(), {}
    gates = gates_to_run(state, step)
    for gate in gates:
        job = gate["job"]
        if job not in gate_outcomes:
            _fail(state, step, job, "health gate of job %s after %s was not run" % (job, step.get("label")))
            continue
        problems = gate_outcomes[job]
        if gate.get("revert_of") is not None:
            if problems:
                text = ("\n  " if any("\n" in str(p) for p in problems) else "; ").join(str(p) for p in problems)
                _fail(state, step, job, "job %s: auto_revert restarted the last promoted version on %s but its health "
                      "gate failed: %s" % (job, ", ".join(gate["hosts"]), text))
            else:
                reverts[job] = set(gate["hosts"])
            continue
        if problems:
            _gate_failed_ops(state, gate, ok_ops + state.awaiting.pop(job, []), problems)
            # problems with several lines (a worker's status tail) go one per line
            text = ("\n  " if any("\n" in str(p) for p in problems) else "; ").join(str(p) for p in problems)
            if gate.get("hooks"):  # the job's commands ran in this gate (hooks/points.py); they name themselves
                _fail(state, step, job, "job %s failed after %s: %s" % (job, step.get("label"), text))
            elif str(problems[0]).startswith("progress_deadline"):  # its budget did not end it (deploy/gate.py)
                _fail(state, step, job, "health gate of job %s failed after %s: %s" % (job, step.get("label"), text))
            else:
                # the attempts made are in the gate's own note ("gave up after 9.2 s (6 attempt(s), ...)"):
                # a gate that stops early (its job not running) makes fewer than its budget
                _fail(state, step, job, "health gate of job %s failed after %s: %s" % (job, step.get("label"), text))
        else:
            passed.add(job)
    reverted = []
    for op in ok_ops:
        if op["kind"] != "run" or op.get("promote_now"):
            continue
        if op.get("revert_of") is not None:
            if op["host"] in reverts.get(op["job"], ()):
                state.pending.setdefault(op["host"], []).append(_promotion(op, step))
                reverted.append(op)
        elif op.get("held"):  # a start batch before the job's last: promoted after the gate of the last
            if op["job"] not in state.failed_by_job:
                state.awaiting.setdefault(op["job"], []).append(_promotion(op, step))
        elif op["job"] in passed:
            state.pending.setdefault(op["host"], []).append(_promotion(op, step))
    for job in sorted(passed):
        for promo in state.awaiting.pop(job, []):
            state.pending.setdefault(promo["host"], []).append(promo)
    for job in sorted(reverts):
        _reverted(state, step, job, [op for op in reverted if op["job"] == job])
    _progress(state, step, {g["job"] for g in gates if g.get("revert_of") is None}, now)
    for job in sorted(set(state.awaiting) & set(state.failed_by_job)):  # never gated: not promoted
        for promo in state.awaiting.pop(job):
            state.failed_ops.setdefault(promo["id"], "unpromoted")
    _block(state, step)
    key = FINAL if step is None else step.get("index")
    if key not in state.steps_completed:
        state.steps_completed.append(key)
    return state


def fold_step(state, step, answers, gate_outcomes, reasons=None):
    """fold_results + fold_gates in one call (gate outcomes known in advance, as in tests)."""
    state, ok_ops = fold_results(state, step, answers, reasons)
    return fold_gates(state, step, ok_ops, gate_outcomes)


def final_report(state, the_plan):
    """The outcome of the run: failed when anything failed or a planned step never completed."""
    problems = [f["msg"] for f in the_plan.get("failures") or []]
    problems += list(state.errors)
    for job in sorted(state.failed_by_job):
        problems += state.failed_by_job[job]
    missing = [s["index"] for s in the_plan.get("steps") or [] if s["index"] not in state.steps_completed]
    if missing:
        problems.append("the deploy stopped before step(s) %s completed; run it again"
                        % ", ".join(str(i) for i in missing))
    if any(state.awaiting.values()):
        problems.append("allocations started but the gate after their job's last start batch never ran: %s"
                        % ", ".join(p["id"] for ps in state.awaiting.values() for p in ps))
    if any(state.pending.values()):
        problems.append("allocations passed their gate but were not promoted: %s"
                        % ", ".join(p["id"] for ps in state.pending.values() for p in ps))
    blocked = sorted(set(state.blocked) - set(state.failed_by_job))
    planned = {r["job"] for r in the_plan.get("rows") or [] if r.get("action") not in ("skip", "unreachable", "hold")}
    not_deployed = [j for j in blocked if j in planned]
    if not_deployed:
        problems.append("not deployed because an earlier wave failed: %s" % ", ".join(not_deployed))
    return Report(failed=bool(problems), problems=problems, done=list(state.done), blocked_not_deployed=not_deployed)
