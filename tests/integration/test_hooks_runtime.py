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

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.hooks import points as _points, run as _run, commands as _commands
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
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
    result = _service.build(root)
    assert result.report.ok, result.report
    with open(os.path.join(root, "data", "catalog.json"), encoding="utf-8") as handle:
        return root, json.load(handle)


def context(root, catalog, api, **kw):
    return _run.Context(root, catalog, api, os.path.join(root, "data", ".hooks"), **kw)


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
        outcome = _run.run_event(context(root, catalog, api), "api", "pre_deploy")
    assert outcome.ok, outcome.failures()
    assert len(outcome.results) == 3
    assert any("env api pre_deploy command_bootstrap 2.0.0 10.0.0." in line and line.endswith("True")
               for line in outcome.results[0].output)
    store = _store.KVStore.load(root)
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
        targets = _commands.targets(catalog, "api")[:1]
        post = _run.run_event(ctx, "api", "post_deploy", targets)
        cli = _run.run_event(ctx, "api", "cli", targets)
    assert not post.ok
    msg = post.failures()[0]
    assert msg.startswith("job api command command_x (event post_deploy) on 10.0.0.")
    assert "refused 3 write(s)" in msg and "Invalid or unauthorized namespace" in msg and "Invalid key" in msg
    assert "status 400 Invalid or unauthorized namespace" in msg  # the output tail
    assert not cli.ok and "refused 2 write(s)" in cli.failures()[0] and "rollout 200" in cli.failures()[0]
    assert _store.KVStore.load(root).get("maand/job/api", "rollout_order") == "10.0.0.2"


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
        outcome = _run.run_event(context(root, catalog, api), "api", "cli", _commands.targets(catalog, "api")[:1])
    assert outcome.ok, outcome.failures()
    assert "got 10.0.0.3,10.0.0.1,10.0.0.2" in outcome.results[0].output
    assert _store.KVStore.load(root).get("maand/job/api", "rollout_order") == "10.0.0.2,10.0.0.3,10.0.0.1"


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
        assert _points.run_gate_hooks(ctx, gate, lambda g: []) == []
        assert _points.after_stops(ctx, [{"job": "api", "host": "10.0.0.2", "target": "stop"}]) == []
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
        out = _run.run_event(context(root, catalog, api), "api", "health_check", _commands.targets(catalog, "api")[:1])
    assert not out.ok and "KV writes are not allowed during health_check" in out.failures()[0]
    assert _store.KVStore.load(root).get("vars/job/api", "k") is None


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
        out = _run.run_event(context(root, catalog, api, timeout=2), "api", "post_deploy",
                             _commands.targets(catalog, "api")[:1], extra={"PIDFILE": pidfile})
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
        out = _run.run_event(context(root, catalog, api, tail=5), "api", "pre_deploy")
    assert not out.ok
    msg = out.failures()[0]
    assert "exit status 1" in msg and "migration failed: table locked" in msg and "line 46" in msg and "line 40" not in msg
    assert {r.command for r in out.results} == {"command_a"}
    assert _store.KVStore.load(root).get("vars/job/api", "ran") is None


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
        out = _run.run_event(context(root, catalog, api), "api", "pre_deploy", extra={"LOG": log}, concurrency=3)
    assert out.ok, out.failures()
    lines = open(log).read().split()
    pairs = list(zip(lines[0::4], lines[1::4], lines[2::4], lines[3::4]))
    assert len(pairs) == 3 and all(a == "in" and c == "out" and b == d for a, b, c, d in pairs)


