# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health: the probes of health checks and the one wait loop they wait in. PRIVATE to the collection.

Rank 4.5, below deploy (its health gates, deploy/gate.py) and ops (the `health_check` verb,
ops/health_check.py), which both wait here on their own budgets.

waiter.py (Budget, Waiter.wait: the one wait loop, as kubernetes.core's k8s/waiter.py), probes.py (one
predicate per probe type: tcp, http(s), ssh, and the job's `make status` through the worker agent),
watch.py (StatusWatch: fail fast on `make status` while a check waits; StatusConfirm: a gate passes only
where `make status` agrees), tails.py (what a failed check adds
to its message: the time it waited, the workers' status tails).

The door: this package (``from ..health import Waiter, probe, StatusWatch``).
"""

from __future__ import annotations

from .probes import (PROBES, STATUS_TIMEOUT, Agent, Trust, by_address, describe, http_probe, probe, prober,
                     ssh_argv, ssh_probe, ssh_remote, status_probe, tcp_probe)
from .tails import READ_NEWEST_LOG, collect_tails, failure_notes, status_command
from .waiter import Budget, Pending, Waited, Waiter
from .watch import (NOT_RUNNING, STATUS_PARALLEL, STATUS_SPACING, STATUS_STRIKES, StatusConfirm, StatusWatch,
                    ask_status, in_background, not_running, status_checker)

__all__ = [
    "Agent", "Budget", "NOT_RUNNING", "PROBES", "Pending", "READ_NEWEST_LOG", "STATUS_PARALLEL", "STATUS_SPACING",
    "STATUS_STRIKES", "STATUS_TIMEOUT", "StatusConfirm", "StatusWatch", "Trust", "Waited", "Waiter", "ask_status",
    "by_address", "collect_tails", "describe", "failure_notes", "http_probe", "in_background", "not_running", "probe",
    "prober", "ssh_argv", "ssh_probe", "ssh_remote", "status_checker", "status_command", "status_probe", "tcp_probe",
]
