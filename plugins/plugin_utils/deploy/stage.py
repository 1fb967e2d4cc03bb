# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a deploy ships for one allocation: the job tree, templates rendered, maand's excludes (no Ansible imports).

maand stages every allocation's job tree on the controller, renders its ``.tpl`` files there with
the allocation's KV view (deploy/templates.go transpile) and rsyncs the result; the content hash
of the staged tree decides restarts (deploy/hashes.go). The same here, in three pure steps:

* ``read_job(name, root)`` reads a job folder once: the files shipped as they are (with their
  content digests, ``bucket/content.py``), the templates (``*.tpl``: Go text/template through
  ``kv/functions.py``; ``*.j2``: Jinja2, same context), and maand's excludes, which never reach a worker:
  template sources, ``vars.toml`` (build merged it into the KV), ``_modules/`` (job commands run
  by the controller) and ``_prometheus/``; ``data/ logs/ bin/`` belong to the worker.
* ``render(source, context, overlays)`` renders every template for one allocation in memory and
  returns its ``AllocationContent``: ``{rel: digest}`` of everything shipped and the allocation
  hash, so an allocation whose output did not change is skipped without being touched. Output
  drops the suffix (``config.json.tpl`` -> ``config.json``, ``Makefile.tpl`` -> ``Makefile``).
  An output that read a secret gets an HMAC digest keyed from ``secrets/kv.key`` instead of a
  plain sha256, so no digest in a plan, a record or a log can be used to guess a secret.
  ``overlays`` are more generated files (e.g. certificates) added to the tree and the hash.
* ``write_stage(dest, source, content)`` materialises the tree for rsync: plain files are hard
  links to the workspace (copies across file systems), outputs are written fresh.

Errors are ``RenderError`` naming the job, the worker, the file, line and column, the cause (the
key, the namespace) and a fix.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import hmac
import json
import os
import posixpath
import shlex
import shutil
import stat
import time
import traceback
from collections.abc import Mapping
from typing import Any, Callable, Iterable

from ..worker import layout
from ..bucket import content, storage
from ..catalog import kv_build
from .. import gotemplate
from .. import jobspec
from .. import prometheus
from ..kv import functions, secrets
from ..errors import MaandError

GO_SUFFIX = ".tpl"
JINJA_SUFFIX = ".j2"
EXCLUDED_DIRS = ("_modules", "_prometheus")
EXCLUDED_FILES = ("vars.toml",)
RUNTIME_DIRS = content.RUNTIME_DIRS
DIGEST_CONTEXT = b"maand.core stage digest v1"
STAGE_DIR = ".deploy-stage"
_READ_LIMIT = 256 * 1024  # --diff reads at most this much of a shipped file (larger ones are named only)


class RenderError(MaandError):
    """One allocation cannot be rendered: the fields name where and why; str() is the whole story."""

    def __init__(self, job: str, host: str, file: str, cause: str, fix: str,
                 line: int | None = None, column: int | None = None) -> None:
        self.job, self.host, self.file, self.cause, self.fix = job, host, file, cause, fix
        self.line, self.column = line, column
        super().__init__(self.text(), file=file, fix=fix)  # MaandError keeps file and fix

    def where(self) -> str:
        at = "job %s, file %s" % (self.job, self.file)
        if self.line:
            at += ", line %d" % self.line
            if self.column is not None:
                at += ", column %d" % self.column
        return at

    def text(self, hosts: Iterable[str] | None = None) -> str:
        hosts = sorted(hosts) if hosts is not None else [self.host]
        return "%s (worker %s): %s; fix: %s" % (self.where(), ", ".join(hosts), self.cause, self.fix)


# --- reading a job folder ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Template:
    """One template of a job: its source path, its output path, its engine and text."""

    rel: str
    out: str
    kind: str  # "go" or "jinja"
    text: str
    executable: bool


@dataclasses.dataclass(frozen=True)
class JobSource:
    """A job folder as the deploy ships it (read once, rendered per allocation)."""

    name: str
    root: str
    files: Mapping[str, str]  # shipped as they are: rel -> digest
    templates: tuple[Template, ...]
    dirs: tuple[str, ...] = ()  # every shipped folder, empty ones included (maand ships them)
    shadowed: tuple[str, ...] = ()  # plain files a template output replaces

    @property
    def rendered(self) -> bool:
        return bool(self.templates)


