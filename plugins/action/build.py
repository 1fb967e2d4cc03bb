# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side build: validate the bucket and write data/catalog.json (docs: plugins/modules/build.py)."""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import catalog
from ansible_collections.maand.core.plugins.plugin_utils import bucket
from ansible_collections.maand.core.plugins.plugin_utils import hooks
from ansible_collections.maand.core.plugins.plugin_utils import ops

display = Display()


ARGUMENT_SPEC = adapter.spec_for("build")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def _post_build(self, bucket_dir, cat, outcome, check_mode, task_vars):
        """maand runs post_build after the catalog commit, jobs in deployment_seq order; failures fail the build."""
        if not hooks.jobs_with(cat, "post_build"):
            return []
        if check_mode:
            display.display("check mode: post_build job commands not run")
            return []
        try:
            with hooks.session(bucket_dir, cat, None,
                               adapter.int_var(self._templar, task_vars, "maand_hook_timeout", hooks.DEFAULT_TIMEOUT),
                               adapter.int_var(self._templar, task_vars, "maand_deploy_output_tail", hooks.DEFAULT_TAIL),
                               log=lambda msg: display.display("hook: " + msg)) as ctx:
                ctx.runlog = bucket.RunLog.open(bucket_dir, "build")  # the hooks' lines in the bucket logs
                return hooks.post_build(ctx)
        except OSError as exc:
            return ["post_build: cannot run the job commands: %s" % exc]

    def act(self, result, args, task_vars):
        bucket_dir = args["bucket"]
        check_mode = bool(self._task.check_mode)
        new_bucket_id = args["new_bucket_id"]
        if new_bucket_id is None:  # the playbook's extra var, without the playbook having to pass it
            new_bucket_id = boolean((task_vars or {}).get("maand_new_bucket_id", False), strict=False)
        strict = args["strict"]
        if strict is None:  # -e maand_strict=true
            strict = boolean((task_vars or {}).get("maand_strict", False), strict=False)
        purge_job_kv = args["purge_job_kv"]
        if purge_job_kv is None:  # -e maand_purge_job_kv=true
            purge_job_kv = boolean((task_vars or {}).get("maand_purge_job_kv", False), strict=False)
        allow_remove_all = args["allow_remove_all"]
        if allow_remove_all is None:  # -e maand_allow_remove_all=true
            allow_remove_all = boolean((task_vars or {}).get("maand_allow_remove_all", False), strict=False)
        try:
            outcome = catalog.build(bucket_dir, check_mode=check_mode, new_bucket_id=new_bucket_id, strict=strict,
                                    purge_job_kv=purge_job_kv, allow_remove_all=allow_remove_all)
        except bucket.DeployInProgress as exc:
            result.update(failed=True, msg="ErrLocked: %s: build refused: %s" % (bucket_dir, exc))
            return result
        except bucket.LockBusy as exc:
            result.update(failed=True, msg="ErrLocked: %s/data/.lock: %s" % (bucket_dir, exc))
            return result

        report = outcome.report
        result["warnings"] = [str(w) for w in report.warnings]
        result["bucket"] = bucket_dir
        # Explanations only for jobs with fewer allocations than they asked for: computed on demand
        explanations = catalog.explain_short_jobs(outcome)
        result["explanations"] = explanations
        if not report.ok:
            summary = "maand build found %d error%s in %s; nothing was written" % (
                len(report.errors), "" if len(report.errors) == 1 else "s", bucket_dir)
            adapter.publish(result, ops.report.Report(
                "build", outcome="failed", summary=summary, format=adapter.output_format(task_vars),
                lines=[str(p) for p in report.errors] + [line for name in sorted(explanations)
                                                         for line in explanations[name]],
                counts={"errors": len(report.errors), "warnings": len(report.warnings)},
                data={"bucket": bucket_dir, "errors": [p.as_dict() for p in report.errors],
                      "warnings": result["warnings"], "written": False}))
            result.update(
                failed=True,
                changed=False,
                errors=[p.as_dict() for p in report.errors],
                msg="maand build found %d error%s in %s; nothing was written:\n%s" % (
                    len(report.errors), "" if len(report.errors) == 1 else "s", bucket_dir, report.error_text()),
            )
            return result

        cat = outcome.catalog
        hook_failures = self._post_build(bucket_dir, cat, outcome, check_mode, task_vars or {})
        if hook_failures:
            adapter.publish(result, ops.report.Report(
                "build", outcome="failed", summary="post_build job command(s) failed (data/catalog.json is written)",
                format=adapter.output_format(task_vars), lines=["FAILED: %s" % msg for msg in hook_failures],
                counts={"errors": len(hook_failures)},
                data={"bucket": bucket_dir, "errors": hook_failures, "written": bool(outcome.written)}))
            result.update(failed=True, changed=bool(outcome.written), bucket_id=cat["bucket_id"],
                          msg="maand build: post_build job command(s) failed (data/catalog.json is written; fix the "
                              "command and build again):\n" + "\n".join(hook_failures))
            return result
        table = catalog.allocation_table(cat, limit=args["table_limit"] or None)
        count = len(cat["allocations"])
        adapter.publish(result, ops.report.Report(
            "build", outcome=("check" if check_mode else "changed") if outcome.changed else "ok",
            summary="%d allocation%s; %s" % (count, "" if count == 1 else "s",
                                             "catalog changed" if outcome.changed else "no change"),
            format=adapter.output_format(task_vars),
            lines=list(table) + list(outcome.changes) + [line for name in sorted(explanations)
                                                         for line in explanations[name]],
            counts={"allocations": len(cat["allocations"]), "changes": len(outcome.changes),
                    "warnings": len(report.warnings)},
            data={"bucket": bucket_dir, "bucket_id": cat["bucket_id"], "changes": list(outcome.changes),
                  "written": outcome.written, "warnings": result["warnings"], "explanations": explanations,
                  "allocations": [{k: a.get(k) for k in ("job", "worker", "state")}
                                  for a in cat["allocations"]]}))
        result.update(
            changed=outcome.changed,
            bucket_id=cat["bucket_id"],
            catalog_path=catalog.catalog_path(bucket_dir),
            allocations=len(cat["allocations"]),
            table=table,
            changes=outcome.changes,
            written=outcome.written,
        )
        if self._task.diff and outcome.changed:
            before = catalog.dumps(outcome.previous) if outcome.previous is not None else ""
            result["diff"] = {
                "before": before, "after": catalog.dumps(cat),
                "before_header": "data/catalog.json (before)", "after_header": "data/catalog.json (after build)",
            }
        return result
