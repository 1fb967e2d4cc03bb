"""Job commands (_hooks): which commands an event runs, for which allocations, with which script,
interpreter and environment. Cases from maand-sh/maand jobcommand/runtime_test.go
(ResolveCommandScript), python_test.go (ResolvePythonExecutable), run.go (buildCommandEnv),
allocation_env.go (ALLOCATION_INDEX among non-removed allocations) and deploy/batch_hooks.go."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.hooks import commands as _commands


def catalog():
    cmds = {"command_migrate": {"executed_on": ["cli", "pre_deploy"], "demands": {"job": "db", "command": "command_schema"}},
            "command_health": {"executed_on": ["health_check"]},
            "command_a_init": {"executed_on": ["pre_deploy"]}}
    return {
        "bucket_id": "b",
        "jobs": [{"name": "api", "deployment_seq": 1, "commands": cmds, "path": "workspace/jobs/api"},
                 {"name": "db", "deployment_seq": 0, "path": "workspace/jobs/db",
                  "commands": {"command_schema": {"executed_on": ["post_build", "cli"]}}},
                 {"name": "old", "removed": True, "commands": {"command_x": {"executed_on": ["cli"]}}},
                 {"name": "web", "deployment_seq": 0, "commands": {}}],
        "allocations": [
            {"job": "api", "worker": "10.0.0.1", "alloc_id": "a1", "state": "removed"},
            {"job": "api", "worker": "10.0.0.2", "alloc_id": "a2", "state": "active"},
            {"job": "api", "worker": "10.0.0.3", "alloc_id": "a3", "state": "disabled"},
            {"job": "api", "worker": "10.0.0.4", "alloc_id": "a4", "state": "active"},
            {"job": "db", "worker": "10.0.0.1", "alloc_id": "d1", "state": "active"},
        ],
    }


def test_commands_for_event_in_name_order_and_removed_jobs_run_nothing():
    cat = catalog()
    assert _commands.commands_for(cat, "api", "pre_deploy") == ["command_a_init", "command_migrate"]
    assert _commands.commands_for(cat, "api", "post_deploy") == []
    assert _commands.commands_for(cat, "old", "cli") == []
    assert _commands.has_event(cat, "db", "post_build") and not _commands.has_event(cat, "web", "cli")
    with pytest.raises(_commands.HookError, match="job nope is not in the catalog.*api, db, old, web"):
        _commands.commands_for(cat, "nope", "cli")


def test_jobs_with_event_in_deployment_seq_order():
    cat = catalog()
    assert _commands.jobs_with(cat, "cli") == ["db", "api"]  # db is seq 0, api seq 1, removed old left out
    assert _commands.jobs_with(cat, "cli", "command_migrate") == ["api"]
    assert _commands.jobs_with(cat, "post_deploy") == []


def test_targets_are_active_allocations_with_index_among_non_removed():
    cat = catalog()
    got = _commands.targets(cat, "api")
    assert [(t.worker, t.alloc_id, t.index, t.disabled) for t in got] == [("10.0.0.2", "a2", 0, False),
                                                                          ("10.0.0.4", "a4", 2, False)]
    with_disabled = _commands.targets(cat, "api", include_disabled=True)
    assert [(t.worker, t.index, t.disabled) for t in with_disabled][1] == ("10.0.0.3", 1, True)
    # explicit workers (batch hooks, a stopped disabled allocation): that order, disabled included
    chosen = _commands.targets(cat, "api", workers=["10.0.0.4", "10.0.0.3", "10.0.0.4", "10.0.0.9"])
    assert [(t.worker, t.disabled) for t in chosen] == [("10.0.0.4", False), ("10.0.0.3", True)]


@pytest.mark.parametrize("files,runtime,name", [
    (["command_x.py"], "python", "command_x.py"),
    (["command_x.ts"], "bun", "command_x.ts"),
    (["command_x.js", "other.py"], "bun", "command_x.js"),
])
def test_resolve_script_exactly_one_implementation(tmp_path, files, runtime, name):
    for f in files:
        (tmp_path / f).write_text("")
    script = _commands.resolve_script(str(tmp_path), "api", "command_x")
    assert (script.runtime, script.name) == (runtime, name)


def test_resolve_script_errors_are_maands(tmp_path):
    with pytest.raises(_commands.HookError, match=r"job api command command_x: job command file not found: "
                       r"expected command_x.py, command_x.ts, or command_x.js under"):
        _commands.resolve_script(str(tmp_path), "api", "command_x")
    (tmp_path / "command_x.py").write_text("")
    (tmp_path / "command_x.ts").write_text("")
    with pytest.raises(_commands.HookError, match=r"multiple implementations for command_x .*use only one of .py, .ts, .js"):
        _commands.resolve_script(str(tmp_path), "api", "command_x")


def test_python_prefers_the_jobs_venv(tmp_path):
    assert _commands.python_for(str(tmp_path)) == "python3"
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text("")
    assert _commands.python_for(str(tmp_path)) == str(venv / "python")
    dot = tmp_path / ".venv" / "bin"
    dot.mkdir(parents=True)
    (dot / "python3").write_text("")
    assert _commands.python_for(str(tmp_path)) == str(dot / "python3")


def test_argv_names_a_missing_runtime(tmp_path):
    ts = _commands.Script("api", "command_x", str(tmp_path / "command_x.ts"), "bun")
    with pytest.raises(_commands.HookError, match=r"job api command command_x: command_x.ts needs bun on the controller"
                       r".*install bun.*or rewrite the command as command_x.py"):
        _commands.argv_for(ts, str(tmp_path), which=lambda name: None)
    assert _commands.argv_for(ts, str(tmp_path), which=lambda name: "/usr/bin/bun") == ["/usr/bin/bun", "run", "command_x.ts"]
    py = _commands.Script("api", "command_x", str(tmp_path / "command_x.py"), "python")
    assert _commands.argv_for(py, str(tmp_path), which=lambda name: "/usr/bin/python3") == ["python3", "command_x.py"]
    with pytest.raises(_commands.HookError, match="needs python3 on the controller"):
        _commands.argv_for(py, str(tmp_path), which=lambda name: None)


def test_command_env_is_maands_and_allocation_values_win():
    target = _commands.Target("api", "10.0.0.4", "a4", 2, False)
    api = _commands.ApiEndpoint(4321, "tok", "/run/hosts.json")
    env = _commands.command_env(target, "command_migrate", "pre_deploy", api, "", "2.0.0",
                                extra={"JOB": "spoofed", "NEW_ALLOCATIONS": "10.0.0.4"},
                                base={"PATH": "/bin", "PYTHONHOME": "/x", "ALLOCATION_ID": "old"})
    assert env == {
        "PATH": "/bin", "NEW_ALLOCATIONS": "10.0.0.4",
        "ALLOCATION_ID": "a4", "ALLOCATION_IP": "10.0.0.4", "ALLOCATION_INDEX": "2", "DISABLED": "0",
        "JOB": "api", "EVENT": "pre_deploy", "COMMAND": "command_migrate", "JOB_COMMAND_API_HOST": "127.0.0.1",
        "CURRENT_VERSION": "0.0.0", "NEW_VERSION": "2.0.0", "MAAND_RUNTIME_API_PORT": "4321",
        "MAAND_RUNTIME_API_TOKEN": "tok", "MAAND_HOSTS_FILE": "/run/hosts.json", "PYTHONUNBUFFERED": "1"}
    disabled = _commands.command_env(_commands.Target("api", "h", "x", 0, True), "c", "cli", api, "1", "1", base={})
    assert disabled["DISABLED"] == "1"


def test_hooks_inherit_an_allow_list_of_the_controllers_environment():
    """Issue 21: not the controller's credentials or Ansible's settings; PATH, HOME, the locale, MAAND_*."""
    api = _commands.ApiEndpoint(1, "t")
    base = {"PATH": "/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC", "SSH_AUTH_SOCK": "/s",
            "MAAND_HOOK_LOG": "/tmp/l", "AWS_SECRET_ACCESS_KEY": "x", "VAULT_TOKEN": "y", "ANSIBLE_CONFIG": "/a",
            "PYTHONPATH": "/p", "MAAND_RUNTIME_API_TOKEN": "not-ours"}
    env = _commands.command_env(_commands.Target("api", "h", "x", 0, False), "c", "cli", api, "", "", base=base)
    for name in ("PATH", "HOME", "LANG", "LC_TIME", "TZ", "SSH_AUTH_SOCK", "MAAND_HOOK_LOG"):
        assert env[name] == base[name]
    for name in ("AWS_SECRET_ACCESS_KEY", "VAULT_TOKEN", "ANSIBLE_CONFIG", "PYTHONPATH"):
        assert name not in env
    assert env["MAAND_RUNTIME_API_TOKEN"] == "t"  # the hook's own, never the controller's


def test_hooks_never_get_the_kv_key_or_the_state_store():
    """Issue 32 N3: of the controller's MAAND_* variables only MAAND_HOOK_* (the operator's prefix) reaches a hook;
    the KV master key, the store URL and libpq's password never do."""
    base = {"MAAND_KV_KEY": "a2V5", "MAAND_KV_KEY_FILE": "/k", "MAAND_STATE_URL": "postgresql://u@db/m",
            "MAAND_CONF": "/c", "PGPASSWORD": "pw", "PGPASSFILE": "/p", "PGSERVICEFILE": "/s",
            "MAAND_VAULT_ADDR": "https://v", "MAAND_HOOK_X": "1", "MAAND_HOOK_": "empty-suffix"}
    env = _commands.command_env(_commands.Target("api", "h", "x", 0, False), "c", "cli", _commands.ApiEndpoint(1, "t"),
                                "", "", base=base)
    assert {k for k in env if k in base} == {"MAAND_HOOK_X", "MAAND_HOOK_"}
    assert _commands.inherited_env(base) == {"MAAND_HOOK_X": "1", "MAAND_HOOK_": "empty-suffix"}


