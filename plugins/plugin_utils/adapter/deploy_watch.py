# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stdout callback maand.core.deploy's watch of a deploy's steps (plugins/callback/deploy.py):
a live line with the elapsed time while a step's make targets run on the workers (the deploy_agent
task), and, when the run stops before its end (Ctrl-C), what was done, what was not, and how to resume."""

from __future__ import annotations

import atexit
import os
import threading
import time

from ansible import constants

TICK = 1.0       # seconds between two redraws of the live line
EVERY = 15.0     # without a live line: seconds between two printed "still running" lines


class Ticker(threading.Thread):
    """Calls on_tick(elapsed) every TICK seconds until stopped."""

    def __init__(self, on_tick, clock=time.monotonic):
        super().__init__(daemon=True)
        self.on_tick = on_tick
        self.clock = clock
        self.start_time = clock()
        self.halt = threading.Event()

    def run(self):
        while not self.halt.wait(TICK):
            self.on_tick(self.clock() - self.start_time)

    def stop(self):
        self.halt.set()
        self.join(timeout=2)


def interrupted_lines(steps, started, passed, current):
    """What an interrupted deploy did: steps ([{index, label}] of the plan), started (indexes whose agents
    ran, in order), passed (labels of batches whose gate passed), current (the index in flight or None)."""
    done = [s for s in steps if s.get("index") in started and s.get("index") != current]
    rest = [s for s in steps if s.get("index") not in started]
    lines = ["interrupted: the deploy stopped before its end%s" % (
        "" if current is None else " during %s" % _label(steps, current))]
    lines.append("  done: %s" % ("; ".join(_label(steps, s.get("index")) for s in done) or "no step finished"))
    if passed:
        lines.append("  gates passed (those batches are promoted): %s" % ", ".join(passed))
    lines.append("  not run: %s" % ("; ".join(_label(steps, s.get("index")) for s in rest) or "nothing"))
    lines.append("  to resume: run the deploy again (ansible-playbook maand.core.deploy); it plans from what the "
                 "workers hold, so promoted allocations show as unchanged, and the deploy lock this run held is "
                 "taken over once its process is gone")
    return lines


def _label(steps, index):
    for step in steps:
        if step.get("index") == index:
            return step.get("label") or "step %s" % index
    return "final promotions" if index in (None, "final") else "step %s" % index


class DeployWatch:
    """Mixin of the callback: watch_* are called from its events."""

    def watch_init(self):
        self._ticker = None
        self._step_index = None
        self._step_hosts = []
        self._started = []
        self._passed = []
        self._answered = 0
        self._ended = False
        self._pid = os.getpid()
        atexit.register(self.watch_exit)

    def watch_step(self, index, hosts):
        """The deploy_step task said which hosts act in step index."""
        self._step_index = index
        self._step_hosts = list(hosts or [])
        if index not in self._started:
            self._started.append(index)

    def watch_gate(self, record):
        if record.get("kind") == "gate" and record.get("state") == "pass" and record.get("batch"):
            self._passed.append(str(record["batch"]))

    def watch_agent_start(self, label):
        """The deploy_agent task started: tick until its next task."""
        self.watch_stop()
        self._answered = 0
        total = len(self._step_hosts)
        if not total:
            return
        every = float(self.get_option("make_every") or EVERY)
        shown = {"next": every}

        def tick(elapsed):
            text = "%s: running, %d of %d worker%s answered (%.0f s)" % (
                label, self._answered, total, "" if total == 1 else "s", elapsed)
            if self._live_mode():
                self._live(text)
            elif elapsed >= shown["next"]:
                shown["next"] += every
                self._emit(text)
        self._ticker = Ticker(tick)
        self._ticker.start()

    def watch_answer(self):
        self._answered += 1

    def watch_stop(self):
        if self._ticker is not None:
            ticker, self._ticker = self._ticker, None
            ticker.stop()
            self._end_live()

    def watch_end(self):
        """The run reached its end (stats): nothing to say at exit."""
        self.watch_stop()
        self._ended = True

    def watch_exit(self):
        """At the process's exit without stats (Ctrl-C, a crash): what the deploy did and did not."""
        if self._ended or os.getpid() != self._pid or self._plan is None or not self._started:
            return
        self._ended = True
        if self._ticker is not None:
            self._ticker.halt.set()
        self._end_live()
        steps = [{"index": s.get("index"), "label": s.get("label")} for s in self._plan.get("steps") or []]
        for line in interrupted_lines(steps, self._started, self._passed, self._step_index):
            self._display.display(line, color=constants.COLOR_WARN, stderr=True)
