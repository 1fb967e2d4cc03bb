"""maand's bucket logs on a real 3-host SSH fleet, through the playbooks (issue 31, item 6).

A deploy writes logs/<worker>.log and logs/runs/<run_id>/<worker>.log in maand's kv format (rsync and the
make targets' command_begin / stream / command_end lines, stdout and stderr apart); a deploy with nothing to
do writes maand's deploy_skip event to logs/maand.log (worker=-). maand.core.logs reads them back with maand's
filters (worker, run, job, phase, event, tail; raw, human, json). With log_format = "json" the job verb and
run_command write JSON lines (one run id across the workers); an unknown log_format fails the build naming
maand.conf, the field and the fix. maand.core.job_logs prints the tail of the job's own logs/ from each of
its three workers, one section per worker, and names a symlink instead of following it. The steps run in
file order on one fleet.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.deploy import env as deploy_env
from tests.integration.deploy.bucket import add_job, fleet_bucket, write

from ansible_collections.maand.core.plugins.plugin_utils.bucket import runlog

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

TARGET = """\t@mkdir -p logs data
\t@echo "{name} $(NEW_VERSION)" >> logs/events.log
\t@echo "api {name} $(NEW_VERSION)"
\t@echo "api warns on {name}" >&2
\t@echo running > data/status
"""
HELLO = """import os, sys
print("hello from %s on %s" % (os.environ["ALLOCATION_IP"], os.environ["EVENT"]))
print("hook warns", file=sys.stderr)
"""
MAKEFILE = (".PHONY: start stop restart reload status\n"
            + "".join("%s:\n%s" % (t, TARGET.format(name=t)) for t in ("start", "stop", "restart", "reload"))
            + "status:\n\t@cat data/status\n")


class Env(deploy_env.Env):
    def log(self, name, run=None):
        path = self.bucket / "logs" / ("runs/%s/" % run if run else "") / name
        return path.read_text().splitlines()


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(3)
    bucket = fleet_bucket(tmp_path_factory.mktemp("bucketlogs") / "bucket", fleet.state_dir)
    add_job(bucket, "api", makefile=MAKEFILE, files={"_modules/command_hello.py": HELLO},
            commands={"command_hello": {"executed_on": ["cli", "post_deploy"]}})
    return Env(fleet, bucket)


def printed(out):
    """The log lines a playbook printed (kv lines start with ts=, json ones with {"...)."""
    return [l.strip() for l in out.splitlines() if l.strip().startswith(("ts=", '{"'))]


def test_01_a_deploy_writes_maands_logs_per_worker_and_per_run_in_kv(env):
    env.build()
    env.deploy()
    run_id = env.first_run = env.json_of("logs", "-e", "maand_run=last")["run_id"]
    assert sorted(os.listdir(env.bucket / "logs" / "runs")) == [run_id]
    for host in env.hosts:
        lines = env.log("%s.log" % host)
        assert lines == env.log("%s.log" % host, run_id)
        fields = [runlog.parse_line(l) for l in lines]
        assert all(l.startswith("ts=") for l in lines), lines
        assert all(f["run"] == run_id and f["maand"] == "deploy" and f["worker"] == host and f["seq"] == "1"
                   for f in fields), lines
        begins = [(f["phase"], f["action"], f["job"]) for f in fields if f.get("event") == "command_begin"]
        assert begins == [("rsync", "rsync", "api"), ("rollout", "start", "api"),
                          ("job_command", "command_hello", "api")], lines  # the post_deploy hook
        start = [f for f in fields if f.get("phase") == "rollout"]
        assert start[0]["cmd"] == "make start" and start[-1]["event"] == "command_end" and start[-1]["exit"] == "0"
        assert {"stream": "stdout", "msg": "api start 1.0.0"}.items() <= start[1].items(), start
        assert {"stream": "stderr", "msg": "api warns on start"}.items() <= start[2].items(), start
        assert int(start[-1]["duration_ms"]) >= 0
        hook = [(f.get("event"), f.get("stream"), f.get("msg")) for f in fields if f.get("phase") == "job_command"]
        assert sorted(hook, key=str) == sorted([("command_begin", None, None), ("command_end", None, None),
                                                (None, "stdout", "hello from %s on post_deploy" % host),
                                                (None, "stderr", "hook warns")], key=str), hook
    assert not (env.bucket / "logs" / "maand.log").exists()


def test_02_a_deploy_with_nothing_to_do_logs_deploy_skip_to_maand_log(env):
    env.deploy()
    [line] = env.log("maand.log")
    fields = runlog.parse_line(line)
    assert (fields["event"], fields["worker"], fields["job"], fields["reason"]) == \
        ("deploy_skip", "-", "api", "already_promoted"), line


def test_03_logs_reads_them_back_with_maands_filters(env):
    first, second = env.hosts[0], env.hosts[1]
    rc, out = env.play("logs", "-e", "maand_format=raw", "-e", "maand_workers=%s" % first, "-e", "maand_phase=rollout")
    lines = printed(out)
    assert len(lines) == 4 and all("worker=%s" % first in l and "phase=rollout" in l for l in lines), out

    rc, out = env.play("logs", "-e", "maand_event=command_end", "-e", "maand_jobs=api")
    ends = printed(out)
    assert len(ends) == 3 * len(env.hosts) and all("event=command_end" in l for l in ends), out  # rsync, start, hook

    rc, out = env.play("logs", "-e", "maand_tail=1", "-e", "maand_workers=%s" % second)
    assert printed(out) == env.log("%s.log" % second)[-1:], out

    rc, out = env.play("logs", "-e", "maand_event=deploy_skip")
    assert [runlog.parse_line(l)["event"] for l in printed(out)] == ["deploy_skip"], out

    rc, out = env.play("logs", "-e", "maand_format=raw", "-e", "maand_run=last")  # the deploy with nothing to do
    assert [runlog.parse_line(l)["event"] for l in printed(out)] == ["deploy_skip"], out
    rc, out = env.play("logs", "-e", "maand_format=human", "-e", "maand_run=%s" % env.first_run[:20],
                       "-e", "maand_workers=%s" % first)  # a prefix of the first deploy's run id
    assert "rollout  start  api@%s" % first in out and "  $ make start" in out, out
    assert "  api@%s | api start 1.0.0" % first in out and "  api@%s ! api warns on start" % first in out, out
    assert "  ok  exit=0  " in out, out

    data = env.json_of("logs", "-e", "maand_phase=rsync")
    assert {l["worker"] for l in data["lines"]} == set(env.hosts) and {l["phase"] for l in data["lines"]} == {"rsync"}

    rc, out = env.play("logs", "-e", "maand_format=raw", "-e", "maand_run=nosuchrun", check=False)
    assert rc != 0 and "no run nosuchrun" in out, out


def test_04_log_format_json_for_the_job_verb_and_run_command(env):
    write(env.bucket / "maand.conf", (env.bucket / "maand.conf").read_text() + 'log_format = "json"\n')
    rc, out = env.build()
    assert "log_format" not in out, out  # honoured: no "not used" warning any more
    before = {h: len(env.log("%s.log" % h)) for h in env.hosts}
    # maand's all-at-once job verb writes maand=job lines (the rolling restart, the default, logs as a deploy)
    env.play("job", "-e", "maand_job=api", "-e", "maand_target=restart", "-e", "maand_job_all_at_once=true")
    runs = set()
    for host in env.hosts:
        new = env.log("%s.log" % host)[before[host]:]
        assert new and all(l.startswith('{"') for l in new), new
        fields = [json.loads(l) for l in new]
        assert [f.get("event") for f in fields] == ["command_begin", None, None, "command_end"], new
        assert all(f["maand"] == "job" and f["phase"] == "job_control" and f["action"] == "restart" for f in fields)
        assert fields[-1]["exit"] == 0 and isinstance(fields[-1]["duration_ms"], int)
        runs |= {f["run"] for f in fields}
    assert len(runs) == 1, runs  # one run id across the workers, as maand's
    assert env.log("%s.log" % env.hosts[0], runs.pop())

    env.play("run_command", "-e", json.dumps({"maand_cmd": "echo hello from $WORKER_IP; echo oops >&2; exit 3"}),
             check=False)
    data = env.json_of("logs", "-e", "maand_phase=run_command")
    by_host = {}
    for line in data["lines"]:
        by_host.setdefault(line["worker"], []).append(line)
    assert set(by_host) == set(env.hosts)
    for host, got in by_host.items():
        assert [(g.get("event"), g.get("stream"), g.get("msg")) for g in got] == [
            ("command_begin", None, None), (None, "stdout", "hello from %s" % host), (None, "stderr", "oops"),
            ("command_end", None, None)], got
        assert got[-1]["exit"] == "3" and got[0]["action"] == "ssh" and got[0]["maand"] == "run_command"


def test_04b_a_job_command_writes_its_lines_under_each_allocations_worker(env):
    env.play("job_command", "-e", "maand_command=command_hello", "-e", "maand_job=api")
    data = env.json_of("logs", "-e", "maand_phase=job_command")  # the deploy's post_deploy lines too
    got = [l for l in data["lines"] if l["maand"] == "jobcommand"]
    assert {l["worker"] for l in got} == set(env.hosts) and {l["action"] for l in got} == {"command_hello"}, got
    assert {l["msg"] for l in got if l.get("stream") == "stdout"} == {"hello from %s on cli" % h for h in env.hosts}
    assert len(got) == 4 * len(env.hosts) and len(data["lines"]) == 8 * len(env.hosts), data["lines"]


def test_05_an_unknown_log_format_is_refused_by_the_build(env):
    conf = (env.bucket / "maand.conf").read_text()
    write(env.bucket / "maand.conf", conf.replace('log_format = "json"', 'log_format = "yaml"'))
    try:
        rc, out = env.play("build", check=False)
        assert rc != 0 and "maand.conf: log_format: log_format 'yaml' is not a log format" in out, out
        assert 'set log_format = \\"kv\\" or \\"json\\"' in out or 'set log_format = "kv" or "json"' in out, out
    finally:
        write(env.bucket / "maand.conf", conf)


def test_06_job_logs_prints_the_tail_of_the_jobs_own_logs_from_each_worker(env):
    rc, out = env.play("job_logs", "-e", "maand_job=api", "-e", "maand_lines=2")
    for host in env.hosts:
        want = env.events(host, "api")[-2:]
        head = out.index("=== api@%s logs/events.log ===" % host)
        assert out[head:].splitlines()[1:3] == want, out
    assert "job_logs: api on 3 of 3 worker(s)" in out, out

    rc, out = env.play("job_logs", "-e", "maand_job=apii", check=False)
    assert rc != 0 and 'unknown job apii (did you mean "api"?)' in out, out

    host = env.hosts[2]
    secret = env.job(host, "api").parent.parent / "worker.json"
    os.symlink(secret, env.job(host, "api") / "logs" / "zz-newest.log")
    try:
        rc, out = env.play("job_logs", "-e", "maand_job=api", "-e", "maand_job_workers=%s" % host)
        assert "logs/zz-newest.log: a symlink, not read" in out and "bucket_id" not in out.split("=== api@")[-1], out
    finally:
        (env.job(host, "api") / "logs" / "zz-newest.log").unlink()
