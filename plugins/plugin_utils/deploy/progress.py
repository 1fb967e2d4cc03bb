# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a deploy's controller tasks say while they run: progress records (no Ansible imports).

Health gates run inside one controller task, so no task event shows their progress. The gate code
appends one JSON object per line to <run_dir>/progress.jsonl; the stdout callback
maand.core.deploy follows that file from a thread while the task runs, and the finish action reads
the gate times from it. Records (every one has "kind" and "t", seconds since the epoch):

    {"kind": "gate", "state": "wait", "job", "batch", "host", "check", "attempt", "attempts",
     "elapsed", "error"}                               a probe that has not passed yet
    {"kind": "gate", "state": "pass" | "fail", "job", "batch", "hosts", "elapsed", "attempts"}
    {"kind": "say", "msg", "color"}                    a line the task would have printed

A reader keeps its offset and returns only complete lines, so a record half written when it reads
comes whole the next time. A line that is not JSON is skipped (the file is only advice for the
screen: the run state decides the outcome).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import time
from collections.abc import Mapping
from typing import Any, Callable

from . import gate as _gate

PROGRESS_FILE = "progress.jsonl"


def progress_path(run_dir):
    return os.path.join(run_dir, PROGRESS_FILE)


class Writer:
    """Appends records to <run_dir>/progress.jsonl; never raises (progress is only for the screen)."""

    def __init__(self, run_dir, clock=time.time):
        self.path = progress_path(run_dir) if run_dir else ""
        self.clock = clock

    def write(self, record):
        if not self.path:
            return
        line = json.dumps(dict(record, t=round(self.clock(), 3)), sort_keys=True) + "\n"
        try:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
        except OSError:  # progress is only for the screen: a record that cannot be written is dropped
            pass

    def say(self, msg, color=None):
        self.write({"kind": "say", "msg": str(msg), "color": color})


def parse_lines(text):
    """(records, rest): the JSON objects of the complete lines of text, and the incomplete tail."""
    records = []
    *lines, rest = text.split("\n")
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "kind" in data:
            records.append(data)
    return records, rest


class Reader:
    """Follows a progress file: read() returns the records appended since the last call."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.rest = ""

    def read(self):
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        self.offset += len(data)
        records, self.rest = parse_lines(self.rest + data.decode("utf-8", "replace"))
        return records


def read_all(run_dir):
    """Every record of the run's progress file ([] when there is none)."""
    return Reader(progress_path(run_dir)).read() if run_dir else []


def gate_times(records):
    """{(job, host): seconds} from the gates that ended (the last end of a gate wins)."""
    out = {}
    for rec in records:
        if rec.get("kind") == "gate" and rec.get("state") in ("pass", "fail"):
            for host in rec.get("hosts") or []:
                out[(rec.get("job"), host)] = float(rec.get("elapsed") or 0.0)
    return out


# --- what the gate code writes -------------------------------------------------------------------

def check_label(check):
    """'http :30000/health', 'https :8443/', 'tcp :30000'."""
    if check.get("type") == "http":
        return "%s :%s%s" % (check.get("scheme") or "http", check.get("port"), check.get("path") or "/")
    return "%s :%s" % (check.get("type"), check.get("port"))


def batch_label(plan, gate):
    """The rolling batch a gate closes ("api start batch 1/3"): the plan's own label of the gate when it
    has one (the gate after a job's last start batch, a revert's gate), else from the plan's rows."""
    if gate.get("label"):
        return gate["label"]
    hosts = set(gate.get("hosts") or [])
    for row in plan.get("rows") or []:
        if row.get("job") == gate.get("job") and row.get("worker") in hosts and row.get("batch"):
            return row["batch"]
    return "%s gate" % gate.get("job")


class GateWatch:
    """The watch of one gate for deploy/gate.run_gate: writes wait / pass / fail records."""

    def __init__(self, writer, gate, batch):
        self.writer = writer
        self.gate = gate
        self.batch = batch
        self.rounds = None  # the attempts the gate made (set when it ends)

    def waiting(self, host, check, attempt, elapsed, error):
        self.writer.write({"kind": "gate", "state": "wait", "job": self.gate["job"], "batch": self.batch,
                           "host": host, "check": check_label(check), "attempt": attempt,
                           "attempts": self.gate.get("attempts"), "elapsed": round(elapsed, 2),
                           "error": str(error or "")})

    def ended(self, passed, elapsed, attempts):
        self.rounds = attempts
        self.writer.write({"kind": "gate", "state": "pass" if passed else "fail", "job": self.gate["job"],
                           "batch": self.batch, "hosts": list(self.gate.get("hosts") or []),
                           "elapsed": round(elapsed, 2), "attempts": attempts})


