# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand run_command on the controller: choose the workers, the command and the batches, report each
batch's output and judge the health check after it (docs: plugins/modules/run_command.py)."""

from __future__ import annotations

from ansible import context

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import bucket
from ansible_collections.maand.core.plugins.plugin_utils import ops


ARGUMENT_SPEC = adapter.spec_for("run_command")


def _labels(hostvars, host):
    """The worker's labels from the inventory (maand_worker), [] when unknown."""
    try:
        return list((hostvars[host].get("maand_worker") or {}).get("labels") or ())
    # a host the inventory does not know, or a maand_worker that is not a mapping: no labels, the selection says so
    except Exception:  # pylint: disable=broad-exception-caught
        return []


def _size(args):
    """The batch size the select step returned (0 = one batch of all)."""
    return ops.run_command.check_batch(args["batch"]) if args["batch"] not in (None, "", 0, "0") else 0


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        result["changed"] = False
        try:
            return getattr(self, "_" + args["step"])(result, args, task_vars or {})
        except ops.run_command.RunCommandError as exc:
            result.update(failed=True, msg="maand.core.run_command: %s" % exc)
            return result

    def _select(self, result, args, task_vars):
        """The command (maand_cmd, else workspace/command.sh), the workers and their batches."""
        hostvars = task_vars.get("hostvars") or {}
        ops.run_command.check_split(context.CLIARGS.get("extra_vars") or ())
        size = ops.run_command.check_batch(args["batch"])
        delay = ops.run_command.check_delay(args["health_check_delay"])
        command = ops.run_command.load_command(args["cmd"], args["bucket"])
        workers = {h: _labels(hostvars, h) for h in args["catalog_workers"]}
        chosen = ops.run_command.select(workers, args["hosts"], ops.run_command.split_names(args["workers"]),
                                        ops.run_command.split_names(args["labels"]))
        cut = ops.run_command.batches(chosen, size)
        run_id = bucket.RunLog.open(args["bucket"] or ".", "run_command").run_id  # the bucket logs' run (maand's UUID)
        result.update(run_id=run_id, hosts=chosen, script=command.script, label=command.label, batch=size, batches=cut,
                      health_check_delay=delay, health_hosts=list(args["hosts"]),
                      msg="running %s on %s%s" % (command.label, ", ".join(chosen), "" if len(cut) < 2 else
                                                  " in %d batches of %d" % (len(cut), size)))
        return result

    def _report(self, result, args, task_vars):
        """Each worker of this batch: its output and exit status; fails when it failed anywhere."""
        if self._task.check_mode:
            result["msg"] = "check mode: %s was not run" % (args["label"] or "the command")
            return result
        batch = ops.run_command.locate(args["chosen"] or args["hosts"], args["hosts"], _size(args))
        outcomes = [ops.run_command.outcome(h, args["answers"].get(h)) for h in batch.hosts]
        lines, problems = ops.run_command.report(outcomes, args["label"] or "the command", batch)
        warning = self._log(args, batch.hosts)
        if warning:
            result.setdefault("warnings", []).append(warning)
        adapter.publish(result, ops.report.Report(
            "run_command", outcome="failed" if problems else "ok", summary=lines[-1] if lines else "",
            lines=list(lines), counts=ops.report.counted(o.status for o in outcomes),
            data={"batch": batch.number, "batches": batch.total, "outcomes": [dict(o.__dict__) for o in outcomes],
                  "problems": list(problems)}))
        result.update(changed=any(o.status != "not run" for o in outcomes), lines=lines, problems=problems,
                      outcomes=[o.__dict__ for o in outcomes], batch_number=batch.number, batch_total=batch.total)
        failed = sum(1 for o in outcomes if o.status != "ok")
        if problems:
            result.update(failed=True, msg="run_command failed on %d worker(s)%s:\n  %s" % (
                failed, "" if batch.total == 1 else " of %s" % batch.name(), "\n  ".join(problems)))
        else:
            result["msg"] = lines[-1]
        return result

    def _log(self, args, hosts):
        """Each worker's run in the bucket logs (maand: maand=run_command, phase run_command, action ssh); "" or
        why they could not be written."""
        if not args["bucket"] or not args["run_id"]:
            return ""
        log = bucket.RunLog.open(args["bucket"], "run_command", run_id=args["run_id"])
        try:
            for host in hosts:
                ops.run_command.log_outcome(log, host, args["answers"].get(host), args["label"])
        except OSError as exc:
            return "the bucket logs (%s/logs) could not be written: %s" % (args["bucket"], exc)
        return ""

    def _health(self, result, args, task_vars):
        """The verdict of the health check that ran after this batch (maand.core.health_check's result)."""
        batch = ops.run_command.locate(args["chosen"] or args["hosts"], args["hosts"], _size(args))
        problem = ops.run_command.health_problem(batch, args["health"])
        if problem:
            result.update(failed=True, msg="run_command: %s" % problem)
        else:
            result["msg"] = "run_command: %s: health check passed" % batch.name()
            adapter.publish(result, ops.report.Report("run_command_health", summary=result["msg"], lines=[result["msg"]]))
        return result
