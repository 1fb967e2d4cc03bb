# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller side of one deploy run: its folder under the bucket and the step driver (no Ansible imports).

    <bucket>/data/.deploy-run/<run_id>/
        plan.json                   the plan of this run (write_plan: when the run starts, and again when
                                    pre_deploy hooks changed files, before_step)
        state.json                  the RunState (run_state), rewritten atomically after every fold
        requests/<step>/<host>.json what the agent of <host> does in <step>
        results/<step>/<host>.json  {"answer": agent answer or null, "reason": why there is none}

Only the holder of the bucket's deploy lock writes here. With a shared state store (PostgreSQL) the
run's plan and state are also published there as its run record, when the run starts and when it
finishes (publish), so `maand.core.cat -e maand_cat=deployments` shows it from any controller. A step is driven by advance(): fold the
step in flight (results + health gates), then write the next step's requests. A missing result file
means the host gave no answer: its ops fail.

A step task reads its run once (RunContext: plan.json, state.json and the bucket's catalog) and hands it on
to the callbacks it runs (Callbacks: deploy/callbacks.StepCallbacks) and to advance, which writes state.json
once (and data/job_history.json once, with the make targets the step's agents timed).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import secrets
import shutil
import time
from typing import Any, Mapping, Protocol

from ..bucket import storage
from ..catalog import catalog
from .. import jobspec
from . import plan, run_state
from ..errors import MaandError

RUN_DIR = ".deploy-run"
FINAL = run_state.FINAL
WIDE_FACTOR = 8
NARROW_MAX = 2  # a step in which at most this many hosts act loops over them (no skipped hosts)
# Test-only fault injection (tests/integration/test_deploy_faults.py): a comma list of points
# ("step:<key>", "finish") at which a controller step raises after folding the step in flight and
# before writing the next step's requests (finish: before its report). Unset in normal use.
FAULT_ENV = "MAAND_DEPLOY_TEST_FAULT"


class RunError(MaandError):
    """A run folder that cannot be used (names the file and the fix)."""


class InjectedFault(MaandError):
    """Raised at a point named in MAAND_DEPLOY_TEST_FAULT (tests only)."""


def inject_fault(point, environ=None):
    """Raise InjectedFault when point is listed in MAAND_DEPLOY_TEST_FAULT."""
    wanted = (environ if environ is not None else os.environ).get(FAULT_ENV, "")
    if point in [p.strip() for p in wanted.split(",")]:
        raise InjectedFault("%s=%s: injected controller fault at %s" % (FAULT_ENV, wanted, point))


def runs_root(bucket):
    return os.path.join(bucket, storage.DATA_DIR, RUN_DIR)


def _write_json(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    storage.atomic_write(path, json.dumps(data, sort_keys=True))


def _read_json(path, strict=True):
    """The JSON of path; None when it is missing (or, not strict, unreadable); RunError when strict and unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        if not strict:
            return None
        raise RunError("%s: cannot read (%s); delete the folder %s and deploy again"
                       % (path, exc, os.path.dirname(path))) from exc


def step_key(value):
    """'3' / 3 -> 3; 'final' -> 'final'."""
    if value == FINAL or value is None:
        return FINAL
    return int(value)


def request_path(run_dir, key, host):
    return os.path.join(run_dir, "requests", str(key), "%s.json" % host)


def result_path(run_dir, key, host):
    return os.path.join(run_dir, "results", str(key), "%s.json" % host)


def _kind(acting, play_size, wide_factor=WIDE_FACTOR):
    """wide when every host of the play acts, or when more than NARROW_MAX act and at least
    1/wide_factor of the play does; else narrow."""
    if acting >= play_size or (acting > NARROW_MAX and acting * wide_factor >= play_size):
        return "wide"
    return "narrow"


def segments(the_plan, play_size, wide_factor=WIDE_FACTOR):
    """[{"kind": "wide"|"narrow", "step": index}] for the planned steps, then the final promote pass when
    the last step has health gates (without gates no promotion waits for it: finish folds the last step).

    A wide step runs its agent task on every host of the play in parallel (forks), skipped where
    idle: Ansible prints a `skipping:` line for each idle host. A narrow step is one run_once task
    looping over the acting hosts, one after the other: nothing on idle hosts (Ansible shows and
    counts those results under the first host, "h1 -> h7"). A step is wide when the whole play acts,
    or when more than NARROW_MAX hosts act and they are at least 1/WIDE_FACTOR of the play (so its
    skips cost at most WIDE_FACTOR - 1 per acting host); the typical rolling batch (one worker, plus
    the promotion of the previous batch's) is narrow and prints no `skipping:` line."""
    out = []
    prev_hosts = set()
    for step in the_plan.get("steps") or []:
        hosts = set(step.get("ops") or {})
        acting = len(hosts | prev_hosts)  # hosts of the previous step may get their promotions here
        out.append({"kind": _kind(acting, play_size, wide_factor), "step": step["index"]})
        prev_hosts = {g_host for g in step.get("gates") or [] for g_host in g.get("hosts") or []}
    if prev_hosts:  # the final promote pass: the hosts of the last step's gates (none: finish folds it)
        out.append({"kind": _kind(len(prev_hosts), play_size, wide_factor), "step": FINAL})
    return out


def segment_groups(segs):
    """Consecutive narrow segments as one group, each wide segment a group of its own:
    [{"kind": "wide"|"narrow", "segments": [...]}], in order.

    The role includes a narrow group once, run_once, so its steps exist only on the first host of
    the play: Ansible's per-host bookkeeping of a step (iterating every host, copying run_once results
    to each) then no longer grows with the fleet, and a rolling batch costs the same at 64 hosts as at
    8. A wide group is included on every host (its agent task runs on each)."""
    groups = []
    for seg in segs:
        if seg["kind"] == "narrow" and groups and groups[-1]["kind"] == "narrow":
            groups[-1]["segments"].append(seg)
        else:
            groups.append({"kind": seg["kind"], "segments": [seg]})
    return groups


def new_run_id(now=None, pid=None, token=None):
    """A run's id: its UTC start to the millisecond, the controller's pid and 6 random hex digits, as
    20261127T103138.123-4711-a1b2c3. Ids sort by start time (a shared state store names each record by
    its run id); the random part keeps apart two controllers that start in the same millisecond. Runs
    before this form were <second>-<pid> (20261127T103138-4711): those still read, and sort before the
    runs of their second."""
    millis = int((time.time() if now is None else now) * 1000)
    return "%s.%03d-%d-%s" % (time.strftime("%Y%m%dT%H%M%S", time.gmtime(millis // 1000)), millis % 1000,
                              os.getpid() if pid is None else pid, token or secrets.token_hex(3))


def new_run(bucket, the_plan, run_id=None, record=True):
    """Create the run folder (dropping folders of earlier runs: the caller holds the deploy lock, or is a hand of a
    sliced run, deploy/slices.py, with its own checkout); record: its run record into a shared store (not a hand's)."""
    root = runs_root(bucket)
    if os.path.isdir(root):
        for name in os.listdir(root):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    run_id = run_id or new_run_id()
    run_dir = os.path.join(root, run_id)
    storage.ensure_data_dir(bucket)
    storage.private_dir(root)
    os.makedirs(run_dir, mode=0o700)
    write_plan(run_dir, the_plan)
    state = run_state.new_state(run_id, the_plan)
    save_state(run_dir, state)
    if record:
        publish(run_dir, the_plan, state)
    return run_dir


def bucket_of(run_dir):
    """The bucket folder of a run folder (<bucket>/data/.deploy-run/<run_id>)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(run_dir))))


def publish(run_dir, the_plan, state):
    """Copy the run's plan and state to a shared state store as its run record (the bucket folder's
    own record is the run folder itself)."""
    store = storage.store(bucket_of(run_dir))
    if store.kind != "file":
        store.write_run(os.path.basename(run_dir), json.dumps(the_plan, sort_keys=True),
                        json.dumps(state.to_dict(), sort_keys=True))


def write_plan(run_dir, the_plan):
    """plan.json of the run: the JSON of a records.Plan (deploy/plan.py builds it; sort_keys, so the bytes
    depend on the content only)."""
    _write_json(os.path.join(run_dir, "plan.json"), the_plan)


def load_plan(run_dir):
    the_plan = _read_json(os.path.join(run_dir, "plan.json"))
    if the_plan is None:
        raise RunError("%s/plan.json is missing: the run folder was removed while the deploy ran; deploy again" % run_dir)
    if not isinstance(the_plan, dict):
        raise RunError("%s/plan.json is not a plan (a JSON object); delete the folder %s and deploy again"
                       % (run_dir, run_dir))
    return the_plan


def load_state(run_dir):
    data = _read_json(os.path.join(run_dir, "state.json"))
    if data is None:
        raise RunError("%s/state.json is missing: the run folder was removed while the deploy ran; deploy again" % run_dir)
    try:
        return run_state.RunState.from_dict(data)
    except run_state.StateError as exc:
        raise RunError("%s/state.json: %s; deploy again" % (run_dir, exc)) from exc


def read_run(run_dir):
    """(plan, state) of the run folder as they are on disk: each a dict, or None when its file is missing,
    unreadable or not a JSON object. The tolerant reader, for what only reports on a run (maand.core.cat
    deployments); the deploy itself loads with load_plan and load_state, which refuse such a file."""
    docs = [_read_json(os.path.join(run_dir, name), strict=False) for name in ("plan.json", "state.json")]
    return tuple(doc if isinstance(doc, dict) else None for doc in docs)


def save_state(run_dir, state):
    _write_json(os.path.join(run_dir, "state.json"), state.to_dict())


def find_step(the_plan, key):
    if key == FINAL:
        return None
    for step in the_plan.get("steps") or []:
        if step["index"] == key:
            return step
    raise RunError("step %r is not in the plan of this run" % (key,))


def write_result(run_dir, key, host, answer, reason=None):
    _write_json(result_path(run_dir, key, host), {"answer": answer, "reason": reason})


def read_results(run_dir, key, hosts):
    """({host: answer or None}, {host: reason}) for the hosts that got a request in step key."""
    answers, reasons = {}, {}
    for host in hosts:
        data = _read_json(result_path(run_dir, key, host))
        if not isinstance(data, dict):
            answers[host] = None
            reasons[host] = "no result: the agent task did not run for this host (unreachable or interrupted)"
            continue
        answers[host] = data.get("answer") if isinstance(data.get("answer"), dict) else None
        if answers[host] is None:
            reasons[host] = data.get("reason") or "no answer from the agent"
    return answers, reasons


def iter_results(run_dir):
    """(step, host, answer dict or None) for every result file of the run, in no promised order (step as its
    folder is named: "3", "final"). The tolerant reader, for what only reports on a run (the deploy record's
    timings): a folder or file that cannot be read is skipped. The deploy itself folds with read_results."""
    root = os.path.join(run_dir, "results")
    try:
        steps = sorted(os.listdir(root))
    except OSError:
        return
    for step in steps:
        try:
            names = sorted(os.listdir(os.path.join(root, step)))
        except OSError:
            continue
        for name in names:
            if not name.endswith(".json"):
                continue
            data = _read_json(result_path(run_dir, step, name[:-len(".json")]), strict=False)
            if isinstance(data, dict):
                answer = data.get("answer")
                yield step, name[:-len(".json")], answer if isinstance(answer, dict) else None


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What one step task reads of its run, once, and hands on (a step is one task, in its own process:
    nothing outlives it to cache): the run folder, its bucket, the plan (plan.json), the run state as the
    step found it (state.json; advance and finish fold from it, never write it back as it is) and the
    bucket's catalog (None when there is none or it cannot be read: the gates and hooks then do without)."""

    run_dir: str
    bucket: str
    plan: dict
    state: run_state.RunState
    catalog: dict | None = None

    @classmethod
    def read(cls, run_dir):
        """The run folder's context (RunError when its plan or state is missing or unreadable)."""
        the_plan = load_plan(run_dir)
        state = load_state(run_dir)
        bucket = bucket_of(run_dir)
        try:
            cat = catalog.read_catalog(bucket)
        except catalog.CatalogError:
            cat = None
        return cls(run_dir, bucket, the_plan, state, cat)


class Callbacks(Protocol):
    """What advance and finish call back while they fold a step and prepare the next: deploy/callbacks.StepCallbacks
    (tests pass their own)."""

    def gate(self, gate: Mapping[str, Any]) -> list[str]:
        """One health gate of the step in flight: its problems ([] = passed)."""

    def after_results(self, step: Mapping[str, Any] | None, ok_ops: list) -> list[tuple[str, str]]:
        """After the agents' results, before the gates: [(job, message)] that fail their job as a failed op does
        (the reconcile step's after_allocation_stopped hooks)."""

    def before(self, the_plan: dict, state: run_state.RunState,
               step: Mapping[str, Any] | None) -> tuple[list[str], list]:
        """Before the requests of step (None: the final pass and finish): (failure messages, what changed: a
        [records.Rerender], for deploy/plan.rerendered); the pre_deploy hooks of the waves due (deploy/pre_deploy)."""

    def before_stops(self, state: run_state.RunState, step: Mapping[str, Any]) -> list[tuple[str, str]]:
        """After before, just before the requests of step: [(job, message)] of the jobs whose batch must not run
        (their before_allocation_stopped failed: deploy/drain.py); optional (advance skips what lacks it)."""


def fold_in_flight(run, state, callbacks):
    """Fold the step whose agents ran (results, then health gates) in memory. Returns (state, new failure
    messages); state is a new RunState (the one given is left as it is). The make targets its agents timed go to
    data/job_history.json, in one write (estimates of the next deploys).

    callbacks.after_results(step, ok_ops) runs between the two; each message fails its job as a failed op does."""
    if state.in_flight is None:
        return copy.deepcopy(state), []
    key = state.in_flight
    step = find_step(run.plan, key)
    before = _messages(state)
    requests = run_state.requests_for_step(state, step)
    answers, reasons = read_results(run.run_dir, key, sorted(requests))
    try:
        jobspec.record_history(run.bucket, run_state.measured(requests, answers))
    except OSError:
        pass  # estimates only: a read-only data/ must not fail the deploy
    state, ok_ops = run_state.fold_results(state, step, answers, reasons)
    for job, msg in callbacks.after_results(step, ok_ops):
        run_state.record_failure(state, step, job, msg)
    outcomes = {g["job"]: callbacks.gate(g) for g in run_state.gates_to_run(state, step)}
    state = run_state.fold_gates(state, step, ok_ops, outcomes)
    state.in_flight = None
    return state, [m for m in _messages(state) if m not in before]


def _messages(state):
    out = list(state.errors)
    for msgs in state.failed_by_job.values():
        out += msgs
    return out


def before_step(run_dir, the_plan, state, step, before):
    """The controller's work before the requests of step (None: the final pass and finish): before(plan, state,
    step) -> (failure messages, [records.Rerender]) runs the pre_deploy hooks of the waves due (deploy/pre_deploy),
    failing jobs in state; what they changed makes the run's new plan (deploy/plan.rerendered), written to
    plan.json. Saves the state; returns (the messages, the plan)."""
    if before is None:
        return [], the_plan
    messages, changes = before(the_plan, state, step)
    if changes:
        the_plan = plan.rerendered(the_plan, changes)
        write_plan(run_dir, the_plan)
    save_state(run_dir, state)
    return list(messages), the_plan


def advance(run, key, callbacks):
    """Fold the step in flight, run what is due before step key (before_step), then write its requests.
    Returns (hosts, new failures).

    state.json is written once: before_step saves the state with step key in flight, then the requests are
    written. Should anything fail after the fold (an injected fault, a step that already ran, a hook, a
    request that cannot be written), the state is saved as it stood, the fold kept and key not in flight,
    and the error propagates."""
    state, failures = fold_in_flight(run, run.state, callbacks)
    kept = state if run.state.in_flight is not None else None  # a fold to keep should what follows fail
    try:
        inject_fault("step:%s" % key)
        step = find_step(run.plan, key)
        if key in state.steps_completed:
            raise RunError("step %s of this run already ran" % key)
        if kept is not None:
            kept = copy.deepcopy(state)  # the hooks of before_step change state
        state.in_flight = key
        run_state.start_clocks(state, step)  # progress_deadline: a job's clock starts with its first batch
        messages, the_plan = _before(run, state, step, callbacks)
        failures, step = failures + messages, find_step(the_plan, key)  # the step as the hooks left the plan
        failures += _drain(run, state, step, callbacks)
        kept = dataclasses.replace(state, in_flight=None)  # saved: the fold and what ran before the step
        requests = run_state.requests_for_step(state, step)
        for host, request in requests.items():
            _write_json(request_path(run.run_dir, key, host),
                        dict(request.to_dict(), bucket_id=the_plan["bucket_id"], step=key, update_seq=the_plan.get("update_seq"),
                             run_id=os.path.basename(os.path.normpath(run.run_dir))))
    except BaseException:
        if kept is not None:
            save_state(run.run_dir, kept)
        raise
    return sorted(requests), failures


def _drain(run, state, step, callbacks):
    """callbacks.before_stops(state, step) (deploy/drain.py: the before_allocation_stopped commands and the
    shutdown_delay of the step's restart, reload and stop batches); a job whose command failed is failed and
    blocked before the requests are written (state.json saved again). The failure messages."""
    before_stops = getattr(callbacks, "before_stops", None)
    if before_stops is None or step is None:
        return []
    failed = before_stops(state, step)
    for job, msg in failed:
        run_state.fail_untouched(state, step, job, msg)
    if failed:
        save_state(run.run_dir, state)
    return [msg for _job, msg in failed]


def _before(run, state, step, callbacks):
    """before_step with the callbacks' before; it saves the state (and the plan when the hooks changed it):
    the step's one write of state.json. Returns (failure messages, the run's plan from then on)."""
    if callbacks.before is None:  # before_step saves only when it runs a before
        save_state(run.run_dir, state)
    return before_step(run.run_dir, run.plan, state, step, callbacks.before)


def write_request(run_dir, key, host, request):
    """A request of step key for host as it came (a hand of a sliced run: from the planner, deploy/slices.py)."""
    _write_json(request_path(run_dir, key, host), request)


def read_request(run_dir, key, host):
    return _read_json(request_path(run_dir, key, host))


def finish(run, callbacks):
    """Fold what is still in flight, run what is still due (before_step: the pre_deploy hooks of waves with
    nothing to roll out; its save is finish's one write of state.json); returns (plan, state, report)."""
    state, dummy = fold_in_flight(run, run.state, callbacks)
    kept = copy.deepcopy(state) if run.state.in_flight is not None else None
    try:
        dummy, the_plan = _before(run, state, None, callbacks)
    except BaseException:
        if kept is not None:
            save_state(run.run_dir, kept)
        raise
    inject_fault("finish")
    publish(run.run_dir, the_plan, state)
    return the_plan, state, run_state.final_report(state, the_plan)