def excluded(rel: str) -> bool:
    """maand's excludes: never shipped (rel is job-relative, forward slashes)."""
    top = rel.split("/", 1)[0]
    return top in EXCLUDED_DIRS or rel in EXCLUDED_FILES or top in RUNTIME_DIRS


def template_kind(rel: str) -> str | None:
    if rel.endswith(GO_SUFFIX) and len(posixpath.basename(rel)) > len(GO_SUFFIX):
        return "go"
    if rel.endswith(JINJA_SUFFIX) and len(posixpath.basename(rel)) > len(JINJA_SUFFIX):
        return "jinja"
    return None


def read_job(name: str, root: str) -> JobSource:
    """Read job folder root (raises bucket/content.ContentError naming the path)."""
    digests = content.hash_tree(root)["files"]
    files, templates = {}, []
    for rel, digest in digests.items():
        if excluded(rel):
            continue
        kind = template_kind(rel)
        if kind is None:
            files[rel] = digest
        else:
            templates.append(_read_template(root, rel, kind))
    outs: dict[str, str] = {}
    for tmpl in templates:
        if tmpl.out.split("/", 1)[0] in RUNTIME_DIRS:
            raise content.ContentError(
                "job %s: %s renders %s, but %s/ belongs to the worker (never shipped); rename the template"
                % (name, tmpl.rel, tmpl.out, tmpl.out.split("/", 1)[0]))
        if tmpl.out in outs:
            raise content.ContentError(
                "job %s: %s and %s both render %s; keep one of them" % (name, outs[tmpl.out], tmpl.rel, tmpl.out))
        outs[tmpl.out] = tmpl.rel
    shadowed = tuple(sorted(rel for rel in outs if rel in files))
    for rel in shadowed:
        del files[rel]
    return JobSource(name, root, files, tuple(sorted(templates, key=lambda t: t.rel)), _dirs(root), shadowed)


def _read_template(root: str, rel: str, kind: str) -> Template:
    path = os.path.join(root, rel)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        executable = bool(os.stat(path).st_mode & stat.S_IXUSR)
    except (OSError, UnicodeDecodeError) as exc:
        raise content.ContentError("cannot read template %s: %s (templates are UTF-8 text files)"
                                   % (path, getattr(exc, "strerror", None) or exc)) from None
    suffix = GO_SUFFIX if kind == "go" else JINJA_SUFFIX
    return Template(rel, rel[:-len(suffix)], kind, text, executable)


def _dirs(root: str) -> tuple[str, ...]:
    out = []
    for current, dirs, dummy in os.walk(root):
        rel_dir = os.path.relpath(current, root).replace(os.sep, "/")
        keep = []
        for d in sorted(dirs):
            rel = d if rel_dir == "." else "%s/%s" % (rel_dir, d)
            if not excluded(rel) and not os.path.islink(os.path.join(current, d)):
                keep.append(d)
                out.append(rel)
        dirs[:] = keep
    return tuple(out)


# --- rendering one allocation -----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Overlay:
    """A generated file added to an allocation's tree (certificates, ...): hashed and shipped."""

    rel: str
    content: bytes
    executable: bool = False
    secret: bool = False  # its digest is an HMAC, its content never printed
    origin: str = "overlay"
    private: bool = False  # written 0600 (a private key), as secret outputs; rsync keeps the mode on the worker


@dataclasses.dataclass(frozen=True)
class Output:
    """One generated file of an allocation."""

    rel: str
    content: bytes
    executable: bool
    secret: bool
    origin: str  # "template" or an overlay's origin
    source: str = ""
    private: bool = False  # mode 0600


@dataclasses.dataclass(frozen=True)
class Context:
    """What one allocation's templates see: the KV (secrets may be lazy), the dot, the rules."""

    kv: Mapping[str, Mapping[str, str]]
    data: functions.AllocationData
    upstream_jobs: tuple[str, ...] = ()
    digest_key: Callable[[], bytes] | None = None  # for secret-bearing outputs (secrets/kv.key)
    funcs: Mapping[str, Callable] = dataclasses.field(default_factory=dict)  # scrapeConfigs, ruleFiles of the deploy
    missing: list | None = None  # not None: a missing KV key reads as "" and is noted here (kv/functions.KVReader.missing)


@dataclasses.dataclass(frozen=True)
class AllocationContent:
    """Everything shipped for one allocation: digests, hash, and the generated files."""

    job: str
    host: str
    files: Mapping[str, str]
    hash: str
    outputs: tuple[Output, ...]

    def plan_entry(self) -> dict:
        """What the deploy plan compares: {"hash", "files", "origins": {rel: origin} of generated files}."""
        return {"hash": self.hash, "files": dict(self.files),
                "origins": {o.rel: o.origin for o in self.outputs}}


