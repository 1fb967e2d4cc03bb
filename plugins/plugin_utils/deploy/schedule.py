# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduler: the reconciler's decisions as waves, batches and steps (pure Python, no I/O).

``schedule(decided, jobs, rollout_orders)`` takes a deploy/reconcile.ReconcileResult and returns a
``Schedule``: the ordered steps, each allocation's batch label and the notes the plan prints. Step 0
reconciles (worker metadata, stops, removes, purges); then, waves in ``deployment_seq`` order, batch i
of every job of the wave runs side by side in one step. A job's batches: its starts (one gate after
the last, or one per batch with ``start_gate: every_batch``), then its upgrades (gated one by one),
syncs riding in the first; a job_control job is one batch; ``auto_revert`` puts the revert of upgrade
batch k in the job's slot k + 1. Fresh starts ship their files early (_presync).

The reconciler's records are not edited: an op the schedule changes is a copy (``Op.but``).
"""

from __future__ import annotations

import dataclasses

from .records import Gate, Op, Step
from .scope import hook_events

START_GATES = ("last_batch", "every_batch")  # the manifest's start_gate: maand's single gate after the starts, or one per batch


def batches(items, size):
    """Split items into consecutive batches of at most size (0 or less = one batch of everything).

    Every item appears exactly once, in the original order.
    """
    items = list(items)
    if not items:
        return []
    if size is None or size <= 0 or size >= len(items):
        return [items]
    return [items[i:i + size] for i in range(0, len(items), size)]


@dataclasses.dataclass(slots=True)
class Schedule:
    """The scheduler's output: the steps, each allocation's batch label, the notes for the plan's lines."""

    steps: list = dataclasses.field(default_factory=list)  # [Step]
    batches: dict = dataclasses.field(default_factory=dict)  # (job, host) -> the label of its batch
    notes: list = dataclasses.field(default_factory=list)

    def to_json(self):
        return {"steps": [s.to_json() for s in self.steps],
                "batches": [[job, host, label] for (job, host), label in self.batches.items()],
                "notes": list(self.notes)}

    @classmethod
    def from_json(cls, data):
        return cls([Step.from_json(s) for s in data["steps"]],
                   {(job, host): label for job, host, label in data["batches"]}, list(data["notes"]))


@dataclasses.dataclass(slots=True)
class Batch:
    """One slot of a job's rollout: its label, ops and gate; phase start, upgrade, sync or revert; the
    conditional revert of the job's batch ``of`` riding in it (auto_revert)."""

    label: str
    ops: list
    gate: Gate | None
    phase: str = "sync"
    revert_ops: list = dataclasses.field(default_factory=list)
    revert_gate: Gate | None = None
    revert_of: int | None = None  # the index (among the job's batches) of the batch the revert undoes
    step: int | None = None  # the step it was placed in


def schedule(decided, jobs, rollout_orders=None):
    """The steps of a ReconcileResult (decided); jobs: the catalog's {name: job}; rollout_orders: {job: the
    rollout_order a hook put in the KV}."""
    return Scheduler(decided, jobs, rollout_orders or {}).run()


