"""deploy/agent_step.py, one worker's part of a deploy step, over a fake Transport (no Ansible): which ops
are shipped or failed, the agent call folded into the last rsync, the fallbacks, a missing agent
reinstalled; and once over a local transport that runs the real rsync and the real worker agent."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ansible_collections.maand.core.plugins.plugin_utils import jobspec
from ansible_collections.maand.core.plugins.plugin_utils.deploy import agent_step, remote, rsync, run
from ansible_collections.maand.core.plugins.plugin_utils.worker import agent

SSH = ["ssh", "-o", "ControlPath=/cp/%C"]  # a ControlPath of its own: nothing is made in the temp folder
BID = "bid"


def folded_ok(answer, stdout="<f+++++++++ api/Makefile\n"):
    """What a folded rsync gives when the agent saw the files arrive and applied the step."""
    return 0, stdout, "%s\n%s%s\n" % (agent.SYNCED_MARK, agent.ANSWER_MARK, json.dumps(answer))


def answer_for(*ids, ok=True, **extra):
    return {"ok": ok, "ops": [dict({"id": i, "ok": ok, "changed": True}, **extra) for i in ids], "promotions": []}


class FakeWorker:
    """A scripted Transport: every call recorded, answered in turn from rsyncs / execs."""

    def __init__(self, rsyncs=(), execs=(), target=("10.0.0.9", SSH, False)):
        self.calls, self.rsyncs, self.execs, self.target = [], list(rsyncs), list(execs), target

    def rsync_target(self):
        self.calls.append(("target",))
        if isinstance(self.target, Exception):
            raise self.target
        return self.target

    def rsync(self, argv, stdin=None, timeout=None):
        self.calls.append(("rsync", argv, stdin, timeout))
        return self.rsyncs.pop(0)

    def exec(self, cmd, stdin=None):
        self.calls.append(("exec", cmd, stdin))
        return self.execs.pop(0)

    def kinds(self):
        return [c[0] for c in self.calls]


@pytest.fixture
def bucket(tmp_path):
    root = tmp_path / "bucket"
    for job in ("api", "web"):
        (root / "workspace" / "jobs" / job).mkdir(parents=True)
        (root / "workspace" / "jobs" / job / "Makefile").write_text("start:\n\ttrue\n")
    (root / "trees" / "web-v2").mkdir(parents=True)
    (root / "data").mkdir()
    return str(root)


def op(job, kind="start", sync=True, src=None, **extra):
    out = {"id": "%s@h1" % job, "kind": kind, "job": job, "host": "h1"}
    if sync:
        out.update(sync=True, src=src or "workspace/jobs/%s" % job)
    return dict(out, **extra)


def call_with(bucket, ops, promote=(), step=1, **kw):
    """An AgentCall for h1 in `step` of a run folder holding its request."""
    run_dir = os.path.join(bucket, "data", "run")
    path = run.request_path(run_dir, run.step_key(step), "h1")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"host": "h1", "ops": list(ops), "promote": list(promote), "bucket_id": BID, "step": step}, handle)
    return agent_step.AgentCall(bucket, run_dir, "h1", step, timeout=30, tail=5, **kw)


def result_of(call):
    with open(run.result_path(call.run_dir, run.step_key(call.step), "h1"), encoding="utf-8") as handle:
        return json.load(handle)


def sent(stdin):
    """The step request in a folded rsync's stdin (remote.request_header) or an agent call's."""
    text = stdin.decode() if isinstance(stdin, bytes) else stdin
    return json.loads(text.split("\n", 1)[1] if text.startswith(agent.REQUEST_HEADER.decode()) else text)


def test_no_request_for_the_host_is_a_skip(bucket):
    call = agent_step.AgentCall(bucket, os.path.join(bucket, "data", "run"), "h1", 2)
    worker = FakeWorker()
    out = agent_step.apply(call, worker)
    assert out.as_result() == {"skipped": True, "changed": False, "msg": "nothing to do on h1 in step 2"}
    assert worker.calls == []


def test_nothing_to_sync_is_one_agent_call_and_its_answer_lands_in_the_run_folder(bucket):
    call = call_with(bucket, [op("api", sync=False, slots=3)], promote=[{"job": "web", "host": "h1"}])
    worker = FakeWorker(execs=[(0, json.dumps(answer_for("api@h1")) + "\n", "")])
    out = agent_step.apply(call, worker)
    assert worker.kinds() == ["exec"]
    cmd, stdin = worker.calls[0][1:]
    assert cmd == remote.step_command("python3")
    request = json.loads(stdin)
    assert [o["id"] for o in request["ops"]] == ["api@h1"] and request["promote"] == [{"job": "web", "host": "h1"}]
    assert (request["slots"], request["timeout"], request["tail"], request["root"]) == (3, 30, 5, "/opt/worker/bid")
    assert result_of(call) == {"answer": answer_for("api@h1"), "reason": None}
    assert out.as_result() == {"changed": True, "failed": False, "ops": ["api@h1"], "msg": "ok"}


def test_a_missing_agent_is_installed_and_the_request_sent_again(bucket):
    call = call_with(bucket, [op("api", sync=False)])
    worker = FakeWorker(execs=[(remote.MISSING_AGENT_RC, "", ""), (0, "", ""),
                               (0, json.dumps(answer_for("api@h1")), "")])
    out = agent_step.apply(call, worker)
    assert [c[1] for c in worker.calls] == [remote.step_command("python3"), remote.install_command(),
                                            remote.step_command("python3")]
    assert worker.calls[1][2] == remote.install_payload() and worker.calls[0][2] == worker.calls[2][2]
    assert out.answer == answer_for("api@h1") and out.reason is None


def test_the_agent_call_folds_into_the_last_rsync_and_shipped_files_are_done(bucket):
    """One rsync for both jobs (their trees are named after them) that also runs the step: the files-only op
    is done by the sync and is not in the agent's request, the start op is."""
    call = call_with(bucket, [op("api", kind="files"), op("web")])
    worker = FakeWorker(rsyncs=[folded_ok(answer_for("web@h1"))])
    out = agent_step.apply(call, worker)
    assert worker.kinds() == ["target", "rsync"]  # one SSH session, no agent call of its own
    argv, stdin, timeout = worker.calls[1][1:]
    assert timeout is None and stdin.startswith(agent.REQUEST_HEADER)
    assert [o["id"] for o in sent(stdin)["ops"]] == ["web@h1"]
    path = remote.sync_step_path("python3", "/opt/worker/bid/jobs/", False)
    assert "--rsync-path=%s" % path in argv and argv[-1] == "10.0.0.9:/opt/worker/bid/jobs/"
    assert out.answer["ops"] == [{"id": "api@h1", "ok": True, "changed": True, "steps": ["sync"]},
                                 {"id": "web@h1", "ok": True, "changed": True}]
    assert result_of(call)["answer"] == out.answer
    assert out.as_result()["ops"] == ["api@h1", "web@h1"]


