# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PostgreSQL state backend: a bucket's catalog, KV document, deploy lock and run records in one
database, for several controllers (a team, AWX jobs, CI) deploying one bucket.

Chosen by ``state_url = "postgresql://..."`` in maand.conf or the ``MAAND_STATE_URL`` environment
variable (``_storage.state_url``). One bucket per database, or per schema (libpq's
``options=-csearch_path%3D<schema>`` in the URL); the password comes from libpq's own means
(``PGPASSWORD``, ``~/.pgpass``, a service file; a URL holding one is refused: ``has_password``,
``_storage.check_url``) and is never printed: messages name the URL without it (``redact``), and libpq's
messages, which may echo a part of the URL, are scrubbed of its secrets (``scrub``).

* Tables are created and migrated here (``maand_schema`` holds the version, ``MIGRATIONS``), with the
  session's search_path pinned to its schema (``pin_search_path``); a table owned by another role than
  current_user refuses the store (``check_owners``: another role may have pre-created it in a shared schema).
* Documents (``maand_documents``: the catalog, ``bucket_id``, the KV document) carry a generation
  that every write bumps, in a transaction; a write that names the generation it read is refused
  (``StaleState``) when another writer moved it, naming that writer, its time and the generation.
* The bucket lock (``shared_lock``) is a session advisory lock held around a read-modify-write.
* The deploy lock is a session advisory lock held by a small holder process (``main``: this file
  runs as a script) for the whole ansible-playbook run: the deploy_lock task starts it, it exits
  when the playbook's process is gone or when released, and PostgreSQL frees a session's advisory
  locks when it ends, so a controller that dies leaves no stale lock.
* Run records (``maand_runs``): each deploy run's plan and state, for ``maand.core.cat``.
* Deploy records (``maand_deploy_records``, schema version 2): one JSON document per finished
  deploy run (deploy/record.py), for ``maand.core.logs``, ``info`` and ``cat``; writing one drops
  all but the newest records and run records (the history is bounded).
* The board (``maand_board``, schema version 3): the entries the slices of a sliced deploy meet on
  (deploy/slices.py), by run key and name; each member's liveness is a session advisory lock on its own key,
  held by a holder process as the deploy lock is (``member``: this file runs as a script), so a controller
  that dies frees it (``board_alive``).

Only the standard library and psycopg (3), imported late: without psycopg a PostgreSQL URL is an
error naming the pip command. No Ansible imports, and no imports of the rest of the core (the
holder runs this file alone).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.parse

if __package__:
    from ..errors import MaandError
else:  # run alone as the deploy lock holder (python3 state_pg.py hold ...): the errors package by its path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    MaandError = __import__("errors").MaandError

SCHEMA_VERSION = 3
APP = "maand.core"
URL_ENV = "MAAND_STATE_URL"
INSTALL = "python3 -m pip install 'psycopg>=3.1,<4'"
POLL = 0.25  # seconds between lock attempts and liveness checks

# Advisory lock keys: one per purpose and schema (advisory locks are per database, not per schema).
_KEY = "hashtextextended('maand.core:%s:' || current_schema(), 0)"
DEPLOY_KEY, BUCKET_KEY, SCHEMA_KEY = _KEY % "deploy", _KEY % "bucket", _KEY % "schema"
MEMBER_GRACE = 3.0  # seconds a member's holder tries for its lock (another controller's liveness probe holds it briefly)
# a member of a sliced run: its run key and name as the two parameters
MEMBER_KEY = "hashtextextended('maand.core:member:' || current_schema() || ':' || %s || ':' || %s, 0)"
MEMBER_ENV = "MAAND_BOARD_MEMBER"  # "<run_key>/<member>" for the member holder

MIGRATIONS = {
    1: [
        """CREATE TABLE IF NOT EXISTS maand_documents (
               name text PRIMARY KEY,
               body text NOT NULL,
               generation bigint NOT NULL,
               written_at timestamptz NOT NULL DEFAULT now(),
               written_by text NOT NULL DEFAULT '',
               source text NOT NULL DEFAULT '')""",
        """CREATE TABLE IF NOT EXISTS maand_deploy_lock (
               id integer PRIMARY KEY CHECK (id = 1),
               host text NOT NULL, run_pid integer NOT NULL, run_start bigint,
               holder_pid integer NOT NULL, owner text NOT NULL DEFAULT '',
               started timestamptz NOT NULL DEFAULT now())""",
        """CREATE TABLE IF NOT EXISTS maand_runs (
               run_id text PRIMARY KEY,
               plan text NOT NULL,
               state text NOT NULL,
               written_at timestamptz NOT NULL DEFAULT now(),
               written_by text NOT NULL DEFAULT '')""",
    ],
    2: [
        """CREATE TABLE IF NOT EXISTS maand_deploy_records (
               run_id text PRIMARY KEY,
               record text NOT NULL,
               written_at timestamptz NOT NULL DEFAULT now(),
               written_by text NOT NULL DEFAULT '')""",
    ],
    3: [
        """CREATE TABLE IF NOT EXISTS maand_board (
               run_key text NOT NULL,
               name text NOT NULL,
               body text NOT NULL,
               written_at timestamptz NOT NULL DEFAULT now(),
               written_by text NOT NULL DEFAULT '',
               PRIMARY KEY (run_key, name))""",
    ],
}


