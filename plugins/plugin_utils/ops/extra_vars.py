# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Extra vars a playbook does not read (no Ansible imports).

Every extra var a user types starts with ``maand_``; one that the playbook does not read is ignored by
Ansible without a word, and a typo can change what a run does (``-e maand_rollbak=api`` to the deploy rolls
forward, ``-e maand_job=api`` deploys every job). Every verb refuses such a var before any worker is touched,
with a "did you mean" (issue 31 item 3). ``-e maand_allow_unknown_vars=true`` turns the refusal into a
warning (an AWX workflow that passes one set of extra vars to every node).

The vars each playbook reads are declared here, once (PLAYBOOK_VARS; the deploy's are its role's options,
roles/deploy/meta/argument_specs.yml, plus DEPLOY_VARS): a playbook that reads a new var adds it to its row.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from ..bucket.problems import did_you_mean

PREFIX = "maand_"
DEPLOY = "maand.core.deploy"
ALLOW_UNKNOWN = "maand_allow_unknown_vars"
# read by every playbook (the check itself)
COMMON_VARS = (ALLOW_UNKNOWN,)

# The extra vars each playbook reads (the deploy's are its role's options: roles/deploy/meta/argument_specs.yml).
PLAYBOOK_VARS = {
    "maand.core.build": ("maand_bucket", "maand_strict", "maand_new_bucket_id", "maand_purge_job_kv",
                         "maand_format", "maand_allow_remove_all"),
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
                         "maand_new_bucket_id", "maand_format", "maand_allow_remove_all"),
    "maand.core.job": ("maand_bucket", "maand_job", "maand_target", "maand_job_workers", "maand_health_check",
                       "maand_wait_seconds", "maand_job_all_at_once"),
    "maand.core.health_check": ("maand_jobs", "maand_wait", "maand_wait_seconds", "maand_format"),
    "maand.core.run_command": ("maand_cmd", "maand_workers", "maand_labels", "maand_batch", "maand_health_check",
                               "maand_health_check_delay", "maand_wait_seconds"),
    "maand.core.gc": ("maand_retain_days", "maand_departed", "maand_departed_forget", "maand_format"),
    "maand.core.status": ("maand_jobs", "maand_format", "maand_status_timeout"),
    "maand.core.job_create": ("maand_bucket", "maand_job"),
    "maand.core.state": ("maand_bucket", "maand_state_to", "maand_force"),
    "maand.core.init": ("maand_bucket",),
    "maand.core.job_command": ("maand_bucket", "maand_command", "maand_job", "maand_command_concurrency",
                               "maand_hook_timeout", "maand_deploy_output_tail"),
}


def unknown_extra_vars(extra_vars: Mapping, known: Iterable[str], playbook: str,
                       others: Iterable[str] = ()) -> list[str]:
    """One message per maand_* extra var that `playbook` does not read and that is not in `others`, sorted."""
    known = sorted(set(known) | set(COMMON_VARS))
    skip = set(others)
    return ["the extra var %s is not read by %s%s; it reads: %s"
            % (name, playbook, did_you_mean(name, known), ", ".join(known))
            for name in sorted(n for n in extra_vars if isinstance(n, str) and n.startswith(PREFIX))
            if name not in known and name not in skip]


def allows_unknown(extra_vars: Mapping) -> bool:
    """-e maand_allow_unknown_vars=true: an unknown maand_ var is a warning, not a refusal."""
    value = extra_vars.get(ALLOW_UNKNOWN)
    return value is True or str(value).strip().lower() in ("true", "yes", "1", "on")


def known_vars(playbook: str, deploy_vars: Iterable[str] = ()) -> tuple:
    """The maand_ extra vars `playbook` reads: its row of PLAYBOOK_VARS (the deploy: `deploy_vars`, its role's
    options, and DEPLOY_VARS), with COMMON_VARS."""
    if playbook == DEPLOY:
        names = set(deploy_vars) | set(DEPLOY_VARS)
    else:
        names = set(PLAYBOOK_VARS.get(playbook) or ())
    return tuple(sorted(names | set(COMMON_VARS)))


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What the check of a run's extra vars says: one message per unknown maand_ var, and whether the run
    is refused (else they are warnings)."""

    messages: tuple
    refused: bool

    @property
    def text(self) -> str:
        if self.refused:
            return ("nothing was run: %s (fix: correct the name; or pass -e %s=true to run with it ignored, for "
                    "a workflow that passes one set of extra vars to every playbook)"
                    % ("; ".join(self.messages), ALLOW_UNKNOWN))
        return "; ".join(self.messages)

    @property
    def warnings(self) -> list:
        return [] if self.refused else ["%s (ignored)" % m for m in self.messages]


def check(extra_vars: Mapping, known: Iterable[str], playbook: str, refuse: bool = True) -> Verdict:
    """The verdict on a run's extra vars: an unknown maand_ var refuses the run, unless `refuse` is false or the
    run passes maand_allow_unknown_vars=true (then it is a warning)."""
    messages = tuple(unknown_extra_vars(extra_vars, known, playbook))
    return Verdict(messages, bool(messages) and refuse and not allows_unknown(extra_vars))


# The deploy's own vars are its role's options (roles/deploy/meta/argument_specs.yml, read by the adapter at run
# time); these are known even where that file cannot be read (known_vars adds them to the role's).
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
