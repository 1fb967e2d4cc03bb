"""Deploy benchmark on the local SSH fleet (root, Linux; see tests/fleet/README.md). Not a test: never run by .ci/run.

    python3 bench/bench_deploy.py [--collection PATH] [--baseline PATH] [--sizes 8,32,64] [--delay-ms 0,25] [--runs 3]
                                  [--big-runs 1] [--forks 20] [--templates] [--waves 2] [--label NAME]
                                  [--out bench/results]

For every fleet size N it starts N sshd hosts (tests/fleet/fleet.py), writes a bucket with 5 jobs
(api, web, job2 on every worker; half1, half2 on every other worker; job2 and half2 form the second
wave through a command demand; --waves 1 drops the demand), builds it, and measures with the same forks, in one run:
  (a) first deploy (the workers' bucket folder wiped before each repetition),
  (b) no-change redeploy,
  (c) a content change of `api` (every worker, max_concurrent_upgrades 1 = N batches of one),
      reported as the total and per batch, both total/N and (c - b)/N (the marginal cost of a batch),
  (F) baseline `ansible maand_workers -m ansible.builtin.ping` on the same inventory,
  (G) baseline playbook: one ansible.posix.synchronize of one job tree + one command per host.
Each figure is the wall time of a whole ansible(-playbook) process, as a user sees it. Every run also
counts its host-task results (ok + failed + skipped + unreachable from the PLAY RECAP, or the result
lines of the ad-hoc ping) so a growth of N^2 is visible. Cheap figures (b, F, G) are the median of
--runs repetitions, interleaved so load drifts hit them alike; (a) and (c) take --big-runs.

Every ssh of every run goes through bench/relay.py (the inventory's ProxyCommand, in
<bucket>/group_vars/all.yml), which delays each direction by D ms for every D of --delay-ms (one fleet
per size, all delays on it) and counts TCP connections and round trips; the fleet's sshd logs (LogLevel
VERBOSE) count logins and sessions (bench/wire.py). Each run starts without an open ssh master (its own
ControlPath folder). The controller's peak memory is the peak PSS of the run's process tree
(bench/memory.py). Ratios (issue 25's goals): (b)/(F) <= 1, (a)/(G) <= 1, time between batches of (c) at
the largest N over the smallest <= 1.2, sessions per host of (a) <= (G)'s + 1.
With --baseline, a second checkout (e.g. `git worktree add /work/wt/base main`) is measured in the same
run on the same fleets, its (a), (b), (c) interleaved with those of --collection, beside one set of (F), (G);
the markdown then starts with a side-by-side table. Writes <out>/deploy-<label>.json and .md. Every fleet is torn down by its pid files
(tests/fleet/fleet.py down), also on failure.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
FLEET = REPO / "tests" / "fleet" / "fleet.py"

from tests.integration.deploy.bucket import MAKEFILE, add_job, write  # noqa: E402
from bench.memory import PeakMemory  # noqa: E402
from bench.wire import RELAY, Wire  # noqa: E402

PING_PATTERN = "maand_workers"
BASELINE_G = """---
- name: Baseline G - one synchronize of one job tree and one command per host
  hosts: maand_workers
  gather_facts: false
  tasks:
    - name: Sync one job tree
      ansible.posix.synchronize:
        src: "{{ bench_job_src }}"
        dest: /opt/bench-g/
        use_ssh_args: true  # rsync's ssh goes through the relay too (its own login: no ControlPath)
    - name: Run one command in it
      ansible.builtin.command:
        cmd: make start
        chdir: /opt/bench-g/api
      changed_when: true