# --- what a failed gate adds to its message ----------------------------------------------------------

REFUSED = ("Connection refused", "Errno 111")


def listen_hint(job, check_ports, ports, problems, first_deploy):
    """A hint when a probe of a job's first deploy found nothing listening on one of its named ports.

    check_ports: the ports the gate probed; ports: the job's {name: port} (catalog)."""
    if not first_deploy or not any(r in p for p in problems for r in REFUSED):
        return ""
    names = sorted(name for name, port in (ports or {}).items() if port in set(check_ports))
    if not names:
        return ""
    name = names[0]
    return ("hint: nothing listens on port %s (%s) of job %s yet; the job must listen on its port: read it in a "
            "template with {{ get \"maand/bucket\" \"%s\" }} or in the Makefile from $%s (see docs/templates.md), "
            "and make `start` leave the server running" % (ports[name], name, job, name, name.upper()))


def status_command(worker_root, job, lines=10):
    """The shell command run on a worker after a failed gate: the tail of `make status` and of the
    newest file in the job's logs/. The command may run as root in a folder the job's user writes: a
    symlink (logs/ itself or the newest entry) is named, never followed, so it cannot leak other files."""
    folder = shlex.quote("%s/jobs/%s" % (worker_root, job))
    n = int(lines)
    return ("cd %s 2>/dev/null || { echo '(no job folder %s)'; exit 0; }; "
            "out=$(timeout 10 make -s status 2>&1); rc=$?; echo \"--- make status (exit $rc):\"; "
            "printf '%%s\\n' \"$out\" | tail -n %d; "
            "if [ -L logs ]; then echo '--- logs: a symlink, not read'; else f=$(ls -t logs 2>/dev/null | head -n 1); "
            "if [ -n \"$f\" ] && [ -L \"logs/$f\" ]; then echo \"--- logs/$f: a symlink, not read\"; "
            "elif [ -n \"$f\" ] && [ -f \"logs/$f\" ]; then echo \"--- logs/$f:\"; tail -n %d \"logs/$f\"; fi; fi"
            % (folder, folder, n, n))


def ssh_argv(host_info, command, connect_timeout=5):
    """ssh argv for one worker from adapter/support.hosts_from_hostvars()'s entry: the same command line as
    the gate's own probes (deploy/gate.ssh_argv: the run's ssh args and host-key policy, user, key, port),
    the command under sudo -n when the run becomes root."""
    return _gate.ssh_argv(host_info, connect_timeout) + [_gate.ssh_remote(command, bool(host_info.get("sudo")))]


def failure_notes(gate, elapsed, attempts, problems, tails, hint):
    """The lines a failed gate adds to its problems: elapsed time (and, when `make status` ended it
    early, that it did not wait out its budget), each worker's status tail, the hint. gate: {job, attempts,
    interval_seconds} (attempts None: a budget in seconds, maand_wait_seconds of the health_check verb)."""
    if any(_gate.NOT_RUNNING in p for p in problems):
        of = " of %s" % gate["attempts"] if gate.get("attempts") is not None else ""
        notes = ["stopped waiting after %.1f s (%d%s attempt(s), %s s apart): `make status` says the job is not "
                 "running" % (elapsed, attempts, of, gate.get("interval_seconds"))]
    else:
        notes = ["gave up after %.1f s (%d attempt(s), %s s apart)" % (elapsed, attempts, gate.get("interval_seconds"))]
    for host in sorted(tails):
        if tails[host]:
            notes.append("%s: last lines of job %s:\n%s" % (host, gate["job"], "\n".join("    " + l for l in tails[host])))
    if hint:
        notes.append(hint)
    return notes


