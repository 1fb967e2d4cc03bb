"""Job commands run for real on the controller (python3 subprocesses) against the runtime API:
maand's own hook script idioms (the maand module, raw HTTP), KV writes visible in data/kv.json,
maand's namespace rules and HTTP errors, semaphores, timeouts and crashes named with their tail."""

from __future__ import annotations

import json
import os
import textwrap
import threading
import time
import urllib.request

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.build import service as _build
from ansible_collections.maand.core.plugins.plugin_utils.hooks import points as _hook_deploy, run as _hook_run, commands as _hooks
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _kv_store
from ansible_collections.maand.core.plugins.plugin_utils.hooks.runtime_api import RuntimeAPI
from tests.bucket_factory import make_bucket, write

WORKERS = [{"host": "10.0.0.%d" % i, "labels": ["worker"]} for i in (1, 2, 3)]


def bucket_with(tmp_path, scripts, api_manifest=None, db_manifest=None):
    api_manifest = api_manifest or {"version": "2.0.0", "selectors": ["worker"], "commands": {
        name: {"executed_on": events} for name, (events, _x) in scripts.items()}}
    db_manifest = db_manifest or {"version": "1.0.0", "selectors": ["worker"],
                                  "commands": {"command_schema": {"executed_on": ["cli"]}}}
    root = make_bucket(tmp_path / "b", WORKERS, {"api": api_manifest, "db": db_manifest})
    for name, (_x, body) in scripts.items():
        write(os.path.join(root, "workspace", "jobs", "api", "_modules", name + ".py"), textwrap.dedent(body))
    result = _build.build(root)
    assert result.report.ok, result.report
    with open(os.path.join(root, "data", "catalog.json"), encoding="utf-8") as handle:
        return root, json.load(handle)


def context(root, catalog, api, **kw):
    return _hook_run.Context(root, catalog, api, os.path.join(root, "data", ".hooks"), **kw)


def test_maands_helper_idioms_write_the_kv(tmp_path):
    script = """
        import json, os
        from maand import put_job_secret, put_job_variable, get_kv_value, list_job_keys, allocation_index
        import maand
        put_job_variable("db_host", "db.internal").raise_for_status()
        put_job_secret("db_password", "s3cret-" + allocation_index()).raise_for_status()
        assert get_kv_value("secrets/job/api", "db_password").startswith("s3cret-")
        assert get_kv_value("maand/job/api", "name") == "api"
        assert maand.kv.get("vars/job/api", "nope") is None
        print("keys", json.dumps(list_job_keys().json()["namespaces"], sort_keys=True))
        print("env", os.environ["JOB"], os.environ["EVENT"], os.environ["COMMAND"], os.environ["NEW_VERSION"],
              os.environ["ALLOCATION_IP"], os.getcwd().endswith("/jobs/api/_modules"))
    """
    root, catalog = bucket_with(tmp_path, {"command_bootstrap": (["pre_deploy"], script)})
    with RuntimeAPI(root, catalog) as api:
        outcome = _hook_run.run_event(context(root, catalog, api), "api", "pre_deploy")
    assert outcome.ok, outcome.failures()
    assert len(outcome.results) == 3
    assert any("env api pre_deploy command_bootstrap 2.0.0 10.0.0." in line and line.endswith("True")
               for line in outcome.results[0].output)
    store = _kv_store.KVStore.load(root)
    assert store.get("vars/job/api", "db_host") == "db.internal"
    assert store.get("secrets/job/api", "db_password", reveal_secrets=True).startswith("s3cret-")
    raw = open(os.path.join(root, "data", "kv.json"), encoding="utf-8").read()
    assert "s3cret" not in raw  # encrypted on disk


