# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument specs of maand.core's action plugins: one code source, shared pieces composed per action.

Each shared piece has a documentation twin in plugins/doc_fragments/ (named beside it), which the doc-only
module files under plugins/modules/ extend; each action's own options are documented in its module file.
tests/unit/plugins/test_action_specs.py checks that every action's spec agrees with its documentation once
the fragments are applied (types, defaults, required, choices, elements). An action reads its spec with
``ARGUMENT_SPEC = specs.spec_for("<action>")``.
"""

from __future__ import annotations

import copy

from ..hooks.run import DEFAULT_TAIL, DEFAULT_TIMEOUT


def opt(type_: str, **more) -> dict:
    """One option: its type, then required / default / choices / elements."""
    return dict(type=type_, **more)


def str_list(**more) -> dict:
    return opt("list", elements="str", **more)


BUCKET = {"bucket": opt("path", required=True)}  # doc fragment maand.core.bucket
BUCKET_CWD = {"bucket": opt("path", default=".")}  # maand.core.bucket.cwd
BUCKET_ID = {"bucket_id": opt("str", required=True)}  # maand.core.bucket.id
COMMAND_LIMITS = {"timeout": opt("int", default=DEFAULT_TIMEOUT),  # maand.core.command_limits
                  "tail": opt("int", default=DEFAULT_TAIL)}
DEPLOY_RUN = {"run_dir": opt("path", required=True), "step": opt("raw", required=True)}  # maand.core.deploy_role.step
JOBS_FILTER = {"jobs": opt("raw", default=[])}  # maand.core.scope.jobs
PLAY_HOSTS = {"hosts": str_list(required=True)}  # maand.core.scope


def compose(*pieces: dict, **options: dict) -> dict:
    """The spec made of shared pieces and an action's own options; a name given twice is a mistake."""
    spec: dict = {}
    for piece in pieces + (options,):
        for name, option in piece.items():
            if name in spec:
                raise ValueError("argument spec: option %r given twice" % name)
            spec[name] = option
    return spec