def collect_tails(host_infos, worker_root, job, hosts, lines=10, run=None):
    """{host: last lines of `make status` and logs/} of job on hosts, over ssh ([] when unreachable)."""
    import subprocess  # late: only a failed gate needs it

    run = run or subprocess.run
    out = {}
    for host in hosts:
        info = host_infos.get(host)
        if not info:
            continue
        try:
            proc = run(ssh_argv(info, status_command(worker_root, job, lines)), capture_output=True, text=True,
                       timeout=40, check=False, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            out[host] = ["(could not read the job's status: %s)" % exc]
            continue
        text = (proc.stdout or "").rstrip("\n")
        if proc.returncode == 255:
            text = "(could not reach the worker: %s)" % (proc.stderr or "").strip()[-200:]
        out[host] = text.splitlines()[-(2 * lines + 4):] if text else []
    return out


def first_deploy(plan, job, hosts):
    """Whether every allocation of job on hosts is being started for the first time in this run."""
    hosts = set(hosts)
    rows = [r for r in plan.get("rows") or [] if r.get("job") == job and r.get("worker") in hosts]
    return bool(rows) and all(r.get("action") == "start" and not r.get("from_version") for r in rows)


def gate_runner(run, writer, plan, job_ports=None, on_pass=None, diagnose=None, clock=time.monotonic):
    """A gate runner for _deploy_run that writes progress records and, when a gate fails, adds to its
    problems the time it waited, each failing worker's status tail (diagnose(job, hosts) -> {host: lines})
    and a hint when a first start left the job's port closed.

    run(gate, watch) -> problems runs the probes (deploy/gate.run_gate with the addresses bound)."""
    def go(gate):
        start = clock()
        watch = GateWatch(writer, gate, batch_label(plan, gate))
        problems = run(gate, watch)
        if not problems:
            if on_pass is not None:
                on_pass(gate)
            return problems
        elapsed = clock() - start
        failing = [h for h in gate.get("hosts") or [] if any(p.startswith(h + ":") for p in problems)]
        tails = diagnose(gate["job"], failing or list(gate.get("hosts") or [])) if diagnose else {}
        hint = listen_hint(gate["job"], [c.get("port") for c in gate.get("checks") or []],
                           (job_ports or {}).get(gate["job"]), problems, first_deploy(plan, gate["job"], gate.get("hosts") or []))
        attempts = watch.rounds if watch.rounds is not None else gate.get("attempts", 0)
        return list(problems) + failure_notes(gate, elapsed, attempts, problems, tails, hint)
    return go


def status_request(run_dir, plan, job, host):
    """The worker agent's request for the `make status` of job on host in the step whose gates run (its
    run op's environment and job spec run fields, as the deploy ran `make start`), or None when the
    allocation has no such op (a job_control job: its status is not its Makefile's)."""
    from . import jobspec_deploy as _jobspec_deploy, remote as _remote, run as _run

    try:
        key = _run.load_state(run_dir).in_flight
        request = _run.read_request(run_dir, key, host) if key is not None else None
    except (_run.RunError, OSError, ValueError):
        return None
    ops = [o for o in (request or {}).get("ops") or [] if o.get("kind") == "run" and o.get("job") == job and o.get("target")]
    if not ops:
        return None
    try:
        op = _jobspec_deploy.runtime_op(ops[0], os.environ.get)
    except (_jobspec_deploy.EnvError, AttributeError, KeyError, TypeError, ValueError):
        return None  # the deploy's own agent call failed this op the same way: nothing to ask
    status = {"id": job, "kind": "status", "job": job, "host": host, "target": "status", "env": op.get("env") or {}}
    for key in ("cwd", "user", "group", "network", "mounts", "enable_writable_file_system"):
        if op.get(key) is not None:
            status[key] = op[key]
    return _remote.step_request(plan.get("bucket_id"), [status], timeout=_gate.STATUS_TIMEOUT, tail=10)


def status_checker(run_dir, plan, conns, python_of, probe=None):
    """status(job, host) -> (running, detail) for deploy/gate.StatusWatch (deploy/gate.status_checker): the
    job's `make status` on the worker through its agent, as the run's own op ran `make start`, over the run's
    ssh connection. conns() -> {host: connection settings}; python_of(host) -> the worker's python."""
    return _gate.status_checker(lambda job, host: status_request(run_dir, plan, job, host), conns, python_of, probe)


def with_mux(conns, control_dir):
    """The connection settings with the run's own ssh multiplexing (ControlMaster, a ControlPath in
    control_dir, as the deploy's rsync), unless their options name a ControlPath: a gate asks `make
    status` every second or so, and a new ssh handshake each time costs more than the wait. control_dir is
    made then, or refused when it is not this user's own (rsync.mux_options: UnsafeFolder)."""
    from . import rsync as _rsync

    out = {}
    for host, conn in conns.items():
        options = list(conn.get("options") or [])
        if not any("ControlPath" in o for o in options):
            options += _rsync.mux_options(control_dir)
        out[host] = dict(conn, options=options)
    return out


class LazyConnections(Mapping):
    """{host: connection settings with the run's multiplexing (with_mux)}, built per host when first asked:
    building a host's settings reads its vars (an Ansible variable pass), so a gate's status checks and
    tails pay for their own hosts only, never for the whole fleet in every step. Iterating (ssh probes,
    which dial by address) builds them all once. connections(hosts=None) -> {host: settings};
    control_dir() -> the run's ControlPath folder, made when a host first needs it."""

    def __init__(self, connections, control_dir):
        self._connections, self._control_dir = connections, control_dir
        self._seen, self._all = {}, False

    def _add(self, conns):
        fresh = {h: c for h, c in conns.items() if h not in self._seen}
        if fresh:
            self._seen.update(with_mux(fresh, self._control_dir()))

    def __getitem__(self, host):
        if host not in self._seen and not self._all:
            self._add(self._connections([host]))
        return self._seen[host]

    def __iter__(self):
        if not self._all:
            self._add(self._connections())
            self._all = True
        return iter(list(self._seen))

    def __len__(self):
        return len(list(iter(self)))


@dataclasses.dataclass(frozen=True)
class RunFiles:
    """What a step's callbacks read of the run: its plan and the bucket's catalog (None when there is none
    or it is unreadable: the gates and hooks then do without it). Read once per step task (run_files): the
    gates (runner_for_run) and the hooks (callbacks_for_run) share them and neither changes them."""

    bucket: str
    plan: dict
    catalog: dict | None


def run_files(run_dir):
    """RunFiles of the run folder <bucket>/data/.deploy-run/<id> (RunError when its plan is gone)."""
    from ..catalog import catalog as _catalog
    from . import run as _run

    plan = _run.load_plan(run_dir)
    bucket = _run.bucket_of(run_dir)
    try:
        catalog = _catalog.read_catalog(bucket)
    except _catalog.CatalogError:
        catalog = None
    return RunFiles(bucket, plan, catalog)


def runner_for_run(run_dir, connections, addresses, on_pass=None, python_of=lambda host: "python3", files=None):
    """gate_runner for the run folder <bucket>/data/.deploy-run/<id>: probes from the controller to each
    host's address (addresses: {host: address}; https trusting the bucket CA), the job's `make status`
    while a gate waits (fail fast), progress in the run folder, status tails over ssh; every ssh call with
    the workers' connection settings (connections(hosts=None) -> {host: settings}, built on the Ansible
    side: adapter/controller.py), computed once; python_of(host): the worker's python; files: the run's
    RunFiles when the step read them already (run_files)."""
    from . import remote as _remote, rsync as _rsync

    files = files or run_files(run_dir)
    plan, bucket, catalog = files.plan, files.bucket, files.catalog or {}
    job_ports = {j.get("name"): j.get("ports") or {} for j in catalog.get("jobs") or []}
    lazy = LazyConnections(connections, lambda: _rsync.control_dir(run_dir))

    def conns():
        return lazy

    def diagnose(job, hosts):
        return collect_tails(conns(), _remote.worker_root(plan.get("bucket_id")), job, hosts)

    probe_fn = _gate.prober(conns, trust=_gate.Trust.for_bucket(bucket))
    status = status_checker(run_dir, plan, conns, python_of)

    def run(gate, watch):
        return _gate.run_gate(gate, addresses, probe_fn=probe_fn, watch=watch, status=status)

    return gate_runner(run, Writer(run_dir), plan, job_ports, on_pass, diagnose)


def mark(run_dir):
    """The current end of the run's progress file (0 when there is none), for read_since."""
    try:
        return os.path.getsize(progress_path(run_dir)) if run_dir else 0
    except OSError:
        return 0


def read_since(run_dir, offset):
    """The records appended after offset (a task returns those it wrote, in case the file goes away)."""
    if not run_dir:
        return []
    reader = Reader(progress_path(run_dir))
    reader.offset = offset
    return reader.read()


def callbacks_for_run(run_dir: str, connections: Callable[..., Mapping[str, Any]],
                      probes: Callable[[Mapping[str, Any]], list[str]],
                      timeout: Any = None, tail: Any = None, log: Callable[[str], None] = lambda msg: None,
                      files: RunFiles | None = None):
    """hooks/points.deploy_callbacks for the run folder <bucket>/data/.deploy-run/<id> (its plan, the bucket's
    catalog: files, or read here; every worker's connection settings for run_ssh: connections() -> {host: settings})."""
    from ..hooks import points as _points  # late: deploy steps only

    files = files or run_files(run_dir)
    return _points.deploy_callbacks(files.bucket, files.catalog, files.plan, connections, probes,
                                         int(timeout or _points._run.DEFAULT_TIMEOUT),
                                         int(tail or _points._run.DEFAULT_TAIL), log)
