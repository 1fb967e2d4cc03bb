"""A real PostgreSQL server for the state store tests, from Debian's packages (scripts/bootstrap.sh
installs `postgresql`): initdb and pg_ctl as the `postgres` user in a temporary folder, listening on
a Unix socket (administration, trust) and on a free loopback port (the tests' connections, with a
password given through PGPASSWORD, as a user would).

The `pg_server` fixture (session scope, registered by the root conftest) starts one server for the
whole session; `pg_server.database()` makes a fresh database per test module. Skips when the
PostgreSQL binaries are absent (fails instead when $CI is set, as the fleet does).

    python3 tests/fleet/pg.py        # start one, print its URL, wait for Ctrl-C (manual checks, bench)
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

USER, PASSWORD = "maand", "maand-test-password"


def bin_dir():
    """The newest /usr/lib/postgresql/<version>/bin holding initdb and pg_ctl, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    return os.path.dirname(found[-1]) if found else None


def unavailable_reason():
    if os.geteuid() != 0:
        return "the PostgreSQL test server starts as the postgres user: needs root"
    if bin_dir() is None:
        return "PostgreSQL is not installed (apt-get install postgresql; scripts/bootstrap.sh does)"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres user (apt-get install postgresql creates it)"
    try:
        import psycopg  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return "psycopg is not installed (pip install -r requirements-dev.txt)"
    return None


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PgServer:
    def __init__(self):
        self.bin = bin_dir()
        self.root = tempfile.mkdtemp(prefix="maand-pg-")
        os.chmod(self.root, 0o755)
        self.data = os.path.join(self.root, "data")
        self.socket_dir = os.path.join(self.root, "run")
        self.port = _free_port()
        self.log = os.path.join(self.root, "server.log")
        self._n = 0
        entry = pwd.getpwnam("postgres")
        os.makedirs(self.socket_dir)
        os.chown(self.root, entry.pw_uid, entry.pw_gid)
        os.chown(self.socket_dir, entry.pw_uid, entry.pw_gid)

    def _as_postgres(self, *cmd, check=True):
        return subprocess.run(["runuser", "-u", "postgres", "--", *cmd], capture_output=True, text=True,
                              check=check, timeout=120)

    def start(self):
        self._as_postgres(os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres", "--auth-local=trust",
                          "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
        opts = "-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=200" % (
            self.port, self.socket_dir)
        done = self._as_postgres(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l", self.log, "-o", opts,
                                 "-w", "-t", "60", "start", check=False)
        if done.returncode != 0:
            raise RuntimeError("pg_ctl start failed: %s\n%s" % (done.stderr, self.server_log()))
        self.psql("CREATE ROLE %s LOGIN PASSWORD '%s'" % (USER, PASSWORD))
        return self

    def server_log(self):
        with contextlib.suppress(OSError), open(self.log, encoding="utf-8", errors="replace") as handle:
            return handle.read()[-4000:]
        return ""

    def psql(self, sql, db="postgres"):
        done = self._as_postgres(os.path.join(self.bin, "psql"), "-h", self.socket_dir, "-p", str(self.port),
                                 "-U", "postgres", "-d", db, "-v", "ON_ERROR_STOP=1", "-Atc", sql)
        return done.stdout.strip()

    def database(self, name=None):
        """A fresh database owned by the test user; returns its URL (no password in it)."""
        self._n += 1
        name = name or "maand_%d_%d" % (os.getpid(), self._n)
        self.psql("CREATE DATABASE %s OWNER %s" % (name, USER))
        return self.url(name)

    def url(self, name):
        return "postgresql://%s@127.0.0.1:%d/%s" % (USER, self.port, name)

    @property
    def env(self):
        """What a controller needs besides the URL: the password, the libpq way."""
        return {"PGPASSWORD": PASSWORD}

    def postmaster_pid(self):
        with contextlib.suppress(OSError, ValueError), open(os.path.join(self.data, "postmaster.pid")) as handle:
            return int(handle.readline())
        return None

    def stop(self):
        done = self._as_postgres(os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate", "-w", "stop",
                                 check=False)
        if done.returncode != 0:
            pid = self.postmaster_pid()
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server():
    reason = unavailable_reason()
    if reason:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail("CI is set, refusing to skip the PostgreSQL tests: %s" % reason, pytrace=False)
        pytest.skip(reason)
    server = PgServer().start()
    try:
        yield server
    finally:
        server.stop()


def main():
    reason = unavailable_reason()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    server = PgServer().start()
    try:
        print(server.database("maand"), flush=True)
        print("PGPASSWORD=%s" % PASSWORD, flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
