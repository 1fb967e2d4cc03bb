"""The SSH sessions per worker that a deploy plan implies (issue 25): pinned here so a change of the count
is a visible decision. bench/bench_deploy.py measures the same counts on a real fleet (sshd logs); its
bucket is the one below: api, web, job2 on every worker, half1 and half2 on every other one, job2 and
half2 in the second wave.

How a green run spends sessions on a worker (roles/deploy/tasks/main.yml, deploy/agent_step.py):
one state read (maand.core.deploy_state, every host of the play), then in every step where the worker has
a request (run_state.requests_for_step) one session: "sync+agent" when an op syncs files and ops other than
files shipped early, or promotions, remain (the agent is the rsync's remote command: the files, then the
step), "rsync" when only files travel, "agent" when nothing is synced. All of them ride on one SSH login
(ControlPersist)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan, run as _run, run_state as _run_state
from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, catalog, content, job, states

HOSTS = ["h1", "h2", "h3", "h4"]
WAVE = {"api": 0, "web": 0, "half1": 0, "job2": 1, "half2": 1}


def bench_bucket():
    ready = {"command_ready": {"executed_on": ["cli"], "demands": {"job": "", "command": ""}}}
    web = job("web", restart_policy="reload", restart_globs=["conf/*.conf"], max_concurrent_upgrades=2)
    jobs = [job("api", commands=ready), web, job("job2", deployment_seq=1), job("half1"), job("half2", deployment_seq=1)]
    allocs = [(j, h, "active") for j in ("api", "web", "job2") for h in HOSTS]
    allocs += [(j, h, "active") for j in ("half1", "half2") for h in HOSTS[::2]]
    cat = catalog(jobs, allocs, workers=HOSTS)
    for alloc in cat["allocations"]:
        alloc["deployment_seq"] = WAVE[alloc["job"]]
    return cat, content(*WAVE)


def ok_answer(request):
    return {"ok": True, "promotions": [{"id": p["id"], "ok": True} for p in request.promote],
            "ops": [{"id": o["id"], "ok": True} for o in request.ops]}


def sessions(plan, hosts):
    """{host: [session]} of a green run: "read", then "sync+agent <step>" / "rsync <step>" / "agent <step>"
    (step "final": the last promote pass)."""
    state = _run_state.new_state("r1", plan)
    out = {h: ["read"] for h in hosts}
    for seg in _run.segments(plan, len(hosts)):  # the passes the role runs (the final one only after gates)
        key = seg["step"]
        step = _run.find_step(plan, key)
        requests = _run_state.requests_for_step(state, step)
        for host, request in requests.items():
            syncs = any(op.get("sync") for op in request.ops)
            agent = bool(request.promote) or any(op["kind"] != "files" for op in request.ops)
            out[host].append("%s %s" % ("sync+agent" if syncs and agent else "rsync" if syncs else "agent", key))
        passed = {g["job"]: None for g in _run_state.gates_to_run(state, step)}
        state = _run_state.fold_step(state, step, {h: ok_answer(r) for h, r in requests.items()}, passed)
    assert not _run_state.final_report(state, plan).failed
    return out


def test_a_first_deploy_of_two_waves_costs_three_sessions_per_worker():
    cat, cont = bench_bucket()
    plan = _plan.compute_plan(cat, cont, states(HOSTS), HOSTS)
    assert [s["wave"] for s in plan["steps"]] == [0, 1]
    # the files of the second wave travel in the first wave's rsync, which also runs the first wave's step;
    # the second wave needs its own agent call (its starts wait for the first wave on every worker):
    # (G)'s 2 sessions + 1
    assert sessions(plan, HOSTS) == {h: ["read", "sync+agent 0", "agent 1"] for h in HOSTS}


def test_a_no_change_redeploy_only_reads():
    cat, cont = bench_bucket()
    plan = _plan.compute_plan(cat, cont, _settle(cat, cont, HOSTS), HOSTS)
    assert plan["steps"] == []
    assert sessions(plan, HOSTS) == {h: ["read"] for h in HOSTS}


def test_a_rolling_change_of_one_job_costs_one_session_per_worker_in_its_own_batch():
    cat, cont = bench_bucket()
    settled = _settle(cat, cont, HOSTS)
    changed = dict(cont, **content("api", files={"Makefile": "m1", "conf/a.conf": "c2"}))
    plan = _plan.compute_plan(cat, changed, settled, HOSTS)
    assert len(plan["steps"]) == len(HOSTS)  # max_concurrent_upgrades 1: one batch per worker
    # the new update_seq (worker.json) rides in each worker's own batch, with its files and its restart
    assert sessions(plan, HOSTS) == {h: ["read", "sync+agent %d" % i] for i, h in enumerate(HOSTS)}
    assert [sorted(s["ops"]) for s in plan["steps"]] == [[h] for h in HOSTS]
