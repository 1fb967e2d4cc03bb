# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a deploy step calls back, wired in one place (no Ansible imports).

run.advance and run.finish fold a step and prepare the next over the step's deploy/run.RunContext (its plan,
state and catalog, read once) and call back a run.Callbacks; StepCallbacks is the one implementation:

* gate(g): one health gate. A job with gate hooks runs them in maand's order (hooks/points.run_gate_hooks:
  job_control or after_allocation_started, the probes, health_check, post_deploy); the probes are
  deploy/gate.GateRunner over deploy/gate.run_gate, dialled from the controller to each host's address (https
  trusting the bucket CA), with the job's `make status` while it waits (fail fast: health/watch.py), progress
  records in the run folder and, when it fails, the workers' status tails;
* after_results(step, ok_ops): the after_allocation_stopped hooks of the reconcile step's stops;
* before_stops(state, step): right before a step's requests, the before_allocation_stopped hooks and the
  shutdown_delay of its restart, reload and stop batches (deploy/drain.py);
* before(plan, state, step): the pre_deploy hooks of the waves due (deploy/pre_deploy), each job rendered
  again after its hooks (rerender: deploy/service.rerender) and its changed files staged.

The hooks share one session (hooks/points.session: the runtime API on 127.0.0.1:8080), started when first
needed and closed with the step. Every ssh call uses the workers' connection settings (ctl.connections,
built on the Ansible side: adapter/controller.py) with the run's own multiplexing (LazyConnections), each
host's built when first asked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Mapping
from typing import Any, Callable, Iterator

from .. import health
from ..bucket import RunLog
from ..catalog import catalog
from ..hooks import points
from ..hooks.run import DEFAULT_TAIL, DEFAULT_TIMEOUT
from . import drain, gate, pre_deploy, progress, remote
from . import rsync, run, run_state
from .records import PreDeploy

# rerender(bucket, catalog, job, hosts, versions, update_seq) -> (staging or None, errors): a job rendered again
# after its pre_deploy hooks (deploy/service.rerender)
Rerender = Callable[[str, Mapping[str, Any], str, list, Mapping[tuple, str], int], tuple[Any, list[str]]]


class LazyConnections(Mapping):
    """{host: connection settings with the run's multiplexing (deploy/rsync.with_mux)}, built per host when
    first asked: building a host's settings reads its vars (an Ansible variable pass), so a gate's status
    checks and tails pay for their own hosts only, never for the whole fleet in every step. Iterating (ssh
    probes, which dial by address) builds them all once. connections(hosts=None) -> {host: settings};
    control_dir() -> the run's ControlPath folder, made when a host first needs it."""

    def __init__(self, connections, control_dir):
        self._connections, self._control_dir = connections, control_dir
        self._seen, self._all = {}, False

    def _add(self, conns):
        fresh = {h: c for h, c in conns.items() if h not in self._seen}
        if fresh:
            self._seen.update(rsync.with_mux(fresh, self._control_dir()))

    def __getitem__(self, host):
        if host not in self._seen and not self._all:
            self._add(self._connections([host]))
        return self._seen[host]

    def __iter__(self):
        if not self._all:
            self._add(self._connections())
            self._all = True
        return iter(list(self._seen))

    def __len__(self):
        return len(list(iter(self)))


def deploy_log(run_ctx: run.RunContext) -> RunLog:
    """The run's bucket logs (bucket/runlog.py): maand=deploy, the run's id, its update_seq."""
    return RunLog.open(run_ctx.bucket, "deploy", run_ctx.plan.get("update_seq"), run_ctx.run_dir.rstrip("/").rsplit("/", 1)[-1])


