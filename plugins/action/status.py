# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's status table from the workers' answers (docs: plugins/modules/status.py). Read-only."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import bucket
from ansible_collections.maand.core.plugins.plugin_utils import catalog
from ansible_collections.maand.core.plugins.plugin_utils import ops


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = adapter.spec_for("status")

    def act(self, result, args, task_vars):
        result["changed"] = False
        try:
            fmt = ops.status.check_format(args["format"])
            jobs = ops.status.split_jobs(args["jobs"])
            cat = ops.status.load_catalog(args["bucket"])
            ops.status.check_jobs(cat, jobs)
        except (ops.status.StatusError, catalog.CatalogError) as exc:
            result.update(failed=True, msg="maand.core.status: %s" % exc)
            return result
        answers = {h: (a if isinstance(a, dict) else {}) for h, a in args["answers"].items()}
        table_rows = ops.status.rows(cat, answers, jobs)
        data = ops.status.as_json(table_rows, answers)
        bad = data["unreachable"] + data["failed"]
        stopped = data["not_running"]
        hints = bucket.ssh_hints_for(answers, bad) if bad else []  # first contact: host key, login, sudo
        problems = (["no answer from %s%s" % (", ".join(bad), "".join("\n" + h for h in hints))] if bad else []) + (
            ["active allocation%s not running: %s" % ("" if len(stopped) == 1 else "s", ", ".join(stopped))]
            if stopped else [])
        adapter.publish(result, ops.report.Report(
            "status", outcome="failed" if problems else "ok", summary=data["summary"], counts=data["counts"],
            data=data, format=fmt, lines=ops.status.table_lines(table_rows, answers), problems=problems))
        result.update(status=data, msg=data["summary"])
        if problems:
            result.update(failed=True, msg="%s; %s" % (data["summary"], "; ".join(problems)))
        return result
