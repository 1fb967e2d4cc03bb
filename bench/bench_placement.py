"""Placement benchmark (issue 2 / issue 5).

Generates a synthetic bucket (10,000 workers, 1,000 jobs, 50 labels by default) and measures, in one run:
  1. in-process placement + validation (maand.core's _build.compute), median of N runs, wall and CPU time;
  2. peak memory of that computation (tracemalloc peak, and the max RSS of a fresh process doing it);
  3. `ansible-inventory --list` with the maand.core.workspace plugin versus the same hosts, groups and
     host vars from a static YAML inventory (the baseline), median of N runs each, and their ratio.
Goals: (1) under 1 s; (3) ratio at most 1.25. The machine is small and noisy: read the medians.
Usage: python3 bench/bench_placement.py [--constraints] [--runs 5] [--workers 10000 --jobs 1000]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
COLLECTIONS = os.path.join(REPO, ".collections")
sys.path.insert(0, HERE)
sys.path.insert(0, COLLECTIONS)

from gen_bucket import generate  # noqa: E402


def ensure_link():
    link = os.path.join(COLLECTIONS, "ansible_collections", "maand", "core")
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if not os.path.islink(link):
        os.symlink(REPO, link)


def timed(fn, runs):
    walls, cpus = [], []
    for dummy in range(runs):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), walls


def static_inventory(listing, path):
    """Write the plugin's --list output as a YAML inventory with the same hosts, groups and vars."""
    import yaml

    hostvars = listing["_meta"]["hostvars"]
    all_vars = listing.get("all", {}).get("vars", {})
    children = {}
    for group, data in listing.items():
        if group in ("_meta", "all", "ungrouped"):
            continue
        hosts = data.get("hosts", [])
        children[group] = {"hosts": {h: None for h in hosts}}
    first = children.setdefault("maand_workers", {"hosts": {}})
    for host, hv in hostvars.items():
        first["hosts"][host] = {k: v for k, v in hv.items() if k not in all_vars}
    doc = {"all": {"vars": all_vars, "children": children}}
    with open(path, "w") as handle:
        yaml.dump(doc, handle, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), default_flow_style=False)


def run_inventory(source, env):
    start = time.perf_counter()
    proc = subprocess.run(["ansible-inventory", "-i", source, "--list", "--output", os.devnull], env=env,
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit("ansible-inventory failed on %s:\n%s" % (source, proc.stderr[-3000:]))
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=10000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--labels", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--inventory-runs", type=int, default=1,
                        help="the static 10,000-host YAML baseline alone takes minutes per run")
    parser.add_argument("--constraints", action="store_true", help="RFC 31 + hardware on every job, count on 10%%")
    parser.add_argument("--skip-inventory", action="store_true")
    args = parser.parse_args()
    ensure_link()
    from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service

    with tempfile.TemporaryDirectory(prefix="maand-bench-") as tmp:
        bucket = os.path.join(tmp, "bucket")
        generate(bucket, args.workers, args.jobs, args.labels, constraints=args.constraints)
        result = _service.compute(bucket)
        if not result.report.ok:
            raise SystemExit("synthetic bucket is invalid:\n" + result.report.error_text()[:3000])
        allocations = len(result.catalog["allocations"])
        wall, cpu, walls = timed(lambda: _service.compute(bucket), args.runs)
        tracemalloc.start()
        _service.compute(bucket)
        dummy, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = subprocess.run(
            # VmHWM (peak RSS of this process image); ru_maxrss would include the parent's peak after fork+exec
            [sys.executable, "-c",
             "import sys; sys.path.insert(0, %r)\n"
             "hwm = lambda: [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
             "from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _build\n"
             "before = hwm()\n"
             "_build.compute(%r)\n"
             "print(before, hwm())" % (COLLECTIONS, bucket)],
            capture_output=True, text=True, check=True).stdout.split()
        variant = "with constraints" if args.constraints else "labels only"
        print("bucket: %d workers, %d jobs, %d labels (%s) -> %d allocations" % (
            args.workers, args.jobs, args.labels, variant, allocations))
        print("placement+validation: median %.3f s wall, %.3f s CPU over %d runs (runs: %s); goal < 1 s" % (
            wall, cpu, args.runs, ", ".join("%.3f" % w for w in walls)))
        print("peak memory: tracemalloc %.1f MB; process max RSS %.1f MB (%.1f MB after imports)" % (
            peak / 1e6, int(rss[1]) / 1024, int(rss[0]) / 1024))
        if args.skip_inventory:
            return
        if not _service.build(bucket).written:  # the inventory reads data/catalog.json
            raise SystemExit("the build of the synthetic bucket wrote no catalog")
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
                   ANSIBLE_INVENTORY_ENABLED="maand.core.workspace,yaml")
        source = os.path.join(bucket, "maand.yml")
        listing = json.loads(subprocess.run(["ansible-inventory", "-i", source, "--list"], env=env,
                                            capture_output=True, text=True, check=True).stdout)
        static = os.path.join(tmp, "static.yml")
        static_inventory(listing, static)
        plugin_times, static_times = [], []
        for dummy in range(args.inventory_runs):  # interleaved, so load spikes hit both sides
            plugin_times.append(run_inventory(source, env))
            static_times.append(run_inventory(static, env))
        p, s = statistics.median(plugin_times), statistics.median(static_times)
        print("ansible-inventory --list: plugin median %.2f s, static YAML median %.2f s, ratio %.2f (goal <= 1.25)" % (
            p, s, p / s))
        print("  plugin runs: %s; static runs: %s" % (", ".join("%.2f" % t for t in plugin_times), ", ".join("%.2f" % t for t in static_times)))


if __name__ == "__main__":
    main()
