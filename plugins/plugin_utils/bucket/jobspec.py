# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job specs after Maelstrom (seed 004): environment, inheritance, scheduling order, validation.

Pure Python, no Ansible imports. Semantics follow Maelstrom's own source
(maelstrom-software/maelstrom):
- environment: crates/maelstrom-client-base/src/spec/substitute.rs (``substitute``) and
  crates/maelstrom-client-base/src/spec.rs (``environment_eval``);
- inheritance: crates/maelstrom-client-process/src/collapsed_job_spec.rs (``collapse_spec``);
- order: crates/maelstrom-broker/src/scheduler_task/scheduler.rs and crates/maelstrom-util/src/
  duration.rs (``schedule_order``, ``BrokerModel``), crates/maelstrom-test-runner (``history_hint``);
  ``lpt_plan`` is the per-worker plan of a worker running targets in ``slots`` processes;
- images: ``read_oci_layout`` (a local OCI layout) and ``integrate_image`` (collapsed_job_spec.rs);
- for build: ``validate_job_spec`` / ``validate_container`` (FieldProblem: field, message, fix);
- for deploy: ``history_record`` / ``history_lookup`` / ``plan_worker`` / ``format_plan``.
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import PurePosixPath
from typing import Callable, Mapping, Optional

from . import readers as _readers


class SpecError(ValueError):
    """A job spec problem; the message names the variable, field, parent or chain."""


class SubstituteError(SpecError):
    """Maelstrom's substitute::Error: kind is one of the four below, var the variable (or None)."""

    UNTERMINATED_BRACE = "UnterminatedBrace"
    INVALID_VARIABLE = "InvalidVariable"
    UNKNOWN_VARIABLE = "UnknownVariable"
    LOOKUP_ERROR = "LookupError"

    def __init__(self, kind: str, var: Optional[str] = None, detail: str = "", source: str = "env"):
        self.kind, self.var, self.detail, self.source = kind, var, detail, source
        super().__init__(self._describe())

    def _describe(self) -> str:
        if self.kind == self.UNTERMINATED_BRACE:
            return "unterminated { (write $env{NAME} or $prev{NAME})"
        if self.kind == self.INVALID_VARIABLE:
            return '$ must be followed by "$", "env{", or "prev{" (write $$ for a literal $)'
        if self.kind == self.UNKNOWN_VARIABLE:
            where = "the controller's environment" if self.source == "env" else "an earlier environment element"
            return (f"unknown variable {self.var!r} (set it in {where}, or give a default: "
                    f"${self.source}{{{self.var}:-value}})")
        return f"error looking up variable {self.var!r}: {self.detail}"


Lookup = Callable[[str], Optional[str]]


def _handle_variable(out: list, text: str, lookup: Lookup, source: str) -> None:
    """One ``NAME}rest`` or ``NAME:-default}rest`` after ``$env{``/``$prev{``."""
    var, brace, rest = text.partition("}")
    if not brace:
        raise SubstituteError(SubstituteError.UNTERMINATED_BRACE)
    var, sep, default = var.partition(":-")
    try:
        value = lookup(var)
    except SubstituteError:
        raise
    except Exception as exc:  # the lookup's own failure, wrapped as Maelstrom's LookupError
        raise SubstituteError(SubstituteError.LOOKUP_ERROR, var, str(exc), source) from None
    if sep and not value:  # default applies when unset or empty
        value = default
    if value is None:
        raise SubstituteError(SubstituteError.UNKNOWN_VARIABLE, var, source=source)
    out.append(value)
    out.append(rest)


def substitute(text: str, env_lookup: Lookup, prev_lookup: Lookup) -> str:
    """Replace ``$env{V}``, ``$prev{V}``, ``${...:-default}`` and ``$$`` in ``text``."""
    parts = text.split("$")
    if len(parts) == 1:
        return text
    out = [parts[0]]
    it = iter(parts[1:])
    for piece in it:
        if piece == "":
            nxt = next(it, None)
            if nxt is None:
                raise SubstituteError(SubstituteError.INVALID_VARIABLE)
            out.append("$")
            out.append(nxt)
        elif piece.startswith("env{"):
            _handle_variable(out, piece[4:], env_lookup, "env")
        elif piece.startswith("prev{"):
            _handle_variable(out, piece[5:], prev_lookup, "prev")
        else:
            raise SubstituteError(SubstituteError.INVALID_VARIABLE)
    return "".join(out)


@dataclass(frozen=True)
class EnvironmentSpec:
    """One element of an ``environment`` list: ``extend`` true merges, false replaces."""

    vars: Mapping[str, str] = field(default_factory=dict)
    extend: bool = True
    origin: str = field(default="", compare=False)  # file and JSON path, for error messages


