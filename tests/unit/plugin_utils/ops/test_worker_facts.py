"""Unit tests for maand.core.worker_facts: parsing, the fallback chain, failures, the module itself."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
COLLECTIONS = ROOT / ".collections"
# The root conftest.py links .collections/ansible_collections/maand/core to this repository.

from ansible_collections.maand.core.plugins.modules import worker_facts as _worker_facts  # noqa: E402

MODULE = ROOT / "plugins" / "modules" / "worker_facts.py"

MEMINFO = """MemTotal:        8126464 kB
MemFree:          407468 kB
MemAvailable:    1710564 kB
"""

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu MHz\t\t: 1399.998
flags\t\t: fpu vme

processor\t: 1
vendor_id\t: GenuineIntel
cpu MHz\t\t: 2800.412
flags\t\t: fpu vme
"""

CPUINFO_ARM = """processor\t: 0
BogoMIPS\t: 48.00
Features\t: fp asimd

processor\t: 1
BogoMIPS\t: 48.00
"""

LSCPU = """Architecture:            aarch64
CPU(s):                  4
CPU max MHz:             2400.0000
CPU min MHz:             408.0000
"""

LSCPU_CUR_ONLY = """Architecture:          x86_64
CPU(s):                3
CPU MHz:               2666.761
"""


def nproc():
    return len(os.sched_getaffinity(0))


def make_proc(tmp_path, meminfo=MEMINFO, cpuinfo=CPUINFO, max_freq=None):
    proc = tmp_path / "proc"
    proc.mkdir()
    if meminfo is not None:
        (proc / "meminfo").write_text(meminfo)
    if cpuinfo is not None:
        (proc / "cpuinfo").write_text(cpuinfo)
    sys_root = tmp_path / "sys"
    freq = sys_root / "devices/system/cpu/cpu0/cpufreq"
    freq.mkdir(parents=True)
    if max_freq is not None:
        (freq / "cpuinfo_max_freq").write_text(max_freq)
    return str(proc), str(sys_root)


# --------------------------------------------------------------------------- parsers


def test_meminfo_kib_to_mb_rounded_down():
    assert _worker_facts.parse_meminfo(MEMINFO) == 8126464 // 1024 == 7936
    assert _worker_facts.parse_meminfo("MemTotal: 1048575 kB\n") == 1023


def test_meminfo_without_memtotal():
    assert _worker_facts.parse_meminfo("MemFree: 1 kB\nSwapTotal: 0 kB\n") is None
    assert _worker_facts.parse_meminfo("") is None


def test_cpuinfo_takes_the_highest_core():
    assert _worker_facts.parse_cpuinfo_mhz(CPUINFO) == pytest.approx(2800.412)


def test_cpuinfo_without_mhz():
    assert _worker_facts.parse_cpuinfo_mhz(CPUINFO_ARM) is None
    assert _worker_facts.parse_cpuinfo_mhz("cpu MHz : unknown\n") is None


def test_lscpu_prefers_max_mhz():
    assert _worker_facts.parse_lscpu_mhz(LSCPU) == (pytest.approx(2400.0), "lscpu_max")
    assert _worker_facts.parse_lscpu_mhz(LSCPU_CUR_ONLY) == (pytest.approx(2666.761), "lscpu")
    assert _worker_facts.parse_lscpu_mhz("Architecture: x86_64\n") == (None, None)


def test_cpufreq_khz():
    assert _worker_facts.parse_cpufreq_khz("3600000\n") == pytest.approx(3600.0)
    assert _worker_facts.parse_cpufreq_khz("garbage") is None
    assert _worker_facts.parse_cpufreq_khz("0") is None


# --------------------------------------------------------------------------- probe()


def probe_ok(*args, **kwargs):
    facts, problems = _worker_facts.probe(*args, **kwargs)
    assert problems == []
    return facts


def probe_problems(*args, **kwargs):
    dummy, problems = _worker_facts.probe(*args, **kwargs)
    assert problems
    return "; ".join(problems)


def test_probe_from_cpuinfo(tmp_path):
    proc, sys_root = make_proc(tmp_path)
    (tmp_path / "opt").mkdir()
    facts = probe_ok(proc, sys_root, [str(tmp_path / "opt" / "worker"), str(tmp_path / "opt")],
                     lscpu=lambda: pytest.fail("lscpu must not run when cpuinfo has MHz"))
    assert facts["memory_mb"] == 7936
    assert facts["cores"] == nproc()
    assert facts["cpu_mhz_per_core"] == 2800
    assert facts["cpu_mhz"] == 2800 * nproc()
    assert facts["cpu_mhz_source"] == "cpuinfo"
    assert facts["storage_path"] == str(tmp_path / "opt")
    st = os.statvfs(tmp_path)
    assert facts["storage_total_mb"] == st.f_blocks * st.f_frsize // (1024 * 1024)
    assert 0 <= facts["storage_mb"] <= facts["storage_total_mb"]
    assert facts["arch"] == os.uname().machine
    assert facts["kernel"] == os.uname().release
    assert facts["hostname"]


