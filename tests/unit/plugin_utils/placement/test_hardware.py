"""Juju-style hardware constraints: parse_hardware, merge_hardware, hardware_mask, hardware_shortfalls."""

import random
import time

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.errors import MaandError
from ansible_collections.maand.core.plugins.plugin_utils.placement.hardware import (
    HardwareError, HardwareIndex, format_hardware, hardware_mask, hardware_maxima, hardware_shortfalls, merge_hardware,
    parse_hardware,
)


def test_parse_string_form_seed_example():
    assert parse_hardware("mem=3G cores=2 storage=20G cpu=2000") == {
        "mem": 3072.0, "cores": 2, "storage": 20480.0, "cpu": 2000.0}


def test_parse_object_form():
    assert parse_hardware({"mem": "3G", "cores": 2}) == {"mem": 3072.0, "cores": 2}


@pytest.mark.parametrize("raw, mb", [
    ("512", 512.0), (512, 512.0), (1.5, 1.5), ("512M", 512.0), ("512m", 512.0), ("512MB", 512.0),
    ("3G", 3072.0), ("3g", 3072.0), ("3gb", 3072.0), ("3 GB", 3072.0), ("3 gb", 3072.0), ("1.5G", 1536.0),
    ("1T", 1048576.0), ("2tb", 2097152.0), (".5G", 512.0), (" 3G ", 3072.0),
])
def test_memory_units(raw, mb):
    assert parse_hardware({"mem": raw}) == {"mem": mb}
    assert parse_hardware({"storage": raw}) == {"storage": mb}


@pytest.mark.parametrize("raw, mhz", [
    ("2000", 2000.0), (2000, 2000.0), ("2000mhz", 2000.0), ("2.5GHz", 2500.0), ("2.5 ghz", 2500.0),
    ("1thz", 1e6),
])
def test_cpu_units(raw, mhz):
    assert parse_hardware({"cpu": raw}) == {"cpu": mhz}


def test_units_with_space_in_string_form():
    assert parse_hardware("mem=3 gb cpu=2.5 GHz cores=4") == {"mem": 3072.0, "cpu": 2500.0, "cores": 4}


def test_alias_zero_max_and_empty():
    assert parse_hardware("ram=1G") == {"mem": 1024.0}
    assert parse_hardware({"RAM": "1G"}) == {"mem": 1024.0}
    assert parse_hardware("mem=0 cores=0") == {"mem": 0.0, "cores": 0}
    assert parse_hardware("mem=max cpu=MAX cores=max storage=max") == {
        "mem": "max", "cpu": "max", "cores": "max", "storage": "max"}
    assert parse_hardware("mem= cores=2") == {"mem": None, "cores": 2}
    assert parse_hardware({"mem": None, "cpu": ""}) == {"mem": None, "cpu": None}
    assert parse_hardware(None) == {}
    assert parse_hardware("") == {}
    assert parse_hardware({}) == {}
    assert parse_hardware({"cores": "3"}) == {"cores": 3}
    assert parse_hardware({"cores": 3.0}) == {"cores": 3}


def hw_errors(value, path="hardware"):
    with pytest.raises(HardwareError) as ei:
        parse_hardware(value, path)
    assert isinstance(ei.value, MaandError)  # the core's one error family
    assert str(ei.value) == "\n".join(f"{p}: {m}" for p, m in ei.value.errors)
    return ei.value.errors


@pytest.mark.parametrize("value, path, fragment", [
    ("disk=3G", "$.hardware.disk", "unknown hardware key 'disk'"),
    ({"gpu": 1}, "$.hardware.gpu", "unknown hardware key"),
    ("mem=3G mem=4G", "$.hardware.mem", "duplicate key 'mem'"),
    ("mem=3G ram=4G", "$.hardware.ram", "duplicate key 'ram': mem is already set"),
    ({"mem": "1G", "ram": "2G"}, "$.hardware.ram", "duplicate key"),
    ("mem=-1", "$.hardware.mem", "must not be negative"),
    ({"mem": -1}, "$.hardware.mem", "must not be negative"),
    ({"cpu": -0.5}, "$.hardware.cpu", "must not be negative"),
    ("mem=lots", "$.hardware.mem", "bad value 'lots'"),
    ("mem=3X", "$.hardware.mem", "bad unit 'x'"),
    ("mem=3ghz", "$.hardware.mem", "bad unit 'ghz'"),
    ("cpu=3G", "$.hardware.cpu", "bad unit 'g'"),
    ("cores=1.5", "$.hardware.cores", "whole number"),
    ("cores=2G", "$.hardware.cores", "whole number"),
    ({"cores": True}, "$.hardware.cores", "boolean"),
    ({"mem": float("nan")}, "$.hardware.mem", "finite"),
    ({"mem": float("inf")}, "$.hardware.mem", "finite"),
    ({"mem": [1]}, "$.hardware.mem", "expected a number or a string"),
    ("mem 3G", "$.hardware", "expected key=value"),
    ("=3G", "$.hardware", "expected key=value"),
    ("mem=3G,cores=2", "$.hardware.mem", "separate key=value pairs with spaces"),
    (5, "$.hardware", "expected a string"),
    (["mem=3G"], "$.hardware", "expected a string"),
])
def test_errors(value, path, fragment):
    errs = hw_errors(value)
    assert errs[0][0] == path
    assert fragment in errs[0][1]