def parse_environment(value, where: str = "environment") -> list:
    """Manifest ``environment`` (a list of {vars, extend}, or a map) -> [EnvironmentSpec].

    Raises SpecError naming the JSON path and the fix.
    """
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [EnvironmentSpec(_parse_vars(value, where), True, where)]
    if not isinstance(value, list):
        raise SpecError(f"{where}: must be a list of {{\"vars\": {{...}}, \"extend\": true|false}} or a map "
                        f"of NAME: value, not {type(value).__name__}")
    return [_parse_element(elem, f"{where}[{i}]") for i, elem in enumerate(value)]


def _parse_element(elem, where: str) -> EnvironmentSpec:
    if isinstance(elem, EnvironmentSpec):
        return elem
    if not isinstance(elem, Mapping):
        raise SpecError(f"{where}: must be {{\"vars\": {{NAME: value}}, \"extend\": true|false}}, "
                        f"not {type(elem).__name__}")
    unknown = sorted(set(elem) - {"vars", "extend"})
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                        "an element has only \"vars\" and \"extend\"")
    if "vars" not in elem:
        raise SpecError(f"{where}: missing \"vars\" (a map of NAME: value)")
    extend = elem.get("extend", True)
    if not isinstance(extend, bool):
        raise SpecError(f"{where}.extend: must be true or false, not {extend!r}")
    return EnvironmentSpec(_parse_vars(elem["vars"], f"{where}.vars"), extend, where)


def _parse_vars(vars_, where: str) -> dict:
    if not isinstance(vars_, Mapping):
        raise SpecError(f"{where}: must be a map of NAME: value, not {type(vars_).__name__}")
    out = {}
    for key, val in vars_.items():
        if not isinstance(key, str) or not key or "=" in key:
            raise SpecError(f"{where}: invalid variable name {key!r} (a non-empty string without '=')")
        if not isinstance(val, str):
            raise SpecError(f"{where}.{key}: value must be a string, not {type(val).__name__} "
                            f"(quote it: \"{val}\")")
        out[key] = val
    return out


def environment_eval(initial: Mapping[str, str], specs, env_lookup: Lookup) -> dict:
    """Maelstrom's environment_eval: apply each element in turn to the running map.

    Every value of an element is substituted against the map as it was before that element
    (``$prev``); ``extend`` true merges the result into the map, false replaces the map. The initial
    map is not substituted. Returns the final map, keys sorted.
    """
    running = dict(initial)
    for index, spec in enumerate(parse_environment(specs)):
        prev = dict(running)
        new = {}
        for key in sorted(spec.vars):
            try:
                new[key] = substitute(spec.vars[key], env_lookup, prev.get)
            except SubstituteError as exc:
                raise _named(exc, f"{spec.origin or f'environment[{index}]'}.vars.{key}") from None
        running = {**running, **new} if spec.extend else new
    return dict(sorted(running.items()))


def environment_check(initial: Mapping[str, str], specs) -> list:
    """Build-time check of an environment whose controller variables are not known yet.

    Evaluates with every ``$env{V}`` standing for an empty value, so malformed elements, malformed
    ``$`` and unknown ``$prev`` variables raise SpecError/SubstituteError now; returns the sorted
    names of the ``$env`` variables referenced (deploy checks them against the controller).
    """
    seen = set()

    def placeholder(name: str) -> str:
        seen.add(name)
        return ""

    environment_eval(initial, specs, placeholder)
    return sorted(seen)


def _named(exc: SubstituteError, where: str) -> SubstituteError:
    err = SubstituteError(exc.kind, exc.var, exc.detail, exc.source)
    err.args = (f"{where}: {exc}",)
    err.where = where
    return err


# --- Inheritance: crates/maelstrom-client-process/src/collapsed_job_spec.rs (CollapsedJobSpec::new) ---

# ContainerUse, in Maelstrom's enum order; vector fields concatenate parent-first, the others are
# optional and take the nearest value up the chain.
CONTAINER_USES = ("layers", "enable_writable_file_system", "environment", "working_directory",
                  "mounts", "network", "user", "group")
VECTOR_USES = frozenset({"layers", "environment", "mounts"})
# ImageUse, and the projection of a container use set onto it
# (spec.rs project_container_use_set_to_image_use_set).
IMAGE_USES = ("layers", "environment", "working_directory")


@dataclass(frozen=True)
class Parent:
    """A ``parent``: a named container (workspace/containers/<name>.json) or a local OCI image."""

    kind: str  # "container" or "image"
    name: str
    use: frozenset


