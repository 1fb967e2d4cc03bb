"""A manifest key within two edits of a known one is an error (issue 31 item 3): "helth_check" would deploy the
job with no gate, "selector" on no worker. maand.conf `near_miss_keys = "warn"` opts out; other unknown keys stay
warnings (maand tolerates them)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import problems, schemas
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service
from tests.maand_init import init_bucket, job, ws


@pytest.mark.parametrize("a, b, distance", [
    ("helth_check", "health_check", 1), ("tpye", "type", 1), ("kitten", "sitting", 3), ("", "ab", 2),
    ("selector", "selectors", 1), ("same", "same", 0), ("ab", "ba", 1), ("abcdef", "", 6),
])
def test_edit_distance(a, b, distance):
    assert problems.edit_distance(a, b) == distance
    assert problems.edit_distance(b, a) == distance


def test_edit_distance_stops_early_past_a_limit():
    assert problems.edit_distance("a" * 40, "b" * 40, limit=2) == 3
    assert problems.edit_distance("abc", "abcdefgh", limit=2) == 3


@pytest.mark.parametrize("name, known, meant", [
    ("helth_check", schemas.MANIFEST_KEYS, "health_check"),
    ("selector", schemas.MANIFEST_KEYS, "selectors"),
    ("max_concurent_starts", schemas.MANIFEST_KEYS, "max_concurrent_starts"),
    ("owner", schemas.MANIFEST_KEYS, None),   # 3 edits from "user": a key of the user's own
    ("id", ("ip",), None),                    # short keys are never each other's typos
    ("gpu", ("cpu",), "cpu"),
    (7, ("cpu",), None),
])
def test_near_miss(name, known, meant):
    assert problems.near_miss(name, known) == meant


def test_every_schema_property_is_a_known_key():
    """The typo check takes its known keys from MANIFEST_KNOWN: a field the schema adds must be listed there
    too, or its every use would be a warning (and a field within two edits of it an error)."""
    assert set(schemas.MANIFEST["properties"]) <= set(schemas.MANIFEST_KNOWN[""])


def _errors(root):
    report = service.compute(root).report
    return [str(p) for p in report.errors], [str(p) for p in report.warnings]


def _bucket(tmp_path, manifest, conf=""):
    root = init_bucket(tmp_path)
    if conf:
        with open(root + "/maand.conf", "a", encoding="utf-8") as handle:
            handle.write(conf)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    job(root, "a", json.dumps(manifest))
    return root


def test_a_near_miss_is_an_error_naming_the_key_meant_and_the_opt_out(tmp_path):
    root = _bucket(tmp_path, {"selectors": ["worker"], "helth_check": {"checks": []}, "owner": "me",
                              "health_check": {"wait": {"atempts": 3}}})
    errors, warnings = _errors(root)
    assert ("ErrInvalidManifest: workspace/jobs/a/manifest.json: helth_check: unknown key 'helth_check' is 1 edit "
            "from the known key 'health_check': it would be ignored (fix: rename it \"health_check\"; or, if "
            "'helth_check' is meant as it is, set near_miss_keys = \"warn\" in maand.conf)") in errors, errors
    assert any("health_check.wait.atempts: unknown key 'atempts' is 1 edit from the known key 'attempts'" in e
               for e in errors), errors
    assert any("owner: unknown key 'owner' is ignored" in w for w in warnings), warnings
    assert not service.build(root).written


def test_the_bucket_opts_out_in_maand_conf(tmp_path):
    root = _bucket(tmp_path, {"selectors": ["worker"], "helth_check": {}}, conf='near_miss_keys = "warn"\n')
    errors, warnings = _errors(root)
    assert errors == [], errors
    assert any("unknown key 'helth_check' is ignored (did you mean \"health_check\"?)" in w for w in warnings)


def test_a_bad_opt_out_value_is_refused(tmp_path):
    root = _bucket(tmp_path, {"selectors": ["worker"]}, conf='near_miss_keys = "off"\n')
    errors, dummy = _errors(root)
    assert any("maand.conf: near_miss_keys: expected \"error\" or \"warn\", got off" in e for e in errors), errors
