"""Every verb through the maand.core.deploy stdout callback, on a real SSH fleet (issue 31, items 1 and 7).

The bucket is made by maand.core.init (its ansible.cfg selects the callback) and every playbook runs
from the bucket folder. Checked: a build error is printed exactly once with kind, file, field and fix
and no Ansible framing; `-e maand_format=json` writes one JSON document alone on stdout (status,
build, info, cat, logs, health_check, gc, deploy); status exits non-zero when an active allocation is
not running and 0 when the only stopped allocations are disabled; a failed health_check ends with its
lines, not a JSON blob; `gc --check` reports nothing as changed; a refused deploy shows no recap; the
verdicts are in the run's custom stats, as ansible-runner (AWX) reads them from its events. The steps
run in file order on one fleet.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

from tests.integration.test_status_fleet import REPO, StatusEnv, row

ansible_runner = pytest.importorskip("ansible_runner", reason="ansible-runner is not installed (requirements-dev.txt)")

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

JOBS = ("api", "web")
FRAMING = ("PLAY [", "TASK [", "PLAY RECAP", "Origin:", "fatal:", "ok: [", "changed: [")


class OutputEnv(StatusEnv):
    def run(self, name, *args):
        """(rc, stdout, stderr) of ansible-playbook maand.core.<name> from the bucket folder.
        MAAND_OUTPUT_CAPTURE=<file> appends each run there as printed (docs/commands.md shows them)."""
        proc = self.playbook(name, *args)
        capture = os.environ.get("MAAND_OUTPUT_CAPTURE")
        if capture:
            with open(capture, "a", encoding="utf-8") as handle:
                handle.write("$ ansible-playbook maand.core.%s %s   # rc=%d\n%s%s\n" % (
                    name, " ".join(args), proc.returncode, proc.stdout, proc.stderr))
        return proc.returncode, proc.stdout, proc.stderr

    def document(self, name, *args):
        """(rc, the JSON document) of a run with -e maand_format=json: the whole of stdout must parse."""
        rc, out, err = self.run(name, "-e", "maand_format=json", *args)
        try:
            return rc, json.loads(out)
        except ValueError as exc:
            raise AssertionError("stdout of %s is not one JSON document (%s):\n%s\n--- stderr:\n%s"
                                 % (name, exc, out, err)) from None


def no_framing(text):
    found = [f for f in FRAMING if f in text]
    assert not found, (found, text)


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(3)
    bucket = tmp_path_factory.mktemp("output") / "bucket"
    e, dummy = OutputEnv.initialised(fleet, bucket)
    for job in JOBS:
        e.play("job_create", "-e", "maand_job=%s" % job)
    e.play("build")
    rc, out = e.play("deploy")
    assert "deploy done: 6 started" in out, out
    return e


def test_01_a_build_error_is_printed_once_without_framing(env):
    manifest = env.bucket / "workspace" / "jobs" / "web" / "manifest.json"
    good = manifest.read_text()
    data = json.loads(good)
    data["resources"]["memory"] = {"max": "256m"}
    manifest.write_text(json.dumps(data, indent=2))
    try:
        rc, out, err = env.run("build")
        text = out + err
        assert rc != 0, text
        error = ("ErrInvalidManifest: workspace/jobs/web/manifest.json: resources.memory.max: job web: unknown unit 'm' "
                 "in '256m': use one of mb, gb, tb (fix: use maand units (mb, gb, tb))")
        assert text.count("unknown unit 'm'") == 1 and error in text, text
        assert "FAILED: maand build found 1 error in %s; nothing was written" % env.bucket in text, text
        no_framing(text)
        rc, doc = env.document("build")
        assert rc != 0 and doc["outcome"] == "failed" and doc["counts"]["errors"] == 1, doc
        assert [(e["kind"], e["file"], e["field"]) for e in doc["errors"]] == [
            ("ErrInvalidManifest", "workspace/jobs/web/manifest.json", "resources.memory.max")], doc
    finally:
        manifest.write_text(good)
    rc, out, err = env.run("build")
    assert rc == 0, out + err
    assert re.search(r"^JOB\s+WORKER\s+STATE", out, re.M), out
    no_framing(out + err)


def test_02_status_json_is_the_whole_of_stdout(env):
    rc, out, err = env.run("status")
    assert rc == 0 and "status: 6 running" in out, out + err
    no_framing(out + err)
    rc, doc = env.document("status")
    assert rc == 0, doc
    assert doc["verb"] == "status" and doc["outcome"] == "ok" and doc["counts"]["running"] == 6, doc
    assert len(doc["rows"]) == 6 and all(r["running"] is True for r in doc["rows"]), doc


def test_03_json_documents_of_the_read_only_verbs(env):
    for name, args, key in (("info", (), "allocations"), ("cat", ("-e", "maand_cat=allocations"), "rows"),
                            ("logs", (), "runs"), ("health_check", (), "checks")):
        rc, doc = env.document(name, *args)
        assert rc == 0 and doc["outcome"] == "ok" and key in doc, (name, doc)
    rc, doc = env.document("build")
    assert rc == 0 and doc["verb"] == "build" and len(doc["allocations"]) == 6, doc


def test_04_a_killed_job_fails_status_and_health_check_once_each(env):
    h0 = env.hosts[0]
    env.make(h0, "api", "stop")
    try:
        rc, out, err = env.run("status")
        text = out + err
        assert rc != 0, text
        assert row(out, "api", h0)[5] == "no", out
        assert "status: 5 running, 1 not running" in out, out
        assert text.count("FAILED: ") == 1 and "active allocation not running: api@%s" % h0 in text, text
        no_framing(text)
        rc, doc = env.document("status")
        assert rc != 0 and doc["outcome"] == "failed" and doc["not_running"] == ["api@%s" % h0], doc

        rc, out, err = env.run("health_check")
        text = out + err
        assert rc != 0, text
        assert re.search(r"^FAILED: .*health_check: \d+ ok, [1-9]\d* failed", text, re.M), text
        assert '"checks"' not in text and '{"' not in text, text  # no result dumped as JSON
        no_framing(text)
        rc, doc = env.document("health_check")
        assert rc != 0 and doc["healthy"] is False and doc["counts"]["failed"] >= 1, doc
    finally:
        env.make(h0, "api", "start")


def test_05_disabled_allocations_are_disabled_not_failures(env):
    h1 = env.hosts[1]
    disabled = env.bucket / "workspace" / "disabled.json"
    disabled.write_text(json.dumps({"workers": [h1]}))
    try:
        env.play("build")
        rc, out = env.play("deploy")
        assert rc == 0, out
        rc, out, err = env.run("status")
        assert rc == 0, out + err
        for job in JOBS:
            cells = row(out, job, h1)
            assert cells[2] == "disabled" and cells[5] == "disabled", cells
        assert "status: 4 running, 2 disabled" in out, out
        rc, doc = env.document("status")
        assert rc == 0 and doc["counts"].get("disabled") == 2 and "not_running" not in doc["counts"], doc
    finally:
        disabled.unlink()
        env.play("build")
        env.play("deploy")


def test_06_gc_check_changes_nothing_and_says_so(env):
    rc, out, err = env.run("gc", "--check", "--diff")
    text = out + err
    assert rc == 0, text
    assert "changed" not in text.lower().replace("nothing was deleted", ""), text
    assert "check mode: nothing was deleted" in text, text
    no_framing(text)
    rc, doc = env.document("gc", "--check")
    assert rc == 0 and doc["verb"] == "gc" and doc["outcome"] == "check", doc


def test_07_a_refused_deploy_shows_no_recap_and_json_names_the_error(env):
    rc, out, err = env.run("deploy", "-e", "maand_jobs=nope")
    text = out + err
    assert rc != 0, text
    assert "failed=1" not in text and "PLAY RECAP" not in text, text
    assert text.count("nope") >= 1 and text.count("FAILED: ") == 1, text
    rc, doc = env.document("deploy", "-e", "maand_jobs=nope")
    assert rc != 0 and doc["outcome"] == "failed" and "nope" in doc["errors"][0], doc


def test_08_deploy_json_is_the_verdict(env):
    rc, doc = env.document("deploy", "-e", "maand_force=true")
    assert rc == 0 and doc["verb"] == "deploy" and doc["outcome"] == "ok", doc
    assert len(doc["verdict"]) == 6 and sum(doc["counts"].values()) == 6, doc


def test_09_job_status_one_line_per_worker(env):
    rc, out, err = env.run("job", "-e", "maand_job=api", "-e", "maand_target=status")
    assert rc == 0, out + err
    for host in env.hosts:
        assert re.search(r"^%s: " % re.escape(host), out, re.M), out
    no_framing(out + err)
    # init's maand.conf says use_sudo = true and the fleet has no sudo: the command fails on every worker,
    # and each failure is printed once, after the per-worker report
    rc, out, err = env.run("run_command", "-e", json.dumps({"maand_cmd": "echo hello from $WORKER_IP"}))
    text = out + err
    assert rc != 0, text
    assert "run_command: ok on 0 of 3 worker(s)" in text, text
    for host in env.hosts:
        assert text.count("FAILED: worker %s: `echo hello from $WORKER_IP` exited " % host) == 1, text
    no_framing(text)


# --- AWX: ansible-runner's events carry the verdicts (set_stats) ---------------------------------

def runner_stats(env, tmp_path, playbook, **extra):
    """The custom stats (artifact_data of playbook_on_stats) of maand.core.<playbook> under ansible-runner,
    with ansible-runner's own stdout callback (as AWX runs a job); (status, artifact_data)."""
    pdd = tmp_path / ("pdd-" + playbook)
    (pdd / "project").mkdir(parents=True, exist_ok=True)
    (pdd / "project" / "play.yml").write_text(
        "---\n- name: The verb\n  ansible.builtin.import_playbook: maand.core.%s\n" % playbook)
    envvars = {k: v for k, v in env.env.items() if v is not None}
    envvars.update(ANSIBLE_CONFIG=str(env.bucket / "ansible.cfg"),
                   ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1")
    runner = ansible_runner.run(private_data_dir=str(pdd), playbook="play.yml", inventory=str(env.bucket / "maand.yml"),
                                envvars=envvars, quiet=True, timeout=300, **extra)
    (final,) = [e for e in runner.events if e.get("event") == "playbook_on_stats"]
    return runner.status, final["event_data"].get("artifact_data") or {}


def test_10_status_and_build_verdicts_in_the_ansible_runner_events(env, tmp_path):
    status, data = runner_stats(env, tmp_path, "status")
    assert status == "successful", data
    assert data["maand_status"]["outcome"] == "ok" and data["maand_status"]["counts"]["running"] == 6, data
    assert len(data["maand_status"]["rows"]) == 6, data
    status, data = runner_stats(env, tmp_path, "build", extravars={"maand_bucket": str(env.bucket)})
    assert status == "successful" and data["maand_build"]["counts"]["allocations"] == 6, data


def test_11_a_failed_verdict_is_in_the_events_too(env, tmp_path):
    h2 = env.hosts[2]
    env.make(h2, "web", "stop")
    try:
        status, data = runner_stats(env, tmp_path, "status")
        assert status == "failed", data
        assert data["maand_status"]["outcome"] == "failed", data
        assert data["maand_status"]["not_running"] == ["web@%s" % h2], data
    finally:
        env.make(h2, "web", "start")


# --- progress that is true: a long make target, Ctrl-C ------------------------------------------

def capture(name, text):
    """MAAND_OUTPUT_CAPTURE: keep a run's output (docs/commands.md shows them)."""
    if os.environ.get("MAAND_OUTPUT_CAPTURE"):
        with open(os.environ["MAAND_OUTPUT_CAPTURE"], "a", encoding="utf-8") as handle:
            handle.write("$ ansible-playbook maand.core.%s\n%s\n" % (name, text))


def slow_restart(env, seconds):
    """web's restart takes `seconds` longer (a changed Makefile: the next deploy restarts web everywhere)."""
    makefile = env.bucket / "workspace" / "jobs" / "web" / "Makefile"
    text = re.sub(r"\nrestart: stop start\n(\t@sleep \d+\n)?", "\nrestart: stop start\n\t@sleep %d\n" % seconds,
                  makefile.read_text())
    makefile.write_text(text)
    env.play("build")


def test_12_a_long_make_target_shows_its_elapsed_time(env):
    slow_restart(env, 3)
    proc = env.playbook("deploy", env={"MAAND_DEPLOY_LIVE": "never", "MAAND_DEPLOY_MAKE_EVERY": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    capture("deploy   # MAAND_DEPLOY_LIVE=never MAAND_DEPLOY_MAKE_EVERY=1", proc.stdout + proc.stderr)
    ticks = re.findall(r"^wave 0: web upgrade batch \S+: running, (\d) of (\d) workers? answered \((\d+) s\)$",
                       proc.stdout, re.M)
    assert ticks and max(int(t[2]) for t in ticks) >= 2, proc.stdout
    assert re.search(r"^wave 0: web upgrade batch \S+: applying on ", proc.stdout, re.M), proc.stdout
    assert "revert (if" not in proc.stdout, proc.stdout  # no auto_revert slot line unless a revert runs
    assert not re.search(r"^changed: ", proc.stdout, re.M), proc.stdout  # the agents' loop items are not listed


def test_13_ctrl_c_says_what_was_done_and_how_to_resume(env):
    slow_restart(env, 8)
    full_env = {k: v for k, v in dict(os.environ, **env.env).items() if v is not None}
    full_env.update(MAAND_DEPLOY_LIVE="never", MAAND_DEPLOY_MAKE_EVERY="1")
    proc = subprocess.Popen(env.cmd("deploy"), cwd=str(env.cwd), env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen = []
    deadline = time.monotonic() + 240
    for line in proc.stdout:  # until the first make tick: the step's make targets are running
        seen.append(line)
        if " answered (" in line or time.monotonic() > deadline:
            break
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: the terminal's whole foreground group
    out, err = proc.communicate(timeout=120)
    text = "".join(seen) + out + err
    capture("deploy   # Ctrl-C while make runs", text)
    assert proc.returncode != 0, text
    assert "interrupted: the deploy stopped before its end during wave 0: web upgrade batch" in err, text
    assert re.search(r"^  not run: ", err, re.M) and "to resume: run the deploy again" in err, text
    slow_restart(env, 0)
    rc, out = env.play("deploy", timeout=400)
    assert "deploy done:" in out, out
    rc, out, err = env.run("status")
    assert rc == 0 and "status: 6 running" in out, out + err