@dataclass(frozen=True)
class ImageRef:
    """The image at the root of a chain, with the image fields still wanted."""

    name: str
    use: tuple

    def to_dict(self) -> dict:
        return {"name": self.name, "use": list(self.use)}


@dataclass
class CollapsedSpec:
    """A job spec with its parent chain folded in, before defaults are applied (None = unset)."""

    layers: list = field(default_factory=list)
    enable_writable_file_system: Optional[bool] = None
    environment: list = field(default_factory=list)  # [EnvironmentSpec], parent-first
    working_directory: Optional[str] = None
    mounts: list = field(default_factory=list)
    network: Optional[str] = None
    user: object = None
    group: object = None
    image: Optional[ImageRef] = None

    def to_dict(self) -> dict:
        out = {name: getattr(self, name) for name in CONTAINER_USES}
        out["layers"], out["mounts"] = list(self.layers), list(self.mounts)
        out["environment"] = [{"vars": dict(e.vars), "extend": e.extend} for e in self.environment]
        out["image"] = self.image.to_dict() if self.image else None
        return out


def parse_parent(value, where: str = "parent") -> Optional[Parent]:
    """``{"container": NAME, "use": [...]}`` or ``{"image": NAME, "use": [...]}``; use omitted = all."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SpecError(f'{where}: must be {{"container": NAME, "use": [...]}} or {{"image": NAME, "use": [...]}}, '
                        f"not {type(value).__name__}")
    kinds = [k for k in ("container", "image") if k in value]
    unknown = sorted(set(value) - {"container", "image", "use"})
    if len(kinds) != 1 or unknown:
        raise SpecError(f'{where}: give exactly one of "container" or "image", plus an optional "use" list'
                        + (f"; unknown key(s) {', '.join(map(repr, unknown))}" if unknown else ""))
    kind = kinds[0]
    name = value[kind]
    if not isinstance(name, str) or not name:
        raise SpecError(f"{where}.{kind}: must be a non-empty name, not {name!r}")
    allowed = CONTAINER_USES if kind == "container" else IMAGE_USES
    return Parent(kind, name, _parse_use(value.get("use"), allowed, f"{where}.use"))


def _parse_use(use, allowed: tuple, where: str) -> frozenset:
    if use is None:
        return frozenset(allowed)
    if not isinstance(use, list) or not all(isinstance(u, str) for u in use):
        raise SpecError(f"{where}: must be a list of field names ({', '.join(allowed)})")
    bad = [u for u in use if u not in allowed]
    if bad:
        raise SpecError(f"{where}: unknown field(s) {', '.join(map(repr, bad))}; "
                        f"choose from {', '.join(allowed)}")
    return frozenset(use)


def _own_fields(spec: Mapping, where: str) -> CollapsedSpec:
    """The container fields written in one manifest or container file (no parent folded in)."""
    return CollapsedSpec(
        layers=list(spec.get("layers") or []),
        enable_writable_file_system=spec.get("enable_writable_file_system"),
        environment=parse_environment(spec.get("environment"), f"{where}environment"),
        working_directory=spec.get("working_directory"),
        mounts=list(spec.get("mounts") or []),
        network=spec.get("network"),
        user=spec.get("user"),
        group=spec.get("group"),
    )


class ContainerIndex:
    """Named container specs, each parsed once (own fields and parent) however many jobs use it."""

    def __init__(self, containers: Mapping[str, Mapping]):
        self._raw = containers
        self._parsed: dict = {}

    def get(self, name: str):
        """(own fields, parent) of container ``name``, or None when there is no such container."""
        if name not in self._parsed:
            spec = self._raw.get(name)
            if spec is None:
                return None
            where = f"containers/{name}.json: "
            self._parsed[name] = (_own_fields(spec, where), parse_parent(spec.get("parent"), where + "parent"))
        return self._parsed[name]


def collapse_spec(job: Mapping, containers) -> CollapsedSpec:
    """Fold the parent chain of ``job`` into one spec, as Maelstrom's CollapsedJobSpec::new.

    ``containers`` maps names to container specs (or is a ContainerIndex, to parse each once for many
    jobs). The use set starts as every vector field plus each optional field the job leaves unset;
    each container parent narrows it to its ``use``; an optional field leaves the set once a value
    is found (an explicit false is a value). The walk stops when the set is empty (a missing parent
    beyond that point is not looked up), at a container without parent, or at an image, which is
    kept with the image fields still wanted (None when none is). Errors name the chain.
    """
    index = containers if isinstance(containers, ContainerIndex) else ContainerIndex(containers)
    out = _own_fields(job, "")
    mask = {u for u in CONTAINER_USES if u in VECTOR_USES or getattr(out, u) is None}
    chain: list = []
    parent = parse_parent(job.get("parent"))
    while parent is not None:
        if parent.kind == "image":
            wanted = tuple(u for u in IMAGE_USES if u in mask and u in parent.use)
            out.image = ImageRef(parent.name, wanted) if wanted else None
            break
        mask &= parent.use
        if not mask:
            break
        found = index.get(parent.name)
        if found is None:
            raise SpecError(f'couldn\'t find parent container "{parent.name}"'
                            + f" (chain: {_chain(chain + [parent.name])}); create containers/{parent.name}.json "
                            "or fix the parent's \"container\" name")
        if parent.name in chain:
            raise SpecError("parent loop found: " + " -> ".join(f'"{n}"' for n in chain + [parent.name])
                            + "; break the loop by removing one \"parent\"")
        chain.append(parent.name)
        own, parent = found
        mask = _inherit(out, own, mask)
    return out


def collapse_specs(jobs: Mapping[str, Mapping], containers: Mapping[str, Mapping]) -> dict:
    """collapse_spec for every job (name -> manifest), parsing each container once."""
    index = ContainerIndex(containers)
    return {name: collapse_spec(job, index) for name, job in jobs.items()}


def _inherit(out: CollapsedSpec, parent: CollapsedSpec, mask: set) -> set:
    """Take the masked fields from one parent; return the fields still wanted further up."""
    still = set()
    for use in mask:
        if use in VECTOR_USES:
            setattr(out, use, getattr(parent, use) + getattr(out, use))
            still.add(use)
        else:
            setattr(out, use, getattr(parent, use))
            if getattr(out, use) is None:
                still.add(use)
    return still


def _chain(names: list) -> str:
    return " -> ".join(["job"] + [f'"{n}"' for n in names])


# --- Scheduling: crates/maelstrom-broker/src/scheduler_task/scheduler.rs (QueuedJob, worker heap),
# crates/maelstrom-util/src/duration.rs (cmp) and crates/maelstrom-test-runner (estimates) ---

PRIORITY_MIN, PRIORITY_MAX = -128, 127
MAX_TIMINGS = 3  # test_db.rs MAX_TIMINGS_PER_CASE


def duration_cmp(lhs: Optional[float], rhs: Optional[float]) -> int:
    """duration.rs cmp: an unknown estimate is greater than any known one. Returns -1, 0 or 1."""
    if lhs is None and rhs is None:
        return 0
    if lhs is None:
        return 1
    if rhs is None:
        return -1
    return (lhs > rhs) - (lhs < rhs)


@dataclass(frozen=True)
class QueuedJob:
    """What the broker's priority queue orders: priority, then estimate (None above all)."""

    name: str
    priority: int = 0
    estimated_duration: Optional[float] = None

    def sort_key(self) -> tuple:
        """Ascending key for Maelstrom's pop order (the BinaryHeap pops the greatest first)."""
        est = self.estimated_duration
        return (-self.priority, 0 if est is None else 1, -(est or 0))


