"""Health gates on a real SSH fleet (issue 22 items 4 and 5): a job whose process dies at start fails its
gate in seconds, once its `make status` reported it not running twice, not after its 60-attempt budget, with
the elapsed time and the tail of its log; a job without a status target keeps its whole (small) budget; and
on a fleet whose host keys changed under Ansible's host_key_checking = False, the deploy works and so do the
gate's own ssh calls (its status checks and the status tail of the failed gate).

The steps share one bucket and one 2-host fleet and run in file order. MAAND_CALLBACK_CAPTURE=<dir> keeps
the output of the first deploy there (docs/deploy.md shows it).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.integration.deploy.bucket import add_job, fleet_bucket, pid_makefile
from tests.integration.deploy.env import Env

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

# the process lives ~0.3 s, then dies naming why; `make status` exits 0 only while it runs (the scaffold's rule)
CRASH_PY = "import sys, time\ntime.sleep(0.3)\nprint('crash: cannot open crash.conf', file=sys.stderr)\nsys.exit(3)\n"
CRASH_MAKEFILE = pid_makefile("crash", "python3 crash.py")
# nothing listens and there is no status target: the gate cannot know better than to wait
SILENT_MAKEFILE = ".PHONY: start stop restart reload\nstart:\n\t@true\nstop:\n\t@true\nrestart:\n\t@true\nreload:\n\t@true\n"
BUDGET = 60


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = fleet_bucket(tmp_path_factory.mktemp("failfast") / "bucket", fleet.state_dir)
    add_job(bucket, "crash", files={"crash.py": CRASH_PY}, makefile=CRASH_MAKEFILE, selectors=["worker"],
            resources={"ports": {"crash_port": {}}},
            health_check={"checks": [{"type": "tcp", "port": "crash_port"}], "timeout_seconds": 1,
                          "wait": {"attempts": BUDGET, "interval_seconds": 1}})
    add_job(bucket, "silent", makefile=SILENT_MAKEFILE, selectors=["worker"], resources={"ports": {"silent_port": {}}},
            health_check={"checks": [{"type": "tcp", "port": "silent_port"}], "timeout_seconds": 1,
                          "wait": {"attempts": 4, "interval_seconds": 0.5}})
    e = Env(fleet, bucket)
    e.build()
    return e


def gate_note(text, job):
    """The first note of a failed gate: how long it waited (and why it stopped)."""
    m = re.search(r"(stopped waiting|gave up) after ([\d.]+) s \((\d+)(?: of (\d+))? attempt\(s\), [\d.]+ s apart\)"
                  r"(: `make status` says the job is not running)?", text.split("job %s" % job, 1)[-1])
    assert m, text
    return m.group(1), float(m.group(2)), int(m.group(3))


def test_01_a_dead_process_fails_its_gate_in_seconds(env):
    rc, out = env.deploy(check=False)
    if os.environ.get("MAAND_CALLBACK_CAPTURE"):
        Path(os.environ["MAAND_CALLBACK_CAPTURE"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["MAAND_CALLBACK_CAPTURE"]) / "fail-fast.log").write_text(out)
    assert rc != 0, out
    # the first worker seen dead stops the wait: either of the two, whichever status answered first
    hosts = "|".join(re.escape(h) for h in env.hosts)
    assert re.search(r"(%s): job crash is not running: `make status` said so 2 times in a row, [\d.]+ s apart "
                     r"\(crash not running\)" % hosts, out), out
    how, seconds, attempts = gate_note(out, "crash")
    # not the 60 x 1 s budget (rounds go on while a status check is out: a loaded machine needs a few more)
    assert how == "stopped waiting" and attempts < BUDGET / 2 and seconds < BUDGET / 2, out
    assert "stopped waiting after %.1f s (%d of %d attempt(s), 1.0 s apart)" % (seconds, attempts, BUDGET) in out, out
    assert "last lines of job crash" in out and "crash: cannot open crash.conf" in out, out   # the log tail
    # no status target: the whole budget, then the usual words
    how, seconds, attempts = gate_note(out, "silent")
    assert (how, attempts) == ("gave up", 4), out
    assert "job silent is not running" not in out


def stale_known_hosts(env, path):
    """A known_hosts naming every worker with a host key it does not have (as after a reinstall)."""
    key = path.parent / "old_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    pub = (path.parent / "old_host_key.pub").read_text().split()
    path.write_text("".join("%s %s %s\n" % (h, pub[0], pub[1]) for h in env.hosts))


def test_02_host_keys_changed_under_host_key_checking_false(env, tmp_path):
    known = tmp_path / "known_hosts"
    stale_known_hosts(env, known)
    ssh_args = "-o ControlMaster=no -o UserKnownHostsFile=%s -o ConnectTimeout=5" % known  # no StrictHostKeyChecking
    probe = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "UserKnownHostsFile=%s" % known, "-i", env.fleet.key,
                            "root@%s" % env.hosts[0], "true"], capture_output=True, text=True, timeout=30, check=False)
    assert probe.returncode == 255 and "Host key verification failed" in probe.stderr, probe.stderr  # the keys did change
    rc, out = env.deploy(check=False, env={"ANSIBLE_SSH_ARGS": ssh_args, "ANSIBLE_HOST_KEY_CHECKING": "False"})
    assert rc != 0, out
    assert "Host key verification failed" not in out and "could not reach the worker" not in out, out
    # the gate's status checks and its diagnostics reached the workers as the deploy did
    assert "job crash is not running" in out, out
    assert "--- make status (exit 2):" in out and "crash: cannot open crash.conf" in out, out
