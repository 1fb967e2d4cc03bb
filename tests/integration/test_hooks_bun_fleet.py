"""Bun job commands (`_modules/command_*.ts` / `.js`, maand's jobcommand/run.go) run end to end on a real
SSH fleet: a TypeScript hook at post_build and a JavaScript hook at pre_deploy call the runtime API
through maand's own `maand.ts` (files/hooks/maand.ts, staged next to them), their KV writes reach the
deploy's templates, and both run again through maand.core.job_command. Needs `bun` on the controller
(scripts/bootstrap.sh installs it from the npm registry).

The steps share one bucket and one 1-host fleet and run in file order.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.integration.deploy.bucket import MAKEFILE, fleet_bucket, write
from tests.integration.test_hooks_e2e import HooksEnv

pytestmark = [pytest.mark.fleet, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("bun") is None, reason="no bun (npm install -g bun)")]

# TypeScript: maand's helper with its types; logs "<event> <command> <worker> <extra>" to $MAAND_HOOK_LOG
SEED_TS = """\
import { appendFileSync } from "node:fs";
import { allocationIp, commandEvent, commandName, getStoreValue, putJobVariable } from "./maand";

const bucketId: string = (await (await getStoreValue("maand/bucket", "bucket_id")).json()).value;
const put: Response = await putJobVariable("seeded_by", `ts@${commandEvent()}`);
if (!put.ok) throw new Error(`put failed: ${put.status} ${await put.text()}`);
appendFileSync(process.env.MAAND_HOOK_LOG!, `${commandEvent()} ${commandName()} ${allocationIp()} ${bucketId.length}\\n`);
"""
# JavaScript: the same helper (Bun resolves the .ts), a secret and a read of the TS hook's write
CHECK_JS = """\
import { appendFileSync } from "node:fs";
import * as maand from "./maand";

const seeded = (await (await maand.getStoreValue("vars/job/api", "seeded_by")).json()).value;
const put = await maand.putJobSecret("token", "js-secret-" + maand.jobName());
if (!put.ok) throw new Error("secret put failed: " + put.status);
const keys = (await (await maand.listJobKeys("vars/job/api")).json()).namespaces["vars/job/api"];
appendFileSync(process.env.MAAND_HOOK_LOG, `${maand.commandEvent()} ${maand.commandName()} ${maand.allocationIp()} ${seeded} ${JSON.stringify(keys)}\\n`);
"""
FAIL_JS = "console.error('bun says no'); process.exit(3);\n"
CONFIG_TPL = 'seeded_by = "{{ get "vars/job/api" "seeded_by" }}"\ntoken = "{{ getSecret "token" }}"\n'


BunEnv = HooksEnv  # the hooks tests' Env: the hooks log their events to $MAAND_HOOK_LOG


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(1)
    root = tmp_path_factory.mktemp("bun")
    bucket = fleet_bucket(root / "bucket", fleet.state_dir)
    api = bucket / "workspace" / "jobs" / "api"
    write(api / "manifest.json", json.dumps({"version": "1.0.0", "selectors": ["worker"], "commands": {
        "command_seed": {"executed_on": ["post_build", "cli"]},
        "command_check": {"executed_on": ["pre_deploy", "cli"]},
        "command_fail": {"executed_on": ["cli"]}}}, indent=2))
    write(api / "_modules" / "command_seed.ts", SEED_TS)
    write(api / "_modules" / "command_check.js", CHECK_JS)
    write(api / "_modules" / "command_fail.js", FAIL_JS)
    write(api / "Makefile", MAKEFILE)
    write(api / "config.toml.tpl", CONFIG_TPL)
    return BunEnv(fleet, bucket, root / "hooks.log")


def test_01_a_typescript_post_build_hook_writes_the_kv(env):
    host = env.hosts[0]
    env.play("build")
    assert env.hook_events() == ["post_build command_seed %s 36" % host]  # bucket_id: a UUID


def test_02_a_javascript_pre_deploy_hook_and_the_templates_see_both_writes(env):
    host = env.hosts[0]
    env.play("deploy")
    assert env.hook_events() == ['pre_deploy command_check %s ts@post_build ["seeded_by"]' % host]
    config = (env.job(host, "api") / "config.toml").read_text()
    assert config == 'seeded_by = "ts@post_build"\ntoken = "js-secret-api"\n'
    assert not (env.job(host, "api") / "_modules").exists()
    assert "js-secret-api" not in (env.bucket / "data" / "kv.json").read_text()  # encrypted


def test_03_job_command_runs_both_runtimes(env):
    host = env.hosts[0]
    env.play("job_command", "-e", "maand_command=command_seed", "-e", "maand_job=api")
    assert env.hook_events() == ["cli command_seed %s 36" % host]
    env.play("job_command", "-e", "maand_command=command_check", "-e", "maand_job=api")
    assert env.hook_events() == ['cli command_check %s ts@cli ["seeded_by"]' % host]


def test_04_a_failing_bun_hook_fails_the_run_named(env):
    rc, out = env.play("job_command", "-e", "maand_command=command_fail", "-e", "maand_job=api", check=False)
    assert rc != 0
    assert "command_fail" in out and "bun says no" in out, out
