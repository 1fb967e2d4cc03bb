"""State store benchmark: a no-change redeploy with the bucket folder as the store vs with PostgreSQL.
Not a test: never run by .ci/run. Root, Linux, the local SSH fleet and Debian's PostgreSQL.

    python3 bench/bench_state.py [--sizes 8,32] [--runs 5] [--forks 20] [--label state] [--out bench/results]

For every fleet size N it starts N sshd hosts and the bench_deploy.py bucket (5 jobs, two waves), builds
and deploys it with the file store, starts a PostgreSQL server (tests/fleet/pg.py: initdb + pg_ctl, loopback,
password through PGPASSWORD), copies the bucket's state into it with `maand.core.state`, and then times
no-change redeploys alternately with the file store (MAAND_STATE_URL unset) and with PostgreSQL
(MAAND_STATE_URL set), --runs of each, interleaved so load drifts hit both alike. Each figure is the
wall time of a whole ansible-playbook process. Goal: the PostgreSQL median within 1.2x the file one.
Writes <out>/state-<label>.json and .md. Fleet and server are torn down also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_deploy import Bench, collection_info, log  # noqa: E402
from tests.fleet.pg import PgServer, unavailable_reason  # noqa: E402

GOAL = 1.2


class StateBench(Bench):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.extra = {}

    def env(self):
        e = super().env()
        e.pop("MAAND_STATE_URL", None)
        e.update(self.extra)
        return e


def measure(n, runs, forks, collections, server):
    work = Path(tempfile.mkdtemp(prefix="maand-bench-state-%d-" % n))
    b = StateBench(n, work, collections, forks)
    try:
        b.up()
        b.write_bucket()
        b.wire.group_vars(b.bucket, 0)  # every ssh through bench/relay.py (bench_deploy counts them), no delay
        b.build()
        b.deploy(expect_changed=True)
        url = server.database()
        b.extra = dict(server.env)
        b.run(["ansible-playbook", "maand.core.state", "-e", "maand_bucket=%s" % b.bucket, "-e",
               "maand_state_to=%s" % url], what="move the state into PostgreSQL")
        files, pg = [], []
        for dummy in range(runs):
            b.extra = dict(server.env)
            files.append(b.deploy(expect_changed=False).seconds)
            b.extra = dict(server.env, MAAND_STATE_URL=url)
            pg.append(b.deploy(expect_changed=False).seconds)
        f_med, p_med = statistics.median(files), statistics.median(pg)
        return {"hosts": n, "runs": runs, "file_s": files, "postgresql_s": pg, "file_median_s": f_med,
                "postgresql_median_s": p_med, "ratio": round(p_med / f_med, 3),
                "load_avg_after": [round(x, 2) for x in os.getloadavg()]}
    finally:
        b.down()
        shutil.rmtree(work, ignore_errors=True)


def markdown(result):
    lines = ["State store benchmark `%s` (%s @ %s), %s, %s cores, forks %d: no-change redeploy, medians of the runs "
             "(file and PostgreSQL interleaved)." % (result["label"], result["collection"]["path"],
                                                     result["collection"]["commit"], result["date"], result["cores"],
                                                     result["forks"]), "",
             "| N | runs | file store | PostgreSQL store | PostgreSQL / file | load avg after |",
             "|---:|---:|---:|---:|---:|---|"]
    for s in result["sizes"]:
        lines.append("| %d | %d | %.1f s | %.1f s | %.2f | %s |" % (
            s["hosts"], s["runs"], s["file_median_s"], s["postgresql_median_s"], s["ratio"],
            " ".join("%.1f" % x for x in s["load_avg_after"])))
    met = all(s["ratio"] <= GOAL for s in result["sizes"])
    lines += ["", "Goal: PostgreSQL within %.1fx the file store at every N: %s." % (GOAL, "met" if met else "NOT met")]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,32")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--forks", type=int, default=20)
    ap.add_argument("--label", default="state")
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args(argv)
    reason = unavailable_reason()
    if reason:
        raise SystemExit("cannot run: %s" % reason)
    coll_dir = Path(tempfile.mkdtemp(prefix="maand-bench-collections-"))
    (coll_dir / "ansible_collections" / "maand").mkdir(parents=True)
    (coll_dir / "ansible_collections" / "maand" / "core").symlink_to(REPO)
    result = {"label": args.label, "collection": collection_info(REPO),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
              "machine": platform.platform(), "forks": args.forks, "sizes": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server = PgServer().start()
    try:
        for n in sorted(int(s) for s in args.sizes.split(",") if s.strip()):
            log("N=%d: measuring" % n)
            result["sizes"].append(measure(n, args.runs, args.forks, coll_dir, server))
            (out / ("state-%s.json" % args.label)).write_text(json.dumps(result, indent=2) + "\n")
            md = markdown(result)
            (out / ("state-%s.md" % args.label)).write_text(md)
            log(md)
    finally:
        server.stop()
        shutil.rmtree(coll_dir, ignore_errors=True)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