def test_a_failed_rsync_fails_its_ops_and_the_last_rsync_still_folds_the_rest(bucket):
    """api's tree is named after it (the first rsync), web's is not (an rsync of its own, the last)."""
    call = call_with(bucket, [op("api"), op("web", src="trees/web-v2")])
    worker = FakeWorker(rsyncs=[(23, "", "rsync: some files vanished\n"), folded_ok(answer_for("web@h1"))])
    out = agent_step.apply(call, worker)
    assert worker.kinds() == ["target", "rsync", "rsync"]
    first, last = worker.calls[1], worker.calls[2]
    assert first[2] is None and first[3] == 30  # a plain rsync, the task's timeout
    assert first[1][-1] == "10.0.0.9:/opt/worker/bid/jobs/" and last[1][-1] == "10.0.0.9:/opt/worker/bid/jobs/web/"
    assert [o["id"] for o in sent(last[2])["ops"]] == ["web@h1"]  # the failed op left the request
    assert out.answer["ops"][0] == {"id": "api@h1", "ok": False,
                                    "msg": "rsync failed (rc=23): rsync: some files vanished"}
    assert out.as_result()["msg"] == "1 operation(s) failed (reported by the next step)"


def test_a_fold_that_never_reached_the_agent_syncs_and_calls_it_apart(bucket):
    call = call_with(bucket, [op("api")])
    worker = FakeWorker(rsyncs=[(remote.MISSING_AGENT_RC, "", "no agent\n"), (0, "", "")],
                        execs=[(0, json.dumps(answer_for("api@h1")), "")])
    out = agent_step.apply(call, worker)
    assert worker.kinds() == ["target", "rsync", "rsync", "exec"]
    folded, plain = worker.calls[1], worker.calls[2]
    assert plain[2] is None and [a for a in plain[1] if a.startswith("--rsync-path=")] == [
        "--rsync-path=mkdir -p /opt/worker/bid/jobs/ && rsync"]
    assert folded[1][:-1] != plain[1][:-1]  # only the folded one runs the agent as rsync's remote command
    assert [o["id"] for o in sent(worker.calls[3][2])["ops"]] == ["api@h1"]
    assert out.answer["ops"] == [{"id": "api@h1", "ok": True, "changed": True}] and out.changed is False


