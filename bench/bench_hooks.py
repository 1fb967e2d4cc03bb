"""Job command (hook) benchmark (issue 12).

    python3 bench/bench_hooks.py [--sizes 8,32,64] [--runs 5] [--json]

Runs one job command for every allocation of a synthetic bucket of N allocations on N workers, the
way deploy and maand.core.job_command run it (_hook_run.run_event: stage the job, start python3
with maand's environment, the script writes one KV key through the runtime API with the maand
module, which saves data/kv.json under the bucket lock), one allocation at a time and N at a time.
Baseline, measured in the same run: starting the same interpreter on an empty script N times (the
floor any per-allocation hook pays). Quote medians and ratios; the cost must grow linearly in N.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
import conftest  # noqa: E402,F401 pylint: disable=unused-import # makes the collection importable

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service  # noqa: E402
from ansible_collections.maand.core.plugins.plugin_utils.hooks import run as _run  # noqa: E402
from ansible_collections.maand.core.plugins.plugin_utils.hooks.runtime_api import RuntimeAPI  # noqa: E402
from tests.bucket_factory import make_bucket, write  # noqa: E402

SCRIPT = """\
import maand
maand.put_job_variable("seen_" + maand.allocation_index(), maand.allocation_ip()).raise_for_status()
"""


def bucket(root, n):
    workers = [{"host": "10.1.%d.%d" % (i // 250, i % 250 + 1), "labels": ["worker"]} for i in range(n)]
    path = make_bucket(root, workers, {"api": {"version": "1.0.0", "selectors": ["worker"],
                                               "commands": {"command_x": {"executed_on": ["cli"]}}}})
    write(os.path.join(path, "workspace", "jobs", "api", "_modules", "command_x.py"), SCRIPT)
    result = _service.build(path)
    assert result.report.ok, result.report
    with open(os.path.join(path, "data", "catalog.json"), encoding="utf-8") as handle:
        return path, json.load(handle)


def run_hooks(path, catalog, concurrency):
    with RuntimeAPI(path, catalog) as api:
        ctx = _run.Context(path, catalog, api, tempfile.mkdtemp(dir=os.path.join(path, "data")))
        start = time.perf_counter()
        outcome = _run.run_event(ctx, "api", "cli", concurrency=concurrency)
        took = time.perf_counter() - start
    assert outcome.ok, outcome.failures()
    return took


def baseline(n):
    start = time.perf_counter()
    for _n in range(n):
        subprocess.run(["python3", "-c", "pass"], check=True)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="8,32,64")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            path, catalog = bucket(os.path.join(tmp, "b"), n)
            serial = [run_hooks(path, catalog, 1) for _n in range(args.runs)]
            parallel = [run_hooks(path, catalog, n) for _n in range(args.runs)]
            base = [baseline(n) for _n in range(args.runs)]
        row = {"allocations": n, "serial_s": statistics.median(serial), "parallel_s": statistics.median(parallel),
               "baseline_s": statistics.median(base)}
        row["serial_per_alloc_ms"] = 1000 * row["serial_s"] / n
        row["ratio_serial_to_baseline"] = row["serial_s"] / row["baseline_s"]
        rows.append(row)
    if args.json:
        print(json.dumps({"load": os.getloadavg()[0], "runs": args.runs, "rows": rows}, indent=1))
        return
    print("| allocations | one at a time | all at once | baseline python3 -c pass x N | per allocation | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %d | %.3f s | %.3f s | %.3f s | %.1f ms | %.2f |" % (
            r["allocations"], r["serial_s"], r["parallel_s"], r["baseline_s"], r["serial_per_alloc_ms"],
            r["ratio_serial_to_baseline"]))


if __name__ == "__main__":
    main()
