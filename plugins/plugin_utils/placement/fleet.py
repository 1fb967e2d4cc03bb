# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one worker index: built once per build from the model's workers, used by selection
(placement/select.Scheduler), placement (placement/place.place) and the explanations (placement/explain.py).

Sets of workers are Python int bitsets (bit i = bucket.workers[i], workers sorted by position, so
bit i is also worker.index). What it answers:
  labels      selector_mask(selectors), label_masks          (built eagerly: every job uses them)
  hosts       index_of, by_host, hosts_mask(hosts)           (disabled.json, previous allocations)
  properties, host names, ranks                              (RFC 31 constraints: the FleetIndex API)
  hardware    values, at_least_mask(key, min), hardware_record(i)   (the HardwareIndex API)
Every index but the labels is built on first use, so a labels-only bucket pays for nothing else.
No Ansible imports.
"""

from __future__ import annotations

from .constraints import FleetIndex, _bits_to_int, properties_of
from . import hardware  # hardware.FIELDS: hardware key -> Worker attribute (memory_mb, ...)
from .hardware import HardwareMasks, worker_arch


class WorkerIndex(FleetIndex, HardwareMasks):
    """Labels, hosts, properties, ranks and hardware of the model's Worker records, as bitsets."""

    def __init__(self, workers):
        self.workers = list(workers)  # bucket/model.Worker records, in bucket order (worker.index == i)
        self._setup(len(self.workers), [w.position for w in self.workers])
        self.by_host = {w.host: w for w in self.workers}
        self.index_of = {w.host: i for i, w in enumerate(self.workers)}
        self.label_masks = self._label_masks()
        self._values = None
        self._ge = {}
        self._eq = {}

    def _label_masks(self):
        members = {}
        for i, worker in enumerate(self.workers):
            for label in worker.labels:
                bucket = members.get(label)
                if bucket is None:
                    members[label] = [i]
                else:
                    bucket.append(i)
        return {label: _bits_to_int(indices, self.size) for label, indices in members.items()}

    # --- labels and hosts ----------------------------------------------------------------------

    def selector_mask(self, selectors):
        """Workers whose labels hold every selector (maand's placement rule)."""
        mask = self.all_mask
        for selector in selectors:
            mask &= self.label_masks.get(selector, 0)
            if not mask:
                break
        return mask

    def hosts_mask(self, hosts):
        """Workers among hosts (unknown hosts are ignored)."""
        index_of = self.index_of
        return _bits_to_int((index_of[h] for h in hosts if h in index_of), self.size)

    # --- the FleetIndex accessors over Worker records -----------------------------------------------

    def host_of(self, i):
        return self.workers[i].host

    def hostname_of(self, i):
        return self.workers[i].hostname

    def _properties_at(self, i):
        worker = self.workers[i]
        return properties_of(worker.labels, worker.tags)

    # --- hardware (the HardwareIndex API used by placement/hardware.hardware_mask / hardware_maxima) --------

    @property
    def values(self):
        """hardware key -> [value of workers[i] or None (unknown)]."""
        if self._values is None:
            self._values = {key: [getattr(w, attr, None) for w in self.workers]
                            for key, attr in hardware.FIELDS.items()}
            if "arch" in self._values:
                self._values["arch"] = [worker_arch(v) for v in self._values["arch"]]
        return self._values

    def hardware_record(self, i):
        """workers[i]'s hardware as the mapping placement/hardware.hardware_shortfalls reads."""
        worker = self.workers[i]
        return {attr: getattr(worker, attr) for attr in hardware.FIELDS.values()}
