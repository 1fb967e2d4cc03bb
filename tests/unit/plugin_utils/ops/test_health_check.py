"""maand.core.health_check's core (_health_check): which jobs and allocations, the worker SSH port dial,
probes on real loopback sockets, commands after probes, retries with maand_wait (a stepped clock, no timing),
and fail fast on `make status` while it waits (as the deploy's gates)."""

from __future__ import annotations

import json
import socket

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import health
from ansible_collections.maand.core.plugins.plugin_utils.deploy import remote as _remote
from ansible_collections.maand.core.plugins.plugin_utils.ops import health_check as _health_check, status as _status
from tests.unit.plugin_utils.deploy.test_deploy_plan import catalog, job


@pytest.fixture
def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    yield sock.getsockname()[1]
    sock.close()


def closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def gate(name, checks, attempts=3):
    return {"job": name, "checks": checks, "timeout_seconds": 1.0, "attempts": attempts, "interval_seconds": 1.0}


class Clock:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def real_probe(host, address, check, timeout):
    return health.probe(address, check, timeout)


def test_select_jobs_refuses_unknown_names_with_did_you_mean():
    cat = catalog([job("api"), job("web"), job("old", removed=True)], [])
    assert _health_check.select_jobs(cat, []) == ["api", "web"]
    assert _health_check.select_jobs(cat, "web, api") == ["web", "api"]
    with pytest.raises(_health_check.HealthCheckError) as err:
        _health_check.select_jobs(cat, "apy,web")
    assert 'apy (did you mean "api"?)' in str(err.value) and "its jobs: api, web" in str(err.value)
    with pytest.raises(_health_check.HealthCheckError):
        _health_check.select_jobs(cat, ["old"])


def test_plan_jobs_active_allocations_on_the_chosen_hosts_only():
    cat = catalog([job("api", health_gate=gate("api", [{"type": "tcp", "port": 1}])), job("plain", health_gate=None),
                   job("hooked", commands={"command_health": {"executed_on": ["health_check"]}})],
                  [("api", "h1", "active"), ("api", "h2", "disabled"), ("api", "h3", "active"), ("plain", "h1", "active"),
                   ("hooked", "h1", "active")])
    plans, skipped = _health_check.plan_jobs(cat, ["api", "plain", "hooked"], ["h1", "h2"])
    assert [(p.job, p.workers, p.commands) for p in plans] == [("api", ["h1"], []), ("hooked", ["h1"], ["command_health"])]
    assert skipped == {"plain": _health_check.NO_CONFIG}
    plans, skipped = _health_check.plan_jobs(cat, ["api", "plain"], ["h2"])
    assert plans == [] and skipped == {"api": _health_check.NO_ALLOCATION, "plain": _health_check.NO_CONFIG}


def test_a_probe_that_cannot_run_fails_its_job_lines():
    cat = catalog([job("api", health_check={"checks": [{"type": "grpc", "port": 1}]})], [("api", "h1", "active")])
    plans, dummy = _health_check.plan_jobs(cat, ["api"], ["h1"])
    out = _health_check.run(plans, {}, real_probe)
    assert [(x.job, x.ok) for x in out.lines] == [("api", False)] and "not supported" in out.lines[0].reason


def test_healthy_and_failing_lines_and_summary(listener):
    bad = closed_port()
    plans = [_health_check.JobPlan("api", ["h1"], [{"type": "tcp", "port": listener}], []),
             _health_check.JobPlan("web", ["h1"], [{"type": "tcp", "port": bad}], [])]
    out = _health_check.run(plans, {"h1": ("127.0.0.1", listener)}, real_probe, skipped={"plain": _health_check.NO_CONFIG})
    texts = [x.text() for x in out.lines]
    assert texts[0].startswith("ok     (worker)         h1              ssh port :%d" % listener)
    assert texts[1].startswith("ok     api              h1              tcp :%d" % listener) and texts[1].endswith(" ms")
    assert texts[2].startswith("FAILED web              h1              tcp :%d" % bad)
    assert "refused" in texts[2].lower()
    assert [x.job for x in out.failed] == ["web"]
    assert out.summary() == "health_check: 2 ok, 1 failed; 2 job(s) checked, 1 skipped (plain); unhealthy jobs: web"


