#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: worker_facts
short_description: Probe a maand worker's memory, CPU and storage capacity
version_added: "1.0.0"
description:
  - "Internal task of the C(maand.core.facts) playbook, run on a worker."
  - Runs on a worker and reports the capacity that C(workspace/workers.json) declares for it,
    the same values C(maand worker_facts) probes.
  - Memory is C(MemTotal) from C(/proc/meminfo), in MB (KiB / 1024, rounded down).
  - CPU is the total capacity in MHz, the number of logical CPUs this process may run on
    (what C(nproc) prints) times the per-core MHz. The per-core MHz comes from the first source
    that has it, and RV(cpu_mhz_source) says which one was used. The sources, in order, are
    the highest C(cpu MHz) in C(/proc/cpuinfo); C(lscpu) C(CPU max MHz), then C(CPU MHz);
    C(/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq).
  - Storage is the free and total space of the filesystem holding the first existing path of
    O(storage_paths) (C(/opt/worker), else C(/opt)).
  - Uses only the Python standard library; works with Python 3.6 and later on the worker.
  - Only reads; never changes the worker.
author:
  - maand.core developers (@maand-sh)
options:
  storage_paths:
    description:
      - Candidate paths whose filesystem is measured; the first one that exists is used.
      - When none exists, the storage values are returned as V(null).
    type: list
    elements: path
    default: [/opt/worker, /opt]
  proc_root:
    description:
      - Directory read instead of C(/proc) (for C(meminfo) and C(cpuinfo)).
      - For testing with fixture files; leave the default on real workers.
    type: path
    default: /proc
  sys_root:
    description:
      - Directory read instead of C(/sys) for the cpufreq fallback.
      - For testing with fixture files; leave the default on real workers.
    type: path
    default: /sys
  use_lscpu:
    description:
      - Whether C(lscpu) is tried when C(/proc/cpuinfo) has no C(cpu MHz).
    type: bool
    default: true
  needs:
    description:
      - Commands the deploy will run on the worker (the facts playbook passes C(rsync), C(make), C(python3), and
        C(sudo) when maand.conf says C(use_sudo = true)); those not on the C(PATH) are returned in RV(lacks).
      - C(sudo) must also run without a password (C(sudo -n true)).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: The module only reads, so check mode returns the same values.
  diff_mode:
    support: none
    description: Read-only; there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Linux (needs C(/proc/meminfo)).
extends_documentation_fragment: [maand.core.private]
notes:
  - The playbook C(maand.core.facts) runs this module on every worker of a bucket and writes the
    results to C(workspace/workers.json) with M(maand.core.workers_file).
  - A worker whose C(/proc/meminfo) has no C(MemTotal), or where no CPU MHz source answers, fails
    with a message naming what is missing.
seealso:
  - module: maand.core.workers_file
"""

EXAMPLES = r"""
- name: Probe capacity
  maand.core.worker_facts:
  register: capacity

- name: Show it
  ansible.builtin.debug:
    msg: "{{ capacity.memory_mb }} MB, {{ capacity.cpu_mhz }} MHz ({{ capacity.cpu_mhz_source }})"

- name: Measure the filesystem holding /srv instead of /opt
  maand.core.worker_facts:
    storage_paths: [/srv]
"""

RETURN = r"""
lacks:
  description: The commands of O(needs) the worker lacks (C(sudo) also when C(sudo -n true) fails).
  returned: success
  type: list
  elements: str
  sample: [rsync]
memory_mb:
  description: C(MemTotal) in MB (rounded down).
  returned: success
  type: int
  sample: 7936
cores:
  description: Logical CPUs this process may run on (C(nproc)).
  returned: success
  type: int
  sample: 4
cpu_mhz_per_core:
  description: Per-core MHz from RV(cpu_mhz_source), rounded to an integer.
  returned: success
  type: int
  sample: 1400
cpu_mhz:
  description: Total CPU capacity, RV(cores) x RV(cpu_mhz_per_core).
  returned: success
  type: int
  sample: 5600
