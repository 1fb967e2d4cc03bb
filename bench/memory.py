"""Peak memory of a process tree on Linux, sampled from /proc (benchmark helper, stdlib only).

PSS (proportional set size, /proc/<pid>/smaps_rollup) is summed over the tree, so the pages that
Ansible's forked workers share with the main process count once, not once per fork. The tree is
found through /proc/<pid>/task/<tid>/children; processes whose command line contains `skip` (the
benchmark's own relay) are left out, with their children.
"""

from __future__ import annotations

import os
import threading


def _children(pid):
    out = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as handle:
                out += [int(c) for c in handle.read().split()]
    except OSError:
        pass
    return out


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _pss_kb(pid):
    return _rollup_kb(pid)[0]


def _rollup_kb(pid):
    """(PSS, private: pages no other process maps) of pid, in kB."""
    pss = private = 0
    try:
        with open("/proc/%d/smaps_rollup" % pid) as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith(("Private_Clean:", "Private_Dirty:")):
                    private += int(line.split()[1])
    except (OSError, ValueError):
        pass
    return pss, private


def _kind(pid, root, root_cmd, cmd):
    """What a process of the tree is, for the breakdown at the peak: the root, its forks, or the program."""
    if pid == root:
        return "root"
    if cmd == root_cmd:
        return "forks"  # Ansible's workers are forks of ansible-playbook: the same command line
    prog = os.path.basename(cmd.split(" ", 1)[0]) if cmd else "?"
    return prog if prog in ("ssh", "rsync", "sh", "python3") else "other"


def tree_pss(root, skip=None):
    """(PSS of root and its descendants in kB, number of processes, {kind: [PSS kB, processes, private kB]})."""
    total, count, todo, kinds = 0, 0, [root], {}
    root_cmd = _cmdline(root)
    while todo:
        pid = todo.pop()
        cmd = _cmdline(pid)
        if skip and skip in cmd:
            continue
        kb, private = _rollup_kb(pid)
        total += kb
        count += 1
        slot = kinds.setdefault(_kind(pid, root, root_cmd, cmd), [0, 0, 0])
        slot[0] += kb
        slot[1] += 1
        slot[2] += private
        todo += _children(pid)
    return total, count, kinds


def tree_pss_kb(root, skip=None):
    """(PSS of root and its descendants in kB, number of processes)."""
    total, count, _kinds = tree_pss(root, skip)
    return total, count


class PeakMemory:
    """with PeakMemory(pid) as peak: ...; then peak.mb (peak PSS of the tree), peak.processes, and
    peak.breakdown ({kind: [PSS MB, processes, private MB]} at that peak: root, forks, ssh, rsync, ...; a
    fork's PSS less its private memory is its share of the pages it still shares with the root)."""

    def __init__(self, pid, interval=0.25, skip=None):
        self.pid, self.interval, self.skip = pid, interval, skip
        self.kb, self.processes, self.kinds = 0, 0, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    @property
    def mb(self):
        return round(self.kb / 1024.0, 1)

    @property
    def breakdown(self):
        return {k: [round(kb / 1024.0, 1), n, round(private / 1024.0, 1)] for k, (kb, n, private) in sorted(self.kinds.items())}

    def _sample(self):
        while True:
            kb, count, kinds = tree_pss(self.pid, self.skip)
            if kb > self.kb:
                self.kb, self.processes, self.kinds = kb, count, kinds
            if self._stop.wait(self.interval):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False
