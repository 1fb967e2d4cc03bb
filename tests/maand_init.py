"""A bucket as `maand init` leaves it, for the maand-parity tests (tests/unit/**/test_parity_*.py)."""

import json
import os

from tests.bucket_factory import write

# What `maand init` writes (maand-sh/maand initialize/execute.go): maand.conf from a MaandConf with
# SSHPort unset, which go-toml v2 writes as 0; workers.json `[]`; bucket.conf with the port pool as strings.
INIT_MAAND_CONF = ('use_sudo = false\nssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 0\n'
                   'certs_ttl = 60\ncerts_renewal_buffer = 0\n')
INIT_BUCKET_CONF = 'port_min = "30000"\nport_max = "39999"\n'


def init_bucket(root):
    root = str(root)
    write(os.path.join(root, "maand.conf"), INIT_MAAND_CONF)
    write(os.path.join(root, "workspace", "workers.json"), "[]")
    write(os.path.join(root, "workspace", "bucket.conf"), INIT_BUCKET_CONF)
    os.makedirs(os.path.join(root, "workspace", "jobs"), exist_ok=True)
    return root


def ws(root, rel, text):
    """Write workspace/<rel>; dicts and lists are written as JSON."""
    write(os.path.join(str(root), "workspace", rel), text if isinstance(text, str) else json.dumps(text))


def job(root, name, manifest, makefile="", modules=()):
    """A job folder: manifest (dict or raw text), Makefile (None: none), empty _modules/<script> files."""
    ws(root, "jobs/%s/manifest.json" % name, manifest)
    if makefile is not None:
        ws(root, "jobs/%s/Makefile" % name, makefile)
    for script in modules:
        ws(root, "jobs/%s/_modules/%s" % (name, script), "")


def harness_labels(root):
    """What maand's test harness does before every build (tests/harness.go syncWorkerLabelsFromJobs, run by
    writeMinimalJob and executeBuildErr): every worker of workers.json gets the name of each job whose
    manifest has no selectors as a label, so a job without selectors lands on every worker. Unreadable
    files are left alone, as there."""
    root = str(root)
    jobs_dir = os.path.join(root, "workspace", "jobs")
    names = []
    for name in sorted(os.listdir(jobs_dir)) if os.path.isdir(jobs_dir) else ():
        try:
            with open(os.path.join(jobs_dir, name, "manifest.json"), encoding="utf-8") as handle:
                manifest = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and not manifest.get("selectors"):
            names.append(name)
    path = os.path.join(root, "workspace", "workers.json")
    try:
        with open(path, encoding="utf-8") as handle:
            workers = json.load(handle)
    except (OSError, ValueError):
        return
    if not names or not isinstance(workers, list) or not all(isinstance(w, dict) for w in workers):
        return
    for worker in workers:
        raw = worker.get("labels")
        labels = [label for label in raw if isinstance(label, str)] if isinstance(raw, list) else []
        worker["labels"] = labels + [name for name in names if name not in labels]
    write(path, json.dumps(workers))
