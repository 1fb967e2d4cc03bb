"""Deploy benchmark on the local SSH fleet (root, Linux; see tests/fleet/README.md).

    python3 bench/bench_deploy.py [--hosts 8] [--jobs 5] [--runs 5] [--first-runs 3] [--json]

With N fleet hosts and J jobs (every job on every host), it measures in one run:
  (a) a first deploy (workers wiped before each repetition),
  (b) a no-change redeploy,
  (c) a one-task `ansible.builtin.ping` playbook over the same inventory (the floor),
and prints the medians and the ratio b/c (goal: b within 2x of c). Each figure is the wall time
of a whole `ansible-playbook` process, start-up and inventory parsing included, as a user sees it.
The fleet is always torn down (by its pid files) at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
FLEET = REPO / "tests" / "fleet" / "fleet.py"

from tests.integration.deploy.bucket import make_bucket  # noqa: E402

PING = """---
- name: Floor - one ping per host
  hosts: all
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
"""


def env():
    e = dict(os.environ)
    e.setdefault("ANSIBLE_CONFIG", str(REPO / "ansible.cfg"))
    e.setdefault("ANSIBLE_COLLECTIONS_PATH", str(REPO / ".collections"))
    e["ANSIBLE_FORCE_COLOR"] = "0"
    e.setdefault("ANSIBLE_PYTHON_INTERPRETER", "/usr/bin/python3")  # the fleet targets' python (docs: tests/fleet)
    return e


def link_collection():
    link = REPO / ".collections" / "ansible_collections" / "maand" / "core"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(REPO)


def timed(cmd, expect_changed=None):
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(REPO), env=env(), capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit("command failed (rc=%d): %s\n%s" % (proc.returncode, " ".join(cmd), proc.stdout[-4000:] + proc.stderr[-2000:]))
    changed = sum(int(n) for n in re.findall(r"changed=(\d+)", proc.stdout))
    if expect_changed is not None and bool(changed) != expect_changed:
        raise SystemExit("unexpected changed=%d for %s\n%s" % (changed, " ".join(cmd), proc.stdout[-3000:]))
    return elapsed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--runs", type=int, default=5, help="repetitions of (b) and (c)")
    ap.add_argument("--first-runs", type=int, default=3, help="repetitions of (a)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = ap.parse_args(argv)
    link_collection()
    work = Path(tempfile.mkdtemp(prefix="maand-bench-deploy-"))
    state = work / "fleet"
    try:
        up = subprocess.run([sys.executable, str(FLEET), "up", "--state-dir", str(state), "--hosts", str(args.hosts),
                             "--name", "bdeploy"], capture_output=True, text=True, check=False)
        if up.returncode != 0:
            raise SystemExit("fleet up failed: %s" % up.stderr[-2000:])
        hosts = json.loads(up.stdout)
        bucket = make_bucket(work / "bucket", state, n_jobs=args.jobs, health=False)
        inv = ["-i", str(bucket / "maand.yml")]
        timed(["ansible-playbook", *inv, "maand.core.build", "-e", "maand_bucket=%s" % bucket])
        bucket_id = json.loads((bucket / "data" / "catalog.json").read_text())["bucket_id"]
        ping = work / "ping.yml"
        ping.write_text(PING)

        first, nochange, floor = [], [], []
        for dummy in range(args.first_runs):
            for h in hosts:
                shutil.rmtree(Path(h["opt_dir"]) / "worker" / bucket_id, ignore_errors=True)
            first.append(timed(["ansible-playbook", *inv, "maand.core.deploy"], expect_changed=True))
        for dummy in range(args.runs):  # interleaved so load drifts hit both alike
            nochange.append(timed(["ansible-playbook", *inv, "maand.core.deploy"], expect_changed=False))
            floor.append(timed(["ansible-playbook", *inv, str(ping)], expect_changed=False))
        med = {k: statistics.median(v) for k, v in (("first", first), ("nochange", nochange), ("ping", floor))}
        ratio = med["nochange"] / med["ping"]
        print("deploy benchmark: %d hosts x %d jobs (%d allocations), forks from ansible.cfg, pipelining on"
              % (args.hosts, args.jobs, args.hosts * args.jobs))
        print("  (a) first deploy        median %6.2fs  runs %s" % (med["first"], ", ".join("%.2f" % x for x in first)))
        print("  (b) no-change redeploy  median %6.2fs  runs %s" % (med["nochange"], ", ".join("%.2f" % x for x in nochange)))
        print("  (c) ping floor          median %6.2fs  runs %s" % (med["ping"], ", ".join("%.2f" % x for x in floor)))
        print("  ratio b/c = %.2f (goal <= 2.0)  a/c = %.2f" % (ratio, med["first"] / med["ping"]))
        if args.json:
            print(json.dumps({"hosts": args.hosts, "jobs": args.jobs, "median_s": med, "ratio_b_c": ratio,
                              "runs": {"first": first, "nochange": nochange, "ping": floor}}))
        return 0
    finally:
        subprocess.run([sys.executable, str(FLEET), "down", "--state-dir", str(state)], capture_output=True, text=True, check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