cpu_mhz_source:
  description: Where the per-core MHz came from.
  returned: success
  type: str
  choices: [cpuinfo, lscpu_max, lscpu, cpufreq_max]
  sample: cpuinfo
storage_path:
  description: The path whose filesystem was measured; V(null) when no candidate exists.
  returned: success
  type: str
  sample: /opt/worker
storage_mb:
  description: Free space (available to unprivileged users) on that filesystem in MB.
  returned: success
  type: int
  sample: 51200
storage_total_mb:
  description: Total size of that filesystem in MB.
  returned: success
  type: int
  sample: 102400
arch:
  description: Machine architecture (C(uname -m)).
  returned: success
  type: str
  sample: x86_64
hostname:
  description: The worker's own host name.
  returned: success
  type: str
  sample: worker-1
kernel:
  description: Kernel release (C(uname -r)).
  returned: success
  type: str
  sample: 6.1.0-18-amd64
"""

import os
import re
import socket

from ansible.module_utils.basic import AnsibleModule


def parse_meminfo(text):
    """Return MemTotal in MB (rounded down) from /proc/meminfo text, or None."""
    for line in text.splitlines():
        match = re.match(r"^MemTotal:\s*(\d+)\s*(\w*)", line)
        if match:
            value = int(match.group(1))
            unit = match.group(2).lower()
            if unit in ("kb", "kib", ""):
                return value // 1024
            if unit in ("mb", "mib"):
                return value
            if unit in ("gb", "gib"):
                return value * 1024
            return None
    return None


def parse_cpuinfo_mhz(text):
    """Return the highest "cpu MHz" value in /proc/cpuinfo text, or None."""
    values = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "cpu mhz":
            try:
                mhz = float(value.strip())
            except ValueError:
                continue
            if mhz > 0:
                values.append(mhz)
    return max(values) if values else None


def parse_lscpu_mhz(text):
    """Return (mhz, source) from lscpu output: "CPU max MHz", then "CPU MHz"; or (None, None)."""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key in ("cpu max mhz", "cpu mhz"):
            try:
                mhz = float(value.strip().replace(",", "."))
            except ValueError:
                continue
            if mhz > 0:
                found[key] = mhz
    if "cpu max mhz" in found:
        return found["cpu max mhz"], "lscpu_max"
    if "cpu mhz" in found:
        return found["cpu mhz"], "lscpu"
    return None, None


def parse_cpufreq_khz(text):
    """Return MHz from a cpufreq *_freq file (kHz), or None."""
    try:
        khz = int(text.strip())
    except ValueError:
        return None
    return khz / 1000.0 if khz > 0 else None


def count_cores():
    """Logical CPUs this process may run on, like nproc."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is not None:
        try:
            return len(getaffinity(0))
        except OSError:  # no affinity on this kernel: count the CPUs instead, as nproc falls back
            pass
    return os.cpu_count()


def read_text(path):
    with open(path, "r") as handle:
        return handle.read()


def statvfs_mb(path):
    """(free_mb, total_mb) of the filesystem holding path."""
    st = os.statvfs(path)
    mib = 1024 * 1024
    return (st.f_bavail * st.f_frsize) // mib, (st.f_blocks * st.f_frsize) // mib


