"""End to end on a real SSH fleet: a bucket written after maand's job-command docs and tutorial
(docs/guides/job-commands-tutorial.md, docs/reference/cli/job-command.md) builds and deploys with its
hooks run in maand's order, their KV writes visible to templates, a job_control job started by its
command (over ssh with the maand module's run_make_target) and never by `make start`, cli commands
through maand.core.job_command, and failing / hanging hooks failing the deploy, named.

The steps share one bucket and one 2-host fleet and run in file order.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.deploy.bucket import fleet_bucket, write
from tests.integration.deploy.env import Env

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

# Every hook appends "<event> <job> <command> <worker> <extra>" to $MAAND_HOOK_LOG (a controller file).
LOG_PY = """\
import os


def log(extra=""):
    with open(os.environ["MAAND_HOOK_LOG"], "a") as f:
        f.write("%s %s %s %s %s\\n" % (os.environ["EVENT"], os.environ["JOB"], os.environ["COMMAND"],
                                     os.environ["ALLOCATION_IP"], extra))
"""

# maand's reference example, verbatim apart from the values (docs/reference/cli/job-command.md; its
# template calls getSecret with a namespace too, but maand's getSecret takes the key only: deploy/templates.go)
DB_BOOTSTRAP = """\
from maand import put_job_secret, put_job_variable
from hooklog import log

put_job_secret("db_password", "pw-from-vault").raise_for_status()
put_job_variable("db_host", "db.internal").raise_for_status()
log()
"""
DB_SCHEMA = """\
import maand
from hooklog import log

maand.put_job_variable("schema", "v1").raise_for_status()
log(",".join(d["job"] + ":" + d["command"] for d in maand.list_command_demands().json()))
"""
DB_HEALTH = """\
import maand
from hooklog import log

assert maand.get_kv_value("vars/job/db", "db_host") == "db.internal"
log()
"""
DB_POST = """\
import os, maand
from hooklog import log

maand.put_job_variable("deployed", os.environ["NEW_VERSION"]).raise_for_status()  # read by api's pre_deploy
log(os.environ["CURRENT_VERSION"] + "->" + os.environ["NEW_VERSION"])
"""
DB_CONFIG_TPL = """\
db_host = "{{ get "vars/job/db" "db_host" }}"
db_password = "{{ getSecret "db_password" }}"
schema = "{{ get "vars/job/db" "schema" }}"
"""
# the tutorial's own script (maand.job(), maand.worker(), maand.kv.get)
API_MIGRATE = """\
#!/usr/bin/env python3
import maand
from hooklog import log


def main():
    job = maand.job()
    worker = maand.worker()
    print(f"migrate api on {worker['worker_ip']} alloc={job['allocation_id']}")
    name = maand.kv.get("maand/job/api", "name")
    print(f"job name from KV: {name}")
    # written by db's post_deploy: api (wave 1) runs its pre_deploy after wave 0 rolled out, as maand
    log("%s db=%s" % (name, maand.kv.get("vars/job/db", "deployed")))


if __name__ == "__main__":
    main()
"""
API_CONTROL = """\
import os, maand
from hooklog import log

for ip in [h for h in os.environ["NEW_ALLOCATIONS"].split(",") if h]:
    if ip == maand.allocation_ip():
        maand.run_make_target("start")
for ip in [h for h in os.environ["UPDATED_ALLOCATIONS"].split(",") if h]:
    if ip == maand.allocation_ip():
        maand.run_make_target("restart")
log("new=" + os.environ["NEW_ALLOCATIONS"] + " updated=" + os.environ["UPDATED_ALLOCATIONS"])
"""
WEB_STARTED = """\
import os
from hooklog import log

log("%s %s/%s %s" % (os.environ["DEPLOY_PHASE"], os.environ["BATCH_INDEX"], os.environ["BATCH_COUNT"],
                     os.environ["BATCH_ALLOCATIONS"]))
"""
WEB_STOPPED = """\
import os
from hooklog import log