class Scheduler:
    """One schedule() call: the decisions, the catalog's jobs, and the steps placed so far."""

    def __init__(self, decided, jobs, rollout_orders):
        self.decided, self.jobs, self.rollout_orders = decided, jobs, rollout_orders
        self.specs = {name: Gate.from_json(spec) for name, spec in decided.gates.items()}  # each job's gate spec
        self.out = Schedule()

    def run(self):
        waves = {}
        for name, rollout in self.decided.rollout.items():
            if rollout:
                waves.setdefault(self.jobs[name].get("deployment_seq", 0) or 0, []).append(name)
        # Metadata alone needs no step of its own: it rides first in each host's request of its first wave
        # step (one agent round trip per host less; a failed meta op is a run error either way).
        fold_meta = bool(waves) and not any(self.decided.cleanup.values())
        self._schedule_reconcile(with_meta=not fold_meta)
        for wave in sorted(waves):
            self._schedule_wave(wave, {name: self._job_batches(name) for name in sorted(waves[wave])})
        if fold_meta and self.decided.meta:
            self._fold_meta()
        self._presync()
        return self.out

    def _fold_meta(self):
        """With nothing to reconcile, a worker's metadata rides first in its request of the first wave step in
        which it acts (its own batch: no session of pure metadata on a worker whose batch comes later), or of
        the first wave step when it acts in none."""
        first = {}
        for step in self.out.steps:
            for host in step.ops:
                first.setdefault(host, step)
        for host in sorted(self.decided.meta):
            ops = first.get(host, self.out.steps[0]).ops
            ops[host] = [self.decided.meta[host]] + ops.get(host, [])

    def _schedule_reconcile(self, with_meta=True):
        """Step 0: per host, metadata first, then stops, removes and the purge."""
        meta, cleanup = self.decided.meta, self.decided.cleanup
        step0 = {}
        for host in sorted((set(meta) if with_meta else set()) | set(cleanup)):
            ops = [meta[host]] if with_meta and host in meta else []
            todo = cleanup.get(host, [])
            ops += sorted((o for o in todo if o.kind == "stop"), key=lambda o: o.job)
            ops += sorted((o for o in todo if o.kind == "remove"), key=lambda o: o.job)
            ops += [o for o in todo if o.kind == "purge"]
            if ops:
                step0[host] = ops
        if step0:
            self.out.steps.append(Step(0, None, True, "reconcile",
                                       sorted({o.job for ops in step0.values() for o in ops if o.job}), step0, []))

    def _presync(self):
        """A fresh start of a later step (nothing of the job on the worker: no record, no tree, no failed
        start; and no deploy hooks, whose commands run in the job's gates) ships its files in the first
        wave step in which its host acts, with that step's own files: one rsync per host for every wave of a
        first deploy (maand syncs a worker's whole tree first, too). Its run op then only starts the job, in
        its own step; when the early copy fails, the job fails and is blocked there. Files of an upgrade never
        travel early: the running version keeps its tree until its own batch."""
        first = {}
        for step in self.out.steps:
            for host in step.ops if step.wave is not None else ():  # never into the reconcile step
                first.setdefault(host, step)
        for step in self.out.steps:
            for host, ops in step.ops.items():
                if first.get(host, step) is step:
                    continue
                for i, op in enumerate(ops):
                    if (op.kind == "run" and op.sync and op.target == "start" and (op.job, host) in self.decided.fresh
                            and not hook_events(self.jobs[op.job])):
                        first[host].ops[host].append(Op.files(op))
                        ops[i] = op.but(sync=False)

    def _job_batches(self, name):
        """One job's rolling batches in order: starts, then upgrades; sync-only ops ride in the first.

        Start batches follow maand (rolloutStartBatches): they run one after another and the job's gate
        runs once, after the last of them, over every started allocation (a quorum service cannot be
        healthy with its first member alone); `start_gate: every_batch` in the manifest gates each one.
        Upgrade batches are gated one by one (rolloutRestartBatches). With `auto_revert`, each upgrade
        batch has a revert in the job's next slot, run only when that batch failed (_add_reverts)."""
        job, rollout = self.jobs[name], self.decided.rollout[name]
        if "job_control" in hook_events(job):
            return [self._job_control_batch(name, rollout)]
        seq, sources, started = self._sequence(name, job, rollout)
        total = {phase: sum(1 for entry in seq if entry[0] == phase) for phase in ("start", "upgrade")}
        total["sync"] = 1
        once = job.get("start_gate", START_GATES[0]) != "every_batch" and total["start"] > 1
        counter = {"start": 0, "upgrade": 0, "sync": 0}
        promoted = self._promoted(name, seq)  # auto_promote: canary and upgrade batches counted apart
        out = []
        for pos, (phase, ops) in enumerate(seq):
            counter[phase] += 1
            label = "%s %s batch %d/%d" % (name, self._shown(name, phase, ops), counter[phase], total[phase])
            if promoted is not None and phase == "upgrade":
                label = promoted[pos]
            deferred = once and phase == "start"  # maand: one gate after the last start batch
            last_start = deferred and counter["start"] == total["start"]
            where = {"seq": seq, "phase": phase, "index": counter[phase] - 1, "count": total[phase],
                     "last": pos == len(seq) - 1, "source": sources.get(phase, "default")}
            gate = self._batch_gate(name, ops, label, deferred, last_start, started, where)
            for o in ops:
                self.out.batches[(name, o.host)] = label
            held = deferred and not last_start
            ops = [o.but(held=True) if held and o.action != "sync" and not o.promote_now else o for o in ops]
            out.append(Batch(label, ops, gate, phase))
        if job.get("auto_revert"):
            self._add_reverts(name, out)
        return out

    def _sequence(self, name, job, rollout):
        """([(phase, ops)] of a job's batches in order, where each phase's order came from ("kv", "default"),
        the hosts of its starts in order)."""
        starts, start_src = self._ordered(name, rollout.start)
        upgrades, upgrade_src = self._ordered(name, rollout.upgrade)
        if upgrade_src == "default":  # a rollback after a failed attempt: the workers it left down come back first
            upgrades = sorted(upgrades, key=lambda o: o.restore != "current")
        start_b = batches(starts, int(job.get("max_concurrent_starts") or 0))
        upgrade_size = job.get("max_concurrent_upgrades")
        size = 1 if upgrade_size is None else max(int(upgrade_size), 1)
        canaries = set(self.decided.auto_promote.get(name) or ())  # auto_promote: the canaries' batches first
        upgrade_b = (batches([o for o in upgrades if o.host in canaries], size)
                     + batches([o for o in upgrades if o.host not in canaries], size))
        seq = [("start", b) for b in start_b] + [("upgrade", b) for b in upgrade_b]
        self._note_percent(name, job, {"max_concurrent_starts": start_b, "max_concurrent_upgrades": upgrade_b})
        if rollout.sync:
            if seq:
                seq[0] = (seq[0][0], rollout.sync + seq[0][1])
            else:
                seq = [("sync", list(rollout.sync))]
        return seq, {"start": start_src, "upgrade": upgrade_src}, [o.host for o in starts]

    def _note_percent(self, name, job, used):
        """A batch size written as a percentage: the plan names the number build resolved it to."""
        percents = job.get("batch_percent") or {}
        for field in ("max_concurrent_starts", "max_concurrent_upgrades"):
            if field in percents and used[field]:
                self.out.notes.append("job %s: %s %s of %s active allocation(s) = batches of %s" % (
                    name, field, percents[field], percents.get("of", "?"), job.get(field)))

    def _shown(self, name, phase, ops):
        """The phase as a batch label shows it: rollback (every op restores), canary, or the phase itself."""
        if phase == "upgrade" and all(o.restore for o in ops):
            return "rollback"
        if phase == "upgrade" and isinstance(self.decided.options.target, str):  # maand.core.job's rolling restart
            return self.decided.options.target
        if phase == "upgrade" and name in self.decided.canaries:
            canaries = self.decided.auto_promote.get(name)
            if canaries is None or {o.host for o in ops} <= set(canaries):
                return "canary"
            return "upgrade"
        return phase

    def _promoted(self, name, seq):
        """auto_promote: {position in seq: label} of the job's upgrade batches, the canaries' counted apart
        ("api canary batch 1/1", then "api upgrade batch 1/2", ...); None for any other job."""
        if self.decided.auto_promote.get(name) is None:
            return None
        kinds = {pos: self._shown(name, phase, ops) for pos, (phase, ops) in enumerate(seq) if phase == "upgrade"}
        count, out = {}, {}
        for pos in sorted(kinds):
            count[kinds[pos]] = count.get(kinds[pos], 0) + 1
            out[pos] = "%s %s batch %d/%d" % (name, kinds[pos], count[kinds[pos]],
                                              sum(1 for k in kinds.values() if k == kinds[pos]))
        return out

    def _batch_gate(self, name, ops, label, deferred, last_start, started, where):
        """The gate after one batch of a job (None: no gate): its probes on the batch's hosts (for maand's
        single gate after the last start batch, on every started host) and the job's hooks, when it has any."""
        job = self.jobs[name]
        lifecycle_hosts = [o.host for o in ops if o.action != "sync"]
        if name not in self.specs or not lifecycle_hosts or (deferred and not last_start and not hook_events(job)):
            return None
        gate = self.specs[name].on(started if last_start else lifecycle_hosts)
        if last_start:  # its hosts span every start batch: the label names the batch it follows
            gate.label = label
        if hook_events(job):
            phase = where["phase"]
            order = [o.host for p, b in where["seq"] if p == phase for o in b if o.action != "sync"]
            gate.hooks = {"phase": "new" if phase == "start" else "update", "batch_index": where["index"],
                          "batch_count": where["count"], "order": order, "order_source": where["source"],
                          "last": where["last"]}
            if last_start:  # after_allocation_started runs for this batch; probes for every start
                gate.hooks["batch_hosts"] = lifecycle_hosts
            elif deferred:  # only the batch's hooks: no probes, no health_check
                gate.checks = []
                gate.hooks["health"] = False
        return gate

    def _add_reverts(self, name, out):
        """auto_revert: the revert of upgrade batch k rides in the job's slot k + 1 (a slot of its own
        after the last batch). It restores the promoted tree (history/<job>/current) on the batch's
        workers, restarts it and gates it; the run state issues it only when batch k failed
        (deploy/run_state.py: revert_of), and the job's later batches never run (it is blocked)."""
        for k, batch in enumerate(list(out)):
            if batch.phase != "upgrade":
                continue
            ops = [self.decided.reverts[o.id] for o in batch.ops if o.id in self.decided.reverts]
            if not ops:
                continue
            if k + 1 == len(out):
                out.append(Batch("%s revert (if %s fails)" % (name, batch.label[len(name) + 1:]), [], None, "revert"))
            slot = out[k + 1]
            slot.revert_ops, slot.revert_gate, slot.revert_of = ops, self._revert_gate(name, batch, ops), k
        if any(b.revert_ops for b in out):
            self.out.notes.append("job %s: auto_revert: an upgrade batch that fails gets its promoted tree back "
                                  "(restart, gate), the job's later batches do not run, the deploy ends failed" % name)

    def _revert_gate(self, name, batch, ops):
        if name not in self.specs:
            return None
        gate = self.specs[name].on([o.host for o in ops], revert=True,
                                   label="%s revert of %s" % (name, batch.label[len(name) + 1:]))
        if hook_events(self.jobs[name]):
            gate.hooks = {"phase": "update", "batch_index": 0, "batch_count": 1, "order": [o.host for o in ops],
                          "order_source": "default", "last": False}
        return gate

    def _ordered(self, name, ops):
        """ops in the order a hook put in maand/job/<job> rollout_order when it names exactly these
        allocations (maand ResolveRolloutOrder), else as they are; (ops, "kv" | "default")."""
        raw = self.rollout_orders.get(name)
        if not raw or not ops:
            return list(ops), "default"
        order = [ip.strip() for ip in str(raw).split(",") if ip.strip()]
        hosts = [o.host for o in ops]
        problem = None
        if len(set(order)) != len(order):
            problem = "duplicate allocation"
        elif set(order) != set(hosts):
            problem = "it names %s, the batch has %s" % (",".join(order), ",".join(hosts))
        if problem:
            self.out.notes.append("job %s: rollout_order %r ignored (%s); using the catalog order" % (name, raw, problem))
            return list(ops), "default"
        by_host = {o.host: o for o in ops}
        return [by_host[h] for h in order], "kv"

    def _job_control_batch(self, name, rollout):
        """A job_control job: its whole rollout is one batch whose ops only sync files; the job's
        job_control command starts, restarts or reloads it in the batch's gate (maand deployJobWithCommands)."""
        lifecycle = [o.but(target=None) for o in rollout.start + rollout.upgrade]
        ops = rollout.sync + lifecycle
        label = "%s job_control" % name
        gate = None
        if lifecycle:
            gate = self.specs[name].on([o.host for o in lifecycle], hooks={
                "job_control": True, "new": [o.host for o in rollout.start],
                "updated": [o.host for o in rollout.upgrade], "last": True})
        for o in ops:
            self.out.batches[(name, o.host)] = label
        return Batch(label, ops, gate)

    def _schedule_wave(self, wave, subs):
        """Batch i of every job in the wave runs side by side in one step (with the conditional
        revert of the job's batch i - 1, auto_revert)."""
        depth = max(len(v) for v in subs.values())
        for i in range(depth):
            ops_by_host, labels, gates, step_jobs = {}, [], [], []
            for name in sorted(subs):
                if i >= len(subs[name]):
                    continue
                batch = subs[name][i]
                batch.step = len(self.out.steps)
                labels.append(batch.label)
                step_jobs.append(name)
                if batch.gate:
                    gates.append(batch.gate)
                for o in batch.ops:
                    ops_by_host.setdefault(o.host, []).append(o)
                if batch.revert_ops:
                    of = subs[name][batch.revert_of].step
                    for o in batch.revert_ops:
                        ops_by_host.setdefault(o.host, []).append(o.but(revert_of=of))
                    if batch.revert_gate:
                        gates.append(batch.revert_gate.but(revert_of=of))
            self.out.steps.append(Step(len(self.out.steps), wave, i == depth - 1,
                                       "wave %d: %s" % (wave, "; ".join(labels)), step_jobs, ops_by_host, gates))
