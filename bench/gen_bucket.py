"""Generate a synthetic maand bucket for benchmarks: N workers, M jobs, L labels (seeded, reproducible).

Each worker carries 3 of the L labels, each job selects 2 of them, so a job lands on roughly
N * 3/L * 2/(L-1) workers (about 25 of 10,000) and a worker hosts a few jobs, as in real fleets.
Every job takes one port from the pool; every tenth job starts a new demand chain.
With --constraints, every job also carries an RFC 31 expression and hardware minimums, and
every tenth job places `count: 2` with least-waste.
"""

import argparse
import json
import os
import random


def generate(path, workers=10000, jobs=1000, labels=50, seed=7, constraints=False):
    rnd = random.Random(seed)
    names = ["l%02d" % i for i in range(labels)]
    ws = os.path.join(path, "workspace")
    os.makedirs(os.path.join(ws, "jobs"), exist_ok=True)
    os.makedirs(os.path.join(path, "secrets"), exist_ok=True)
    with open(os.path.join(path, "maand.conf"), "w") as handle:
        handle.write('ssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 22\nuse_sudo = false\n'
                     'job_config_selector = ""\n')
    with open(os.path.join(ws, "bucket.conf"), "w") as handle:
        handle.write('port_min = "20000"\nport_max = "39999"\n')
    fleet = []
    for i in range(workers):
        fleet.append({
            "host": "10.%d.%d.%d" % (i // 65536, (i // 256) % 256, i % 256),
            "labels": rnd.sample(names, 3),
            "memory": "%d gb" % rnd.choice((32, 64, 128)),
            "cpu": "%d mhz" % rnd.choice((16000, 32000)),
            "cores": rnd.choice((8, 16)),
            "storage": "%d gb" % rnd.choice((100, 500)),
            "tags": {"zone": "z%d" % (i % 3), "rack": "r%d" % (i % 40)},
        })
    with open(os.path.join(ws, "workers.json"), "w") as handle:
        json.dump(fleet, handle, indent=2)
    overrides = []
    for j in range(jobs):
        name = "job%04d" % j
        manifest = {
            "version": "1.%d.0" % (j % 7),
            "selectors": rnd.sample(names, 2),
            "resources": {
                "memory": {"min": "128 mb", "max": "512 mb"},
                "cpu": {"min": "100 mhz", "max": "500 mhz"},
                "ports": {"http_port": {}},
            },
            "commands": {"command_ready": {"executed_on": ["cli"]}},
        }
        if j % 10:
            manifest["commands"]["command_setup"] = {
                "executed_on": ["pre_deploy"],
                "demands": {"job": "job%04d" % (j - 1), "command": "command_ready", "config": {"min_version": "1.0"}},
            }
        if constraints:
            manifest["selectors"] = manifest["selectors"][:1]
            manifest["constraints"] = {"and": [
                # exclude a label other than the selector (excluding the selector would leave nothing)
                {"properties": ["^" + rnd.choice([n for n in names if n != manifest["selectors"][0]]),
                                "zone=z%d" % (j % 3)]},
                # one bracket group per hostlist expression (RFC 29); hosts are 10.0.<0-39>.<0-255>
                {"or": [{"properties": [rnd.choice(names)]}, {"hostlist": ["10.0.%d.[0-255]" % rnd.randrange(40)]},
                        {"ranks": ["%d-%d" % (start, start + workers // 10) for start in [rnd.randrange(workers)]]}]},
            ]}
            manifest["hardware"] = "mem=16G cores=8"
            if j % 10 == 0:
                manifest["placement"] = {"count": 2, "strategy": "least-waste"}
        job_dir = os.path.join(ws, "jobs", name)
        os.makedirs(job_dir, exist_ok=True)
        with open(os.path.join(job_dir, "manifest.json"), "w") as handle:
            json.dump(manifest, handle, indent=2)
        os.makedirs(os.path.join(job_dir, "_modules"), exist_ok=True)
        for command in manifest["commands"]:  # maand requires a script per command
            with open(os.path.join(job_dir, "_modules", command + ".py"), "w") as handle:
                handle.write("")
        with open(os.path.join(job_dir, "Makefile"), "w") as handle:
            handle.write("start:\n\ttrue\nstop:\n\ttrue\nrestart: stop start\n")
        if j % 4 == 0:
            overrides.append('[%s]\nmemory = "256 mb"\ncpu = "200 mhz"\n' % name)
    with open(os.path.join(ws, "bucket.jobs.conf"), "w") as handle:
        handle.write("\n".join(overrides))
    with open(os.path.join(path, "maand.yml"), "w") as handle:
        handle.write("plugin: maand.core.workspace\n")
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--workers", type=int, default=10000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--labels", type=int, default=50)
    parser.add_argument("--constraints", action="store_true")
    args = parser.parse_args()
    generate(args.path, args.workers, args.jobs, args.labels, constraints=args.constraints)