def test_all_errors_collected_and_path_argument():
    errs = hw_errors("mem=-1 disk=2 cores=x cpu=1G junk", "$.jobs.api.hardware")
    assert [p for p, dummy in errs] == ["$.jobs.api.hardware", "$.jobs.api.hardware.mem",
                                        "$.jobs.api.hardware.disk", "$.jobs.api.hardware.cores",
                                        "$.jobs.api.hardware.cpu"]
    assert hw_errors({"x": 1}, "buckets.hardware")[0][0] == "$.buckets.hardware.x"


def test_merge():
    bucket = parse_hardware("mem=4G cores=2 cpu=1000")
    assert merge_hardware(bucket, parse_hardware("mem=8G")) == {"mem": 8192.0, "cpu": 1000.0, "cores": 2}
    assert merge_hardware(bucket, parse_hardware("mem=")) == {"cpu": 1000.0, "cores": 2}   # "" -> default
    assert merge_hardware(bucket, {"cores": None}) == {"mem": 4096.0, "cpu": 1000.0}       # null -> default
    assert merge_hardware(bucket, parse_hardware("cpu=0")) == {"mem": 4096.0, "cores": 2}  # 0 = don't care
    assert merge_hardware(bucket, parse_hardware("cores=max")) == {"mem": 4096.0, "cpu": 1000.0, "cores": "max"}
    assert merge_hardware(None, None) == {}
    assert merge_hardware(parse_hardware("mem= cores=0"), None) == {}
    assert merge_hardware(None, {"storage": 10.0}) == {"storage": 10.0}
    assert merge_hardware(bucket, None) == {"mem": 4096.0, "cpu": 1000.0, "cores": 2}


def test_format_round_trip():
    hw = {"mem": 3072.0, "cpu": 2500.5, "cores": "max", "storage": 0.0}
    assert format_hardware(hw) == "mem=3072 cpu=2500.5 cores=max storage=0"
    assert parse_hardware(format_hardware(hw)) == hw


def R(mem=None, cpu=None, cores=None, storage=None):
    return {"memory_mb": mem, "cpu_mhz": cpu, "cores": cores, "storage_mb": storage}


WORKERS = [
    R(2048, 3000, 4, None),     # 0
    R(8192, 2000, 1, 50000),    # 1
    R(8192, 3000, 8, 10000),    # 2
    R(None, None, None, None),  # 3: nothing known
    R(16384, 1000, 2, 90000),   # 4
]
ALL5 = 0b11111


def bits(m):
    return [i for i in range(len(WORKERS)) if m >> i & 1]


@pytest.fixture(scope="module")
def hx():
    return HardwareIndex(WORKERS)


@pytest.mark.parametrize("hw, cands, want", [
    ({}, ALL5, [0, 1, 2, 3, 4]),
    ({"mem": 3072.0}, ALL5, [1, 2, 4]),
    ({"mem": 8192.0}, ALL5, [1, 2, 4]),                 # >= is enough
    ({"mem": 0.0, "cores": 0}, ALL5, [0, 1, 2, 3, 4]),   # 0 = don't care, even for unknowns
    ({"cores": 2, "cpu": 2000.0}, ALL5, [0, 2]),
    ({"storage": 1.0}, ALL5, [1, 2, 4]),                 # unknown storage never satisfies
    ({"mem": 3072.0}, 0b00011, [1]),                     # only candidates
    ({"mem": "max"}, ALL5, [4]),
    ({"mem": "max"}, 0b00111, [1, 2]),                   # max among the candidates passed in; ties kept
    ({"mem": "max", "cores": 4}, ALL5, [2]),             # max among those meeting the minimums
    ({"mem": "max", "cpu": "max"}, 0b00111, [2]),        # both greatest at once
    ({"mem": "max", "cpu": "max"}, ALL5, []),            # 4 has most mem, 0/2 most cpu: unsatisfiable
    ({"storage": "max"}, 0b01001, []),                   # no known value among candidates
    ({"mem": "max"}, 0, []),
])
def test_hardware_mask(hx, hw, cands, want):
    assert bits(hardware_mask(hw, hx, cands)) == want


