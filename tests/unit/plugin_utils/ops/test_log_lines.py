"""maand.core.logs over the bucket logs (ops/log_lines.py) against maand's logs/show_test.go cases, and
maand.core.job_logs' selection and report (ops/job_logs.py)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import runlog
from ansible_collections.maand.core.plugins.plugin_utils.hooks import run as hook_run
from ansible_collections.maand.core.plugins.plugin_utils.ops import job_logs, log_lines, logs as _logs

BEGIN = ('ts=2026-06-02T22:07:01.123Z event=command_begin run=abcdef12-0000 maand=deploy seq=17 worker=10.48.200.3 '
         'job=postgres phase=reconcile action=stop cmd="python3 runner.py stop postgres"')
END = 'ts=2026-06-02T22:07:02.456Z event=command_end run=abcdef12-0000 worker=10.48.200.3 exit=0 duration_ms=1333'


def F(**kw):
    return log_lines.Filters(**kw)


def test_matches_line_kv():  # TestMatchesLineKV
    line = runlog.parse_line('ts=2026-06-02T12:00:00.000Z event=command_begin run=abc worker=10.0.0.1 job=postgres '
                             'phase=reconcile action=stop')
    assert log_lines.matches(line, F(workers=("10.0.0.1",), jobs=("postgres",), phase="reconcile"))
    assert not log_lines.matches(line, F(event="deploy_skip"))


def test_matches_line_json_and_structured_stream():  # TestMatchesLineJSON, TestMatchesLineStructuredStream
    line = runlog.parse_line('{"ts":"2026-06-02T12:00:00.000Z","event":"deploy_skip","job":"api","run":"abc"}')
    assert log_lines.matches(line, F(jobs=("api",), event="deploy_skip"), run_id="abc")
    line = runlog.parse_line('ts=2026-06-02T12:00:00.000Z run=r1 maand=deploy worker=10.0.0.1 job=cassandra '
                             'phase=rsync stream=stdout msg="Transfer starting: 18 files"')
    assert log_lines.matches(line, F(workers=("10.0.0.1",), jobs=("cassandra",), phase="rsync"))
    assert not log_lines.matches(line, F(workers=("10.0.0.2",)))
    assert log_lines.matches(runlog.parse_line("job=a,b phase=rsync ts=1"), F(jobs=("b",)))  # an rsync's jobs
    assert log_lines.matches(runlog.parse_line("| payload"), F()) and \
        not log_lines.matches(runlog.parse_line("| payload"), F(jobs=("a",)))


def test_group_and_render_human():  # TestGroupEntries, TestRenderHuman
    entries = [(l, runlog.parse_line(l)) for l in (BEGIN, "| Container postgres  Stopping", END)]
    blocks, events = log_lines.group(entries)
    assert len(blocks) == 1 and events == [] and len(blocks[0]["streams"]) == 1 and blocks[0]["end"]
    out = "\n".join(log_lines.human(blocks, events))
    assert out == ("2026-06-02 22:07:01  deploy  seq=17  run=abcdef12\n"
                   "  reconcile  stop  postgres@10.48.200.3\n"
                   "  $ python3 runner.py stop postgres\n"
                   "  postgres@10.48.200.3 | Container postgres  Stopping\n"
                   "  ok  exit=0  1.3s")


def _bucket(tmp_path, files):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name, text in files.items():
        (logs / name).write_text(text)
    return str(tmp_path)


def test_show_job_filter_without_worker(tmp_path):  # TestShowJobFilterWithoutWorker
    bucket = _bucket(tmp_path, {
        "10.0.0.1.log": 'ts=2026-06-02T12:00:00.000Z event=command_begin run=r1 maand=deploy worker=10.0.0.1 '
                        'job=cassandra phase=rollout action=start cmd="make start"\n| started\n'
                        'ts=2026-06-02T12:00:01.000Z event=command_end run=r1 worker=10.0.0.1 job=cassandra exit=0 '
                        'duration_ms=100\n',
        "10.0.0.2.log": 'ts=2026-06-02T12:00:02.000Z event=command_begin run=r1 maand=deploy worker=10.0.0.2 '
                        'job=postgres phase=rollout action=start cmd="make start"\n'})
    folder, names = log_lines.paths(bucket, F(jobs=("cassandra",)))
    assert names == ["10.0.0.1.log", "10.0.0.2.log"]
    lines, data, msg = log_lines.show(bucket, F(jobs=("cassandra",), format="human"))
    text = "\n".join(lines)
    assert "cassandra@10.0.0.1" in text and "postgres@10.0.0.2" not in text
    assert "  cassandra@10.0.0.1 | started" in text and "1 command(s)" in msg
    lines, data, msg = log_lines.show(bucket, F(jobs=("cassandra",), tail=1))
    assert lines == ['ts=2026-06-02T12:00:01.000Z event=command_end run=r1 worker=10.0.0.1 job=cassandra exit=0 '
                     'duration_ms=100']


def test_runs_last_prefix_and_unknown(tmp_path):
    log = runlog.RunLog.open(str(tmp_path), "deploy", run_id="20261207T010101.000-1-aaaaaa", log_format="json")
    log.event("10.0.0.1", "reconcile_skip_stop", job="a", reason="not_deployed")
    later = runlog.RunLog.open(str(tmp_path), "run_command", log_format="kv")
    later.command("10.0.0.1", runlog.Command("", "run_command", "ssh", "uptime"), 1.0, 0.5, 0, [(None, "stdout", "up")])
    os.utime(tmp_path / "logs" / "runs" / later.run_id, (2e9, 2e9))
    assert log_lines.resolve_run(str(tmp_path / "logs"), "last") == later.run_id
    assert log_lines.resolve_run(str(tmp_path / "logs"), "20261207") == log.run_id
    with pytest.raises(log_lines.LogLinesError, match="no run nope"):
        log_lines.resolve_run(str(tmp_path / "logs"), "nope")
    lines, data, msg = log_lines.show(str(tmp_path), F(run="20261207", format="json"))
    assert '"event": "reconcile_skip_stop"' in "\n".join(lines) and data["run"] == log.run_id
    lines, data, msg = log_lines.show(str(tmp_path), F(jobs=("b",)))
    assert lines == ['no line has the job b (the jobs in these logs: a)'] and "no line has the job b" in msg


def test_a_symlinked_log_file_is_refused_not_followed(tmp_path):
    bucket = _bucket(tmp_path, {})
    (tmp_path / "secret").write_text("ts=1 event=secret\n")
    os.symlink(tmp_path / "secret", tmp_path / "logs" / "10.0.0.9.log")
    with pytest.raises(log_lines.LogLinesError, match="is a symlink: not read"):
        log_lines.show(bucket, F())


def test_a_worker_or_run_that_leaves_the_folder_is_refused(tmp_path):
    bucket = _bucket(tmp_path, {"10.0.0.1.log": "ts=1 event=x\n"})
    with pytest.raises(log_lines.LogLinesError, match="is not a worker"):
        log_lines.show(bucket, F(workers=("../../etc/passwd",)))
    (tmp_path / "logs" / "runs" / "r1").mkdir(parents=True)
    with pytest.raises(log_lines.LogLinesError, match="is not a run id"):
        log_lines.show(bucket, F(run="../r1"))


def test_no_log_files_is_an_error_naming_who_writes_them(tmp_path):
    with pytest.raises(log_lines.LogLinesError, match="no log files matched"):
        log_lines.show(str(tmp_path), F())


def test_the_logs_verb_chooses_the_bucket_logs(tmp_path):
    bucket = _bucket(tmp_path, {"maand.log": "ts=2026-06-02T12:00:00.000Z event=deploy_skip job=api worker=-\n"})
    assert _logs.Request(phase="rollout").of_lines() and _logs.Request(format="human").of_lines()
    assert not _logs.Request(format="json").of_lines() and not _logs.Request().of_lines()
    shown = _logs.logs(bucket, _logs.Request(event="deploy_skip"))
    assert shown.lines == ["ts=2026-06-02T12:00:00.000Z event=deploy_skip job=api worker=-"]
    with pytest.raises(_logs.LogsError, match="table lists the deploy runs"):
        _logs.logs(bucket, _logs.Request(format="table", tail=3))


def test_hook_lines_go_to_the_bucket_logs_as_they_come(tmp_path):
    log = runlog.RunLog.open(str(tmp_path), "jobcommand", run_id="r", log_format="kv")
    live = log.live("10.0.0.5", runlog.Command("api", "job_command", "command_x", "/m/command_x.py"))
    rc, tail, error = hook_run.run_process(["sh", "-c", "echo one; echo two >&2; exit 4"], str(tmp_path), dict(os.environ),
                                           10, 5, on_line=live.line)
    live.end(rc)
    assert rc == 4 and sorted(tail) == ["one", "two"] and error == "exit status 4"
    fields = [runlog.parse_line(l) for l in (tmp_path / "logs" / "10.0.0.5.log").read_text().splitlines()]
    assert fields[0]["event"] == "command_begin" and fields[0]["phase"] == "job_command"
    assert sorted((f["stream"], f["msg"]) for f in fields[1:3]) == [("stderr", "two"), ("stdout", "one")]
    assert fields[3]["event"] == "command_end" and fields[3]["exit"] == "4"


def test_a_hook_tail_keeps_the_error_it_printed_before_its_last_lines(tmp_path):
    rc, tail, error = hook_run.run_process(["sh", "-c", "echo boom >&2; seq 1 20; exit 1"], str(tmp_path),
                                           dict(os.environ), 10, 5)
    printed = [t for t in tail if t != "boom"]  # boom's place among them is the order the two pipes were read in
    assert rc == 1 and error == "exit status 1" and "boom" in tail and len(tail) <= 6, tail
    assert printed == [str(i) for i in range(21 - len(printed), 21)] and len(printed) >= 4, tail


CATALOG = {"bucket_id": "b1", "jobs": [{"name": "api"}, {"name": "web"}],
           "workers": [{"host": "10.0.0.1"}, {"host": "10.0.0.2"}, {"host": "10.0.0.3"}],
           "allocations": [{"job": "api", "worker": "10.0.0.1", "state": "active"},
                           {"job": "api", "worker": "10.0.0.2", "state": "disabled"},
                           {"job": "api", "worker": "10.0.0.3", "state": "removed"},
                           {"job": "web", "worker": "10.0.0.3", "state": "active"}]}
HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


def test_job_logs_select():
    chosen = job_logs.select(CATALOG, "api", [], None, HOSTS)
    assert chosen.hosts == ("10.0.0.1", "10.0.0.2") and chosen.lines == job_logs.DEFAULT_LINES
    assert chosen.argv[:3] == ("python3", "-I", "-c") and chosen.argv[4:] == ("50", "/opt/worker/b1/jobs/api")
    assert job_logs.select(CATALOG, "api", ["10.0.0.2"], "5", HOSTS).hosts == ("10.0.0.2",)
    with pytest.raises(job_logs.JobLogsError, match=r'unknown job apii \(did you mean "api"\?\)'):
        job_logs.select(CATALOG, "apii", [], None, HOSTS)
    with pytest.raises(job_logs.JobLogsError, match="unknown worker 10.0.0.9"):
        job_logs.select(CATALOG, "api", ["10.0.0.9"], None, HOSTS)
    with pytest.raises(job_logs.JobLogsError, match="has no allocation on 10.0.0.3"):
        job_logs.select(CATALOG, "api", ["10.0.0.3"], None, HOSTS)
    for bad in ("0", "x", -1, True, 10001):
        with pytest.raises(job_logs.JobLogsError, match="maand_lines must be"):
            job_logs.select(CATALOG, "api", [], bad, HOSTS)


def test_job_logs_report_one_section_per_worker():
    answers = {"10.0.0.1": {"rc": 0, "stdout": "--- logs/api.log:\nline 1\nline 2"},
               "10.0.0.2": {"rc": 0, "stdout": ""},
               "10.0.0.3": {"unreachable": True, "msg": "ssh: connect to host 10.0.0.3 port 22: No route"}}
    lines, problems = job_logs.report("api", HOSTS, answers)
    assert lines == ["=== api@10.0.0.1 logs/api.log ===", "line 1", "line 2",
                     "=== api@10.0.0.2 ===", "(no log file in logs/)",
                     "=== api@10.0.0.3 ===", "(unreachable: ssh: connect to host 10.0.0.3 port 22: No route)",
                     "job_logs: api on 2 of 3 worker(s)"]
    assert problems == ["worker 10.0.0.3 is unreachable; fix: check that it is up and that SSH works, then run it again"]


def test_job_logs_reader_never_follows_a_link(tmp_path):
    import subprocess
    job = tmp_path / "jobs" / "api"
    (job / "logs").mkdir(parents=True)
    (job / "logs" / "a.log").write_text("1\n2\n3\n")
    argv = list(job_logs.select(CATALOG, "api", [], 2, HOSTS).argv)
    argv[-1] = str(job)
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["--- logs/a.log:", "2", "3"]
    (tmp_path / "secret").write_text("top secret\n")
    os.symlink(tmp_path / "secret", job / "logs" / "b.log")
    os.utime(job / "logs" / "b.log", (3e9, 3e9), follow_symlinks=False)
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["--- logs/b.log: a symlink, not read"]
    argv[-1] = str(tmp_path / "nope")
    assert subprocess.run(argv, capture_output=True, text=True, check=True).stdout.startswith("--- no job folder")
