# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one wait loop of health checks (no Ansible imports), as kubernetes.core
plugins/module_utils/k8s/waiter.py: a clock, `Waiter.wait`, and the predicates beside it
(health/probes.py: one per probe type, tcp, http(s), ssh, and the job's `make status`).

Both the deploy's health gates (deploy/gate.py run_gate) and the `health_check` verb
(ops/health_check.py run) wait here; only their budgets differ:

* a gate: the job's `health_check.wait.attempts` x `wait.interval_seconds` (bucket/job_checks.py
  DEFAULT_HEALTH: 30 x 1 s), every probe of every host of the batch on one budget;
* the verb: each job's own budget, the workers' SSH port dial on the default one, or
  `maand_wait_seconds` in all (a deadline instead of a count); without `maand_wait`, one round.

One round tries everything that has not passed yet and returns what is still pending. A pending item
is retried while its budget allows (another try, or time before its deadline); the loop sleeps the
shortest interval among those, and ends when nothing is pending (passed), when no pending item may be
retried (out of budget), or at once when an item says it is fatal (a job whose `make status` reports
it not running: fail fast, there is nothing left to wait for). A fatal item ends the wait of its scope:
every item when it has none (a gate: one job, one batch), else only the items of its scope (the verb: one
job on one worker), the others waiting on.

