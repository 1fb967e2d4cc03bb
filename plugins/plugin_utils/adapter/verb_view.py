# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every maand.core verb as an operator reads it, for the stdout callback maand.core.deploy
(plugins/callback/deploy.py): no play or task banners and no PLAY RECAP for the collection's own
playbooks, each verb's report (ops/report.py) as its table or summary, each error once, and under
``-e maand_format=json`` one JSON document alone on stdout (everything else goes to stderr).

A play or task is the collection's own when its file is under this collection (playbooks/, roles/);
a user's playbook around it keeps Ansible's default output."""

from __future__ import annotations

import os

from ansible import constants, context

from .. import ops

COLLECTION = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
QUIET_FAILURES = ("assert", "fail")


def collection_file(obj):
    """Whether a play or task comes from a file of this collection."""
    try:
        path = obj.get_path() or ""
    except Exception:  # pragma: no cover - an object without a data source (an implicit task)
        return False
    path = path.rsplit(":", 1)[0]
    return bool(path) and os.path.realpath(path).startswith(COLLECTION + os.sep)


def short(task):
    action = task.action or ""
    return action[len("ansible.builtin."):] if action.startswith("ansible.builtin.") else action


def first_line(text, default=""):
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[-1] if lines else default


class VerbView:
    """The maand.core.deploy callback's part for every verb (the callback calls these first)."""

    def verb_init(self):
        self._json_mode = False
        self._foreign = False  # a play or task not of this collection ran: keep PLAY RECAP
        self._documents = []   # the JSON documents of the run's reports (json mode: the last is printed)
        self._errors = []      # every failure printed (json mode: the document of a run with no report)
        self._verb = ""
        self._play_ours = False  # the play in progress is of this collection

    # --- what is ours -----------------------------------------------------------------------------

    def verb_quiet(self, obj):
        """A play or task of this collection, at verbosity 0: no banner, only what it reports."""
        if self._display.verbosity > 0:
            return False
        if collection_file(obj):
            return True
        self._foreign = True
        return False

    def verb_playbook(self, playbook):
        self._json_mode = ops.report.format_from_extra_vars(context.CLIARGS.get("extra_vars") or ())
        self._json_mode = self._json_mode == "json"
        name = os.path.basename(getattr(playbook, "_file_name", "") or "")
        self._verb = os.path.splitext(name)[0]

    def verb_say(self, line, color=None, stderr=False):
        """A permanent line; under json mode on stderr (stdout holds the JSON document only)."""
        self._emit(line, color=color, stderr=stderr or self._json_mode)

    # --- results ----------------------------------------------------------------------------------

    def verb_document(self, result):
        """Keep a task's report for the JSON document, without printing it (the deploy's own view prints)."""
        data = result.result.get(ops.report.KEY)
        if isinstance(data, dict):
            self._documents.append(ops.report.Report.from_json(data).document())

    def verb_report(self, result):
        """Print a task's maand_report (True when it had one)."""
        data = result.result.get(ops.report.KEY)
        if not isinstance(data, dict):
            return False
        found = ops.report.Report.from_json(data)
        self._documents.append(found.document())
        if not self._json_mode:
            failed = found.outcome == "failed"
            for line in found.lines:
                self.verb_say(str(line), color=constants.COLOR_ERROR if failed and str(line).startswith("FAILED") else None)
        return True

    def verb_ok(self, result):
        """An ok result of one of our tasks: its report, a debug task's message, its warnings."""
        self.verb_report(result)
        res = result.result
        if short(result.task) == "debug" and "msg" in res:
            msg = res["msg"]
            host = result._host.get_name() if result._host is not None else "localhost"
            prefix = "" if host == "localhost" or result.task.run_once else host + ": "
            for line in (msg if isinstance(msg, list) else str(msg).splitlines()):
                self.verb_say(prefix + str(line))
        if res.get("warnings"):
            self._clear_live()
            self._handle_warnings_and_exception(result)

    def verb_failed(self, result, ignore_errors=False):
        """A failure of one of our tasks: its report, then each problem once (never the result as JSON)."""
        self._end_live()
        if ignore_errors:
            return
        res = result.result
        had_report = self.verb_report(result)
        if had_report:
            found = ops.report.Report.from_json(res[ops.report.KEY])
            problems = found.problems or res.get("problems") or [found.summary or res.get("msg") or "failed"]
        else:
            problems = res.get("problems") or [(res.get("msg") or "failed").strip()]
        for problem in problems:
            self._failure(str(problem))

    def verb_unreachable(self, result):
        self._end_live()
        if result.task.ignore_unreachable:  # the verb's own report names the worker (status, facts, gc)
            return
        msg = first_line(result.result.get("msg"), "unreachable")
        self._failure("%s: unreachable: %s" % (result.host.get_name(), msg))

    def verb_item_changed(self, result):
        """A changed item of one of our loops (init's files): one line naming it."""
        label = result.result.get("_ansible_item_label", result.result.get("item"))
        if result.result.get("changed") and label is not None:
            self.verb_say("changed: %s" % label, color=constants.COLOR_CHANGED)

    # --- the end ------------------------------------------------------------------------------------

    def verb_stats(self, stats):
        """True when the run was all ours: no PLAY RECAP (under json mode: the JSON document instead)."""
        if self._foreign or self._display.verbosity > 0:
            return False
        if self._json_mode:
            doc = self._documents[-1] if self._documents else ops.report.failure_document(self._verb, self._errors)
            if not self._documents and not self._errors:
                doc = {"verb": self._verb or "maand", "outcome": "ok", "summary": "", "counts": {}}
            if self._errors and doc.get("outcome") != "failed":
                doc = dict(doc, outcome="failed", errors=list(self._errors))
            self._display.display(ops.report.dumps(doc))
        return True