def test_batch_and_job_control_env():
    assert _commands.batch_env("api", ["h2", "h3"], 1, 3, "update", ["h1", "h2", "h3"], "kv") == {
        "BATCH_ALLOCATIONS": "h2,h3", "BATCH_INDEX": "1", "BATCH_COUNT": "3", "DEPLOY_PHASE": "update",
        "ROLLOUT_ORDER": "h1,h2,h3", "ROLLOUT_ORDER_SOURCE": "kv", "JOB": "api"}
    with pytest.raises(ValueError, match="DEPLOY_PHASE"):
        _commands.batch_env("api", [], 0, 1, "restart", [], "default")
    assert _commands.job_control_env(["h1"], []) == {"NEW_ALLOCATIONS": "h1", "UPDATED_ALLOCATIONS": ""}


def test_after_allocation_stopped_env_is_maands():
    """maand deploy/batch_hooks.go executeAfterAllocationStopped: one allocation, phase stop, batch 0 of 1,
    RolloutOrder and OrderSource left empty."""
    assert _commands.stop_env("api", "h2") == {
        "BATCH_ALLOCATIONS": "h2", "BATCH_INDEX": "0", "BATCH_COUNT": "1", "DEPLOY_PHASE": "stop",
        "ROLLOUT_ORDER": "", "ROLLOUT_ORDER_SOURCE": "", "JOB": "api"}


