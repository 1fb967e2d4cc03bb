# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job verbs refuse a worker whose deployed state is out of sync with the catalog (no Ansible imports).

maand (data/validate.go ValidateBucketUpdateSeq, called by `maand job` before any target runs) has every
worker check its /opt/worker/<bucket_id>/worker.json against maand.db with bin/worker.py and refuses the
whole command when one does not match: ``worker <ip>: bucket id mismatch | worker id mismatch |
update_seq mismatch (run maand deploy)``. maand.core keeps no update_seq on the controller: the bucket's
is the highest a deploy wrote to the workers read (deploy/plan.seen_update_seq, at least the catalog's
update_seq_floor after a takeover), and a deploy writes it to every worker it reaches. So a worker is
stale when its worker.json is missing, names another bucket or worker id, or has an older update_seq
(a later deploy did not reach it: --limit, unreachable); and, beyond maand, when its jobs.json does not
list the job as enabled (a build placed or enabled it there since the last deploy: its files are not
there, or not current). Only the workers the verb would run on are judged; the other workers' answers
only tell the bucket's update_seq.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

from ..catalog import catalog
from ..deploy import plan
from ..worker import layout

CatalogError = catalog.CatalogError


@dataclasses.dataclass(frozen=True)
class Stale:
    """One worker the verb must not run on, and why (maand's words first)."""

    host: str
    reason: str

    def text(self) -> str:
        return "worker %s: %s" % (self.host, self.reason)


def _state(answer: Any) -> dict:
    """A worker's deploy state from its registered maand.core.deploy_state result ({} when there is none)."""
    if not isinstance(answer, Mapping):
        return {}
    state = answer.get("state")
    if isinstance(state, Mapping):
        return dict(state)
    if answer.get("unreachable") or answer.get("failed"):
        return {"reachable": False, "error": str(answer.get("msg") or "no answer").strip()}
    return {}


def states(answers: Mapping[str, Any]) -> dict:
    """{host: deploy state} from {host: registered maand.core.deploy_state result}."""
    return {host: _state(answer) for host, answer in (answers or {}).items()}


def _jobs_entry(state: Mapping[str, Any], job: str) -> Mapping[str, Any] | None:
    for entry in state.get("jobs") or ():
        if isinstance(entry, Mapping) and entry.get("job") == job:
            return entry
    return None


def stale(cat: Mapping[str, Any], bucket_id: str, worker_states: Mapping[str, Mapping[str, Any]],
          targets: Iterable[str], job: str | None = None) -> list[Stale]:
    """The targets that are out of sync with the catalog, in targets' order (see the module's doc)."""
    seq = plan.seen_update_seq(worker_states, cat)
    workers = {w.get("host"): w for w in cat.get("workers") or [] if isinstance(w, Mapping)}
    out = []
    for host in targets:
        state = worker_states.get(host) or {}
        if not state:
            out.append(Stale(host, "its deploy state was not read (the task did not run on it)"))
            continue
        if not state.get("reachable", True):
            out.append(Stale(host, "cannot read its worker.json: %s" % (state.get("error") or "unreachable")))
            continue
        meta = state.get("worker")
        if not isinstance(meta, Mapping):
            out.append(Stale(host, "no worker.json in %s: the bucket was never deployed on this worker"
                             % layout.bucket_root(bucket_id)))
            continue
        if meta.get("bucket_id") != bucket_id:
            out.append(Stale(host, "bucket id mismatch (its worker.json names bucket %s, the catalog %s)"
                             % (meta.get("bucket_id"), bucket_id)))
            continue
        want_id = plan.worker_id(workers.get(host), host)
        if meta.get("worker_id") != want_id:
            out.append(Stale(host, "worker id mismatch (its worker.json has worker_id %s, the catalog %s)"
                             % (meta.get("worker_id"), want_id)))
            continue
        if meta.get("update_seq") != seq:
            out.append(Stale(host, "update_seq mismatch (its worker.json has update_seq %s, the bucket's last deploy "
                             "wrote %d)" % (meta.get("update_seq"), seq)))
            continue
        if job:
            entry = _jobs_entry(state, job)
            if entry is None:
                out.append(Stale(host, "job %s is not deployed on it: its jobs.json does not list the job (a build "
                                 "placed it there since the last deploy)" % job))
            elif entry.get("disabled"):
                out.append(Stale(host, "job %s is disabled in its jobs.json (a build enabled it since the last deploy)"
                                 % job))
    return out


def refusal(found: list[Stale], verb: str) -> str:
    """The error of a job verb refused for stale workers: each worker, what is stale, and the fix."""
    return ("%s: %d worker(s) out of sync with the catalog; nothing was run:\n  %s\n"
            "Fix: deploy first (ansible-playbook -i <bucket>/maand.yml maand.core.deploy; maand: run maand deploy), "
            "then run the job verb again" % (verb, len(found), "\n  ".join(s.text() for s in found)))


def targets(cat: Mapping[str, Any], job: str, hosts: Iterable[str], workers: Iterable[str] = ()) -> list[str]:
    """The workers a job verb runs on: the job's active allocations on the play's hosts (narrowed to
    `workers` when given), in the play's order."""
    active = {a.get("worker") for a in cat.get("allocations") or []
              if a.get("job") == job and a.get("state", "active") == "active"}
    wanted = set(workers or ())
    return [h for h in hosts if h in active and (not wanted or h in wanted)]


@dataclasses.dataclass(frozen=True)
class Verdict:
    """check(): the workers the verb runs on, those refused, and the message (the error when any is refused)."""

    hosts: list
    stale: list
    msg: str


def check(bucket: str, job: str, hosts: Iterable[str], workers: Iterable[str], answers: Mapping[str, Any],
          verb: str) -> Verdict:
    """The front door: read the built catalog, judge the workers the verb would run on against the answers of
    every worker's deploy state read, over the last built catalog (stale or not: a job verb is an emergency
    verb, catalog/freshness.py). Raises catalog.CatalogError (unbuilt catalog)."""
    cat = catalog.read_built(bucket, allow_stale=True)
    chosen = targets(cat, job, hosts, workers)
    found = stale(cat, str(cat.get("bucket_id") or ""), states(answers), chosen, job)
    msg = refusal(found, verb) if found else "in sync with the catalog: %s" % (", ".join(chosen) or "no worker")
    return Verdict(chosen, found, msg)
