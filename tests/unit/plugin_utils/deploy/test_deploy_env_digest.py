"""Environment digests in the deploy's content are HMACs keyed from the bucket's KV key (security review 4, L8):
through deploy/service's fold of every job's environment, as the plan and rerender use it."""

from __future__ import annotations

import json
import os

from ansible_collections.maand.core.plugins.plugin_utils.deploy import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.kv import secrets as _secrets


def _catalog():
    spec = {"environment": [{"vars": {"DB": "$env{L8_TEST_DB}"}, "origin": "workspace/jobs/api/manifest.json"}]}
    return {"bucket_id": "b-1", "jobs": [{"name": "api", "spec": spec}]}


def _content():
    return {"api": {"hash": "h", "files": {"Makefile": "abc"}}}


def _fold(bucket, check_mode=False):
    content = _content()
    assert _service._with_environments(_catalog(), content, str(bucket), check_mode) == []
    return content["api"]["files"][".maand-env/DB"]


def test_digests_follow_the_kv_key_and_never_carry_the_value(tmp_path, monkeypatch):
    monkeypatch.delenv(_secrets.KEY_ENV, raising=False)
    monkeypatch.delenv(_secrets.KEY_FILE_ENV, raising=False)
    monkeypatch.setenv("L8_TEST_DB", "hunter2")
    one, two = tmp_path / "one", tmp_path / "two"
    assert _fold(one, check_mode=True) and not os.path.exists(_secrets.key_path(str(one)))  # --check writes no key
    _secrets.load_key(str(one), create=True)  # as build makes it (catalog/service._env_key)
    _secrets.load_key(str(two), create=True)
    first = _fold(one)
    assert _fold(one) == first  # stable between deploys of the same bucket
    assert _fold(two) != first  # another bucket key, another digest: no public-salt hash to test guesses
    assert "hunter2" not in json.dumps(first)


def test_the_deploy_never_makes_the_kv_key_it_names_the_build_that_does(tmp_path, monkeypatch):
    monkeypatch.delenv(_secrets.KEY_ENV, raising=False)
    monkeypatch.delenv(_secrets.KEY_FILE_ENV, raising=False)
    monkeypatch.setenv("L8_TEST_DB", "hunter2")
    errors = _service._with_environments(_catalog(), _content(), str(tmp_path))
    assert len(errors) == 1 and "secrets/kv.key is missing; run ansible-playbook maand.core.build" in errors[0]
    assert not os.path.exists(_secrets.key_path(str(tmp_path))) and "hunter2" not in errors[0]


def test_an_unreadable_kv_key_is_an_error_naming_the_job(tmp_path, monkeypatch):
    monkeypatch.delenv(_secrets.KEY_FILE_ENV, raising=False)
    monkeypatch.setenv(_secrets.KEY_ENV, "not base64!")
    monkeypatch.setenv("L8_TEST_DB", "hunter2")
    errors = _service._with_environments(_catalog(), _content(), str(tmp_path))
    assert len(errors) == 1 and errors[0].startswith("job api: the environment digests need the bucket's KV key: ")
    assert "hunter2" not in errors[0]