def test_an_unreachable_worker_is_named(listener):
    bad = closed_port()
    out = _health_check.run([], {"h1": ("127.0.0.1", listener), "h2": ("127.0.0.1", bad)}, real_probe)
    assert [x.worker for x in out.failed] == ["h2"]
    assert out.summary().endswith("unreachable workers (SSH port): h2")


def test_commands_run_only_where_the_probes_passed(listener):
    bad = closed_port()
    seen = []

    def commands(job, hosts):
        seen.append((job, list(hosts)))
        return {h: None if h == "h1" else "exit 1" for h in hosts}
    plans = [_health_check.JobPlan("api", ["h1", "h2"], [{"type": "tcp", "port": listener}], ["command_health"]),
             _health_check.JobPlan("db", ["h1"], [{"type": "tcp", "port": bad}], ["command_health"])]
    out = _health_check.run(plans, {}, lambda h, a, c, t: None if h in ("h1", "h2") and c["port"] == listener else "down", commands)
    assert seen == [("api", ["h1", "h2"])]  # db's probe failed: its command did not run
    states = {(x.job, x.worker, x.what): (x.ok, x.reason) for x in out.lines}
    assert states[("api", "h1", "command command_health")] == (True, "")
    assert states[("api", "h2", "command command_health")] == (False, "exit 1")
    assert states[("db", "h1", "command command_health")] == (False, "not run: the probes have not passed")


def test_wait_retries_until_healthy_within_the_job_attempts():
    clock = Clock()
    answers = iter(["refused", "refused", None])
    plans = [_health_check.JobPlan("api", ["h1"], [{"type": "tcp", "port": 1}], [], attempts=5, interval=2.0)]
    out = _health_check.run(plans, {}, lambda *a: next(answers), wait=True, clock=clock, sleep=clock.sleep)
    assert not out.failed and out.rounds == 3 and clock.sleeps == [2.0, 2.0]


def test_wait_gives_up_after_the_attempts_and_without_wait_tries_once():
    clock = Clock()
    plans = [_health_check.JobPlan("api", ["h1"], [{"type": "tcp", "port": 1}], [], attempts=3, interval=1.0)]
    out = _health_check.run(plans, {}, lambda *a: "refused", wait=True, clock=clock, sleep=clock.sleep)
    assert out.rounds == 3 and [x.reason for x in out.failed] == ["refused"]
    out = _health_check.run(plans, {}, lambda *a: "refused", clock=clock, sleep=clock.sleep)
    assert out.rounds == 1


def test_wait_seconds_bounds_the_retries_instead_of_attempts():
    clock = Clock()
    plans = [_health_check.JobPlan("api", ["h1"], [{"type": "tcp", "port": 1}], [], attempts=2, interval=1.0)]
    out = _health_check.run(plans, {}, lambda *a: "refused", wait=True, wait_seconds=5, clock=clock, sleep=clock.sleep)
    assert out.rounds == 6 and clock.now == 5.0


def test_split_names():
    assert _health_check.split_names(" a, ,b ") == ["a", "b"] and _health_check.split_names(["a", " "]) == ["a"] and _health_check.split_names(None) == []


def test_many_probes_all_get_their_own_line_in_order(listener):
    bad = closed_port()
    hosts = ["h%d" % i for i in range(12)]
    plans = [_health_check.JobPlan("api", hosts, [{"type": "tcp", "port": listener}, {"type": "tcp", "port": bad}], [])]
    out = _health_check.run(plans, {}, lambda h, a, c, t: health.probe("127.0.0.1", c, t))
    assert [(x.worker, x.ok) for x in out.lines] == [(h, ok) for h in hosts for ok in (True, False)]


# --- fail fast: `make status` while the verb waits (health/watch.StatusWatch, as the deploy's gates) -----------

def call(fn):
    """submit: the status check right away (the verb's default runs it in a background thread)."""
    fn()


def counting_probe(counts, healthy=()):
    def probe(host, address, check, timeout):
        counts[host] = counts.get(host, 0) + 1
        return None if host in healthy else "tcp %s:1: [Errno 111] Connection refused" % address
    return probe


