# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compute (and in check/diff mode show) the deploy plan on the controller (docs: plugins/modules/deploy_plan.py)."""

from __future__ import annotations

import json
import os
import tempfile

import yaml
from ansible import constants as C
from ansible.utils.display import Display
from ansible.utils.vars import load_extra_vars

from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.adapter import support as _action_support
from ansible_collections.maand.core.plugins.plugin_utils.deploy import certs as _deploy_certs
from ansible_collections.maand.core.plugins.plugin_utils.build import catalog as _catalog, fingerprint as _fingerprint, maand_db as _maand_db
from ansible_collections.maand.core.plugins.plugin_utils.deploy import lock as _deploy_lock, pin as _deploy_pin, plan as _deploy_plan, run as _deploy_run, stage as _deploy_stage, view as _deploy_view, jobspec_deploy as _jobspec_deploy, layers as _jobspec_layers
from ansible_collections.maand.core.plugins.plugin_utils.ops import extra_vars as _extra_vars
from ansible_collections.maand.core.plugins.plugin_utils.hooks import points as _hook_deploy, run as _hook_run, commands as _hooks

display = Display()


# Providers of generated files added to allocation trees (e.g. certificates): each is called once per
# plan as provider(bucket_dir, catalog) and returns a function (job, host) -> [_deploy_stage.Overlay];
# their files are hashed with the allocation, shipped, and named in the plan ("certs changed: ...").
OVERLAY_PROVIDERS = (_deploy_certs.overlay_provider,)  # certs/<name>.crt, .key (0600), ca.crt

ARGUMENT_SPEC = {
    "bucket": {"type": "path", "required": True},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "jobs": {"type": "raw"},
    "force": {"type": "bool", "default": False},
    "sync_only": {"type": "bool", "default": False},
    "state_var": {"type": "str", "default": "deploy_state_read"},
    "adopt_bucket_id": {"type": "str", "default": ""},
    "slots": {"type": "int", "default": 0},
    "rollback": {"type": "raw"},
    "promote": {"type": "raw"},
    "plan_hash": {"type": "str", "default": ""},
}


ROLE_SPECS = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "deploy", "meta", "argument_specs.yml")
OTHER_KNOWN = ("maand_bucket",)  # the bucket of build/explain/cat; harmless here


def deploy_extra_vars():
    """The maand_* extra vars the deploy reads: the role's options (meta/argument_specs.yml)."""
    with open(ROLE_SPECS, encoding="utf-8") as handle:
        specs = yaml.safe_load(handle)
    return set(specs["argument_specs"]["main"]["options"]) | set(OTHER_KNOWN)


def warn_unknown_extra_vars(loader):
    """Warn about maand_* extra vars the deploy does not read (a typo would be ignored in silence)."""
    try:
        extra = load_extra_vars(loader)
        known = deploy_extra_vars()
    except Exception as exc:  # pylint: disable=broad-exception-caught
        display.warning("could not check the maand_ extra vars: %s" % exc)
        return []
    messages = _extra_vars.unknown_extra_vars(extra, known, "maand.core.deploy")
    for message in messages:
        display.warning(message)
    for message in _extra_vars.deprecated_extra_vars(extra, _extra_vars.DEPLOY_RENAMED):
        display.deprecated(message, version="2.0.0", collection_name="maand.core")
    return messages


def _host_state(hostvars, host, var):
    try:
        hv = hostvars[host]
        reg = hv.get(var)
    except Exception:  # pragma: no cover - hostvars of an unknown host
        reg = None
    if not isinstance(reg, dict):
        return {"reachable": False, "error": "its state was not read (host skipped or failed earlier)"}
    if reg.get("unreachable"):
        return {"reachable": False, "error": (reg.get("msg") or "unreachable").strip().splitlines()[-1]}
    if reg.get("failed") or not isinstance(reg.get("state"), dict):
        return {"reachable": False, "error": (reg.get("msg") or "state read failed").strip()}
    state = dict(reg["state"])
    if state.get("reachable") is False:  # deploy_state reports a worker it could not read
        return {"reachable": False, "error": str(state.get("error") or "state read failed")}
    state["reachable"] = True
    return state


def _with_environments(catalog, content):
    """Expand every job spec's environment against the controller's environment and fold its
    digests into the job's content (a changed value restarts the job); errors name job and variable."""
    errors = []
    for name, spec in sorted(_jobspec_deploy.specs_of(catalog).items()):
        if name not in content:
            continue
        try:
            env = _jobspec_deploy.expand(name, spec, os.environ.get)
        except _jobspec_deploy.EnvError as exc:
            errors.append(str(exc))
            continue
        content[name] = _with_env(content[name], catalog["bucket_id"], name, env)
    return errors