def test_files_for_a_later_step_only_sync_and_need_no_agent(bucket):
    call = call_with(bucket, [op("api", kind="files")])
    worker = FakeWorker(rsyncs=[(0, "<f+++++++++ api/Makefile\n", "")])
    out = agent_step.apply(call, worker)
    assert worker.kinds() == ["target", "rsync"] and worker.calls[1][2] is None  # nothing left to fold
    assert out.answer == {"ok": True, "ops": [{"id": "api@h1", "ok": True, "changed": True, "steps": ["sync"]}],
                          "promotions": []}
    assert out.as_result()["changed"] is True


def test_an_environment_that_does_not_expand_fails_its_op_before_anything_ships(bucket, monkeypatch):
    monkeypatch.delenv("DB_URL", raising=False)
    spec = {"environment": [{"vars": {"DB": "$env{DB_URL}"}, "extend": True}]}
    call = call_with(bucket, [op("api", spec=spec), op("web", sync=False)])
    worker = FakeWorker(execs=[(0, json.dumps(answer_for("web@h1")), "")])
    out = agent_step.apply(call, worker)
    assert worker.kinds() == ["exec"]  # api's files never left the controller
    assert [o["id"] for o in sent(worker.calls[0][2])["ops"]] == ["web@h1"]
    failed = out.answer["ops"][0]
    assert failed["id"] == "api@h1" and not failed["ok"] and "DB_URL" in failed["msg"]


def test_each_op_s_environment_is_expanded_once(bucket, monkeypatch):
    monkeypatch.setenv("DB_URL", "postgres://db")
    spec = {"environment": [{"vars": {"DB": "$env{DB_URL}"}, "extend": True}]}
    calls = []
    real = jobspec.runtime_op

    def counting(one, lookup):
        calls.append(one["id"])
        return real(one, lookup)
    monkeypatch.setattr(jobspec, "runtime_op", counting)
    call = call_with(bucket, [op("api", spec=spec), op("web", spec=spec, sync=False)])
    worker = FakeWorker(rsyncs=[folded_ok(answer_for("api@h1", "web@h1"))])
    agent_step.apply(call, worker)
    assert calls == ["api@h1", "web@h1"]
    ops = sent(worker.calls[1][2])["ops"]
    assert [o["env"] for o in ops] == [{"DB": "postgres://db"}] * 2 and not any("spec" in o for o in ops)


def test_a_broken_connection_is_no_answer_and_the_play_goes_on(bucket):
    call = call_with(bucket, [op("api")])
    worker = FakeWorker(target=RuntimeError("maand.core.deploy_agent needs the ssh connection plugin (got local)"))
    out = agent_step.apply(call, worker)
    reason = "RuntimeError: maand.core.deploy_agent needs the ssh connection plugin (got local)"
    assert result_of(call) == {"answer": None, "reason": reason}
    assert out.as_result() == {"changed": False, "failed": False, "msg": "no answer from h1: %s" % reason,
                               "warnings": ["h1 gave no answer in step 1; its operations count as failed: %s" % reason]}


