"""maand's units and versions (resources-and-placement.md, manifest.md)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.bucket.units import parse_cpu_mhz, parse_memory_mb, parse_version


@pytest.mark.parametrize("text, mb", [
    ("512", 512.0), ("512 mb", 512.0), ("512MB", 512.0), ("2 gb", 2048.0), ("2GB", 2048.0), ("1 Gb", 1024.0),
    ("1 tb", 1024.0 * 1024), ("1.5 gb", 1536.0), ("", 0.0), (None, 0.0), (256, 256.0), (0, 0.0),
])
def test_memory_units(text, mb):
    assert parse_memory_mb(text) == mb


@pytest.mark.parametrize("text, mhz", [
    ("500", 500.0), ("500 mhz", 500.0), ("2 ghz", 2000.0), ("2GHZ", 2000.0), ("1 thz", 1e6), ("1.5 GHz", 1500.0),
])
def test_cpu_units(text, mhz):
    assert parse_cpu_mhz(text) == mhz


@pytest.mark.parametrize("text", ["12 kb", "2 pb", "lots", "1..2 gb", "-1 gb", True, [1]])
def test_bad_memory_is_a_clear_value_error(text):
    with pytest.raises(ValueError) as exc:
        parse_memory_mb(text)
    assert str(exc.value)


def test_cpu_rejects_memory_units():
    with pytest.raises(ValueError, match="unknown unit 'gb'"):
        parse_cpu_mhz("2 gb")


@pytest.mark.parametrize("text, version", [
    ("1", "1.0.0"), ("v2.1", "2.1.0"), ("3", "3.0.0"), ("2.0.0-rc1", "2.0.0-rc1"), ("1.0.0", "1.0.0"), (2, "2.0.0"),
])
def test_versions(text, version):
    assert str(parse_version(text)) == version


# maand workspace/version.go: strconv.Atoi accepts "01" (01.2 -> 1.2.0); see test_parity_maand.py
@pytest.mark.parametrize("text", ["", "unknown", "1.2.3.4", "1.x", "v", "1.-2", "1-"])
def test_bad_versions(text):
    with pytest.raises(ValueError):
        parse_version(text)


def test_prerelease_sorts_before_release():
    assert parse_version("2.0.0-rc1") < parse_version("2.0.0") < parse_version("2.0.1") < parse_version("10")


@given(st.integers(0, 10**6), st.sampled_from(["mb", "gb", "tb", "MB", "Gb", ""]), st.sampled_from(["", " "]))
def test_memory_round_numbers(number, unit, space):
    factor = {"": 1, "mb": 1, "gb": 1024, "tb": 1024 * 1024}[unit.lower()]
    assert parse_memory_mb("%d%s%s" % (number, space if unit else "", unit)) == number * factor