def _call(port, headers, body=b'{"namespace": "maand/bucket", "key": "bucket_id"}', method="GET", path="/kv"):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_caller_that_is_no_hook_gets_the_same_403_whatever_its_headers(tmp_path):
    """The test process is not a hook: maand's headers of an open hook (guessable) are not enough, a known
    and an unknown allocation id get the same answer (no oracle); the hook's token is."""
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], "")})
    alloc = _commands.targets(catalog, "api")[0]
    import subprocess
    hook = subprocess.Popen(["sleep", "120"], start_new_session=True)  # the hook: the test is not in its tree
    with RuntimeAPI(root, catalog) as api:
        token, _x = api.open_session("api", alloc.worker, alloc.alloc_id, "cli", "command_x")
        api.set_pid(token, hook.pid)
        base = {"Content-Type": "application/json", "X-ALLOCATION-ID": alloc.alloc_id, "EVENT": "cli",
                "COMMAND": "command_x"}
        refusal = _call(api.port, base)
        assert refusal[0] == 403 and "not a running hook" in refusal[1]
        assert _call(api.port, dict(base, **{"X-ALLOCATION-ID": "0" * 32})) == refusal
        assert _call(api.port, {k: v for k, v in base.items() if k != "X-ALLOCATION-ID"}) == refusal
        assert _call(api.port, dict(base, **{"X-MAAND-TOKEN": "forged"})) == refusal
        put = b'{"namespace": "vars/job/api", "key": "planted", "value": "x"}'
        assert _call(api.port, base, put, "PUT") == refusal
        assert _store.KVStore.load(root).get("vars/job/api", "planted") is None
        # with the hook's token: maand's answers
        own = dict(base, **{"X-MAAND-TOKEN": token})
        assert _call(api.port, {k: v for k, v in own.items() if k != "X-ALLOCATION-ID"}) == (
            400, "X-ALLOCATION-ID header is missing\n")
        assert _call(api.port, dict(own, EVENT="pre_deploy"))[0] == 400  # the token's hook is a cli hook
        status, body = _call(api.port, own)
        assert status == 200 and json.loads(body)["value"] == catalog["bucket_id"]
        assert _call(api.port, dict(own, **{"Content-Type": "text/plain"}))[0] == 415
        assert _call(api.port, own, b"{not json")[0] == 400
        assert _call(api.port, own, b'{"namespace": "vars/job/db", "key": "x"}') == (
            400, "Invalid or unauthorized namespace\n")
        twin, _y = api.open_session("api", alloc.worker, alloc.alloc_id, "cli", "command_x")
        assert _call(api.port, dict(base, **{"X-MAAND-TOKEN": twin}))[0] == 200
        api.close_session(twin)
        api.close_session(token)
        assert _call(api.port, own) == refusal
    hook.kill()
    hook.wait()


def test_requests_are_bounded_and_the_host_is_loopback(tmp_path):
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], "")})
    alloc = _commands.targets(catalog, "api")[0]
    with RuntimeAPI(root, catalog) as api:
        token, _x = api.open_session("api", alloc.worker, alloc.alloc_id, "cli", "command_x")
        own = {"Content-Type": "application/json", "X-ALLOCATION-ID": alloc.alloc_id, "EVENT": "cli",
               "COMMAND": "command_x", "X-MAAND-TOKEN": token}

        def raw(head):
            import socket
            with socket.create_connection(("127.0.0.1", api.port), timeout=10) as conn:
                conn.sendall(head.encode())
                return conn.recv(4096).decode().split("\r\n")[0]
        headers = "".join("%s: %s\r\n" % kv for kv in own.items())
        assert raw("GET /kv HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000000000\r\n%s\r\n" % headers) \
            == "HTTP/1.1 413 Request Entity Too Large"
        assert raw("GET /kv HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n%s\r\n" % headers) \
            == "HTTP/1.1 400 Bad Request"
        assert raw("GET /kv HTTP/1.1\r\nHost: evil.example:%d\r\nContent-Length: 0\r\n%s\r\n" % (api.port, headers)) \
            == "HTTP/1.1 403 Forbidden"
        for bad in (b'{"name": "m", "capacity": "x"}', b'{"name": "m", "timeout_seconds": [1]}',
                    b'{"name": "bad name", "capacity": 1}'):
            status, _body = _call(api.port, own, bad, "POST", "/semaphore/acquire")
            assert status == 400, bad
        status, body = _call(api.port, own)  # the API still serves
        assert status == 200 and json.loads(body)["value"] == catalog["bucket_id"]


STRANGER = """
import json, sys, urllib.request
port, alloc, event, command = sys.argv[1:5]
headers = {"Content-Type": "application/json", "X-ALLOCATION-ID": alloc, "EVENT": event, "COMMAND": command}
out = []
for method, path, body in (("GET", "/kv", {"namespace": "secrets/job/api", "key": "db_password"}),
                           ("PUT", "/kv", {"namespace": "vars/job/api", "key": "planted", "value": "evil"}),
                           ("PUT", "/kv/secret", {"namespace": "secrets/job/api", "key": "db_password", "value": "evil"})):
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path), data=json.dumps(body).encode(), method=method,
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            out.append([resp.status, resp.read().decode()])
    except urllib.error.HTTPError as exc:
        out.append([exc.code, exc.read().decode()])
print(json.dumps(out))
"""