def test_an_unexpected_answer_is_no_answer(bucket):
    call = call_with(bucket, [op("api", sync=False)])
    out = agent_step.apply(call, FakeWorker(execs=[(1, "", "Traceback\nboom\n")]))
    assert out.answer is None and out.reason.startswith("agent on h1, step 1: unexpected answer from the worker (rc=1)")


def test_measured_make_targets_wait_in_the_run_folder_for_the_step_fold(bucket):
    """A worker's timings go into its result; the job history is written once per step, when the step folds
    (deploy/run.fold_in_flight; tests/unit/plugin_utils/deploy/test_run_context.py counts that write)."""
    call = call_with(bucket, [op("api", sync=False, target="start")])
    agent_step.apply(call, FakeWorker(execs=[(0, json.dumps(answer_for("api@h1", seconds=4.5)), "")]))
    assert json.dumps(result_of(call)).count("4.5") == 1, result_of(call)
    assert json.dumps(jobspec.load_history(bucket)).count("4.5") == 0


# --- over a local transport: the real rsync and the real worker agent, /opt/worker in a temp folder -----------


class LocalWorker:
    """The worker is this machine: rsync's remote shell runs the command here, exec runs it in /bin/sh."""

    def __init__(self, tmp_path):
        self.ssh = tmp_path / "fake-ssh"
        self.ssh.write_text('#!/bin/sh\nwhile [ "$1" != h1 ]; do shift; done\nshift\nexec sh -c "$*"\n')
        self.ssh.chmod(0o755)
        self.execs = []

    def rsync_target(self):
        return "h1", [str(self.ssh), "-oControlPath=none"], False  # no multiplexing folder of the run

    def rsync(self, argv, stdin=None, timeout=None):
        return rsync.execute(argv, stdin, timeout)

    def exec(self, cmd, stdin=None):
        self.execs.append(cmd)
        data = stdin.encode() if isinstance(stdin, str) else stdin
        proc = subprocess.run(["/bin/sh", "-c", cmd], input=data, capture_output=True, check=False)
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def test_a_step_on_a_local_worker_installs_the_agent_syncs_and_applies(bucket, tmp_path, monkeypatch):
    root = tmp_path / "worker"
    monkeypatch.setattr(remote, "AGENT_DIR", str(tmp_path / ".maand"))
    monkeypatch.setattr(remote, "worker_root", lambda bucket_id: str(root))
    meta = {"id": "meta@h1", "kind": "meta", "host": "h1", "worker_json": {"a": 1}, "jobs_json": {}}
    call = call_with(bucket, [op("api", kind="files"), meta])
    local = LocalWorker(tmp_path)
    # no agent yet: the fold does not reach it, so the files sync apart and the agent call installs it
    out = agent_step.apply(call, local)
    assert out.reason is None
    assert [(o["id"], o["ok"]) for o in out.answer["ops"]] == [("api@h1", True), ("meta@h1", True)]
    assert local.execs[1] == remote.install_command()
    assert (root / "jobs" / "api" / "Makefile").is_file() and json.loads((root / "worker.json").read_text()) == {"a": 1}
    # the agent is there now: the next step's files and step travel in one session
    (tmp_path / "bucket" / "workspace" / "jobs" / "api" / "conf").write_text("x=1\n")
    call = call_with(bucket, [op("api", kind="files"), dict(meta, worker_json={"a": 2})], step=2)
    local.execs.clear()
    out = agent_step.apply(call, local)
    assert out.reason is None and local.execs == [] and out.changed
    assert (root / "jobs" / "api" / "conf").read_text() == "x=1\n"
    assert json.loads((root / "worker.json").read_text()) == {"a": 2}
