"""RFC 29 hostlists: expand_hostlist / compress_hostlist."""

import pytest
from hypothesis import given, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.errors import MaandError
from ansible_collections.maand.core.plugins.plugin_utils.placement.hostlist import MAX_RANGE, HostlistError, compress_hostlist, expand_hostlist


# RFC 29 "Test Vectors", verbatim: input = comma-joined expansion.
RFC29_VECTORS = [
    ("", ""),
    ("foox,fooy,fooz", "foox,fooy,fooz"),
    ("[1-3,5-6]", "1,2,3,5,6"),
    ("foo[1-5]", "foo1,foo2,foo3,foo4,foo5"),
    ("foo[0-4]-eth2", "foo0-eth2,foo1-eth2,foo2-eth2,foo3-eth2,foo4-eth2"),
    ("foo1,foo1,foo1", "foo1,foo1,foo1"),
    ("[00-02]", "00,01,02"),
    ("[00-2]", "00,01,02"),
    ("foo[1,1,2,1]", "foo1,foo1,foo2,foo1"),
]


@pytest.mark.parametrize("text, want", RFC29_VECTORS)
def test_rfc29_vectors(text, want):
    got = expand_hostlist(text)
    assert got == (want.split(",") if want else [])


@pytest.mark.parametrize("text, want", [
    # RFC 29 prose: leading zeros of the FIRST id apply to every id
    ("n[005,4,11-13]", ["n005", "n004", "n011", "n012", "n013"]),
    ("host[0-1]", ["host0", "host1"]),  # RFC 31 example
    ("node[1-3,7]", ["node1", "node2", "node3", "node7"]),
    ("n[01-10]", ["n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10"]),
    ("n[98-100]", ["n98", "n99", "n100"]),
    ("n[098-100]", ["n098", "n099", "n100"]),
    ("foo[1-2],bar", ["foo1", "foo2", "bar"]),
    ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
    ("p[00-3]p", ["p00p", "p01p", "p02p", "p03p"]),
    ("f00[7-8,10]", ["f007", "f008", "f0010"]),
    ("10.0.0.[1-3]", ["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
    ("a[1],b[2-3]x,c", ["a1", "b2x", "b3x", "c"]),
    ("foo-1a-2,foo-1a-3", ["foo-1a-2", "foo-1a-3"]),
    ("[0-20],45,12,015", [str(i) for i in range(21)] + ["45", "12", "015"]),
])
def test_expand(text, want):
    assert expand_hostlist(text) == want


@pytest.mark.parametrize("text, fragment", [
    ("n[3-1]", "bad range 3-1 in 'n[3-1]': the range start must not exceed its end"),
    ("a,,b", "empty element"),
    (",a", "empty element"),
    ("a,", "empty element"),
    ("n[1,]", "empty element"),
    ("n[,1]", "empty element"),
    ("[]", "empty brackets"),
    ("foo[]", "empty brackets"),
    ("foo[", "unbalanced"),
    ("foo[1,3", "unbalanced"),
    ("foo[[1,3]", "unbalanced"),
    ("foo]", "unbalanced"),
    ("foo[1]]", "unbalanced"),
    ("foo[x-y]", "non-numeric"),
    ("foo[a]", "non-numeric"),
    ("foo[-1]", "malformed range"),
    ("foo[1-]", "malformed range"),
    ("foo[0-1,2--5]", "malformed range"),
    ("foo[1-2-3]", "malformed range"),
    ("a[1-2]b[3-4]", "more than one bracket group"),
    ("a[1]b[2]", "more than one bracket group"),
    ("a b", "whitespace"),
    ("a,\tb", "whitespace"),
    ("caf\u00e9", "not allowed"),
    ("n[1,05]", "inconsistent zero padding"),
    ("n[001-02]", "inconsistent zero padding"),
    (f"foo[0-{MAX_RANGE}]", "too large"),
])
def test_expand_errors(text, fragment):
    with pytest.raises(HostlistError) as ei:
        expand_hostlist(text)
    assert fragment in str(ei.value)
    assert isinstance(ei.value, MaandError)  # the core's one error family


def test_expand_rejects_non_strings():
    with pytest.raises(HostlistError, match="must be a string"):
        expand_hostlist(["a"])


@pytest.mark.parametrize("hosts, text", [
    ([], ""),
    (["foo1", "foo2", "foo3", "fooi"], "foo[1-3],fooi"),
    (["foo1", "fooi", "foo2", "foo3"], "foo1,fooi,foo[2-3]"),
    (["1", "2", "3", "4", "5", "9"], "[1-5,9]"),
    (["14636"], "14636"),
    (["foo-1a-2", "foo-1a-3"], "foo-1a-[2-3]"),
    (["n01", "n02", "n03"], "n[01-03]"),
    (["n09", "n10", "n100"], "n[09-10,100]"),
    (["n1", "n01"], "n1,n01"),
    (["foo1", "foo1", "foo2", "foo1"], "foo[1,1-2,1]"),
    (["node1-ib", "node2-ib"], "node[1-2]-ib"),
])
def test_compress(hosts, text):
    assert compress_hostlist(hosts) == text
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("bad", ["", "a b", "a,b", "n[1]", None])
def test_compress_rejects_unrepresentable(bad):
    with pytest.raises(HostlistError):
        compress_hostlist(["ok", bad])


_host = st.builds(
    lambda p, n, w, s: f"{p}{str(n).zfill(w)}{s}",
    st.sampled_from(["", "n", "node", "a-", "10.0.0."]),
    st.integers(0, 120),
    st.integers(1, 3),
    st.sampled_from(["", "-ib", "x"]),
) | st.text(alphabet="abcxyz-.0123456789", min_size=1, max_size=6)


@given(st.lists(_host, max_size=25))
def test_compress_expand_round_trip(hosts):
    assert expand_hostlist(compress_hostlist(hosts)) == hosts


@given(st.data(), st.integers(1, 3))
def test_expand_padded_idlist(data, width):
    # every id written with the same width, each with a leading zero when width > 1
    top = 10 ** (width - 1) - 1 if width > 1 else 60
    ids = data.draw(st.lists(st.integers(0, top), min_size=1, max_size=20))
    text = "h[" + ",".join(str(i).zfill(width) for i in ids) + "]"
    assert expand_hostlist(text) == [f"h{str(i).zfill(width)}" for i in ids]
