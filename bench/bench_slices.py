"""Sliced deploys beside an unsliced one (issue 33 item 3), on the local SSH fleet with one real PostgreSQL state
store (root, Linux; not a test, never run by .ci/run):

    python3 bench/bench_slices.py [--hosts 16] [--slices 1,2,4] [--rounds 2] [--label L] [--out bench/results]

One fleet of --hosts sshd hosts (tests/fleet/fleet.py) and one bucket whose state is in PostgreSQL
(tests/fleet/pg.py), with the two jobs of tests/integration/test_slices_fleet.py: db (batches of --db-limit) and
web (batches of --web-limit, an http gate, a command that demands one of db: the second wave). Each round rolls a
new version of both jobs out once per slice count S: S ansible-runner jobs (`ansible-runner run`, each a process of
its own with its own private data dir, its own clone of the bucket and AWX's slice k of S of the synced inventory,
hosts sorted by name, hosts[k-1::S], served as a script) start at once with one awx_workflow_job_id. S = 1 holds the
whole inventory: the unsliced deploy, the baseline of the same run.

Reported per run: the wall time from the first start to the last end, each job's rc, and from the workers' span
logs (a line per start of each job, with its version) the fleet-wide concurrency: the most starts of a job open at
one instant against its limit, the violations (starts that began while the job's limit was already open) and the
wave order (db's last end before web's first begin). Writes <out>/slices-<label>.json and .md; the fleet and the
server are torn down by their pid files, also on failure.
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

from tests.fleet import fleet as fleet_mod  # noqa: E402
from tests.fleet.pg import PgServer, unavailable_reason  # noqa: E402
from tests.fleet.pytest_fleet import Fleet  # noqa: E402
from tests.integration.deploy.bucket import fleet_bucket, write  # noqa: E402
from tests.integration.test_runner import COLLECTIONS, PROJECT_CFG, WRAPPER  # noqa: E402
from tests.integration.test_slices_fleet import awx_slice, max_overlap, read_spans, set_jobs  # noqa: E402
from tests.integration.test_state_fleet import git  # noqa: E402


class Setup:
    """The fleet, the store, the origin repository and one private data dir per slice (up to max(slices))."""

    def __init__(self, work: Path, fleet: Fleet, pg: PgServer, slices: int, limits):
        self.work, self.limits, self.fleet, self.pg = work, limits, fleet, pg
        self.url = self.pg.database("maand_bench")
        self.origin = fleet_bucket(work / "origin", self.fleet.state_dir)
        with open(self.origin / "maand.conf", "a", encoding="utf-8") as handle:
            handle.write('state_url = "%s"\n' % self.url)
        self.jobs("1.0.0")
        write(self.origin / "deploy.yml", WRAPPER)
        write(self.origin / "ansible.cfg", PROJECT_CFG)
        write(self.origin / ".gitignore", "data/\nsecrets/\nlogs/\n")
        git(self.origin, "init", "-q", "-b", "main")
        git(self.origin, "add", "-A")
        git(self.origin, "commit", "-q", "-m", "the bucket")
        self.env = dict(os.environ, **self.pg.env, MAAND_KV_KEY_FILE=str(work / "kv.key"), ANSIBLE_NOCOLOR="1",
                        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS)
        self.pdds = []
        for k in range(slices):
            pdd = work / ("job%d" % k)
            subprocess.run(["git", "clone", "-q", str(self.origin), str(pdd / "project")], check=True)
            shutil.copytree(self.origin / "secrets", pdd / "project" / "secrets")
            self.pdds.append(pdd)
        self.workflow = 9000

    def jobs(self, version):
        set_jobs(self.origin, version, hold="0.3", db_limit=self.limits["db"], web_limit=self.limits["web"])

    def commit(self, version):
        self.jobs(version)
        git(self.origin, "commit", "-q", "-am", version)
        for pdd in self.pdds:
            git(pdd / "project", "pull", "-q", "--ff-only")
        self.build()

    def build(self):
        project = self.pdds[0] / "project"
        self.ansible(project, "maand.core.build", "-e", "maand_bucket=%s" % project)

    def ansible(self, project, playbook, *extra):
        proc = subprocess.run(["ansible-playbook", playbook, *extra], cwd=str(project), env=self.cfg_env(project),
                              capture_output=True, text=True, check=False, timeout=900)
        if proc.returncode != 0:
            raise SystemExit("%s failed:\n%s" % (playbook, (proc.stdout + proc.stderr)[-4000:]))
        return proc

    def cfg_env(self, project):
        return dict(self.env, ANSIBLE_CONFIG=str(project / "ansible.cfg"))

    def slice_inventories(self, n):
        """Each job's slice of the synced inventory. AWX syncs it once, in a container whose project path is the
        one every job's container has (/runner/project): here each job's folder differs, so each listing is made
        in its own (maand_bucket_dir, the one variable that names the folder, is the job's own, as under AWX)."""
        for k, pdd in enumerate(self.pdds[:n], 1):
            proc = subprocess.run(["ansible-inventory", "-i", "maand.yml", "--list", "--export"], cwd=str(pdd / "project"),
                                  env=self.cfg_env(pdd / "project"), capture_output=True, text=True, check=True)
            listing = json.loads(proc.stdout)
            inv = pdd / "inventory"
            shutil.rmtree(inv, ignore_errors=True)
            inv.mkdir()
            (inv / "listing.json").write_text(json.dumps(awx_slice(listing, k, n) if n > 1 else listing))
            script = inv / "hosts"
            script.write_text("#!/bin/sh\nif [ \"$1\" = --host ]; then echo '{}'; else cat '%s'; fi\n"
                              % (inv / "listing.json"))
            script.chmod(0o755)

    def run(self, n):
        """n ansible-runner jobs at once, one workflow: (wall seconds, [rc])."""
        self.workflow += 1
        self.slice_inventories(n)
        procs = []
        start = time.monotonic()
        for k, pdd in enumerate(self.pdds[:n], 1):
            extra = {"awx_workflow_job_id": self.workflow, "awx_job_id": self.workflow * 10 + k}
            envvars = {"ANSIBLE_CONFIG": str(pdd / "project" / "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
                       "ANSIBLE_NOCOLOR": "1"}
            write(pdd / "env" / "extravars", json.dumps(extra))
            write(pdd / "env" / "envvars", json.dumps(envvars))
            shutil.rmtree(pdd / "artifacts", ignore_errors=True)
            procs.append(subprocess.Popen(  # pylint: disable=consider-using-with
                ["ansible-runner", "run", str(pdd), "-p", "deploy.yml", "--inventory", str(pdd / "inventory" / "hosts")],
                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=1800)[0] for p in procs]
        wall = time.monotonic() - start
        rcs = [p.returncode for p in procs]
        for rc, out in zip(rcs, outs):
            if rc != 0:
                print(out[-3000:], file=sys.stderr)
        return wall, rcs

    def spans(self, job, version):
        """[(begin, end, host, version)] of the starts of job at version on the fleet."""
        bucket_id = json.loads(self.pg.psql("SELECT body FROM maand_documents WHERE name = 'catalog'",
                                            db="maand_bench"))["bucket_id"]
        return [s for s in read_spans(self.fleet, bucket_id, job) if s[3] == version]


def concurrency(spans, limit):
    """(the most spans open at once, the starts that began while limit spans were already open)."""
    violations = sum(sum(1 for b, e, *dummy in spans if b <= begin < e) > limit for begin, *dummy in spans)
    return max_overlap(spans), violations


def measure(setup, rounds, slice_counts, limits):
    runs = []
    for rnd in range(1, rounds + 1):
        for n in slice_counts:
            version = "%d.%d.0" % (rnd + 1, n)
            setup.commit(version)
            wall, rcs = setup.run(n)
            db, web = setup.spans("db", version), setup.spans("web", version)
            row = {"round": rnd, "slices": n, "version": version, "wall_s": round(wall, 2), "rcs": rcs,
                   "db_starts": len(db), "web_starts": len(web)}
            row["db_most"], row["db_violations"] = concurrency(db, limits["db"])
            row["web_most"], row["web_violations"] = concurrency(web, limits["web"])
            row["waves_in_order"] = bool(db and web and max(s[1] for s in db) < min(s[0] for s in web))
            print(json.dumps(row), flush=True)
            runs.append(row)
    return runs


def report(args, runs, limits):
    lines = ["Sliced deploy benchmark `%s`, %s UTC, %d cores: %d hosts, db in batches of %d and web of %d (the second "
             "wave), each run a rolling upgrade of both jobs on every host by S ansible-runner jobs started at once "
             "(AWX's slices of the synced inventory, one workflow id; S = 1: the unsliced deploy). Medians over %d "
             "round(s); violations: starts that began while the job's limit was already open, fleet-wide."
             % (args.label, time.strftime("%Y-%m-%d %H:%M", time.gmtime()), os.cpu_count(), args.hosts,
                limits["db"], limits["web"], args.rounds), "",
             "| slices | wall (median) | wall / unsliced | every job rc 0 | most db open / limit | most web open / limit "
             "| violations | waves in order | starts db / web |", "|---:|---:|---:|---|---:|---:|---:|---|---:|"]
    base = statistics.median(r["wall_s"] for r in runs if r["slices"] == min(r2["slices"] for r2 in runs))
    for n in sorted({r["slices"] for r in runs}):
        mine = [r for r in runs if r["slices"] == n]
        wall = statistics.median(r["wall_s"] for r in mine)
        lines.append("| %d | %.1f s | %.2f | %s | %d / %d | %d / %d | %d | %s | %s / %s |" % (
            n, wall, wall / base, all(rc == 0 for r in mine for rc in r["rcs"]), max(r["db_most"] for r in mine),
            limits["db"], max(r["web_most"] for r in mine), limits["web"],
            sum(r["db_violations"] + r["web_violations"] for r in mine), all(r["waves_in_order"] for r in mine),
            "/".join(str(r["db_starts"]) for r in mine), "/".join(str(r["web_starts"]) for r in mine)))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--slices", default="1,2,4", help="comma-separated slice counts (1: the unsliced deploy)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--db-limit", type=int, default=4)
    ap.add_argument("--web-limit", type=int, default=2)
    ap.add_argument("--label", default="slices")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args()
    reason = unavailable_reason()
    if reason:
        raise SystemExit(reason)
    counts = [int(x) for x in args.slices.split(",")]
    limits = {"db": args.db_limit, "web": args.web_limit}
    work = Path(tempfile.mkdtemp(prefix="maand-bench-slices-"))
    pg = None
    try:
        fleet = Fleet(fleet_mod.up(work / "fleet", args.hosts))
        pg = PgServer().start()
        setup = Setup(work, fleet, pg, max(counts), limits)
        setup.build()
        wall, rcs = setup.run(1)  # the first deploy (1.0.0), not measured: every run measured is an upgrade
        if rcs != [0]:
            raise SystemExit("the first deploy failed (rc %s)" % rcs)
        runs = measure(setup, args.rounds, counts, limits)
    finally:
        if pg is not None:
            pg.stop()
        if fleet_mod.load_state(work / "fleet") is not None:
            fleet_mod.down(work / "fleet")
        shutil.rmtree(work, ignore_errors=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / ("slices-%s.json" % args.label)).write_text(json.dumps({"args": vars(args), "runs": runs}, indent=1))
    text = report(args, runs, limits)
    (out / ("slices-%s.md" % args.label)).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