def probe(proc_root="/proc", sys_root="/sys", storage_paths=("/opt/worker", "/opt"), lscpu=None):
    """Collect the facts. lscpu is a callable returning lscpu's output (or None to skip it).

    Returns (facts, problems): problems names every value that could not be determined ([] when none).
    """
    errors = []
    facts = {}

    meminfo_path = os.path.join(proc_root, "meminfo")
    try:
        memory_mb = parse_meminfo(read_text(meminfo_path))
    except (IOError, OSError) as exc:
        memory_mb = None
        errors.append("memory: cannot read %s (%s)" % (meminfo_path, exc.strerror or exc))
    else:
        if memory_mb is None:
            errors.append("memory: %s has no MemTotal line" % meminfo_path)
        elif memory_mb <= 0:
            errors.append("memory: MemTotal in %s is 0" % meminfo_path)
    facts["memory_mb"] = memory_mb

    cores = count_cores()
    if not cores:
        errors.append("cpu: cannot count the logical CPUs")
    facts["cores"] = cores

    tried = []
    mhz, source = None, None
    cpuinfo_path = os.path.join(proc_root, "cpuinfo")
    try:
        mhz = parse_cpuinfo_mhz(read_text(cpuinfo_path))
    except (IOError, OSError) as exc:
        tried.append("%s unreadable (%s)" % (cpuinfo_path, exc.strerror or exc))
    else:
        if mhz is None:
            tried.append("%s has no 'cpu MHz'" % cpuinfo_path)
        else:
            source = "cpuinfo"
    if mhz is None:
        if lscpu is None:
            tried.append("lscpu not used")
        else:
            output = lscpu()
            if output is None:
                tried.append("lscpu not available")
            else:
                mhz, source = parse_lscpu_mhz(output)
                if mhz is None:
                    tried.append("lscpu has no 'CPU max MHz' or 'CPU MHz'")
    if mhz is None:
        freq_path = os.path.join(sys_root, "devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
        try:
            mhz = parse_cpufreq_khz(read_text(freq_path))
        except (IOError, OSError):
            tried.append("%s missing" % freq_path)
        else:
            if mhz is None:
                tried.append("%s unparsable" % freq_path)
            else:
                source = "cpufreq_max"
    if mhz is None:
        errors.append("cpu: no per-core MHz found (%s)" % "; ".join(tried))
        facts["cpu_mhz_per_core"] = None
        facts["cpu_mhz"] = None
    else:
        per_core = int(round(mhz))
        facts["cpu_mhz_per_core"] = per_core
        facts["cpu_mhz"] = per_core * cores if cores else None
    facts["cpu_mhz_source"] = source

    facts["storage_path"] = None
    facts["storage_mb"] = None
    facts["storage_total_mb"] = None
    for path in storage_paths:
        if os.path.exists(path):
            try:
                free_mb, total_mb = statvfs_mb(path)
            except OSError as exc:
                errors.append("storage: statvfs(%s) failed (%s)" % (path, exc.strerror or exc))
            else:
                facts["storage_path"] = path
                facts["storage_mb"] = free_mb
                facts["storage_total_mb"] = total_mb
            break

    uname = os.uname()
    facts["arch"] = uname.machine
    facts["kernel"] = uname.release
    facts["hostname"] = socket.gethostname()

    return facts, errors


def main():
    module = AnsibleModule(
        argument_spec=dict(
            storage_paths=dict(type="list", elements="path", default=["/opt/worker", "/opt"]),
            proc_root=dict(type="path", default="/proc"),
            sys_root=dict(type="path", default="/sys"),
            use_lscpu=dict(type="bool", default=True),
            needs=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )

    def run_lscpu():
        lscpu = module.get_bin_path("lscpu")
        if not lscpu:
            return None
        rc, out, _err = module.run_command(
            [lscpu], environ_update={"LC_ALL": "C", "LANG": "C"}, check_rc=False
        )
        return out if rc == 0 else None

    facts, problems = probe(
        proc_root=module.params["proc_root"],
        sys_root=module.params["sys_root"],
        storage_paths=module.params["storage_paths"],
        lscpu=run_lscpu if module.params["use_lscpu"] else None,
    )
    if problems:
        module.fail_json(msg="cannot probe worker capacity: %s" % "; ".join(problems))
    facts["lacks"] = lacks(module, module.params["needs"])
    module.exit_json(changed=False, **facts)


def lacks(module, needs):
    """The commands of `needs` not on the worker's PATH; sudo also when it does not run without a password."""
    out = []
    for name in needs:
        path = module.get_bin_path(name)
        if path is None:
            out.append(name)
        elif name == "sudo":
            rc, _out, _err = module.run_command([path, "-n", "true"], check_rc=False)
            if rc != 0:
                out.append("sudo (sudo -n true failed)")
    return out


if __name__ == "__main__":
    main()