def test_refused_writes_fail_the_hook_even_when_the_script_ignores_them(tmp_path):
    script = """
        import maand, requests_free_marker
    """
    script = """
        import maand
        r = maand._request("PUT", "/kv", {"namespace": "vars/job/db", "key": "x", "value": "1"})
        print("status", r.status_code, r.text.strip())
        r = maand.put_job_variable("bad key", "1")
        print("status", r.status_code, r.text.strip())
        r = maand.put_rollout_order(["10.0.0.2"])   # allowed on cli only among these two
        print("rollout", r.status_code)
    """
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli", "post_deploy"], script)})
    with RuntimeAPI(root, catalog) as api:
        ctx = context(root, catalog, api)
        targets = _hooks.targets(catalog, "api")[:1]
        post = _hook_run.run_event(ctx, "api", "post_deploy", targets)
        cli = _hook_run.run_event(ctx, "api", "cli", targets)
    assert not post.ok
    msg = post.failures()[0]
    assert msg.startswith("job api command command_x (event post_deploy) on 10.0.0.")
    assert "refused 3 write(s)" in msg and "Invalid or unauthorized namespace" in msg and "Invalid key" in msg
    assert "status 400 Invalid or unauthorized namespace" in msg  # the output tail
    assert not cli.ok and "refused 2 write(s)" in cli.failures()[0] and "rollout 200" in cli.failures()[0]
    assert _kv_store.KVStore.load(root).get("maand/job/api", "rollout_order") == "10.0.0.2"


def test_maands_older_deploy_order_names_still_order_the_rollout(tmp_path):
    """maand.py before June 2026: put_deploy_order / get_deploy_order and the raw key deploy_order."""
    script = """
        import maand
        maand.put_deploy_order(["10.0.0.3", "10.0.0.1", "10.0.0.2"]).raise_for_status()
        print("got", maand.get_deploy_order().json()["value"])
        maand._request("PUT", "/kv", {"namespace": "maand/job/api", "key": "deploy_order",
                                      "value": "10.0.0.2,10.0.0.3,10.0.0.1"}).raise_for_status()
    """
    root, catalog = bucket_with(tmp_path, {"command_order": (["cli"], script)})
    with RuntimeAPI(root, catalog) as api:
        outcome = _hook_run.run_event(context(root, catalog, api), "api", "cli", _hooks.targets(catalog, "api")[:1])
    assert outcome.ok, outcome.failures()
    assert "got 10.0.0.3,10.0.0.1,10.0.0.2" in outcome.results[0].output
    assert _kv_store.KVStore.load(root).get("maand/job/api", "rollout_order") == "10.0.0.2,10.0.0.3,10.0.0.1"


def test_health_check_commands_run_one_at_a_time_and_stop_hooks_get_maands_env(tmp_path):
    """maand docs/reference/cli/health-check.md: within a job, concurrency 1; deploy/batch_hooks.go:
    after_allocation_stopped gets an empty ROLLOUT_ORDER and ROLLOUT_ORDER_SOURCE."""
    log = str(tmp_path / "events.log")
    health = """
        import os, time
        with open(%r, "a") as f: f.write("start " + os.environ["ALLOCATION_IP"] + chr(10))
        time.sleep(0.2)
        with open(%r, "a") as f: f.write("end " + os.environ["ALLOCATION_IP"] + chr(10))
    """ % (log, log)
    stopped = """
        import os, sys
        env = [os.environ[k] for k in ("ROLLOUT_ORDER", "ROLLOUT_ORDER_SOURCE", "DEPLOY_PHASE", "BATCH_ALLOCATIONS")]
        print("env", env)
        sys.exit(0 if env == ["", "", "stop", "10.0.0.2"] else 1)
    """
    root, catalog = bucket_with(tmp_path, {"command_health": (["health_check"], health),
                                           "command_stopped": (["after_allocation_stopped"], stopped)})
    gate = {"job": "api", "hosts": [w["host"] for w in WORKERS], "hooks": {"phase": "new", "last": False}}
    with RuntimeAPI(root, catalog) as api:
        ctx = context(root, catalog, api)
        assert _hook_deploy.run_gate_hooks(ctx, gate, lambda g: []) == []
        assert _hook_deploy.after_stops(ctx, [{"job": "api", "host": "10.0.0.2", "target": "stop"}]) == []
    events = open(log, encoding="utf-8").read().splitlines()
    assert [e.split()[0] for e in events] == ["start", "end"] * 3, events  # never two at once
    assert [e.split()[1] for e in events[::2]] == [e.split()[1] for e in events[1::2]]


