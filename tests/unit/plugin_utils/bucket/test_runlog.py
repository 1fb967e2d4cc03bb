# -*- coding: utf-8 -*-
"""bucket/runlog.py against maand's own cases (maand-sh/maand bucket/log_format_test.go, logs/show_test.go)."""

from __future__ import annotations

import json
import os
import re

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import model, problems, runlog


def test_format_kv_line():  # TestFormatKVLine
    line = runlog.kv_line({"ts": "2026-06-02T12:00:00.000Z", "level": "INFO", "event": "command_begin", "run": "abc",
                           "maand": "deploy", "worker": "10.0.0.1", "job": "api", "cmd": "python3 runner.py stop api"})
    assert "event=command_begin" in line
    assert "worker=10.0.0.1" in line
    assert 'cmd="python3 runner.py stop api"' in line
    assert line == ('ts=2026-06-02T12:00:00.000Z level=INFO event=command_begin run=abc maand=deploy worker=10.0.0.1 '
                    'job=api cmd="python3 runner.py stop api"')


def test_format_json_line():  # TestFormatJSONLine
    line = runlog.json_line({"ts": "2026-06-02T12:00:00.000Z", "event": "deploy_skip", "job": "api", "seq": "3"})
    assert line.startswith("{")
    assert '"event":"deploy_skip"' in line
    assert '"seq":3' in line
    assert line == '{"event":"deploy_skip","job":"api","seq":3,"ts":"2026-06-02T12:00:00.000Z"}'


def test_json_escapes_as_go():
    """Go's json.Marshal escapes <, >, & (HTML-safe) and keeps other non-ASCII as UTF-8."""
    line = runlog.json_line({"msg": "a<b>&c é \u2028", "exit": "-1", "duration_ms": "x"})
    assert line == '{"duration_ms":"x","exit":-1,"msg":"a\\u003cb\\u003e\\u0026c é \\u2028"}'
    assert json.loads(line)["msg"] == "a<b>&c é \u2028"


def test_kv_quotes_as_maand():
    """quoteKVValue: quoted for a space, tab, = or quote; only the quote is escaped; empty values left out."""
    assert runlog.kv_line({"msg": 'say "hi"', "job": "", "extra": "a=b"}) == 'msg="say \\"hi\\"" extra="a=b"'
    assert runlog.kv_line({"removed": "true", "disabled": "false", "reason": "not_deployed", "job": "a"}) == \
        "job=a reason=not_deployed disabled=false removed=true"


def test_summarize_commands_truncates():  # TestSummarizeCommandsTruncates
    got = runlog.summarize(["x" * (runlog.MAX_CMD + 10)])
    assert len(got) <= runlog.MAX_CMD and got.endswith("...")
    assert runlog.summarize(["make  start", "echo\tok"]) == "make start && echo ok"


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()


def test_command_begin_end(tmp_path):  # TestFormatCommandBeginEnd, and where the lines go
    log = runlog.RunLog.open(str(tmp_path), "deploy", 7, log_format="kv")
    cmd = runlog.Command(job="api", phase="rollout", action="start", cmd="make start")
    log.command("10.0.0.1", cmd, 1780000000.0, 1.5, 0, [(1780000000.5, "stdout", "started")])
    lines = _read(tmp_path / "logs" / "10.0.0.1.log")
    assert lines == _read(tmp_path / "logs" / "runs" / log.run_id / "10.0.0.1.log")
    assert re.match(r"^[0-9a-f-]{36}$", log.run_id)  # a UUID, as maand's
    assert lines[0] == ("ts=2026-05-28T20:26:40.000Z level=INFO event=command_begin run=%s maand=deploy seq=7 "
                        "worker=10.0.0.1 job=api phase=rollout action=start cmd=\"make start\"" % log.run_id)
    assert "stream=stdout msg=started" in lines[1] and "event" not in lines[1]
    assert "event=command_end" in lines[2] and "exit=0 duration_ms=1500" in lines[2]
    assert lines[2].startswith("ts=2026-05-28T20:26:41.500Z")


def test_stream_line_fields(tmp_path):  # TestFormatStreamLine
    log = runlog.RunLog.open(str(tmp_path), "deploy", 14, log_format="kv")
    line = log.stream("10.0.0.1", runlog.Command(job="cassandra", phase="rsync", action="rsync"), "stdout",
                      "Transfer starting: 18 files")
    for want in ("worker=10.0.0.1", "job=cassandra", "phase=rsync", "stream=stdout",
                 'msg="Transfer starting: 18 files"', "run=" + log.run_id, "seq=14"):
        assert want in line


def test_event_goes_to_maand_log_with_worker_dash(tmp_path):
    log = runlog.RunLog.open(str(tmp_path), "deploy", 0, run_id="r1", log_format="json")
    log.event("", "deploy_skip", job="api", reason="already_promoted")
    (line,) = _read(tmp_path / "logs" / "maand.log")
    data = json.loads(line)
    assert data["worker"] == "-" and data["event"] == "deploy_skip" and data["run"] == "r1" and "seq" not in data
    assert _read(tmp_path / "logs" / "runs" / "r1" / "maand.log") == [line]


