"""`arch` as a hardware constraint (Juju's arch=amd64|arm64|..., juju.is/docs constraint "arch"),
matched against the worker's `arch` in workers.json (what maand.core.facts probes with uname -m)."""

import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.placement.hardware import (
    HardwareError, HardwareIndex, format_hardware, hardware_mask, hardware_shortfalls, merge_hardware, normalize_arch,
    parse_hardware,
)
from tests.bucket_factory import write
from tests.maand_init import init_bucket, job, ws


@pytest.mark.parametrize("raw, name", [("amd64", "amd64"), ("x86_64", "amd64"), ("AARCH64", "arm64"),
                                       (" arm64 ", "arm64"), ("armv7l", "armhf"), ("i686", "i386"),
                                       ("ppc64le", "ppc64el"), ("s390x", "s390x"), ("riscv64", "riscv64")])
def test_normalize_arch(raw, name):
    assert normalize_arch(raw) == name


@pytest.mark.parametrize("raw", ["mips", "amd 64", 64, ["amd64"]])
def test_unknown_arch_is_an_error_naming_the_path(raw):
    with pytest.raises(HardwareError) as info:
        parse_hardware({"arch": raw}, "jobs.api.hardware")
    assert info.value.errors[0][0] == "$.jobs.api.hardware.arch"


def test_parse_string_and_object_forms_and_round_trip():
    assert parse_hardware("mem=3G arch=arm64") == {"mem": 3072.0, "arch": "arm64"}
    assert parse_hardware({"arch": "x86_64", "cores": 2}) == {"arch": "amd64", "cores": 2}
    hw = merge_hardware(parse_hardware("arch=amd64 cores=2"), {})
    assert parse_hardware(format_hardware(hw)) == hw == {"cores": 2, "arch": "amd64"}


def test_job_resets_the_bucket_arch():
    bucket = parse_hardware("arch=amd64 mem=1G")
    assert merge_hardware(bucket, parse_hardware({"arch": ""})) == {"mem": 1024.0}
    assert merge_hardware(bucket, parse_hardware({"arch": "arm64"}))["arch"] == "arm64"


FLEET = [{"arch": "amd64"}, {"arch": "aarch64"}, {"arch": None}, {"arch": "x86_64", "cores": 1}, {"arch": "mips"}]


@pytest.mark.parametrize("hw, expected", [
    ({"arch": "amd64"}, [0, 3]), ({"arch": "arm64"}, [1]), ({"arch": "s390x"}, []),
    ({"arch": "amd64", "cores": 2}, []), ({}, [0, 1, 2, 3, 4]),
])
def test_mask(hw, expected):
    hx = HardwareIndex(FLEET)
    mask = hardware_mask(hw, hx, (1 << len(FLEET)) - 1)
    assert [i for i in range(len(FLEET)) if mask >> i & 1] == expected


def test_shortfalls_say_why():
    assert hardware_shortfalls({"arch": "arm64"}, {"arch": "x86_64"}) == ["arch amd64 != arm64"]
    assert hardware_shortfalls({"arch": "arm64"}, {"arch": "aarch64"}) == []
    assert "arch unknown" in hardware_shortfalls({"arch": "arm64"}, {})[0]


def test_build_places_by_arch_and_explains(tmp_path):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", [{"host": "10.0.0.1", "arch": "x86_64"}, {"host": "10.0.0.2", "arch": "aarch64"},
                              {"host": "10.0.0.3"}])
    job(root, "arm", {"selectors": ["worker"], "hardware": {"arch": "arm64"}})
    job(root, "any", {"selectors": ["worker"]})
    write(os.path.join(root, "maand.conf"), 'hardware = "arch=amd64"\n')
    job(root, "bucketwide", {"selectors": ["worker"]})
    result = _service.compute(root)
    assert result.report.ok, [str(p) for p in result.report.errors]
    placed = {(a["job"], a["worker"]) for a in result.catalog["allocations"]}
    assert placed == {("arm", "10.0.0.2"), ("any", "10.0.0.1"), ("bucketwide", "10.0.0.1")}
    assert [w["arch"] for w in result.catalog["workers"]] == ["amd64", "arm64", None]


def test_unknown_worker_arch_warns_and_matches_nothing(tmp_path):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", [{"host": "10.0.0.1", "arch": "MIPS"}])
    job(root, "a", {"selectors": ["worker"], "hardware": "arch=amd64"})
    result = _service.compute(root)
    assert any(w.field == "[0].arch" and "'MIPS'" in w.message for w in result.report.warnings)
    assert result.catalog["allocations"] == []