def test_probe_prefers_opt_worker(tmp_path):
    proc, sys_root = make_proc(tmp_path)
    (tmp_path / "opt" / "worker").mkdir(parents=True)
    facts = probe_ok(proc, sys_root, [str(tmp_path / "opt" / "worker"), str(tmp_path / "opt")])
    assert facts["storage_path"] == str(tmp_path / "opt" / "worker")


def test_probe_without_storage_path(tmp_path):
    proc, sys_root = make_proc(tmp_path)
    facts = probe_ok(proc, sys_root, [str(tmp_path / "nope")])
    assert facts["storage_path"] is None and facts["storage_mb"] is None
    assert facts["storage_total_mb"] is None


def test_probe_falls_back_to_lscpu(tmp_path):
    proc, sys_root = make_proc(tmp_path, cpuinfo=CPUINFO_ARM, max_freq="9999000")
    facts = probe_ok(proc, sys_root, [], lscpu=lambda: LSCPU)
    assert facts["cpu_mhz_source"] == "lscpu_max"
    assert facts["cpu_mhz"] == 2400 * nproc()


def test_probe_falls_back_to_cpufreq(tmp_path):
    proc, sys_root = make_proc(tmp_path, cpuinfo=CPUINFO_ARM, max_freq="3600000\n")
    facts = probe_ok(proc, sys_root, [], lscpu=lambda: None)  # lscpu not installed
    assert facts["cpu_mhz_source"] == "cpufreq_max"
    assert facts["cpu_mhz"] == 3600 * nproc()


def test_probe_fails_naming_every_missing_source(tmp_path):
    proc, sys_root = make_proc(tmp_path, meminfo="MemFree: 1 kB\n", cpuinfo=CPUINFO_ARM)
    msg = probe_problems(proc, sys_root, [], lscpu=lambda: "Architecture: x86_64\n")
    assert "memory:" in msg and "has no MemTotal" in msg
    assert "cpu: no per-core MHz" in msg
    assert "has no 'cpu MHz'" in msg and "lscpu has no" in msg and "cpuinfo_max_freq missing" in msg


def test_probe_fails_without_proc_files(tmp_path):
    proc, sys_root = make_proc(tmp_path, meminfo=None, cpuinfo=None, max_freq=None)
    assert re.search(r"memory: cannot read .*meminfo", probe_problems(proc, sys_root, [], lscpu=None))


# --------------------------------------------------------------------------- the module


def run_module(args, check_mode=False):
    payload = {"ANSIBLE_MODULE_ARGS": dict(args, _ansible_check_mode=check_mode)}
    proc = subprocess.run([sys.executable, str(MODULE), json.dumps(payload)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout), proc.returncode


def test_module_success_in_check_mode(tmp_path):
    proc, sys_root = make_proc(tmp_path)
    result, rc = run_module({"proc_root": proc, "sys_root": sys_root,
                             "storage_paths": [str(tmp_path)]}, check_mode=True)
    assert rc == 0, result
    assert result["changed"] is False
    assert result["memory_mb"] == 7936
    assert result["cpu_mhz"] == 2800 * nproc()
    assert result["storage_path"] == str(tmp_path)


def test_module_failure_is_a_clear_message(tmp_path):
    proc, sys_root = make_proc(tmp_path, meminfo="", cpuinfo=CPUINFO_ARM)
    result, rc = run_module({"proc_root": proc, "sys_root": sys_root, "use_lscpu": False})
    assert rc != 0
    assert result["failed"] is True
    assert result["msg"].startswith("cannot probe worker capacity: memory:")
    assert "Traceback" not in json.dumps(result)


def test_module_on_this_machine_matches_proc():
    result, rc = run_module({})
    assert rc == 0, result
    with open("/proc/meminfo") as handle:
        assert result["memory_mb"] == _worker_facts.parse_meminfo(handle.read())
    assert result["cores"] == int(subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout)


def test_module_source_parses_as_python36():
    """Workers may run old Pythons: no syntax newer than 3.6 in the module."""
    ast.parse(MODULE.read_text(), feature_version=(3, 6))