def test_json_numbers(tmp_path):
    log = runlog.RunLog.open(str(tmp_path), "job", 3, run_id="r", log_format="jsonl")
    assert log.log_format == "json"
    data = json.loads(log.end("10.0.0.1", runlog.Command(job="a", phase="job_control", action="stop"), 2, 0.25))
    assert (data["seq"], data["exit"], data["duration_ms"], data["phase"]) == (3, 2, 250, "job_control")


def test_parse_log_format(tmp_path):  # TestParseLogFormat, from maand.conf
    (tmp_path / "maand.conf").write_text('log_format = "JSON"\n')
    assert runlog.conf_format(str(tmp_path)) == "json"
    (tmp_path / "maand.conf").write_text("")
    assert runlog.conf_format(str(tmp_path)) == "kv"
    assert runlog.conf_format(str(tmp_path / "none")) == "kv"


def test_live_lines(tmp_path):
    log = runlog.RunLog.open(str(tmp_path), "jobcommand", run_id="r", log_format="kv")
    live = log.live("10.0.0.2", runlog.Command(job="a", phase="job_command", action="command_x", cmd="/x.py"))
    live.line("stderr", "oops")
    live.end(1)
    lines = _read(tmp_path / "logs" / "10.0.0.2.log")
    assert [runlog.parse_line(l).get("event", runlog.parse_line(l).get("stream")) for l in lines] == \
        ["command_begin", "stderr", "command_end"]
    assert runlog.parse_line(lines[2])["exit"] == "1"


def test_a_symlink_in_logs_is_not_followed(tmp_path):
    (tmp_path / "logs").mkdir()
    target = tmp_path / "elsewhere"
    target.write_text("")
    os.symlink(target, tmp_path / "logs" / "10.0.0.1.log")
    log = runlog.RunLog.open(str(tmp_path), "deploy", run_id="r", log_format="kv")
    with pytest.raises(OSError):
        log.event("10.0.0.1", "deploy_skip", job="a")
    assert target.read_text() == ""


def test_parse_lines():  # logs/show_test.go TestParsePayloadLine, TestMatchesLineJSON, TestMatchesLineStructuredStream
    assert runlog.parse_line("| deleting jobs/postgres/patroni.yml") == {
        "stream": "stdout", "msg": "deleting jobs/postgres/patroni.yml"}
    assert runlog.parse_line("! bad")["stream"] == "stderr"
    got = runlog.parse_line('{"ts":"2026-06-02T12:00:00.000Z","event":"deploy_skip","job":"api","run":"abc","seq":3}')
    assert got["event"] == "deploy_skip" and got["seq"] == "3"
    got = runlog.parse_line('ts=2026-06-02T12:00:00.000Z run=r1 maand=deploy worker=10.0.0.1 job=cassandra '
                            'phase=rsync stream=stdout msg="Transfer starting: 18 files"')
    assert got["msg"] == "Transfer starting: 18 files" and got["phase"] == "rsync"
    assert runlog.parse_line('msg="say \\"hi\\"" x=1') == {"msg": 'say "hi"', "x": "1"}


def test_round_trip_both_formats(tmp_path):
    for fmt in ("kv", "json"):
        log = runlog.RunLog.open(str(tmp_path), "deploy", 5, run_id="r-" + fmt, log_format=fmt)
        line = log.stream("10.0.0.1", runlog.Command(job="a,b", phase="rsync", action="rsync", cmd="rsync -a x"),
                          "stdout", 'x = "1" <tab>\there')
        fields = runlog.parse_line(line)
        assert fields["msg"] == 'x = "1" <tab>\there' and fields["job"] == "a,b" and fields["seq"] == "5"


@pytest.mark.parametrize("value, ok", [("kv", True), ("json", True), ("jsonl", True), ("JSON", True),
                                       ("yaml", False), ("", False)])
def test_build_refuses_an_unknown_log_format(tmp_path, value, ok):
    (tmp_path / "maand.conf").write_text('log_format = "%s"\n' % value)
    report = problems.Report()
    model.load_maand_conf(model.Bucket(path=str(tmp_path)), report)
    text = report.error_text() + "\n".join(str(w) for w in report.warnings)
    assert ("log_format" in text) is (not ok), text
    if not ok:
        assert "maand.conf" in text and 'set log_format = \\"kv\\" or \\"json\\"' in text or \
            'set log_format = "kv" or "json"' in text, text


def test_names_never_leave_logs(tmp_path):
    log = runlog.RunLog.open(str(tmp_path), "deploy", run_id="../../escape", log_format="kv")
    assert re.match(r"^[0-9a-f-]{36}$", log.run_id)
    with pytest.raises(OSError, match="not a worker name"):
        log.event("../x", "deploy_skip", job="a")
