# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What maand refuses of a job's ``_prometheus/`` folder or of a scrape expansion: the package's errors.

No Ansible imports.
"""

from __future__ import annotations

from ..errors import MaandError


class PrometheusError(MaandError):
    """A _prometheus/ file or a scrape expansion maand would refuse; the message names it.

    file: the bucket-relative file at fault when known (build reports it), else ""."""

    def __init__(self, message: str, file: str = "") -> None:
        super().__init__(message, file=file)


class NoActiveTargets(PrometheusError):
    """maand's ErrNoActiveScrapeTargets: placeholders expanded to zero targets (the job is skipped)."""