class StepCallbacks:
    """run.Callbacks of one step task over its RunContext. ctl: deploy/service.Controller (connections,
    addresses, show, warn, watched, hook_timeout, output_tail, python_of); rerender: Rerender; stack: where the
    hook session is entered (opened() closes it with the step)."""

    def __init__(self, run_ctx: run.RunContext, ctl: Any, rerender: Rerender, stack: contextlib.ExitStack):
        self.run, self.ctl, self.rerender, self._stack = run_ctx, ctl, rerender, stack
        self.sleep = time.sleep  # shutdown_delay's wait (tests replace it)
        self._session: Any = None
        cat = run_ctx.catalog or {}
        events = points.GATE_EVENTS + ("after_allocation_stopped", drain.EVENT)
        self.hooked = bool(run_ctx.catalog) and points.any_job_has(cat, events)
        self.writer = progress.Writer(run_ctx.run_dir)
        self.connections = LazyConnections(ctl.connections, functools.partial(rsync.control_dir, run_ctx.run_dir))
        self.addresses = ctl.addresses()
        self.probe_fn = health.prober(self.connections, trust=health.Trust.for_bucket(run_ctx.bucket))
        self.status = health.status_checker(functools.partial(gate.status_request, run_ctx), self._connections,
                                            ctl.python_of, agent=remote)
        job_ports = {j.get("name"): j.get("ports") or {} for j in cat.get("jobs") or []}
        self.probes = gate.GateRunner(self._probe, self.writer, run_ctx.plan, job_ports, self._passed, self._tails)

    @classmethod
    @contextlib.contextmanager
    def opened(cls, run_ctx: run.RunContext, ctl: Any, rerender: Rerender) -> Iterator["StepCallbacks"]:
        """The step's callbacks; their hook session, if one started, ends when the step leaves (however it leaves)."""
        with contextlib.ExitStack() as stack:
            yield cls(run_ctx, ctl, rerender, stack)

    # --- run.Callbacks -----------------------------------------------------------------------------------

    def gate(self, spec: Mapping[str, Any]) -> list[str]:
        if self.hooked and points.gate_hooks(self.run.catalog, spec["job"]):
            return points.run_gate_hooks(self.session(), spec, self.probes)
        return self.probes(spec)

    def after_results(self, step: Mapping[str, Any] | None, ok_ops: list) -> list[tuple[str, str]]:
        if not self.hooked or step is None or step.get("wave") is not None:
            return []
        stops = points.hooked_stops(self.run.catalog, ok_ops)
        return points.after_stops(self.session(), stops) if stops else []

    def before_stops(self, state: run_state.RunState, step: Mapping[str, Any]) -> list[tuple[str, str]]:
        todo = drain.due(self.run.catalog or {}, self.run.plan, state.blocked, step)
        return drain.run(todo, self._drain, self.say, self.sleep) if todo else []

    def _drain(self, batch: drain.Drain) -> list[str]:
        return points.before_stops(self.session(), batch.job, list(batch.hosts), batch.env, batch.alloc_ids)

    def before(self, plan: dict, state: run_state.RunState, step: Mapping[str, Any] | None) -> tuple[list[str], list]:
        if not pre_deploy.due(plan, state, step):
            return [], []
        info = PreDeploy.from_json(plan[pre_deploy.KEY])
        cat = self.run.catalog if self.run.catalog is not None else (catalog.read_catalog(self.run.bucket) or {})
        stagings: dict[str, Any] = {}
        messages, changes = pre_deploy.run_due(plan, state, step, functools.partial(self._pre_deploy, info),
                                               functools.partial(self._rerender, cat, info, stagings))
        return messages, [dataclasses.replace(c, src=stagings[c.job].stage(self.run.bucket, c.job, c.host))
                          for c in changes]

    # --- the hooks ---------------------------------------------------------------------------------------

    def session(self) -> Any:
        """The step's one hook session (hooks/points.session), started on first use: building every worker's
        connection settings reads every host's vars, which a step without hooks must not pay."""
        if self._session is None:
            self._session = self._stack.enter_context(points.session(
                self.run.bucket, self.run.catalog or {}, self.ctl.connections(),
                int(self.ctl.hook_timeout or DEFAULT_TIMEOUT), int(self.ctl.output_tail or DEFAULT_TAIL),
                points.plan_versions(self.run.plan), self._hook_log))
            self._session.runlog = deploy_log(self.run)  # the hooks' lines in the bucket logs (maand=deploy)
        return self._session

    def _pre_deploy(self, info: PreDeploy, job: str) -> list[str]:
        problems = points.pre_deploy(self.session(), [job]).get(job, [])
        order = points.rollout_orders(self.run.bucket, [job]).get(job)
        if not problems and order != info.rollout_orders.get(job):
            self.ctl.warn("job %s: the rollout_order its pre_deploy hooks wrote (%s) applies from the next deploy; "
                          "this run's batches were planned before the hooks ran" % (job, order or "the catalog order"))
        return problems

    def _rerender(self, cat: Mapping[str, Any], info: PreDeploy, stagings: dict,
                  job: str) -> tuple[dict, list[str]]:
        hosts = list(info.rendered[job])
        versions = {(job, h): v for h, v in info.versions.get(job, {}).items()}
        staging, errors = self.rerender(self.run.bucket, cat, job, hosts, versions, info.update_seq)
        if staging is None:
            return {}, errors
        stagings[job] = staging
        return (staging.content.get(job) or {}).get("allocations") or {}, errors

    # --- the gates' probes, screen and tails ---------------------------------------------------------------

    def _probe(self, spec: Mapping[str, Any], watch: progress.GateWatch) -> list[str]:
        return gate.run_gate(spec, self.addresses, probe_fn=self.probe_fn, watch=watch, status=self.status)

    def _connections(self) -> LazyConnections:
        return self.connections

    def _tails(self, job: str, hosts: list[str]) -> dict[str, list[str]]:
        return health.collect_tails(self.connections, remote.worker_root(self.run.plan.get("bucket_id")), job, hosts)

    def _passed(self, spec: Mapping[str, Any]) -> None:
        if not self.ctl.watched:  # the callback shows the pass from the progress record
            self.say("health gate passed: %s on %s" % (spec["job"], ", ".join(spec["hosts"])), "green")

    def _hook_log(self, msg: str) -> None:
        self.say("hook: " + msg)

    def say(self, msg: str, color: str | None = None) -> None:
        """A line for the operator: on the screen, or (watched) in the progress file the callback follows."""
        if self.ctl.watched:
            self.writer.say(msg, color)
        else:
            self.ctl.show(msg, color=color)
