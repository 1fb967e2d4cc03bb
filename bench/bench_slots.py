"""Slot scheduler benchmark (issue 11, seed 004) on the local SSH fleet (root, Linux). Not a test.

    python3 bench/bench_slots.py [--hosts 4] [--slots 2] [--label NAME] [--out bench/results]

A wave of 8 independent jobs whose `make start` sleeps 1..8 s runs on every one of --hosts fleet
hosts. In one run, each mode a first deploy (the workers' bucket folder wiped before each):
  serial    maand_worker_slots=1: one target after another (the deploy before the scheduler);
  naive     --slots side by side, no estimates known (data/job_history.json removed): name order;
  lpt       --slots side by side, estimates from the history the naive run recorded: Maelstrom's
            order (longest first), list-scheduled on the slots.
Per worker the makespan is max(end) - min(start) of the eight `make start`s (timestamps the targets
write on the worker), compared with the lower bound max(longest, sum / slots). Also times the pure
core: collapse_spec + job_environment for 1,000 jobs with 5-deep container chains (goal < 0.1 s).
Writes <out>/slots-<label>.json and .md. The fleet is torn down by its pid files, also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
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

import conftest  # noqa: E402,F401 pylint: disable=unused-import # makes the collection importable
from tests.integration.deploy.bucket import add_job, write  # noqa: E402

SECONDS = list(range(1, 9))
NAP = """\
.PHONY: start stop restart reload
start:
\tmkdir -p logs; date +%s.%N > logs/t0; sleep {secs}; date +%s.%N > logs/t1
stop restart reload:
\t@true
"""


def sh(cmd, env=None, what=""):
    proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit("%s failed (rc=%d):\n%s" % (what or cmd[0], proc.returncode,
                                                     (proc.stdout + proc.stderr)[-4000:]))
    return proc.stdout


class Bench:
    def __init__(self, work: Path, n_hosts: int, slots: int):
        self.work, self.n, self.slots = work, n_hosts, slots
        self.state, self.bucket = work / "fleet", work / "bucket"
        self.hosts = []

    def env(self):
        e = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                 ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3")
        e.setdefault("ANSIBLE_COLLECTIONS_PATH", str(REPO / ".collections"))
        return e

    def up(self):
        out = sh([sys.executable, str(FLEET), "up", "--state-dir", str(self.state), "--hosts", str(self.n),
                  "--name", "bs%d" % (os.getpid() % 10000)], what="fleet up")
        self.hosts = json.loads(out)

    def down(self):
        subprocess.run([sys.executable, str(FLEET), "down", "--state-dir", str(self.state)], check=False,
                       capture_output=True)

    def write_bucket(self):
        b = self.bucket
        write(b / "maand.yml", "plugin: maand.core.workspace\n")
        write(b / "maand.conf", 'job_config_selector = ""\n')
        write(b / "workspace" / "bucket.conf", 'port_min = "30000"\nport_max = "39999"\n')
        workers = [{"host": h["address"], "labels": ["worker"]} for h in self.hosts]
        write(b / "workspace" / "workers.json", json.dumps(workers, indent=2) + "\n")
        sh([sys.executable, str(FLEET), "bucket-key", "--state-dir", str(self.state), "--bucket", str(b)])
        for secs in SECONDS:
            add_job(b, "nap%d" % secs, makefile=NAP.format(secs=secs))
        sh(["ansible-playbook", "-i", str(b / "maand.yml"), "maand.core.build", "-e", "maand_bucket=%s" % b],
           env=self.env(), what="build")

    def deploy(self, slots):
        for h in self.hosts:
            shutil.rmtree(Path(h["opt_dir"]) / "worker", ignore_errors=True)
        t0 = time.perf_counter()
        out = sh(["ansible-playbook", "-i", str(self.bucket / "maand.yml"), "maand.core.deploy",
                  "-e", "maand_worker_slots=%d" % slots], env=self.env(), what="deploy")
        wall = time.perf_counter() - t0
        bucket_id = json.loads((self.bucket / "data" / "catalog.json").read_text())["bucket_id"]
        spans = []
        for h in self.hosts:
            jobs = Path(h["opt_dir"]) / "worker" / bucket_id / "jobs"
            starts = [float((jobs / ("nap%d" % s) / "logs" / "t0").read_text()) for s in SECONDS]
            ends = [float((jobs / ("nap%d" % s) / "logs" / "t1").read_text()) for s in SECONDS]
            spans.append(max(ends) - min(starts))
        return {"slots": slots, "wall_s": round(wall, 2), "makespan_per_worker_s": [round(s, 2) for s in spans],
                "makespan_median_s": round(statistics.median(spans), 2), "plan_order": order_lines(out)}


def order_lines(out):
    return [line.strip() for line in out.splitlines() if " slot(s): " in line][:1]


def core_timing(n_jobs=1000, depth=5, repeats=5):
    """collapse_spec + job_environment for n_jobs jobs, each at the bottom of a depth-deep chain."""
    from ansible_collections.maand.core.plugins.plugin_utils import jobspec as _jobspec

    containers = {}
    for chain in range(10):
        for level in range(depth):
            parent = {"container": "c%d-%d" % (chain, level + 1)} if level + 1 < depth else None
            doc = {"environment": [{"vars": {"L%d" % level: "v", "PATH": "/l%d:$prev{PATH:-/bin}" % level},
                                    "extend": True}], "user": "u%d" % level}
            if parent:
                doc["parent"] = parent
            containers["c%d-%d" % (chain, level)] = doc
    jobs = {"j%d" % i: {"parent": {"container": "c%d-0" % (i % 10)},
                        "environment": {"DB": "$env{DB_URL:-x}", "PATH": "/j:$prev{PATH}"}} for i in range(n_jobs)}
    times = []
    for _n in range(repeats):
        t0 = time.perf_counter()
        collapsed = _jobspec.collapse_specs(jobs, containers)
        for spec in collapsed.values():
            _jobspec.environment_eval({}, spec.environment, {"DB_URL": "pg"}.get)
        times.append(time.perf_counter() - t0)
    return {"jobs": n_jobs, "depth": depth, "median_s": round(statistics.median(times), 4),
            "runs_s": [round(t, 4) for t in times]}


def markdown(r):
    bound = r["lower_bound_s"]
    lines = ["# Slot scheduler bench (%s)" % r["label"], "",
             "%d hosts, 8 jobs sleeping 1..8 s in `make start`, %d slots; load at start %s." % (
                 r["hosts"], r["slots"], r["load"]), "",
             "| mode | slots | makespan per worker (median) | / lower bound | / serial | deploy wall |",
             "|---|---|---|---|---|---|"]
    serial = r["modes"]["serial"]["makespan_median_s"]
    for name in ("serial", "naive", "lpt"):
        m = r["modes"][name]
        lines.append("| %s | %d | %.2f s %s | %.2fx | %.2fx | %.1f s |" % (
            name, m["slots"], m["makespan_median_s"], m["makespan_per_worker_s"], m["makespan_median_s"] / bound,
            m["makespan_median_s"] / serial, m["wall_s"]))
    lines += ["", "Lower bound max(longest, sum / slots) = %.1f s (serial ideal %d s)." % (bound, sum(SECONDS)),
              "LPT plan line: `%s`" % (r["modes"]["lpt"]["plan_order"] or ["-"])[0], "",
              "Pure core: collapse_spec + job_environment for %d jobs with %d-deep chains: median %.4f s (goal < 0.1 s)."
              % (r["core"]["jobs"], r["core"]["depth"], r["core"]["median_s"])]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--label", default="run")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args(argv)
    result = {"label": args.label, "hosts": args.hosts, "slots": args.slots, "load": os.getloadavg()[0],
              "lower_bound_s": max(*SECONDS, sum(SECONDS) / args.slots), "core": core_timing(), "modes": {}}
    bench = Bench(Path(tempfile.mkdtemp(prefix="bench-slots-")), args.hosts, args.slots)
    try:
        bench.up()
        bench.write_bucket()
        result["modes"]["serial"] = bench.deploy(1)
        (bench.bucket / "data" / "job_history.json").unlink()
        result["modes"]["naive"] = bench.deploy(args.slots)
        result["modes"]["lpt"] = bench.deploy(args.slots)
    finally:
        bench.down()
        shutil.rmtree(bench.work, ignore_errors=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / ("slots-%s.json" % args.label)).write_text(json.dumps(result, indent=2) + "\n")
    (out / ("slots-%s.md" % args.label)).write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