log("%s disabled=%s" % (os.environ["DEPLOY_PHASE"], os.environ["DISABLED"]))
"""
MAKEFILE = """\
.PHONY: start stop restart reload
start stop restart reload:
\tmkdir -p logs
\techo "$@" >> logs/make.log
"""


class HooksEnv(Env):
    timeout = 600
    tail = 8000

    def __init__(self, fleet, bucket, hook_log):
        super().__init__(fleet, bucket)
        self.hook_log = hook_log
        self.env["MAAND_HOOK_LOG"] = str(hook_log)

    def hook_events(self):
        if not self.hook_log.exists():
            return []
        lines = self.hook_log.read_text().splitlines()
        self.hook_log.unlink()
        return [line.rstrip() for line in lines]

    def make_log(self, host, job):
        path = self.job(host, job) / "logs" / "make.log"
        return path.read_text().split() if path.exists() else []


def set_manifest(bucket, job, manifest):
    write(bucket / "workspace" / "jobs" / job / "manifest.json", json.dumps(manifest, indent=2))


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    root = tmp_path_factory.mktemp("hooks")
    bucket = root / "bucket"
    fleet_bucket(bucket, fleet.state_dir)
    jobs = bucket / "workspace" / "jobs"
    set_manifest(bucket, "db", {"version": "1.0.0", "selectors": ["worker"], "commands": {
        "command_bootstrap": {"executed_on": ["pre_deploy"]},
        "command_schema": {"executed_on": ["post_build", "cli"]},
        "command_health": {"executed_on": ["health_check"]},
        "command_smoke": {"executed_on": ["post_deploy"]}}})
    for name, body in (("command_bootstrap", DB_BOOTSTRAP), ("command_schema", DB_SCHEMA),
                       ("command_health", DB_HEALTH), ("command_smoke", DB_POST), ("hooklog", LOG_PY)):
        write(jobs / "db" / "_modules" / (name + ".py"), body)
    write(jobs / "db" / "Makefile", MAKEFILE)
    write(jobs / "db" / "config.toml.tpl", DB_CONFIG_TPL)
    set_manifest(bucket, "api", {"version": "2.0.0", "selectors": ["worker"], "commands": {
        "command_migrate": {"executed_on": ["cli", "pre_deploy"],
                            "demands": {"job": "db", "command": "command_schema", "config": {"min_version": "1.0.0"}}},
        "command_rollout": {"executed_on": ["job_control"]}}})
    for name, body in (("command_migrate", API_MIGRATE), ("command_rollout", API_CONTROL), ("hooklog", LOG_PY)):
        write(jobs / "api" / "_modules" / (name + ".py"), body)
    write(jobs / "api" / "Makefile", MAKEFILE)
    set_manifest(bucket, "web", {"version": "1.0.0", "selectors": ["worker"], "max_concurrent_starts": 1,
                                 "commands": {"command_joined": {"executed_on": ["after_allocation_started"]},
                                              "command_drain": {"executed_on": ["after_allocation_stopped"]}}})
    for name, body in (("command_joined", WEB_STARTED), ("command_drain", WEB_STOPPED), ("hooklog", LOG_PY)):
        write(jobs / "web" / "_modules" / (name + ".py"), body)
    write(jobs / "web" / "Makefile", MAKEFILE)
    return HooksEnv(fleet, bucket, root / "hooks.log")


def test_01_build_runs_post_build_and_the_first_deploy_runs_hooks_in_maands_order(env):
    h0, h1 = env.hosts
    env.play("build")
    assert sorted(env.hook_events()) == sorted("post_build db command_schema %s api:command_migrate" % h for h in (h0, h1))
    # --check runs no hook and says so; db's template reads keys its pre_deploy writes: rendered as "" in the plan
    rc, out = env.play("deploy", "--check")
    assert env.hook_events() == []
    assert "pre_deploy hooks NOT run (check mode): this plan was rendered from the KV as it is now" in out, out
    assert "wave 0: db; wave 1: api" in out
    assert 'job db reads KV keys that do not exist yet (rendered as "" in this plan): secrets/job/db db_password, ' \
           "vars/job/db db_host" in out
    rc, out = env.play("deploy")
    # the plan's wave picture, from deployment_seq and api's demand on db (issue 14)
    assert "waves: wave 0 db, web; wave 1 api\n  wave 0 db --(command_schema >= 1.0.0)--> wave 1 api\n" in out, out
    assert "pre_deploy hooks run at the start of each job's wave, after the earlier waves (wave 0: db; wave 1: api)" in out
    events = env.hook_events()
    # wave 0's pre_deploy before anything else
    assert sorted(events[:2]) == ["pre_deploy db command_bootstrap %s" % h for h in (h0, h1)]
    # wave 1's pre_deploy (api) after everything of wave 0 (db's post_deploy, whose KV write it reads, and
    # web's batches), before api rolls out (job_control)
    api_pre = [i for i, e in enumerate(events) if e.startswith("pre_deploy api")]
    assert sorted(events[i] for i in api_pre) == ["pre_deploy api command_migrate %s api db=1.0.0" % h for h in (h0, h1)]
    assert max(i for i, e in enumerate(events) if " db " in e or " web " in e) < min(api_pre)
    assert max(api_pre) < min(i for i, e in enumerate(events) if e.startswith("job_control api"))
    rest = [e for e in events[2:] if not e.startswith("pre_deploy ")]
    # db: health_check then post_deploy (versions 0.0.0 -> 1.0.0); api: job_control once per allocation
    db = [e for e in rest if " db " in e]
    assert sorted(db[:2]) == ["health_check db command_health %s" % h for h in (h0, h1)]
    assert sorted(db[2:]) == ["post_deploy db command_smoke %s 0.0.0->1.0.0" % h for h in (h0, h1)]
    api = sorted(e for e in rest if " api " in e)
    assert api == ["job_control api command_rollout %s new=%s,%s updated=" % (h, h0, h1) for h in (h0, h1)]
    # web: one batch at a time (max_concurrent_starts 1), the hook after each batch
    web = [e for e in rest if " web " in e]
    assert web == ["after_allocation_started web command_joined %s new 0/2 %s" % (h0, h0),
                   "after_allocation_started web command_joined %s new 1/2 %s" % (h1, h1)]


def test_02_kv_writes_of_pre_deploy_reach_the_templates_and_secrets_stay_encrypted(env):
    # the plan rendered db before its hooks wrote these keys; its wave rendered it again and shipped that
    for host in env.hosts:
        text = (env.job(host, "db") / "config.toml").read_text()
        assert text == 'db_host = "db.internal"\ndb_password = "pw-from-vault"\nschema = "v1"\n'
        assert not (env.job(host, "db") / "_modules").exists()  # never shipped
    assert "pw-from-vault" not in (env.bucket / "data" / "kv.json").read_text()


def test_03_job_control_replaces_make_start(env):
    for host in env.hosts:
        assert env.make_log(host, "api") == ["start"]  # run by command_rollout over ssh, once
        assert env.make_log(host, "db") == ["start"]   # the Makefile path for the others


def test_04_a_second_deploy_with_nothing_changed_runs_only_pre_deploy(env):
    env.play("deploy")
    events = env.hook_events()
    assert events and all(e.startswith("pre_deploy ") for e in events)
    assert env.make_log(env.hosts[0], "api") == ["start"]


def test_05_cli_commands(env):
    env.play("job_command", "-e", "maand_command=command_migrate", "-e", "maand_job=api")
    assert sorted(env.hook_events()) == sorted("cli api command_migrate %s api db=1.0.0" % h for h in env.hosts)
    env.play("job_command", "-e", "maand_command=command_schema")  # every job that registers it
    assert len(env.hook_events()) == 2
    rc, out = env.play("job_command", "-e", "maand_command=command_rollout", "-e", "maand_job=api", check=False)
    assert rc != 0 and 'job "api" command "command_rollout" is not registered for event "cli"' in out
    assert env.hook_events() == []


def test_06_a_failing_hook_fails_its_job_and_the_deploy(env):
    api = env.bucket / "workspace" / "jobs" / "api"
    manifest = json.loads((api / "manifest.json").read_text())
    manifest["version"] = "2.1.0"
    set_manifest(env.bucket, "api", manifest)
    write(api / "_modules" / "command_rollout.py", "print('rolling out')\nraise SystemExit('rollout refused by the cluster')\n")
    env.play("build")
    env.hook_events()
    rc, out = env.play("deploy", check=False)
    assert rc != 0
    assert "job api command command_rollout (event job_control) on" in out and "rollout refused by the cluster" in out
    assert "rolling out" in out  # the output tail
    for host in env.hosts:  # not promoted: the next deploy tries again
        record = json.loads((env.job(host, "api").parent.parent / "deploy" / "api.json").read_text())
        assert record["version"] == "2.0.0"


def test_07_a_hanging_pre_deploy_is_killed_named_and_its_job_left_out(env):
    api = env.bucket / "workspace" / "jobs" / "api"
    write(api / "_modules" / "command_rollout.py", API_CONTROL)
    write(api / "_modules" / "command_migrate.py", "import time\nprint('waiting for lock', flush=True)\ntime.sleep(600)\n")
    env.play("build")
    env.hook_events()
    rc, out = env.play("deploy", "-e", "maand_hook_timeout=3", check=False)
    assert rc != 0
    assert "job api command command_migrate (event pre_deploy)" in out and "timed out after 3s" in out
    assert "waiting for lock" in out
    assert env.make_log(env.hosts[0], "api") == ["start"]  # api left out of this deploy
    write(api / "_modules" / "command_migrate.py", API_MIGRATE)
    env.play("build")
    env.play("deploy")
    assert sorted(env.make_log(h, "api") for h in env.hosts) == [["start", "restart"]] * 2


def test_08_disabling_runs_after_allocation_stopped(env):
    h0 = env.hosts[0]
    write(env.bucket / "workspace" / "disabled.json", json.dumps({"jobs": {"web": {"workers": [h0]}}}))
    env.play("build")
    env.hook_events()
    env.play("deploy")
    events = env.hook_events()
    assert "after_allocation_stopped web command_drain %s stop disabled=1" % h0 in events
    assert env.make_log(h0, "web")[-1] == "stop"


TARGET_CONTROL = """\
import os, maand
from hooklog import log

