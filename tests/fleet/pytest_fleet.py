"""pytest plugin: real SSH hosts from ``tests/fleet/fleet.py``.

Use it from a conftest, either as a plugin (top-level conftest only)::

    pytest_plugins = ["tests.fleet.pytest_fleet"]

or by re-exporting the fixtures (works in any conftest inside a package)::

    from tests.fleet.pytest_fleet import fleet_factory, fleet3  # noqa: F401

Fixtures (session scope):

``fleet_factory(n_hosts, name=None) -> Fleet``
    brings up a new fleet in a fresh temp state dir; every fleet it made is torn down at session end
    (also when tests fail or the session is interrupted; an ``atexit`` hook is the last resort).
``fleet3``
    a 3-host fleet.

When the fleet cannot run here (not root, ``ip netns`` unusable, sshd/ip missing) the fixtures skip,
except when the ``CI`` environment variable is set: then they fail, so CI never silently skips
real-host tests.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def _load_fleet_module():
    try:  # normal case: imported as tests.fleet.pytest_fleet
        from . import fleet as _fleet  # type: ignore[no-redef]
        return _fleet
    except ImportError:  # loaded by path
        spec = importlib.util.spec_from_file_location("maand_test_fleet", _HERE / "fleet.py")
        _fleet = importlib.util.module_from_spec(spec)
        sys.modules.setdefault("maand_test_fleet", _fleet)
        spec.loader.exec_module(_fleet)
        return _fleet


fleet_mod = _load_fleet_module()
FleetError = fleet_mod.FleetError
FLEET_CLI = _HERE / "fleet.py"


class Fleet:
    """A running fleet. ``hosts`` are the dicts from fleet.json (host, address, port, user, ...)."""

    def __init__(self, state: dict):
        self._state = state
        self.state_dir = Path(state["state_dir"])
        self.name: str = state["name"]
        self.subnet: str = state["subnet"]
        self.bridge: str = state["bridge"]
        self.key: str = state["key"]
        self.known_hosts: str = state["known_hosts"]
        self.hosts: list[dict] = state["hosts"]
        self._down = False

    # -- addressing
    @property
    def addresses(self) -> list[str]:
        return [h["address"] for h in self.hosts]

    def host(self, ident) -> dict:
        """A host dict by address, host name or index (int or str)."""
        if isinstance(ident, dict):
            ident = ident["address"]
        return fleet_mod.find_host(self._state, str(ident))

    # -- control
    def stop_host(self, h) -> dict:
        return fleet_mod.stop_host(self.state_dir, self.host(h)["address"])

    def start_host(self, h) -> dict:
        return fleet_mod.start_host(self.state_dir, self.host(h)["address"])

    def down(self) -> None:
        fleet_mod.down(self.state_dir)
        self._down = True

    @property
    def is_down(self) -> bool:
        return self._down

    # -- files for maand
    def workers(self, labels=("worker",), memory=None, cpu=None, zones=None) -> list[dict]:
        return fleet_mod.workers(self._state, labels=labels, memory=memory, cpu=cpu, zones=zones)

    def workers_json(self, labels=("worker",), memory=None, cpu=None, zones=None, path=None) -> str:
        """workers.json text (2-space indent); also written to ``path`` when given."""
        text = fleet_mod.workers_json(self._state, labels=labels, memory=memory, cpu=cpu, zones=zones)
        if path is not None:
            Path(path).write_text(text)
        return text

    def install_bucket_key(self, bucket_dir) -> Path:
        """Copy the client key to BUCKET/secrets/fleet.key and set ssh_* in BUCKET/maand.conf."""
        return fleet_mod.install_bucket_key(self._state, bucket_dir)

    def ssh_config(self) -> str:
        return fleet_mod.ssh_config(self._state)

    # -- running commands
    def ssh_args(self, h, command: str, connect_timeout: int = 5) -> list[str]:
        return fleet_mod.ssh_command(self._state, self.host(h), command, connect_timeout)

    def ssh(self, h, command: str, check: bool = True, timeout: float = 60,
            connect_timeout: int = 5) -> subprocess.CompletedProcess:
        """Run ``command`` on host ``h`` as root; returns the CompletedProcess (text)."""
        proc = subprocess.run(self.ssh_args(h, command, connect_timeout), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"ssh {self.host(h)['address']} {command!r} -> {proc.returncode}\n"
                                 f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
        return proc

    def __repr__(self) -> str:
        return f"Fleet(name={self.name!r}, subnet={self.subnet!r}, hosts={self.addresses})"


def fleet_unavailable_reason() -> str | None:
    """Why a fleet cannot run on this machine, or None when it can."""
    if not sys.platform.startswith("linux"):
        return "the test fleet needs Linux network namespaces"
    if os.geteuid() != 0:
        return "the test fleet needs root (ip netns, bridges, bind mounts)"
    try:
        fleet_mod.require_tools()
    except FleetError as exc:
        return str(exc)
    if shutil.which("ssh") is None:
        return "ssh client missing (apt-get install -y openssh-client)"
    probe = f"mf-probe-{os.getpid()}"
    add = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
    if add.returncode != 0:
        return f"'ip netns add' is unusable here: {add.stderr.strip()}"
    try:
        lo = subprocess.run(["ip", "-n", probe, "link", "set", "lo", "up"], capture_output=True, text=True, check=False)
        if lo.returncode != 0:
            return f"cannot configure a network namespace: {lo.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def skip_or_fail(reason: str):
    """pytest.skip, or pytest.fail when $CI is set (CI must never silently skip real-host tests)."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"CI is set, refusing to skip the fleet tests: {reason}", pytrace=False)
    pytest.skip(reason)