"""
# The test jobs' Makefile, with a wall-clock stamp on every lifecycle line of logs/events.log: the spacing of
# api's restarts across the workers gives the cost of one rolling batch whatever the engine prints.
STAMPED_MAKEFILE = MAKEFILE.replace('echo "$(1) $(CURRENT_VERSION) $(NEW_VERSION)" >> $(LOG)',
                                    'echo "$(1) $(CURRENT_VERSION) $(NEW_VERSION) $$(date +%s.%N)" >> $(LOG)')
assert STAMPED_MAKEFILE != MAKEFILE, "tests/integration/deploy/bucket.py MAKEFILE changed; update the stamp"
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)
ADHOC = re.compile(r"^\S+ \| (SUCCESS|CHANGED|FAILED!?|UNREACHABLE!?)", re.M)


@dataclass
class Run:
    seconds: float
    results: int  # host-task results of the run (0 when it was stopped at the time limit)
    changed: int
    complete: bool = True
    batches: int = 0  # (c): api restarts seen on the workers
    batch_interval_s: float = 0.0  # (c): (last restart - first restart) / (restarts - 1)
    per_host: dict = field(default_factory=dict)  # logins, sessions, connections, round_trips (bench/wire.py)
    max_sessions: int = 0  # of the busiest host
    max_round_trips: int = 0
    peak_mb: float = 0.0  # peak PSS of the run's process tree (relays excluded)
    processes: int = 0  # in the tree at that peak
    peak_breakdown: dict = field(default_factory=dict)  # {kind: [PSS MB, processes, private MB]} at that peak (bench/memory.py)


@dataclass
class Series:
    runs: list = field(default_factory=list)

    @property
    def median(self):
        return statistics.median(r.seconds for r in self.runs)

    @property
    def results(self):
        return self.runs[0].results if self.runs else 0

    def as_json(self):
        per_host = {k: statistics.median(r.per_host.get(k, 0) for r in self.runs)
                    for k in ("logins", "sessions", "connections", "round_trips")}
        unreported = sum(r.per_host.get("unreported_relays", 0) for r in self.runs)
        if unreported:
            per_host["unreported_relays"] = unreported
        return {"median_s": round(self.median, 3), "results": self.results, "per_host": per_host,
                "peak_mb": max(r.peak_mb for r in self.runs), "runs": [asdict(r) for r in self.runs]}


class Bench:
    """One fleet size: fleet, bucket, and the commands to time."""

    def __init__(self, n, work: Path, collections: Path, forks: int):
        self.n, self.work, self.collections, self.forks = n, work, collections, forks
        self.state = work / "fleet"
        self.bucket = work / "bucket"
        self.hosts = []
        self.bucket_id = None
        self.templates = False
        self.waves = 2  # 1: no command demands, every job in one wave
        self.wire = None
        self.changes = 0  # content changes of api so far (each (c) needs a new one)
        self.persist = None  # ControlPersist of every run (None: the repository's ansible.cfg, 60s)

    def env(self):
        e = dict(os.environ)
        e["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
        e["ANSIBLE_COLLECTIONS_PATH"] = str(self.collections)
        e["ANSIBLE_FORKS"] = str(self.forks)
        e["ANSIBLE_FORCE_COLOR"] = "0"
        e["ANSIBLE_NOCOLOR"] = "1"
        e["ANSIBLE_STDOUT_CALLBACK"] = "default"
        e["ANSIBLE_PYTHON_INTERPRETER"] = "/usr/bin/python3"
        if self.persist:
            e["ANSIBLE_SSH_ARGS"] = ssh_args(self.persist)
        return e

    def run(self, cmd, expect_changed=None, what="", limit=None):
        """One timed run; its wire counts and peak memory in the Run."""
        env, started = self.wire.start()
        try:
            run, proc = self._run(cmd, dict(self.env(), **env), limit)
        finally:
            counts = self.wire.finish(started)
        if counts.logins != counts.connections:  # an ssh that bypassed the relay (or a relay that never reported)
            raise SystemExit("%s: %d ssh logins on the hosts but %d connections through the relay" % (
                what, counts.logins, counts.connections))
        run.per_host = counts.per_host(self.n)
        run.max_sessions, run.max_round_trips = counts.max_sessions, counts.max_round_trips
        if proc is not None:
            self._check(run, proc, expect_changed, what)
        return run

    def _run(self, cmd, env, limit):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        with PeakMemory(proc.pid, skip=str(RELAY)) as peak:
            try:
                stdout, stderr = proc.communicate(timeout=limit)
            except subprocess.TimeoutExpired:  # stop it as Ctrl-C would (Ansible stops its workers), then hard
                elapsed = time.perf_counter() - t0
                proc.send_signal(signal.SIGINT)
                try:
                    proc.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()
                return Run(round(elapsed, 3), 0, 0, complete=False, peak_mb=peak.mb, processes=peak.processes,
                           peak_breakdown=peak.breakdown), None
        elapsed = time.perf_counter() - t0
        run = Run(round(elapsed, 3), 0, 0, peak_mb=peak.mb, processes=peak.processes, peak_breakdown=peak.breakdown)
        return run, subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)

    @staticmethod
    def _check(run, proc, expect_changed, what):
        """Fail on a failed run or an unexpected changed count; fill in the run's host-task results."""
        if proc.returncode != 0:
            raise SystemExit("%s failed (rc=%d): %s\n%s" % (what, proc.returncode, " ".join(proc.args),
                                                            proc.stdout[-4000:] + proc.stderr[-2000:]))
        recap = RECAP.findall(proc.stdout)
        if recap:
            results = sum(int(ok) + int(unr) + int(failed) + int(skipped) for _h, ok, _c, unr, failed, skipped in recap)
            changed = sum(int(c) for _h, _o, c, _u, _f, _s in recap)
        else:  # ad-hoc: one result line per host
            lines = ADHOC.findall(proc.stdout)
            results, changed = len(lines), sum(1 for s in lines if s == "CHANGED")
        if expect_changed is not None and bool(changed) != expect_changed:
            raise SystemExit("%s: unexpected changed=%d\n%s" % (what, changed, proc.stdout[-3000:]))
        run.results, run.changed = results, changed

    def up(self):
        proc = subprocess.run([sys.executable, str(FLEET), "up", "--state-dir", str(self.state), "--hosts", str(self.n),
                               "--name", "bd%d-%d" % (self.n, os.getpid() % 1000), "--log-level", "VERBOSE"],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit("fleet up (%d hosts) failed: %s" % (self.n, proc.stderr[-2000:]))
        self.hosts = json.loads(proc.stdout)
        if len(self.hosts) != self.n:
            raise SystemExit("fleet up returned %d hosts, wanted %d" % (len(self.hosts), self.n))
        state = json.loads((self.state / "fleet.json").read_text())
        self.wire = Wire(state["hosts"], self.work)

    def down(self):
        proc = subprocess.run([sys.executable, str(FLEET), "down", "--state-dir", str(self.state)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print("WARNING: fleet down failed: %s" % proc.stderr[-2000:], file=sys.stderr)

    def write_bucket(self):
        b = self.bucket
        write(b / "maand.yml", "plugin: maand.core.workspace\n")
        write(b / "maand.conf", 'job_config_selector = ""\n')
        write(b / "workspace" / "bucket.conf", 'port_min = "30000"\nport_max = "39999"\n')
        workers = [{"host": h["address"], "labels": ["worker"] + (["half"] if i % 2 == 0 else [])}
                   for i, h in enumerate(self.hosts)]
        write(b / "workspace" / "workers.json", json.dumps(workers, indent=2) + "\n")
        subprocess.run([sys.executable, str(FLEET), "bucket-key", "--state-dir", str(self.state), "--bucket", str(b)],
                       check=True, capture_output=True, text=True)
        ready = {"command_ready": {"executed_on": ["cli"]}}

        def after(job):
            if self.waves == 1:
                return {"command_after": {"executed_on": ["cli"]}}
            return {"command_after": {"executed_on": ["cli"],
                                      "demands": {"job": job, "command": "command_ready"}}}

        script = "print('command')\n"  # build refuses a command without its script (as maand)
        ready_py = {"_modules/command_ready.py": script}
        after_py = {"_modules/command_after.py": script}
        if self.templates:  # every job renders 2 templates per allocation from the KV
            ready_py = dict(ready_py, **TEMPLATES)
            after_py = dict(after_py, **TEMPLATES)
        add_job(b, "api", files={"conf/api.conf": "threads=0\n", **ready_py}, makefile=STAMPED_MAKEFILE,
                commands=ready)
        add_job(b, "web", files={"conf/site.conf": "listen=80\n", "static/index.html": "<h1>v1</h1>\n"},
                restart_policy="reload", restart_globs=["conf/*.conf"], max_concurrent_upgrades=2)
        add_job(b, "job2", files={"app.txt": "job 2\n", "bin.sh": "#!/bin/sh\necho hi\n", **after_py}, commands=after("api"))
        add_job(b, "half1", files={"app.txt": "half 1\n", **ready_py}, selectors=["half"], commands=ready)
        add_job(b, "half2", files={"app.txt": "half 2\n", **after_py}, selectors=["half"], commands=after("half1"))

    def build(self):
        run = self.run(["ansible-playbook", "-i", str(self.bucket / "maand.yml"), "maand.core.build",
                        "-e", "maand_bucket=%s" % self.bucket], what="build")
        catalog = json.loads((self.bucket / "data" / "catalog.json").read_text())
        self.bucket_id = catalog["bucket_id"]
        return run, catalog

    def deploy(self, expect_changed, limit=None):
        return self.run(["ansible-playbook", "-i", str(self.bucket / "maand.yml"), "maand.core.deploy"],
                        expect_changed=expect_changed, what="deploy", limit=limit)

    def wipe_workers(self):
        for h in self.hosts:
            shutil.rmtree(Path(h["opt_dir"]) / "worker", ignore_errors=True)

    def ping(self):
        return self.run(["ansible", "-i", str(self.bucket / "maand.yml"), PING_PATTERN, "-m", "ansible.builtin.ping"],
                        expect_changed=False, what="ping")

    def baseline_g(self, playbook):
        for h in self.hosts:
            shutil.rmtree(Path(h["opt_dir"]) / "bench-g", ignore_errors=True)
        return self.run(["ansible-playbook", "-i", str(self.bucket / "maand.yml"), str(playbook),
                         "-e", "bench_job_src=%s" % (self.bucket / "workspace" / "jobs" / "api")],
                        expect_changed=True, what="baseline G")

    def api_restart_stamps(self, since):
        stamps = []
        for h in self.hosts:
            log_file = Path(h["opt_dir"]) / "worker" / self.bucket_id / "jobs" / "api" / "logs" / "events.log"
            if log_file.exists():
                for line in log_file.read_text().splitlines():
                    parts = line.split()
                    if parts and parts[0] == "restart" and float(parts[-1]) >= since:
                        stamps.append(float(parts[-1]))
        return sorted(stamps)


# --templates: a .tpl and a .j2 in every job (rendered per allocation by the deploy, issue 10)
TEMPLATES = {
    "config.json.tpl": '{"bucket": "{{ get "maand/bucket" "bucket_id" }}", "worker": "{{ .WorkerIP }}", '
                       '"index": "{{ get (printf "maand/job/%s/worker/%s" .Job .WorkerIP) (printf "%s_allocation_index" .Job) }}", '
                       '"peers": "{{ get (printf "maand/job/%s/worker/%s" .Job .WorkerIP) "peer_workers" }}"}\n',
    "app.env.j2": "JOB={{ Job }}\nWORKERS={{ kv['maand/job/' ~ Job]['workers'] }}\nVERSION={{ NewVersion }}\n",
}


def ssh_args(persist):
    """The repository's ansible.cfg ssh_args with ControlPersist=persist (what maand.core.init's ansible.cfg sets)."""
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(REPO / "ansible.cfg")
    return re.sub(r"ControlPersist=\S+", "ControlPersist=%s" % persist, cfg["ssh_connection"]["ssh_args"])


def measure(n, runs, args, engines):
    """One fleet of n hosts, every delay of args.delays on it: yields [result of one (n, delay, engine)] per delay.
    engines: [(label, collections folder)], measured on the same fleet, interleaved (the last one also runs
    the build and the baselines)."""
    work = Path(tempfile.mkdtemp(prefix="maand-bench-deploy-%d-" % n))
    b = Bench(n, work, engines[-1][1], args.forks)
    b.engines = engines
    b.templates = args.templates
    b.waves = args.waves
    b.persist = args.control_persist
    try:
        b.up()
        b.write_bucket()
        build, catalog = b.build()
        playbook = work / "baseline_g.yml"
        playbook.write_text(BASELINE_G)
        for delay in args.delays:
            b.wire.group_vars(b.bucket, delay)
            log("N=%d D=%s ms" % (n, delay))
            yield [dict(entry, engine=engine, hosts=n, delay_ms=delay, build_s=build.seconds,
                        allocations=len(catalog.get("allocations", [])))
                   for engine, entry in measure_delay(b, runs, args, playbook)]
    finally:
        b.down()
        shutil.rmtree(work, ignore_errors=True)


def measure_delay(b, runs, args, playbook):
    """[(engine label, result)]: every engine's (a), (b), (c) interleaved with the others' on this fleet and
    delay, beside the same (F) and (G) runs."""
    n = b.n
    engines = b.engines
    last = engines[-1][1]
    first = {e: Series() for e, _c in engines}
    nochange = {e: Series() for e, _c in engines}
    change = {e: Series() for e, _c in engines}
    ping, base_g = Series(), Series()
    for dummy in range(args.big_runs):
        for engine, coll in engines:
            b.collections = coll
            b.wipe_workers()
            first[engine].runs.append(b.deploy(expect_changed=True))
            log("  [%s] (a) first deploy %s" % (engine, brief(first[engine].runs[-1])))
    for dummy in range(runs):  # interleaved, so load drifts hit all of them alike
        for engine, coll in engines:
            b.collections = coll
            nochange[engine].runs.append(b.deploy(expect_changed=False))
            log("  [%s] (b) %s" % (engine, brief(nochange[engine].runs[-1])))
        b.collections = last
        ping.runs.append(b.ping())
        base_g.runs.append(b.baseline_g(playbook))
        log("  (F) %s\n  (G) %s" % (brief(ping.runs[-1]), brief(base_g.runs[-1])))
    stopped = set()
    for dummy in range(args.big_runs):
        for engine, coll in engines:
            if engine in stopped:
                continue
            run = change_run(b, coll, args)
            change[engine].runs.append(run)
            log("  [%s] (c) rolling change %s%s, %d batches, %.2fs between batches" % (
                engine, brief(run), "" if run.complete else " (stopped at the limit)", run.batches,
                run.batch_interval_s))
            if not run.complete:
                stopped.add(engine)  # no more repetitions of it (the next deploy takes over its stale lock)
    return [(e, phase_result(first[e], nochange[e], change[e], ping, base_g, n)) for e, _c in engines]


def change_run(b, coll, args):
    """(c): a new content of api, built, then rolled out by the engine in coll."""
    n = b.n
    b.collections = coll
    b.changes += 1
    write(b.bucket / "workspace" / "jobs" / "api" / "conf" / "api.conf", "threads=%d\n" % b.changes)
    b.build()
    since = time.time()
    run = b.deploy(expect_changed=True, limit=args.change_limit or None)
    stamps = b.api_restart_stamps(since)
    run.batches = len(stamps)
    run.batch_interval_s = round((stamps[-1] - stamps[0]) / (len(stamps) - 1), 3) if len(stamps) > 1 else 0.0
    if run.complete and run.batches != n:
        raise SystemExit("(c) restarted api on %d of %d workers" % (run.batches, n))
    return run


def phase_result(first, nochange, change, ping, base_g, n):
    out = {"a_first": first.as_json(), "b_nochange": nochange.as_json(), "c_change": change.as_json(),
           "F_ping": ping.as_json(), "G_sync_command": base_g.as_json()}
    complete = [r for r in change.runs if r.complete]
    out["c_complete"] = bool(complete)
    out["c_per_batch_s"] = round(statistics.median(r.seconds for r in complete) / n, 4) if complete else None
    out["c_batch_interval_s"] = statistics.median(r.batch_interval_s for r in change.runs)
    out["c_marginal_per_batch_s"] = (round((statistics.median(r.seconds for r in complete) - nochange.median) / n, 4)
                                     if complete else None)
    out["ratio_b_F"] = round(nochange.median / ping.median, 3)
    out["ratio_a_G"] = round(first.median / base_g.median, 3)
    return out


def brief(run):
    w = run.per_host
    return "%.1fs, %d results, per host: %s logins, %s sessions, %s round trips; peak %.0f MB" % (
        run.seconds, run.results, w.get("logins"), w.get("sessions"), w.get("round_trips"), run.peak_mb)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def collection_info(path: Path):
    def git(*a):
        p = subprocess.run(["git", "-C", str(path), *a], capture_output=True, text=True, check=False)
        return p.stdout.strip()
    return {"path": str(path), "commit": git("rev-parse", "--short", "HEAD"), "subject": git("log", "-1", "--format=%s"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def fmt(value, unit=" s", digits=1):
    return "-" if value is None else ("%.*f%s" % (digits, value, unit))


PHASES = (("a_first", "(a) first"), ("b_nochange", "(b) no-change"), ("c_change", "(c) change"), ("F_ping", "(F) ping"),
          ("G_sync_command", "(G) sync+cmd"))


def engines_of(result):
    return result.get("engines") or [{"label": result["label"], "collection": result["collection"]}]


def markdown(result):
    engines = engines_of(result)
    lines = ["Deploy benchmark `%s`, %s, %s cores, forks %d, ControlPersist %s, %d wave(s), medians of %s runs for "
             "(b)/(F)/(G), %d for (a)/(c); "
             "engines measured on the same fleets, interleaved: %s. "
             "Every ssh through bench/relay.py delaying each direction by D ms; wire counts per host: logins and "
             "sessions from the hosts' sshd logs, round trips (request/response turns, handshakes included) from the "
             "relay; peak memory = peak PSS of the run's process tree. Load average after each size: %s." % (
                 result["label"], result["date"], result["cores"], result["forks"],
                 result.get("control_persist", "60s"), result.get("waves", 2), args_runs(result),
                 result["big_runs"], ", ".join(engine_name(e) for e in engines),
                 "; ".join("N=%d D=%s: %s" % (s["hosts"], s.get("delay_ms", 0), s.get("load_avg_after"))
                           for s in result["sizes"] if s.get("engine", engines[-1]["label"]) == engines[-1]["label"]))]
    if len(engines) > 1:
        lines += side_by_side(result, engines)
    for e in engines:
        mine = [s for s in result["sizes"] if s.get("engine", e["label"]) == e["label"]]
        lines += ["", "### `%s` (%s)" % (e["label"], e["collection"]["commit"])]
        lines += engine_tables(mine, [g for g in result["goals"] if g.get("engine", e["label"]) == e["label"]])
    return "\n".join(lines) + "\n"


def engine_name(e):
    info = e["collection"]
    return "`%s` = %s @ %s%s" % (e["label"], info["path"], info["commit"], " (dirty)" if info["dirty"] else "")


def side_by_side(result, engines):
    """One row per N and D: the engines' (a), (b), (c) beside the same run's (F) and (G), with counts."""
    labels = [e["label"] for e in engines]
    by = {(s["hosts"], s.get("delay_ms", 0), s.get("engine")): s for s in result["sizes"]}
    head = ("| D | N | " + " | ".join("(a) %s | (a)/(G) %s | (b)/(F) %s | (c) between batches %s" % (l, l, l, l)
                                      for l in labels)
            + " | (F) | (G) | sessions/host (a) %s | (b) | (c) | (F) | (G) |" % " vs ".join(labels))
    out = ["", "Side by side (seconds: medians; sessions per host from the sshd logs):", "", head,
           "|---:|---:|" + "---:|" * (4 * len(labels) + 7)]
    for delay, n in sorted({(s.get("delay_ms", 0), s["hosts"]) for s in result["sizes"]}):
        rows = [by.get((n, delay, l)) for l in labels]
        if not all(rows):
            continue
        cells = []
        for s in rows:
            cells += [fmt(s["a_first"]["median_s"]), "%.2f" % s["ratio_a_G"], "%.2f" % s["ratio_b_F"],
                      fmt(s["c_batch_interval_s"], digits=2)]
        last = rows[-1]

        def sess(key):
            return " vs ".join("%g" % s[key]["per_host"]["sessions"] for s in rows)
        cells += [fmt(last["F_ping"]["median_s"]), fmt(last["G_sync_command"]["median_s"]), sess("a_first"),
                  sess("b_nochange"), sess("c_change"), "%g" % last["F_ping"]["per_host"]["sessions"],
                  "%g" % last["G_sync_command"]["per_host"]["sessions"]]
        out.append("| %s | %d | %s |" % (delay, n, " | ".join(cells)))
    return out


def engine_tables(sizes_of_engine, goals_of_engine):
    lines = []
    by_delay = {}
    for s in sizes_of_engine:
        by_delay.setdefault(s.get("delay_ms", 0), []).append(s)
    for g in goals_of_engine:
        sizes = by_delay[g["delay_ms"]]
        lines += ["", "D = %s ms each way (+%s ms per round trip):" % (g["delay_ms"], 2 * g["delay_ms"]), "",
                  "| N | allocs | (a) first | (b) no-change | (c) change total | (c) between batches | (F) ping "
                  "| (G) sync+cmd | (b)/(F) | (a)/(G) | host-task results a / b / c / F / G | peak MB a / b / c / F / G |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        for s in sizes:
            c = s["c_change"]
            total = fmt(c["median_s"]) if s["c_complete"] else "stopped at %.0f s after %d of %d batches" % (
                c["runs"][0]["seconds"], c["runs"][0]["batches"], s["hosts"])
            lines.append("| %d | %d | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %d / %d / %s / %d / %d | %s |" % (
                s["hosts"], s["allocations"], fmt(s["a_first"]["median_s"]), fmt(s["b_nochange"]["median_s"]), total,
                fmt(s["c_batch_interval_s"], digits=2), fmt(s["F_ping"]["median_s"]),
                fmt(s["G_sync_command"]["median_s"]), s["ratio_b_F"], s["ratio_a_G"], s["a_first"]["results"],
                s["b_nochange"]["results"], c["results"] if s["c_complete"] else "-", s["F_ping"]["results"],
                s["G_sync_command"]["results"], " / ".join("%.0f" % s[k]["peak_mb"] for k, _l in PHASES)))
        lines += ["", "Per host, logins / sessions / round trips:", "",
                  "| N | " + " | ".join(label for _k, label in PHASES) + " |", "|---:|" + "---:|" * len(PHASES)]
        for s in sizes:
            lines.append("| %d | %s |" % (s["hosts"], " | ".join(
                "%(logins)g / %(sessions)g / %(round_trips)g" % s[k]["per_host"] for k, _l in PHASES)))
        lines += latency_cost(sizes, by_delay.get(0, []), g["delay_ms"])
        lines += ["", "Goals at D = %s ms: (b)/(F) <= 1 at every N: %s; (a)/(G) <= 1 at every N: %s; sessions per host "
                  "of (a) <= (G)'s + 1: %s; time between batches of (c) at N=%d over N=%d <= 1.2: %s (%s by (c)/N, %s by "
                  "((c)-(b))/N)." % (g["delay_ms"], yes(g["b_F_met"]), yes(g["a_G_met"]), yes(g["sessions_met"]),
                                     g["batch_hi"], g["batch_lo"], fmt(g["batch_ratio_interval"], "", 2) + " " + yes(g["batch_met"]),
                                     fmt(g["batch_ratio_total"], "", 2), fmt(g["batch_ratio_marginal"], "", 2))]
    return lines


def latency_cost(sizes, zero, delay_ms):
    """Rows of (seconds at D - seconds at D=0) / (2 D): the round trips on the critical path of a run."""
    base = {s["hosts"]: s for s in zero}
    rows = [s for s in sizes if s["hosts"] in base]
    if not delay_ms or not rows:
        return []
    out = ["", "Time added by the delay, in round trips ((seconds at D - seconds at D = 0) / 2D):", "",
           "| N | " + " | ".join(label for _k, label in PHASES) + " |", "|---:|" + "---:|" * len(PHASES)]
    for s in rows:
        out.append("| %d | %s |" % (s["hosts"], " | ".join(
            "%.0f" % ((s[k]["median_s"] - base[s["hosts"]][k]["median_s"]) / (2 * delay_ms / 1000.0)) for k, _l in PHASES)))
    return out


def args_runs(result):
    first = result["sizes"][0]
    return "/".join(str(s.get("runs", result["runs"])) for s in result["sizes"]
                    if s.get("delay_ms", 0) == first.get("delay_ms", 0) and s.get("engine") == first.get("engine"))


def yes(flag):
    return "met" if flag else "NOT met"


def ratio(hi, lo):
    return round(hi / lo, 3) if hi is not None and lo else None


def goals(sizes):
    """Issue 25's goals, one record per engine and delay."""
    out = []
    for engine, delay in sorted({(s.get("engine") or "", s.get("delay_ms", 0)) for s in sizes}):
        mine = sorted((s for s in sizes if s.get("delay_ms", 0) == delay and (s.get("engine") or "") == engine),
                      key=lambda s: s["hosts"])
        lo, hi = mine[0], mine[-1]
        interval = ratio(hi["c_batch_interval_s"], lo["c_batch_interval_s"])
        out.append({"engine": engine, "delay_ms": delay, "b_F_met": all(s["ratio_b_F"] <= 1 for s in mine),
                    "a_G_met": all(s["ratio_a_G"] <= 1 for s in mine),
                    "sessions_met": all(s["a_first"]["per_host"]["sessions"] <= s["G_sync_command"]["per_host"]["sessions"] + 1
                                        for s in mine),
                    "batch_lo": lo["hosts"], "batch_hi": hi["hosts"], "batch_ratio_interval": interval,
                    "batch_ratio_total": ratio(hi["c_per_batch_s"], lo["c_per_batch_s"]),
                    "batch_ratio_marginal": ratio(hi["c_marginal_per_batch_s"], lo["c_marginal_per_batch_s"]),
                    "batch_met": interval is not None and interval <= 1.2})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collection", default=str(REPO), help="checkout of maand.core to measure (default: this repo)")
    ap.add_argument("--baseline", default=None,
                    help="another checkout (e.g. a worktree of main) measured in the same run, on the same fleets, "
                         "interleaved with --collection")
    ap.add_argument("--sizes", default="8,32,64", help="comma-separated fleet sizes")
    ap.add_argument("--delay-ms", default="0", help="comma-separated relay delays (ms, each direction), all on each fleet")
    ap.add_argument("--runs", default="3", help="repetitions of (b), (F), (G): one number, or one per size (3,3,1)")
    ap.add_argument("--big-runs", type=int, default=1, help="repetitions of (a) and (c)")
    ap.add_argument("--forks", type=int, default=20)
    ap.add_argument("--change-limit", type=float, default=0,
                    help="stop (c) after this many seconds and report the batches done and their spacing (0: no limit)")
    ap.add_argument("--control-persist", default="15m",
                    help="ControlPersist of every run, engines and baselines alike (default 15m, what the ansible.cfg "
                         "of maand.core.init sets; '' keeps the repository's ansible.cfg, 60s, Ansible's default)")
    ap.add_argument("--waves", type=int, choices=(1, 2), default=2,
                    help="2: job2 and half2 form a second wave through a command demand; 1: no demand, one wave")
    ap.add_argument("--templates", action="store_true",
                    help="every job also holds a .tpl and a .j2 rendered per allocation (KV, peers, index)")
    ap.add_argument("--label", default=None, help="name of the result files (default: the collection's folder name)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"), help="folder for deploy-<label>.json/.md")
    args = ap.parse_args(argv)
    collection = Path(args.collection).resolve()
    if not (collection / "galaxy.yml").is_file():
        ap.error("--collection %s: no galaxy.yml there; pass a checkout of maand.core" % collection)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    try:
        args.delays = sorted({int(d) for d in args.delay_ms.split(",") if d.strip()})
    except ValueError:
        ap.error("--delay-ms %s: give whole milliseconds, e.g. 0,25" % args.delay_ms)
    if not args.delays or min(args.delays) < 0:
        ap.error("--delay-ms %s: give one or more delays >= 0" % args.delay_ms)
    counts = [int(r) for r in args.runs.split(",")]
    if len(counts) not in (1, len(sizes)):
        ap.error("--runs %s: give one number or one per size (%d)" % (args.runs, len(sizes)))
    runs = dict(zip(sizes, counts * len(sizes) if len(counts) == 1 else counts))
    label = args.label or collection.name
    checkouts = [collection]
    if args.baseline:
        baseline = Path(args.baseline).resolve()
        if not (baseline / "galaxy.yml").is_file():
            ap.error("--baseline %s: no galaxy.yml there; pass a checkout of maand.core" % baseline)
        checkouts.insert(0, baseline)
    engines, coll_dirs = [], []
    for checkout in checkouts:
        coll_dir = Path(tempfile.mkdtemp(prefix="maand-bench-collections-"))
        (coll_dir / "ansible_collections" / "maand").mkdir(parents=True)
        (coll_dir / "ansible_collections" / "maand" / "core").symlink_to(checkout)
        coll_dirs.append(coll_dir)
        info = collection_info(checkout)
        engines.append({"label": "baseline" if len(engines) < len(checkouts) - 1 else "this", "collection": info})
    if len(engines) == 1:
        engines[0]["label"] = label
    result = {"label": label, "collection": engines[-1]["collection"], "engines": engines,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "cores": os.cpu_count(), "machine": platform.platform(), "forks": args.forks, "runs": args.runs,
              "big_runs": args.big_runs, "control_persist": args.control_persist or "60s", "jobs": 5,
              "templates": args.templates, "waves": args.waves, "delays_ms": args.delays, "sizes": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        for n in sizes:
            t0 = time.time()
            log("N=%d: measuring %s" % (n, collection))
            for entries in measure(n, runs[n], args, [(e["label"], d) for e, d in zip(engines, coll_dirs)]):
                for entry in entries:
                    entry.update(runs=runs[n], load_avg_after=[round(x, 2) for x in os.getloadavg()],
                                 elapsed_s=round(time.time() - t0))
                    result["sizes"].append(entry)
                md = save(result, out, label)  # after every size and delay, so a long run leaves what it finished
            log("N=%d: done in %.0fs" % (n, time.time() - t0))
    finally:
        for coll_dir in coll_dirs:
            shutil.rmtree(coll_dir, ignore_errors=True)
    print(md)
    return 0


def save(result, out, label):
    result["goals"] = goals(result["sizes"])
    (out / ("deploy-%s.json" % label)).write_text(json.dumps(result, indent=2) + "\n")
    md = markdown(result)
    (out / ("deploy-%s.md" % label)).write_text(md)
    return md


if __name__ == "__main__":
    sys.exit(main())
