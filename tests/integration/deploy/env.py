"""A bucket on the local fleet, driven the way a user drives it (ansible-playbook maand.core.<name>),
with readers for what the deploy left on the workers (their private /opt folders).

Shared by the fleet tests (test_deploy_e2e, test_ops2_fleet, ...)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


class Env:
    def __init__(self, fleet, bucket):
        self.fleet = fleet
        self.bucket = bucket
        self.hosts = fleet.addresses

    # -- running playbooks
    def play(self, name, *args, check=True):
        cmd = ["ansible-playbook", "-i", str(self.bucket / "maand.yml"), "maand.core.%s" % name, *args]
        if name == "build":
            cmd += ["-e", "maand_bucket=%s" % self.bucket]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(REPO), timeout=300, check=False)
        out = proc.stdout + proc.stderr
        if check and proc.returncode != 0:
            raise AssertionError("%s failed (rc=%d):\n%s" % (" ".join(cmd), proc.returncode, out[-6000:]))
        return proc.returncode, out

    def build(self):
        return self.play("build")

    def deploy(self, *args, check=True):
        return self.play("deploy", *args, check=check)

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

    def record(self, host, job):
        path = self.root(host) / "deploy" / ("%s.json" % job)
        return json.loads(path.read_text()) if path.exists() else None

    def catalog(self):
        return json.loads((self.bucket / "data" / "catalog.json").read_text())