TABLES = ("maand_schema", "maand_documents", "maand_deploy_lock", "maand_runs", "maand_deploy_records", "maand_board")


class StateStoreError(MaandError):
    """The store cannot be used (names the store without its password, and the fix)."""


class StaleState(StateStoreError):
    """A write was refused: another writer moved the document since it was read."""


class StateLocked(StateStoreError):
    """Another controller holds the lock."""


@dataclasses.dataclass
class Doc:
    """One stored document: its text, generation and who wrote it when."""

    text: str
    generation: int | None = None
    written_at: str = ""
    written_by: str = ""
    source: str = ""


SECRET_KEYS = ("password", "sslpassword")  # libpq URL parameters that hold a secret
_SEEN_SECRETS = set()  # the secrets of every URL this process connected with: scrubbed from libpq's messages


def _query_pairs(query):
    """[(raw pair, key percent-decoded and lower-cased, value)] of a URL query (libpq decodes keys too)."""
    out = []
    for pair in query.split("&"):
        if pair:
            key, _sep, value = pair.partition("=")
            out.append((pair, urllib.parse.unquote(key).strip().lower(), value))
    return out


def _split(url, libpq=False):
    """(scheme://, userinfo or None, rest): the userinfo ends at the last '@' before the first '/' (what any reader
    may take as userinfo: urlsplit's ends at '?' or '#' too), or with libpq at the first one (as libpq reads it)."""
    head, sep, rest = url.partition("://")
    if not sep:
        return "", None, url
    end = rest.index("/") if "/" in rest else len(rest)
    at = rest.find("@", 0, end) if libpq else rest.rfind("@", 0, end)
    if at < 0:
        return head + sep, None, rest
    return head + sep, rest[:at], rest[at + 1:]


def secrets_in(url):
    """Every password the URL holds (user:password@, password=, sslpassword=), raw and percent-decoded, as
    libpq and as urllib read it: what no message may show."""
    found = set()
    if not isinstance(url, str):
        return found
    candidates = []
    for libpq in (False, True):
        _prefix, userinfo, rest = _split(url, libpq)
        if userinfo is not None and ":" in userinfo:
            candidates.append(userinfo.split(":", 1)[1])
    query = rest.split("?", 1)[1] if "?" in rest else ""
    candidates += [value for _pair, key, value in _query_pairs(query.split("#", 1)[0]) if key in SECRET_KEYS]
    for value in candidates:
        for form in (value, urllib.parse.unquote(value)):
            if form:
                found.add(form)
    return found


def scrub(text, secrets=None):
    """text with every secret (secrets_in of the URLs connected with, and `secrets`) replaced by ***; one of
    fewer than 4 characters only where it is quoted, as libpq quotes the tokens it echoes."""
    for value in sorted(set(secrets or ()) | _SEEN_SECRETS, key=len, reverse=True):
        text = text.replace(value, "***") if len(value) >= 4 else text.replace('"%s"' % value, '"***"')
    return text


def redact(url):
    """The URL without its password (for every message): no user:password@, no password= or sslpassword= query
    parameter (its key percent-decoded first: %70assword= is password=), and nothing left that secrets_in finds."""
    try:
        urllib.parse.urlsplit(url)
    except ValueError:
        return "postgresql://(unparsable URL)"
    prefix, userinfo, rest = _split(url)
    if userinfo is not None:
        rest = "%s@%s" % (userinfo.split(":", 1)[0], rest)
    rest = rest.split("#", 1)[0]
    if "?" in rest:
        base, query = rest.split("?", 1)
        kept = "&".join(pair for pair, key, _value in _query_pairs(query) if key not in SECRET_KEYS)
        rest = "%s?%s" % (base, kept) if kept else base
    return scrub(prefix + rest, secrets_in(url))


def has_password(url):
    """True when the URL itself carries a password (user:password@, password= or sslpassword=, the key
    percent-encoded or not)."""
    if not isinstance(url, str):
        return False
    _prefix, userinfo, rest = _split(url)
    if userinfo is not None and ":" in userinfo:
        return True
    return bool(secrets_in(url)) or any(key in SECRET_KEYS for _pair, key, _value in _query_pairs(
        rest.split("?", 1)[1].split("#", 1)[0] if "?" in rest else ""))


def is_url(url):
    return isinstance(url, str) and url.startswith(("postgresql://", "postgres://"))


def whoami():
    return "%s pid %d" % (socket.gethostname(), os.getpid())