def queued_cmp(lhs: QueuedJob, rhs: QueuedJob) -> int:
    """QueuedJob's Ord (derivative: priority, then duration::cmp; the job id ignored)."""
    if lhs.priority != rhs.priority:
        return 1 if lhs.priority > rhs.priority else -1
    return duration_cmp(lhs.estimated_duration, rhs.estimated_duration)


def schedule_order(jobs: list) -> list:
    """Jobs in the order Maelstrom's broker starts them; stable for ties (input order kept)."""
    return sorted(jobs, key=QueuedJob.sort_key)


@dataclass(frozen=True)
class SlotRun:
    """One job of an LPT plan: which slot runs it, when it starts and ends (seconds from 0)."""

    name: str
    slot: int
    start: float
    end: float
    estimated_duration: Optional[float] = None


def lpt_plan(jobs: list, slots: int, unknown: float = 0.0) -> list:
    """List-schedule ``jobs`` in schedule_order on ``slots`` parallel slots of one worker.

    Each job starts on the slot that frees first (lowest slot number on a tie) as soon as it is
    free, as a worker running up to ``slots`` targets side by side does. A job without an estimate
    counts as ``unknown`` seconds in the plan. Returns the runs in start order.
    """
    if slots < 1:
        raise SpecError(f"slots must be at least 1, not {slots}")
    free = [0.0] * slots
    runs = []
    for job in schedule_order(jobs):
        slot = min(range(slots), key=lambda s: (free[s], s))
        length = job.estimated_duration if job.estimated_duration is not None else unknown
        runs.append(SlotRun(job.name, slot, free[slot], free[slot] + length, job.estimated_duration))
        free[slot] += length
    return runs


