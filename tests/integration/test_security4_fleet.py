"""Security round 4 on a real SSH fleet (issue 32 N2, N3): a deploy run the way AWX runs it, with the KV master
key in MAAND_KV_KEY and MAAND_KV_KEY_FILE.

- N3: the `pre_deploy` hook of a job writes its environment to a controller file: MAAND_HOOK_* is there, the KV
  key is not (before the fix every MAAND_* reached every hook and whatever it spawned).
- N2: the `app` job's `_prometheus/scrape.yaml.tpl` reads a basic_auth password with getSecret; the server job's
  `prometheus.yml` (`{{ scrapeConfigs }}`) lands on the worker 0600 with the password in it, and after the
  password changes `deploy --check --diff` names the file as secret-bearing and prints neither value (before:
  0644 and the values in the diff).
"""

from __future__ import annotations

import base64
import json
import stat

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.integration.deploy.bucket import add_job, fleet_bucket
from tests.integration.deploy.env import Env
from tests.integration.test_security4_scrape_secrets import SCRAPE_TPL

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

OLD, NEW = "Scrape-pw-0ld-value", "Scrape-pw-n3w-value"
PROM_TPL = "global:\n  scrape_interval: 15s\nscrape_configs:\n{{ scrapeConfigs }}\n"
DUMP = "import json, os\njson.dump(dict(os.environ), open(os.environ['MAAND_HOOK_ENV_OUT'], 'w'))\n"


def _put(bucket, value):
    with _store.KVStore.edit(str(bucket)) as store:
        store.put("secrets/job/app", "metrics_password", value)


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(1)
    root = tmp_path_factory.mktemp("sec4")
    bucket = fleet_bucket(root / "bucket", fleet.state_dir)
    add_job(bucket, "prometheus", files={"prometheus.yml.tpl": PROM_TPL},
            resources={"ports": {"prometheus_port_http": {}}})
    add_job(bucket, "app", files={"_prometheus/scrape.yaml.tpl": SCRAPE_TPL, "_modules/command_env.py": DUMP},
            resources={"ports": {"app_metrics_port": {}}},
            commands={"command_env": {"executed_on": ["pre_deploy"]}})
    _put(bucket, OLD)
    key = (bucket / "secrets" / "kv.key").read_bytes()
    run = Env(fleet, bucket)
    run.env = {"MAAND_KV_KEY": base64.b64encode(key).decode(), "MAAND_KV_KEY_FILE": str(bucket / "secrets" / "kv.key"),
               "MAAND_HOOK_ENV_OUT": str(root / "hook-env.json"), "MAAND_HOOK_X": "for-the-hook"}
    run.hook_env = root / "hook-env.json"
    return run


def test_01_the_deploys_hooks_never_get_the_kv_key(env):
    env.build()
    rc, out = env.deploy()
    seen = json.loads(env.hook_env.read_text())
    assert seen["EVENT"] == "pre_deploy" and seen["JOB"] == "app" and seen["MAAND_HOOK_X"] == "for-the-hook"
    assert "MAAND_KV_KEY" not in seen and "MAAND_KV_KEY_FILE" not in seen, sorted(seen)
    assert env.env["MAAND_KV_KEY"] not in json.dumps(seen)


def test_02_a_scrape_secret_lands_0600_and_the_diff_never_shows_it(env):
    host = env.hosts[0]
    config = env.job(host, "prometheus") / "prometheus.yml"
    assert OLD in config.read_text() and "password: %s" % OLD in config.read_text()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert OLD not in (env.bucket / "data" / "kv.json").read_text()
    _put(env.bucket, NEW)
    env.build()
    rc, plan = env.deploy("--check", "--diff")
    assert "prometheus/prometheus.yml: secret-bearing, not shown" in plan, plan
    assert OLD not in plan and NEW not in plan, plan
    env.deploy()
    assert "password: %s" % NEW in config.read_text() and stat.S_IMODE(config.stat().st_mode) == 0o600
