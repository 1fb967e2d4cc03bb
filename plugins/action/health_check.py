# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand's `maand health_check` on the controller (docs: plugins/modules/health_check.py). Read-only."""

from __future__ import annotations

import contextlib

from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import ops

display = Display()

ARGUMENT_SPEC = adapter.spec_for("health_check")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        bucket = args["bucket"]
        result["changed"] = False
        fmt = adapter.output_format(task_vars)
        try:
            catalog, jobs = ops.health_check.load(bucket, args["jobs"])
        except ops.health_check.HealthCheckError as exc:
            result.update(failed=True, msg="maand.core.health_check: %s; nothing was checked" % exc)
            return result
        live = {w["host"] for w in catalog.get("workers") or [] if not w.get("removed")}
        hosts = [h for h in args["hosts"] if h in live]
        conns = adapter.connections(task_vars, hosts)
        workers = {h: (conns[h]["address"], int(conns[h].get("port") or 22)) for h in hosts if h in conns}
        plans, skipped = ops.health_check.plan_jobs(catalog, jobs, hosts)
        # fail fast: the jobs' `make status` while it waits, as the deploy's gates ask it
        status, diagnose = (ops.health_check.fail_fast(bucket, catalog, conns, adapter.python_of(task_vars))
                            if args["wait"] else (None, None))
        with contextlib.ExitStack() as stack:
            commands = ops.health_check.command_runner(stack, bucket, catalog, conns, args["timeout"], args["tail"],
                                                       log=lambda msg: display.vvv("hook: " + msg))
            outcome = ops.health_check.run(
                plans, workers if args["workers_check"] else {}, ops.health_check.prober(bucket, conns), commands,
                wait=args["wait"], wait_seconds=args["wait_seconds"], skipped=skipped,
                log=lambda msg: adapter.say("health_check: " + msg, fmt), status=status, diagnose=diagnose)
        lines = [line.text() for line in outcome.lines]
        for name in sorted(outcome.skipped):
            lines.append("health check skipped: %s (%s)" % (name, outcome.skipped[name]))
        summary = outcome.summary()
        checks = [{"job": x.job, "worker": x.worker, "check": x.what, "ok": x.ok, "ms": x.ms, "reason": x.reason}
                  for x in outcome.lines]
        not_running = [{"job": job, "worker": worker, "why": why} for (job, worker), why in sorted(outcome.stopped.items())]
        empty = not outcome.lines and not outcome.skipped
        report = ops.report.Report(
            "health_check", outcome="failed" if outcome.failed or empty else "ok", summary=summary,
            lines=lines + list(outcome.notes), format=fmt,
            counts={"checks": len(checks), "failed": sum(1 for c in checks if not c["ok"]),
                    "not_running": len(not_running), "skipped_jobs": len(outcome.skipped)},
            data={"healthy": not outcome.failed and not empty, "checks": checks, "not_running": not_running,
                  "skipped_jobs": dict(outcome.skipped), "notes": list(outcome.notes)})
        adapter.publish(result, report)
        result.update(lines=lines, summary=summary, skipped_jobs=sorted(outcome.skipped), rounds=outcome.rounds,
                      not_running=not_running, notes=outcome.notes, checks=checks,
                      failed=bool(outcome.failed), healthy=not outcome.failed, msg=summary)
        if empty:
            result.update(failed=True, healthy=False, msg="maand.core.health_check: nothing to check on %s (no active allocation of %s)"
                          % (", ".join(hosts) or "no worker", ", ".join(jobs) or "any job"))
        return result
