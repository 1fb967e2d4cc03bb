"""RFC 22 idsets: parse_idset / format_idset."""

import pytest
from hypothesis import given, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.errors import MaandError
from ansible_collections.maand.core.plugins.plugin_utils.placement.idset import MAX_IDS, IdsetError, format_idset, parse_idset, parse_idset_ranges


# RFC 22's own examples, plus the forms it allows.
@pytest.mark.parametrize("text, ids", [
    ("1,2,3,5,6,42", [1, 2, 3, 5, 6, 42]),
    ("1-3,5-6,42", [1, 2, 3, 5, 6, 42]),
    ("[1-3,5-6,42]", [1, 2, 3, 5, 6, 42]),
    ("0", [0]),
    ("0-3,7", [0, 1, 2, 3, 7]),
    ("[0-3,7]", [0, 1, 2, 3, 7]),
    ("", []),
    ("[]", []),
    ("5-5", [5]),
    # lenient but unambiguous: out of order, overlapping, leading zeros
    ("5,1", [1, 5]),
    ("1-5,3-7", [1, 2, 3, 4, 5, 6, 7]),
    ("007", [7]),
])
def test_parse(text, ids):
    assert parse_idset(text) == ids


@pytest.mark.parametrize("text, fragment", [
    ("3-1", "bad range 3-1"),
    ("1,,2", "empty element"),
    (",1", "empty element"),
    ("1,", "empty element"),
    ("a", "not allowed"),
    ("1.5", "not allowed"),
    ("-1", "non-negative"),
    ("1--3", "malformed range"),
    ("1-", "malformed range"),
    ("1-2-3", "malformed range"),
    ("[1", "unbalanced"),
    ("1]", "unbalanced"),
    ("[[1]]", "unbalanced"),
    ("1[2]", "unbalanced"),
    ("1, 2", "whitespace"),
    (" 1", "whitespace"),
])
def test_parse_errors(text, fragment):
    with pytest.raises(IdsetError) as ei:
        parse_idset(text)
    assert fragment in str(ei.value)
    assert isinstance(ei.value, MaandError)  # the core's one error family


def test_parse_rejects_non_strings():
    with pytest.raises(IdsetError, match="must be a string"):
        parse_idset(3)


def test_too_large_is_an_error_but_ranges_are_cheap():
    with pytest.raises(IdsetError, match="too large"):
        parse_idset(f"0-{MAX_IDS}")
    assert parse_idset_ranges("0-99999999999,5") == [(0, 99999999999), (5, 5)]


@pytest.mark.parametrize("ids, text", [
    ([], ""),
    ([0], "0"),
    ([1, 2, 3, 5, 6, 42], "1-3,5-6,42"),
    ([7, 3, 3, 1, 2], "1-3,7"),
])
def test_format(ids, text):
    assert format_idset(ids) == text


@pytest.mark.parametrize("bad", [[-1], [True], ["1"], [1.0]])
def test_format_rejects_non_ids(bad):
    with pytest.raises(IdsetError):
        format_idset(bad)


@given(st.sets(st.integers(min_value=0, max_value=300)))
def test_round_trip(ids):
    text = format_idset(ids)
    assert parse_idset(text) == sorted(ids)
    assert parse_idset(f"[{text}]") == sorted(ids)
    # canonical form only uses RFC 22 characters and no leading zeros
    assert set(text) <= set("0123456789,-")
    assert all(not p.startswith("0") or p == "0" for part in text.split(",") for p in part.split("-") if p)


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), max_size=6))
def test_ranges_in_any_order_union(pairs):
    ranges = [(min(a, b), max(a, b)) for a, b in pairs]
    text = ",".join(f"{lo}-{hi}" for lo, hi in ranges)
    want = sorted({i for lo, hi in ranges for i in range(lo, hi + 1)})
    assert parse_idset(text) == want
