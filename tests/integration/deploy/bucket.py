"""Build small maand buckets for deploy tests against the local fleet (e2e, Molecule, bench).

    python3 tests/integration/deploy/bucket.py --fleet-state DIR --bucket BUCKET [--jobs N] [--health]

writes BUCKET/{maand.yml, maand.conf, secrets/, workspace/...}. The test jobs' Makefiles append every
lifecycle call to logs/events.log and keep a counter in data/, so tests can see which targets ran and
that data/ and logs/ survived; `api` also serves HTTP (python3 -m http.server) for health gates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
FLEET = REPO / "tests" / "fleet" / "fleet.py"

# Every target logs "<target> <CURRENT_VERSION> <NEW_VERSION>" to logs/events.log and bumps data/<target>.count.
MAKEFILE = """\
.PHONY: start stop restart reload status
LOG = logs/events.log
define record
\tmkdir -p data logs
\techo "$(1) $(CURRENT_VERSION) $(NEW_VERSION)" >> $(LOG)
\techo $$(( $$(cat data/$(1).count 2>/dev/null || echo 0) + 1 )) > data/$(1).count
endef
start:
\t$(call record,start)
\techo running > data/status
stop:
\t$(call record,stop)
\techo stopped > data/status
restart:
\t$(call record,restart)
\techo running > data/status
reload:
\t$(call record,reload)
status:
\t@cat data/status
"""

# socketserver rather than `python3 -m http.server`: HTTPServer.server_bind does a reverse DNS lookup
# (socket.getfqdn), which stalls for seconds on hosts without a reachable resolver (the fleet's netns).
SERVER_PY = """\
import http.server, socketserver, sys


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