class _FleetRegistry:
    def __init__(self, base: Path):
        self.base = base
        self.fleets: list[Fleet] = []
        self._n = 0

    def create(self, n_hosts: int, name: str | None = None, subnet: str | None = None) -> Fleet:
        self._n += 1
        state_dir = self.base / f"fleet{self._n}"
        try:
            state = fleet_mod.up(state_dir, n_hosts, name=name, subnet=subnet)
        except FleetError as exc:
            if fleet_mod.load_state(state_dir) is not None:  # up tore down, but record it anyway
                self.fleets.append(Fleet(json.loads((state_dir / "fleet.json").read_text())))
            pytest.fail(f"fleet up failed: {exc}", pytrace=False)
        fleet = Fleet(state)
        self.fleets.append(fleet)
        return fleet

    def teardown(self) -> list[str]:
        errors = []
        while self.fleets:
            fleet = self.fleets.pop()
            try:
                fleet_mod.down(fleet.state_dir)
            except Exception as exc:  # noqa: BLE001 - tear down every fleet
                errors.append(f"{fleet.name}: {exc}")
        return errors


@pytest.fixture(scope="session")
def fleet_factory(tmp_path_factory):
    """Factory ``fleet_factory(n_hosts, name=None, subnet=None) -> Fleet``; all torn down at session end."""
    reason = fleet_unavailable_reason()
    if reason:
        skip_or_fail(reason)
    registry = _FleetRegistry(tmp_path_factory.mktemp("fleets"))
    atexit.register(registry.teardown)  # last resort if the session dies before fixture teardown

    def factory(n_hosts: int, name: str | None = None, subnet: str | None = None) -> Fleet:
        return registry.create(n_hosts, name=name, subnet=subnet)

    try:
        yield factory
    finally:
        errors = registry.teardown()
        atexit.unregister(registry.teardown)
        if errors:
            pytest.fail("fleet teardown failed:\n" + "\n".join(errors), pytrace=False)


@pytest.fixture(scope="session")
def fleet3(fleet_factory) -> Fleet:
    """A session-wide fleet of 3 hosts."""
    return fleet_factory(3)