def makespan(runs: list) -> float:
    return max((r.end for r in runs), default=0.0)


def makespan_lower_bound(durations: list, slots: int) -> float:
    """No schedule on ``slots`` slots ends before max(longest, sum / slots)."""
    return max([0.0, sum(durations) / slots, *durations])


@dataclass
class _Worker:
    wid: int
    slots: int
    pending: list = field(default_factory=list)


class BrokerModel:
    """The broker's dispatch, as scheduler.rs: a queue of QueuedJobs and a heap of workers.

    A job goes to the least subscribed worker (pending/slots, then lowest id), which holds at most
    2 x slots pending jobs; a completed job frees its worker for the next queued one. Returns the
    (worker id, job name) enqueues each event causes, in order. Used to port Maelstrom's scheduler
    tests; deploy needs only schedule_order and lpt_plan.
    """

    def __init__(self):
        self.workers: dict = {}
        self.queue: list = []
        self._seq = 0

    def _least_loaded(self) -> _Worker:
        return min(self.workers.values(), key=lambda w: (Fraction(len(w.pending), w.slots), w.wid))

    def _dispatch(self) -> list:
        sent = []
        while self.queue and self.workers:
            worker = self._least_loaded()
            if len(worker.pending) == 2 * worker.slots:
                break
            sent.append(self._start(worker))
        return sent

    def _start(self, worker: _Worker) -> tuple:
        job = heapq.heappop(self.queue)[-1]
        worker.pending.append(job.name)
        return (worker.wid, job.name)

    def job_ready(self, job: QueuedJob) -> list:
        return self.jobs_ready([job])

    def jobs_ready(self, jobs: list) -> list:
        for job in jobs:
            heapq.heappush(self.queue, (job.sort_key(), self._seq, job))
            self._seq += 1
        return self._dispatch()

    def worker_connected(self, wid: int, slots: int) -> list:
        self.workers[wid] = _Worker(wid, slots)
        return self._dispatch()

    def job_completed(self, wid: int, name: str) -> list:
        worker = self.workers[wid]
        worker.pending.remove(name)
        return [self._start(worker)] if self.queue else []


@dataclass(frozen=True)
class HistoryHint:
    """What the history of a target adds: a priority bump and an estimate (seconds or None)."""

    priority_bump: int
    estimated_duration: Optional[float]


def record_timing(timings: list, seconds: float) -> list:
    """Append a measured duration, keeping the last MAX_TIMINGS (test_db.rs add_timing)."""
    return (list(timings) + [float(seconds)])[-MAX_TIMINGS:]


def history_hint(timings: Optional[list], failed_last: bool) -> HistoryHint:
    """As maelstrom-test-runner main_app.rs: never run -> (1, None); failed -> (1, mean); else (0, mean).

    The mean is test_db.rs get_case's: the average of the kept timings.
    """
    if not timings:
        return HistoryHint(1, None)
    mean = sum(t / len(timings) for t in timings)
    return HistoryHint(1 if failed_last else 0, mean)


# --- Manifest field validation (for build): every problem with its JSON path and a fix ---

NETWORKS = ("disabled", "loopback", "local")
MOUNT_TYPES = ("tmp", "proc", "sys", "devices", "bind")
_NAME = re.compile(r"^[a-z_][a-z0-9_-]*[$]?\Z")
CONTAINER_FIELDS = frozenset(CONTAINER_USES) | {"parent"}
JOB_SPEC_FIELDS = CONTAINER_FIELDS | {"timeout", "estimated_duration", "priority"}


@dataclass(frozen=True)
class FieldProblem:
    """One bad job-spec field: ``field`` is a JSON path inside the manifest or container file."""

    field: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} (fix: {self.fix})"


def validate_job_spec(manifest: Mapping) -> list:
    """Check the job-spec fields of a manifest; [] when all are absent or good. Never raises."""
    problems = _validate_container_fields(manifest)
    problems += _check_seconds(manifest, "timeout", "0 = no timeout", integer=True)
    problems += _check_seconds(manifest, "estimated_duration", "the usual run time of a target")
    if "priority" in manifest:
        value = manifest["priority"]
        if not _is_int(value) or not PRIORITY_MIN <= value <= PRIORITY_MAX:
            problems.append(FieldProblem("priority", f"must be an integer from {PRIORITY_MIN} to "
                                         f"{PRIORITY_MAX}, not {value!r}", "e.g. \"priority\": 10 (default 0)"))
    return problems