def output_digest(file_bytes: bytes, executable: bool, secret: bool, digest_key: Callable[[], bytes] | None) -> str:
    """The digest a file of this content gets in the tree (hash_tree's for plain output)."""
    body = (b"x" if executable else b"-") + file_bytes
    if not secret:
        return hashlib.sha256(body).hexdigest()
    if digest_key is None:
        raise ValueError("a secret-bearing output needs a digest key")
    return hmac.new(digest_key(), body, hashlib.sha256).hexdigest()


def derive_digest_key(kv_key: bytes) -> bytes:
    """The HMAC key of secret-bearing digests, derived from secrets/kv.key (never the key itself)."""
    return hmac.new(kv_key, DIGEST_CONTEXT, hashlib.sha256).digest()


def render(source: JobSource, context: Context, overlays: Iterable[Overlay] = ()) -> AllocationContent:
    """Render every template of source for one allocation; raise RenderError."""
    host = context.data.WorkerIP
    outputs = [_render_one(source, tmpl, context) for tmpl in source.templates]
    taken = {o.rel for o in outputs}
    for extra in overlays:
        if extra.rel in taken:
            raise RenderError(source.name, host, extra.rel, "%s output %s collides with another generated file"
                              % (extra.origin, extra.rel), "rename the template or the %s file" % extra.origin)
        taken.add(extra.rel)
        outputs.append(Output(extra.rel, extra.content, extra.executable, extra.secret, extra.origin,
                              private=extra.private))
    files = {rel: d for rel, d in source.files.items() if rel not in taken}
    for out in outputs:
        try:
            files[out.rel] = output_digest(out.content, out.executable, out.secret, context.digest_key)
        except (OSError, ValueError, secrets.SecretError) as exc:  # the key file is missing or unreadable
            raise RenderError(source.name, host, out.source or out.rel, "cannot digest a secret-bearing output: %s"
                              % exc, "restore secrets/kv.key (it decrypts the secrets the output reads)") from None
    return AllocationContent(source.name, host, files, content.tree_hash(files),
                             tuple(sorted(outputs, key=lambda o: o.rel)))


def _reader(context: Context) -> functions.KVReader:
    return functions.KVReader(context.kv, context.data.Job, context.data.WorkerIP, tuple(context.upstream_jobs),
                              missing=context.missing)


def _render_one(source: JobSource, tmpl: Template, context: Context) -> Output:
    tracker = functions.SecretTracker()
    funcs = tracker.funcs(_reader(context))
    funcs.update(tracker.watch(context.funcs))  # scrapeConfigs of a scrape template that read a secret
    try:
        if tmpl.kind == "go":
            text = _render_go(source, tmpl, context, funcs)
        else:
            text = _render_jinja(source, tmpl, context, funcs, tracker)
    except RenderError as exc:
        if not tracker.values:
            raise
        raise RenderError(exc.job, exc.host, exc.file, tracker.redact(exc.cause), exc.fix, exc.line, exc.column) from None
    return Output(tmpl.out, text.encode("utf-8"), tmpl.executable, tracker.secret, "template", tmpl.rel)


def _render_go(source: JobSource, tmpl: Template, context: Context, funcs: dict) -> str:
    try:
        return functions.parse_template(tmpl.text, tmpl.rel, prometheus.PARSE_FUNCS).execute(context.data, funcs=funcs)
    except gotemplate.TemplateError as exc:
        raise RenderError(source.name, context.data.WorkerIP, tmpl.rel, _cause(exc.cause), fix_for(exc.cause, source.name),
                          exc.line or None, exc.column) from None
    except RecursionError:
        raise RenderError(source.name, context.data.WorkerIP, tmpl.rel, "template recursion too deep",
                          "break the {{template}} cycle") from None


def _cause(cause: str) -> str:
    return cause[len("error calling "):] if cause.startswith("error calling ") else cause


