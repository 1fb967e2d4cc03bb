# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which verbs run on the last built catalog after an unbuilt edit (pure Python, no ansible imports).

The catalog records the fingerprint of the workspace it was built from (fingerprint.py). After a `git pull`
or any edit that was not built, the workspace and the catalog disagree ("stale"). What then runs is a
policy per verb (issue 31 item 2), in POLICY:

- WARN: read-only and emergency verbs (status, health_check, cat, info, logs, job, run_command, cert_metrics)
  work on the last built catalog, which is what the last deploy put on the workers, with one warning naming
  what changed and the build to run: at the moment something breaks the operator can still see and stop it;
- REFUSE: the verbs that would act on the edit half-read (deploy, gc, job_command: the workspace's command
  scripts against another workspace's catalog) refuse with ErrStaleCatalog, as does any playbook not listed
  (a user's own playbook over the maand.core.workspace inventory, ansible-inventory);
- NONE: the verbs that read the workspace itself, not the catalog (build, explain, facts, init, job_create,
  state).
"""

from __future__ import annotations

from typing import Iterable, Sequence

WARN, REFUSE, NONE = "warn", "refuse", "none"

POLICY = {
    "maand.core.status": WARN,
    "maand.core.health_check": WARN,
    "maand.core.cat": WARN,
    "maand.core.info": WARN,
    "maand.core.logs": WARN,
    "maand.core.job_logs": WARN,
    "maand.core.job": WARN,
    "maand.core.run_command": WARN,
    "maand.core.cert_metrics": WARN,
    "maand.core.deploy": REFUSE,
    "maand.core.gc": REFUSE,
    "maand.core.job_command": REFUSE,
    "maand.core.build": NONE,
    "maand.core.explain": NONE,
    "maand.core.facts": NONE,
    "maand.core.init": NONE,
    "maand.core.job_create": NONE,
    "maand.core.state": NONE,
}
SHOWN = 10


def policy(verb: str) -> str:
    """The verb's policy on a stale catalog: WARN, REFUSE or NONE; REFUSE for a verb not listed."""
    return POLICY.get(verb, REFUSE)


def allows_stale(verbs: Iterable[str]) -> bool:
    """True when every verb of a run may use the last built catalog (WARN); False for no verb at all
    (ansible-inventory, an API caller), or when one would refuse, or does not use the catalog (NONE: build reads
    the workspace itself and must not open with a warning about the catalog it is about to replace)."""
    verbs = list(verbs)
    return bool(verbs) and all(policy(v) == WARN for v in verbs)


def shown(changes: Sequence[str], limit: int = SHOWN) -> str:
    """The changes as one clause: the first `limit`, then "and N more"."""
    text = "; ".join(changes[:limit])
    return text + ("; and %d more" % (len(changes) - limit) if len(changes) > limit else "")


def stale_warning(bucket_dir: str, changes: Sequence[str]) -> str:
    """The one warning of a verb that runs on the last built catalog of a stale workspace."""
    return ("ErrStaleCatalog: %s/data/catalog.json: the workspace changed since the last build (%s); this run uses "
            "the last built catalog. Run ansible-playbook maand.core.build -e maand_bucket=%s to build the edit, "
            "then maand.core.deploy to roll it out"
            % (bucket_dir, shown(changes), bucket_dir))