Server(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
"""

# A job with a real listener, for health gates: serves its own folder on PORT.
# (The trailing backslash in `serve` only splits the Python source line; the Makefile line is one line.)
SERVER_MAKEFILE = """\
.PHONY: start stop restart reload status
LOG = logs/events.log
PORT ?= {port}
define record
\tmkdir -p data logs
\techo "$(1) $(CURRENT_VERSION) $(NEW_VERSION)" >> $(LOG)
\techo $$(( $$(cat data/$(1).count 2>/dev/null || echo 0) + 1 )) > data/$(1).count
endef
define serve
\tif [ -f data/http.pid ] && kill -0 $$(cat data/http.pid) 2>/dev/null; then kill $$(cat data/http.pid); sleep 0.2; fi
\tif [ "$$(cat health_mode 2>/dev/null)" = "ok" ]; then \
setsid nohup /usr/bin/python3 server.py $(PORT) </dev/null >>logs/http.log 2>&1 & echo $$! > data/http.pid; fi
endef
start:
\t$(call record,start)
\t$(call serve)
\techo running > data/status
stop:
\t$(call record,stop)
\tif [ -f data/http.pid ]; then kill $$(cat data/http.pid) 2>/dev/null || true; rm -f data/http.pid; fi
\techo stopped > data/status
restart:
\t$(call record,restart)
\t$(call serve)
\techo running > data/status
reload:
\t$(call record,reload)
status:
\t@cat data/status
"""


def pid_makefile(job: str, command: str, before_start: str = "") -> str:
    """The Makefile of a job whose process is tracked by data/<job>.pid (command: its start line, run with
    setsid nohup, output to logs/<job>.log; before_start: recipe lines run first): `make status` exits 0
    only while that process runs, as the job scaffold's, so a deploy gate or health_check can fail fast."""
    return """\
.PHONY: start stop restart reload status
PID := data/{job}.pid
RUNNING = [ -f $(PID) ] && kill -0 "$$(cat $(PID))" 2>/dev/null
start:
\t@mkdir -p data logs
{before}\t@setsid nohup {command} </dev/null >>logs/{job}.log 2>&1 & echo $$! > $(PID)
stop:
\t@if $(RUNNING); then kill "$$(cat $(PID))"; fi; rm -f $(PID)
restart: stop start
reload: restart
status:
\t@if $(RUNNING); then echo "{job} running"; else echo "{job} not running"; exit 1; fi
""".format(job=job, command=command, before=before_start)


def manifest(version="1.0.0", **extra):
    data = {"version": version, "selectors": ["worker"]}
    data.update(extra)
    return json.dumps(data, indent=2) + "\n"


def write(path: Path, text: str, mode=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode:
        os.chmod(path, mode)


def add_job(bucket: Path, name: str, version="1.0.0", files=None, makefile=MAKEFILE, **manifest_fields):
    root = bucket / "workspace" / "jobs" / name
    write(root / "manifest.json", manifest(version, **manifest_fields))
    write(root / "Makefile", makefile)
    for rel, text in (files or {}).items():
        write(root / rel, text)
    return root


def fleet_bucket(bucket: Path, fleet_state: Path, conf='job_config_selector = ""\n', bucket_conf="",
                 labels="worker", memory=None, cpu=None):
    """A bucket without jobs for the fleet in fleet_state: maand.yml, maand.conf (conf), workspace/bucket.conf
    (bucket_conf, then the port pool 30000-39999), workspace/workers.json (`fleet.py workers-json` with
    labels and, when given, memory and cpu) and the fleet's SSH key (`fleet.py bucket-key`, which adds ssh_*
    to maand.conf)."""
    bucket = Path(bucket)
    bucket.mkdir(parents=True, exist_ok=True)
    write(bucket / "maand.yml", "plugin: maand.core.workspace\n")
    write(bucket / "maand.conf", conf)
    write(bucket / "workspace" / "bucket.conf", bucket_conf + 'port_min = "30000"\nport_max = "39999"\n')
    cmd = [sys.executable, str(FLEET), "workers-json", "--state-dir", str(fleet_state), "--labels", labels]
    if memory is not None:
        cmd += ["--memory", memory]
    if cpu is not None:
        cmd += ["--cpu", cpu]
    write(bucket / "workspace" / "workers.json", subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    subprocess.run([sys.executable, str(FLEET), "bucket-key", "--state-dir", str(fleet_state), "--bucket", str(bucket)],
                   check=True, capture_output=True, text=True)
    return bucket


def make_bucket(bucket: Path, fleet_state: Path, n_jobs=3, health=False, labels="worker", port=31001):
    """A bucket for the fleet in fleet_state: jobs api (+health), web (reload + restart_globs), job2.."""
    bucket = fleet_bucket(bucket, fleet_state, labels=labels)
    if health:
        add_job(bucket, "api", files={"health_mode": "ok\n", "conf/api.conf": "threads=4\n", "server.py": SERVER_PY},
                makefile=SERVER_MAKEFILE.format(port=port), max_concurrent_upgrades=1,
                resources={"ports": {"http_port": port}},
                health_check={"checks": [{"type": "tcp", "port": "http_port"},
                                         {"type": "http", "port": "http_port", "path": "/health_mode"}],
                              "timeout_seconds": 2, "wait": {"attempts": 30, "interval_seconds": 0.5}})
    else:
        add_job(bucket, "api", files={"conf/api.conf": "threads=4\n"})
    if n_jobs >= 2:
        add_job(bucket, "web", files={"conf/site.conf": "listen=80\n", "static/index.html": "<h1>v1</h1>\n"},
                restart_policy="reload", restart_globs=["conf/*.conf"], max_concurrent_upgrades=2)
    for i in range(2, n_jobs):
        add_job(bucket, "job%d" % i, files={"app.txt": "job %d\n" % i, "bin.sh": "#!/bin/sh\necho hi\n"})
    return bucket


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleet-state", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--health", action="store_true")
    ap.add_argument("--labels", default="worker")
    args = ap.parse_args(argv)
    make_bucket(Path(args.bucket), Path(args.fleet_state), n_jobs=args.jobs, health=args.health, labels=args.labels)
    print(Path(args.bucket).resolve())


if __name__ == "__main__":
    main()