def test_wait_stops_on_a_worker_where_make_status_says_the_job_is_not_running():
    clock = Clock()
    counts, asked, tails = {}, [], []

    def status(job, host):
        asked.append((job, host))
        return (False, "api not running") if host == "h1" else (True, "api running")

    def diagnose(job, hosts):
        tails.append((job, hosts))
        return {h: ["--- make status (exit 2):", "api not running", "--- logs/api.log:", "api: cannot open api.conf"]
                for h in hosts}
    plans = [_health_check.JobPlan("api", ["h1", "h2"], [{"type": "tcp", "port": 1}], ["command_health"], attempts=30, interval=1.0)]
    out = _health_check.run(plans, {}, counting_probe(counts), lambda job, hosts: {}, wait=True, clock=clock, sleep=clock.sleep,
                            status=status, diagnose=diagnose, submit=call)
    # h1: not running at rounds 1 and 2 -> not probed again; h2 runs (its probe fails): its whole budget
    assert counts == {"h1": 2, "h2": 30} and out.rounds == 30
    assert set(out.stopped) == {("api", "h1")}
    why = "job api is not running: `make status` said so 2 times in a row, 1.0 s apart (api not running)"
    assert out.stopped[("api", "h1")] == why
    assert asked.count(("api", "h1")) == 2 and tails == [("api", ["h1"])]
    assert out.notes == ["h1: " + why,
                         "job api: stopped waiting after 1.0 s (2 of 30 attempt(s), 1.0 s apart): `make status` says "
                         "the job is not running",
                         "h1: last lines of job api:\n    --- make status (exit 2):\n    api not running\n"
                         "    --- logs/api.log:\n    api: cannot open api.conf"]
    lines = {(x.worker, x.what): x for x in out.lines}
    assert lines[("h1", "tcp :1")].reason == "tcp h1:1: [Errno 111] Connection refused; " + why
    assert lines[("h1", "command command_health")].reason == "not run: the probes have not passed; " + why
    assert lines[("h2", "tcp :1")].reason == "tcp h2:1: [Errno 111] Connection refused"  # not declared dead
    assert out.summary().endswith("unhealthy jobs: api; not running (`make status`, stopped waiting): api on h1")


def test_a_dead_job_ends_its_own_wait_the_others_keep_their_budgets():
    clock = Clock()
    counts = {}

    def status(job, host):
        return (False, "") if job == "api" else (None, "no status target")  # web: cannot tell, keeps its budget
    plans = [_health_check.JobPlan("api", ["h1", "h2"], [{"type": "tcp", "port": 1}], [], attempts=30, interval=1.0),
             _health_check.JobPlan("web", ["w1"], [{"type": "tcp", "port": 2}], [], attempts=5, interval=1.0)]
    out = _health_check.run(plans, {}, counting_probe(counts), wait=True, clock=clock, sleep=clock.sleep, status=status, submit=call)
    assert counts == {"h1": 2, "h2": 2, "w1": 5} and out.rounds == 5   # not api's 30
    assert set(out.stopped) == {("api", "h1"), ("api", "h2")}
    assert [n for n in out.notes if n.startswith("job ")] == [
        "job api: stopped waiting after 1.0 s (2 of 30 attempt(s), 1.0 s apart): `make status` says the job is not running"]
    assert out.summary().endswith("not running (`make status`, stopped waiting): api on h1, h2")


def test_with_wait_seconds_the_note_counts_attempts_without_a_budget_count():
    clock = Clock()
    plans = [_health_check.JobPlan("api", ["h1"], [{"type": "tcp", "port": 1}], [], attempts=30, interval=1.0)]
    out = _health_check.run(plans, {}, counting_probe({}), wait=True, wait_seconds=120, clock=clock, sleep=clock.sleep,
                            status=lambda job, host: (False, ""), submit=call)
    assert out.rounds == 2
    assert "job api: stopped waiting after 1.0 s (2 attempt(s), 1.0 s apart): `make status` says the job is not running" \
        in out.notes


def test_status_is_not_asked_without_wait_or_when_healthy():
    asked = []

    def status(job, host):
        asked.append(host)
        return False, ""
    plans = [_health_check.JobPlan("api", ["h1"], [{"type": "tcp", "port": 1}], [], attempts=3, interval=1.0)]
    out = _health_check.run(plans, {}, counting_probe({}), status=status, submit=call)              # no wait: one round
    assert out.rounds == 1 and not out.stopped and asked == []
    clock = Clock()
    out = _health_check.run(plans, {}, counting_probe({}, healthy=("h1",)), wait=True, clock=clock, sleep=clock.sleep,
                            status=status, submit=call)
    assert not out.failed and asked == []


