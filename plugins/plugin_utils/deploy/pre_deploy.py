# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``pre_deploy`` hooks at each job's wave, in maand's order (no Ansible imports).

maand (deploy/execute.go, plan_hash.go refreshPlanHashesForJobPlan), per ``deployment_seq`` wave in
ascending order: each job of the wave in scope that registers ``pre_deploy`` runs its commands (changed
or not; commands in name order, one allocation at a time), its KV writes are kept, the job is staged and
hashed again; then the wave's jobs with changes roll out. A failing job is not rolled out; the others go on.

Here the plan is computed once, before the run (it is what ``--check`` shows and ``-e maand_plan`` pins):

* at the plan, a job with ``pre_deploy`` hooks renders from the KV as it is, a key its hooks may write
  reading as "" (``stage.compute(pending=...)``); ``entry`` makes the ``PreDeploy`` record of what it
  rendered, per allocation, and ``attach`` (a stage of building the plan, deploy/plan.py) gives the plan
  with it as ``plan["pre_deploy"]`` and the lines saying when the hooks run;
* before the first step of each wave (or the final pass, or ``finish``, for waves with nothing to roll
  out), ``run_due`` runs the hooks of the wave's jobs after everything of the earlier waves (their gates
  and ``post_deploy``), each job rendered again right after its hooks; ``apply`` says which files changed
  (``Rerender`` records), to ship with the rollout the plan has for that allocation (deploy/plan.rerendered
  gives the run's new plan, deploy/run.before_step writes it). A hook that fails, a render that fails, or
  changed files where the plan rolls nothing out (or a pinned plan) fail the job before its wave: none of
  its ops run, nor any job of a later wave; the earlier waves keep what they rolled out.

At run time the plan is plan.json as the run reads it (JSON); its pre_deploy record is read as a
``PreDeploy``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from ..bucket import content
from . import run_state
from .records import PRE_DEPLOY, PreDeploy, Rerender

KEY = PRE_DEPLOY


# --- at the plan -----------------------------------------------------------------------------------

def entry(hooked: Iterable[str], job_waves: Mapping[str, int], staged: Mapping[str, Any],
          versions: Mapping[tuple, str], update_seq: int, pinned: bool, globs: Mapping[str, list],
          rollout_orders: Mapping[str, str] | None = None) -> PreDeploy:
    """The PreDeploy record: the jobs with hooks in hook order, their waves, what the plan rendered for each of
    their allocations ({job: {host: hash}}, only jobs whose allocations render), the versions and update_seq
    they rendered with, whether the plan is pinned, the restart_globs of reload jobs and the rollout_order each
    job had in the KV (hooks/points.rollout_orders)."""
    jobs = list(hooked)
    rendered = {}
    for job in jobs:
        allocs = (staged.get(job) or {}).get("allocations") or {}
        if allocs:
            rendered[job] = {h: a.get("hash") for h, a in sorted(allocs.items())}
    return PreDeploy(jobs, {j: int(job_waves.get(j) or 0) for j in jobs}, rendered,
                     {j: {h: v for (jj, h), v in sorted(versions.items()) if jj == j} for j in rendered},
                     update_seq, bool(pinned), {j: list(globs[j]) for j in jobs if globs.get(j)},
                     dict(rollout_orders or {}))


def attach(plan, record: PreDeploy, check_mode: bool, missing: Mapping[str, list]):
    """The plan (a records.Plan) with its pre_deploy record and the lines about it (lines). A new plan."""
    return plan.replace(pre_deploy=record, lines=plan.lines + lines(record, check_mode, missing))


# --- at run time (the plan as plan.json holds it) ------------------------------------------------------

def _info(plan: Mapping[str, Any]) -> PreDeploy:
    return PreDeploy.from_json(plan.get(KEY))


def due(plan: Mapping[str, Any], state: run_state.RunState, step: Mapping[str, Any] | None) -> list[int]:
    """The waves whose pre_deploy hooks run before step, ascending: those up to the step's wave not run yet
    (step None: the final pass, every wave left; the reconcile step: none)."""
    info = _info(plan)
    if not info.jobs or (step is not None and step.get("wave") is None):
        return []
    done = set(state.pre_deploy_waves)
    waves = {w for w in info.waves.values() if w not in done}
    return sorted(w for w in waves if step is None or w <= step["wave"])


def wave_jobs(plan: Mapping[str, Any], wave: int) -> list[str]:
    info = _info(plan)
    return [j for j in info.jobs if info.waves.get(j) == wave]


def run_due(plan: Mapping[str, Any], state: run_state.RunState, step: Mapping[str, Any] | None,
            run_hooks: Callable[[str], list[str]],
            render: Callable[[str], tuple[dict, list[str]]]) -> tuple[list[str], list[Rerender]]:
    """Run the waves due before step in maand's order: per wave, per job (hook order), run_hooks(job) ->
    failure messages, then (when it rendered at the plan) render(job) -> ({host: plan entry}, errors) and
    apply. A job already blocked (an earlier failure) runs nothing. Failures fail the job before its wave
    (RS.fail_before_wave). Returns (failure messages, what changed: to stage again and put in the plan with
    deploy/plan.rerendered). The plan is not edited."""
    messages, changes = [], []
    rendered = _info(plan).rendered
    for wave in due(plan, state, step):
        for job in wave_jobs(plan, wave):
            if job in state.blocked:
                continue
            problems = run_hooks(job)
            if not problems and job in rendered:
                entries, errors = render(job)
                problems = ["job %s: its files could not be rendered after its pre_deploy hooks: %s" % (job, e)
                            for e in errors]
                if not problems:
                    problems, changed = apply(plan, job, entries)
                    changes += changed
            if problems:
                msg = failure(job, wave, problems)
                run_state.fail_before_wave(state, job, wave, msg)
                messages.append(msg)
        state.pre_deploy_waves.append(wave)
    return messages, changes


def failure(job: str, wave: int, problems: list[str]) -> str:
    return ("job %s: pre_deploy failed at wave %d, so job %s was not deployed (earlier waves are kept; jobs of later "
            "waves were not deployed): %s\nFix: mend the hook or the KV it needs (maand.core.job_command runs a "
            "command registered for cli too), then deploy again." % (job, wave, job, "\n".join(problems)))


def _run_ops(plan: Mapping[str, Any], job: str) -> dict[str, dict]:
    """{host: the run op that rolls job out there} (auto_revert ops left out)."""
    out = {}
    for step in plan.get("steps") or []:
        for host, ops in (step.get("ops") or {}).items():
            for op in ops:
                if op.get("kind") == "run" and op.get("job") == job and op.get("revert_of") is None:
                    out[host] = op
    return out


def _changed(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    return sorted(rel for rel in set(old) | set(new) if old.get(rel) != new.get(rel))


def apply(plan: Mapping[str, Any], job: str,
          entries: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[Rerender]]:
    """Compare job's allocations rendered again (entries: {host: {"hash", "files"} or {"error"}}) with what the
    plan rendered. Unchanged: nothing. Changed: when the plan rolls the job out on that host (start, restart,
    reload, sync) its op is to ship the new files and record their hash (a Rerender); else, or when the plan is
    pinned, or a reload now touches a restart_globs file, the job fails (nothing changes). Returns (problems,
    changes); the plan is not edited."""
    info = _info(plan)
    before = info.rendered.get(job) or {}
    errors = sorted("%s: %s" % (h, e["error"]) for h, e in entries.items() if e.get("error"))
    if errors:
        return ["job %s: %s" % (job, e) for e in errors], []
    ops = _run_ops(plan, job)
    diff = {h: e for h, e in sorted(entries.items())
            if h in before and e.get("hash") != before[h] and not (ops.get(h) or {}).get("restore")}
    if not diff:
        return [], []
    paths = {h: _changed(((ops.get(h) or {}).get("record") or {}).get("files") or {}, e.get("files") or {})
             for h, e in diff.items()}
    problem = _refusal(info, job, diff, ops, paths)
    if problem:
        return [problem], []
    return [], [Rerender(job, host, ops[host]["id"], new["hash"], dict(new.get("files") or {}), paths[host])
                for host, new in diff.items()]


def _refusal(info: PreDeploy, job: str, diff: Mapping[str, Any], ops: Mapping[str, dict],
             paths: Mapping[str, list]) -> str | None:
    """Why changed files of job cannot ship with this run's plan (pinned, no rollout there, a reload that now
    needs a restart), or None."""
    where = "; ".join("%s (%s)" % (h, ", ".join(paths[h][:5]) or "the tree hash") for h in diff)
    if info.pinned:
        return ("job %s: its pre_deploy hooks changed its files on %s after the plan, and the plan is pinned "
                "(-e maand_plan): nothing of job %s changes this run; review the new plan with --check --diff"
                % (job, where, job))
    missing = [h for h in diff if h not in ops]
    if missing:
        return ("job %s: its pre_deploy hooks changed its files on %s, where this run's plan rolls nothing out "
                "(it was computed before the hooks ran): the KV writes are kept, deploy again to roll them out"
                % (job, ", ".join(missing)))
    globs = info.restart_globs.get(job) or []
    reloads = [h for h in diff if ops[h].get("action") == "reload" and content.match_any(globs, paths[h])]
    if reloads:
        return ("job %s: its pre_deploy hooks changed files on %s that need a restart (restart_globs), and the plan "
                "has a reload there: deploy again" % (job, ", ".join(reloads)))
    return None


def lines(info: PreDeploy | None, check_mode: bool, missing: Mapping[str, list]) -> list[str]:
    """The plan's lines about pre_deploy (info: the PreDeploy record): when the hooks run, and that the plan
    was rendered before them."""
    if not info or not info.jobs:
        return []
    by_wave: dict[int, list[str]] = {}
    for job in info.jobs:
        by_wave.setdefault(info.waves[job], []).append(job)
    waves = "; ".join("wave %d: %s" % (w, ", ".join(jobs)) for w, jobs in sorted(by_wave.items()))
    if check_mode:
        out = ["pre_deploy hooks NOT run (check mode): this plan was rendered from the KV as it is now; the deploy "
               "runs them at the start of each job's wave (%s) and renders those jobs again" % waves]
    else:
        out = ["pre_deploy hooks run at the start of each job's wave, after the earlier waves (%s); their jobs "
               "are rendered again then" % waves]
    out.append("  files they change ship with the rollout planned here; where this plan rolls nothing out the "
               "job fails (deploy again)")
    for job in sorted(missing):
        keys = sorted({"%s %s" % nk for nk in missing[job]})
        if keys:
            out.append("  job %s reads KV keys that do not exist yet (rendered as \"\" in this plan): %s"
                       % (job, ", ".join(keys[:5]) + (" (+%d more)" % (len(keys) - 5) if len(keys) > 5 else "")))
    return out
