"""Integration: ansible-playbook maand.core.facts against the local SSH fleet (tests/fleet).

One 3-host fleet for the whole module. Every playbook run is a subprocess with ANSIBLE_* env vars,
an empty ansible.cfg and /usr/bin/python3 on the targets.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# the fleet hosts share the controller's kernel: facts writes its uname -m as Juju names it
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)

ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / ".collections"
# The root conftest.py links .collections/ansible_collections/maand/core to this repository.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# --------------------------------------------------------------------------- helpers


def ansible_env(tmp_path):
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\n")
    return dict(
        os.environ,
        ANSIBLE_CONFIG=str(cfg),
        ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
        ANSIBLE_HOST_KEY_CHECKING="False",
        ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_PIPELINING="True",
        ANSIBLE_TIMEOUT="5",
        ANSIBLE_FORKS="10",
        ANSIBLE_RETRY_FILES_ENABLED="False",
        ANSIBLE_LOCALHOST_WARNING="False",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / ".ansible-tmp"),
        ANSIBLE_SSH_ARGS="-o ControlMaster=no -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no "
                         "-o ConnectTimeout=5 -o ConnectionAttempts=1",
    )


def run_facts(bucket, *args, tmp_path):
    proc = subprocess.run(
        ["ansible-playbook", "maand.core.facts", "-e", "maand_bucket=%s" % bucket, *args],
        capture_output=True, text=True, env=ansible_env(tmp_path), cwd=tmp_path, timeout=180,
        check=False,
    )
    proc.output = proc.stdout + proc.stderr
    return proc


def make_bucket(tmp_path, fleet, workers):
    bucket = tmp_path / "bucket"
    (bucket / "workspace").mkdir(parents=True)
    (bucket / "maand.conf").write_text('certs_ttl = 60\njob_config_selector = ""\n')
    fleet.install_bucket_key(bucket)
    path = bucket / "workspace" / "workers.json"
    path.write_text(json.dumps(workers, indent=2) + "\n")
    return bucket, path


def real_capacity(fleet, address):
    """What the host itself reports: MemTotal, nproc, the highest cpu MHz, and /opt's size."""
    out = fleet.ssh(address, "grep MemTotal /proc/meminfo; nproc; grep -i '^cpu MHz' /proc/cpuinfo || true; "
                             "stat -f -c 'fs %b %S' /opt/worker 2>/dev/null || stat -f -c 'fs %b %S' /opt").stdout
    lines = out.splitlines()
    mem_kb = int(lines[0].split()[1])
    cores = int(lines[1])
    mhz = [float(line.split(":")[1]) for line in lines if line.lower().startswith("cpu mhz")]
    blocks, size = [int(x) for x in next(line for line in lines if line.startswith("fs ")).split()[1:]]
    assert mhz, "the fleet hosts share this kernel's /proc/cpuinfo, which has cpu MHz"
    return {"memory": mem_kb // 1024, "cores": cores, "cpu": int(round(max(mhz))) * cores,
            "storage": blocks * size // (1024 * 1024)}


def fleet_workers(fleet):
    """Entries with only host/labels, plus tags, a hostname and an old memory value to be replaced."""
    a, b, c = fleet.addresses[:3]
    return [
        {"host": a, "labels": ["prod"], "tags": {"zone": "a", "rack": "r1"}},
        {"host": b, "labels": ["prod", "web"], "hostname": "second", "memory": "1 mb"},
        {"host": c, "labels": ["staging"]},
    ]


# --------------------------------------------------------------------------- tests


def test_facts_write_what_the_hosts_report(fleet3, tmp_path):
    workers = fleet_workers(fleet3)
    bucket, path = make_bucket(tmp_path, fleet3, workers)
    proc = run_facts(bucket, "--diff", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.output

    data = json.loads(path.read_text())
    assert [w["host"] for w in data] == fleet3.addresses[:3], "worker order must be kept"
    for old, new in zip(workers, data):
        real = real_capacity(fleet3, old["host"])
        assert new["memory"] == "%d mb" % real["memory"]
        assert new["cpu"] == "%d mhz" % real["cpu"]
        assert new["storage"] == "%d mb" % real["storage"]
        assert new["cores"] == real["cores"]  # nproc on the host
        for key in ("labels", "tags", "hostname"):
            assert new.get(key) == old.get(key), key
        assert new["arch"] == ARCH  # uname -m as Juju names it (the `arch` hardware constraint)
        assert list(new) == list(old) + [k for k in ("memory", "cpu", "cores", "storage", "arch") if k not in old]
    assert "null" not in path.read_text()

    b = workers[1]["host"]
    real_b = real_capacity(fleet3, b)
    assert "%s: memory 1 MB -> %d MB, cpu unset -> %d MHz, cores unset -> %d, storage unset -> %d MB" % (
        b, real_b["memory"], real_b["cpu"], real_b["cores"], real_b["storage"]) in proc.output
    assert "arch (unset) -> %s" % ARCH in proc.output

    # a second run finds nothing to do and does not touch the file
    before = path.stat()
    again = run_facts(bucket, tmp_path=tmp_path)
    assert again.returncode == 0, again.output
    assert "workers.json already up to date" in again.output
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_check_mode_shows_the_diff_and_writes_nothing(fleet3, tmp_path):
    bucket, path = make_bucket(tmp_path, fleet3, fleet_workers(fleet3))
    original = path.read_bytes()
    proc = run_facts(bucket, "--check", "--diff", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.output
    assert path.read_bytes() == original
    real = real_capacity(fleet3, fleet3.addresses[1])
    assert '-    "memory": "1 mb"' in proc.output
    assert '+    "memory": "%d mb"' % real["memory"] in proc.output
    assert "--- before: %s" % path in proc.output
    assert not list((bucket / "workspace").glob(".workers.json.*"))


def test_all_or_nothing_with_one_sshd_stopped(fleet3, tmp_path):
    bucket, path = make_bucket(tmp_path, fleet3, fleet_workers(fleet3))
    original = path.read_bytes()
    down = fleet3.addresses[2]
    fleet3.stop_host(down)
    try:
        proc = run_facts(bucket, tmp_path=tmp_path)
    finally:
        fleet3.start_host(down)
    assert proc.returncode != 0, proc.output
    assert path.read_bytes() == original
    assert "worker facts failed for 1 of 3 targeted workers" in proc.output
    assert re.search(r"%s: unreachable: " % re.escape(down), proc.output), proc.output
    for up in fleet3.addresses[:2]:
        assert "%s: unreachable" % up not in proc.output


def test_label_filter_hosts_and_limit(fleet3, tmp_path):
    a, b, c = fleet3.addresses[:3]
    bucket, path = make_bucket(tmp_path, fleet3, fleet_workers(fleet3))

    proc = run_facts(bucket, "--check", "--diff", "-e", "maand_labels=staging", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.output
    assert "%s: memory unset" % c in proc.output
    assert "%s: memory" % a not in proc.output and "%s: memory" % b not in proc.output

    proc = run_facts(bucket, "-e", "maand_hosts=%s" % b, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.output
    data = json.loads(path.read_text())
    assert "cpu" in data[1] and "cpu" not in data[0] and "cpu" not in data[2]

    proc = run_facts(bucket, "--limit", "localhost,%s" % a, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.output
    data = json.loads(path.read_text())
    assert "cpu" in data[0] and "cpu" not in data[2]

    proc = run_facts(bucket, "-e", "maand_hosts=10.9.9.9", tmp_path=tmp_path)
    assert proc.returncode != 0
    assert "hosts not in workspace/workers.json: 10.9.9.9" in proc.output


def test_host_given_by_name(fleet3, tmp_path):
    """A worker whose host is a DNS name: resolved through a temporary /etc/hosts line."""
    hosts_file = Path("/etc/hosts")
    if not os.access(hosts_file, os.W_OK):
        pytest.skip("/etc/hosts is not writable: cannot create a resolvable name for a fleet host")
    name = "w1-%d.fleet.test" % os.getpid()
    address = fleet3.addresses[0]
    marker = "# maand.core test_facts %d" % os.getpid()
    original = hosts_file.read_text()
    hosts_file.write_text(original + ("" if original.endswith("\n") else "\n") + "%s %s %s\n" % (
        address, name, marker))
    try:
        bucket, path = make_bucket(tmp_path, fleet3, [{"host": name, "labels": ["prod"]}])
        proc = run_facts(bucket, tmp_path=tmp_path)
        assert proc.returncode == 0, proc.output
        assert "%s: memory unset -> " % name in proc.output
        real = real_capacity(fleet3, address)
        assert json.loads(path.read_text()) == [{
            "host": name, "labels": ["prod"], "memory": "%d mb" % real["memory"],
            "cpu": "%d mhz" % real["cpu"], "cores": real["cores"], "storage": "%d mb" % real["storage"],
            "arch": ARCH}]

        # unresolvable / unanswering names are reported by name
        path.write_text(json.dumps([{"host": name}, {"host": "nowhere.fleet.invalid"}], indent=2) + "\n")
        before = path.read_bytes()
        proc = run_facts(bucket, tmp_path=tmp_path)
        assert proc.returncode != 0
        assert "nowhere.fleet.invalid: unreachable: " in proc.output
        assert path.read_bytes() == before
    finally:
        text = hosts_file.read_text()
        hosts_file.write_text("".join(line for line in text.splitlines(True) if marker not in line))


@pytest.mark.skipif(not (ROOT / "plugins" / "action" / "build.py").exists(),
                    reason="maand.core.build (plugins/action/build.py) is not in the repository yet")
def test_facts_then_build(fleet3, tmp_path):
    """A job reserving memory needs capacity: the build fails before facts and passes with maand_build."""
    a = fleet3.addresses[0]
    bucket, path = make_bucket(tmp_path, fleet3, [{"host": a, "labels": ["prod"]}])
    job = bucket / "workspace" / "jobs" / "api"
    job.mkdir(parents=True)
    (bucket / "workspace" / "bucket.conf").write_text('port_min = "30000"\nport_max = "39999"\n')
    (job / "manifest.json").write_text(json.dumps({
        "selectors": ["prod"],
        "resources": {"memory": {"min": "64 mb", "max": "128 mb"}, "cpu": {"min": "10 mhz", "max": "20 mhz"}},
    }, indent=2))
    (job / "Makefile").write_text(textwrap.dedent("""\
        .PHONY: start stop restart
        start:
        \t@echo start
        stop:
        \t@echo stop
        restart: stop start
        """))

    before = subprocess.run(["ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % bucket],
                            capture_output=True, text=True, env=ansible_env(tmp_path), cwd=tmp_path,
                            timeout=180, check=False)
    assert before.returncode != 0, "build must need worker capacity first:\n" + before.stdout
    assert "must specify memory" in before.stdout + before.stderr, before.stdout
    assert not (bucket / "data" / "catalog.json").exists()

    proc = run_facts(bucket, "-e", "maand_build=true", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.output
    catalog = json.loads((bucket / "data" / "catalog.json").read_text())
    real = real_capacity(fleet3, a)
    (worker,) = catalog["workers"]
    assert worker["host"] == a
    assert worker["memory_mb"] == real["memory"]
    assert worker["cpu_mhz"] == real["cpu"]
    assert [x["job"] for x in catalog["allocations"]] == ["api"]
