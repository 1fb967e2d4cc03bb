# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sliced deploys: one run over the whole fleet, worked by several controllers (AWX job slices), no Ansible imports.

A sliced job template runs the deploy N times at once, each job (a **slice**) with only its share of the hosts in
its inventory. Slices of one launch share a **run key** (AWX's ``awx_workflow_job_id``, or ``-e maand_run_key``);
each slice is a **member** (``awx_job_id``, or the controller's host and pid). They meet on the state store's
**board** (bucket/storage.py: ``board_put``, ``board_get``, ``board_items``, liveness by ``board_join``):

* the slice that takes the deploy lock is the run's **planner**; a slice that finds the lock held by a run of its own
  key is a **hand** (``join``). Every member writes ``member/<member>``: the hosts of its inventory, their deploy
  states as its ``deploy_state`` read them, and how to reach them (connections, addresses);
* the planner waits until every worker of the catalog is claimed by a live member, or ``maand_slice_wait``
  seconds (``gather``): the workers still unclaimed are planned as unreachable ("no slice claimed it": not
  deployed, and the run fails). It plans the whole fleet once, publishes ``plan/<run_id>`` and then drives every
  step as an unsliced deploy does (folds, gates, hooks, batches, finish): batch sizes, canary holds and wave
  order are the plan's, so they hold fleet-wide, and a failed gate blocks its job in every slice at the next
  step. Before it folds a step it waits for the results of the hands' hosts (``collect``); after it wrote a
  step's requests it publishes those of the hands' hosts and ``step/<run_id>/<k>`` (``hand_out``);
* a hand stages its own hosts' trees from the same catalog and KV and checks that they hash as the plan says
  (``check_staged``), then for each step waits for ``step/<run_id>/<k>``, takes its hosts' requests
  (``take``), runs its agents and puts each result back (``put_result``); at the end it reports the run's verdict
  (``end/<run_id>``, ``await_end``);
* a hand that dies leaves its hosts' results missing: the planner waits for a live member claiming them (a
  relaunched slice) for ``maand_slice_wait`` seconds, then gives them up (no answer: their ops fail). A relaunched
  slice takes up the steps its hosts have no result for; the worker agent answers a request it already applied
  from its journal (worker/agent.py), so nothing restarts twice. A planner that dies ends the run: its hands
  fail, naming it, and the next deploy (a relaunch) plans from what the workers' records say.

``run`` (the board entry) keeps the run key's current run: its id, planner, phase (planning, running, ended) and
``handled``, the workers earlier runs of the key planned (a late slice's run plans only its own hosts).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import time
from typing import Any, Callable, Iterable, Mapping

from .. import bucket
from ..errors import MaandError
from . import run, stage

DEFAULT_WAIT = 120.0  # maand_slice_wait: seconds the planner waits for unclaimed workers, a hand for the plan
KEYS_KEPT = 10  # run keys a planner leaves on the board (the newest): older runs' entries are dropped
JOIN_GRACE = 15.0  # seconds a slice that found the lock held waits for the holder's run entry to appear
POLL = 0.25
SLICE_FILE = "slice.json"  # in the run folder: this controller's part of a sliced run
KEY_RE = re.compile(r"[A-Za-z0-9._:-]{1,100}")  # fullmatch


class SliceError(MaandError):
    """A sliced run that cannot go on (names the run key, the member and the fix)."""


class SharedCheckout(SliceError):
    """A hand whose bucket folder is its planner's (two slices in one checkout would share one run folder)."""


@dataclasses.dataclass(frozen=True)
class Slice:
    """This controller's part of a sliced run: the run key, the member name, how long to wait, and its role."""

    run_key: str
    member: str
    wait: float = DEFAULT_WAIT
    role: str = ""  # "planner" or "hand", once join() decided
    from_workflow: bool = False  # keyed by awx_workflow_job_id alone (no maand_run_key): see whole_fleet

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data):
        data = data or {}
        return cls(str(data.get("run_key") or ""), str(data.get("member") or ""),
                   float(data.get("wait", DEFAULT_WAIT)), str(data.get("role") or ""), bool(data.get("from_workflow")))


def slice_of(run_key="", workflow_id="", job_id="", wait=DEFAULT_WAIT, pid=None) -> Slice | None:
    """The run's Slice from the role's variables (maand_run_key, else AWX's awx_workflow_job_id; the member is
    awx_job_id, else <controller>-<pid>), or None when the run is not sliced. SliceError on a bad value."""
    key = str(run_key or "").strip() or ("awx-workflow-%s" % workflow_id if str(workflow_id or "").strip() else "")
    if not key:
        return None
    if not KEY_RE.fullmatch(key):
        raise SliceError("maand_run_key %r: use 1-100 letters, digits, '.', '_', '-' or ':' (fix: -e maand_run_key=NAME)"
                         % key)
    member = "awx-job-%s" % job_id if str(job_id or "").strip() else "%s-%d" % (socket.gethostname(), pid or os.getpid())
    if float(wait) < 0:
        raise SliceError("maand_slice_wait %r: give seconds >= 0" % wait)
    return Slice(key, member[:100], float(wait), from_workflow=not str(run_key or "").strip())


def whole_fleet(slc: Slice | None, inventory_hosts, workers) -> bool:
    """True when slc is keyed by an AWX workflow alone and the job's inventory holds every worker of the catalog:
    a job of a workflow that AWX did not slice (every job of a workflow gets awx_workflow_job_id; a slice's
    inventory holds only its hosts), which deploys as an unsliced run."""
    return bool(slc is not None and slc.from_workflow and inventory_hosts is not None
                and set(workers) <= set(inventory_hosts))


# --- the board ---------------------------------------------------------------------------------------

class Board:
    """One run key's entries on the bucket's state store, as JSON; clock and sleep can be given (tests)."""

    def __init__(self, store, run_key, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.store, self.key, self.clock, self.sleep = store, run_key, clock, sleep

    def put(self, name, data):
        self.store.board_put(self.key, name, json.dumps(data, sort_keys=True))

    def get(self, name):
        text = self.store.board_get(self.key, name)
        return None if text is None else json.loads(text)

    def items(self, prefix):
        return {name[len(prefix):]: json.loads(text) for name, text in self.store.board_items(self.key, prefix).items()}

    def alive(self, member):
        """Whether member's controller still runs (None: the store cannot tell: assumed alive)."""
        return self.store.board_alive(self.key, member) is not False

    def poll(self, ready: Callable[[], Any], seconds: float | None, dead: Callable[[], str] = lambda: ""):
        """The one wait loop of slices: ready() until it returns something, `seconds` pass (None: no limit) or
        dead() names why waiting is pointless. Returns (value or None, why it stopped: "" / "timeout" / dead's)."""
        deadline = None if seconds is None else self.clock() + seconds
        while True:
            value = ready()
            if value is not None:
                return value, ""
            why = dead()
            if why:
                return None, why
            if deadline is not None and self.clock() >= deadline:
                return None, "timeout"
            self.sleep(POLL)


def board(bucket_dir, slc: Slice, **kw) -> Board:
    return Board(bucket.store(bucket_dir), slc.run_key, **kw)


# --- joining: planner or hand ------------------------------------------------------------------------

def join(brd: Board, slc: Slice, took_lock: bool, run_pid: int, run_start=None, checkout=None) -> Slice:
    """The role of this slice: the planner when it took the deploy lock (it writes the run entry, with its
    checkout: this controller and bucket folder), else a hand when a live run of this key holds it (waiting
    JOIN_GRACE seconds for its entry). SharedCheckout when that hand would work in the planner's own bucket folder;
    SliceError otherwise (the caller reports the lock's holder)."""
    here = {"controller": socket.gethostname(), "path": os.path.abspath(checkout)} if checkout else None
    if took_lock:
        # its token first: a hand that finds the run entry finds its planner alive (a token not yet taken
        # would read as a planner gone)
        brd.store.board_join(slc.run_key, slc.member, run_pid, run_start)
        run = brd.get("run") or {}
        brd.put("run", {"planner": slc.member, "phase": "planning", "run_id": "", "checkout": here,
                        "handled": list(run.get("handled") or []) if run.get("phase") == "ended" else []})
        prune(brd, KEYS_KEPT)
        out = dataclasses.replace(slc, role="planner")
    else:
        def running():
            run = brd.get("run") or {}
            live = run.get("phase") in ("planning", "running") and brd.alive(run.get("planner"))
            return run if live else None
        found, dummy = brd.poll(running, JOIN_GRACE)
        if found is None:
            raise SliceError("no run of run key %s is under way" % slc.run_key)
        if here is not None and found.get("checkout") == here:
            raise SharedCheckout(
                "slice %s would work in the bucket folder of the run's planner %s (%s on %s): every slice needs a "
                "checkout of its own, as each AWX job has. Fix: the inventory's maand_bucket_dir names the planner's "
                "folder; make each slice's inventory from its own checkout (ansible-inventory -i <its checkout>/"
                "maand.yml), or run each slice in its own project folder" % (
                    slc.member, found.get("planner"), here["path"], here["controller"]))
        out = dataclasses.replace(slc, role="hand")
        brd.store.board_join(slc.run_key, slc.member, run_pid, run_start)
    return out


def prune(brd: Board, keep: int):
    """Drop the entries of every run key but this one and the keep - 1 newest others: the planner holds the deploy
    lock, so no run of another key is under way (a slice of a dropped key arriving late plans a run of its own)."""
    others = [k for k in brd.store.board_keys() if k != brd.key]
    for key in others[:max(len(others) - (keep - 1), 0)]:
        brd.store.board_drop(key)


def claim(brd: Board, slc: Slice, hosts, states, connections, addresses):
    """This member's entry: the hosts of its inventory, their deploy states, how the planner reaches them."""
    brd.put("member/%s" % slc.member, {"hosts": sorted(hosts), "states": dict(states), "joined": time.time(),
                                       "connections": dict(connections), "addresses": dict(addresses),
                                       "controller": socket.gethostname()})


def live_members(brd: Board) -> dict:
    """{member: entry} of the members whose controllers run, newest joiner last."""
    members = brd.items("member/")
    return {m: e for m, e in sorted(members.items(), key=lambda me: me[1].get("joined", 0)) if brd.alive(m)}


def owners(members: Mapping[str, Mapping]) -> dict:
    """{host: member} of the live members' hosts (a host claimed twice: the newest joiner, a relaunched slice)."""
    return {host: m for m, entry in members.items() for host in entry.get("hosts") or ()}


@dataclasses.dataclass
class Fleet:
    """What the planner plans over: every claimed host with its state, and the workers nobody claimed."""

    hosts: list
    states: dict
    absent: dict  # host -> why it is not deployed
    connections: dict
    addresses: dict


def gather(brd: Board, slc: Slice, workers: Iterable[str]) -> Fleet:
    """The planner's fleet: the workers of the catalog (less those earlier runs of the key handled), waited for
    until a live member claims each, or slc.wait seconds; the unclaimed ones get an unreachable state."""
    handled = set((brd.get("run") or {}).get("handled") or ())
    wanted = sorted(set(workers) - handled)

    def complete():
        members = live_members(brd)
        return members if not set(wanted) - set(owners(members)) else None
    members, dummy = brd.poll(complete, slc.wait)
    members = members or live_members(brd)
    own = owners(members)
    fleet = Fleet(sorted(set(own) | set(wanted)), {}, {}, {}, {})
    for host in fleet.hosts:
        entry = members.get(own.get(host), {})
        if host not in own:
            fleet.absent[host] = ("no slice of run key %s claimed this worker within %gs (-e maand_slice_wait): "
                                  "not deployed" % (slc.run_key, slc.wait))
            fleet.states[host] = {"reachable": False, "error": fleet.absent[host]}
            continue
        fleet.states[host] = (entry.get("states") or {}).get(host) or {"reachable": False, "error": "no state"}
        for part in ("connections", "addresses"):
            if host in (entry.get(part) or {}):
                getattr(fleet, part)[host] = entry[part][host]
    return fleet


def publish_plan(brd: Board, slc: Slice, run_id: str, plan: Mapping, render: Mapping, fleet: Fleet):
    """The planner's plan for the hands (with the inputs it rendered the trees from), and the run entry running."""
    brd.put("plan/%s" % run_id, {"plan": plan, "render": render, "absent": fleet.absent, "hosts": fleet.hosts})
    run = brd.get("run") or {}
    brd.put("run", dict(run, planner=slc.member, phase="running", run_id=run_id))


def await_plan(brd: Board, slc: Slice, hosts) -> tuple[str, dict]:
    """A hand's wait for the run's plan: (run_id, the plan entry). SliceError when the planner dies first, when
    the plan does not come within slc.wait seconds, or when it was made without this slice's hosts."""
    def ready():
        run = brd.get("run") or {}
        if run.get("phase") == "running" and run.get("run_id"):
            entry = brd.get("plan/%s" % run["run_id"])
            return (run["run_id"], entry) if entry else None
        return None
    found, why = brd.poll(ready, max(slc.wait, JOIN_GRACE) + 60, dead=lambda: _planner_gone(brd))
    if found is None:
        raise SliceError("run key %s: no plan from the planning slice (%s); this slice changed nothing"
                         % (slc.run_key, why if why != "timeout" else "waited %gs" % (slc.wait + 60)))
    run_id, entry = found
    late = sorted(set(hosts) & set(entry.get("absent") or ()))
    if late:
        raise SliceError("run key %s: run %s was planned without this slice's workers %s (it joined after "
                         "maand_slice_wait=%gs); nothing was changed here: relaunch this slice once the run ended"
                         % (slc.run_key, run_id, ", ".join(late[:10]), slc.wait))
    return run_id, entry


def refuse(brd: Board, msg: str):
    """The planner refused the run before any worker was touched: the run entry ended, with why (the hands say it)."""
    run = brd.get("run") or {}
    brd.put("run", dict(run, phase="ended", refused=msg))


def _planner_gone(brd: Board):
    run = brd.get("run") or {}
    if run.get("phase") == "ended":
        return "the planning slice refused the run: %s" % run["refused"] if run.get("refused") else "the run ended"
    planner = run.get("planner")
    return "" if not planner or brd.alive(planner) else "the planning slice %s is gone" % planner


# --- steps -------------------------------------------------------------------------------------------

def save(run_dir, slc: Slice, own_hosts, run_id):
    """slice.json in the run folder: this controller's part (what deploy_step, deploy_agent and finish read)."""
    bucket.atomic_write(os.path.join(run_dir, SLICE_FILE),
                        json.dumps(dict(slc.to_json(), hosts=sorted(own_hosts), run_id=run_id), sort_keys=True))


def load(run_dir):
    """(Slice, own hosts, run_id) of a sliced run folder, or None for a run that is not sliced."""
    try:
        with open(os.path.join(run_dir, SLICE_FILE), encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    return Slice.from_json(data), set(data.get("hosts") or ()), str(data.get("run_id") or "")


def hand_out(brd: Board, run_id: str, key, requests: Mapping[str, Mapping], own, failures):
    """After the planner wrote step key's requests: those of the hands' hosts, then the step entry (its acting
    hosts and the failures of the fold), which is what the hands wait for."""
    for host, request in requests.items():
        if host not in own:
            brd.put("request/%s/%s/%s" % (run_id, key, host), request)
    brd.put("step/%s/%s" % (run_id, key), {"hosts": sorted(requests), "failures": list(failures)})


def collect(brd: Board, slc: Slice, run_id: str, key, hosts, own, write_result):
    """Before the planner folds step key: the results of the hands' hosts, each written with
    write_result(host, data); a host whose member is gone is waited for (a relaunched slice claiming it) up to
    slc.wait seconds, then given up with a reason. Returns {host: why} of the hosts given up."""
    others = sorted(set(hosts) - set(own))
    lost, gone_since = {}, {}
    while others:
        # who left or lives, read before the results: a slice leaves after its last result, never before
        claimed, left = owners(live_members(brd)), brd.items("left/")
        got = brd.items("result/%s/%s/" % (run_id, key))
        for host in [h for h in others if h in got]:
            write_result(host, got[host])
            others.remove(host)
        if not others:
            break
        now = brd.clock()
        for host in list(others):
            if host in claimed:
                gone_since.pop(host, None)
                continue
            quit_by = [m for m, entry in left.items() if host in entry.get("hosts", ())]
            since = gone_since.setdefault(host, now)
            if quit_by or now - since >= slc.wait:
                lost[host] = ("its slice %s stopped before it answered: no answer" % quit_by[0] if quit_by else
                              "its slice is gone and no slice of run key %s claimed it within %gs "
                              "(-e maand_slice_wait): no answer" % (slc.run_key, slc.wait))
                others.remove(host)
        if others:
            brd.sleep(POLL)
    return lost


def take(brd: Board, slc: Slice, run_id: str, key, own, done_before: Callable[[str], bool]):
    """A hand's step key: waits for the planner's step entry, returns ({host: request} of its own acting hosts
    that have no result yet, the step's failures); a host done_before (its result is on the board: a relaunched
    slice catching up) is skipped. ({}, []) when the run ended first; SliceError when the planner is gone."""
    entry, why = brd.poll(lambda: brd.get("step/%s/%s" % (run_id, key)), None, dead=lambda: _planner_gone(brd))
    if entry is None:
        if why == "the run ended":  # the planner finished (a failed job blocked the rest): nothing left here
            return {}, []
        raise SliceError("run key %s, run %s, step %s: %s; this slice stops (relaunch the workflow: the next deploy "
                         "redoes what is left)" % (slc.run_key, run_id, key, why))
    mine = [h for h in entry.get("hosts") or () if h in own and not done_before(h)]
    out = {}
    for host in mine:
        request = brd.get("request/%s/%s/%s" % (run_id, key, host))
        if request is not None:
            out[host] = request
    return out, list(entry.get("failures") or ())


def put_result(run_dir, key, host, data):
    """A hand's agent result of step key for host, onto the board (a run folder that is not a hand's: nothing)."""
    found = load(run_dir)
    if found is None or found[0].role != "hand":
        return
    slc, dummy, run_id = found
    board(run.bucket_of(run_dir), slc).put("result/%s/%s/%s" % (run_id, key, host), data)


def publish_end(brd: Board, run_id: str, end: Mapping, planned_hosts, absent):
    """The planner's end of the run: its verdict for the hands, the run entry ended (its hosts handled)."""
    brd.put("end/%s" % run_id, dict(end))
    run = brd.get("run") or {}
    handled = set(run.get("handled") or ()) | (set(planned_hosts) - set(absent))
    brd.put("run", dict(run, phase="ended", handled=sorted(handled)))


def leave(brd: Board, slc: Slice, hosts, run_pid):
    """A hand that has no step left (done, or stopped by an error): its workers will not answer again, so the
    planner gives up at once what they still owe; its member token is given back."""
    brd.put("left/%s" % slc.member, {"hosts": sorted(hosts)})
    brd.store.board_leave(slc.run_key, slc.member, run_pid)


def await_end(brd: Board, slc: Slice, run_id: str) -> dict:
    """A hand's wait for the planner's end entry (while the planner lives)."""
    entry, why = brd.poll(lambda: brd.get("end/%s" % run_id), None, dead=lambda: _ended_without(brd, run_id))
    if entry is None:
        return {"problems": ["run key %s, run %s: %s before it reported the run's outcome" % (slc.run_key, run_id,
                                                                                              why)]}
    return entry


def _ended_without(brd: Board, run_id):
    if brd.get("end/%s" % run_id) is not None:
        return ""
    return _planner_gone(brd)


# --- the service's side (deploy/service.py step, prepare and finish) ------------------------------------

def reach(ctl, hosts):
    """What this slice tells the others of its hosts: their connection settings and addresses."""
    addresses = ctl.addresses()
    return ctl.connections(sorted(hosts)), {h: addresses.get(h, h) for h in hosts}


def fleet_ctl(ctl, fleet_or_members):
    """The Controller with the other slices' hosts reachable too (gates' `make status`, hooks, probes)."""
    if isinstance(fleet_or_members, Fleet):
        conns, addrs = fleet_or_members.connections, fleet_or_members.addresses
    else:
        conns, addrs = {}, {}
        for entry in fleet_or_members.values():
            conns.update(entry.get("connections") or {})
            addrs.update(entry.get("addresses") or {})
    own_connections, own_addresses = ctl.connections, ctl.addresses

    def connections(hosts=None):
        out = {h: c for h, c in conns.items() if hosts is None or h in hosts}
        out.update(own_connections(hosts))
        return out

    def addresses():
        return dict(addrs, **dict(own_addresses()))
    return dataclasses.replace(ctl, connections=connections, addresses=addresses)


def own_plan(plan, own):
    """The plan with only the ops and gate hosts of this slice's hosts (its segments, what it stages)."""
    out = dict(plan, steps=[])
    for step in plan.get("steps") or []:
        gates = [dict(g, hosts=[h for h in g.get("hosts") or () if h in own]) for g in step.get("gates") or ()]
        out["steps"].append(dict(step, ops={h: [dict(op) for op in ops] for h, ops in (step.get("ops") or {}).items()
                                            if h in own}, gates=[g for g in gates if g["hosts"]]))
    return out


def hash_mismatches(plan, staging, own):
    """A hand's trees must be the plan's: a row of its hosts whose tree hashes otherwise (another checkout)."""
    out = []
    for row in plan.get("rows") or []:
        if row.get("worker") not in own or "hash" not in row or not row.get("job"):
            continue
        entry = staging.content.get(row["job"]) or {}
        got = ((entry.get("allocations") or {}).get(row["worker"]) or entry).get("hash")
        if got != row["hash"]:
            out.append("job %s on %s: this slice renders tree %s, the planning slice planned %s: the slices' checkouts "
                       "differ (run every slice from one commit)" % (row["job"], row["worker"], got, row["hash"]))
    return out


def collected(run_dir, sliced, ctl):
    """A planner's step (or finish): the hands' results of the step in flight into the run folder first
    (collect), and the Controller reaching every live member's hosts; else ctl as it is."""
    if sliced is None:
        return ctl
    slc, own, run_id = sliced
    brd = board(run.bucket_of(run_dir), slc)
    key = run.load_state(run_dir).in_flight
    if key is not None:
        folder = os.path.dirname(run.request_path(run_dir, key, "x"))
        hosts = [n[:-len(".json")] for n in os.listdir(folder) if n.endswith(".json")] if os.path.isdir(folder) else []
        lost = collect(brd, slc, run_id, key, hosts, own, lambda host, data: run.write_result(
            run_dir, key, host, data.get("answer"), data.get("reason")))
        for host, why in lost.items():
            run.write_result(run_dir, key, host, None, why)
    return fleet_ctl(ctl, live_members(brd))


def handed_out(run_dir, key, sliced, hosts, failures):
    """A planner's step: the hands' requests on the board; the acting hosts of its own inventory."""
    if sliced is None:
        return hosts
    slc, own, run_id = sliced
    requests = {h: run.read_request(run_dir, key, h) for h in hosts}
    hand_out(board(run.bucket_of(run_dir), slc), run_id, key, requests, own, failures)
    return [h for h in hosts if h in own]


def hand_step(run_dir, key, sliced):
    """A hand's step: its hosts' requests from the board (their trees staged here), written into its run folder."""
    slc, own, run_id = sliced
    brd = board(run.bucket_of(run_dir), slc)
    requests, failures = take(brd, slc, run_id, key, own,
                              lambda host: brd.get("result/%s/%s/%s" % (run_id, key, host)) is not None)
    bucket = run.bucket_of(run_dir)
    for host, request in requests.items():
        for op in request.get("ops") or ():
            if op.get("sync") and op.get("job"):
                op["src"] = stage.stage_path(bucket, host, op["job"])
        run.write_request(run_dir, key, host, request)
    return sorted(requests), failures