def test_health_check_is_read_only(tmp_path):
    script = """
        import maand
        print(maand.put_job_variable("k", "v").text.strip())
    """
    root, catalog = bucket_with(tmp_path, {"command_health": (["health_check"], script)})
    with RuntimeAPI(root, catalog) as api:
        out = _hook_run.run_event(context(root, catalog, api), "api", "health_check", _hooks.targets(catalog, "api")[:1])
    assert not out.ok and "KV writes are not allowed during health_check" in out.failures()[0]
    assert _kv_store.KVStore.load(root).get("vars/job/api", "k") is None


def test_timeout_kills_the_hook_and_its_children(tmp_path):
    script = """
        import subprocess, time, os
        child = subprocess.Popen(["sleep", "300"])
        open(os.environ["PIDFILE"], "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(300)
    """
    root, catalog = bucket_with(tmp_path, {"command_hang": (["post_deploy"], script)})
    pidfile = str(tmp_path / "child.pid")
    with RuntimeAPI(root, catalog) as api:
        started = time.monotonic()
        out = _hook_run.run_event(context(root, catalog, api, timeout=2), "api", "post_deploy",
                                  _hooks.targets(catalog, "api")[:1], extra={"PIDFILE": pidfile})
    assert time.monotonic() - started < 30
    msg = out.failures()[0]
    assert "job api command command_hang (event post_deploy)" in msg and "timed out after 2s" in msg
    assert "started" in msg
    child = int(open(pidfile).read())
    time.sleep(0.2)
    assert not os.path.exists("/proc/%d" % child) or "Z" in open("/proc/%d/stat" % child).read().split()[2]


def test_crash_reports_the_tail_and_stops_later_commands(tmp_path):
    crash = """
        for i in range(50):
            print("line", i)
        raise SystemExit("migration failed: table locked")
    """
    later = """
        import maand
        maand.put_job_variable("ran", "yes").raise_for_status()
    """
    root, catalog = bucket_with(tmp_path, {"command_a": (["pre_deploy"], crash), "command_b": (["pre_deploy"], later)})
    with RuntimeAPI(root, catalog) as api:
        out = _hook_run.run_event(context(root, catalog, api, tail=5), "api", "pre_deploy")
    assert not out.ok
    msg = out.failures()[0]
    assert "exit status 1" in msg and "migration failed: table locked" in msg and "line 46" in msg and "line 40" not in msg
    assert {r.command for r in out.results} == {"command_a"}
    assert _kv_store.KVStore.load(root).get("vars/job/api", "ran") is None


def test_semaphore_serialises_allocations(tmp_path):
    script = """
        import os, time, maand
        maand.acquire_semaphore("migrate", capacity=1, timeout_seconds=60).raise_for_status()
        try:
            with open(os.environ["LOG"], "a") as f:
                f.write("in %s\\n" % maand.allocation_ip()); f.flush()
                time.sleep(0.3)
                f.write("out %s\\n" % maand.allocation_ip())
        finally:
            maand.release_semaphore("migrate").raise_for_status()
    """
    root, catalog = bucket_with(tmp_path, {"command_m": (["pre_deploy"], script)})
    log = str(tmp_path / "log")
    with RuntimeAPI(root, catalog) as api:
        out = _hook_run.run_event(context(root, catalog, api), "api", "pre_deploy", extra={"LOG": log}, concurrency=3)
    assert out.ok, out.failures()
    lines = open(log).read().split()
    pairs = list(zip(lines[0::4], lines[1::4], lines[2::4], lines[3::4]))
    assert len(pairs) == 3 and all(a == "in" and c == "out" and b == d for a, b, c, d in pairs)


