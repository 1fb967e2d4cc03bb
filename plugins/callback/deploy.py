# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""stdout callback maand.core.deploy: a deploy as an operator reads it (the formatting is
plugins/plugin_utils/deploy/view.py, the progress records plugins/plugin_utils/deploy/progress.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: deploy
type: stdout
short_description: Shows a maand deploy as plan, live batch progress and a verdict table
version_added: "1.0.0"
description:
  - >-
    A stdout callback for the playbooks of maand.core. For C(maand.core.deploy) it prints the plan with
    its counts first (for example C(plan: 2 restart, 1 stop, 3 unchanged; gates: api)), then one line per
    step and, while a health gate waits, one live line per rolling batch (for example
    C(api upgrade batch 1/3: waiting for 10.0.0.1 http :30000/health (attempt 4/30, 3.1 s))), and at the end a
    verdict table (job, worker, action, result, gate time, version before and after), the result of every
    worker (ok, failed or unreachable) and one final line such as C(deploy done: 2 restarted, 1 unreachable,
    3 unchanged). It replaces PLAY RECAP, which counts Ansible tasks, not allocations; after C(--check) the plan
    is the result and one line says nothing was changed.
  - >-
    On a terminal the live line is redrawn in place; otherwise (a log, a CI job) a line is printed per
    change, at most one per O(throttle) seconds of a gate's wait.
  - >-
    The gates run inside one controller task, so their progress comes from the run's progress file
    (C(<bucket>/data/.deploy-run/<run_id>/progress.jsonl)), which the callback follows from a thread while
    the task runs.
  - >-
    Every other playbook of maand.core (build, facts, status, health_check, gc, run_command, job, info, logs,
    cat, state, init, ...) prints as the deploy does: no play or task banners and no PLAY RECAP, the verb's
    own table or summary, each error once as C(FAILED: ...) (with kind, file, field and fix where the verb
    has them), never a result dumped as JSON. With C(-e maand_format=json) the verb's report is one JSON
    document alone on standard output; every other line goes to standard error.
  - >-
    When a deploy stops before its end (Ctrl-C), it prints what was done, what was not, and how to resume.
  - >-
    A play or task that is not of maand.core (a playbook of yours around the collection's) prints as with
    the default callback, without C(skipping) lines, and keeps its PLAY RECAP.
  - >-
    Enabled by the C(ansible.cfg) that C(maand.core.init) writes. The options of the default callback
    (such as O(display_ok_hosts)) apply too.
extends_documentation_fragment:
  - default_callback
  - result_format_callback
options:
  live:
    description:
      - V(auto) redraws the live line in place when standard output is a terminal, V(always) always,
        V(never) prints a line per change.
    type: str
    default: auto
    choices: [auto, always, never]
    env:
      - name: MAAND_DEPLOY_LIVE
    ini:
      - section: callback_maand_deploy
        key: live
  throttle:
    description:
      - Without the live line, the least time in seconds of a gate's wait between two printed progress
        lines of one batch (the first attempt and the end always print).
    type: float
    default: 2.0
    env:
      - name: MAAND_DEPLOY_THROTTLE
    ini:
      - section: callback_maand_deploy
        key: throttle
  make_every:
    description:
      - >-
        While a step's make targets run on the workers, a live line counts the seconds (for example
        C(wave 0: api upgrade batch 1/2: running, 1 of 2 workers answered (12 s))); without the live line,
        one such line is printed every O(make_every) seconds.
    type: float
    default: 15.0
    env:
      - name: MAAND_DEPLOY_MAKE_EVERY
    ini:
      - section: callback_maand_deploy
        key: make_every
requirements:
  - set as stdout_callback in ansible.cfg (V(stdout_callback = maand.core.deploy)) or with
    E(ANSIBLE_STDOUT_CALLBACK=maand.core.deploy)