def validate_container(spec: Mapping) -> list:
    """Check a workspace/containers/<name>.json document: container fields only."""
    if not isinstance(spec, Mapping):
        return [FieldProblem("$", f"must be a JSON object, not {type(spec).__name__}",
                             "write {\"environment\": ..., \"parent\": ...}")]
    problems = [FieldProblem(key, "is not a container field", f"remove it; allowed: {', '.join(sorted(CONTAINER_FIELDS))}")
                for key in sorted(set(spec) - CONTAINER_FIELDS)]
    return problems + _validate_container_fields(spec)


def _validate_container_fields(spec: Mapping) -> list:
    problems = []
    for name, check in _CHECKS:
        if name in spec and spec[name] is not None:
            try:
                check(spec[name], name)
            except SpecError as exc:
                text = str(exc)
                field_, message = text.split(": ", 1)
                problems.append(FieldProblem(field_, message, _FIXES[name]))
    return problems


def _check_seconds(manifest: Mapping, name: str, meaning: str, integer: bool = False) -> list:
    if manifest.get(name) is None:
        return []
    value = manifest[name]
    ok = _is_int(value) if integer else (_is_int(value) or isinstance(value, float))
    if not ok or value < 0:
        kind = "a whole number of seconds" if integer else "a number of seconds"
        return [FieldProblem(name, f"must be {kind} >= 0, not {value!r}", f"e.g. \"{name}\": 30 ({meaning})")]
    return []


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_relative(value, where: str, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where}: must be a non-empty path string, not {value!r}")
    path = PurePosixPath(value)
    if path.is_absolute() or ".." in path.parts:
        raise SpecError(f"{where}: {value!r} leaves the {what}")


def _check_working_directory(value, where: str) -> None:
    _check_relative(value, where, "job folder")


def _check_layers(value, where: str) -> None:
    if not isinstance(value, list):
        raise SpecError(f"{where}: must be a list of bucket folders, not {type(value).__name__}")
    for i, layer in enumerate(value):
        _check_relative(layer, f"{where}[{i}]", "bucket folder")


def _check_id(value, where: str) -> None:
    if _is_int(value) and 0 <= value < 2 ** 32:
        return
    if isinstance(value, str) and _NAME.match(value):
        return
    raise SpecError(f"{where}: must be a user/group name or a numeric id, not {value!r}")


def _check_network(value, where: str) -> None:
    if value not in NETWORKS:
        raise SpecError(f"{where}: must be one of {', '.join(NETWORKS)}, not {value!r}")


def _check_bool(value, where: str) -> None:
    if not isinstance(value, bool):
        raise SpecError(f"{where}: must be true or false, not {value!r}")


def _check_mounts(value, where: str) -> None:
    if not isinstance(value, list):
        raise SpecError(f"{where}: must be a list of {{\"type\": ..., \"mount_point\": ...}}")
    for i, mount in enumerate(value):
        if not isinstance(mount, Mapping) or mount.get("type") not in MOUNT_TYPES:
            raise SpecError(f"{where}[{i}].type: must be one of {', '.join(MOUNT_TYPES)}")
        point = mount.get("mount_point")
        if not isinstance(point, str) or not point.startswith("/"):
            raise SpecError(f"{where}[{i}].mount_point: must be an absolute path, not {point!r}")
        if mount["type"] == "bind":  # Maelstrom JobMount::Bind {mount_point, local_path, read_only}
            local = mount.get("local_path")
            if not isinstance(local, str) or not local.startswith("/"):
                raise SpecError(f"{where}[{i}].local_path: a bind mount needs the absolute path of a folder on "
                                f"the worker, not {local!r}")
            if not isinstance(mount.get("read_only", False), bool):
                raise SpecError(f"{where}[{i}].read_only: must be true or false")


_CHECKS = (
    ("environment", parse_environment),
    ("parent", parse_parent),
    ("working_directory", _check_working_directory),
    ("layers", _check_layers),
    ("user", _check_id),
    ("group", _check_id),
    ("network", _check_network),
    ("mounts", _check_mounts),
    ("enable_writable_file_system", _check_bool),
)
_FIXES = {
    "environment": 'write [{"vars": {"NAME": "value"}, "extend": true}] or {"NAME": "value"}',
    "parent": 'write {"container": "base", "use": ["environment", "user"]} (use omitted = every field)',
    "working_directory": "give a path relative to the job folder, e.g. \"bin\"",
    "layers": "list bucket folders relative to the bucket, e.g. [\"layers/common\"]",
    "user": "give a user name or uid that exists on the workers, e.g. \"nobody\" or 65534",
    "group": "give a group name or gid that exists on the workers, e.g. \"nogroup\" or 65534",
    "network": "use \"disabled\", \"loopback\" or \"local\" (default: local)",
    "mounts": 'write [{"type": "tmp", "mount_point": "/tmp"}] or [{"type": "bind", "mount_point": "/srv", '
              '"local_path": "/data/srv", "read_only": true}]',
    "enable_writable_file_system": "write true or false",
}


