# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The worker's folder layout, as maand lays it out, for the controller side (stdlib only).

    /opt/worker/<bucket_id>/                    the bucket root on a worker (maand's)
    /opt/worker/<bucket_id>/jobs/<job>/         one job's tree; data/ and logs/ survive every deploy
    /opt/worker/<bucket_id>/jobs/<job>/certs/   the job's certificates (certs/<name>.crt, .key, ca.crt)
    /opt/worker/.maand/agent-<sha12>.py         the worker agent, named by its content and its sandbox's
    /opt/worker/.maand/sandbox-<sha12>.py       beside it: how the agent runs make (the same sha12)
    /opt/worker/.maand/errors-<sha12>.py        beside it: the error family's base the sandbox derives

The agent (agent.py, sandbox.py) and the hooks' maand module (maand_helper.py) are shipped as files of
their own and spell the same paths out themselves; tests/unit/plugin_utils/worker/test_layout.py checks
they agree.
"""

from __future__ import annotations

from . import agent

WORKER_ROOT = "/opt/worker"
AGENT_DIR = WORKER_ROOT + "/.maand"
CERTS_DIR = "certs"
KEEP = agent.KEEP  # a job's folders no deploy deletes: data/, logs/
ENV_PREFIX = agent.ENV_PREFIX
MAX_FILE_BYTES = agent.MAX_FILE_BYTES


def bucket_root(bucket_id: str) -> str:
    """/opt/worker/<bucket_id>"""
    return "%s/%s" % (WORKER_ROOT, bucket_id)


def job_root(bucket_id: str, job: str) -> str:
    """/opt/worker/<bucket_id>/jobs/<job>"""
    return "%s/jobs/%s" % (bucket_root(bucket_id), job)
