# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Certificates: the bucket CA and the jobs' TLS leaves, as maand makes them (docs/certs.md). PRIVATE to the collection.

Rank 2.5: above the bucket (secrets/), the worker paths and the KV namespaces it names, below the build,
the deploy and the day-2 verbs that use it.

ca.py (the bucket CA in secrets/; the optional ``cryptography`` import, CertError), leaves.py (a leaf
issued, checked for renewal, its expiry status), build.py (what build does: the CA checked, every job's
leaves kept or issued into the KV). The deploy lays the stored leaves over each allocation's tree in
deploy/certs.py (it builds the deploy stage's overlays); the expiry metrics are pushed by ops/cert_metrics.py.

The door: this file (``from ..certs import ...``; the names in ``__all__``).
"""

from __future__ import annotations

from .ca import CA, CA_CERT_REL, CertError, ca_paths, load_ca, load_or_create_ca
from .leaves import (CertStatus, Leaf, cert_status, expiry_status, issue_leaf, leaf_problem, needs_renewal,
                     pem_needs_renewal, ttl_days)
from .build import CERTS_DIR, Issued, check, issue, job_specs, settings

__all__ = [
    # ca.py
    "CA", "CA_CERT_REL", "CertError", "ca_paths", "load_ca", "load_or_create_ca",
    # leaves.py
    "CertStatus", "Leaf", "cert_status", "expiry_status", "issue_leaf", "leaf_problem", "needs_renewal",
    "pem_needs_renewal", "ttl_days",
    # build.py
    "CERTS_DIR", "Issued", "check", "issue", "job_specs", "settings",
]
