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
    try:
        with open("/proc/%d/smaps_rollup" % pid) as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def tree_pss_kb(root, skip=None):
    """(PSS of root and its descendants in kB, number of processes)."""
    total, count, todo = 0, 0, [root]
    while todo:
        pid = todo.pop()
        if skip and skip in _cmdline(pid):
            continue
        total += _pss_kb(pid)
        count += 1
        todo += _children(pid)
    return total, count


class PeakMemory:
    """with PeakMemory(pid) as peak: ...; then peak.mb (peak PSS of the tree) and peak.processes."""

    def __init__(self, pid, interval=0.25, skip=None):
        self.pid, self.interval, self.skip = pid, interval, skip
        self.kb, self.processes = 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    @property
    def mb(self):
        return round(self.kb / 1024.0, 1)

    def _sample(self):
        while True:
            kb, count = tree_pss_kb(self.pid, self.skip)
            if kb > self.kb:
                self.kb, self.processes = kb, count
            if self._stop.wait(self.interval):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False