SPECS = {
    "build": compose(BUCKET_CWD, table_limit=opt("int", default=200), new_bucket_id=opt("bool"), strict=opt("bool"),
                     purge_job_kv=opt("bool"), allow_remove_all=opt("bool")),
    "cat": compose(BUCKET_CWD, view=opt("str", required=True), jobs=str_list(default=[]),
                   workers=str_list(default=[]), reveal=opt("bool", default=False), deleted=opt("bool", default=False),
                   active=opt("bool", default=False), namespace=opt("str", default=""), key=opt("str", default=""),
                   file=opt("str", default=""), scrape=opt("bool", default=False)),
    "cert_metrics": compose(BUCKET_CWD, best_effort=opt("bool", default=False)),
    "deploy_agent": compose(DEPLOY_RUN, BUCKET, COMMAND_LIMITS, host=opt("str", required=True),
                            verify_host=opt("bool", default=True)),
    "deploy_diff": compose(BUCKET_ID, host=opt("str", required=True), content_diff=opt("dict", required=True)),
    "deploy_finish": compose(BUCKET, plan=opt("dict", required=True), run_dir=opt("str", default=""),
                             release=opt("bool", default=True)),
    "deploy_job": compose(BUCKET_ID, COMMAND_LIMITS, job=opt("str", required=True), target=opt("str", required=True),
                          version=opt("str", default="0.0.0"), run_id=opt("str", default="")),
    "deploy_lock": compose(BUCKET, state=opt("str", default="present", choices=["present", "absent"]),
                           adopt_bucket_id=opt("str", default=""), wait=opt("float", default=0),
                           run_key=opt("str", default=""), workflow_id=opt("str", default=""),
                           job_id=opt("str", default=""), slice_wait=opt("float", default=120),
                           inventory_hosts=opt("list", elements="str")),
    "deploy_plan": compose(BUCKET, PLAY_HOSTS, jobs=opt("raw"), force=opt("bool", default=False),
                           sync_only=opt("bool", default=False), state_var=opt("str", default="deploy_state_read"),
                           adopt_bucket_id=opt("str", default=""), slots=opt("int", default=0), rollback=opt("raw"), promote=opt("raw"),
                           plan_hash=opt("str", default=""), target=opt("str", default=""),
                           target_workers=opt("raw"), slice=opt("dict")),
    "deploy_state": compose(BUCKET_ID, status=opt("bool", default=False)),
    "deploy_step": compose(DEPLOY_RUN),
    "explain": compose(BUCKET_CWD, job=opt("str"), workers=str_list(),
                       show=opt("str", default="all", choices=["all", "placed", "rejected"]),
                       limit=opt("int", default=0), deprecated_vars=str_list(default=[])),
    "gc": compose(BUCKET, step=opt("str", required=True, choices=["targets", "plan", "commit"]),
                  hosts=str_list(default=[]), retain_days=opt("raw"), departed=opt("raw"), forget=opt("raw"),
                  plan=opt("dict"), states=opt("dict", default={}), deleted=opt("dict", default={})),
    "preflight": compose(known=str_list(), playbook=opt("str", required=True), refuse=opt("bool", default=True),
                         inventory=opt("bool", default=False), workers=opt("bool", default=False)),
    "health_check": compose(BUCKET, PLAY_HOSTS, JOBS_FILTER, COMMAND_LIMITS, wait=opt("bool", default=False),
                            wait_seconds=opt("float", default=0), workers_check=opt("bool", default=True)),
    "job_command": compose(BUCKET, COMMAND_LIMITS, command=opt("str", required=True), job=opt("str", default=""),
                           concurrency=opt("int", default=1),
                           event=opt("str", default="cli", choices=["cli", "job_control"]),
                           target=opt("str", default=""), workers=str_list(default=[])),
    "info": compose(BUCKET_CWD, format=opt("str", default="table", choices=["table", "json"])),
    "job_create": compose(BUCKET, job=opt("str", required=True)),
    "job_logs": compose(BUCKET, step=opt("str", required=True, choices=["select", "report"]), job=opt("str", default=""),
                        workers=str_list(default=[]), lines=opt("raw"), hosts=str_list(default=[]),
                        answers=opt("dict", default={})),
    "logs": compose(BUCKET_CWD, run=opt("str", default=""), jobs=str_list(default=[]), workers=str_list(default=[]),
                    limit=opt("int", default=20), format=opt("str", default="", choices=["", "table", "json", "raw", "human"]),
                    phase=opt("str", default=""), event=opt("str", default=""), tail=opt("int", default=0)),
    "run_command": compose(step=opt("str", required=True, choices=["select", "report", "health"]), cmd=opt("raw"),
                           label=opt("str", default=""), bucket=opt("path"),
                           workers=opt("raw"), labels=opt("raw"), catalog_workers=str_list(default=[]),
                           hosts=str_list(default=[]), chosen=str_list(default=[]), batch=opt("raw"),
                           health_check_delay=opt("raw", default=10), answers=opt("dict", default={}),
                           health=opt("dict", default={}), run_id=opt("str", default="")),
    "state": compose(BUCKET, to=opt("str", required=True), force=opt("bool", default=False)),
    "status": compose(BUCKET, JOBS_FILTER, answers=opt("dict", required=True), format=opt("str", default="table")),
    "status_worker": compose(jobs=str_list(default=[]), timeout=opt("int", default=60), slots=opt("int", default=4)),
    "worker_sync": compose(BUCKET, PLAY_HOSTS, job=opt("str", required=True), workers=str_list(default=[]),
                           answers=opt("dict", required=True), verb=opt("str", default="maand.core.job")),
    "workers_file": compose(BUCKET, operation=opt("str", default="write", choices=["load", "write"]),
                            labels=opt("raw"), hosts=opt("raw"), results=opt("dict"), failed=opt("raw")),
}


def spec_for(action: str) -> dict:
    """A fresh copy of an action's argument spec (Ansible may keep what it is given; the defaults are lists)."""
    return copy.deepcopy(SPECS[action])
