"""A zero-drop rolling upgrade behind a real load balancer (issue 30 item 1): Debian's haproxy as job `lb` on one
worker of the bucket, in front of job `web` on three others (a python3 HTTP server that answers in 0.3 s and
dies at once on `make stop`, as many real services do), haproxy's runtime API on a TCP admin socket and its
health checks. Client threads count the requests through haproxy that fail during each rolling upgrade
(max_concurrent_upgrades 1).

One bucket, one 4-host fleet, steps in file order:
1. first deploy: haproxy and the three backends; every backend UP in haproxy;
2. an upgrade without a drain loses requests (those in flight at each stop: haproxy's `retries` only cover a
   connection that fails, not a request a dying backend swallowed). This is the half that proves the test can
   fail: 8 client threads keep about 2.7 requests on each backend at any moment, so every stop cuts some;
3. the same upgrade with `before_allocation_stopped` (set the batch's server to drain in haproxy, wait until its
   sessions are 0), `shutdown_delay` and `after_allocation_started` (set it ready again) loses none, and every
   backend runs the new version;
4. a before_allocation_stopped that fails leaves its batch untouched (the backend keeps its process and version)
   and fails the job, naming job, command, worker and the command's output.

MAAND_CALLBACK_CAPTURE=<dir> keeps the deploys' output there (docs/deploy.md shows it).
"""

from __future__ import annotations

import csv
import http.client
import inspect
import io
import json
import os
import re
import socket
import threading
import time

import pytest

from tests.integration.deploy.bucket import add_job, fleet_bucket, pid_makefile
from tests.integration.deploy.env import Env, capture

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

FRONT, ADMIN, WEB = 31080, 31081, 31090
CLIENTS = 8
HAPROXY = "/usr/sbin/haproxy"

SERVER_PY = """\
import http.server, socketserver, sys, time

VERSION = open("version.txt").read().strip()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/health":
            time.sleep(0.3)  # a slow answer: requests are in flight when a stop comes
        body = VERSION.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


Server(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()  # SIGTERM: gone at once, mid-request
"""


def query(address, port, command):
    """haproxy's answer to command on its runtime API at address:port (here and in the hooks' lb_admin.py)."""
    with socket.create_connection((address, port), timeout=5) as sock:
        sock.sendall(command.encode() + b"\n")
        out = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return out.decode()
            out += chunk


def stat_rows(answer):
    """The rows of haproxy's `show stat` answer (CSV, its header after a '# ')."""
    return list(csv.DictReader(io.StringIO(answer.lstrip("# "))))


# the load balancer's runtime API from a hook (its cwd is the staged _modules/): lb.json says where it listens
LB_ADMIN_PY = "import csv, io, json, os, socket\n\n\n" + inspect.getsource(query) + "\n\n" + inspect.getsource(stat_rows) + """

def admin(command):
    conf = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lb.json")))
    return query(conf["address"], conf["admin_port"], command)


def server_name(ip):
    return "s_" + ip.replace(".", "_")


def sessions(name):
    return [int(r["scur"]) for r in stat_rows(admin("show stat")) if r["pxname"] == "be" and r["svname"] == name]
"""

DRAIN_PY = """\
import os, sys, time
import lb_admin

name = lb_admin.server_name(os.environ["ALLOCATION_IP"])
if os.environ.get("MAAND_HOOK_DRAIN_FAIL"):
    sys.exit("refusing to drain be/%s: MAAND_HOOK_DRAIN_FAIL is set" % name)
answer = lb_admin.admin("set server be/%s state drain" % name).strip()
if answer:
    sys.exit("haproxy: " + answer)
deadline = time.monotonic() + 30
while lb_admin.sessions(name) != [0]:
    if time.monotonic() > deadline:
        sys.exit("be/%s still has sessions after 30 s: %s" % (name, lb_admin.sessions(name)))
    time.sleep(0.05)
print("be/%s drained (batch %s of %s: %s)" % (name, os.environ["BATCH_INDEX"], os.environ["BATCH_COUNT"],
                                              os.environ["BATCH_ALLOCATIONS"]))
"""

READY_PY = """\
import os, sys
import lb_admin

name = lb_admin.server_name(os.environ["ALLOCATION_IP"])
answer = lb_admin.admin("set server be/%s state ready" % name).strip()
if answer:
    sys.exit("haproxy: " + answer)
print("be/%s ready" % name)
"""

HAPROXY_CFG = """\
global
    stats socket ipv4@0.0.0.0:{admin} level admin
    stats timeout 10s

defaults
    mode http
    timeout connect 1s
    timeout client 10s
    timeout server 10s
    retries 3
    option redispatch

frontend fe
    bind 0.0.0.0:{front}
    default_backend be

backend be
    balance roundrobin
    option httpchk GET /health
    default-server check inter 300ms fall 2 rise 2
{servers}
"""


def server_name(ip):
    return "s_" + ip.replace(".", "_")


