# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What deploy does with the job specs build put into the catalog (``job["spec"]``, docs/jobspec.md).

On the controller, at plan time (``maand.core.deploy_plan``):

- ``expand`` evaluates a job's environment against the controller's environment (Maelstrom's
  environment_eval); an unknown variable refuses the deploy, naming job, file and variable;
  ``check_env`` does that for every in-scope job before the pre_deploy hooks run;
- ``with_env`` folds one digest per variable into the job's content map as ``.maand-env/<KEY>``
  pseudo-paths, so a changed value restarts or reloads per restart_policy and the plan says
  "environment changed: KEY". The digests are HMACs keyed from the bucket's KV key (``env_digest_key``:
  derived from secrets/kv.key, never the key itself; security review 4, L8), so a digest in the plan
  cannot be tested against guessed values without the key; the values themselves never land in the
  catalog, the plan, the run folder or the worker's records;
- ``worker_order`` orders one worker's ops of a wave step in Maelstrom's order (priority, then longest
  estimate first; estimates from the manifest, else the mean of the allocation's last 3 measured runs in
  ``data/job_history.json``, else the job's mean over its workers; an allocation that failed last time or
  never ran gets priority +1); ``slots_for`` and ``op_spec`` give each op's slots and run fields. The stage
  of building the plan that uses them is deploy/plan.with_job_specs.

