# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand gc on the controller: plan, then commit the catalog and KV part (docs: plugins/modules/gc.py)."""

from __future__ import annotations

import time

from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.adapter import specs
from ansible_collections.maand.core.plugins.plugin_utils.build import catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.bucket import storage as _storage
from ansible_collections.maand.core.plugins.plugin_utils.ops import gc as _gc
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _kv_store

display = Display()

ARGUMENT_SPEC = specs.spec_for("gc")


def _registered(hostvars, host, var):
    try:
        reg = hostvars[host].get(var)
    except Exception:  # pylint: disable=broad-exception-caught
        reg = None
    return reg if isinstance(reg, dict) else None


def listings(hostvars, hosts, var):
    """One _gc.Listing per host from the registered maand.core.deploy_state results."""
    out = []
    for host in hosts:
        reg = _registered(hostvars, host, var)
        if reg is None:
            state = {"reachable": False, "error": "its job folders were not listed (host skipped or failed earlier)"}
        elif reg.get("unreachable") or reg.get("failed"):
            state = {"reachable": False, "error": (reg.get("msg") or "unreachable").strip().splitlines()[-1]}
        else:
            state = reg.get("state")
        out.append(_gc.Listing.from_state(host, state))
    return out


def deletions(hostvars, hosts, var, planned):
    """(failed (host, job) pairs, problems) of the worker step."""
    failed, problems = set(), []
    wanted = planned.paths_by_host()
    for host in hosts:
        if host not in wanted:
            continue
        reg = _registered(hostvars, host, var)
        if reg is None or reg.get("skipped"):
            reg = {"failed": True, "msg": "the deletion did not run"}
        if reg.get("unreachable") or (reg.get("failed") and not reg.get("results")):
            failed.update((host, job) for job in wanted[host])
            problems.append("worker %s: nothing was deleted (%s); fix: check that it is reachable over SSH, then run "
                            "maand.core.gc again" % (host, (reg.get("msg") or "failed").strip().splitlines()[-1]))
            continue
        for item in reg.get("results") or ():
            if not item.get("ok"):
                failed.add((host, item.get("job")))
                problems.append("worker %s: %s" % (host, item.get("msg")))
    return failed, problems


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        bucket = args["bucket"]
        hostvars = (task_vars or {}).get("hostvars") or {}
        result["changed"] = False
        try:
            if args["step"] == "plan":
                self._plan(bucket, args, hostvars, result)
            else:
                self._commit(bucket, args, hostvars, result)
        except (_gc.GCError, _catalog.CatalogError, _kv_store.KVStoreError, OSError) as exc:
            result.update(failed=True, msg="maand.core.gc: %s" % exc)
        return result

    @staticmethod
    def _inputs(bucket):
        catalog = _catalog.read_catalog(bucket)
        if catalog is None:
            raise _gc.GCError("%s/%s is missing: there is nothing to collect; run maand.core.build first"
                              % (bucket, _catalog.CATALOG_REL))
        return catalog, _kv_store.KVStore.load(bucket)

    def _plan(self, bucket, args, hostvars, result):
        days = _gc.retain_days(args["retain_days"])
        catalog, store = self._inputs(bucket)
        plan = _gc.plan(catalog, store.namespaces, listings(hostvars, args["hosts"], args["state_var"]),
                        time.time(), days)
        lines = plan.lines()
        title = "gc plan (check mode: nothing is deleted)" if self._task.check_mode else "gc plan"
        display.display("%s, bucket %s:\n  %s" % (title, plan.bucket_id, "\n  ".join(lines)))
        result.update(plan=plan.as_dict(), delete=plan.paths_by_host(), lines=lines)

    def _commit(self, bucket, args, hostvars, result):
        planned = _gc.Plan.from_dict(args["plan"] or {})
        problems = list(planned.problems)
        if self._task.check_mode:
            result.update(plan=planned.as_dict(), problems=problems)
            self._finish(result, problems, "check mode: nothing was deleted (%d item(s) would be)" % _count(planned))
            return
        failed, worker_problems = deletions(hostvars, args["hosts"], args["deleted_var"], planned)
        problems += worker_problems
        with _storage.bucket_lock(bucket, wait=True):
            catalog, store = self._inputs(bucket)
            if catalog.get("bucket_id") != planned.bucket_id:
                raise _gc.GCError("data/catalog.json now holds bucket_id %s, not %s: the catalog and KV were left as "
                                  "they are; run maand.core.gc again" % (catalog.get("bucket_id"), planned.bucket_id))
            fresh = _gc.plan(catalog, store.namespaces, listings(hostvars, args["hosts"], args["state_var"]),
                             planned.cutoff + planned.retain_days * _gc.DAY, planned.retain_days)
            done = _gc.confirm(planned, fresh, failed)
            done.paths = [p for p in done.paths if (p.host, p.job) not in failed]
            new = _gc.apply_catalog(catalog, done)
            if new != catalog:
                _catalog.write_catalog(bucket, new)
            for item in done.namespaces:
                store.purge_namespace(item.namespace)
            store.prune_before(done.cutoff, {(h.namespace, h.key) for h in done.history})
            if store.save():
                result["changed"] = True
        result["changed"] = result["changed"] or new != catalog or bool(done.paths)
        lines = done.lines(done=True)
        display.display("gc done, bucket %s:\n  %s" % (done.bucket_id, "\n  ".join(lines)))
        result.update(plan=done.as_dict(), lines=lines, problems=problems)
        self._finish(result, problems, "gc: %d item(s) deleted" % _count(done))

    @staticmethod
    def _finish(result, problems, summary):
        if problems:
            result.update(failed=True, msg="%s, but gc met %d problem(s):\n  %s" % (
                summary, len(problems), "\n  ".join(problems)))
        else:
            result["msg"] = summary


def _count(plan):
    return len(plan.paths) + len(plan.rows) + len(plan.namespaces) + len(plan.history)
