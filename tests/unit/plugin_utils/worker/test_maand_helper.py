"""The ``maand`` module hook scripts import (_maand_helper, staged as maand.py): the public
functions of maand's own maand.py (maand-sh/maand jobcommand/maand.py), same names and
parameters, so maand's hook scripts run unchanged; no dependency beyond the standard library."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.worker import maand_helper as _maand_helper

# def names and parameters of maand's maand.py (HEAD of maand-sh/maand)
MAAND_PY = {
    "allocation_id": [], "allocation_ip": [], "allocation_index": [], "is_allocation_disabled": [],
    "command_event": [], "command_name": [], "job_name": [], "get_store_value": ["namespace", "key"],
    "put_rollout_order": ["order"], "get_rollout_order": [], "put_job_variable": ["key", "value"],
    "list_job_keys": ["namespace"], "delete_job_variable": ["key"], "delete_job_secret": ["key"],
    "put_job_secret": ["key", "value"], "list_command_demands": [],
    "acquire_semaphore": ["name", "capacity", "timeout_seconds"], "release_semaphore": ["name"],
    "semaphore_status": ["name"], "get_allocation_id": [], "get_allocation_ip": [], "get_allocation_index": [],
    "get_event": [], "get_command": [], "get_job": [], "kv_get": ["namespace", "key"], "kv_put": ["key", "value"],
    "kv_put_secret": ["key", "value"], "get_demands": [], "get_kv_value": ["namespace", "key"],
    "find_bucket_root": [], "load_ssh": [],
    "run_ssh": ["worker_ip", "remote_cmd", "timeout", "check", "connect_timeout"],
    "run_runner_target": ["target", "worker_ip", "job", "timeout"],
    "run_make_target": ["target", "worker_ip", "job", "timeout"],
}


# maand's maand.py before June 2026 (maand-sh/maand 3f8043e^ jobcommand/maand.py): rollout_order was deploy_order
MAAND_PY_OLD = {"put_deploy_order": ("put_rollout_order", ["order"]), "get_deploy_order": ("get_rollout_order", [])}


@pytest.mark.parametrize("name", sorted(MAAND_PY_OLD))
def test_maands_older_deploy_order_names_are_aliases(name):
    new, params = MAAND_PY_OLD[name]
    fn = getattr(_maand_helper, name)
    assert list(inspect.signature(fn).parameters) == params
    body = ast.parse(inspect.getsource(fn)).body[0].body[-1]
    assert isinstance(body, ast.Return) and ast.unparse(body.value) == "%s(%s)" % (new, ", ".join(params))


@pytest.mark.parametrize("name", sorted(MAAND_PY))
def test_every_maand_py_function_is_here_with_its_parameters(name):
    fn = getattr(_maand_helper, name)
    assert list(inspect.signature(fn).parameters) == MAAND_PY[name]


def test_standard_library_only():
    tree = ast.parse(Path(_maand_helper.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    # and the error family's base: the collection's (..errors) or, staged, maand_errors.py beside it
    assert imported <= {"http", "json", "os", "shlex", "subprocess", "urllib", "pathlib", "errors", "maand_errors"}


def test_context_from_env(monkeypatch):
    for k, v in {"ALLOCATION_ID": "a1", "ALLOCATION_IP": "10.0.0.2", "ALLOCATION_INDEX": "3", "DISABLED": "1",
                 "EVENT": "cli", "COMMAND": "command_x", "JOB": "api", "MAAND_RUNTIME_API_PORT": "5555",
                 "MAAND_RUNTIME_API_TOKEN": "t0k"}.items():
        monkeypatch.setenv(k, v)
    assert (_maand_helper.allocation_id(), _maand_helper.allocation_ip(), _maand_helper.allocation_index(), _maand_helper.is_allocation_disabled(),
            _maand_helper.command_event(), _maand_helper.command_name(), _maand_helper.job_name()) == ("a1", "10.0.0.2", "3", True, "cli",
                                                                                                       "command_x", "api")
    assert _maand_helper._runtime_api_base_url() == "http://127.0.0.1:5555"
    assert _maand_helper._runtime_request_headers() == {"X-ALLOCATION-ID": "a1", "COMMAND": "command_x", "EVENT": "cli",
                                                        "X-MAAND-TOKEN": "t0k"}
    assert _maand_helper.job()["name"] == "api" and _maand_helper.worker() == {"worker_ip": "10.0.0.2"}


def test_response_raise_for_status():
    ok = _maand_helper.Response(200, b'{"value": "x"}', "http://h/kv")
    assert ok.ok and ok.json() == {"value": "x"} and ok.raise_for_status() is ok
    bad = _maand_helper.Response(400, b"Invalid or unauthorized namespace\n", "http://h/kv", "Bad Request")
    with pytest.raises(_maand_helper.HTTPError, match="400 Bad Request for url http://h/kv: Invalid or unauthorized"):
        bad.raise_for_status()


def test_ssh_uses_the_runs_connection_settings(tmp_path, monkeypatch):
    hosts = tmp_path / "hosts.json"
    hosts.write_text('{"10.0.0.2": {"address": "127.0.0.1", "port": 2222, "user": "ops", "key": "/k",'
                     ' "options": ["-o", "UserKnownHostsFile=/dev/null"], "sudo": true}}')
    monkeypatch.setenv("MAAND_HOSTS_FILE", str(hosts))
    argv, sudo = _maand_helper._ssh_argv("10.0.0.2", 15)
    assert argv[-1] == "ops@127.0.0.1" and ["-p", "2222"] == argv[argv.index("-p"):argv.index("-p") + 2]
    assert "UserKnownHostsFile=/dev/null" in argv and sudo
    # a worker the run does not know: maand.conf's ssh_user/ssh_key (maand's load_ssh)
    (tmp_path / "maand.conf").write_text('ssh_user = "deploy"\nssh_key = "w.key"\n')
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "w.key").write_text("")
    monkeypatch.chdir(tmp_path)
    argv, sudo = _maand_helper._ssh_argv("10.0.0.9", 15)
    assert argv[-1] == "deploy@10.0.0.9" and str(tmp_path / "secrets" / "w.key") in argv and not sudo