At request time (``maand.core.deploy_agent``: deploy/agent_step.py): ``runtime_op`` expands the environment again (the
values travel only in the request on the agent's stdin) and turns the spec into the agent's op
fields (cwd, user, group, timeout).

No Ansible imports.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import hmac
import json
import os
from typing import Callable

from .. import jobspec  # the package's door (this module's own siblings), read at call time
from ..bucket import storage
from ..bucket import content
from ..errors import MaandError
from ..worker import agent

ENV_PREFIX = agent.ENV_PREFIX  # a job spec's environment in a record's files
HISTORY_FILE = "job_history.json"
ENV_DIGEST_CONTEXT = b"maand.core env digest v2"
DEFAULT_SLOTS = 2
LIFECYCLE_TARGETS = ("start", "restart", "reload")


class EnvError(MaandError):
    """An environment that cannot be expanded on this controller (names job, file and variable)."""


def specs_of(catalog: dict) -> dict:
    """{job: spec} of the catalog's jobs that have one."""
    return {j["name"]: j["spec"] for j in catalog.get("jobs", []) if isinstance(j.get("spec"), dict)}


def expand(job: str, spec: dict, lookup) -> dict:
    """The final environment of ``job`` (keys sorted); EnvError names the job, file and variable."""
    elements = spec.get("environment") or []
    if not elements and not spec.get("initial_environment"):
        return {}
    try:
        parsed = [dataclasses.replace(jobspec.parse_environment([{"vars": e.get("vars"), "extend": e.get("extend", True)}])[0],
                                      origin=e.get("origin") or "workspace/jobs/%s/manifest.json: environment[%d]" % (job, i))
                  for i, e in enumerate(elements)]
        integrated = jobspec.IntegratedSpec(jobspec.CollapsedSpec(environment=parsed), dict(spec.get("initial_environment") or {}))
        return jobspec.job_environment_of(integrated, lookup)
    except jobspec.SpecError as exc:
        raise EnvError("job %s: %s" % (job, exc)) from None


def check_env(catalog: dict, jobs: list, lookup) -> list:
    """Errors of the ``jobs`` whose environment does not expand against ``lookup`` (the controller's
    environment): one line per job naming job, file, JSON path and variable, with the fix. Only names
    travel: the values are evaluated and dropped. The deploy calls it before any pre_deploy hook runs."""
    errors = []
    specs = specs_of(catalog)
    for name in sorted(set(jobs) & set(specs)):
        try:
            expand(name, specs[name], lookup)
        except EnvError as exc:
            errors.append(str(exc))
    return errors


def env_digest_key(kv_key: bytes) -> bytes:
    """The HMAC key of environment digests, derived from the bucket's KV key (never the key itself)."""
    return hmac.new(kv_key, ENV_DIGEST_CONTEXT, hashlib.sha256).digest()


def env_digest(digest_key: bytes, bucket_id: str, job: str, key: str, value: str) -> str:
    """One variable's digest: an HMAC (keyed by env_digest_key) of bucket, job, name and value."""
    message = ("%s\0%s\0%s\0" % (bucket_id, job, key)).encode("utf-8") + value.encode("utf-8", "surrogateescape")
    return hmac.new(digest_key, message, hashlib.sha256).hexdigest()[:32]


def with_env(job_content: dict, bucket_id: str, job: str, env: dict, digest_key: Callable[[], bytes]) -> dict:
    """The content map of a job with one ``.maand-env/KEY`` digest per variable (hash recomputed);
    digest_key() gives env_digest_key's key (called only when there is an environment)."""
    if not env or job_content.get("error"):
        return job_content
    files = dict(job_content.get("files") or {})
    dkey = digest_key()
    files.update({ENV_PREFIX + key: env_digest(dkey, bucket_id, job, key, value) for key, value in env.items()})
    return {"hash": content.tree_hash(files), "files": files}


# --- run fields of an op ----------------------------------------------------------------------------

RUN_FIELDS = ("environment", "initial_environment", "working_directory", "user", "group", "network", "mounts",
              "enable_writable_file_system", "timeout")


def op_spec(spec: dict) -> dict:
    """The part of a catalog spec an op carries to the deploy_agent action (no expanded values)."""
    return {k: spec[k] for k in RUN_FIELDS if spec.get(k) not in (None, [], {})}


def runtime_op(op: dict, lookup) -> dict:
    """The op as the worker agent gets it: expanded environment under the op's own variables
    (CURRENT_VERSION, NEW_VERSION, ... win), and cwd/user/group/network/timeout. Raises EnvError."""
    spec = op.get("spec")
    out = {k: v for k, v in op.items() if k != "spec"}
    if not spec:
        return out
    env = expand(op.get("job"), spec, lookup)
    # the spec's variables (values from the controller, secrets among them) are never kept on the worker
    out["spec_env"] = sorted(set(env) - set(op.get("env") or {}))  # (worker/agent.note_status_op)
    env.update(op.get("env") or {})
    out["env"] = env
    for key, field in (("cwd", "working_directory"), ("user", "user"), ("group", "group"), ("network", "network"),
                       ("mounts", "mounts"), ("enable_writable_file_system", "enable_writable_file_system"),
                       ("timeout", "timeout")):
        if spec.get(field) is not None:
            out[key] = spec[field]
    return out


def _checked(catalog: dict, states: dict, jobs: list):
    """(alloc, spec, state) of the active allocations of ``jobs`` with a spec on reachable workers."""
    specs = specs_of(catalog)
    for alloc in catalog.get("allocations", []):
        spec = specs.get(alloc.get("job"))
        state = states.get(alloc.get("worker")) or {}
        if spec and alloc.get("job") in jobs and alloc.get("state") == "active" and state.get("reachable"):
            yield alloc, spec, state


def check_ids(catalog: dict, states: dict, jobs: list) -> list:
    """Errors for job specs whose user or group name the worker does not know (names read with the
    worker's state; numeric ids are not checked), then those that need root where the worker's
    agent is not root (check_root). Only reachable workers that reported their names."""
    errors = []
    for alloc, spec, state in _checked(catalog, states, jobs):
        for field, known in (("user", "users"), ("group", "groups")):
            name = spec.get(field)
            if isinstance(name, str) and isinstance(state.get(known), list) and name not in state[known]:
                errors.append("job %s: %s %r does not exist on worker %s; create it there, or fix \"%s\" in "
                              "workspace/jobs/%s/manifest.json (or the container it inherits from)"
                              % (alloc["job"], field, name, alloc["worker"], field, alloc["job"]))
    return errors + check_root(catalog, states, jobs)


def root_fields(spec: dict, state: dict) -> list:
    """The spec's fields that need root on a worker whose agent runs as state's euid/egid (the
    agent's own checks: a network namespace, a mount namespace, a switch to another uid or gid)."""
    fields = []
    if spec.get("network") in ("disabled", "loopback"):
        fields.append(("network", spec["network"]))
    if spec.get("mounts"):
        fields.append(("mounts", "%d mount(s)" % len(spec["mounts"])))
    if spec.get("enable_writable_file_system") is False:
        fields.append(("enable_writable_file_system", False))
    for field, own_id, own_name in (("user", "euid", "euser"), ("group", "egid", "egroup")):
        value = spec.get(field)
        if value is not None and value not in (state.get(own_id), state.get(own_name)):
            fields.append((field, value))
    return fields


def check_root(catalog: dict, states: dict, jobs: list) -> list:
    """Errors for job specs that need root on a worker whose agent is not root (the state read
    reports the agent's euid; an older agent that does not is not checked here)."""
    errors = []
    for alloc, spec, state in _checked(catalog, states, jobs):
        euid = state.get("euid")
        if not isinstance(euid, int) or euid == 0:
            continue
        for field, value in root_fields(spec, state):
            errors.append("job %s: \"%s\": %s needs root on worker %s, but the maand agent runs there as %s "
                          "(uid %d); set use_sudo = true in maand.conf (ansible_become), or drop \"%s\" from "
                          "workspace/jobs/%s/manifest.json (or the container it inherits from)"
                          % (alloc["job"], field, json.dumps(value), alloc["worker"], state.get("euser") or "?",
                             euid, field, alloc["job"]))
    return errors


# --- slots, order, history --------------------------------------------------------------------------

def slots_for(worker: dict, override: int = 0) -> int:
    """maand_worker_slots when given (> 0), else the worker's cores from workers.json, else 2."""
    if override and int(override) > 0:
        return int(override)
    cores = (worker or {}).get("cores")
    return int(cores) if isinstance(cores, int) and not isinstance(cores, bool) and cores > 0 else DEFAULT_SLOTS


def history_path(bucket: str) -> str:
    return os.path.join(bucket, storage.DATA_DIR, HISTORY_FILE)


def load_history(bucket: str) -> dict:
    """data/job_history.json, or an empty history when it is missing or unreadable (estimates only)."""
    try:
        with open(history_path(bucket), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record_history(bucket: str, runs: list) -> None:
    """Add measured runs [(job, target, seconds, failed, worker)] to data/job_history.json, one
    entry per allocation (job@worker), under a file lock (the agent actions of several workers
    finish at the same time)."""
    if not runs:
        return
    path = history_path(bucket)
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        history = load_history(bucket)
        for job, target, seconds, failed, worker in runs:
            history = jobspec.history_record(history, job, target, seconds, failed, worker)
        storage.atomic_write(path, json.dumps(history, indent=1, sort_keys=True) + "\n")


def order_host_ops(ops: list, specs: dict, history: dict, slots: int) -> tuple:
    """(ops reordered, [SlotRun]): ops without a make target first, then the ops with one in
    Maelstrom's order (priority + history bump, then longest estimate first), the worker's LPT plan."""
    quiet = [o for o in ops if not o.get("target")]
    busy = [o for o in ops if o.get("target")]
    by_id = {o["id"]: o for o in busy}
    runs = jobspec.lpt_plan([_queued(op, specs, history) for op in busy], slots)
    return quiet + [by_id[r.name] for r in runs], runs


def _queued(op: dict, specs: dict, history: dict):
    spec = specs.get(op.get("job")) or {}
    hint = jobspec.history_lookup(history, op["job"], op["target"], op.get("host"))
    estimate = spec.get("estimated_duration")
    estimate = hint.estimated_duration if estimate is None else estimate
    priority = max(jobspec.PRIORITY_MIN, min(jobspec.PRIORITY_MAX, int(spec.get("priority") or 0) + hint.priority_bump))
    return jobspec.QueuedJob(op["id"], priority, estimate)


WORKER_ORDER = "worker order (priority, longest estimate first; slots in parallel):"  # the plan lines' head


def worker_order(ops: list, specs: dict, history: dict, slots: int) -> tuple:
    """One worker's ops of a wave step ([{"id", "job", "host", "target"}]) in Maelstrom's order (order_host_ops):
    (their ids in that order, the text of its "worker order" line, or None when fewer than two run)."""
    ordered, runs = order_host_ops(ops, specs, history, slots)
    return [o["id"] for o in ordered], _order_text(runs, ordered, slots) if len(runs) > 1 else None


def _order_text(runs, ops, slots):
    jobs = {o["id"]: o["job"] for o in ops}
    parts = ["%s (%s)" % (jobs[r.name], "?" if r.estimated_duration is None else "%gs" % round(r.estimated_duration, 1))
             for r in runs]
    return "%d slot(s): %s" % (slots, ", ".join(parts))
