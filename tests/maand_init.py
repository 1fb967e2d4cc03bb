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