def _psycopg():
    try:
        import psycopg  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise StateStoreError("the state store is PostgreSQL (state_url / %s) but the Python package psycopg (3) is not "
                              "installed for %s: run %s (an execution environment: add psycopg to its "
                              "requirements)" % (URL_ENV, sys.executable, INSTALL)) from None
    return psycopg


def connect(url):
    """A new autocommit session (keepalives on, so a dead controller's session ends). libpq's messages may echo
    a part of the URL (an invalid %-escape: `invalid percent-encoded token: "<password>"`): every message of this
    module goes through _first_line, which scrubs the URL's secrets."""
    psycopg = _psycopg()
    _SEEN_SECRETS.update(secrets_in(url))
    try:
        return psycopg.connect(url, autocommit=True, application_name="%s %s" % (APP, whoami())[:63],
                               connect_timeout=10, keepalives=1, keepalives_idle=10, keepalives_interval=5,
                               keepalives_count=3)
    except psycopg.Error as exc:
        raise StateStoreError("cannot connect to the state store %s: %s (the password comes from PGPASSWORD, "
                              "~/.pgpass or a service file)" % (redact(url), _first_line(exc))) from None


def _first_line(exc):
    return scrub((str(exc).strip().splitlines() or [type(exc).__name__])[0])


def pin_search_path(conn):
    """Pin the session's search_path to the schema it creates in today (current_schema(): the URL's
    options=-csearch_path%3D<schema>, else the server's default, usually public) followed by pg_temp, so
    pg_catalog is searched first, no other schema of the default path is searched, and session temporary
    tables come last (security review 4, N9). The default schema, and so the advisory lock keys, stay
    what they were. Nothing is pinned when no schema of the path exists (creating then fails as before)."""
    row = conn.execute("SELECT current_schema()").fetchone()
    if row and row[0]:
        conn.execute("SELECT set_config('search_path', quote_ident(%s) || ', pg_temp', false)", (row[0],))


def check_owners(conn, label):
    """Refuse the store when one of maand's tables, as this session's search_path finds it, is owned by
    another role than current_user: a role that can create in a shared schema (public before
    PostgreSQL 15) may pre-create maand_documents to read the state or steer it (security review 4, N9)."""
    rows = conn.execute(
        "SELECT t.name, n.nspname, pg_get_userbyid(c.relowner), current_user FROM unnest(%s::text[]) AS t(name) "
        "JOIN pg_class c ON c.oid = to_regclass(t.name) JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE pg_get_userbyid(c.relowner) <> current_user ORDER BY t.name", (list(TABLES),)).fetchall()
    if rows:
        name, schema, owner, me = rows[0]
        others = "" if len(rows) == 1 else " (and %s)" % ", ".join("%s.%s" % (r[1], r[0]) for r in rows[1:])
        raise StateStoreError(
            "the state store %s is refused: table %s.%s is owned by role %s, not by %s, the role maand.core connects "
            "as%s; another role may read or steer the bucket's state through it. Give maand.core a dedicated "
            "database or schema that only its role can create in (for the public schema: REVOKE CREATE ON SCHEMA "
            "public FROM PUBLIC), and drop that table or, if it is yours, ALTER TABLE %s.%s OWNER TO %s (see "
            "docs/security.md)" % (label, schema, name, owner, me, others, schema, name, me))


