"""A bucket on the local fleet, driven the way a user drives it (ansible-playbook maand.core.<name>),
with readers for what the deploy left on the workers (their private /opt folders).

Shared by the fleet tests (test_deploy_e2e, test_ops2_fleet, ...)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

from tests.integration.deploy.bucket import fleet_bucket

REPO = Path(__file__).resolve().parents[3]


class Env:
    timeout = 300  # seconds one ansible-playbook may take
    tail = 6000  # characters of its output a failed play shows

    def __init__(self, fleet, bucket):
        self.fleet = fleet
        self.bucket = bucket
        self.hosts = fleet.addresses
        self.env = {}  # variables every play sets over os.environ (None unsets one)
        self.cwd = REPO

    # -- running playbooks
    def cmd(self, name, *args):
        cmd = ["ansible-playbook", "-i", str(self.bucket / "maand.yml"), "maand.core.%s" % name, *args]
        if name == "build":
            cmd += ["-e", "maand_bucket=%s" % self.bucket]
        return cmd

    def playbook(self, name, *args, env=None, timeout=None, text=True):
        """ansible-playbook maand.core.<name>; env: this play's variables over self.env (None unsets one)."""
        full_env = dict(os.environ)
        for key, value in dict(self.env, **(env or {})).items():
            if value is None:
                full_env.pop(key, None)
            else:
                full_env[key] = value
        return subprocess.run(self.cmd(name, *args), capture_output=True, text=text, cwd=str(self.cwd),
                              timeout=timeout or self.timeout, check=False, env=full_env)

    def play(self, name, *args, check=True, env=None, timeout=None, tail=None):
        proc = self.playbook(name, *args, env=env, timeout=timeout)
        out = proc.stdout + proc.stderr
        if check and proc.returncode != 0:
            raise AssertionError("%s failed (rc=%d):\n%s"
                                 % (" ".join(proc.args), proc.returncode, out[-(tail or self.tail):]))
        return proc.returncode, out

    def build(self):
        return self.play("build")

    def deploy(self, *args, check=True, env=None):
        return self.play("deploy", *args, check=check, env=env)

    def json_of(self, name, *args):
        """The JSON document a playbook printed (maand_format=json)."""
        rc, out = self.play(name, "-e", "maand_format=json", *args)
        start = out.index("\n{\n") + 1
        data, dummy = json.JSONDecoder().raw_decode(out[start:])
        return data

    @staticmethod
    def changed(out):
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", out, re.M)}

    # -- looking at workers (through the fleet's private /opt folders)
    @property
    def bucket_id(self):
        return json.loads((self.bucket / "data" / "catalog.json").read_text())["bucket_id"]

    def root(self, host):
        return Path(self.fleet.host(host)["opt_dir"]) / "worker" / self.bucket_id

    def job(self, host, job):
        return self.root(host) / "jobs" / job

    def events(self, host, job):
        path = self.job(host, job) / "logs" / "events.log"
        return path.read_text().splitlines() if path.exists() else []

    def wait_for_event(self, host, job, event, after, timeout=120.0):
        """Wait until job logs event on host in a line past the first `after` lines."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(line.startswith(event + " ") for line in self.events(host, job)[after:]):
                return
            time.sleep(0.1)
        raise AssertionError("%s never logged %r on %s: %s" % (job, event, host, self.events(host, job)))

    def record(self, host, job):
        path = self.root(host) / "deploy" / ("%s.json" % job)
        return json.loads(path.read_text()) if path.exists() else None

    def catalog(self):
        return json.loads((self.bucket / "data" / "catalog.json").read_text())


def fleet_env(env_class, fleet_factory, tmp_path_factory, name, hosts=3):
    """An env_class on a new fleet of hosts workers and a bucket without jobs for it (bucket.fleet_bucket)."""
    fleet = fleet_factory(hosts)
    return env_class(fleet, fleet_bucket(tmp_path_factory.mktemp(name) / "bucket", fleet.state_dir))


def capture(name, out):
    """MAAND_CALLBACK_CAPTURE=<dir> keeps a play's output there as <name> (the docs show such output)."""
    if os.environ.get("MAAND_CALLBACK_CAPTURE"):
        Path(os.environ["MAAND_CALLBACK_CAPTURE"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["MAAND_CALLBACK_CAPTURE"]) / name).write_text(out)


def verdict_rows(out, job):
    """The rows (split on blanks) of job in the last verdict table (JOB ... RESULT) a deploy printed."""
    lines = out.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("JOB ") and "RESULT" in line)
    return [line.split() for line in lines[start + 1:] if line.startswith(job + " ")]


def race_deploys(first, second):
    """Start a deploy from each Env at once; exactly one must succeed. The loser's output."""
    procs = first.start("deploy"), second.start("deploy")
    outs = [p.communicate(timeout=400)[0] for p in procs]
    rcs = [p.returncode for p in procs]
    assert sorted(rc == 0 for rc in rcs) == [False, True], (rcs, outs)
    return outs[rcs.index(next(rc for rc in rcs if rc != 0))]
