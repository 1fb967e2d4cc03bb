"""Write small maand buckets for tests from plain Python data."""

import json
import os

MAKEFILE = ".PHONY: start stop restart reload\nstart:\n\t@echo start\nstop:\n\t@echo stop\nrestart: stop start\nreload:\n\t@echo reload\n"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def worker_root(root, makefiles):
    """A worker's folder of a bucket as the deploy leaves it: root/jobs/<job>/Makefile of each {job: makefile}."""
    for job, text in makefiles.items():
        write(os.path.join(str(root), "jobs", job, "Makefile"), text)
    return root


def make_bucket(root, workers, jobs, maand_conf=None, bucket_conf=None, jobs_conf=None, disabled=None,
                jobs_conf_name="bucket.jobs.conf"):
    """workers: list of dicts (workers.json); jobs: {name: manifest dict or None for '{}'}."""
    root = str(root)
    conf = maand_conf if maand_conf is not None else 'ssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 22\nuse_sudo = false\n'
    write(os.path.join(root, "maand.conf"), conf)
    write(os.path.join(root, "workspace", "workers.json"),
          workers if isinstance(workers, str) else json.dumps(workers, indent=2))
    write(os.path.join(root, "workspace", "bucket.conf"),
          bucket_conf if bucket_conf is not None else 'port_min = "30000"\nport_max = "39999"\n')
    if jobs_conf is not None:
        write(os.path.join(root, "workspace", jobs_conf_name), jobs_conf)
    if disabled is not None:
        write(os.path.join(root, "workspace", "disabled.json"),
              disabled if isinstance(disabled, str) else json.dumps(disabled))
    for name, manifest in jobs.items():
        set_job(root, name, manifest)
    write(os.path.join(root, "maand.yml"), "plugin: maand.core.workspace\n")
    return root


def set_job(root, name, manifest, makefile=MAKEFILE, scripts=True):
    """scripts: also write _modules/<command>.py for every command of a dict manifest (maand requires one)."""
    job_dir = os.path.join(str(root), "workspace", "jobs", name)
    write(os.path.join(job_dir, "manifest.json"),
          manifest if isinstance(manifest, str) else json.dumps(manifest if manifest is not None else {}))
    if makefile is not None:
        write(os.path.join(job_dir, "Makefile"), makefile)
    commands = manifest.get("commands") if isinstance(manifest, dict) else None
    if scripts and isinstance(commands, dict):
        for command in commands:
            write(os.path.join(job_dir, "_modules", "%s.py" % command), "")


def set_workers(root, workers):
    write(os.path.join(str(root), "workspace", "workers.json"), json.dumps(workers, indent=2))
