# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A verb's report (ops/report.py) into its task result: for the stdout callback maand.core.deploy
(``maand_report``), for the run's custom stats (``ansible_stats``, what ``set_stats`` returns: AWX keeps
them as the job's artifacts), and on the screen when another stdout callback shows the run."""

from __future__ import annotations

from .. import ops
from . import controller


def publish(result, report):
    """Put report into result; print its lines here only when the maand callback does not show the run."""
    result[ops.report.KEY] = report.to_json()
    if report.outcome != "failed":
        result["ansible_stats"] = {"data": report.stats(), "per_host": False, "aggregate": False}
    else:  # Ansible takes the stats of an ok result only: the playbook's set_stats task keeps a failed one
        result["verdict_stats"] = report.stats()
    if not controller.watched():
        for line in report.screen():
            controller.show(line)
    return result


def output_format(task_vars):
    """-e maand_format=json: "json"; anything else: "table"."""
    return "json" if str((task_vars or {}).get("maand_format") or "").strip().lower() == "json" else "table"


def say(msg, fmt="table", color=None):
    """A line printed while the verb runs (a hook's output, a wait): on stderr under -e maand_format=json,
    so stdout stays one JSON document."""
    controller.show(msg, color=color, stderr=fmt == "json")


def say_lines(lines, fmt="table"):
    """Lines only for the screen, never into the result (maand.core.cat -e maand_reveal=true's secrets)."""
    for line in lines:
        say(line, fmt)