def migrate(conn, label):
    """Pin the search_path, create or upgrade the tables to SCHEMA_VERSION, once, under a transaction
    advisory lock, and check that current_user owns them (a store already at SCHEMA_VERSION costs
    four small queries)."""
    pin_search_path(conn)
    try:
        row = conn.execute("SELECT max(version) FROM maand_schema").fetchone()
        if row and row[0] == SCHEMA_VERSION:
            check_owners(conn, label)
            return
    except _psycopg().errors.UndefinedTable:
        pass  # a new store: created below
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)" % SCHEMA_KEY)
        conn.execute("CREATE TABLE IF NOT EXISTS maand_schema (version integer NOT NULL)")
        row = conn.execute("SELECT max(version) FROM maand_schema").fetchone()
        have = row[0] or 0
        if have > SCHEMA_VERSION:
            raise StateStoreError("the state store %s has schema version %d, newer than this maand.core's %d: "
                                  "upgrade the maand.core collection on this controller" % (label, have, SCHEMA_VERSION))
        for version in range(have + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version]:
                conn.execute(statement)
        if have < SCHEMA_VERSION:
            conn.execute("DELETE FROM maand_schema")
            conn.execute("INSERT INTO maand_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
        check_owners(conn, label)  # CREATE TABLE IF NOT EXISTS kept any table another role made first


def check_board(run_key, name=None):
    """StateStoreError unless run_key (1-100 letters, digits, '.', '_', '-', ':') and name (1-200 characters,
    no NUL) can be used on the board."""
    if not isinstance(run_key, str) or not 0 < len(run_key) <= 100 or any(
            not (c.isascii() and (c.isalnum() or c in "._-:")) for c in run_key):
        raise StateStoreError("run key %r: use 1-100 letters, digits, '.', '_', '-' or ':' (-e maand_run_key)"
                              % (run_key,))
    if name is not None and (not isinstance(name, str) or not 0 < len(name) <= 200 or "\0" in name):
        raise StateStoreError("board entry %r of run key %s: a name of 1-200 characters without NUL" % (name, run_key))


def _stamp(value):
    return value.isoformat(timespec="seconds") if hasattr(value, "isoformat") else str(value or "")


class PgBoardMixin:
    """The board of a sliced run (deploy/slices.py) in the table maand_board: PgStore's part for it, using
    PgStore's url and _run."""

    def board_put(self, run_key, name, text):
        check_board(run_key, name)
        self._run("writing %s of run key %s" % (name, run_key), lambda c: c.execute(
            "INSERT INTO maand_board (run_key, name, body, written_at, written_by) VALUES (%s, %s, %s, now(), %s) "
            "ON CONFLICT (run_key, name) DO UPDATE SET body = EXCLUDED.body, written_at = now(), "
            "written_by = EXCLUDED.written_by", (run_key, name, text, whoami())))

    def board_get(self, run_key, name):
        check_board(run_key, name)
        row = self._run("reading %s of run key %s" % (name, run_key), lambda c: c.execute(
            "SELECT body FROM maand_board WHERE run_key = %s AND name = %s", (run_key, name)).fetchone())
        return row[0] if row else None

    def board_items(self, run_key, prefix=""):
        check_board(run_key)
        rows = self._run("reading run key %s" % run_key, lambda c: c.execute(
            "SELECT name, body FROM maand_board WHERE run_key = %s AND starts_with(name, %s)",
            (run_key, prefix)).fetchall())
        return {r[0]: r[1] for r in rows}

    def board_join(self, run_key, member, run_pid, run_start=None):
        """Start this member's holder: it keeps the member's advisory lock while run_pid lives."""
        check_board(run_key, member)
        env = dict(os.environ, **{URL_ENV: self.url, MEMBER_ENV: "%s/%s" % (run_key, member)})
        cmd = [sys.executable, os.path.abspath(__file__), "member", str(run_pid), str(run_start or 0), "0"]
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,  # pylint: disable=consider-using-with
                                stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        line = _read_line(proc, 30)
        proc.stdout.close()
        try:
            answer = json.loads(line) if line else {}
        except ValueError:
            answer = {}
        if not answer.get("taken"):
            raise StateStoreError(answer.get("error") or "the member holder of %s (run key %s) did not start"
                                  % (member, run_key))
        self.board_put(run_key, "holder/%s" % member, json.dumps(
            {"host": socket.gethostname(), "pid": proc.pid, "start": process_start(proc.pid)}))

    def board_alive(self, run_key, member):
        """True while the member's holder keeps its lock; False when it is free (dead, or never joined)."""
        check_board(run_key, member)

        def query(conn):
            if conn.execute("SELECT pg_try_advisory_lock(%s)" % MEMBER_KEY, (run_key, member)).fetchone()[0]:
                conn.execute("SELECT pg_advisory_unlock(%s)" % MEMBER_KEY, (run_key, member))
                return False
            return True
        return self._run("reading the liveness of %s" % member, query)

    def board_leave(self, run_key, member, run_pid):  # pylint: disable=unused-argument
        """Stop this host's holder of member (idempotent)."""
        text = self.board_get(run_key, "holder/%s" % member)
        row = json.loads(text) if text else {}
        if row.get("host") != socket.gethostname() or not pid_alive(row.get("pid"), row.get("start")):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(row["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 10
        while pid_alive(row["pid"]) and time.monotonic() < deadline:
            time.sleep(0.02)

    def board_drop(self, run_key):
        check_board(run_key)
        self._run("dropping run key %s" % run_key, lambda c: c.execute(
            "DELETE FROM maand_board WHERE run_key = %s", (run_key,)))

    def board_keys(self):
        rows = self._run("reading the run keys", lambda c: c.execute(
            "SELECT run_key FROM maand_board GROUP BY run_key ORDER BY min(written_at), run_key").fetchall())
        return [r[0] for r in rows]


class PgStore(PgBoardMixin):
    """The PostgreSQL backend of a bucket's state (see the module docstring)."""

    kind = "postgresql"

    def __init__(self, url):
        self.url = url
        self.label = redact(url)
        self.seen = {}  # {document name: generation last read by this process}
        self._conn = None
        self._pid = None

    def where(self, name):
        return "%s in the state store %s" % (name, self.label)

    def conn(self):
        if self._conn is None or self._pid != os.getpid() or self._conn.closed:
            self._conn, self._pid = None, None  # a forked child never reuses its parent's socket
            conn = connect(self.url)
            try:
                migrate(conn, self.label)
            except StateStoreError:
                conn.close()
                raise
            except _psycopg().Error as exc:
                conn.close()
                raise StateStoreError("cannot prepare the tables of the state store %s: %s" % (
                    self.label, _first_line(exc))) from None
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _run(self, what, func):
        try:
            return func(self.conn())
        except _psycopg().Error as exc:
            raise StateStoreError("state store %s: %s failed: %s" % (self.label, what, _first_line(exc))) from None

    # --- documents ------------------------------------------------------------------------------

    def read(self, name):
        row = self._run("reading %s" % name, lambda c: c.execute(
            "SELECT body, generation, written_at, written_by, source FROM maand_documents WHERE name = %s",
            (name,)).fetchone())
        self.seen[name] = row[1] if row else 0
        if row is None:
            return None
        return Doc(row[0], row[1], _stamp(row[2]), row[3], row[4])

    def exists(self, name):
        return bool(self._run("reading %s" % name, lambda c: c.execute(
            "SELECT 1 FROM maand_documents WHERE name = %s", (name,)).fetchone()))

    def write(self, name, text, expect=None, source=""):
        """Replace a document in a transaction; with expect (the generation read, 0: none), refuse
        when another writer moved it since. Returns the new generation."""
        def tx(conn):
            with conn.transaction():
                row = conn.execute("SELECT generation, written_at, written_by FROM maand_documents WHERE name = %s "
                                   "FOR UPDATE", (name,)).fetchone()
                current = row[0] if row else 0
                if expect is not None and current != expect:
                    raise StaleState(
                        "%s moved since this run read it (update_seq %s then, now update_seq %s, written at %s by %s): "
                        "another controller wrote it; run the command again (a build: update this checkout first)"
                        % (self.where(name), expect, current, _stamp(row[1]) if row else "-", row[2] if row else "-"))
                conn.execute(
                    "INSERT INTO maand_documents (name, body, generation, written_at, written_by, source) "
                    "VALUES (%s, %s, %s, now(), %s, %s) ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body, "
                    "generation = EXCLUDED.generation, written_at = now(), written_by = EXCLUDED.written_by, "
                    "source = EXCLUDED.source", (name, text, current + 1, whoami(), source or ""))
                return current + 1
        generation = self._run("writing %s" % name, tx)
        self.seen[name] = generation
        return generation

    def documents(self):
        """{name: Doc} of every document (moving state out of the store)."""
        rows = self._run("reading the documents", lambda c: c.execute(
            "SELECT name, body, generation, written_at, written_by, source FROM maand_documents").fetchall())
        return {r[0]: Doc(r[1], r[2], _stamp(r[3]), r[4], r[5]) for r in rows}

    def replace_all(self, docs, runs=(), records=()):
        """Replace every document, run record and deploy record in one transaction (moving state into the store)."""
        def tx(conn):
            with conn.transaction():
                conn.execute("DELETE FROM maand_documents")
                conn.execute("DELETE FROM maand_runs")
                conn.execute("DELETE FROM maand_deploy_records")
                for name, text in sorted(docs.items()):
                    conn.execute("INSERT INTO maand_documents (name, body, generation, written_by) VALUES "
                                 "(%s, %s, 1, %s)", (name, text, whoami()))
                for run_id, plan, state in runs:
                    conn.execute("INSERT INTO maand_runs (run_id, plan, state, written_by) VALUES (%s, %s, %s, %s)",
                                 (run_id, plan, state, whoami()))
                for run_id, text in records:
                    conn.execute("INSERT INTO maand_deploy_records (run_id, record, written_by) VALUES (%s, %s, %s)",
                                 (run_id, text, whoami()))
        self._run("replacing the bucket's state", tx)

    # --- run records ----------------------------------------------------------------------------

    def write_run(self, run_id, plan_text, state_text):
        self._run("writing run %s" % run_id, lambda c: c.execute(
            "INSERT INTO maand_runs (run_id, plan, state, written_at, written_by) VALUES (%s, %s, %s, now(), %s) "
            "ON CONFLICT (run_id) DO UPDATE SET plan = EXCLUDED.plan, state = EXCLUDED.state, written_at = now(), "
            "written_by = EXCLUDED.written_by", (run_id, plan_text, state_text, whoami())))

    def runs(self, limit=None):
        """[(run_id, plan text, state text)], oldest first (the last `limit` ones)."""
        rows = self._run("reading the run records", lambda c: c.execute(
            "SELECT run_id, plan, state FROM maand_runs ORDER BY run_id DESC" + (" LIMIT %d" % limit if limit else "")
        ).fetchall())
        return [tuple(r) for r in reversed(rows)]

    # --- deploy records ---------------------------------------------------------------------------

    def write_record(self, run_id, text, keep):
        """Store one deploy record; keep the newest `keep` deploy records and run records, drop the rest."""
        def tx(conn):
            with conn.transaction():
                conn.execute(
                    "INSERT INTO maand_deploy_records (run_id, record, written_at, written_by) VALUES (%s, %s, now(), %s) "
                    "ON CONFLICT (run_id) DO UPDATE SET record = EXCLUDED.record, written_at = now(), "
                    "written_by = EXCLUDED.written_by", (run_id, text, whoami()))
                for table in ("maand_deploy_records", "maand_runs"):
                    conn.execute("DELETE FROM %s WHERE run_id NOT IN (SELECT run_id FROM %s ORDER BY run_id DESC "
                                 "LIMIT %%s)" % (table, table), (max(1, int(keep)),))
        self._run("writing the deploy record %s" % run_id, tx)

    def records(self, limit=None):
        """[(run_id, record text)] of the kept deploy records, oldest first (the last `limit` ones)."""
        rows = self._run("reading the deploy records", lambda c: c.execute(
            "SELECT run_id, record FROM maand_deploy_records ORDER BY run_id DESC"
            + (" LIMIT %d" % int(limit) if limit else "")).fetchall())
        return [tuple(r) for r in reversed(rows)]

    # --- the bucket lock (short read-modify-write sections) -------------------------------------

    @contextlib.contextmanager
    def shared_lock(self, wait=False):
        conn = self.conn()
        if wait:
            self._run("waiting for the bucket lock", lambda c: c.execute("SELECT pg_advisory_lock(%s)" % BUCKET_KEY))
        elif not self._run("taking the bucket lock", lambda c: c.execute(
                "SELECT pg_try_advisory_lock(%s)" % BUCKET_KEY).fetchone()[0]):
            raise StateLocked("another maand.core run (%s) holds the bucket lock in the state store %s; wait for it "
                              "to finish" % (self._bucket_lock_owner(), self.label))
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                conn.execute("SELECT pg_advisory_unlock(%s)" % BUCKET_KEY)

    def _bucket_lock_owner(self):
        row = self._run("reading the lock owner", lambda c: c.execute(
            "SELECT a.application_name, a.client_addr FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE "
            "datname = current_database()) AND ((l.classid::bigint << 32) | l.objid::bigint) = "
            "(" + BUCKET_KEY + ") LIMIT 1").fetchone())
        return (row[0] or "?") if row else "a session"

    # --- the deploy lock (held by a holder process for the whole playbook run) -------------------

    def deploy_holder(self):
        """The holder row ({host, run_pid, ...}) when a session holds the deploy lock, else None."""
        def query(conn):
            if conn.execute("SELECT pg_try_advisory_lock(%s)" % DEPLOY_KEY).fetchone()[0]:
                conn.execute("SELECT pg_advisory_unlock(%s)" % DEPLOY_KEY)
                return None
            return _lock_row(conn) or {"host": "?", "run_pid": None, "owner": "a session without a lock row"}
        return self._run("reading the deploy lock", query)

    def lock_deploy(self, run_pid, run_start, wait=0.0, check_only=False):
        """Take the deploy lock for the run run_pid: (taken, note). Raises StateLocked naming the holder
        (after waiting up to `wait` seconds)."""
        if self._run("reading the deploy lock", lambda c: _held_for(c, run_pid, run_start)):
            return False, "deploy lock already held by this run"
        if check_only:
            deadline = time.monotonic() + max(0.0, float(wait))
            while self.deploy_holder() is not None:
                if time.monotonic() >= deadline:
                    raise StateLocked(self._busy(self.deploy_holder() or {}))
                time.sleep(POLL)
            return False, "check mode: deploy lock is free (not taken)"
        return self._spawn_holder(run_pid, run_start, wait)

    def _spawn_holder(self, run_pid, run_start, wait):
        env = dict(os.environ, **{URL_ENV: self.url})
        cmd = [sys.executable, os.path.abspath(__file__), "hold", str(run_pid), str(run_start or 0),
               str(max(0.0, float(wait)))]
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,  # pylint: disable=consider-using-with
                                stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
        line = _read_line(proc, max(0.0, float(wait)) + 30)
        proc.stdout.close()
        try:
            answer = json.loads(line) if line else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            err = b""
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
                err = proc.stderr.read()
            proc.stderr.close()
            raise StateStoreError("the deploy lock holder for %s did not start: %s" % (
                self.label, err.decode("utf-8", "replace").strip().splitlines()[-1:] or "no answer"))
        proc.stderr.close()
        if answer.get("error"):
            proc.wait()
            raise StateStoreError(answer["error"])
        if "busy" in answer:  # its row may be null: the lock held without a row (a writing build)
            proc.wait()
            raise StateLocked(self._busy(answer["busy"] or {}, wait))
        previous = answer.get("previous")
        if previous:
            return True, "took over a stale deploy lock (%s, no longer running)" % describe(previous)
        return True, "deploy lock taken (state store %s, holder pid %d)" % (self.label, proc.pid)

    def _busy(self, row, wait=0.0):
        waited = " after waiting %ss (-e maand_lock_wait)" % _num(wait) if wait else ""
        if not row:  # the lock without a holder row: a writing build (deploy_lock_for_build), or a deploy starting
            row = {"owner": "a build or a starting deploy", "host": "a controller (no lock row)"}
        return ("another deploy holds the deploy lock in the state store %s (%s)%s; wait for it to finish, or let "
                "this deploy wait for it with -e maand_lock_wait=SECONDS. A controller that dies frees it."
                % (self.label, describe(row), waited))

    @contextlib.contextmanager
    def deploy_lock_for_build(self):
        """Hold the advisory deploy lock for a writing build (this session, no holder row): refuses
        (StateLocked, naming the deploy) while a deploy holds it; a deploy starting meanwhile waits or
        refuses as beside another deploy (security review 4, N10)."""
        conn = self.conn()
        if not self._run("taking the deploy lock", lambda c: c.execute(
                "SELECT pg_try_advisory_lock(%s)" % DEPLOY_KEY).fetchone()[0]):
            row = self._run("reading the deploy lock", _lock_row) or {}
            raise StateLocked(
                "a deploy of this bucket is running (the deploy lock in the state store %s: %s); a build now would "
                "change the catalog and KV it deploys from: wait for the deploy to finish, then build again (--check "
                "builds are not refused)" % (self.label, describe(row) if row else "a session without a lock row"))
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                conn.execute("SELECT pg_advisory_unlock(%s)" % DEPLOY_KEY)

    def release_deploy(self, run_pid):
        """Stop this run's holder (it unlocks and deletes its row). True when one was stopped."""
        row = self._run("reading the deploy lock", _lock_row)
        if not row or row["host"] != socket.gethostname() or row["run_pid"] != run_pid:
            return False
        pid = row["holder_pid"]
        if not pid_alive(pid):
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        return True


def _num(value):
    return ("%g" % float(value)) if value else "0"


def describe(row):
    return "%s on %s, ansible-playbook pid %s, since %s" % (
        row.get("owner") or "a controller", row.get("host", "?"), row.get("run_pid"), row.get("started", "?"))


def holder_name(host, holder_pid, holder_start):
    """The application_name a holder sets on its session: host, pid and start time of the holder process,
    so a lock row alone (stale: the holder SIGKILLed, a reboot, a fixed hostname with reused pids) never
    passes for a lock this run holds (security review 4, N6)."""
    return ("maand.core holder %s %s %s" % (holder_pid, holder_start, host))[:63]


def _held_for(conn, run_pid, run_start):
    """True when this run holds the deploy lock: the row names this host and run (and the run's start time),
    its holder process is alive and the same process that took it (start time), and the advisory lock is
    granted to that holder's session (pg_locks, by the session's application_name)."""
    row = _lock_row(conn)
    if not row or row["host"] != socket.gethostname() or row["run_pid"] != run_pid:
        return False
    if run_start and row.get("run_start") and row["run_start"] != run_start:
        return False
    start = process_start(row["holder_pid"]) if isinstance(row["holder_pid"], int) else None
    if start is None or not pid_alive(row["holder_pid"], start):
        return False
    return bool(conn.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
        "AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND "
        "((l.classid::bigint << 32) | l.objid::bigint) = (" + DEPLOY_KEY + ") AND a.application_name = %s",
        (holder_name(row["host"], row["holder_pid"], start),)).fetchone()[0])


def _lock_row(conn):
    row = conn.execute("SELECT host, run_pid, run_start, holder_pid, owner, started FROM maand_deploy_lock "
                       "WHERE id = 1").fetchone()
    if row is None:
        return None
    return {"host": row[0], "run_pid": row[1], "run_start": row[2], "holder_pid": row[3], "owner": row[4],
            "started": _stamp(row[5])}


def _read_line(proc, timeout):
    """The holder's first stdout line (its answer), or b'' when it says nothing in time."""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready = select.select([fd], [], [], left)[0]
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def process_start(pid):
    """Start time of pid in clock ticks since boot (field 22 of /proc/<pid>/stat), or None."""
    try:
        with open("/proc/%d/stat" % pid, "r", encoding="utf-8", errors="replace") as handle:
            data = handle.read()
        return int(data[data.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pid, start=None):
    """True when pid runs, is not a zombie and (if start is given) is the same process that started
    then (process_start). Shared with bucket/locks.py: this file also runs alone as the lock holder."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the process exists but belongs to another user: alive
        pass
    if start is not None:
        now = process_start(pid)
        if now is not None and now != start:
            return False
    # a zombie (exited, not yet reaped) is not alive
    try:
        with open("/proc/%d/stat" % pid, "r", encoding="utf-8", errors="replace") as handle:
            data = handle.read()
        return data[data.rindex(")") + 2:].split()[0] != "Z"
    except (OSError, ValueError, IndexError):
        return True


# --- the holder process ------------------------------------------------------------------------

def _say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def hold(url, run_pid, run_start, wait):
    """Take the deploy lock (waiting up to `wait` seconds), record the holder row, answer on stdout,
    then keep the session until the run's process is gone or SIGTERM arrives. Returns the exit code."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the playbook; the holder follows it
    label = redact(url)
    try:
        conn = connect(url)
        conn.execute("SELECT set_config('application_name', %s, false)",
                     (holder_name(socket.gethostname(), os.getpid(), process_start(os.getpid())),))
        migrate(conn, label)
        deadline = time.monotonic() + wait
        while not conn.execute("SELECT pg_try_advisory_lock(%s)" % DEPLOY_KEY).fetchone()[0]:
            if time.monotonic() >= deadline or stop or not pid_alive(run_pid, run_start):
                _say({"busy": _lock_row(conn)})
                return 1
            time.sleep(POLL)
        previous = _lock_row(conn)
        with conn.transaction():
            conn.execute("DELETE FROM maand_deploy_lock")
            conn.execute("INSERT INTO maand_deploy_lock (id, host, run_pid, run_start, holder_pid, owner) VALUES "
                         "(1, %s, %s, %s, %s, %s)", (socket.gethostname(), run_pid, run_start or None, os.getpid(),
                                                     _owner()))
    # the holder's only channel is its answer line: any failure becomes that answer (rc 1), never a traceback
    except Exception as exc:  # pylint: disable=broad-except
        _say({"error": "the deploy lock in the state store %s: %s" % (label, _first_line(exc))})
        return 1
    _say({"taken": True, "previous": previous})

    def release():
        with conn.transaction():
            conn.execute("DELETE FROM maand_deploy_lock WHERE holder_pid = %s", (os.getpid(),))
        conn.execute("SELECT pg_advisory_unlock(%s)" % DEPLOY_KEY)
    return _keep(conn, stop, run_pid, run_start, release)


def _keep(conn, stop, run_pid, run_start, release):
    """A holder after its answer: keep the session until the run's process is gone or SIGTERM came, then
    release(). Returns the exit code."""
    with contextlib.suppress(OSError):
        os.close(1)
        os.close(2)
    try:
        while not stop and pid_alive(run_pid, run_start):
            time.sleep(POLL)
            with contextlib.suppress(Exception):  # a session the server ended: stop holding nothing
                if conn.closed or conn.broken:
                    return 1
    finally:
        with contextlib.suppress(Exception):
            release()
        with contextlib.suppress(Exception):
            conn.close()
    return 0


def hold_member(url, member, run_pid, run_start):
    """A sliced run's member token (MAAND_BOARD_MEMBER "<run_key>/<member>"): its advisory lock, held while the
    run's process lives or until SIGTERM; a member of that name already alive is refused. Returns the exit code."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run_key, name = member.split("/", 1)
    try:
        conn = connect(url)
        migrate(conn, redact(url))
        # board_alive probes take the lock for an instant: only a lock held past MEMBER_GRACE is another member
        deadline = time.monotonic() + MEMBER_GRACE
        while not conn.execute("SELECT pg_try_advisory_lock(%s)" % MEMBER_KEY, (run_key, name)).fetchone()[0]:
            if time.monotonic() > deadline:
                _say({"error": "member %s of run key %s is already alive (another slice with its awx_job_id)"
                      % (name, run_key)})
                return 1
            time.sleep(0.05)
    except Exception as exc:  # pylint: disable=broad-except  # reported to the waiting run on stdout
        _say({"error": "the member token in the state store %s: %s" % (redact(url), _first_line(exc))})
        return 1
    _say({"taken": True})
    return _keep(conn, stop, run_pid, run_start,
                 lambda: conn.execute("SELECT pg_advisory_unlock(%s)" % MEMBER_KEY, (run_key, name)))


def _owner():
    try:
        import pwd  # pylint: disable=import-outside-toplevel
        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return "uid %d" % os.getuid()


def main(argv):
    if len(argv) != 5 or argv[1] not in ("hold", "member"):
        sys.stderr.write("usage: state_pg.py hold|member RUN_PID RUN_START WAIT_SECONDS (URL in %s; member: %s)\n"
                         % (URL_ENV, MEMBER_ENV))
        return 2
    url = os.environ.get(URL_ENV, "")
    if not is_url(url):
        sys.stderr.write("%s is not a postgresql:// URL\n" % URL_ENV)
        return 2
    if argv[1] == "member":
        return hold_member(url, os.environ.get(MEMBER_ENV, ""), int(argv[2]), int(argv[3]) or None)
    return hold(url, int(argv[2]), int(argv[3]) or None, float(argv[4]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