Two more ends, for the deploy's gates: a budget's `limit` (the job's progress_deadline, what is left of it
when the gate begins) stops retrying at that many seconds into the wait whatever the count allows
(`Waited.deadline`); and a `hold` (the job's min_healthy_time) keeps the wait going after everything passed:
`recheck` runs every interval until the hold's seconds went by with nothing failing (passed), or something
fails inside it (`Waited.flapped`, not passed).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Hashable, Mapping, Sequence

from ..bucket.job_checks import DEFAULT_HEALTH


@dataclasses.dataclass(frozen=True)
class Budget:
    """How long one thing may be waited for: attempts x interval seconds (each try bounded by
    timeout seconds), or, when seconds > 0, as many tries as fit in that many seconds."""

    attempts: int = DEFAULT_HEALTH["attempts"]
    interval: float = DEFAULT_HEALTH["interval_seconds"]
    timeout: float = DEFAULT_HEALTH["timeout_seconds"]
    seconds: float = 0.0
    limit: float = 0.0  # > 0: no try starts this many seconds into the wait (a deadline over the count)

    @classmethod
    def of(cls, spec: Mapping[str, Any] | None) -> "Budget":
        """The budget of a gate spec (bucket/job_checks.resolve_health: attempts, interval_seconds,
        timeout_seconds); a missing key takes the default."""
        spec = spec or {}
        return cls(int(spec.get("attempts") or DEFAULT_HEALTH["attempts"]),
                   float(spec.get("interval_seconds", DEFAULT_HEALTH["interval_seconds"])),
                   float(spec.get("timeout_seconds") or DEFAULT_HEALTH["timeout_seconds"]))

    def once(self) -> "Budget":
        """This budget for a single try (the verb without maand_wait)."""
        return dataclasses.replace(self, attempts=1, seconds=0.0)

    def within(self, seconds: float) -> "Budget":
        """This budget with a deadline instead of a count (maand_wait_seconds)."""
        return dataclasses.replace(self, seconds=float(seconds))

    def capped(self, limit: float) -> "Budget":
        """This budget, stopped limit seconds into the wait (progress_deadline) whatever its count allows."""
        return dataclasses.replace(self, limit=max(float(limit), 1e-9))

    def cut(self, elapsed: float) -> bool:
        """Whether its limit has come, elapsed seconds into the wait."""
        return self.limit > 0 and elapsed >= self.limit

    def allows(self, tries: int, elapsed: float) -> bool:
        """Whether something that failed `tries` times, `elapsed` seconds into the wait, is tried again."""
        if self.cut(elapsed):
            return False
        if self.seconds > 0:
            return elapsed < self.seconds
        return tries < self.attempts


@dataclasses.dataclass
class Pending:
    """One thing a round left unhealthy: its key (stable across rounds), budget and reason; fatal
    ends the wait of its scope at once (scope None: the whole wait)."""

    key: Hashable
    budget: Budget
    reason: str = ""
    fatal: bool = False
    scope: Hashable = None


@dataclasses.dataclass
class Waited:
    """How a wait ended: passed (nothing pending), the rounds it took, the seconds it waited, what
    was still pending and, when it stopped early, the fatal items."""

    passed: bool
    rounds: int
    elapsed: float
    pending: list
    fatal: list
    deadline: bool = False  # it ended because a budget's limit came (not its count, not a fatal item)
    held: float = 0.0  # seconds it stayed healthy after passing (a hold)
    flapped: bool = False  # something failed inside the hold

    @property
    def stopped_early(self) -> bool:
        return bool(self.fatal)


RoundFn = Callable[[int], Sequence[Pending]]
OnRound = Callable[[int, float, Sequence[Pending], bool], None]


class Waiter:
    """Runs rounds until nothing is pending, the budgets are spent, or a pending item is fatal (then the
    items of its scope are not retried; a fatal item without a scope ends the wait).

    sleep and clock are passed in, so tests step a fake clock (no timing in tests)."""

    def __init__(self, sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        self.sleep = sleep
        self.clock = clock

    def wait(self, attempt: RoundFn, on_round: OnRound | None = None, hold: Budget | None = None,
             recheck: RoundFn | None = None) -> Waited:
        """attempt(round) -> the items still pending after that round (round counts from 1).

        on_round(round, elapsed, pending, retrying) is called after every round that left something
        pending, retrying telling whether another round follows. hold (a Budget: seconds, interval, limit) with
        recheck(round) -> the items failing now: after everything passed, stay healthy that long (_hold)."""
        start = self.clock()
        tries: dict = {}
        rounds = 0
        while True:
            rounds += 1
            pending = list(attempt(rounds))
            elapsed = self.clock() - start
            if not pending:
                if hold is not None and hold.seconds > 0 and recheck is not None:
                    return self._hold(start, rounds, hold, recheck)
                return Waited(True, rounds, elapsed, [], [])
            fatal = [p for p in pending if p.fatal]
            ended = {p.scope for p in fatal}
            for item in pending:
                tries[item.key] = tries.get(item.key, 0) + 1
            left = [] if None in ended else [p for p in pending if p.scope not in ended
                                             and p.budget.allows(tries[p.key], elapsed)]
            if on_round is not None:
                on_round(rounds, elapsed, pending, bool(left))
            if not left:
                cut = not fatal and any(p.budget.cut(elapsed) for p in pending)
                return Waited(False, rounds, elapsed, pending, fatal, deadline=cut)
            self.sleep(_nap([p.budget for p in left], elapsed))

    def _hold(self, start: float, rounds: int, hold: Budget, recheck: RoundFn) -> Waited:
        """After a pass: recheck every hold.interval until hold.seconds went by with nothing failing (passed), a
        recheck finds something failing (flapped) or hold.limit, seconds into the whole wait, comes (deadline)."""
        passed_at = self.clock()
        while True:
            now = self.clock()
            held, elapsed = now - passed_at, now - start
            if held >= hold.seconds:
                return Waited(True, rounds, elapsed, [], [], held=held)
            if hold.cut(elapsed):
                return Waited(False, rounds, elapsed, [], [], deadline=True, held=held)
            self.sleep(max(0.0, min(_nap([hold], elapsed), hold.seconds - held)))
            rounds += 1
            failing = list(recheck(rounds))
            if failing:
                now = self.clock()
                return Waited(False, rounds, now - start, failing, failing, held=now - passed_at, flapped=True)


def _nap(budgets: Sequence[Budget], elapsed: float) -> float:
    """The sleep before the next round: the shortest interval, not past the nearest limit."""
    nap = min(b.interval for b in budgets)
    limits = [b.limit - elapsed for b in budgets if b.limit > 0]
    return max(0.0, min([nap] + limits))
