"""Template rendering benchmark (issue 10, "Speed").

    python3 bench/bench_templates.py [--allocations 1000] [--runs 5] [--json]

Renders 3 job templates (maand's docs examples: the KV end-to-end config.json.tpl, the postgres
memory-sizing template, and a Makefile.tpl) for every allocation of a synthetic bucket with
maand.core's Go template engine and maand's function map (_kv.render_allocation), hashes every
output (sha256, as deploy's content hash does), and reports the median wall time per allocation.
Baseline, measured in the same run: the same three templates written in Jinja2 and rendered over
the same values (the cost Ansible users already pay for .j2 files). Quote medians and the ratio.

The deploy case (``stage_*``) runs the deploy's own path (_deploy_stage.compute) on a job folder
holding those 3 templates and 3 plain files, over a catalog of N allocations on N workers: read the
job once, render + hash every allocation in memory (the plan's content), then the plan itself for a
no-change redeploy (every worker reports the same hashes: every allocation is skipped, none staged),
and, for a changed value, writing one allocation's staged tree (hard links + rendered files).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
import conftest  # noqa: E402,F401 pylint: disable=unused-import # makes the collection importable

import jinja2  # noqa: E402

import tempfile  # noqa: E402

from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan, stage as _stage  # noqa: E402
from ansible_collections.maand.core.plugins.plugin_utils.kv import functions as _functions  # noqa: E402

CONFIG = open(os.path.join(REPO, "tests", "data", "templates", "namespaces_e2e.json.tpl"), encoding="utf-8").read()
POSTGRES = """{{ define "pgMemUnit" -}}
{{- $mb := int . -}}
{{- if ge $mb 1024 -}}{{- div $mb 1024 -}}GB{{- else -}}{{- $mb -}}MB{{- end -}}
{{- end }}
{{- $memMB := int (get "vars/job/api" "memory") -}}
shared_buffers = {{ template "pgMemUnit" (div $memMB 4) }}
effective_cache_size = {{ template "pgMemUnit" (div (mul $memMB 3) 4) }}
work_mem = {{ min 128 (max 4 (div $memMB 64)) }}MB
"""
MAKEFILE = """PORT := {{ get "maand/bucket" "api_http_port" }}
INDEX := {{ get (printf "maand/job/api/worker/%s" .WorkerIP) "api_allocation_index" }}
{{ range $i, $w := split (get "maand/job/api" "workers") "," }}# peer {{ $i }} {{ $w }}
{{ end }}start:
\t./run --port $(PORT) --index $(INDEX) --version {{ .NewVersion }}
"""
J_CONFIG = """{
  "env": "{{ kv['vars/bucket']['environment'] }}",
  "service": "{{ kv['vars/job/api']['service_name'] }}",
  "listen": "{{ kv['maand/bucket']['api_http_port'] }}",
  "peers": "{{ kv['maand/job/api/worker/' ~ d.WorkerIP]['peer_workers'] }}",
  "version": "{{ d.NewVersion }}"
}"""
J_POSTGRES = """{%- macro unit(mb) -%}{%- if mb >= 1024 -%}{{ mb // 1024 }}GB{%- else -%}{{ mb }}MB{%- endif -%}{%- endmacro -%}
{%- set m = kv['vars/job/api']['memory'] | int -%}
shared_buffers = {{ unit(m // 4) }}
effective_cache_size = {{ unit(m * 3 // 4) }}
work_mem = {{ [128, [4, m // 64] | max] | min }}MB
"""
J_MAKEFILE = """PORT := {{ kv['maand/bucket']['api_http_port'] }}
INDEX := {{ kv['maand/job/api/worker/' ~ d.WorkerIP]['api_allocation_index'] }}
{% for w in kv['maand/job/api']['workers'].split(',') %}# peer {{ loop.index0 }} {{ w }}
{% endfor %}start:
\t./run --port $(PORT) --index $(INDEX) --version {{ d.NewVersion }}
"""


def synthetic(n):
    ips = ["10.%d.%d.%d" % (i // 65536, (i // 256) % 256, i % 256) for i in range(n)]
    kv = {"vars/bucket": {"environment": "prod"}, "maand/bucket": {"api_http_port": "30000"},
          "vars/job/api": {"service_name": "api", "memory": "8192"},
          "maand/job/api": {"workers": ",".join(ips[:5])}}
    for i, ip in enumerate(ips):
        kv["maand/job/api/worker/%s" % ip] = {"peer_workers": ",".join(ips[max(0, i - 2):i]),
                                              "api_allocation_index": str(i)}
    data = [_functions.AllocationData(Job="api", WorkerIP=ip, NewVersion="1.2.0", BucketID="b")
            for ip in ips]
    return kv, data


def run_go(kv, data):
    digests = []
    for d in data:
        for name, text in (("config.json.tpl", CONFIG), ("postgresql.conf.tpl", POSTGRES),
                           ("Makefile.tpl", MAKEFILE)):
            out = _functions.render_allocation(text, name, d, kv)
            digests.append(hashlib.sha256(out.encode()).hexdigest())
    return digests


def run_jinja(kv, data, env):
    templates = [env.from_string(t) for t in (J_CONFIG, J_POSTGRES, J_MAKEFILE)]
    digests = []
    for d in data:
        for tmpl in templates:
            out = tmpl.render(kv=kv, d=d)
            digests.append(hashlib.sha256(out.encode()).hexdigest())
    return digests


def stage_fixture(root, n):
    """A bucket folder with job api (3 templates + 3 plain files) and a catalog of n allocations."""
    job = os.path.join(root, "workspace", "jobs", "api")
    os.makedirs(os.path.join(job, "conf"))
    for rel, text in (("config.json.tpl", CONFIG), ("postgresql.conf.tpl", POSTGRES), ("Makefile.tpl", MAKEFILE),
                      ("manifest.json", "{}"), ("conf/static.conf", "threads = 4\n" * 50), ("run.sh", "#!/bin/sh\n")):
        with open(os.path.join(job, rel), "w", encoding="utf-8") as handle:
            handle.write(text)
    kv, data = synthetic(n)
    catalog = {"bucket_id": "b", "workers": [{"host": d.WorkerIP, "labels": ["worker"], "position": i}
                                             for i, d in enumerate(data)],
               "jobs": [{"name": "api", "version": "1.2.0", "path": "workspace/jobs/api", "ports": {"api_http_port": 30000},
                         "restart_policy": "always", "health_check": {}}],
               "allocations": [{"job": "api", "worker": d.WorkerIP, "alloc_id": "a-%d" % i, "state": "active"}
                               for i, d in enumerate(data)]}
    return catalog, kv, [d.WorkerIP for d in data]


def run_stage(root, catalog, kv, hosts):
    return _stage.compute(root, catalog, ["api"], hosts, kv=(kv, None))


def no_change_states(staging, hosts):
    allocs = staging.content["api"]["allocations"]
    return {h: {"reachable": True, "trees": ["api"], "worker": {"update_seq": 1},
                "deployed": {"api": _plan.state_record("api", "a", allocs[h], "1.2.0", True, 1)}}
            for h in hosts}


def stage_case(n, runs):
    with tempfile.TemporaryDirectory() as root:
        catalog, kv, hosts = stage_fixture(root, n)
        staging = run_stage(root, catalog, kv, hosts)
        assert not staging.errors and len(staging.allocations) == n, staging.errors[:3]
        states = no_change_states(staging, hosts)
        for st in states.values():  # the worker metadata as the plan wants it, so nothing but the jobs is compared
            st["jobs"] = None
        render = median_time(lambda: run_stage(root, catalog, kv, hosts), runs)

        def redeploy():
            plan = _plan.compute_plan(catalog, run_stage(root, catalog, kv, hosts).content, states, hosts)
            assert {r["action"] for r in plan["rows"]} == {"skip"}, plan["rows"][:2]
            return plan
        plan_s = median_time(redeploy, runs)
        one = median_time(lambda: staging.stage(root, "api", hosts[0]), runs)
    return {"stage_render_hash_s": round(render, 4), "stage_ms_per_allocation": round(render * 1000 / n, 3),
            "no_change_plan_s": round(plan_s, 4), "no_change_ms_per_allocation": round(plan_s * 1000 / n, 3),
            "staged_tree_write_ms_per_allocation": round(one * 1000, 3)}


def median_time(fn, runs):
    times = []
    for dummy in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allocations", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    kv, data = synthetic(args.allocations)
    env = jinja2.Environment(keep_trailing_newline=True)
    go = median_time(lambda: run_go(kv, data), args.runs)
    jj = median_time(lambda: run_jinja(kv, data, env), args.runs)
    result = {"allocations": args.allocations, "templates_per_allocation": 3, "runs": args.runs,
              "go_template_s": round(go, 4), "jinja2_s": round(jj, 4),
              "go_ms_per_allocation": round(go * 1000 / args.allocations, 3),
              "jinja2_ms_per_allocation": round(jj * 1000 / args.allocations, 3),
              "ratio_go_over_jinja2": round(go / jj, 2)}
    result.update(stage_case(args.allocations, args.runs))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print("%-26s %s" % (key, value))


if __name__ == "__main__":
    main()
