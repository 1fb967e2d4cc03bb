"""The model's records are typed dataclasses (issue 9, item 5) and the loaders set every field."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.bucket.model import Command, Job, Worker
from tests.bucket_factory import make_bucket


@pytest.mark.parametrize("cls", [Worker, Job, Command])
def test_records_are_dataclasses_with_typed_fields(cls):
    assert dataclasses.is_dataclass(cls)
    assert all(f.type for f in dataclasses.fields(cls))


def test_loaders_set_every_field(tmp_path):
    make_bucket(tmp_path, [{"host": "10.0.0.1", "labels": ["web"], "memory": "1 gb"}], {"api": {"selectors": ["web"]}},
                maand_conf='ssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 22\nuse_sudo = false\n')
    result = _service.compute(str(tmp_path))
    assert result.report.ok, result.report.error_text()
    worker, job = result.bucket.workers[0], result.bucket.jobs["api"]
    for record in (worker, job):
        for f in dataclasses.fields(record):
            getattr(record, f.name)  # AttributeError if a loader left a field unset
    assert repr(worker).startswith("Worker(host='10.0.0.1'")