def test_stage_copies_the_job_without_venvs_and_adds_the_helper(tmp_path):
    job = tmp_path / "workspace" / "jobs" / "api"
    (job / "_modules" / ".venv" / "bin").mkdir(parents=True)
    (job / "_modules" / "__pycache__").mkdir()
    (job / "_modules" / "command_x.py").write_text("print(1)\n")
    (job / "_modules" / "maand.py").write_text("# an old copy of maand's helper\n")
    (job / "Makefile").write_text("start:\n")
    modules = _commands.stage(str(tmp_path), "workspace/jobs/api", "api", "10.0.0.2", str(tmp_path / "stage"))
    assert modules == str(tmp_path / "stage" / "workers" / "10.0.0.2" / "jobs" / "api" / "_modules")
    assert sorted(os.listdir(modules)) == ["command_x.py", "maand.py", "maand.ts", "maand_errors.py"]
    # the staged maand module imports alone, its HTTPError deriving the error family's base staged beside it
    probe = subprocess.run([sys.executable, "-c", "import maand, maand_errors; "
                            "assert issubclass(maand.HTTPError, maand_errors.MaandError); print('ok')"],
                           cwd=modules, capture_output=True, text=True, check=False)
    assert probe.stdout.strip() == "ok", probe.stderr
    assert "put_job_variable" in (tmp_path / "stage" / "workers" / "10.0.0.2" / "jobs" / "api" / "_modules"
                                  / "maand.py").read_text()
    assert os.path.isfile(os.path.join(os.path.dirname(modules), "Makefile"))
    # staging again replaces the copy (a file removed from the workspace is gone)
    (job / "Makefile").unlink()
    _commands.stage(str(tmp_path), "workspace/jobs/api", "api", "10.0.0.2", str(tmp_path / "stage"))
    assert not os.path.exists(os.path.join(os.path.dirname(modules), "Makefile"))


# export names of maand's maand.ts (HEAD of maand-sh/maand jobcommand/maand.ts)
MAAND_TS_EXPORTS = [
    "allocationId", "allocationIp", "allocationIndex", "isAllocationDisabled", "commandEvent", "commandName",
    "jobName", "getStoreValue", "putRolloutOrder", "getRolloutOrder", "putJobVariable", "putJobSecret",
    "listJobKeys", "deleteJobVariable", "deleteJobSecret", "listCommandDemands", "acquireSemaphore",
    "releaseSemaphore", "semaphoreStatus", "getAllocationId", "getAllocationIp", "getAllocationIndex", "getEvent",
    "getCommand", "getJob", "kvGet", "kvPut", "kvPutSecret", "getDemands"]

MAAND_TS_OLD_NAMES = {"putDeployOrder": "putRolloutOrder", "getDeployOrder": "getRolloutOrder"}


def test_the_bun_helper_exports_maands_functions_and_sends_the_token():
    import re
    text = open(_commands.HELPER_TS, encoding="utf-8").read()
    exported = re.findall(r"^export (?:async function|function|const) (\w+)", text, re.M)
    assert [name for name in exported if name not in MAAND_TS_OLD_NAMES] == MAAND_TS_EXPORTS
    for old, new in MAAND_TS_OLD_NAMES.items():  # maand.ts before June 2026: the same call under the old name
        body = re.search(r"^export async function %s\(([^)]*)\)[^{]*\{\n(.*?)\n\}" % old, text, re.M | re.S)
        assert body and body.group(2).strip() == "return %s(%s);" % (new, "order" if body.group(1) else "")
    assert "MAAND_RUNTIME_API_PORT" in text and '"X-MAAND-TOKEN": process.env.MAAND_RUNTIME_API_TOKEN' in text