# --- Images: spec.rs ConvertedImage and collapsed_job_spec.rs integrate_image; OCI layout reader ---

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True)
class ImageConfig:
    """What a job takes from an image: layer tar paths, ``VAR=value`` Env lines, WorkingDir."""

    name: str
    layers: tuple = ()
    environment: Optional[tuple] = None
    working_directory: Optional[str] = None

    def environment_map(self) -> dict:
        """Env as a map; a line without ``=`` is an error naming the image (ConvertedImage::environment)."""
        out = {}
        for line in self.environment or ():
            key, sep, value = line.partition("=")
            if not sep:
                raise SpecError(f"image {self.name} has an invalid environment variable {line}")
            out[key] = value
        return dict(sorted(out.items()))


@dataclass
class IntegratedSpec:
    """A collapsed spec with its image read in: the image's Env starts the environment, its layers
    go below the spec's layers, its WorkingDir fills an unset working directory."""

    spec: CollapsedSpec
    initial_environment: dict = field(default_factory=dict)
    image_layers: list = field(default_factory=list)


def integrate_image(spec: CollapsedSpec, image: Optional[ImageConfig]) -> IntegratedSpec:
    """Take from ``image`` the fields ``spec.image.use`` still wants (CollapsedJobSpec::integrate_image)."""
    if spec.image is None:
        return IntegratedSpec(spec)
    if image is None or image.name != spec.image.name:
        raise SpecError(f"image {spec.image.name!r} is needed but was not given (add workspace/images/{spec.image.name}/)")
    use = spec.image.use
    out = IntegratedSpec(CollapsedSpec(**{name: getattr(spec, name) for name in CONTAINER_USES}))
    if "layers" in use:
        out.image_layers = list(image.layers)
    if "environment" in use:
        out.initial_environment = image.environment_map()
    if "working_directory" in use:
        out.spec.working_directory = image.working_directory
    return out


def read_oci_layout(path: str, name: str) -> ImageConfig:
    """Read a local OCI image layout (as ``skopeo copy docker://... oci:<path>`` writes it).

    Follows index.json to the image manifest and its config; returns the layer blob paths (bottom
    first), the config's Env and WorkingDir. Errors name the file and the fix.
    """
    root = PurePosixPath(path)
    index = _read_json(root / "index.json", name)
    manifests = index.get("manifests") if isinstance(index, Mapping) else None
    if not isinstance(manifests, list) or len(manifests) != 1:
        raise SpecError(f"image {name}: {root / 'index.json'}: expected exactly one manifest, found "
                        f"{len(manifests) if isinstance(manifests, list) else 'none'} (copy one image: "
                        f"skopeo copy docker://REF oci:{path})")
    entry = manifests[0]
    if entry.get("mediaType") == OCI_INDEX:
        raise SpecError(f"image {name}: {root / 'index.json'}: a multi-platform index (copy one platform: "
                        "skopeo copy --override-arch ARCH docker://REF oci:PATH)")
    manifest = _read_json(_blob(root, entry, name), name)
    config = _read_json(_blob(root, manifest.get("config") or {}, name), name).get("config") or {}
    layers = tuple(str(_blob(root, layer, name)) for layer in manifest.get("layers") or [])
    env = config.get("Env")
    return ImageConfig(name, layers, None if env is None else tuple(env), config.get("WorkingDir") or None)


def _blob(root: PurePosixPath, descriptor: Mapping, name: str) -> PurePosixPath:
    digest = descriptor.get("digest", "") if isinstance(descriptor, Mapping) else ""
    algo, sep, hexdigest = digest.partition(":")
    if not sep or not re.fullmatch(r"[a-z0-9]+", algo) or not re.fullmatch(r"[a-f0-9]+", hexdigest):
        raise SpecError(f"image {name}: invalid descriptor digest {digest!r} in {root} (re-copy the image)")
    return root / "blobs" / algo / hexdigest


def _read_json(path: PurePosixPath, name: str):
    """An image's JSON file through the bucket's one JSON reader (_readers: size and nesting bounded,
    NaN refused), never a traceback."""
    try:
        return _readers.parse_json(_readers.read_bytes(str(path)).decode("utf-8"))
    except _readers.InputError as exc:
        raise SpecError(f"image {name}: {path}: {exc.field + ': ' if exc.field else ''}{exc.message} "
                        f"(fix: {exc.fix})") from None
    except FileNotFoundError:
        raise SpecError(f"image {name}: {path} is missing (copy the image: skopeo copy docker://REF "
                        f"oci:workspace/images/{name})") from None
    except (OSError, ValueError) as exc:
        raise SpecError(f"image {name}: {path}: cannot read JSON: {exc}") from None