def _with_env(entry, bucket_id, name, env):
    """with_env on a job's content and on each of its rendered allocations (their origins kept)."""
    if entry.get("error"):
        return entry
    out = dict(entry, **_jobspec_deploy.with_env(entry, bucket_id, name, env))
    if entry.get("allocations"):
        out["allocations"] = {host: a if a.get("error") else dict(a, **_jobspec_deploy.with_env(a, bucket_id, name, env))
                              for host, a in entry["allocations"].items()}
    return out


def pins_dir(bucket_id):
    """Where --check keeps the summaries of the plans it printed (no secrets: actions, hashes, versions), so
    a refused -e maand_plan can name what changed; outside the bucket, which check mode never writes."""
    return os.path.join(tempfile.gettempdir(), "maand-plans-%d" % os.getuid(), str(bucket_id))


def keep_summary(bucket_id, digest, summary):
    try:
        folder = pins_dir(bucket_id)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        with open(os.path.join(folder, digest + ".json"), "w", encoding="utf-8") as handle:
            json.dump(summary, handle, sort_keys=True)
    except OSError:
        pass  # only a better message is lost


def pinned_summary(bucket_id, given):
    try:
        names = [n for n in os.listdir(pins_dir(bucket_id)) if n.startswith(given) and n.endswith(".json")]
        if len(names) != 1:
            return None
        with open(os.path.join(pins_dir(bucket_id), names[0]), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def content_diff(plan, staging, states):
    """--diff: per worker, the changed files to read there with their recorded digests (a worker's copy that
    does not match is never shown: a secret-bearing output's digest is an HMAC) and what this deploy ships at
    each (deduplicated); for a rollback, the worker's previous copy is the other side."""
    wanted, notes = _deploy_pin.diff_requests(plan, staging.is_secret)
    rollback = {(r["job"], r["worker"]) for r in plan.get("rows") or [] if r.get("action") == "rollback"}
    after, blobs, promoted, previous = {}, _deploy_pin.Blobs(), {}, {}
    for host, jobs in wanted.items():
        st = states.get(host) or {}
        for job, rels in jobs.items():
            record = (st.get("deployed") or {}).get(job) or {}
            promoted.setdefault(host, {})[job] = {rel: (record.get("files") or {}).get(rel) for rel in rels}
            if (job, host) in rollback:
                old = (st.get("previous") or {}).get(job) or {}
                previous.setdefault(host, {})[job] = {rel: (old.get("files") or {}).get(rel) for rel in rels}
                continue
            for rel in rels:
                key = blobs.add(_deploy_pin.text_of(staging.shipped_bytes(job, host, rel)))
                after.setdefault(host, {}).setdefault(job, {})[rel] = key
    return {"hosts": sorted(set(wanted) | set(notes)), "wanted": wanted, "notes": notes, "after": after,
            "blobs": blobs.texts,
            "promoted": promoted, "previous": previous}


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def _fail(self, result, bucket, msg, plan=None):
        # a refused deploy must not keep the bucket locked until the playbook exits
        if not self._task.check_mode:
            try:
                _deploy_lock.release(bucket, os.getppid())
            except OSError:
                pass
        result.update(failed=True, changed=False, msg=msg)
        if plan is not None:
            result["plan"] = plan
            for line in plan["lines"]:
                display.display(line, color="red" if line.startswith(("ERROR", "FAILED")) else None)
        return result

    def _check_pin(self, given, plan, digest):
        """None, or why the deploy is refused: -e maand_plan names another plan than the one computed now."""
        summary = _deploy_pin.plan_summary(plan)
        if self._task.check_mode:
            keep_summary(plan["bucket_id"], digest, summary)
        if not given:
            return None
        error = _deploy_pin.pin_error(given)
        if error:
            return "deploy refused, nothing was changed: " + error
        if _deploy_pin.pin_matches(given, digest):
            plan["lines"].append("plan hash matches the pinned plan %s" % given)
            return None
        old = pinned_summary(plan["bucket_id"], str(given).strip().lower())
        why = (_deploy_pin.describe_changes(old, summary) if old else
               ["(the pinned plan's summary is not on this controller, so what changed cannot be named; "
                "compare with a new --check --diff)"])
        return ("deploy refused, nothing was changed: the plan is %s, not the pinned plan %s (maand_plan). "
                "What changed:\n  %s\nReview the new plan with --check --diff and pin its hash."
                % (digest[:_deploy_pin.SHORT], given, "\n  ".join(why)))

    def _pre_deploy(self, bucket, catalog, in_scope, jobs_filter, states, hostvars, hosts, task_vars):
        """maand runs pre_deploy before staging, so its KV writes reach this deploy's templates; a
        job whose hook fails is left out (and the deploy fails). Not in check mode (hooks have effects)."""
        jobs = [j for j in in_scope if _hooks.has_event(catalog, j, "pre_deploy")]
        if not jobs:
            return {}, in_scope, jobs_filter
        if self._task.check_mode:
            display.warning("check mode: pre_deploy hooks of %s not run; templates show the KV as it is" % ", ".join(jobs))
            return {}, in_scope, jobs_filter
        with _hook_deploy.session(bucket, catalog, _hook_deploy.hosts_from_hostvars(hostvars, hosts, _action_support.ssh_args(C.config, task_vars)),
                                  _action_support.int_var(self._templar, task_vars, "maand_hook_timeout", _hook_run.DEFAULT_TIMEOUT),
                                  _action_support.int_var(self._templar, task_vars, "maand_deploy_output_tail", _hook_run.DEFAULT_TAIL),
                                  _deploy_plan.current_versions(states),
                                  lambda msg: display.display("hook: " + msg)) as ctx:
            failed = _hook_deploy.pre_deploy(ctx, jobs)
        for job, messages in sorted(failed.items()):
            for msg in messages:
                display.display("FAILED: %s" % msg, color="red", stderr=True)
        if failed:
            in_scope = [j for j in in_scope if j not in failed]
            jobs_filter = sorted(in_scope)
        return failed, in_scope, jobs_filter

    def act(self, result, args, task_vars):
        bucket = args["bucket"]
        warn_unknown_extra_vars(self._loader)
        try:
            catalog = _catalog.read_catalog(bucket)
        except _catalog.CatalogError as exc:
            return self._fail(result, bucket, "%s: %s" % (bucket, exc))
        if catalog is None:
            return self._fail(result, bucket, "%s/data/catalog.json does not exist: run `ansible-playbook -i %s/maand.yml "
                              "maand.core.build` first" % (bucket, bucket))
        try:  # the inventory refuses a stale catalog too, but preview: true or a cached inventory gets past it
            changed = _fingerprint.stale(bucket, catalog)
        except OSError as exc:
            return self._fail(result, bucket, "%s: cannot read the workspace to compare it with the catalog: %s" % (bucket, exc))
        if changed:
            return self._fail(result, bucket, "ErrStaleCatalog: %s/data/catalog.json: workspace changed since the last build "
                              "(%s); nothing was changed (fix: run ansible-playbook maand.core.build -e maand_bucket=%s)"
                              % (bucket, ", ".join(changed[:10]), bucket))
        if args["adopt_bucket_id"]:  # written by maand.core.deploy_lock (not in check mode)
            catalog = dict(catalog, bucket_id=args["adopt_bucket_id"])
        hostvars = task_vars.get("hostvars") or {}
        hosts = args["hosts"]
        jobs_filter, errors = _deploy_plan.parse_jobs_filter(args["jobs"], [j["name"] for j in catalog.get("jobs", [])])
        if errors:
            return self._fail(result, bucket, "; ".join(errors))
        states = {h: _host_state(hostvars, h, args["state_var"]) for h in hosts}
        in_scope = [j["name"] for j in catalog.get("jobs", [])
                    if not j.get("removed") and (jobs_filter is None or j["name"] in jobs_filter)]
        # job specs' environments (against the controller's), users, groups and root needs checked before
        # pre_deploy hooks run on any worker
        id_errors = (_jobspec_deploy.check_env(catalog, in_scope, os.environ.get)
                     + _jobspec_deploy.check_ids(catalog, states, in_scope))
        if id_errors:
            return self._fail(result, bucket, "deploy refused, nothing was changed:\n  " + "\n  ".join(id_errors))
        hook_failures, in_scope, jobs_filter = self._pre_deploy(bucket, catalog, in_scope, jobs_filter, states,
                                                                hostvars, hosts, task_vars)
        # every job tree read once, every active allocation's templates rendered and hashed in memory
        try:  # job specs' layers stacked under the job trees (data/.jobspec-layers/<job>; a temp folder in check mode)
            with _jobspec_layers.stacked(bucket, catalog, in_scope, self._task.check_mode) as stacked:
                staging = _deploy_stage.compute(bucket, stacked, in_scope, hosts, _deploy_plan.current_versions(states),
                                                _deploy_plan.seen_update_seq(states, catalog),
                                                [provider(bucket, catalog) for provider in OVERLAY_PROVIDERS])
        except (_jobspec_layers.LayerError, OSError) as exc:
            return self._fail(result, bucket, "deploy refused, nothing was changed:\n  %s" % exc)
        env_errors = _with_environments(catalog, staging.content)
        if env_errors:
            return self._fail(result, bucket, "deploy refused, nothing was changed:\n  " + "\n  ".join(env_errors))
        adopted, adopt_warning = _maand_db.adopted_versions(bucket, catalog["bucket_id"])  # takeover from maand
        if adopt_warning:
            display.warning(adopt_warning)
        try:
            plan = _deploy_plan.compute_plan(catalog, staging.content, states, hosts,
                                             {"jobs": jobs_filter, "force": args["force"], "sync_only": args["sync_only"],
                                              "adopt_bucket_id": args["adopt_bucket_id"], "stage_errors": staging.errors,
                                              "rollout_orders": _hook_deploy.rollout_orders(bucket, in_scope),
                                              "adopted": adopted, "rollback": args["rollback"], "promote": args["promote"]})
        except _deploy_plan.PlanError as exc:
            return self._fail(result, bucket, str(exc))
        if plan["errors"]:
            return self._fail(result, bucket, "deploy refused, nothing was changed:\n  " + "\n  ".join(plan["errors"]),
                              plan=plan)
        digest = _deploy_pin.decorate(plan, catalog)  # before hook failures and estimates join the plan
        refused = self._check_pin(args["plan_hash"], plan, digest)
        if refused:
            return self._fail(result, bucket, refused, plan=plan)
        for job, messages in sorted(hook_failures.items()):  # the deploy goes on without them and ends failed
            plan["failures"].extend({"job": job, "worker": None, "msg": "%s (job %s not deployed)" % (m, job)}
                                    for m in messages)
            plan["lines"].append("FAILED: job %s: pre_deploy failed, the job is not deployed this run" % job)
        workers = {w["host"]: w for w in catalog.get("workers", [])}
        plan["lines"].extend(_jobspec_deploy.attach(plan, _jobspec_deploy.specs_of(catalog), workers,
                                                    _jobspec_deploy.load_history(bucket), args["slots"]))
        work = plan["has_work"] or bool(plan["prune"])
        run_dir, segments = "", []
        if not self._task.check_mode:
            try:  # only the allocations that sync are staged (data/.deploy-stage/<host>/<job>)
                staging.stage_plan(bucket, plan)
            except OSError as exc:
                return self._fail(result, bucket, "cannot stage the job trees under %s: %s; nothing was changed"
                                  % (_deploy_stage.stage_root(bucket), exc))
            try:
                run_dir = _deploy_run.new_run(bucket, plan)
            except (OSError, _deploy_run.RunError) as exc:
                return self._fail(result, bucket, "cannot create the deploy run folder under %s/data: %s" % (bucket, exc))
            # MAAND_DEPLOY_WIDE_FACTOR: a test-only knob, so that a 3-host fleet exercises narrow steps
            segments = _deploy_run.segments(plan, len(hosts), int(os.environ.get("MAAND_DEPLOY_WIDE_FACTOR")
                                                                  or _deploy_run.WIDE_FACTOR))
        summary = _deploy_view.plan_summary(plan)
        result.update(changed=bool(self._task.check_mode and work), plan=plan, bucket=bucket,
                      msg=plan["lines"][0], run_dir=run_dir, segments=segments,
                      segment_groups=_deploy_run.segment_groups(segments), summary=summary, plan_hash=digest,
                      content_diff=content_diff(plan, staging, states) if self._task.diff else {"hosts": []})
        if self._task.diff:
            result["diff"] = {"prepared": "\n".join(plan["lines"] + [summary]) + "\n"}
        elif C.DEFAULT_STDOUT_CALLBACK not in ("maand.core.deploy", "deploy"):  # that callback prints them
            for line in plan["lines"] + [summary]:
                display.display(line, color="yellow" if work and line.startswith("  ") and " skip " not in line else None)
        return result
