"""Progress records of a deploy (plugins/plugin_utils/deploy/progress.py): written by the health
gates, followed by the maand.core.deploy callback, read back for gate times; and what a failed gate
adds to its message (deploy/gate.GateRunner, health/tails.py)."""

from __future__ import annotations

import json
import subprocess

from ansible_collections.maand.core.plugins.plugin_utils.deploy import gate as _gate
from ansible_collections.maand.core.plugins.plugin_utils.deploy import progress as _progress
from ansible_collections.maand.core.plugins.plugin_utils.health import tails as _tails

GATE = {"job": "api", "hosts": ["h1", "h2"], "attempts": 5, "interval_seconds": 0.5, "timeout_seconds": 1,
        "checks": [{"type": "http", "scheme": "http", "port": 30000, "path": "/health", "expect_status": 200}]}
PLAN = {"bucket_id": "b",
        "rows": [{"job": "api", "worker": "h1", "action": "start", "from_version": None, "batch": "api start batch 1/1"},
                 {"job": "api", "worker": "h2", "action": "start", "from_version": None, "batch": "api start batch 1/1"}]}


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_parse_lines_keeps_the_incomplete_tail_and_skips_garbage():
    records, rest = _progress.parse_lines('{"kind": "say", "msg": "a"}\nnot json\n[1]\n{"no_kind": 1}\n{"kind": "ga')
    assert records == [{"kind": "say", "msg": "a"}]
    assert rest == '{"kind": "ga'


def test_reader_follows_appends_and_completes_half_written_lines(tmp_path):
    writer = _progress.Writer(str(tmp_path), clock=lambda: 5.0)
    reader = _progress.Reader(_progress.progress_path(str(tmp_path)))
    assert reader.read() == []                       # no file yet
    writer.say("one")
    assert [r["msg"] for r in reader.read()] == ["one"]
    assert reader.read() == []
    with open(_progress.progress_path(str(tmp_path)), "a") as handle:
        handle.write('{"kind": "say", "msg": "tw')
    assert reader.read() == []
    with open(_progress.progress_path(str(tmp_path)), "a") as handle:
        handle.write('o"}\n')
    assert [r["msg"] for r in reader.read()] == ["two"]
    assert [r["msg"] for r in _progress.read_all(str(tmp_path))] == ["one", "two"]
    mark = _progress.mark(str(tmp_path))
    writer.say("three")
    assert [r["msg"] for r in _progress.read_since(str(tmp_path), mark)] == ["three"]
    assert _progress.Writer("").write({"kind": "say"}) is None  # no run folder (check mode): nothing, no error


def test_run_gate_reports_every_failing_attempt_then_the_end(tmp_path):
    clock = Clock()
    answers = iter(["refused", "refused", None, None, None])  # h1 passes at attempt 2, h2 ... see below

    def probe(address, check, timeout):
        if address == "h1":
            return next(answers)
        return None if clock.now >= 101.0 else "h2 down"
    writer = _progress.Writer(str(tmp_path), clock=clock)
    watch = _progress.GateWatch(writer, GATE, _progress.batch_label(PLAN, GATE))
    assert _gate.run_gate(GATE, {}, sleep=clock.sleep, probe_fn=probe, watch=watch, clock=clock) == []
    records = _progress.read_all(str(tmp_path))
    waits = [r for r in records if r["state"] == "wait"]
    assert [(r["host"], r["attempt"], r["elapsed"]) for r in waits] == [("h1", 1, 0.0), ("h1", 2, 0.5)]
    assert waits[0]["check"] == "http :30000/health" and waits[0]["attempts"] == 5
    assert waits[0]["batch"] == "api start batch 1/1" and waits[0]["error"] == "refused"
    assert records[-1]["state"] == "pass" and records[-1]["hosts"] == ["h1", "h2"] and records[-1]["elapsed"] == 1.0
    assert _progress.gate_times(records) == {("api", "h1"): 1.0, ("api", "h2"): 1.0}


def test_gate_runner_adds_elapsed_status_tail_and_listen_hint_on_a_first_start(tmp_path):
    clock = Clock()

    def run(gate, watch):
        return _gate.run_gate(gate, {}, sleep=clock.sleep, clock=clock, watch=watch,
                              probe_fn=lambda a, c, t: "http %s:30000: [Errno 111] Connection refused" % a)
    seen = []

    def diagnose(job, hosts):
        seen.append((job, hosts))
        return {h: ["--- make status (exit 2):", "stopped"] for h in hosts}
    go = _gate.GateRunner(run, _progress.Writer(str(tmp_path), clock=clock), PLAN, {"api": {"api_http_port": 30000}},
                          diagnose=diagnose, clock=clock)
    problems = go(GATE)
    assert problems[:2] == ["h1: http h1:30000: [Errno 111] Connection refused",
                            "h2: http h2:30000: [Errno 111] Connection refused"]
    assert problems[2] == "gave up after 2.0 s (5 attempt(s), 0.5 s apart)"
    assert problems[3] == "h1: last lines of job api:\n    --- make status (exit 2):\n    stopped"
    assert seen == [("api", ["h1", "h2"])]
    hint = problems[-1]
    assert hint.startswith("hint: nothing listens on port 30000 (api_http_port) of job api")
    assert '{{ get "maand/bucket" "api_http_port" }}' in hint and "$API_HTTP_PORT" in hint
    assert [r["state"] for r in _progress.read_all(str(tmp_path))][-1] == "fail"


def test_listen_hint_only_for_a_refused_named_port_at_first_deploy():
    refused = ["h1: tcp h1:30000: [Errno 111] Connection refused"]
    assert _gate.listen_hint("api", [30000], {"p": 30000}, refused, True)
    assert _gate.listen_hint("api", [30000], {"p": 30000}, refused, False) == ""          # an upgrade
    assert _gate.listen_hint("api", [30000], {"p": 30000}, ["h1: http returned 500"], True) == ""
    assert _gate.listen_hint("api", [30000], {"p": 31000}, refused, True) == ""           # not one of its ports
    assert _gate.first_deploy(PLAN, "api", ["h1"]) is True
    assert _gate.first_deploy(dict(PLAN, rows=[dict(PLAN["rows"][0], from_version="1.0.0")]), "api", ["h1"]) is False
    assert _gate.first_deploy(PLAN, "web", ["h1"]) is False


def test_passed_gate_calls_on_pass_and_adds_nothing(tmp_path):
    passed = []
    go = _gate.GateRunner(lambda gate, watch: [], _progress.Writer(str(tmp_path)), PLAN, on_pass=passed.append)
    assert go(GATE) == [] and passed == [GATE]


def test_ssh_argv_uses_the_connection_settings():
    argv = _tails.ssh_argv({"address": "10.0.0.1", "port": 2222, "user": "agent", "key": "/k", "options": ["-o", "A=b"],
                            "sudo": True}, "echo hi")
    assert argv[:3] == ["ssh", "-o", "A=b"] and argv[-2] == "agent@10.0.0.1"
    assert ["-i", "/k"] == argv[argv.index("-i"):argv.index("-i") + 2] and "2222" in argv
    assert argv[-1] == "sudo -n sh -c 'echo hi'"


def test_collect_tails_reports_an_unreachable_worker():
    def run(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 255, "", "ssh: connect to host 10.0.0.1 port 22: No route to host")
    tails = _tails.collect_tails({"h1": {"address": "10.0.0.1"}}, "/opt/worker/b", "api", ["h1", "h9"], run=run)
    assert tails == {"h1": ["(could not reach the worker: ssh: connect to host 10.0.0.1 port 22: No route to host)"]}
    json.dumps(tails)