def job_environment_of(integrated: IntegratedSpec, env_lookup: Lookup) -> dict:
    """The final environment of a spec with its image read in (Maelstrom's evaluate_environment)."""
    return environment_eval(integrated.initial_environment, integrated.spec.environment, env_lookup)


# --- Deploy helpers: run history (kept by deploy under the bucket's data/) and a worker's plan ---

HISTORY_VERSION = 2


def _history_key(job: str, target: str, worker: Optional[str] = None) -> str:
    return f"{job}/{target}" if worker is None else f"{job}/{target}@{worker}"


def _history_targets(history: Optional[Mapping]) -> dict:
    targets = (history or {}).get("targets") if isinstance(history, Mapping) else None
    return targets if isinstance(targets, Mapping) else {}


def _timings(entry) -> list:
    if not isinstance(entry, Mapping):
        return []
    return [float(t) for t in entry.get("timings") or []
            if isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0]


def history_record(history: Optional[Mapping], job: str, target: str, seconds: float, failed: bool,
                   worker: Optional[str] = None) -> dict:
    """A new history document with one more measured run of ``job``'s make ``target`` on ``worker``.

    The document is plain JSON: {"version": 2, "targets": {"<job>/<target>@<worker>": {"timings":
    [...], "failed": bool}}}, one entry per allocation; the last MAX_TIMINGS durations are kept.
    Version 1 documents (keys "<job>/<target>", pooled over workers) are read as they are: such an
    entry stands for every allocation of the job until one of them is measured again, when it is
    dropped (migration on read). The input is not modified.
    """
    targets = dict(_history_targets(history))
    key = _history_key(job, target, worker)
    old = targets.get(key) or {}
    targets[key] = {"timings": record_timing(_timings(old), seconds), "failed": bool(failed)}
    if worker is not None:
        targets.pop(_history_key(job, target), None)
    return {"version": HISTORY_VERSION, "targets": dict(sorted(targets.items()))}


def history_lookup(history: Optional[Mapping], job: str, target: str, worker: Optional[str] = None) -> HistoryHint:
    """The HistoryHint of the allocation ``job``@``worker``'s ``target`` from a history document.

    The allocation's own entry when it has one (its last 3 runs, its own failed flag); else a
    version-1 entry of the job; else never run here (priority +1) with the job's mean over the
    workers it ran on as the estimate (None when it never ran anywhere).
    """
    targets = _history_targets(history)
    own = targets.get(_history_key(job, target, worker)) if worker is not None else None
    if own is None:
        own = targets.get(_history_key(job, target))
    if isinstance(own, Mapping) and _timings(own):
        return history_hint(_timings(own), bool(own.get("failed")))
    prefix = _history_key(job, target, "")
    means = [sum(ts) / len(ts) for key, ts in ((k, _timings(v)) for k, v in targets.items())
             if key.startswith(prefix) and ts]
    return HistoryHint(1, sum(means) / len(means) if means else None)


@dataclass(frozen=True)
class PlannedJob:
    """One job of a worker's step as deploy sees it: manifest priority and estimate (or None)."""

    name: str
    priority: int = 0
    estimated_duration: Optional[float] = None


def plan_worker(jobs: list, target: str, slots: int, history: Optional[Mapping] = None,
                worker: Optional[str] = None) -> list:
    """The LPT plan of one worker's step: manifest priority + the allocation's history bump,
    manifest estimate else the history mean (Maelstrom's test runners), on ``slots`` parallel slots."""
    queued = []
    for job in jobs:
        hint = history_lookup(history, job.name, target, worker)
        estimate = job.estimated_duration if job.estimated_duration is not None else hint.estimated_duration
        priority = max(PRIORITY_MIN, min(PRIORITY_MAX, job.priority + hint.priority_bump))
        queued.append(QueuedJob(job.name, priority, estimate))
    return lpt_plan(queued, slots)


def format_plan(worker: str, runs: list) -> list:
    """Plan lines for --check --diff: one per job, in start order, with slot and estimate."""
    lines = [f"{worker}: {len(runs)} job(s) on {1 + max((r.slot for r in runs), default=0)} slot(s)"]
    for run in runs:
        est = run.estimated_duration
        lines.append(f"  {run.name}: slot {run.slot}, estimate " + ("unknown" if est is None else f"{est:g} s"))
    return lines
