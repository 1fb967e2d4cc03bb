#!/usr/bin/env python
"""Local SSH test fleet for maand.core (stdlib only, Python 3.11, must run as root).

Every host is ``/usr/sbin/sshd -D`` running in its own network namespace (veth pair to a per-fleet
Linux bridge, address on a private /24, or a larger subnet for more than 245 hosts) and its own mount + UTS namespace with a private ``/opt``
(``DIR/hosts/<i>/opt`` bind-mounted over ``/opt``).  Everything else (``/etc``, ``/usr``, ``/root``,
``/tmp`` ...) is shared with the machine.

    fleet.py up           --state-dir DIR --hosts N [--name NAME] [--subnet 10.231.7.0/24] [--log-level VERBOSE]
    fleet.py down         --state-dir DIR
    fleet.py stop-host    --state-dir DIR HOST      # HOST: address, host name or index
    fleet.py start-host   --state-dir DIR HOST
    fleet.py status       --state-dir DIR
    fleet.py check        --state-dir DIR           # real ssh into every host
    fleet.py workers-json --state-dir DIR [--labels worker,prod] [--memory "8 gb"] [--cpu "4000 mhz"] [--zones [N]]
    fleet.py bucket-key   --state-dir DIR --bucket BUCKET
    fleet.py ssh-config   --state-dir DIR
    fleet.py env          --state-dir DIR

``DIR/fleet.json`` is written before anything is created, so ``down`` can always clean up, even after
a partial or interrupted ``up``.  ``down`` only touches what fleet.json records: sshd processes are
killed through their pid files (after checking the command line names this host's sshd_config),
then the remaining processes of the host's network namespace, then the netns, veths and bridge.

The module is importable (the pytest plugin ``pytest_fleet.py`` uses ``up``/``down``/... directly).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORMAT = 1
SSHD = "/usr/sbin/sshd"
SFTP_SERVER_CANDIDATES = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server")
SUBNET_PREFIX = "10.231"
SUBNET_RANGE = range(1, 251)
FIRST_HOST_OCTET = 10
MAX_HOSTS = 2048 - FIRST_HOST_OCTET - 1  # a /21: the gateway, the spare addresses, the hosts, the broadcast
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,10}$")  # "mfb-" + 11 chars = 15 (IFNAMSIZ - 1)
LOCK_FILE = "/run/maand-fleet.lock"
WAIT_SECONDS = 10.0
LOG_LEVELS = ("INFO", "VERBOSE", "DEBUG1")
APT_HINT = "apt-get install -y openssh-server openssh-client iproute2 util-linux"


class FleetError(Exception):
    """A fleet operation failed; the message is meant for humans."""


# --------------------------------------------------------------------------- small helpers


def _log(msg: str) -> None:
    print(f"fleet: {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise FleetError(f"command not found: {cmd[0]} (install: {APT_HINT})") from exc
    if check and proc.returncode != 0:
        raise FleetError(f"command failed ({proc.returncode}): {shlex.join(cmd)}\n{proc.stderr.strip()}")
    return proc


def _write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def require_tools() -> None:
    """Fail with a clear message when the tools the fleet needs are missing."""
    missing = []
    for tool, pkg in (("ip", "iproute2"), ("ssh-keygen", "openssh-client"), ("unshare", "util-linux"),
                      ("mount", "mount")):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}") and not os.path.exists(f"/sbin/{tool}"):
            missing.append(f"{tool} (package {pkg})")
    if not os.access(SSHD, os.X_OK):
        missing.append(f"{SSHD} (package openssh-server)")
    if missing:
        raise FleetError("missing tools: " + ", ".join(missing) + f"; install with: {APT_HINT}")


def require_root() -> None:
    if os.geteuid() != 0:
        raise FleetError("the fleet needs root (network namespaces, bridges, bind mounts)")


def default_name(state_dir: Path) -> str:
    """Short name from the state dir: sanitized basename (<=6 chars) + 4 hex of the absolute path."""
    state_dir = Path(state_dir).resolve()
    base = re.sub(r"[^a-z0-9]", "", state_dir.name.lower())[:6] or "fleet"
    digest = hashlib.sha1(str(state_dir).encode()).hexdigest()[:4]
    return f"{base}-{digest}"


def state_path(state_dir: Path) -> Path:
    return Path(state_dir) / "fleet.json"


def load_state(state_dir: Path) -> dict | None:
    path = state_path(state_dir)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        raise FleetError(f"{path} is not valid JSON: {exc}") from exc


def save_state(state: dict) -> None:
    _write_atomic(state_path(Path(state["state_dir"])), json.dumps(state, indent=2, sort_keys=True) + "\n")


def require_state(state_dir: Path) -> dict:
    state = load_state(state_dir)
    if state is None:
        raise FleetError(f"no fleet in {state_dir} (missing fleet.json); run 'up' first")
    return state


@contextlib.contextmanager
def _global_lock():
    """Serialize name/subnet allocation between concurrent 'up's on this machine."""
    lock_path = LOCK_FILE if os.access(os.path.dirname(LOCK_FILE), os.W_OK) else os.path.join(
        tempfile.gettempdir(), "maand-fleet.lock")
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- network state queries


def netns_list() -> set[str]:
    out = _run(["ip", "netns", "list"]).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def link_exists(name: str) -> bool:
    return _run(["ip", "link", "show", "dev", name], check=False).returncode == 0


def used_ipv4_addresses() -> list[ipaddress.IPv4Address]:
    out = _run(["ip", "-o", "-4", "addr", "show"]).stdout
    addrs = []
    for line in out.splitlines():
        m = re.search(r"\binet\s+(\d+\.\d+\.\d+\.\d+)(?:/\d+)?", line)
        if m:
            addrs.append(ipaddress.IPv4Address(m.group(1)))
    return addrs


def subnet_prefix(n_hosts: int) -> int:
    """The longest prefix (at most /24) whose subnet holds the gateway, FIRST_HOST_OCTET - 1 spare addresses,
    n_hosts hosts and the broadcast address: /24 up to 245 hosts, /23 up to 501, /22 up to 1,013, ..."""
    prefix = 24
    while (1 << (32 - prefix)) < FIRST_HOST_OCTET + n_hosts + 1:
        prefix -= 1
    return prefix


def choose_subnet(requested: str | None, n_hosts: int) -> ipaddress.IPv4Network:
    used = used_ipv4_addresses()
    if requested:
        try:
            net = ipaddress.IPv4Network(requested, strict=True)
        except ValueError as exc:
            raise FleetError(f"--subnet {requested!r}: {exc}") from exc
        if net.prefixlen > 24:
            raise FleetError(f"--subnet {requested}: need a /24 or larger")
        if FIRST_HOST_OCTET + n_hosts + 1 > net.num_addresses:
            raise FleetError(f"--subnet {requested}: too small for {n_hosts} hosts (give a /{subnet_prefix(n_hosts)})")
        clash = [str(a) for a in used if a in net]
        if clash:
            raise FleetError(f"--subnet {requested} is in use on this machine ({', '.join(clash)})")
        return net
    prefix = subnet_prefix(n_hosts)
    step = 1 << (24 - prefix)  # /24s per subnet: a /22 starts at a third octet divisible by 4
    for n in SUBNET_RANGE:
        if n % step:
            continue
        net = ipaddress.IPv4Network(f"{SUBNET_PREFIX}.{n}.0/{prefix}")
        if not any(a in net for a in used):
            return net
    raise FleetError(f"no free {SUBNET_PREFIX}.N.0/{prefix} subnet (N in 1..250); pass --subnet")


# --------------------------------------------------------------------------- process helpers


def _proc_state(pid: int) -> str | None:
    """Process state letter, or None when the process does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _alive(pid: int) -> bool:
    st = _proc_state(pid)
    if st == "Z":
        _reap(pid)
        return False
    return st is not None


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _descendants(roots: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            if child not in out:
                out.append(child)
                todo.append(child)
    return out


def _ns_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _netns_pids(netns: str, members: list[int] = ()) -> list[int]:
    """Pids in the named netns, or in the netns of any of ``members`` (works even after 'ip netns del')."""
    wanted = {_ns_id(f"/run/netns/{netns}")} | {_ns_id(f"/proc/{p}/ns/net") for p in members}
    wanted.discard(None)
    wanted.discard(_ns_id("/proc/self/ns/net"))  # never the machine's own namespace
    if not wanted:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _ns_id(f"/proc/{entry}/ns/net") in wanted:
            pids.append(int(entry))
    return pids


def _kill_all(pids: list[int], grace: float = 2.0) -> list[int]:
    """SIGTERM, wait, SIGKILL. Returns the pids still alive afterwards (should be empty)."""
    pids = [p for p in dict.fromkeys(pids) if p != os.getpid() and _alive(p)]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            if not pids:
                return []
            time.sleep(0.02)
    return [p for p in pids if _alive(p)]


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def host_sshd_pids(h: dict) -> list[int]:
    """Live sshd pids of this host, from its pid files, verified against the command line."""
    pids = []
    for pf in (h["pid_file"], h["launch_pid_file"]):
        pid = _read_pid(Path(pf))
        if pid and _alive(pid) and h["sshd_config"] in _cmdline(pid):
            pids.append(pid)
    return list(dict.fromkeys(pids))


# --------------------------------------------------------------------------- host files


def _sshd_config(state: dict, h: dict) -> str:
    sftp = next((p for p in SFTP_SERVER_CANDIDATES if os.path.exists(p)), None)
    lines = [
        f"# maand test fleet {state['name']} host {h['index']} ({h['host']}); generated by tests/fleet/fleet.py",
        f"ListenAddress {h['address']}",
        f"Port {h['port']}",
        f"HostKey {h['host_key']}",
        f"PidFile {h['pid_file']}",
        f"AuthorizedKeysFile {state['authorized_keys']}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        "AcceptEnv LANG LC_* ANSIBLE_* MAAND_*",
        "MaxStartups 100:30:200",
        "MaxSessions 50",
        "LoginGraceTime 30",
        f"LogLevel {state.get('log_level', 'INFO')}",
    ]
    if sftp:
        lines.append(f"Subsystem sftp {sftp}")
    return "\n".join(lines) + "\n"


def _launch_script(h: dict) -> str:
    q = shlex.quote
    return (
        f"mount --bind {q(h['opt_dir'])} /opt && "
        f"{{ hostname {q(h['host'])} 2>/dev/null || true; }} && "
        f"exec {SSHD} -D -e -f {q(h['sshd_config'])}"
    )


def _start_sshd(h: dict) -> int:
    """Launch the host's sshd in its netns + a private mount/UTS namespace. Returns the pid."""
    Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # privilege separation dir
    with contextlib.suppress(FileNotFoundError):
        os.unlink(h["pid_file"])
    cmd = ["ip", "netns", "exec", h["netns"], "unshare", "--mount", "--uts", "--propagation", "private",
           "sh", "-c", _launch_script(h)]
    with open(h["log_file"], "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, close_fds=True)
    # ip netns exec, unshare and sh all exec: this pid becomes sshd itself.
    Path(h["launch_pid_file"]).write_text(f"{proc.pid}\n")
    proc.returncode = 0  # we reap it ourselves (_reap); keep Popen.__del__ quiet
    return proc.pid


def _port_state(address: str, port: int, timeout: float = 0.3) -> str:
    """'open', 'refused' or 'timeout'/'error'."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "timeout"
    except OSError:
        return "error"


def _log_tail(h: dict, n: int = 15) -> str:
    try:
        lines = Path(h["log_file"]).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in lines[-n:]) or "    (empty log)"


NEIGH = "/proc/sys/net/ipv4/neigh/default/gc_thresh%d"


def _neighbour_room(n: int) -> None:
    """Room for n hosts in the controller's ARP table: past the kernel's default gc_thresh2 (512) it drops the
    entries of live hosts and their ports time out. Raised only, never lowered (and left raised: harmless); a
    fleet of 256 hosts or fewer leaves the table as it is."""
    if n <= 256:
        return
    for level, want in ((2, n + 512), (3, 2 * n + 1024)):
        path = Path(NEIGH % level)
        try:
            if int(path.read_text()) < want:
                path.write_text(str(want))
                _log(f"raised {path} to {want} (the ARP table of {n} hosts)")
        except (OSError, ValueError) as exc:  # up goes on; hosts past the table's room will not answer in time
            _log(f"could not raise {path} to {want} ({exc}): hosts past the 512th may time out")


def _wait_open(hosts: list[dict], pids: dict[str, int], seconds: float = WAIT_SECONDS) -> None:
    """Every host's sshd accepting connections within seconds, probed 64 at a time (one by one, a sweep of a
    thousand hosts whose ports still time out outlasts any wait)."""
    pending = {h["host"]: h for h in hosts}
    deadline = time.monotonic() + seconds
    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        while pending:
            for name, h in list(pending.items()):
                pid = pids.get(name)
                if pid is not None and not _alive(pid):
                    raise FleetError(f"sshd for {name} ({h['address']}) exited during startup; "
                                     f"log {h['log_file']}:\n{_log_tail(h)}")
            states = pool.map(lambda h: _port_state(h["address"], h["port"]), list(pending.values()))
            for name, state in zip(list(pending), states):
                if state == "open":
                    del pending[name]
            if not pending:
                return
            if time.monotonic() > deadline:
                names = ", ".join(f"{n} ({h['address']})" for n, h in pending.items())
                first = next(iter(pending.values()))
                raise FleetError(f"sshd not accepting connections after {seconds:.0f}s: {names}; "
                                 f"log {first['log_file']}:\n{_log_tail(first)}")
            time.sleep(0.05)


# --------------------------------------------------------------------------- operations


def _resources_present(state: dict) -> list[str]:
    present = []
    ns = netns_list()
    for h in state.get("hosts", []):
        if h["netns"] in ns:
            present.append(f"netns {h['netns']}")
        if host_sshd_pids(h):
            present.append(f"sshd of {h['host']}")
    if state.get("bridge") and link_exists(state["bridge"]):
        present.append(f"bridge {state['bridge']}")
    return present


def up(state_dir, n_hosts: int, name: str | None = None, subnet: str | None = None,
       wait: float = WAIT_SECONDS, log_level: str = "INFO") -> dict:
    """Create the fleet; returns the state dict (also written to DIR/fleet.json).

    log_level: sshd's LogLevel; VERBOSE logs every login and every session (exec, subsystem) in
    DIR/hosts/<i>/sshd.log, also those multiplexed over one ControlPersist connection."""
    require_root()
    if log_level not in LOG_LEVELS:
        raise FleetError(f"--log-level {log_level!r}: use one of {', '.join(LOG_LEVELS)}")
    require_tools()
    if not 1 <= n_hosts <= MAX_HOSTS:
        raise FleetError(f"--hosts must be between 1 and {MAX_HOSTS}")
    state_dir = Path(state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    name = name or default_name(state_dir)
    if not NAME_RE.match(name):
        raise FleetError(f"--name {name!r}: use 1-11 chars of [a-z0-9-], starting with a letter or digit")

    old = load_state(state_dir)
    if old is not None:
        present = _resources_present(old)
        if present:
            raise FleetError(f"a fleet is already up in {state_dir} ({', '.join(present)}); run 'down' first")

    bridge = f"mfb-{name}"
    state: dict = {}
    try:
        with _global_lock():
            existing_ns = netns_list()
            netns_names = [f"mf-{name}-{i}" for i in range(n_hosts)]
            clash = [n for n in netns_names if n in existing_ns]
            if link_exists(bridge):
                clash.append(f"bridge {bridge}")
            if clash:
                raise FleetError(f"name {name!r} is in use on this machine ({', '.join(clash)}); "
                                 "pick another --name or run 'down' for that fleet")
            net = choose_subnet(subnet, n_hosts)
            base = net.network_address
            third = int(str(base).split(".")[2])
            key = state_dir / "id_ed25519"
            hosts = []
            for i in range(n_hosts):
                hdir = state_dir / "hosts" / str(i)
                hosts.append({
                    "index": i,
                    "host": netns_names[i],
                    "address": str(base + FIRST_HOST_OCTET + i),
                    "port": 22,
                    "user": "root",
                    "identity_file": str(key),
                    "netns": netns_names[i],
                    "veth": f"mfv{third}x{i}" if net.prefixlen == 24 else f"mfv{hashlib.sha1(name.encode()).hexdigest()[:5]}x{i}",
                    "host_dir": str(hdir),
                    "opt_dir": str(hdir / "opt"),
                    "sshd_config": str(hdir / "sshd_config"),
                    "host_key": str(hdir / "ssh_host_ed25519_key"),
                    "pid_file": str(hdir / "sshd.pid"),
                    "launch_pid_file": str(hdir / "launch.pid"),
                    "log_file": str(hdir / "sshd.log"),
                })
            state = {
                "format": FORMAT,
                "status": "creating",
                "name": name,
                "state_dir": str(state_dir),
                "subnet": str(net),
                "gateway": str(base + 1),
                "bridge": bridge,
                "key": str(key),
                "public_key": str(key) + ".pub",
                "authorized_keys": str(state_dir / "authorized_keys"),
                "known_hosts": str(state_dir / "known_hosts"),
                "log_level": log_level,
                "hosts": hosts,
            }
            save_state(state)  # recorded before anything is created: 'down' can always clean up

            # network: bridge, then per host a netns + veth pair
            _neighbour_room(len(hosts))
            prefix = net.prefixlen
            _run(["ip", "link", "add", bridge, "type", "bridge"])
            _run(["ip", "addr", "add", f"{state['gateway']}/{prefix}", "dev", bridge])
            _run(["ip", "link", "set", bridge, "up"])
            for h in hosts:
                ns = h["netns"]
                _run(["ip", "netns", "add", ns])
                _run(["ip", "link", "add", h["veth"], "type", "veth", "peer", "name", "eth0", "netns", ns])
                _run(["ip", "link", "set", h["veth"], "master", bridge, "up"])
                _run(["ip", "-n", ns, "link", "set", "lo", "up"])
                _run(["ip", "-n", ns, "addr", "add", f"{h['address']}/{prefix}", "dev", "eth0"])
                _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
                _run(["ip", "-n", ns, "route", "add", "default", "via", state["gateway"]])

        # keys and files
        if not key.exists() or not Path(str(key) + ".pub").exists():
            for p in (key, Path(str(key) + ".pub")):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"maand-fleet-{name}", "-f", str(key)])
        os.chmod(key, 0o600)
        pub = Path(str(key) + ".pub").read_text().strip()
        _write_atomic(Path(state["authorized_keys"]), pub + "\n", 0o600)
        known = []
        for h in hosts:
            hdir = Path(h["host_dir"])
            if Path(h["opt_dir"]).is_dir():  # a fresh host starts with an empty /opt
                shutil.rmtree(h["opt_dir"])
            Path(h["opt_dir"]).mkdir(parents=True)
            for p in (Path(h["host_key"]), Path(h["host_key"] + ".pub")):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h["host"], "-f", h["host_key"]])
            _write_atomic(hdir / "sshd_config", _sshd_config(state, h))
            hk = Path(h["host_key"] + ".pub").read_text().split()
            known.append(f"{h['address']},{h['host']} {hk[0]} {hk[1]}")
        _write_atomic(Path(state["known_hosts"]), "\n".join(known) + "\n")
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # privilege separation dir
        proc = _run([SSHD, "-t", "-f", hosts[0]["sshd_config"]], check=False)
        if proc.returncode != 0:
            raise FleetError(f"sshd rejects the generated config {hosts[0]['sshd_config']}: {proc.stderr.strip()}")

        pids = {h["host"]: _start_sshd(h) for h in hosts}
        _wait_open(hosts, pids, wait + 0.02 * len(hosts))  # a thousand sshd start on 2 cores in about 20 s
        state["status"] = "up"
        save_state(state)
        return state
    except BaseException as exc:
        if state:
            _log(f"up failed ({exc.__class__.__name__}: {exc}); tearing down what was created")
            try:
                down(state_dir)
            except Exception as exc2:  # noqa: BLE001 - report both
                _log(f"teardown after failed up also failed: {exc2}")
        raise


def _stop_host(h: dict, whole_netns: bool) -> list[int]:
    roots = host_sshd_pids(h)
    targets = roots + _descendants(roots)
    if whole_netns:
        targets += _netns_pids(h["netns"], roots)
    left = _kill_all(targets)
    for pf in (h["pid_file"], h["launch_pid_file"]):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(pf)
    return left


def down(state_dir) -> dict | None:
    """Tear down everything fleet.json records. Idempotent; tolerant of partial state."""
    require_root()
    state = load_state(state_dir)
    if state is None:
        return None
    errors = []
    for h in state.get("hosts", []):
        try:
            left = _stop_host(h, whole_netns=True)
            if left:
                errors.append(f"{h['host']}: processes survived SIGKILL: {left}")
        except Exception as exc:  # noqa: BLE001 - keep cleaning up
            errors.append(f"{h['host']}: {exc}")
    existing_ns = netns_list()
    for h in state.get("hosts", []):
        if h.get("veth") and link_exists(h["veth"]):
            p = _run(["ip", "link", "del", h["veth"]], check=False)
            if p.returncode != 0 and link_exists(h["veth"]):
                errors.append(f"ip link del {h['veth']}: {p.stderr.strip()}")
        if h["netns"] in existing_ns:
            p = _run(["ip", "netns", "del", h["netns"]], check=False)
            if p.returncode != 0 and h["netns"] in netns_list():
                errors.append(f"ip netns del {h['netns']}: {p.stderr.strip()}")
    bridge = state.get("bridge")
    if bridge and link_exists(bridge):
        p = _run(["ip", "link", "del", bridge], check=False)
        if p.returncode != 0 and link_exists(bridge):
            errors.append(f"ip link del {bridge}: {p.stderr.strip()}")
    state["status"] = "down" if not errors else "down-failed"
    save_state(state)
    if errors:
        raise FleetError("down left things behind:\n  " + "\n  ".join(errors))
    return state


def find_host(state: dict, ident: str) -> dict:
    for h in state["hosts"]:
        if ident in (h["address"], h["host"], h["netns"], str(h["index"])):
            return h
    known = ", ".join(f"{h['host']}={h['address']}" for h in state["hosts"])
    raise FleetError(f"no host {ident!r} in this fleet ({known})")


def stop_host(state_dir, ident: str) -> dict:
    """Kill one host's sshd (and its sessions): connections are then refused. The netns stays."""
    require_root()
    state = require_state(state_dir)
    h = find_host(state, ident)
    left = _stop_host(h, whole_netns=False)
    if left:
        raise FleetError(f"{h['host']}: sshd survived SIGKILL: {left}")
    return h


def start_host(state_dir, ident: str, wait: float = WAIT_SECONDS) -> dict:
    require_root()
    state = require_state(state_dir)
    h = find_host(state, ident)
    if h["netns"] not in netns_list():
        raise FleetError(f"{h['host']}: netns {h['netns']} is gone; the fleet is down (run 'up')")
    if host_sshd_pids(h):
        _wait_open([h], {}, wait)
        return h
    pid = _start_sshd(h)
    _wait_open([h], {h["host"]: pid}, wait)
    return h


def status(state_dir) -> list[dict]:
    state = require_state(state_dir)
    ns = netns_list()
    out = []
    for h in state["hosts"]:
        pids = host_sshd_pids(h)
        out.append({"host": h["host"], "address": h["address"], "netns": h["netns"] in ns,
                    "sshd_pid": pids[0] if pids else None,
                    "port": _port_state(h["address"], h["port"]) if h["netns"] in ns else "no-netns"})
    return out


def ssh_command(state: dict, h: dict, command: str, connect_timeout: int = 5) -> list[str]:
    return ["ssh", "-i", state["key"], "-p", str(h["port"]),
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", f"ConnectTimeout={connect_timeout}", f"{h['user']}@{h['address']}", command]


def check(state_dir) -> list[dict]:
    """ssh into every host; verify hostname and the private /opt mount."""
    state = require_state(state_dir)
    results = []
    for h in state["hosts"]:
        proc = _run(ssh_command(state, h, "grep ' /opt ' /proc/self/mountinfo; hostname; /usr/bin/python3 -V"),
                    check=False)
        ok = proc.returncode == 0 and " /opt " in proc.stdout and h["host"] in proc.stdout.split()
        results.append({"host": h["host"], "address": h["address"], "ok": ok,
                        "output": proc.stdout.strip(), "error": proc.stderr.strip()})
    return results


def workers(state: dict, labels=("worker",), memory: str | None = None, cpu: str | None = None,
            zones: int | None = None) -> list[dict]:
    out = []
    for h in state["hosts"]:
        w: dict = {"host": h["address"], "labels": list(labels)}
        if memory:
            w["memory"] = memory
        if cpu:
            w["cpu"] = cpu
        if zones:
            w["tags"] = {"zone": f"z{h['index'] % zones}"}
        out.append(w)
    return out


def workers_json(state: dict, **kw) -> str:
    return json.dumps(workers(state, **kw), indent=2) + "\n"


MAAND_CONF_KEYS = {"ssh_user": '"root"', "ssh_key": '"fleet.key"', "ssh_port": "22", "use_sudo": "false"}


def update_maand_conf(text: str, values: dict[str, str] | None = None) -> str:
    """Set top-level TOML keys (values are TOML literals), keeping every other line as it is.

    Keys already present before the first [table] header are replaced in place; missing keys are
    inserted just before the first header (so they stay top-level), or appended.
    values defaults to MAAND_CONF_KEYS.
    """
    if values is None:
        values = MAAND_CONF_KEYS
    lines = text.splitlines()
    first_table = next((i for i, l in enumerate(lines) if l.lstrip().startswith("[")), len(lines))
    done = set()
    for i in range(first_table):
        m = re.match(r"^\s*([A-Za-z0-9_-]+)\s*=", lines[i])
        if m and m.group(1) in values:
            k = m.group(1)
            if k in done:
                lines[i] = "# " + lines[i] + "  # duplicate, disabled by fleet.py"
            else:
                lines[i] = f"{k} = {values[k]}"
                done.add(k)
    new = [f"{k} = {v}" for k, v in values.items() if k not in done]
    if new:
        if first_table < len(lines):
            new.append("")  # keep a blank line between the top-level keys and the first [table]
        lines[first_table:first_table] = new
    return "\n".join(lines) + "\n"


def install_bucket_key(state: dict, bucket) -> Path:
    bucket = Path(bucket)
    secrets = bucket / "secrets"
    secrets.mkdir(parents=True, exist_ok=True)
    dest = secrets / "fleet.key"
    _write_atomic(dest, Path(state["key"]).read_text(), 0o600)
    conf = bucket / "maand.conf"
    old = conf.read_text() if conf.exists() else ""
    _write_atomic(conf, update_maand_conf(old), 0o644 if not conf.exists() else conf.stat().st_mode & 0o777)
    return dest


def ssh_config(state: dict) -> str:
    out = [f"# maand test fleet {state['name']} ({state['subnet']}); generated by tests/fleet/fleet.py"]
    for h in state["hosts"]:
        out += [
            f"Host {h['host']} {h['address']}",
            f"  HostName {h['address']}",
            f"  User {h['user']}",
            f"  Port {h['port']}",
            f"  IdentityFile {state['key']}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {state['known_hosts']}",
            "  StrictHostKeyChecking yes",
            "",
        ]
    return "\n".join(out)


def env_lines(state: dict) -> str:
    q = shlex.quote
    pairs = {
        "FLEET_NAME": state["name"],
        "FLEET_STATE_DIR": state["state_dir"],
        "FLEET_KEY": state["key"],
        "FLEET_SUBNET": state["subnet"],
        "FLEET_HOSTS": " ".join(h["address"] for h in state["hosts"]),
        "FLEET_KNOWN_HOSTS": state["known_hosts"],
    }
    return "".join(f"export {k}={q(v)}\n" for k, v in pairs.items())


def hosts_public(state: dict) -> list[dict]:
    keys = ("host", "address", "port", "user", "identity_file", "netns", "opt_dir", "pid_file")
    return [{k: h[k] for k in keys} for h in state["hosts"]]


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fleet.py", description="maand.core local SSH test fleet (root only)")
    sub = p.add_subparsers(dest="cmd", required=True)

    def add(name, help_):
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--state-dir", required=True, type=Path, help="directory holding fleet.json, keys, host dirs")
        return sp

    sp = add("up", "create the fleet and print its hosts as JSON")
    sp.add_argument("--hosts", type=int, required=True)
    sp.add_argument("--name", help="short name (1-11 chars [a-z0-9-]); default derived from --state-dir")
    sp.add_argument("--subnet", help=f"IPv4 /24 (or larger) to use; default: first free {SUBNET_PREFIX}.N.0/24 (/23, /22... for more than 245 hosts)")
    sp.add_argument("--wait", type=float, default=WAIT_SECONDS, help="seconds to wait for sshd (default 10, plus 20 ms per host)")
    sp.add_argument("--log-level", default="INFO", choices=LOG_LEVELS,
                    help="sshd LogLevel (VERBOSE: one line per login and per session in hosts/<i>/sshd.log)")
    add("down", "tear down everything fleet.json records (idempotent)")
    for name in ("stop-host", "start-host"):
        sp = add(name, f"{name.split('-', maxsplit=1)[0]} one host's sshd")
        sp.add_argument("host", help="address, host name or index")
    add("status", "show each host's netns / sshd / port state as JSON")
    add("check", "ssh into every host and verify hostname and private /opt")
    sp = add("workers-json", "print a maand workers.json for the fleet")
    sp.add_argument("--labels", default="worker", help="comma-separated labels (default: worker; '' for none)")
    sp.add_argument("--memory", help='e.g. "8 gb"')
    sp.add_argument("--cpu", help='e.g. "4000 mhz"')
    sp.add_argument("--zones", type=int, nargs="?", const=2, help='add tags.zone = "z<i mod N>" (default N=2)')
    sp = add("bucket-key", "copy the client key to BUCKET/secrets/fleet.key and set ssh_* in BUCKET/maand.conf")
    sp.add_argument("--bucket", required=True, type=Path)
    add("ssh-config", "print an OpenSSH client config for the fleet")
    add("env", "print shell exports (FLEET_HOSTS, FLEET_KEY, ...)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "up":
            t0 = time.monotonic()
            state = up(args.state_dir, args.hosts, name=args.name, subnet=args.subnet, wait=args.wait,
                       log_level=args.log_level)
            _log(f"fleet {state['name']} up: {len(state['hosts'])} hosts on {state['subnet']} "
                 f"in {time.monotonic() - t0:.2f}s")
            print(json.dumps(hosts_public(state), indent=2))
        elif args.cmd == "down":
            state = down(args.state_dir)
            _log("nothing to do (no fleet.json)" if state is None else f"fleet {state['name']} down")
        elif args.cmd == "stop-host":
            h = stop_host(args.state_dir, args.host)
            _log(f"stopped {h['host']} ({h['address']})")
        elif args.cmd == "start-host":
            h = start_host(args.state_dir, args.host)
            _log(f"started {h['host']} ({h['address']})")
        elif args.cmd == "status":
            print(json.dumps(status(args.state_dir), indent=2))
        elif args.cmd == "check":
            res = check(args.state_dir)
            print(json.dumps(res, indent=2))
            if not all(r["ok"] for r in res):
                return 1
        else:
            state = require_state(args.state_dir)
            if args.cmd == "workers-json":
                labels = [x.strip() for x in args.labels.split(",") if x.strip()]
                sys.stdout.write(workers_json(state, labels=labels, memory=args.memory, cpu=args.cpu,
                                              zones=args.zones))
            elif args.cmd == "bucket-key":
                dest = install_bucket_key(state, args.bucket)
                _log(f"key copied to {dest}; {args.bucket / 'maand.conf'} updated")
            elif args.cmd == "ssh-config":
                sys.stdout.write(ssh_config(state))
            elif args.cmd == "env":
                sys.stdout.write(env_lines(state))
    except FleetError as exc:
        _log(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        _log("interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