def fix_for(cause: str, job: str) -> str:
    """A fix for a render failure, from its cause."""
    if "namespace is not available" in cause:
        return ("a job reads maand/bucket (every port), vars/bucket, maand/worker[/<ip>], its own maand/job/%s,"
                " vars/job/%s, vars/bucket/job/%s, secrets/job/%s, maand/job/%s/worker/<ip>, and the job namespaces"
                " of jobs it demands (a command with demands.job in manifest.json)" % (job, job, job, job, job))
    if "not found in namespace" in cause:
        return ("set the key (vars/job/<job>: vars.toml or a hook; vars/bucket: bucket.conf; vars/bucket/job/<job>:"
                " bucket.jobs.conf; secrets/job/<job>: a hook) and build again, or read it with getOptional")
    if "decrypt" in cause or "kv.key" in cause:
        return "restore secrets/kv.key from a backup of the bucket"
    return "fix the template (docs/templates.md); the build parse-checks .tpl files, the deploy runs them"


# --- Jinja2 (.j2): the same context ----------------------------------------------------------

class _NamespaceView(Mapping):
    """One namespace as Jinja sees it: a missing key is an error naming the key, as Go's get."""

    def __init__(self, reader: functions.KVReader, tracker: functions.SecretTracker, ns: str) -> None:
        self._reader, self._tracker, self._ns = reader, tracker, ns

    def _secret(self, key: str) -> bool:
        """A secrets/ namespace or a TLS private key (certs/<n>.key of maand/job/<job>/worker/<ip>), as the Go
        functions' tracker has it: the output that reads one is secret-bearing (0600, HMAC digest, no --diff).
        ``.items()`` and ``.values()`` read every key through __getitem__, so they are tracked too."""
        return functions.is_secret_ns(self._ns) or functions.is_private_key(self._ns, key)

    def __getitem__(self, key: str) -> str:
        value = self._reader.get(self._ns, str(key))
        return self._tracker.saw(value) if self._secret(str(key)) else value

    def get(self, key: str, default: Any = None) -> Any:
        value = self._reader.lookup(self._ns, str(key))
        if value is not None and self._secret(str(key)):
            self._tracker.saw(value)
        return default if value is None else value

    def __contains__(self, key: object) -> bool:
        return self._reader.lookup(self._ns, str(key)) is not None

    def __iter__(self):
        return iter(self._reader.keys(self._ns))

    def __len__(self) -> int:
        return len(self._reader.keys(self._ns))


class _KVView(Mapping):
    """kv[namespace] in a .j2: only the namespaces the job may read (maand's rules)."""

    def __init__(self, reader: functions.KVReader, tracker: functions.SecretTracker) -> None:
        self._reader, self._tracker = reader, tracker

    def __getitem__(self, ns: str) -> _NamespaceView:
        self._reader.check(str(ns))
        return _NamespaceView(self._reader, self._tracker, str(ns))

    def __contains__(self, ns: object) -> bool:
        return ns in self._reader.allowed

    def __iter__(self):
        return iter(sorted(self._reader.allowed))

    def __len__(self) -> int:
        return len(self._reader.allowed)


def jinja_variables(context: Context, funcs: Mapping[str, Callable],
                    tracker: functions.SecretTracker) -> dict[str, Any]:
    """A .j2's variables: the dot fields by name, `kv`, and maand's functions."""
    variables: dict[str, Any] = dataclasses.asdict(context.data)
    variables.update(funcs)
    variables["kv"] = _KVView(_reader(context), tracker)
    return variables