maand.run_make_target(os.environ["TARGET"])
log("target=" + os.environ["TARGET"])
"""


def test_09_the_job_playbook_runs_job_control_instead_of_make(env):
    h0, h1 = env.hosts
    write(env.bucket / "workspace" / "jobs" / "api" / "_modules" / "command_rollout.py", TARGET_CONTROL)
    env.play("build")
    env.hook_events()
    before = {h: env.make_log(h, "api") for h in env.hosts}
    env.play("job", "-e", "maand_job=api", "-e", "maand_target=reload", "-e", "maand_job_workers=%s" % h1)
    assert env.hook_events() == ["job_control api command_rollout %s target=reload" % h1]
    assert env.make_log(h1, "api") == before[h1] + ["reload"]  # through the command's run_make_target
    assert env.make_log(h0, "api") == before[h0]
    # a job without job_control still runs its Makefile target
    env.play("job", "-e", "maand_job=db", "-e", "maand_target=reload", "-e", "maand_job_all_at_once=true")
    assert env.hook_events() == [] and all(env.make_log(h, "db")[-1] == "reload" for h in env.hosts)
    # the rolling reload (the default) gates each batch: db's health_check command runs, no job_control
    before = {h: env.make_log(h, "db") for h in env.hosts}
    env.play("job", "-e", "maand_job=db", "-e", "maand_target=reload")
    events = env.hook_events()
    assert any(e.startswith("health_check db command_health ") for e in events), events
    assert not [e for e in events if e.startswith("job_control")], events
    assert all(env.make_log(h, "db") == before[h] + ["reload"] for h in env.hosts)
