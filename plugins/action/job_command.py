# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a job command for the cli event on the controller (docs: plugins/modules/job_command.py)."""

from __future__ import annotations

from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import bucket
from ansible_collections.maand.core.plugins.plugin_utils import hooks

display = Display()


ARGUMENT_SPEC = adapter.spec_for("job_command")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def _job_control(self, result, bucket_dir, args, task_vars):
        """maand.core.job: a job with job_control commands gets them (TARGET=<target>) instead of make."""
        if not args["job"] or not args["target"]:
            result.update(failed=True, msg="event job_control needs job and target")
            return result
        if self._task.check_mode:
            result.update(msg="check mode: job_control of %s not run" % args["job"])
            return result
        log = bucket.RunLog.open(bucket_dir, "job")
        result["run_id"] = log.run_id
        try:
            with hooks.built_session(bucket_dir, lambda: adapter.connections(task_vars), args["timeout"],
                                     args["tail"], log=lambda msg: display.display("hook: " + msg),
                                     allow_stale=True) as ctx:  # the job verb (catalog/freshness.py)
                ctx.runlog = log  # maand's job control: the make targets of maand.core.job share its run id
                handled, failures = hooks.job_control_target(ctx, args["job"], args["target"], args["workers"])
        except OSError as exc:  # the core's errors fail the task in MaandAction.run
            result.update(failed=True, msg=str(exc))
            return result
        result.update(handled=handled, changed=handled and args["target"] != "status", jobs=[args["job"]] if handled else [])
        if failures:
            result.update(failed=True, msg="job_control of %s (TARGET=%s) failed:\n%s" % (
                args["job"], args["target"], "\n".join(failures)))
        else:
            result["msg"] = ("job_control of %s ran with TARGET=%s" % (args["job"], args["target"]) if handled
                             else "job %s has no job_control command: the Makefile runs" % args["job"])
        return result

    def act(self, result, args, task_vars):
        bucket_dir = args["bucket"]
        command = args["command"].strip()
        if command and not command.startswith("command_"):
            command = "command_" + command
        result.update(changed=False, jobs=[], handled=False)
        if args["event"] == "job_control":
            return self._job_control(result, bucket_dir, args, task_vars)
        if self._task.check_mode:
            result.update(skipped=True, msg="check mode: job command %s not run" % command)
            return result
        try:
            with hooks.built_session(bucket_dir, lambda: adapter.connections(task_vars), args["timeout"],
                                     args["tail"], log=lambda msg: display.display("hook: " + msg)) as ctx:
                ctx.runlog = bucket.RunLog.open(bucket_dir, "jobcommand")  # the hooks' lines in the bucket logs
                jobs, failures = hooks.cli(ctx, command, args["job"].strip() or None, max(1, args["concurrency"]))
        except OSError as exc:  # the core's errors fail the task in MaandAction.run
            result.update(failed=True, msg=str(exc))
            return result
        result.update(changed=True, jobs=jobs)
        if failures:
            result.update(failed=True, msg="job command %s failed:\n%s" % (command, "\n".join(failures)))
        else:
            result["msg"] = "job command %s ran on %s" % (command, ", ".join(jobs))
        return result