"""

EXAMPLES = r"""
# <bucket>/ansible.cfg (maand.core.init writes it)
# [defaults]
# stdout_callback = maand.core.deploy
#
# or for one run:
# ANSIBLE_STDOUT_CALLBACK=maand.core.deploy ansible-playbook -i maand.yml maand.core.deploy
"""

RETURN = r"""
"""

import shutil
import sys
import threading

from ansible import constants, context
from ansible.playbook.task_include import TaskInclude
from ansible.plugins.callback import default

from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import deploy

DEPLOY = "maand.core.deploy_"
QUIET_ACTIONS = ("validate_argument_spec", "assert", "include_tasks", "import_tasks",
                 "maand.core.cert_metrics")  # prints its own line (and a failure as a warning, after a deploy)
# failed: their message only (maand.core.preflight: the inventory did not load, an unknown extra var)
CHECK_ACTIONS = ("assert", "fail", "maand.core.preflight")
POLL_SECONDS = 0.25


def short_action(task):
    action = task.action or ""
    return action[len("ansible.builtin."):] if action.startswith("ansible.builtin.") else action


class Follower(threading.Thread):
    """Reads a progress file while one task runs and hands each new record to on_record."""

    def __init__(self, run_dir, on_record):
        super().__init__(daemon=True)
        self.reader = deploy.Reader(deploy.progress_path(run_dir))
        self.reader.offset = deploy.mark(run_dir)
        self.on_record = on_record
        self.halt = threading.Event()
        self.count = 0

    def run(self):
        while not self.halt.wait(POLL_SECONDS):
            self.drain()

    def drain(self):
        for record in self.reader.read():
            self.count += 1
            self.on_record(record)

    def stop(self):
        self.halt.set()
        self.join(timeout=5)
        self.drain()


class CallbackModule(adapter.DeployWatch, adapter.VerbView, default.CallbackModule):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "maand.core.deploy"

    def __init__(self):
        super().__init__()
        self._lock = threading.RLock()
        self._live_text = ""
        self._run_dir = ""
        self._plan = None
        self._follower = None
        self._verdict = None
        self._verdict_line = ""
        self._printed = {}  # batch -> elapsed of its last printed wait line (no live line)
        self._said = set()  # failure messages already printed (steps, plan, finish repeat them)
        self.verb_init()
        self.watch_init()

    # --- output ---------------------------------------------------------------------------------

    def _live_mode(self):
        mode = self.get_option("live")
        if mode == "always":
            return True
        if mode == "never":
            return False
        try:
            return sys.stdout.isatty()
        except (AttributeError, ValueError):
            return False

    def _clear_live(self):
        if self._live_text:
            sys.stdout.write("\r\x1b[K")
            sys.stdout.flush()
            self._live_text = ""

    def _emit(self, line, color=None, stderr=False):
        """A permanent line (the live line is cleared first and drawn again after it)."""
        with self._lock:
            live = self._live_text
            self._clear_live()
            self._display.display(line, color=color, stderr=stderr or self._json_mode)
            if live:
                self._live(live)

    def _live(self, text):
        with self._lock:
            width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
            sys.stdout.write("\r\x1b[K" + text[:width])
            sys.stdout.flush()
            self._live_text = text

    def _end_live(self):
        with self._lock:
            self._clear_live()

    # --- progress records -------------------------------------------------------------------------

    def _on_record(self, record):
        self.watch_gate(record)
        line = deploy.progress_line(record)
        if line is None:
            return
        if record.get("kind") == "say":
            self._emit(line, color=record.get("color"))
            return
        batch = record.get("batch") or record.get("job")
        if record.get("state") == "wait":
            if self._live_mode():
                self._live(line)
                return
            elapsed = float(record.get("elapsed") or 0.0)
            last = self._printed.get(batch)
            if last is None or elapsed - last >= float(self.get_option("throttle")):
                self._printed[batch] = elapsed
                self._emit(line)
            return
        self._printed.pop(batch, None)
        self._end_live()
        self._emit(line, color=constants.COLOR_OK if record.get("state") == "pass" else constants.COLOR_ERROR)

    def _follow(self):
        if self._run_dir and self._follower is None:
            self._follower = Follower(self._run_dir, self._on_record)
            self._follower.start()

    def _unfollow(self, result=None):
        if self._follower is None:
            return
        follower, self._follower = self._follower, None
        follower.stop()
        records = (result or {}).get("progress") or []  # the finish task's own, in case its folder is gone
        for record in records[follower.count:]:
            self._on_record(record)
        self._end_live()

    # --- which tasks are ours ---------------------------------------------------------------------

    def _quiet(self, task):
        if self._display.verbosity > 0:
            return False
        action = short_action(task)
        return self.verb_quiet(task) or action.startswith(DEPLOY) or action in QUIET_ACTIONS

    def v2_playbook_on_start(self, playbook):
        self.verb_playbook(playbook)
        super().v2_playbook_on_start(playbook)

    def v2_playbook_on_play_start(self, play):
        self._play_ours = self.verb_quiet(play)
        if not self._play_ours:
            super().v2_playbook_on_play_start(play)
        else:
            self._play = play

    def v2_playbook_on_no_hosts_matched(self):
        if not self._play_ours:  # ours: a --limit that skips the controller's play
            super().v2_playbook_on_no_hosts_matched()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.watch_stop()
        if short_action(task) == DEPLOY + "agent" and self._display.verbosity == 0:
            step = self._find_step(self._step_index)
            self.watch_agent_start(step.get("label") if step else "final promotions")
        if not self._quiet(task):
            super().v2_playbook_on_task_start(task, is_conditional)
            return
        self._task_type_cache[task._uuid] = "TASK"
        self._last_task_name = task.get_name().strip()  # for a banner printed with a failure
        if short_action(task) in (DEPLOY + "step", DEPLOY + "finish"):
            self._follow()

    def v2_playbook_on_include(self, included_file):
        if self._display.verbosity > 0:
            super().v2_playbook_on_include(included_file)

    def v2_runner_on_skipped(self, result):
        if self._display.verbosity > 1:
            super().v2_runner_on_skipped(result)

    def v2_runner_item_on_skipped(self, result):
        if self._display.verbosity > 1:
            super().v2_runner_item_on_skipped(result)

    def v2_on_file_diff(self, result):
        if short_action(result.task) != DEPLOY + "plan":  # the plan lines are printed once, below
            super().v2_on_file_diff(result)

    def v2_runner_on_ok(self, result):
        action = short_action(result.task)
        if action == DEPLOY + "agent":
            self.watch_answer()
        if action.startswith(DEPLOY):
            self._deploy_result(action, result)
        if not self._quiet(result.task):
            super().v2_runner_on_ok(result)
        elif action == DEPLOY + "job":  # maand.core.job: one line per worker (status: the playbook's debug)
            msg = str(result.result.get("msg") or "")
            if msg.startswith(("make ", "check mode")):
                self.verb_say("%s: %s %s" % (result._host.get_name(), result.task.args.get("job") or "", msg))
        elif action.startswith(DEPLOY):
            self.verb_document(result)
            if result.result.get("warnings") and not isinstance(result.task, TaskInclude):
                with self._lock:
                    self._clear_live()
                    self._handle_warnings_and_exception(result)
        elif not isinstance(result.task, TaskInclude):
            with self._lock:
                self.verb_ok(result)

    def v2_runner_item_on_ok(self, result):
        action = short_action(result.task)
        if action == DEPLOY + "agent":
            self.watch_answer()
        if action == DEPLOY + "agent" and result.result.get("warnings"):
            with self._lock:
                self._clear_live()
                self._handle_warnings_and_exception(result)
        if not self._quiet(result.task):
            super().v2_runner_item_on_ok(result)
        elif not action.startswith(DEPLOY):  # a loop of a playbook's own (init's files); not the agents' loop
            self.verb_item_changed(result)

    def v2_runner_item_on_failed(self, result):
        if not self._quiet(result.task):
            super().v2_runner_item_on_failed(result)
            return
        label = result.result.get("_ansible_item_label", result.result.get("item"))
        self._failure("%s: %s" % (label, (result.result.get("msg") or "failed").strip()))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        action = short_action(result.task)
        if action == DEPLOY + "agent":
            self.watch_answer()
        if action in (DEPLOY + "step", DEPLOY + "finish"):
            self._unfollow(result.result)
        if action.startswith(DEPLOY) and self._display.verbosity == 0:
            # the message, not the result dumped as YAML (a refused plan would dump the whole plan)
            if action == DEPLOY + "finish":
                self._finish(result.result)
                self.verb_document(result)
            self._end_live()
            for problem in result.result.get("problems") or [result.result.get("msg") or "failed"]:
                self._failure(problem)
            return
        if action in CHECK_ACTIONS and not ignore_errors and self._display.verbosity == 0:
            # a maand playbook's own check (the inventory loaded, an extra var): its message, once, not the
            # message again as "Task failed" and the result as JSON
            self._end_live()
            self._failure((result.result.get("msg") or "failed").strip())
            return
        if self._quiet(result.task):
            self.verb_failed(result, ignore_errors)
            return
        self._end_live()
        super().v2_runner_on_failed(result, ignore_errors)

    def v2_runner_on_unreachable(self, result):
        action = short_action(result.task)
        if action == DEPLOY + "agent":
            self.watch_answer()
        if action.startswith(DEPLOY) and result.task.ignore_unreachable and self._display.verbosity == 0:
            msg = (result.result.get("msg") or "unreachable").strip().splitlines()[-1]
            self._emit("%s: unreachable: %s" % (result.host.get_name(), msg), color=constants.COLOR_UNREACHABLE)
            return
        if self._quiet(result.task):
            self.verb_unreachable(result)
            return
        self._end_live()
        super().v2_runner_on_unreachable(result)

    def _deploy_result(self, action, result):
        res = result.result
        if action == DEPLOY + "plan":
            self._plan, self._run_dir = res.get("plan") or {}, res.get("run_dir") or ""
            for line in self._plan.get("lines") or []:
                self._emit(line)
            self._said.update(f.get("msg") for f in self._plan.get("failures") or [])
            self._emit(res.get("summary") or deploy.plan_summary(self._plan), color=constants.COLOR_HIGHLIGHT)
            for line in res.get("build_warnings") or []:
                self._emit(line, color=constants.COLOR_WARN)  # the last build's warnings, repeated (deploy/service.py)
        elif action == DEPLOY + "step":
            self._unfollow(res)
            self.watch_step(res.get("step"), res.get("hosts"))
            for msg in res.get("new_failures") or []:
                self._failure(msg)
            step = self._find_step(res.get("step"))
            if res.get("hosts") or step is not None:
                self._emit(deploy.step_line(step, list(res.get("hosts") or []), res.get("ran")))
        elif action == DEPLOY + "finish":
            self._unfollow(res)
            self._finish(res)

    def _failure(self, msg):
        if msg not in self._said:
            self._said.add(msg)
            self._errors.append(msg)
            self._emit("FAILED: %s" % msg, color=constants.COLOR_ERROR, stderr=self.get_option("display_failed_stderr"))

    def _find_step(self, key):
        for step in (self._plan or {}).get("steps") or []:
            if step.get("index") == key:
                return step
        return None

    def _finish(self, res):
        if res.get("verdict") is not None:
            self._verdict = [deploy.Verdict(**v) for v in res["verdict"]]
            self._verdict_line = res.get("verdict_line") or deploy.done_line(self._verdict)

    # --- the end --------------------------------------------------------------------------------------

    def v2_playbook_on_stats(self, stats):
        self.watch_end()
        self._end_live()
        if self._json_mode and self.verb_stats(stats):
            return
        bad = any(stats.summarize(h)["failures"] or stats.summarize(h)["unreachable"] for h in stats.processed)
        if self._verdict is None and self._plan is not None and not bad and self._display.verbosity == 0 \
                and context.CLIARGS.get("check"):
            # --check --diff: the plan is the result; a PLAY RECAP would count Ansible tasks, not allocations
            self._display.display("")
            self._display.display("check mode: nothing was changed; run without --check to apply the plan above",
                                  color=constants.COLOR_OK)
            return
        if self._verdict is None:
            if not self.verb_stats(stats):
                super().v2_playbook_on_stats(stats)
            return
        self._display.display("")
        for line in deploy.verdict_table(self._verdict):
            self._display.display(line)
        workers = deploy.workers_line(self._verdict)
        if workers:
            self._display.display(workers)
        bad = any(stats.summarize(h)["failures"] or stats.summarize(h)["unreachable"] for h in stats.processed)
        self._display.display(self._verdict_line, color=constants.COLOR_ERROR if bad else constants.COLOR_OK)
