# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``maand.core.job_create``: a new job's starter files (pure, no Ansible imports).

The job builds and deploys as it is: manifest.json (version, selectors, one pool port ``<job>_port``
and a health check on it), an idempotent Makefile (a start that is safe to retry: it checks its pid
file), a config template that reads the pool port from the KV, and a tiny stdlib HTTP server that
listens on it (the last three are files/job_create/ of the collection, read when a job is created).
An existing job folder is never touched.
"""

from __future__ import annotations

import json
import os
import re

from ..errors import MaandError

NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}\Z")


class ScaffoldError(MaandError):
    """The job cannot be created; the message names the file or value and the fix."""


def port_name(job: str) -> str:
    return "%s_port" % job


def manifest(job: str) -> str:
    port = port_name(job)
    data = {
        "version": "1.0.0",
        "selectors": ["worker"],
        "resources": {"ports": {port: {}}},
        "health_check": {
            "checks": [{"type": "tcp", "port": port}, {"type": "http", "port": port, "path": "/health"}],
            "timeout_seconds": 2,
            "wait": {"attempts": 30, "interval_seconds": 1},
        },
    }
    return json.dumps(data, indent=2) + "\n"


# The starter files (files/job_create/ of the collection) and their names in the new job's folder; in them
# @job@ stands for the job's name, @port@ for its pool port's name and @env@ for that port's make variable.
STARTER_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                           "files", "job_create")
STARTERS = {"Makefile": "Makefile", "job.conf.tpl": "{job}.conf.tpl", "server.py": "server.py"}
_TOKEN = re.compile(r"@(job|port|env)@")


def starter(name: str, job: str) -> str:
    """The starter file ``name`` of files/job_create/ filled in for ``job``."""
    path = os.path.join(STARTER_DIR, name)
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            text = handle.read()
    except OSError as exc:
        raise ScaffoldError("cannot read the starter file %s (%s): the maand.core install is incomplete; "
                            "reinstall the collection" % (path, exc.strerror or exc)) from None
    values = {"job": job, "port": port_name(job), "env": port_name(job).upper()}
    return _TOKEN.sub(lambda match: values[match.group(1)], text)


def files(job: str) -> dict[str, str]:
    """Relative path -> content of the new job's files."""
    found = {"manifest.json": manifest(job)}
    for name, target in STARTERS.items():
        found[target.format(job=job)] = starter(name, job)
    return found


def check(bucket: str, job: str) -> str:
    """The new job's folder; ScaffoldError when the name, the bucket or an existing folder forbids it."""
    if not isinstance(job, str) or not job.strip():
        raise ScaffoldError("name the job: -e maand_job=<name> (lower-case letters, digits and _)")
    if not NAME.match(job):
        raise ScaffoldError("maand_job=%s: job_create needs a name of lower-case letters, digits and _ starting "
                            "with a letter (its pool port is named %s_port, a KV key and a make variable); "
                            "pick another name" % (job, job.lower()))
    workspace = os.path.join(bucket, "workspace")
    if not os.path.isdir(workspace):
        raise ScaffoldError("%s is not a maand bucket (no workspace/ folder): create one with "
                            "`ansible-playbook maand.core.init -e maand_bucket=DIR`, or pass -e maand_bucket=DIR"
                            % bucket)
    folder = os.path.join(workspace, "jobs", job)
    if os.path.lexists(folder):
        raise ScaffoldError("job %s already exists: %s; nothing was written (job_create never overwrites a job: "
                            "pick another name or edit its files)" % (job, folder))
    return folder


def create(bucket: str, job: str) -> list[str]:
    """Write the job's files (the folder is created first, exclusively); returns their paths."""
    folder = check(bucket, job)
    contents = files(job)
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    try:
        os.mkdir(folder, 0o755)
    except FileExistsError:
        raise ScaffoldError("job %s already exists: %s; nothing was written" % (job, folder)) from None
    written = []
    for rel, text in contents.items():
        path = os.path.join(folder, rel)
        with open(path, "x", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(path, 0o644)
        written.append(path)
    return written