def test_a_second_process_with_the_hooks_headers_is_refused_while_the_hook_and_its_children_are_served(tmp_path):
    """The attack of the security review: while a hook runs, another local process sends its (guessable)
    X-ALLOCATION-ID, EVENT and COMMAND to read the job's secret and plant values. It gets 403 and nothing
    changes; the hook itself (raw HTTP, no token, no maand module) and a process it started are served."""
    script = """
        import json, os, subprocess, sys, time, urllib.request
        port = os.environ["MAAND_RUNTIME_API_PORT"]
        def call(method, body, path="/kv"):
            req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path), method=method, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", "EVENT": os.environ["EVENT"],
                                                  "X-ALLOCATION-ID": os.environ["ALLOCATION_ID"],
                                                  "COMMAND": os.environ["COMMAND"]})
            with urllib.request.urlopen(req) as resp:
                return resp.read().decode()
        os.environ.pop("MAAND_RUNTIME_API_TOKEN")  # a raw maand hook: no token
        call("PUT", {"namespace": "secrets/job/api", "key": "db_password", "value": "hunter2"}, "/kv/secret")
        open(os.environ["READY"], "w").write("ready")
        while not os.path.exists(os.environ["GO"]):
            time.sleep(0.05)
        print("own", json.loads(call("GET", {"namespace": "secrets/job/api", "key": "db_password"}))["value"])
        child = subprocess.run([sys.executable, "-c", "import maand_child"], capture_output=True, text=True)
        print("child", child.returncode, child.stdout.strip(), child.stderr.strip()[-300:])
        planted = call("GET", {"namespace": "vars/job/api", "key": "from_child"})
        print("planted", json.loads(planted)["value"])
    """
    child = """
        import json, os, urllib.request
        req = urllib.request.Request("http://127.0.0.1:%s/kv" % os.environ["MAAND_RUNTIME_API_PORT"], method="PUT",
                                     data=json.dumps({"namespace": "vars/job/api", "key": "from_child",
                                                      "value": "grandchild"}).encode(),
                                     headers={"Content-Type": "application/json", "EVENT": os.environ["EVENT"],
                                              "X-ALLOCATION-ID": os.environ["ALLOCATION_ID"], "COMMAND": os.environ["COMMAND"]})
        urllib.request.urlopen(req).read()
        print("child ok")
    """
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], script)})
    write(os.path.join(root, "workspace", "jobs", "api", "_modules", "maand_child.py"), textwrap.dedent(child))
    ready, go = str(tmp_path / "ready"), str(tmp_path / "go")
    target = _commands.targets(catalog, "api")[0]
    with RuntimeAPI(root, catalog) as api:
        outcome = {}
        runner = threading.Thread(target=lambda: outcome.update(out=_run.run_event(
            context(root, catalog, api, timeout=60), "api", "cli", [target], extra={"READY": ready, "GO": go})))
        runner.start()
        deadline = time.monotonic() + 60
        while not os.path.exists(ready) and time.monotonic() < deadline and runner.is_alive():
            time.sleep(0.05)
        assert os.path.exists(ready), outcome
        import subprocess
        import sys
        stranger = subprocess.run([sys.executable, "-c", STRANGER, str(api.port), target.alloc_id, "cli", "command_x"],
                                  capture_output=True, text=True, timeout=60, check=False)
        open(go, "w").write("go")
        runner.join(120)
    answers = json.loads(stranger.stdout)
    assert [a[0] for a in answers] == [403, 403, 403], answers
    assert "hunter2" not in stranger.stdout
    out = outcome["out"]
    assert out.ok, out.failures()
    lines = out.results[0].output
    assert "own hunter2" in lines and "planted grandchild" in lines, lines
    store = _store.KVStore.load(root)
    assert store.get("vars/job/api", "planted") is None
    assert store.get("secrets/job/api", "db_password", reveal_secrets=True) == "hunter2"


def _in_own_network(test_name):
    """Run this test again in a network namespace of its own (root, unshare): 127.0.0.1:8080 is then this
    test's alone, whatever other runs on the machine hold. True when the caller is that rerun."""
    if os.environ.get("MAAND_TEST_OWN_NETNS") == test_name:
        return True
    if os.geteuid() != 0 or not _commands.shutil.which("unshare") or not _commands.shutil.which("ip"):
        pytest.skip("needs root and unshare for a network namespace of its own")
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', sys.executable,
                           "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "%s::%s" % (os.path.abspath(__file__), test_name)],
                          cwd=repo, capture_output=True, text=True, timeout=600, check=False,
                          env=dict(os.environ, MAAND_TEST_OWN_NETNS=test_name))
    assert proc.returncode == 0 and "\n1 passed" in proc.stdout, proc.stdout[-4000:] + proc.stderr[-2000:]
    return False