@functools.lru_cache(maxsize=64)
def _jinja_env(texts: tuple) -> Any:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from jinja2.sandbox import SecurityError

    class Limited(ImmutableSandboxedEnvironment):
        """The sandbox, with * and ** bounded (a string times a billion, a power of a huge exponent)."""

        intercepted_binops = frozenset(("*", "**"))

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "*":
                for seq, times in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(times, int) and \
                            len(seq) * times > gotemplate.MAX_OUTPUT:
                        raise SecurityError("a repetition of over %d MiB" % (gotemplate.MAX_OUTPUT >> 20))
            if operator == "**" and isinstance(right, (int, float)) and abs(right) > 10000:
                raise SecurityError("a power with an exponent over 10000")
            return super().call_binop(context, operator, left, right)

    sources = dict(texts)
    loader = jinja2.FunctionLoader(lambda name: (sources[name], name, lambda: True) if name in sources else None)
    env = Limited(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.filters.update(JINJA_FILTERS)
    return env


def _b64decode(text: str) -> str:
    return base64.b64decode(text.encode("ascii")).decode("utf-8")


# The few Ansible filters config files use most, with Ansible's meaning (stdlib only).
JINJA_FILTERS = {
    "to_json": lambda value: json.dumps(value, sort_keys=False),
    "to_nice_json": lambda value, indent=4: json.dumps(value, indent=indent, sort_keys=True),
    "b64encode": lambda text: base64.b64encode(str(text).encode("utf-8")).decode("ascii"),
    "b64decode": _b64decode,
    "quote": lambda text: shlex.quote(str(text)),
    "bool": lambda value: value if isinstance(value, bool) else str(value).strip().lower() in ("yes", "on", "1", "true"),
}


def _render_jinja(source: JobSource, tmpl: Template, context: Context, funcs: dict,
                  tracker: functions.SecretTracker) -> str:
    import jinja2

    env = _jinja_env(tuple((t.rel, t.text) for t in source.templates if t.kind == "jinja"))
    host = context.data.WorkerIP
    try:
        return _bounded(env.get_template(tmpl.rel).generate(jinja_variables(context, funcs, tracker)))
    except RecursionError:
        raise RenderError(source.name, host, tmpl.rel, "nested too deeply (recursive macros or includes)",
                          "break the recursion in the template") from None
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(source.name, host, exc.filename or tmpl.rel, "does not parse: %s" % exc.message,
                          "fix the Jinja2 syntax", exc.lineno) from None
    except (jinja2.TemplateError, functions.KVError, gotemplate.TemplateError, prometheus.PrometheusError, ArithmeticError,
            TypeError, ValueError, LookupError, AttributeError) as exc:
        file, line = _jinja_frame(exc, tmpl.rel, {t.rel for t in source.templates})
        cause = getattr(exc, "message", None) or str(exc)
        raise RenderError(source.name, host, file, cause, fix_for(cause, source.name), line) from None


def _bounded(chunks: Iterable[str]) -> str:
    """The rendered text, within the Go engine's limits: MAX_OUTPUT characters, MAX_SECONDS."""
    from jinja2.sandbox import SecurityError

    out, size, deadline = [], 0, time.monotonic() + gotemplate.MAX_SECONDS
    for chunk in chunks:
        size += len(chunk)
        if size > gotemplate.MAX_OUTPUT:
            raise SecurityError("output exceeds %d MiB; a template renders a configuration file, not bulk data"
                                % (gotemplate.MAX_OUTPUT >> 20))
        if time.monotonic() > deadline:
            raise SecurityError("rendering took over %d seconds" % gotemplate.MAX_SECONDS)
        out.append(chunk)
    return "".join(out)


def _jinja_frame(exc: BaseException, default: str, names: set) -> tuple[str, int | None]:
    """The template file and line where a Jinja2 render failed (Jinja rewrites tracebacks to them)."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename in names:
            return frame.filename, frame.lineno
    return default, None


# --- writing the staged tree -------------------------------------------------------------------

def write_stage(dest: str, source: JobSource, alloc_content: AllocationContent) -> None:
    """Materialise one allocation's tree at dest (replaced): links to plain files, generated files written.

    A plain file is a hard link to the workspace file (a copy when linking fails); a generated file
    is written fresh, so nothing ever writes through a link into the workspace."""
    remove_tree(dest)
    os.makedirs(dest, mode=0o755)
    for rel in source.dirs:
        os.makedirs(os.path.join(dest, rel), mode=0o755, exist_ok=True)
    generated = {o.rel: o for o in alloc_content.outputs}
    for rel in alloc_content.files:
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if rel in generated:
            _write_output(target, generated[rel])
        else:
            storage.link_or_copy(os.path.join(source.root, rel), target)
    # folders keep their modes, as rsync --archive carries them; set last, deepest first
    for rel in sorted(source.dirs, key=lambda r: r.count("/"), reverse=True) + [""]:
        mode = os.stat(os.path.join(source.root, rel) if rel else source.root).st_mode
        os.chmod(os.path.join(dest, rel) if rel else dest, stat.S_IMODE(mode))


def remove_tree(path: str) -> None:
    """rmtree that also removes staged folders whose mode (copied from the workspace) is read-only."""
    def retry(func: Callable, failed: str, dummy: Any) -> None:
        os.chmod(os.path.dirname(failed), 0o700)
        func(failed)
    if os.path.lexists(path):
        shutil.rmtree(path, onerror=retry)


def _write_output(path: str, out: Output) -> None:
    """0600 when it read a secret or holds a private key (rsync keeps the mode; the worker's agent gives it to
    the job's user), else 0644 or 0755."""
    mode = (0o700 if out.executable else 0o600) if out.private or out.secret else 0o755 if out.executable else 0o644
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(out.content)
    os.chmod(path, mode)  # the umask may have narrowed it


def stage_root(bucket_dir: str) -> str:
    return os.path.join(bucket_dir, "data", STAGE_DIR)


def stage_path(bucket_dir: str, host: str, job: str) -> str:
    """Where an allocation is staged: data/.deploy-stage/<host>/<job> (the folder is named after the job)."""
    return os.path.join(stage_root(bucket_dir), host, job)


def reset_stage(bucket_dir: str) -> str:
    """Empty data/.deploy-stage (0700: rendered files may hold secrets); the caller holds the deploy lock."""
    root = stage_root(bucket_dir)
    remove_tree(root)
    os.makedirs(root, mode=0o700)
    os.chmod(root, 0o700)
    return root


# --- the KV a deploy renders with ------------------------------------------------------------

class _SecretNamespace(Mapping):
    """secrets/job/<job> read from data/kv.json and decrypted only when a template reads a key."""

    def __init__(self, kv_store: Any, ns: str) -> None:
        self._store, self._ns = kv_store, ns
        self._keys = sorted(k for k, e in (kv_store.namespaces.get(ns) or {}).items() if not e.deleted)

    def __getitem__(self, key: str) -> str:
        from ..kv import store

        if key not in self._keys:
            raise KeyError(key)
        try:
            return self._store.get(self._ns, key, reveal_secrets=True)
        except store.KVStoreError as exc:
            raise functions.KVError(str(exc)) from None

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._keys else default

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def load_kv(bucket_dir: str) -> tuple[dict, Callable[[], bytes]]:
    """(KV for rendering, digest key loader): plain namespaces as strings, secrets decrypted lazily.

    A bucket built before data/kv.json existed renders from the KV computed from its catalog
    (catalog/kv_build.read_kv). Raises kv/functions.KVError naming the file and the fix."""
    from ..kv import store

    if not store.KVStore.exists(bucket_dir):
        return dict(kv_build.read_kv(bucket_dir)), digest_loader(bucket_dir)
    try:
        kv_store = store.KVStore.load(bucket_dir)
    except store.KVStoreError as exc:
        raise functions.KVError(str(exc)) from None
    kv: dict = dict(kv_store.snapshot())
    for ns in kv_store.namespaces:
        if functions.is_secret_ns(ns):
            kv[ns] = _SecretNamespace(kv_store, ns)
    return kv, digest_loader(bucket_dir)


def digest_loader(bucket_dir: str) -> Callable[[], bytes]:
    """A loader of the digest key of secret-bearing outputs (secrets/kv.key is read on first use)."""
    @functools.lru_cache(maxsize=1)
    def digest_key() -> bytes:
        return derive_digest_key(secrets.load_key(bucket_dir))
    return digest_key


def env_key_loader(bucket_dir: str, check_mode: bool = False) -> Callable[[], bytes]:
    """The loader of the job specs' environment digests' HMAC key (jobspec.env_digest_key of the bucket's KV
    key, secrets/kv.key, which build makes for a job spec with an environment: the deploy only reads it). In
    check mode, with no key yet, a fixed key stands in (every value is new)."""
    @functools.lru_cache(maxsize=1)
    def key() -> bytes:
        try:
            return jobspec.env_digest_key(secrets.load_key(bucket_dir))
        except secrets.SecretError:
            if os.environ.get(secrets.KEY_ENV, "").strip() or os.path.lexists(secrets.key_path(bucket_dir)):
                raise
            if check_mode:
                return jobspec.env_digest_key(b"maand.core: check mode, no secrets/kv.key yet")
            raise secrets.SecretError("%s is missing; run ansible-playbook maand.core.build -e maand_bucket=%s (it "
                                      "makes the key a job spec's environment needs)"
                                      % (secrets.KEY_REL, bucket_dir)) from None
    return key


# --- every allocation of a deploy ------------------------------------------------------------

OverlayFn = Callable[[str, str], Iterable[Overlay]]


@dataclasses.dataclass
class Staging:
    """The deploy's view of what it ships: plan content, sources, rendered allocations, errors."""

    content: dict = dataclasses.field(default_factory=dict)  # compute_plan's content argument
    sources: dict = dataclasses.field(default_factory=dict)  # job -> JobSource
    allocations: dict = dataclasses.field(default_factory=dict)  # (job, host) -> AllocationContent
    errors: list = dataclasses.field(default_factory=list)
    missing: dict = dataclasses.field(default_factory=dict)  # job -> [(namespace, key)] read as "" (compute's pending)

    def stage(self, bucket_dir: str, job: str, host: str) -> str:
        """Write one allocation's tree under data/.deploy-stage; returns its path."""
        dest = stage_path(bucket_dir, host, job)
        source = self.sources[job]
        alloc_content = self.allocations.get((job, host))
        if alloc_content is None:
            alloc_content = AllocationContent(job, host, dict(source.files), "", ())
        write_stage(dest, source, alloc_content)
        return dest

    def is_secret(self, job: str, host: str, rel: str) -> bool:
        """True for a generated file of the allocation that read a secret or is private (a key): --diff
        never shows it."""
        alloc_content = self.allocations.get((job, host))
        return any(o.rel == rel and (o.secret or o.private) for o in (alloc_content.outputs if alloc_content else ()))

    def shipped_bytes(self, job: str, host: str, rel: str) -> bytes | None:
        """What this deploy ships at rel for the allocation (a rendered output or the workspace file), or
        None when it ships nothing there. A symlink reads as "symlink -> target" (as the worker agent)."""
        alloc_content = self.allocations.get((job, host))
        for out in alloc_content.outputs if alloc_content else ():
            if out.rel == rel:
                return out.content
        source = self.sources.get(job)
        if source is None or rel not in source.files:
            return None
        path = os.path.join(source.root, rel)
        try:
            if os.path.islink(path):
                return ("symlink -> %s\n" % os.readlink(path)).encode("utf-8")
            with open(path, "rb") as handle:
                return handle.read(_READ_LIMIT + 1)
        except OSError:
            return None

    def stage_plan(self, bucket_dir: str, plan: Mapping[str, Any]) -> int:
        """Stage every op of the plan that syncs, pointing its src at the staged tree; returns how many.

        data/.deploy-stage is emptied first (the caller holds the deploy lock); unchanged
        allocations are neither staged nor touched."""
        reset_stage(bucket_dir)
        count = 0
        for step in plan.get("steps") or []:
            for ops in (step.get("ops") or {}).values():
                for op in ops:
                    if op.get("kind") in ("run", "files") and op.get("sync") and op.get("job") in self.sources:
                        op["src"] = self.stage(bucket_dir, op["job"], op["host"])
                        count += 1
        return count


def job_content(source: JobSource) -> dict:
    """The plan content of a job shipped as it is (no template, no overlay)."""
    return {"hash": content.tree_hash(source.files), "files": dict(source.files), "origins": {}}


def compute(bucket_dir: str, catalog: Mapping[str, Any], jobs: Iterable[str], hosts: Iterable[str],
            current_versions: Mapping[tuple, str] | None = None, update_seq: int = 0,
            overlays: Iterable[OverlayFn] = (), kv: tuple | None = None, pending: Iterable[str] = ()) -> Staging:
    """Read every job in jobs, render its active allocations on hosts; errors are collected, never raised.

    current_versions: (job, host) -> the version the worker runs (".CurrentVersion"; "0.0.0" if none).
    overlays: providers, each (job, host) -> extra generated files of that allocation (certificates, ...);
    a Prometheus server job's rules/ and consoles/ are always added (prometheus_overlays), and every
    template may call scrapeConfigs and ruleFiles (prometheus/funcs.py template_funcs).
    kv: (kv, digest key loader) as load_kv returns them (read from bucket_dir when None).
    pending: jobs whose pre_deploy hooks run later, at their wave (deploy/pre_deploy): a KV key they read that
    does not exist yet renders as "" and is listed in Staging.missing instead of failing the render."""
    out = Staging()
    hosts = set(hosts)
    records = {j["name"]: j for j in catalog.get("jobs", [])}
    for name in sorted(jobs):
        path = os.path.join(bucket_dir, records[name].get("path") or os.path.join("workspace", "jobs", name))
        try:
            out.sources[name] = read_job(name, path)
        except content.ContentError as exc:
            out.content[name] = {"error": str(exc)}
            continue
        out.content[name] = job_content(out.sources[name])
    todo = [a for a in catalog.get("allocations", []) if a.get("state") == "active" and a.get("worker") in hosts
            and a.get("job") in out.sources]
    if not todo:
        return out
    if kv is None and any(out.sources[a["job"]].templates for a in todo):
        try:
            kv = load_kv(bucket_dir)
        except functions.KVError as exc:
            out.errors.append("cannot read the KV store to render templates: %s" % exc)
            return out
    elif kv is None:
        kv = ({}, digest_loader(bucket_dir))
    overlays = tuple(overlays or ()) + (prometheus_overlays(bucket_dir, catalog),)
    funcs = prometheus.template_funcs(bucket_dir, catalog, kv[0])
    _render_all(out, catalog, todo, kv, current_versions or {}, update_seq, overlays, funcs, frozenset(pending))
    return out


def _pending_key(digest_key: Callable[[], bytes]) -> Callable[[], bytes]:
    """The digest key of a job rendered before its pre_deploy hooks: without secrets/kv.key (no secret exists yet,
    its hooks may write the first) a throwaway key, as nothing secret can be in its output; the wave renders it
    again with the real key."""
    def key() -> bytes:
        try:
            return digest_key()
        except (OSError, secrets.SecretError):
            return derive_digest_key(b"maand.core: rendered before pre_deploy, no secrets/kv.key yet")
    return key


def prometheus_overlays(bucket_dir: str, catalog: Mapping[str, Any]) -> OverlayFn:
    """maand's Prometheus server staging as overlays: rules/, consoles/runbooks/, consoles/dashboards/ on
    every allocation of a job that ships prometheus.yml(.tpl) (prometheus/consoles.py); origin "prometheus"."""
    files_for = prometheus.server_files_provider(bucket_dir, catalog)

    def provide(job: str, host: str) -> list[Overlay]:
        try:
            files = files_for(job, host)
        except prometheus.PrometheusError as exc:
            raise RenderError(job, host, exc.file or "rules/", str(exc),
                              "fix the file named (maand's _prometheus/ rules: docs/templates.md, Prometheus)"
                              " and build again") from None
        return [Overlay(rel, body_text, origin=prometheus.ORIGIN) for rel, body_text in sorted(files.items())]
    return provide


def _render_all(out: Staging, catalog: Mapping[str, Any], todo: list, kv: tuple,
                current_versions: Mapping[tuple, str], update_seq: int, overlays: tuple,
                funcs: Mapping[str, Callable], pending: frozenset = frozenset()) -> None:
    failed: dict[tuple, tuple[RenderError, list]] = {}
    upstream = {name: tuple(functions.upstream_jobs(catalog, name)) for name in out.sources}
    workers = {w["host"]: w for w in catalog.get("workers", [])}
    versions = {j["name"]: str(j.get("version") or "") for j in catalog.get("jobs", [])}
    bucket_id = str(catalog.get("bucket_id") or "")
    for alloc in todo:
        job, host = alloc["job"], alloc["worker"]
        source = out.sources[job]
        try:
            extra = tuple(item for provider in overlays for item in provider(job, host))
        except RenderError as exc:  # a provider's generated file is missing (e.g. a certificate not built)
            out.errors.append("%s: %s (fix: %s)" % (exc.where(), exc.cause, exc.fix))
            out.content[job].setdefault("allocations", {})[host] = {"error": "%s: %s" % (exc.where(), exc.cause)}
            continue
        if not source.templates and not extra:
            continue
        worker = workers.get(host) or {}
        data = functions.AllocationData(
            AllocationID=str(alloc.get("alloc_id") or ""), Job=job,
            CurrentVersion=current_versions.get((job, host)) or "0.0.0", NewVersion=versions.get(job, ""),
            BucketID=bucket_id, WorkerID=str(worker.get("worker_id") or functions.stable_uuid(host)), WorkerIP=host,
            Labels=sorted(worker.get("labels") or []), UpdateSeq=update_seq,
            BucketPath=layout.bucket_root(bucket_id), JobPath=layout.job_root(bucket_id, job))
        context = Context(kv[0], data, upstream[job], _pending_key(kv[1]) if job in pending else kv[1], funcs,
                          out.missing.setdefault(job, []) if job in pending else None)
        try:
            alloc_content = render(source, context, extra)
        except RenderError as exc:
            key = (exc.job, exc.file, exc.line, exc.column, exc.cause)
            failed.setdefault(key, (exc, []))[1].append(host)
            out.content[job].setdefault("allocations", {})[host] = {"error": "%s: %s" % (exc.where(), exc.cause)}
            continue
        out.allocations[(job, host)] = alloc_content
        out.content[job].setdefault("allocations", {})[host] = alloc_content.plan_entry()
    for exc, failed_hosts in failed.values():
        out.errors.append("template: %s" % exc.text(failed_hosts))
