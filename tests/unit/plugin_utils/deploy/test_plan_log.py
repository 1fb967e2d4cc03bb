"""The deploy's plan events in the bucket logs (deploy/service._log_plan): a removed worker's purge row has no job,
and must neither break the plan nor be logged as a job."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.deploy import service


def test_a_purge_row_without_a_job_is_not_a_job_of_the_logs(tmp_path):
    (tmp_path / "logs").mkdir()
    plan = {"update_seq": 3, "rows": [
        {"job": "api", "worker": "10.0.0.1", "action": "skip", "state": "active"},
        {"job": None, "worker": "10.0.0.9", "action": "purge", "state": "removed"},
    ]}
    warned = []
    service._log_plan(str(tmp_path), plan, str(tmp_path / "20261207T000000.000-1-abcdef"), warned.append)
    text = (tmp_path / "logs" / "maand.log").read_text()
    assert not warned
    assert "event=deploy_skip" in text and "job=api" in text and "None" not in text
