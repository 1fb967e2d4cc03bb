"""Where a first deploy (a) spends its time and CPU beside the baseline playbook (G) (root, Linux; not a test,
never run by .ci/run):

    python3 bench/profile_deploy.py [--hosts 8] [--delay-ms 0] [--runs 2] [--collection PATH]

On one fleet of --hosts sshd hosts (the bench_deploy bucket, the same relay), it runs (a) and (G) --runs times,
interleaved, each with ansible.posix.profile_tasks, and reports per run: wall time, the CPU time of the
controller (the run's whole process tree: ansible-playbook, its forks, ssh, rsync; from wait4) and of the
workers (every fleet sshd's reaped children: sessions, shells, agent, make; from /proc/<sshd>/stat after
the run's SSH masters closed), and the time of every task. CPU seconds are the load-independent figure on a
shared machine: wall time is CPU / cores used, plus waiting.
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

from bench.bench_deploy import BASELINE_G, Bench  # noqa: E402
from tests.fleet.fleet import host_sshd_pids  # noqa: E402

TASK = re.compile(r"^(.+?) -+ (\d+\.\d+)s$", re.M)
TICK = os.sysconf("SC_CLK_TCK")


def reaped_cpu(hosts):
    """CPU seconds of the reaped children of every fleet sshd (sessions and all they ran)."""
    total = 0
    for h in hosts:
        for pid in host_sshd_pids(h):
            try:
                fields = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[13]) + int(fields[14])  # cutime, cstime
    return total / TICK


def timed(b, hosts, cmd):
    env, started = b.wire.start()
    env = dict(b.env(), **env, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="40",
               PROFILE_TASKS_SORT_ORDER="none")
    before = reaped_cpu(hosts)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    b.wire.finish(started)
    time.sleep(1.0)  # the closed masters' sshd children are reaped
    workers = reaped_cpu(hosts) - before
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("%s failed:\n%s" % (" ".join(cmd), out[-3000:]))
    tasks = [(name.strip(), float(sec)) for name, sec in TASK.findall(out.split("TASKS RECAP", 1)[-1])]
    return {"wall_s": round(wall, 2), "controller_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "workers_cpu_s": round(workers, 2), "tasks": tasks}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--delay-ms", type=int, default=0)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--forks", type=int, default=20)
    ap.add_argument("--collection", default=str(REPO))
    ap.add_argument("--control-persist", default="15m", help="as bench_deploy.py ('' keeps the repository's 60s)")
    ap.add_argument("--out", default=None, help="write the runs as JSON here")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="maand-profile-deploy-"))
    coll = work / "collections"
    (coll / "ansible_collections" / "maand").mkdir(parents=True)
    (coll / "ansible_collections" / "maand" / "core").symlink_to(Path(args.collection).resolve())
    b = Bench(args.hosts, work, coll, args.forks)
    b.persist = args.control_persist
    results = {"a": [], "G": []}
    try:
        b.up()
        hosts = json.loads((b.state / "fleet.json").read_text())["hosts"]
        b.write_bucket()
        b.build()
        b.wire.group_vars(b.bucket, args.delay_ms)
        playbook = work / "baseline_g.yml"
        playbook.write_text(BASELINE_G)
        deploy = ["ansible-playbook", "-i", str(b.bucket / "maand.yml"), "maand.core.deploy"]
        base_g = ["ansible-playbook", "-i", str(b.bucket / "maand.yml"), str(playbook),
                  "-e", "bench_job_src=%s" % (b.bucket / "workspace" / "jobs" / "api")]
        for dummy in range(args.runs):
            b.wipe_workers()
            results["a"].append(timed(b, hosts, deploy))
            for h in b.hosts:
                shutil.rmtree(Path(h["opt_dir"]) / "bench-g", ignore_errors=True)
            results["G"].append(timed(b, hosts, base_g))
            brief = [{k: v for k, v in results[p][-1].items() if k != "tasks"} for p in ("a", "G")]
            print("load %s; (a) %s; (G) %s" % (os.getloadavg(), brief[0], brief[1]), file=sys.stderr, flush=True)
    finally:
        b.down()
        shutil.rmtree(work, ignore_errors=True)
    for name, runs in results.items():
        print("(%s) medians of %d: wall %.2f s, controller CPU %.2f s, workers CPU %.2f s" % (
            name, len(runs), statistics.median(r["wall_s"] for r in runs),
            statistics.median(r["controller_cpu_s"] for r in runs), statistics.median(r["workers_cpu_s"] for r in runs)))
        for task, sec in runs[-1]["tasks"]:
            print("    %6.2f s  %s" % (sec, task))
    if args.out:
        Path(args.out).write_text(json.dumps(dict(results, hosts=args.hosts, delay_ms=args.delay_ms,
                                                  load=os.getloadavg()), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
