# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job commands (hooks) as maand runs them: which commands an event runs, their scripts, their
interpreter and their environment. No Ansible imports.

maand (maand-sh/maand jobcommand/): a job command is ``workspace/jobs/<job>/_modules/command_<name>``
with exactly one of ``.py`` (python3, or the job's ``_modules/.venv``/``venv`` interpreter), ``.ts``
or ``.js`` (bun). It runs on the controller once per active allocation of the job, in a staged copy
of the job's files (cwd ``_modules``), with the ``maand`` helper module next to the script and
these variables (jobcommand/run.go buildCommandEnv, allocation_env.go):
ALLOCATION_ID, ALLOCATION_IP, ALLOCATION_INDEX, DISABLED, JOB, EVENT, COMMAND,
JOB_COMMAND_API_HOST, CURRENT_VERSION, NEW_VERSION, plus per event NEW_/UPDATED_ALLOCATIONS
(job_control) and BATCH_ALLOCATIONS/BATCH_INDEX/BATCH_COUNT/DEPLOY_PHASE/ROLLOUT_ORDER/
ROLLOUT_ORDER_SOURCE (after_allocation_started/stopped, and maand.core's before_allocation_stopped:
the same variables before a restart, reload or stop batch, so a hook can drain it first).

maand.core adds MAAND_RUNTIME_API_PORT and MAAND_RUNTIME_API_TOKEN (the API's port, 8080 unless
another run holds it, and the hook's own token) and MAAND_HOSTS_FILE (how ``run_ssh`` reaches each
worker: Ansible's connection settings). Of the controller's environment a hook gets only an
allow-list (PATH, HOME, the locale, TZ, the ssh agent, proxies, CA bundles: ``INHERITED_ENV``) and
the variables named ``MAAND_HOOK_*`` (``HOOK_PREFIX``: how an operator hands a value to hooks on
purpose), never the controller's credentials or Ansible's settings (maand passes its whole
environment). The collection's own variables (``MAAND_KV_KEY``, ``MAAND_KV_KEY_FILE``,
``MAAND_STATE_URL``, ``MAAND_CONF``...) and libpq's (``PGPASSWORD``, ``PGPASSFILE``) never reach a
hook: the KV master key would let any hook decrypt every job's secrets, and the store URL would let
it bypass the runtime API's per-job rules.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any, Callable, Iterable, Mapping

from ..errors import MaandError

EVENTS = ("post_build", "pre_deploy", "post_deploy", "job_control", "health_check", "cli",
          "after_allocation_started", "after_allocation_stopped", "before_allocation_stopped")
SCRIPT_SUFFIXES = ((".py", "python"), (".ts", "bun"), (".js", "bun"))
VENV_DIRS = (".venv", "venv")
STAGE_SKIP = (".venv", "venv", "node_modules", "__pycache__")
API_HOST = "127.0.0.1"
# what a hook inherits from the controller's environment (names, and LC_* for the locale)
INHERITED_ENV = frozenset((
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "SSH_AUTH_SOCK",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"))
# the operator's own variables for hooks (passed through); no other MAAND_* is (the KV key, the store URL)
HOOK_PREFIX = "MAAND_HOOK_"
_PLUGIN_UTILS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPER_PY = os.path.join(_PLUGIN_UTILS, "worker", "maand_helper.py")
HELPER_ERRORS_PY = os.path.join(_PLUGIN_UTILS, "errors", "__init__.py")  # maand.py's HTTPError derives its MaandError
# maand's maand.ts for Bun commands (the collection's files/hooks/maand.ts)
HELPER_TS = os.path.join(os.path.dirname(os.path.dirname(_PLUGIN_UTILS)), "files", "hooks", "maand.ts")


class HookError(MaandError):
    """A job command cannot run (no script, no runtime, not registered); the message names job,
    command, event and a fix."""


@dataclasses.dataclass(frozen=True)
class Script:
    """The implementation of one job command: its file (absolute) and the runtime that runs it."""

    job: str
    command: str
    path: str
    runtime: str  # python | bun

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclasses.dataclass(frozen=True)
class Target:
    """One allocation a hook runs for."""

    job: str
    worker: str
    alloc_id: str
    index: int
    disabled: bool


def where(job: str, command: str, event: str) -> str:
    return "job %s command %s (event %s)" % (job, command, event)


# --- which commands -----------------------------------------------------------------------------

def job_entry(catalog: Mapping[str, Any], job: str) -> Mapping[str, Any]:
    for entry in catalog.get("jobs", ()):
        if entry.get("name") == job:
            return entry
    raise HookError("job %s is not in the catalog; build the bucket first, or pick one of: %s"
                    % (job, ", ".join(sorted(e["name"] for e in catalog.get("jobs", ()))) or "(none)"))


def commands_for(catalog: Mapping[str, Any], job: str, event: str) -> list[str]:
    """The job's commands registered for event, in name order (maand GetJobCommands)."""
    entry = job_entry(catalog, job)
    if entry.get("removed"):
        return []
    return sorted(name for name, spec in (entry.get("commands") or {}).items()
                  if event in (spec.get("executed_on") or ()))


def jobs_with(catalog: Mapping[str, Any], event: str, command: str | None = None) -> list[str]:
    """Jobs that register a command for event (optionally that one command), in deployment_seq
    then name order (maand runs post_build in deployment_seq order)."""
    out = []
    for entry in catalog.get("jobs", ()):
        if entry.get("removed"):
            continue
        names = [n for n, s in (entry.get("commands") or {}).items() if event in (s.get("executed_on") or ())]
        if names and (command is None or command in names):
            out.append((int(entry.get("deployment_seq") or 0), entry["name"]))
    return [name for _x, name in sorted(out)]


def has_event(catalog: Mapping[str, Any], job: str, event: str) -> bool:
    return bool(commands_for(catalog, job, event))


# --- which allocations --------------------------------------------------------------------------

def targets(catalog: Mapping[str, Any], job: str, include_disabled: bool = False,
            workers: Iterable[str] | None = None) -> list[Target]:
    """The allocations of job a hook runs for: active ones (maand GetActiveAllocations), or the
    given workers; ALLOCATION_INDEX is the position among non-removed allocations (maand
    allocationIndexForJobCommand: <job>_allocation_index in the allocation's KV)."""
    live = [a for a in catalog.get("allocations", ()) if a["job"] == job and a.get("state") != "removed"]
    index = {a["worker"]: i for i, a in enumerate(live)}
    wanted = None if workers is None else list(dict.fromkeys(workers))
    out = []
    for alloc in live:
        disabled = alloc.get("state") == "disabled"
        if wanted is None and disabled and not include_disabled:
            continue
        if wanted is not None and alloc["worker"] not in wanted:
            continue
        out.append(Target(job, alloc["worker"], str(alloc.get("alloc_id") or ""), index[alloc["worker"]], disabled))
    if wanted is not None:
        out.sort(key=lambda t: wanted.index(t.worker))
    return out


# --- which script and runtime -------------------------------------------------------------------

def resolve_script(modules_dir: str, job: str, command: str) -> Script:
    """Exactly one of _modules/<command>.py, .ts, .js (maand ResolveCommandScript)."""
    found = [(os.path.join(modules_dir, command + suffix), runtime) for suffix, runtime in SCRIPT_SUFFIXES
             if os.path.isfile(os.path.join(modules_dir, command + suffix))]
    if not found:
        raise HookError("job %s command %s: job command file not found: expected %s.py, %s.ts, or %s.js under %s; "
                        "add the script, or remove the command from manifest.json"
                        % (job, command, command, command, command, modules_dir))
    if len(found) > 1:
        raise HookError("job %s command %s: invalid job command configuration: multiple implementations for %s under "
                        "%s (use only one of .py, .ts, .js)" % (job, command, command, modules_dir))
    path, runtime = found[0]
    return Script(job, command, path, runtime)


def python_for(modules_dir: str) -> str:
    """The job's _modules/.venv (or venv) interpreter, else python3 (maand ResolvePythonExecutable)."""
    for venv in VENV_DIRS:
        for name in ("python3", "python"):
            candidate = os.path.join(modules_dir, venv, "bin", name)
            if os.path.isfile(candidate):
                return os.path.abspath(candidate)
    return "python3"


def argv_for(script: Script, modules_dir: str, which: Callable[[str], str | None] = shutil.which) -> list[str]:
    """The command line that runs script (from its staged _modules dir); HookError when the
    runtime is not installed on the controller (maand validateHostRuntime)."""
    if script.runtime == "bun":
        bun = which("bun")
        if not bun:
            raise HookError("job %s command %s: %s needs bun on the controller, which is not installed (not on "
                            "PATH); install bun (https://bun.sh), or rewrite the command as %s.py"
                            % (script.job, script.command, script.name, script.command))
        return [bun, "run", script.name]
    python = python_for(modules_dir)
    if os.sep not in python and not which(python):
        raise HookError("job %s command %s: %s needs python3 on the controller, which is not on PATH"
                        % (script.job, script.command, script.name))
    return [python, script.name]


# --- environment --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ApiEndpoint:
    port: int
    token: str
    hosts_file: str = ""


def command_env(target: Target, command: str, event: str, api: ApiEndpoint, current_version: str,
                new_version: str, extra: Mapping[str, str] | None = None,
                base: Mapping[str, str] | None = None) -> dict[str, str]:
    """maand's job command environment (buildCommandEnv): the allow-listed part of the controller's
    environment (INHERITED_ENV), the event's extra variables, then the allocation's own (which win)."""
    env = inherited_env(os.environ if base is None else base)
    env.update({k: str(v) for k, v in (extra or {}).items()})
    env.update({
        "ALLOCATION_ID": target.alloc_id, "ALLOCATION_IP": target.worker, "ALLOCATION_INDEX": str(target.index),
        "DISABLED": "1" if target.disabled else "0", "JOB": target.job, "EVENT": event, "COMMAND": command,
        "JOB_COMMAND_API_HOST": API_HOST, "CURRENT_VERSION": current_version or "0.0.0",
        "NEW_VERSION": new_version or "0.0.0",
        "MAAND_RUNTIME_API_PORT": str(api.port), "MAAND_RUNTIME_API_TOKEN": api.token,
    })
    if api.hosts_file:
        env["MAAND_HOSTS_FILE"] = api.hosts_file
    env.pop("PYTHONHOME", None)
    # a Python command's lines reach the bucket logs as they come, and its traceback stays last in the tail
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def inherited_env(base: Mapping[str, str]) -> dict[str, str]:
    """The part of the controller's environment a hook sees (INHERITED_ENV, the LC_* locale,
    MAAND_HOOK_*); never MAAND_KV_KEY*, MAAND_STATE_URL or libpq's PGPASSWORD/PGPASSFILE."""
    return {k: v for k, v in base.items() if k in INHERITED_ENV or k.startswith(("LC_", HOOK_PREFIX))}


def job_control_env(new: Iterable[str], updated: Iterable[str]) -> dict[str, str]:
    """NEW_ALLOCATIONS / UPDATED_ALLOCATIONS of a job_control run (maand deploy/job_deploy.go)."""
    return {"NEW_ALLOCATIONS": ",".join(new), "UPDATED_ALLOCATIONS": ",".join(updated)}


def batch_env(job: str, batch: Iterable[str], index: int, count: int, phase: str, order: Iterable[str],
              order_source: str) -> dict[str, str]:
    """after_allocation_started/stopped batch variables (maand deploy/batch_hooks.go)."""
    if phase not in ("new", "update", "stop"):
        raise ValueError("DEPLOY_PHASE must be new, update or stop, not %r" % phase)
    return {"BATCH_ALLOCATIONS": ",".join(batch), "BATCH_INDEX": str(index), "BATCH_COUNT": str(count),
            "DEPLOY_PHASE": phase, "ROLLOUT_ORDER": ",".join(order), "ROLLOUT_ORDER_SOURCE": order_source,
            "JOB": job}


def stop_env(job: str, host: str) -> dict[str, str]:
    """after_allocation_stopped's variables: one stopped allocation, phase stop, and no rollout order
    (maand deploy/batch_hooks.go executeAfterAllocationStopped leaves RolloutOrder and OrderSource empty)."""
    return batch_env(job, [host], 0, 1, "stop", [], "")


# --- staging ------------------------------------------------------------------------------------

def stage(bucket_dir: str, job_path: str, job: str, worker: str, stage_root: str) -> str:
    """Copy the job's files to <stage_root>/workers/<ip>/jobs/<job>/ (maand tmp/workers/<ip>/...),
    without virtualenvs and caches, put the maand helper module (and maand_errors.py, the base of its
    HTTPError) in its _modules, return that
    _modules dir (the hook's working directory)."""
    src = os.path.join(bucket_dir, job_path)
    dest = os.path.join(stage_root, "workers", worker, "jobs", job)
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(*STAGE_SKIP))
    modules = os.path.join(dest, "_modules")
    os.makedirs(modules, exist_ok=True)
    shutil.copyfile(HELPER_PY, os.path.join(modules, "maand.py"))
    shutil.copyfile(HELPER_ERRORS_PY, os.path.join(modules, "maand_errors.py"))
    shutil.copyfile(HELPER_TS, os.path.join(modules, "maand.ts"))
    return modules


def write_certs(modules: str, allocation_kv: Mapping[str, str], ca_cert: str | None) -> list[str]:
    """The allocation's certificates from the KV into <_modules>/certs/ (maand
    jobcommand/workspace.go syncWorkerCertificates): ``certs/<name>.crt`` (0644), ``.key`` (0600),
    and ``certs/ca.crt`` from maand/worker. Returns the files written."""
    written = []
    for key, value in sorted(allocation_kv.items()):
        if not key.startswith("certs/") or key.endswith("_path") or "/" in key[len("certs/"):] or key == "certs/":
            continue
        written.append(_write_private(os.path.join(modules, key), value, 0o600 if key.endswith(".key") else 0o644))
    ca_path = os.path.join(modules, "certs", "ca.crt")
    if ca_cert and not os.path.exists(ca_path):
        written.append(_write_private(ca_path, ca_cert, 0o644))
    return written


def _write_private(path: str, text: str, mode: int) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, mode)
    return path
