# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running job commands on the controller: one process per allocation, maand's environment, the
runtime API, a timeout that kills the whole process group, and the output tail of a failure.
No Ansible imports.

``run_event`` runs every command a job registers for an event on the given allocations
(concurrently up to ``concurrency``, as maand's JobCommandOnWorkers) and returns a HookOutcome;
a failure names job, command, event and worker, with the last lines of the hook's output, the
way a failing make target is reported. A hook fails when it exits non-zero, runs past its
timeout (killed), cannot start, or had a KV write refused by the runtime API.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import itertools
import json
import os
import signal
import subprocess
import threading
from typing import Any, Callable, Iterable, Mapping

from . import commands
from ..worker import tail_lines
from ..bucket import LogCommand
from ..kv import functions, store
from .runtime_api import RuntimeAPI

DEFAULT_TIMEOUT = 600
DEFAULT_TAIL = 20


@dataclasses.dataclass
class HookResult:
    job: str
    command: str
    event: str
    worker: str
    ok: bool
    rc: int | None
    output: list[str]
    error: str = ""

    def message(self) -> str:
        head = "%s on %s failed: %s" % (commands.where(self.job, self.command, self.event), self.worker, self.error)
        if self.output:
            head += "\n--- last lines of output ---\n" + "\n".join(self.output)
        return head


@dataclasses.dataclass
class HookOutcome:
    results: list[HookResult] = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)  # could not run at all

    @property
    def ok(self) -> bool:
        return not self.errors and all(r.ok for r in self.results)

    def failures(self) -> list[str]:
        return list(self.errors) + [r.message() for r in self.results if not r.ok]

    def extend(self, other: "HookOutcome") -> None:
        self.results += other.results
        self.errors += other.errors


@dataclasses.dataclass
class Context:
    """What every hook of one run shares."""

    bucket_dir: str
    catalog: Mapping[str, Any]
    api: RuntimeAPI
    stage_root: str
    hosts_file: str = ""
    timeout: int = DEFAULT_TIMEOUT
    tail: int = DEFAULT_TAIL
    current_versions: Mapping[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    log: Callable[[str], None] = lambda msg: None
    runlog: Any = None  # the verb's bucket/runlog.RunLog: each hook's lines go to the bucket logs (maand's)


def run_process(argv: list[str], cwd: str, env: Mapping[str, str], timeout: int, tail: int,
                on_start: Callable[[int], None] = lambda pid: None,
                on_line: Callable[[str, str], None] = lambda stream, text: None) -> tuple[int | None, list[str], str]:
    """(rc, last lines of stdout+stderr, error) of one hook process; killed with its whole
    process group after timeout seconds. on_start(pid) is told the process id once it runs, on_line(stream,
    text) each line of its stdout and stderr as it comes (the bucket logs)."""
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        return None, [], "cannot start %s: %s" % (argv[0], exc)
    on_start(proc.pid)
    keep, seq = max(tail, 1), itertools.count()
    lines: collections.deque = collections.deque(maxlen=keep)  # (seq, stream, text): the last lines, as read
    errors: collections.deque = collections.deque(maxlen=keep)  # the last stderr lines
    lock = threading.Lock()

    def pump(pipe, stream):
        for raw in iter(pipe.readline, b""):
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            with lock:
                entry = (next(seq), stream, text)
                lines.append(entry)
                if stream == "stderr":
                    errors.append(entry)
                on_line(stream, text)
        pipe.close()

    readers = [threading.Thread(target=pump, args=(p, n), daemon=True)
               for p, n in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))]
    for reader in readers:
        reader.start()
    error = ""
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        rc, error = None, "timed out after %ds (maand_hook_timeout) and was killed" % timeout
    _kill_group(proc, signal.SIGKILL)  # children it left behind (their pipes close with them)
    for reader in readers:
        reader.join(5)
    if rc and not error:
        error = "exit status %d" % rc
    with lock:
        read = sorted(set(lines) | set(errors))
        return rc, tail_lines([e[1:] for e in read], tail), error


def _kill_group(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        return
    if sig == signal.SIGTERM:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGKILL)
            proc.wait()