RAW_8080 = """
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


def test_a_maand_hook_calling_localhost_8080_itself_runs_unchanged(tmp_path):
    """A script as maand documents the API (docs/reference/job-command-api.md): plain HTTP to
    $JOB_COMMAND_API_HOST:8080 with maand's headers, no token, no maand module."""
    if not _in_own_network("test_a_maand_hook_calling_localhost_8080_itself_runs_unchanged"):
        return
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], RAW_8080)})
    with RuntimeAPI(root, catalog) as api:
        assert api.port == 8080 and not api.notice and not api.refusal
        target = _commands.targets(catalog, "api")[0]
        out = _run.run_event(context(root, catalog, api), "api", "cli", [target])
    assert out.ok, out.failures()
    assert out.results[0].output[-1] == catalog["bucket_id"]
    assert _store.KVStore.load(root).get("vars/job/api", "seen") == target.worker


def test_8080_held_by_another_user_fails_the_hooks_naming_it_and_by_this_user_moves_and_says_so(tmp_path):
    """The security review's squat: whoever binds 127.0.0.1:8080 first would receive the PUTs of raw hooks.
    Another user's listener: no hook runs, each fails naming the process. This user's own (another run):
    the API takes another port and says so."""
    if not _in_own_network("test_8080_held_by_another_user_fails_the_hooks_naming_it_and_by_this_user_moves_and_says_so"):
        return
    import subprocess
    import sys
    squat = "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 8080)); s.listen(); print('up', flush=True); time.sleep(600)"
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], RAW_8080)})
    target = _commands.targets(catalog, "api")[0]
    for uid, expect_refusal in ((65534, True), (os.geteuid(), False)):
        proc = subprocess.Popen(["/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable, "-c", squat], stdout=subprocess.PIPE, text=True,
                                preexec_fn=(lambda: os.setuid(65534)) if uid != os.geteuid() else None)
        try:
            assert proc.stdout.readline().strip() == "up"
            with RuntimeAPI(root, catalog) as api:
                out = _run.run_event(context(root, catalog, api, timeout=10), "api", "cli", [target])
                if expect_refusal:
                    assert api.port == 0 and "pid %d (" % proc.pid in api.refusal and "uid 65534" in api.refusal
                    assert not out.ok and "pid %d" % proc.pid in out.failures()[0]
                    assert "Stop that process or free port 8080" in out.failures()[0]
                    assert out.results[0].rc is None and out.results[0].output == []  # never started
                else:
                    assert api.port not in (0, 8080) and "pid %d" % proc.pid in api.notice
                    assert "MAAND_RUNTIME_API_PORT" in api.notice
                    assert not out.ok  # the raw hook reached the squatter (which never answers), not the API
        finally:
            proc.kill()
            proc.wait()
    assert _store.KVStore.load(root).get("vars/job/api", "seen") is None


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
        out = _run.run_event(context(root, catalog, api), "db", "cli", _commands.targets(catalog, "db")[:1])
    assert out.ok, out.failures()
    assert json.loads(out.results[0].output[-1]) == [
        {"job": "api", "command": "command_migrate", "demand_config": {"min_version": "1.0.0"}}]


def test_missing_runtime_and_missing_script_are_named(tmp_path):
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], "")})
    os.remove(os.path.join(root, "workspace", "jobs", "api", "_modules", "command_x.py"))
    write(os.path.join(root, "workspace", "jobs", "api", "_modules", "command_x.ts"), "console.log(1)\n")
    with RuntimeAPI(root, catalog) as api:
        out = _run.run_event(context(root, catalog, api), "api", "cli", _commands.targets(catalog, "api")[:1])
    if not _commands.shutil.which("bun"):
        assert "command_x.ts needs bun on the controller" in out.failures()[0]
    assert threading.active_count() >= 1


def test_many_hooks_calling_at_once_are_all_served(tmp_path):
    """64 allocations' hooks call the API in the same instant (the listen backlog was 5: resets)."""
    root, catalog = bucket_with(tmp_path, {"command_x": (["cli"], "")})
    alloc = _commands.targets(catalog, "api")[0]
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
        out = _run.run_event(context(root, catalog, api), "api", "cli", _commands.targets(catalog, "api")[:1])
    assert out.ok, out.failures()
    lines = out.results[0].output
    assert lines[0] == "tls.crt -----BEGIN CERTIFICATE----- 0o644"
    assert lines[1].startswith("tls.key -----BEGIN ") and lines[1].endswith("PRIVATE KEY----- 0o600")
    assert lines[2] == "ca.crt -----BEGIN CERTIFICATE----- 0o644"
