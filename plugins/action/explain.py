# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side placement explanation (docs: plugins/modules/explain.py). Read-only."""

from __future__ import annotations

import os

from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils import catalog
from ansible_collections.maand.core.plugins.plugin_utils import placement
from ansible_collections.maand.core.plugins.plugin_utils.bucket import WORKERS_FILE
from ansible_collections.maand.core.plugins.plugin_utils.bucket import did_you_mean

display = Display()

ARGUMENT_SPEC = adapter.spec_for("explain")

# The extra vars of playbooks/explain.yml before every user-facing extra var took the maand_ prefix.
RENAMED_VARS = {"job": "maand_job", "worker": "maand_job_workers", "show": "maand_show", "limit": "maand_limit"}


def deprecation_messages(names):
    """One message per old extra var name in ``names``; names that were never renamed are ignored."""
    return ["the extra var %r is deprecated: use -e %s=... instead" % (name, RENAMED_VARS[name])
            for name in sorted(set(names)) if name in RENAMED_VARS]


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        for message in deprecation_messages(args["deprecated_vars"]):
            display.deprecated(message, version="2.0.0", collection_name="maand.core")
        bucket_dir = args["bucket"]
        if not os.path.isdir(bucket_dir):
            result.update(failed=True, msg="cannot explain: bucket directory %s not found (fix: -e maand_bucket=DIR, "
                                           "the folder holding maand.conf and workspace/)" % bucket_dir)
            return result
        # compute() never writes; placement runs even when validation fails (e.g. a worker over
        # capacity), so an invalid bucket can still be explained
        outcome = catalog.compute(bucket_dir)
        report = outcome.report
        result.update(changed=False, bucket=bucket_dir, build_ok=report.ok,
                      build_errors=[p.as_dict() for p in report.errors],
                      warnings=[str(w) for w in report.warnings])
        bucket, placed = outcome.bucket, outcome.placement
        if bucket is None or placed is None or any(p.file == WORKERS_FILE and p.kind == "ErrInvalidWorkerJSON" for p in report.errors):
            result.update(failed=True, msg="cannot explain: the bucket does not load:\n%s" % report.error_text())
            return result
        if not report.ok:
            display.display("the build has %d error%s (placement is explained anyway):" % (
                len(report.errors), "" if len(report.errors) == 1 else "s"), color="red")
            for problem in report.errors:
                display.display("  " + str(problem), color="red")
        name = args["job"]
        if not name:
            lines = [placement.summary(bucket, placed, job) for job in sorted(bucket.jobs)]
            for line in lines:
                display.display(line)
            result.update(summary=lines, msg="%d jobs" % len(lines))
            return result
        if name not in bucket.jobs:
            result.update(failed=True, msg="unknown job %r%s (jobs: %s)" % (
                name, did_you_mean(name, bucket.jobs), ", ".join(sorted(bucket.jobs))))
            return result
        hosts = args["workers"]
        if hosts:
            known = {w.host for w in bucket.workers}
            unknown = sorted(set(hosts) - known)
            if unknown:
                result.update(failed=True, msg="unknown workers: %s" % ", ".join(
                    host + did_you_mean(host, known) for host in unknown))
                return result
        lines = placement.explain_lines(bucket, placed, name, hosts=hosts, show=args["show"],
                                        limit=args["limit"] or None)
        for line in lines:
            display.display(line)
        workers = []
        wanted = set(hosts) if hosts else None
        for worker in bucket.workers:
            if wanted is not None and worker.host not in wanted:
                continue
            status, reasons = placement.explain_worker(bucket, placed, name, worker.index)
            if (args["show"] == "placed" and not status.startswith("placed")) or (
                    args["show"] == "rejected" and status.startswith("placed")):
                continue
            workers.append({"worker": worker.host, "position": worker.position, "status": status, "reasons": reasons})
            if args["limit"] and len(workers) >= args["limit"]:
                break
        result.update(summary=[lines[0]], explanation=lines, workers=workers, msg=lines[0])
        return result