class Drain(Env):
    def __init__(self, fleet, bucket):
        super().__init__(fleet, bucket)
        self.env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="maand.core.deploy", MAAND_DEPLOY_LIVE="never")
        self.lb, self.backends = self.hosts[0], self.hosts[1:]

    def set_web(self, version, drain=False):
        extra = {}
        if drain:
            extra = {"commands": {"command_drain": {"executed_on": ["before_allocation_stopped"]},
                                  "command_ready": {"executed_on": ["after_allocation_started"]}},
                     "shutdown_delay": 1}
        add_job(self.bucket, "web", version=version, makefile=pid_makefile("web", "/usr/bin/python3 server.py %d" % WEB),
                selectors=["web"], max_concurrent_upgrades=1, resources={"ports": {"web_port": WEB}},
                health_check={"checks": [{"type": "http", "port": "web_port", "path": "/health"}],
                              "timeout_seconds": 2, "wait": {"attempts": 30, "interval_seconds": 0.3}},
                files={"server.py": SERVER_PY, "version.txt": "v%s\n" % version,
                       "_modules/lb_admin.py": LB_ADMIN_PY, "_modules/command_drain.py": DRAIN_PY,
                       "_modules/command_ready.py": READY_PY,
                       "_modules/lb.json": json.dumps({"address": self.lb, "admin_port": ADMIN}) + "\n"},
                **extra)
        self.build()

    def set_lb(self):
        servers = "\n".join("    server %s %s:%d" % (server_name(h), h, WEB) for h in self.backends)
        add_job(self.bucket, "lb", makefile=pid_makefile("lb", "%s -db -f haproxy.cfg" % HAPROXY), selectors=["lb"],
                resources={"ports": {"front_port": FRONT, "admin_port": ADMIN}},
                health_check={"checks": [{"type": "tcp", "port": "front_port"}], "timeout_seconds": 2,
                              "wait": {"attempts": 30, "interval_seconds": 0.3}},
                files={"haproxy.cfg": HAPROXY_CFG.format(admin=ADMIN, front=FRONT, servers=servers)})

    def admin(self, command):
        return query(self.lb, ADMIN, command)

    def servers(self):
        """{server: status (UP, DOWN, DRAIN, MAINT)} of backend be, from haproxy's own runtime API."""
        rows = stat_rows(self.admin("show stat"))
        skip = ("BACKEND", "FRONTEND")
        return {r["svname"]: r["status"] for r in rows if r["pxname"] == "be" and r["svname"] not in skip}

    def wait_all_up(self, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.servers() == {server_name(h): "UP" for h in self.backends}:
                return
            time.sleep(0.2)
        raise AssertionError("haproxy never saw every backend UP: %s" % self.servers())

    def served(self, host):
        """What a backend answers itself (its version)."""
        conn = http.client.HTTPConnection(host, WEB, timeout=5)
        try:
            conn.request("GET", "/")
            return conn.getresponse().read().decode().strip()
        finally:
            conn.close()

    def pid(self, host):
        return (self.job(host, "web") / "data" / "web.pid").read_text().strip()

    def upgrade(self, *args, check=True, env=None):
        """A deploy while CLIENTS threads keep requesting through haproxy: (rc, output, clients)."""
        clients = [Client(self.lb) for _i in range(CLIENTS)]
        for c in clients:
            c.start()
        try:
            time.sleep(1.5)
            rc, out = self.deploy(*args, check=check, env=env)
            time.sleep(1.5)
        finally:
            for c in clients:
                c.stopping.set()
            for c in clients:
                c.join(30)
        return rc, out, clients


class Client(threading.Thread):
    """Keeps requesting / through haproxy, one connection per request; counts what failed (an error or not 200)."""

    def __init__(self, address):
        super().__init__(daemon=True)
        self.address, self.ok, self.failed, self.errors, self.stopping = address, 0, 0, [], threading.Event()
        self.versions = set()

    def run(self):
        while not self.stopping.is_set():
            conn = http.client.HTTPConnection(self.address, FRONT, timeout=10)
            try:
                conn.request("GET", "/")
                resp = conn.getresponse()
                body = resp.read().decode().strip()
                if resp.status == 200:
                    self.ok += 1
                    self.versions.add(body)
                else:
                    self.failed += 1
                    self.errors.append("HTTP %d" % resp.status)
            except (OSError, http.client.HTTPException) as exc:
                self.failed += 1
                self.errors.append(repr(exc))
            finally:
                conn.close()


def totals(clients):
    return sum(c.ok for c in clients), sum(c.failed for c in clients), sorted({e for c in clients for e in c.errors})


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    if not os.access(HAPROXY, os.X_OK):
        pytest.fail("haproxy is not installed: run scripts/bootstrap.sh", pytrace=False)
    fleet = fleet_factory(4)
    bucket = fleet_bucket(tmp_path_factory.mktemp("drain") / "bucket", fleet.state_dir)
    workers = json.loads((bucket / "workspace" / "workers.json").read_text())
    for i, worker in enumerate(workers):
        worker["labels"] = ["lb"] if i == 0 else ["web"]
    (bucket / "workspace" / "workers.json").write_text(json.dumps(workers, indent=2) + "\n")
    e = Drain(fleet, bucket)
    e.set_lb()
    e.set_web("1.0.0")
    return e


def test_01_haproxy_in_front_of_three_backends(env):
    rc, out = env.deploy()
    capture("drain-first.log", out)
    assert "deploy done" in out, out
    env.wait_all_up()
    assert {env.served(h) for h in env.backends} == {"v1.0.0"}


def test_02_an_upgrade_without_a_drain_drops_requests(env):
    env.set_web("2.0.0")
    rc, out, clients = env.upgrade()
    capture("drain-none.log", out)
    ok, failed, errors = totals(clients)
    print("without a drain: %d ok, %d failed %s" % (ok, failed, errors))
    assert "deploy done: 3 restarted" in out, out
    assert ok > 50, (ok, failed, errors)  # the clients did run through the whole upgrade
    assert failed > 0, "no request failed without a drain: the test could not tell a drain from none (%d ok)" % ok
    assert {env.served(h) for h in env.backends} == {"v2.0.0"}
    env.wait_all_up()


def test_03_with_before_allocation_stopped_and_shutdown_delay_no_request_fails(env):
    env.set_web("3.0.0", drain=True)
    rc, preview = env.deploy("--check")
    assert ("note: job web: before each of its restart, reload or stop batches (3 allocation(s) in this plan): "
            "before_allocation_stopped (command_drain) then shutdown_delay 1 s") in preview, preview
    rc, out, clients = env.upgrade()
    capture("drain-haproxy.log", out)
    ok, failed, errors = totals(clients)
    print("with the drain: %d ok, %d failed %s" % (ok, failed, errors))
    assert "deploy done: 3 restarted" in out, out
    assert ok > 50 and failed == 0, (ok, failed, errors, out)
    for i, host in enumerate(env.backends):
        label = "web upgrade batch %d/3" % (i + 1)
        assert "drained: %s on %s (before_allocation_stopped passed)" % (label, host) in out, out
        assert "shutdown_delay: waiting 1 s before the stop or restart of %s on %s" % (label, host) in out, out
        assert env.served(host) == "v3.0.0" and env.record(host, "web")["version"] == "3.0.0"
    assert {c for cl in clients for c in cl.versions} >= {"v2.0.0", "v3.0.0"}
    env.wait_all_up()
    assert env.servers() == {server_name(h): "UP" for h in env.backends}  # after_allocation_started: ready again


def test_04_a_failing_before_allocation_stopped_leaves_its_batch_untouched_and_fails_the_job(env):
    first = env.backends[0]
    pids = {h: env.pid(h) for h in env.backends}
    env.set_web("4.0.0", drain=True)
    rc, out = env.deploy(check=False, env={"MAAND_HOOK_DRAIN_FAIL": "1"})
    capture("drain-failed.log", out)
    assert rc != 0, out
    assert "job web: before_allocation_stopped failed before web upgrade batch 1/3; the batch was not touched " \
           "(nothing stopped or restarted on %s)" % first in out, out
    assert "job web command command_drain (event before_allocation_stopped) on %s failed: exit status 1" % first in out
    assert "refusing to drain be/%s: MAAND_HOOK_DRAIN_FAIL is set" % server_name(first) in out, out
    assert not re.search(r"shutdown_delay: waiting", out), out
    assert re.search(r"^web +%s +restart +failed +- +3\.0\.0 \(4\.0\.0 not deployed\)$" % re.escape(first), out, re.M), out
    for host in env.backends:  # untouched: the same process, the same version, still in haproxy
        assert env.pid(host) == pids[host] and env.served(host) == "v3.0.0", host
        assert env.record(host, "web")["version"] == "3.0.0"
    assert env.servers() == {server_name(h): "UP" for h in env.backends}


def test_05_disabling_a_backend_drains_it_before_its_stop(env):
    last = env.backends[-1]
    env.set_web("3.0.0", drain=True)  # back to what runs: only the disabled allocation changes
    (env.bucket / "workspace" / "disabled.json").write_text(json.dumps({"jobs": {"web": {"allocations": [last]}}}))
    env.build()
    rc, out, clients = env.upgrade()
    capture("drain-stop.log", out)
    ok, failed, errors = totals(clients)
    print("disabling a backend: %d ok, %d failed %s" % (ok, failed, errors))
    assert "drained: web stop on %s (before_allocation_stopped passed)" % last in out, out
    assert "shutdown_delay: waiting 1 s before the stop or restart of web stop on %s" % last in out, out
    assert ok > 20 and failed == 0, (ok, failed, errors, out)
    assert env.servers()[server_name(last)] != "UP"  # drained, then stopped: haproxy sends it nothing
    with pytest.raises(OSError):
        env.served(last)
