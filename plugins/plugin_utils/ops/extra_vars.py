# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Extra vars a playbook does not read (no Ansible imports).

Every extra var a user types starts with ``maand_``; one that the playbook does not read is ignored by
Ansible without a word, and a typo can change what a run does (``-e maand_job=api`` to the deploy, which
reads ``maand_jobs``, deploys every job). The actions name such vars with a "did you mean". A var that
another maand.core playbook reads (an AWX workflow passes its extra vars to every node) is only noted.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ..bucket.problems import did_you_mean

PREFIX = "maand_"

# The extra vars each playbook reads (the deploy's are its role's options: roles/deploy/meta/argument_specs.yml).
PLAYBOOK_VARS = {
    "maand.core.build": ("maand_bucket", "maand_strict", "maand_new_bucket_id", "maand_purge_job_kv",
                         "maand_format"),
    "maand.core.explain": ("maand_bucket", "maand_job", "maand_job_workers", "maand_show", "maand_limit"),
    "maand.core.cat": ("maand_bucket", "maand_cat", "maand_jobs", "maand_workers", "maand_reveal", "maand_deleted",
                       "maand_active", "maand_namespace", "maand_key", "maand_file", "maand_scrape",
                       "maand_format"),
    "maand.core.cert_metrics": ("maand_bucket",),
    "maand.core.info": ("maand_bucket", "maand_format"),
    "maand.core.logs": ("maand_bucket", "maand_run", "maand_jobs", "maand_workers", "maand_limit", "maand_format",
                        "maand_phase", "maand_event", "maand_tail"),
    "maand.core.job_logs": ("maand_bucket", "maand_job", "maand_lines", "maand_job_workers"),
    "maand.core.facts": ("maand_bucket", "maand_labels", "maand_hosts", "maand_build", "maand_strict",
                         "maand_new_bucket_id", "maand_format"),
    "maand.core.job": ("maand_bucket", "maand_job", "maand_target", "maand_job_workers", "maand_health_check",
                       "maand_wait_seconds", "maand_job_all_at_once"),
    "maand.core.health_check": ("maand_jobs", "maand_wait", "maand_wait_seconds", "maand_format"),
    "maand.core.run_command": ("maand_cmd", "maand_workers", "maand_labels", "maand_batch", "maand_health_check",
                               "maand_health_check_delay", "maand_wait_seconds"),
    "maand.core.gc": ("maand_retain_days", "maand_departed", "maand_departed_forget", "maand_format"),
    "maand.core.status": ("maand_jobs", "maand_format", "maand_status_timeout"),
    "maand.core.job_create": ("maand_bucket", "maand_job"),
    "maand.core.state": ("maand_bucket", "maand_state_to", "maand_force"),
}


def unknown_extra_vars(extra_vars: Mapping, known: Iterable[str], playbook: str,
                       others: Iterable[str] = ()) -> list[str]:
    """One message per maand_* extra var that `playbook` does not read and that is not in `others` (the
    vars of the other maand.core playbooks), sorted."""
    known = sorted(set(known))
    skip = set(others)
    return ["the extra var %s is not read by %s and is ignored%s; it reads: %s"
            % (name, playbook, did_you_mean(name, known), ", ".join(known))
            for name in sorted(n for n in extra_vars if isinstance(n, str) and n.startswith(PREFIX))
            if name not in known and name not in skip]


def other_playbooks_vars(playbook: str, deploy_vars: Iterable[str] = ()) -> set:
    """The maand_ extra vars of every maand.core playbook but `playbook`."""
    out = set(deploy_vars) if playbook != "maand.core.deploy" else set()
    for name, names in PLAYBOOK_VARS.items():
        if name != playbook:
            out.update(names)
    return out


# The deploy's own vars are its role's options (roles/deploy/meta/argument_specs.yml); the pinned-plan and
# rollback ones, named here so other playbooks do not warn about them as typos of theirs.
DEPLOY_VARS = ("maand_jobs", "maand_force", "maand_sync_only", "maand_plan", "maand_rollback", "maand_promote",
               "maand_adopt_bucket_id",
               "maand_deploy_make_timeout", "maand_deploy_output_tail", "maand_deploy_rsync_verify_host",
               "maand_worker_slots")


# Deploy options from before every user-facing extra var took the maand_ prefix (still read by the role).
DEPLOY_RENAMED = {"deploy_make_timeout": "maand_deploy_make_timeout", "deploy_output_tail": "maand_deploy_output_tail",
                  "deploy_rsync_verify_host": "maand_deploy_rsync_verify_host"}


def deprecated_extra_vars(extra_vars: Mapping, renamed: Mapping[str, str]) -> list[str]:
    """One deprecation message per old (unprefixed) name among the extra vars (sorted)."""
    return ["the extra var %s is deprecated: use -e %s=... instead" % (name, renamed[name])
            for name in sorted(n for n in extra_vars if n in renamed)]