def test_raw_http_needs_maands_headers_and_a_right_token_if_any(tmp_path):
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], "")})
    alloc = _hooks.targets(catalog, "api")[0]
    with RuntimeAPI(root, catalog) as api:
        token, _x = api.open_session("api", alloc.worker, alloc.alloc_id, "cli", "command_x")

        def call(headers, body=b'{"namespace": "maand/bucket", "key": "bucket_id"}'):
            req = urllib.request.Request("http://127.0.0.1:%d/kv" % api.port, data=body, method="GET", headers=headers)
            try:
                with urllib.request.urlopen(req) as resp:
                    return resp.status, resp.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()
        base = {"Content-Type": "application/json", "X-ALLOCATION-ID": alloc.alloc_id, "EVENT": "cli",
                "COMMAND": "command_x"}
        assert call({k: v for k, v in base.items() if k != "X-ALLOCATION-ID"}) == (400, "X-ALLOCATION-ID header is missing\n")
        assert call(dict(base, **{"X-ALLOCATION-ID": "nope"}))[0] == 404
        # maand's own clients send no token: the headers name the one running hook
        status, body = call(base)
        assert status == 200 and json.loads(body)["value"] == catalog["bucket_id"]
        assert call(dict(base, EVENT="pre_deploy"))[0] == 401  # no hook of that event runs
        assert call(dict(base, **{"X-MAAND-TOKEN": "forged"}))[0] == 401  # a token, if sent, must be right
        assert call(dict(base, EVENT="pre_deploy", **{"X-MAAND-TOKEN": token}))[0] == 400
        status, body = call(dict(base, **{"X-MAAND-TOKEN": token}))
        assert status == 200 and json.loads(body)["value"] == catalog["bucket_id"]
        assert call(dict(base, **{"X-MAAND-TOKEN": token, "Content-Type": "text/plain"}))[0] == 415
        assert call(dict(base, **{"X-MAAND-TOKEN": token}), b"{not json")[0] == 400
        # reads: the job's namespaces and upstream demands only
        assert call(dict(base, **{"X-MAAND-TOKEN": token}), b'{"namespace": "vars/job/db", "key": "x"}') == (
            400, "Invalid or unauthorized namespace\n")
        twin, _y = api.open_session("api", alloc.worker, alloc.alloc_id, "cli", "command_x")
        assert call(base)[0] == 401  # two hooks with the same headers: only a token tells them apart
        assert call(dict(base, **{"X-MAAND-TOKEN": twin}))[0] == 200
        api.close_session(twin)
        api.close_session(token)
        assert call(dict(base, **{"X-MAAND-TOKEN": token}))[0] == 401
        assert call(base)[0] == 401


def test_a_maand_hook_calling_localhost_8080_itself_runs_unchanged(tmp_path):
    """A script as maand documents the API (docs/reference/job-command-api.md): plain HTTP to
    $JOB_COMMAND_API_HOST:8080 with maand's headers, no token, no maand module."""
    script = """
        import json, os, urllib.request
        def call(method, body):
            req = urllib.request.Request("http://%s:8080/kv" % os.environ["JOB_COMMAND_API_HOST"], method=method,
                                         data=json.dumps(body).encode(), headers={
                "Content-Type": "application/json", "X-ALLOCATION-ID": os.environ["ALLOCATION_ID"],
                "EVENT": os.environ["EVENT"], "COMMAND": os.environ["COMMAND"]})
            with urllib.request.urlopen(req) as resp:
                return resp.read().decode()
        call("PUT", {"namespace": "vars/job/api", "key": "seen", "value": os.environ["ALLOCATION_IP"]})
        print(json.loads(call("GET", {"namespace": "maand/bucket", "key": "bucket_id"}))["value"])
    """
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], script)})
    with RuntimeAPI(root, catalog) as api:
        if api.port != 8080:
            pytest.skip("127.0.0.1:8080 is taken on this machine (another run's API): the API took port %d" % api.port)
        target = _hooks.targets(catalog, "api")[0]
        out = _hook_run.run_event(context(root, catalog, api), "api", "cli", [target])
    assert out.ok, out.failures()
    assert out.results[0].output[-1] == catalog["bucket_id"]
    assert _kv_store.KVStore.load(root).get("vars/job/api", "seen") == target.worker


