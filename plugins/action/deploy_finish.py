# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""End of a deploy: drop cleaned removed rows from the catalog, release the lock, report
(docs: plugins/modules/deploy_finish.py)."""

from __future__ import annotations

import os
import shutil

from ansible import constants as C
from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.action.deploy_step import gate_runner, sayer, watched
from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs
from ansible_collections.maand.core.plugins.plugin_utils.adapter import support as _action_support
from ansible_collections.maand.core.plugins.plugin_utils.build import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.bucket import storage as _storage
from ansible_collections.maand.core.plugins.plugin_utils.deploy import lock as _deploy_lock, plan as _deploy_plan, progress as _deploy_progress, run as _deploy_run, stage as _deploy_stage, view as _deploy_view
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _kv_store

display = Display()


ARGUMENT_SPEC = specs.spec_for("deploy_finish")


def run_outcome(run_dir, plan, hostvars, task_vars=None, settings=(600, 20)):
    """(plan, problems, done, verdict) of the run; a run folder that cannot be read is itself a problem."""
    if not run_dir:
        return plan, [f["msg"] for f in plan.get("failures") or []], [], _deploy_view.verdict(plan, [], {})
    try:
        task_vars = dict(task_vars or {}, hostvars=hostvars)
        say = sayer(run_dir)
        with _deploy_progress.callbacks_for_run(run_dir, hostvars, gate_runner(run_dir, task_vars), settings[0], settings[1],
                                            lambda msg: say("hook: " + msg),
                                            _action_support.ssh_args(C.config, task_vars)) as (gate, after):
            plan, state, report = _deploy_run.finish(run_dir, gate, after)
    except (_deploy_run.RunError, OSError, ValueError) as exc:
        return plan, ["the deploy run state could not be read, the outcome is unknown: %s" % exc], [], None
    try:  # the verdict is for the screen: it never changes the outcome
        rows = _deploy_view.verdict(plan, state.done, state.failed_ops,
                                    _deploy_progress.gate_times(_deploy_progress.read_all(run_dir)))
    except (KeyError, TypeError, ValueError) as exc:
        display.warning("could not compute the deploy verdict: %s: %s" % (type(exc).__name__, exc))
        rows = None
    return plan, list(report.problems), list(report.done), rows


def prune(bucket, plan, done, result, problems):
    """Drop from the catalog the removed rows whose cleanup succeeded (and those with nothing to clean)."""
    cleaned = list(plan.get("prune") or [])
    cleaned += [{"job": d["job"], "worker": d["host"]} for d in done if d.get("kind") == "remove"]
    purged = {d["host"] for d in done if d.get("kind") == "purge"}
    dead = set(plan.get("dead_workers") or [])
    if not (cleaned or dead or purged) or not plan.get("bucket_id"):
        return
    try:
        with _storage.bucket_lock(bucket, wait=True):
            catalog = _catalog.read_catalog(bucket)
            if catalog is None or catalog.get("bucket_id") != plan["bucket_id"]:
                return
            new = _deploy_plan.prune_catalog(catalog, cleaned, dead_workers=dead)
            if new != catalog:
                _catalog.write_catalog(bucket, new)
                gone = {(a["job"], a["worker"]) for a in catalog["allocations"]} - {
                    (a["job"], a["worker"]) for a in new["allocations"]}
                result.update(changed=True, pruned=sorted("%s@%s" % g for g in gone))
                display.display("catalog: dropped %d cleaned removed allocation(s): %s" % (
                    len(gone), ", ".join(result["pruned"])), color="yellow")
                drop_job_kv(bucket, catalog, new)
    except (OSError, _catalog.CatalogError, _kv_store.KVStoreError) as exc:
        problems.append("could not update data/catalog.json or data/kv.json: %s" % exc)


def drop_job_kv(bucket, old, new):
    """Jobs that left the catalog: tombstone their vars/job and secrets/job (held: bucket lock)."""
    gone = sorted({j["name"] for j in old.get("jobs", [])} - {j["name"] for j in new.get("jobs", [])})
    if gone and _kv_store.KVStore.exists(bucket):
        store = _kv_store.KVStore.load(bucket)
        changes = store.drop_jobs(gone)
        store.save()
        if changes:
            display.display("KV: %d key(s) of removed job(s) %s deleted" % (len(changes), ", ".join(gone)),
                            color="yellow")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        bucket = args["bucket"]
        check = bool(self._task.check_mode)
        run_dir = "" if check else args["run_dir"]
        result.update(changed=False, pruned=[])
        progress_mark = _deploy_progress.mark(run_dir)
        try:
            settings = (_action_support.int_var(self._templar, task_vars, "maand_hook_timeout", 600),
                        _action_support.int_var(self._templar, task_vars, "maand_deploy_output_tail", 20))
            plan, problems, done, rows = run_outcome(run_dir, args["plan"], task_vars.get("hostvars") or {}, task_vars,
                                                     settings)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # a crash here still fails the run (below) and still releases the lock; nothing is pruned
            plan, done, rows = args["plan"], None, None
            problems = ["the deploy finish step crashed, the outcome is unknown (the run folder %s is kept; "
                        "run the deploy again): %s: %s" % (run_dir, type(exc).__name__, exc)]
        if not check and done is not None:
            prune(bucket, plan, done, result, problems)
            # the staged trees are rebuilt by every deploy and may hold rendered secrets: never kept
            try:
                _deploy_stage.remove_tree(_deploy_stage.stage_root(bucket))
            except OSError as exc:
                problems.append("could not remove %s (it may hold rendered secrets): %s"
                                % (_deploy_stage.stage_root(bucket), exc))
        if args["release"] and not check:
            try:
                _deploy_lock.release(bucket, os.getppid())
            except OSError as exc:
                problems.append("could not release the deploy lock: %s" % exc)
        if watched():  # the records this task wrote: the callback may not have read them before the folder goes
            result["progress"] = _deploy_progress.read_since(run_dir, progress_mark)
        if run_dir and not problems:
            shutil.rmtree(run_dir, ignore_errors=True)  # a failed run keeps its folder for inspection
        result["problems"] = problems

        counts = {}
        for row in plan.get("rows", []):
            counts[row["action"]] = counts.get(row["action"], 0) + 1
        summary = ", ".join("%s %d" % (k, counts[k]) for k in sorted(counts)) or "nothing to do"
        result["summary"] = summary
        if rows is not None and not check:
            result["verdict"] = [v.to_dict() for v in rows]
            result["verdict_line"] = _deploy_view.done_line(rows, len(problems))
            result["workers"] = _deploy_view.worker_results(rows)
            if not watched():  # the callback prints the verdict from the result
                for line in _deploy_view.verdict_table(rows) + [_deploy_view.workers_line(rows), result["verdict_line"]]:
                    if line:
                        display.display(line)
        if problems:
            result.update(failed=True, msg="deploy finished with %d problem(s) (%s):\n  %s" % (
                len(problems), summary, "\n  ".join(problems)))
        else:
            result["msg"] = "deploy %s: %s" % ("plan (check mode)" if check else "done", summary)
        return result