def write_hosts_file(path: str, hosts: Mapping[str, Mapping[str, Any]]) -> str:
    """How run_ssh reaches each worker: {ip: {address, port, user, key, options, sudo}} (mode 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(hosts, handle, sort_keys=True)
    return path


def _stage_certs(ctx: Context, modules: str, target: commands.Target) -> None:
    """The allocation's certificates (build keeps them in its maand/job/<job>/worker/<ip> namespace)
    in the staged _modules/certs/, as maand stages them for its hooks."""
    if not store.KVStore.exists(ctx.bucket_dir):
        return
    try:
        kv_store = store.KVStore.load(ctx.bucket_dir)
    except store.KVStoreError:
        return
    ns = {k: e.value for k, e in (kv_store.namespaces.get(functions.allocation_ns(target.job, target.worker)) or {}).items()
          if not e.deleted}
    if any(k.startswith("certs/") for k in ns):
        commands.write_certs(modules, ns, kv_store.get(functions.WORKERS_NS, "certs/ca.crt"))


def _no_line(stream: str, text: str) -> None:
    del stream, text


def _live(ctx: Context, target: commands.Target, command: str, path: str) -> Any:
    """The hook's command in the verb's bucket logs (maand: phase job_command, action the command), or None."""
    if ctx.runlog is None:
        return None
    try:
        return ctx.runlog.live(target.worker, LogCommand(target.job, "job_command", command, path))
    except OSError as exc:
        ctx.log("the bucket logs could not be written: %s" % exc)
        ctx.runlog = None
        return None


def run_one(ctx: Context, target: commands.Target, command: str, event: str, extra: Mapping[str, str]) -> HookResult:
    job = commands.job_entry(ctx.catalog, target.job)
    if ctx.api.refusal:
        return HookResult(target.job, command, event, target.worker, False, None, [], ctx.api.refusal)
    try:
        modules = commands.stage(ctx.bucket_dir, job.get("path") or "workspace/jobs/%s" % target.job, target.job,
                                 target.worker, os.path.join(ctx.stage_root, "%s-%s" % (event, command)))
        _stage_certs(ctx, modules, target)
        script = commands.resolve_script(modules, target.job, command)
        argv = commands.argv_for(script, os.path.join(ctx.bucket_dir, job.get("path") or "", "_modules"))
    except (commands.HookError, OSError) as exc:
        return HookResult(target.job, command, event, target.worker, False, None, [], str(exc))
    token, inv = ctx.api.open_session(target.job, target.worker, target.alloc_id, event, command)
    try:
        env = commands.command_env(target, command, event, commands.ApiEndpoint(ctx.api.port, token, ctx.hosts_file),
                                   ctx.current_versions.get((target.job, target.worker), ""),
                                   str(job.get("version") or ""), extra)
        live = _live(ctx, target, command, script.path)
        rc, output, error = run_process(argv, modules, env, ctx.timeout, ctx.tail,
                                        lambda pid: ctx.api.set_pid(token, pid), live.line if live else _no_line)
        if live:
            live.end(-1 if rc is None else rc)
    finally:
        ctx.api.close_session(token)
    if not error and inv.refused:
        error = "the runtime API refused %d write(s): %s" % (len(inv.refused), "; ".join(inv.refused))
    return HookResult(target.job, command, event, target.worker, not error, rc, output, error)


def run_event(ctx: Context, job: str, event: str, targets: Iterable[commands.Target] | None = None,
              extra: Mapping[str, str] | None = None, concurrency: int = 1,
              command_names: Iterable[str] | None = None) -> HookOutcome:
    """Run job's commands for event (each in name order, all allocations of one command before
    the next command, stop at the first command that fails, as maand does)."""
    outcome = HookOutcome()
    try:
        names = list(command_names) if command_names is not None else commands.commands_for(ctx.catalog, job, event)
        chosen = list(targets) if targets is not None else commands.targets(ctx.catalog, job)
    except commands.HookError as exc:
        outcome.errors.append(str(exc))
        return outcome
    for command in names:
        if not chosen:
            break
        ctx.log("%s on %s" % (commands.where(job, command, event), ", ".join(t.worker for t in chosen)))
        width = max(1, min(concurrency, len(chosen)))
        with concurrent.futures.ThreadPoolExecutor(max_workers=width) as pool:
            results = list(pool.map(lambda t: run_one(ctx, t, command, event, extra or {}), chosen))
        outcome.results += results
        if not all(r.ok for r in results):
            break
    return outcome