def test_demands_lists_the_commands_that_demand_this_one(tmp_path):
    script = """
        import json, maand
        print(json.dumps(maand.list_command_demands().json()))
    """
    api_manifest = {"version": "2.0.0", "selectors": ["worker"], "commands": {
        "command_migrate": {"executed_on": ["cli"], "demands": {"job": "db", "command": "command_schema",
                                                                "config": {"min_version": "1.0.0"}}}}}
    db_manifest = {"version": "1.0.0", "selectors": ["worker"], "commands": {"command_schema": {"executed_on": ["cli"]}}}
    root, catalog = bucket_with(tmp_path, {}, api_manifest, db_manifest)
    write(os.path.join(root, "workspace", "jobs", "api", "_modules", "command_migrate.py"), "")
    write(os.path.join(root, "workspace", "jobs", "db", "_modules", "command_schema.py"), textwrap.dedent(script))
    with RuntimeAPI(root, catalog) as api:
        out = _hook_run.run_event(context(root, catalog, api), "db", "cli", _hooks.targets(catalog, "db")[:1])
    assert out.ok, out.failures()
    assert json.loads(out.results[0].output[-1]) == [
        {"job": "api", "command": "command_migrate", "demand_config": {"min_version": "1.0.0"}}]


def test_missing_runtime_and_missing_script_are_named(tmp_path):
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], "")})
    os.remove(os.path.join(root, "workspace", "jobs", "api", "_modules", "command_x.py"))
    write(os.path.join(root, "workspace", "jobs", "api", "_modules", "command_x.ts"), "console.log(1)\n")
    with RuntimeAPI(root, catalog) as api:
        out = _hook_run.run_event(context(root, catalog, api), "api", "cli", _hooks.targets(catalog, "api")[:1])
    if not _hooks.shutil.which("bun"):
        assert "command_x.ts needs bun on the controller" in out.failures()[0]
    assert threading.active_count() >= 1


def test_many_hooks_calling_at_once_are_all_served(tmp_path):
    """64 allocations' hooks call the API in the same instant (the listen backlog was 5: resets)."""
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], "")})
    alloc = _hooks.targets(catalog, "api")[0]
    with RuntimeAPI(root, catalog) as api:
        tokens = [api.open_session("api", alloc.worker, alloc.alloc_id, "cli", "command_x")[0] for _n in range(64)]
        barrier = threading.Barrier(64)
        statuses = []

        def call(token):
            headers = {"Content-Type": "application/json", "X-ALLOCATION-ID": alloc.alloc_id, "EVENT": "cli",
                       "COMMAND": "command_x", "X-MAAND-TOKEN": token}
            req = urllib.request.Request("http://127.0.0.1:%d/kv" % api.port, method="GET", headers=headers,
                                         data=b'{"namespace": "maand/bucket", "key": "bucket_id"}')
            barrier.wait()
            with urllib.request.urlopen(req, timeout=30) as resp:
                statuses.append(resp.status)
        threads = [threading.Thread(target=call, args=(t,)) for t in tokens]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert statuses == [200] * 64


def test_the_allocations_certificates_are_staged_next_to_the_script(tmp_path):
    script = """
        import os, stat
        for name in ("tls.crt", "tls.key", "ca.crt"):
            path = os.path.join("certs", name)
            print(name, open(path).read().split("\\n")[0], oct(stat.S_IMODE(os.stat(path).st_mode)))
    """
    api_manifest = {"version": "2.0.0", "selectors": ["worker"], "certs": {"tls": {"subject": {"common_name": "api"}}},
                    "commands": {"command_c": {"executed_on": ["cli"]}}}
    root, catalog = bucket_with(tmp_path, {"command_c": (["cli"], script)}, api_manifest)
    with RuntimeAPI(root, catalog) as api:
        out = _hook_run.run_event(context(root, catalog, api), "api", "cli", _hooks.targets(catalog, "api")[:1])
    assert out.ok, out.failures()
    lines = out.results[0].output
    assert lines[0] == "tls.crt -----BEGIN CERTIFICATE----- 0o644"
    assert lines[1].startswith("tls.key -----BEGIN ") and lines[1].endswith("PRIVATE KEY----- 0o600")
    assert lines[2] == "ca.crt -----BEGIN CERTIFICATE----- 0o644"
