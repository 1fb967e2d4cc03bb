# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's memory beside Ansible's forks (installed by the maand.core.workspace inventory).

Ansible forks a worker per host and task (up to ``forks`` at once); a fork shares the controller's pages until
either side writes one. CPython's cycle collector writes into every object it examines, so each full collection
in the controller (one runs whenever its heap has grown by a quarter) turns every page of its heap into a private
copy in each live fork: forks x the controller's heap, growing with the fleet. Measured on a first deploy at 256
hosts (bench/memory.py, bench/results/README.md): the forks' private memory fell from 34 to 19 MB each, the
run's peak from 699 to 506 MB.

``install()`` freezes the survivors of each full collection in this process (``gc.freeze``): later collections,
in the controller and in the forks it makes (they inherit the frozen set), skip them. A reference cycle among
frozen objects is only collected by a complete sweep: when the frozen set has doubled since the last one, the
next full collection sweeps everything again (``gc.unfreeze``), so what is kept stays within twice what is live.
Objects freed by their reference count (most of them) are freed at once, frozen or not.
"""

from __future__ import annotations

import gc
import os

__all__ = ["install"]

_STATE = {"pid": None, "base": 0, "sweep": True}


def _after_collection(phase, info):
    """gc.callbacks hook: after each full collection of the process that installed it (not in its forks)."""
    if phase != "stop" or info.get("generation") != 2 or os.getpid() != _STATE["pid"]:
        return
    gc.freeze()
    if _STATE["sweep"]:  # this collection examined everything: what survived it is the new base
        _STATE.update(base=gc.get_freeze_count(), sweep=False)
    elif gc.get_freeze_count() > 2 * _STATE["base"]:
        gc.unfreeze()  # the next full collection sweeps everything
        _STATE["sweep"] = True


def install():
    """Freeze what survives each full collection of this process from now on (once per process)."""
    if _STATE["pid"] == os.getpid() and _after_collection in gc.callbacks:
        return
    _STATE.update(pid=os.getpid(), base=0, sweep=True)
    if _after_collection not in gc.callbacks:
        gc.callbacks.append(_after_collection)
