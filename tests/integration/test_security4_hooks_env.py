"""Security round 4, N3 (issue 32 item 1): a hook never gets the controller's credentials. A post_build
command, run by a real `ansible-playbook maand.core.build` against a real PostgreSQL store with the
KV master key in MAAND_KV_KEY (as docs/awx.md's credential injects it), writes its environment to a
file: it sees MAAND_HOOK_* (the operator's own prefix) and none of MAAND_KV_KEY, MAAND_KV_KEY_FILE,
MAAND_STATE_URL, PGPASSWORD, PGPASSFILE, MAAND_CONF."""

from __future__ import annotations

import base64
import json
import os
import subprocess

import pytest

from tests.maand_init import init_bucket, job, ws

pytestmark = [pytest.mark.slow]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DUMP = "import json, os\njson.dump(dict(os.environ), open(os.environ['MAAND_HOOK_OUT'], 'w'))\n"


def playbook(*args, env=None):
    full = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"),
                ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", **(env or {}))
    return subprocess.run(["ansible-playbook", *args], capture_output=True, text=True, env=full, timeout=300,
                          check=False)


def test_a_post_build_hook_sees_maand_hook_variables_and_no_controller_credential(tmp_path, pg_server):
    root = init_bucket(tmp_path / "bucket")
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    job(root, "hookjob", '{"selectors":["worker"],"commands":{"command_env":{"executed_on":["post_build"]}}}')
    ws(root, "jobs/hookjob/_modules/command_env.py", DUMP)
    out = tmp_path / "env.json"
    passfile = tmp_path / "pgpass"
    passfile.write_text("*:*:*:*:%s\n" % pg_server.env["PGPASSWORD"])
    passfile.chmod(0o600)
    key = base64.b64encode(os.urandom(32)).decode()
    env = dict(pg_server.env, MAAND_KV_KEY=key, MAAND_STATE_URL=pg_server.database(), PGPASSFILE=str(passfile),
               MAAND_HOOK_OUT=str(out), MAAND_HOOK_X="operator-value", MAAND_VAULT_ADDR="not-a-hook-variable")
    built = playbook("maand.core.build", "-e", "maand_bucket=%s" % root, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    seen = json.loads(out.read_text())
    assert seen["MAAND_HOOK_X"] == "operator-value" and seen["MAAND_HOOK_OUT"] == str(out)
    leaked = sorted(name for name in ("MAAND_KV_KEY", "MAAND_KV_KEY_FILE", "MAAND_STATE_URL", "PGPASSWORD",
                                      "PGPASSFILE", "MAAND_CONF", "MAAND_VAULT_ADDR") if name in seen)
    assert leaked == [], leaked
    text = json.dumps(seen)
    assert key not in text and pg_server.env["PGPASSWORD"] not in text
    assert seen["JOB"] == "hookjob" and seen["EVENT"] == "post_build" and seen["MAAND_RUNTIME_API_TOKEN"]