def test_shortfalls_messages(hx):
    hw = {"mem": 3072.0, "cores": 2, "storage": 20.0, "cpu": 2500.0}
    assert hardware_shortfalls(hw, WORKERS[0]) == [
        "mem 2048 MB < 3072 MB", "storage unknown (workers.json has no storage)"]
    assert hardware_shortfalls(hw, WORKERS[1]) == ["cpu 2000 MHz < 2500 MHz", "cores 1 < 2"]
    assert hardware_shortfalls(hw, WORKERS[2]) == []
    assert hardware_shortfalls({"mem": 1.5}, R(mem=1.25)) == ["mem 1.2 MB < 1.5 MB"]
    assert hardware_shortfalls({"mem": 0.0, "cores": None}, WORKERS[3]) == []
    maxima = hardware_maxima({"mem": "max"}, hx, ALL5)
    assert maxima == {"mem": 16384}
    assert hardware_shortfalls({"mem": "max"}, WORKERS[1], maxima) == [
        "mem 8192 MB < 16384 MB (max among candidates)"]
    assert hardware_shortfalls({"mem": "max"}, WORKERS[4], maxima) == []
    assert hardware_shortfalls({"mem": "max"}, WORKERS[3], maxima) == ["mem unknown (workers.json has no mem)"]


_val = st.one_of(st.none(), st.sampled_from([0, 1, 2, 4, 8, 1024, 2048, 4096]))
_workers = st.lists(st.builds(R, _val, _val, _val, _val), max_size=12)
_want = st.one_of(st.none(), st.just(0), st.just("max"), st.sampled_from([1, 2, 4, 1024, 2048]))
_hw = st.fixed_dictionaries({}, optional={"mem": _want, "cpu": _want, "cores": _want, "storage": _want})


@settings(max_examples=300)
@given(_workers, _hw, st.integers(min_value=0))
def test_mask_agrees_with_shortfalls(workers, hw, cands):
    hx = HardwareIndex(workers)
    cands &= (1 << len(workers)) - 1
    m = hardware_mask(hw, hx, cands)
    maxima = hardware_maxima(hw, hx, cands)
    assert m & ~cands == 0
    for i, w in enumerate(workers):
        if cands >> i & 1:
            why = hardware_shortfalls(hw, w, maxima)
            # with at least one candidate meeting the minimums, the max keys
            # are explained by maxima; the mask and the shortfalls agree
            if not any(v is None for v in maxima.values()):
                assert (why == []) == bool(m >> i & 1), (hw, w, why, maxima)
            elif m >> i & 1:
                raise AssertionError("a max with no known value must select nobody")


def test_mask_speed_1000_jobs_10000_workers():
    rnd = random.Random(3)
    sizes = [1024, 2048, 4096, 8192, 16384]
    workers = [R(rnd.choice(sizes), rnd.choice([1000, 2000, 3000]), rnd.choice([1, 2, 4, 8]),
                 rnd.choice([None, 10000, 50000])) for dummy in range(10000)]
    hx = HardwareIndex(workers)
    full = (1 << 10000) - 1
    jobs = [merge_hardware(None, parse_hardware(f"mem={rnd.choice(sizes)} cores={rnd.choice([1, 2, 4])}"))
            for dummy in range(1000)]
    t0 = time.perf_counter()
    masks = [hardware_mask(hw, hx, full) for hw in jobs]
    dt = time.perf_counter() - t0
    print(f"hardware_mask: 1000 jobs x 10000 workers in {1000 * dt:.1f} ms")
    for hw, m in list(zip(jobs, masks))[:2]:
        for i in range(0, 10000, 499):
            assert (hardware_shortfalls(hw, workers[i]) == []) == bool(m >> i & 1)
    assert dt < 1.0