def test_status_request_is_maand_core_status_s_request():
    cat = catalog([job("api", ports={"api_port": 31000}, spec={"environment": [{"vars": {"MODE": "prod"}}]}),
                   job("ctl", commands={"command_ctl": {"executed_on": ["job_control"]}})],
                  [("api", "h1", "active"), ("ctl", "h1", "active")])
    req = json.loads(_health_check.status_request(cat, "api", "h1"))
    assert req["root"] == _remote.worker_root(cat["bucket_id"]) and req["timeout"] == health.STATUS_TIMEOUT
    [op] = req["ops"]
    assert (op["kind"], op["job"], op["host"], op["target"]) == ("status", "api", "h1", "status")
    assert op["env"]["MODE"] == "prod" and op["env"]["API_PORT"] == "31000" and op["env"]["ALLOCATION_IP"] == "h1"
    assert op == _status.status_ops(cat, "h1", [a for a in cat["allocations"] if a["job"] == "api"], ["api"],
                                    _status.spec_op({j["name"]: j for j in cat["jobs"]}))[0]
    assert _health_check.status_request(cat, "ctl", "h1") is None   # job_control: its status is not its Makefile's
    assert _health_check.status_request(cat, "api", "h9") is None   # no allocation there


def test_fail_fast_asks_through_the_gate_s_status_checker(tmp_path):
    """status from fail_fast is health/watch.status_checker over the muxed connection with the agent's command."""
    cat = catalog([job("api")], [("api", "h1", "active")])
    calls = []
    status = health.status_checker(lambda j, h: _health_check.status_request(cat, j, h), lambda: {"h1": {"address": "10.0.0.1"}},
                                   lambda host: "/usr/bin/python3",
                                   probe=lambda conn, cmd, req: calls.append((conn, cmd, req)) or (False, "down"), agent=_remote)
    assert status("api", "h1") == (False, "down") and status("api", "h2") == (None, "no status to ask")
    assert calls[0][1] == _remote.step_command("/usr/bin/python3") and json.loads(calls[0][2])["ops"][0]["job"] == "api"
    st, diag = _health_check.fail_fast(str(tmp_path), cat, {"h1": {"address": "10.0.0.1", "options": []}}, lambda host: "python3")
    assert callable(st) and callable(diag)


def test_the_command_runner_runs_the_job_s_health_check_commands_once_per_session(tmp_path, monkeypatch):
    """ops/health_check.command_runner over a built bucket: the job's health_check command on the controller
    (hooks/points.session, started when first needed, closed with the stack), one reason per failed worker."""
    import contextlib
    from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog
    from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _build
    from tests.maand_init import init_bucket, job as write_job, ws
    root = init_bucket(tmp_path)
    ws(root, "workers.json", [{"host": h, "labels": ["worker"]} for h in ("10.0.0.1", "10.0.0.2")])
    write_job(root, "api", {"version": "1.0.0", "selectors": ["worker"],
                            "commands": {"command_health": {"executed_on": ["health_check"]}}})
    ws(root, "jobs/api/_modules/command_health.py",
       "import os, sys\nip = os.environ['ALLOCATION_IP']\nsys.exit(0 if ip == '10.0.0.1' else 'not ready on ' + ip)\n")
    assert _build.build(root).report.ok
    catalog = _catalog.read_catalog(root)
    sessions, session = [], _health_check.points.session

    def counted(*args, **kwargs):
        sessions.append(args[0])
        return session(*args, **kwargs)
    monkeypatch.setattr(_health_check.points, "session", counted)
    with contextlib.ExitStack() as stack:
        run = _health_check.command_runner(stack, root, catalog, {}, 30, 5)
        assert sessions == []  # nothing started before the first job asks
        out = run("api", ["10.0.0.1", "10.0.0.2"])
        assert out["10.0.0.1"] is None and "not ready on 10.0.0.2" in out["10.0.0.2"] and "\n" not in out["10.0.0.2"]
        assert run("api", ["10.0.0.1"]) == {"10.0.0.1": None}
        assert sessions == [root]  # one runtime-API session for both
