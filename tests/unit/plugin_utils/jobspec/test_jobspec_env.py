"""Job spec environments (seed 004): Maelstrom's substitute and environment_eval, ported as tables.

Tables: tests/data/maelstrom/substitute.json and environment_eval.json, transcribed from
maelstrom-software/maelstrom crates/maelstrom-client-base/src/spec/substitute.rs and spec.rs.
"""

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.jobspec.environment import (
    EnvironmentSpec, SpecError, SubstituteError, environment_check, environment_eval, parse_environment, substitute,
)

SLOW_OK = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
DATA = Path(__file__).resolve().parents[3] / "data" / "maelstrom"
SUBST = json.loads((DATA / "substitute.json").read_text())
EVAL = json.loads((DATA / "environment_eval.json").read_text())


def _lookup(table):
    def lookup(key):
        value = table.get(key)
        if isinstance(value, dict):
            raise RuntimeError(value["error"])
        return value
    return lookup


@pytest.mark.parametrize("case", SUBST["cases"], ids=[c["test"] for c in SUBST["cases"]])
def test_maelstrom_substitute(case):
    env, prev = _lookup(SUBST["env"]), _lookup(SUBST["prev"])
    if "expected" in case:
        assert substitute(case["input"], env, prev) == case["expected"]
        return
    with pytest.raises(SubstituteError) as info:
        substitute(case["input"], env, prev)
    want = case["error"]
    assert info.value.kind == want["kind"]
    assert info.value.var == want.get("var")
    if "detail" in want:
        assert info.value.detail == want["detail"]
    if want.get("var"):
        assert repr(want["var"]) in str(info.value)


@pytest.mark.parametrize("case", EVAL["cases"], ids=[c["test"] for c in EVAL["cases"]])
def test_maelstrom_environment_eval(case):
    result = environment_eval(case["initial"], case["specs"], EVAL["env"].get)
    assert [f"{k}={v}" for k, v in result.items()] == case["expected"]


def test_map_is_one_extending_element():
    assert parse_environment({"A": "1"}) == [EnvironmentSpec({"A": "1"}, True)]
    assert environment_eval({"B": "2"}, {"A": "$prev{B}x"}, {}.get) == {"A": "2x", "B": "2"}


def test_extend_defaults_to_true():
    assert parse_environment([{"vars": {"A": "1"}}]) == [EnvironmentSpec({"A": "1"}, True)]


def test_path_prepend_sees_previous_value():
    specs = [{"vars": {"PATH": "/usr/bin"}, "extend": False},
             {"vars": {"PATH": "/opt/x/bin:$prev{PATH}", "LOG": "$env{LOG_LEVEL:-info}"}}]
    assert environment_eval({}, specs, {}.get) == {"LOG": "info", "PATH": "/opt/x/bin:/usr/bin"}


def test_prev_does_not_see_same_element():
    # Within one element every value sees the map before the element: B cannot use A from it.
    with pytest.raises(SubstituteError) as info:
        environment_eval({}, [{"vars": {"A": "1", "B": "$prev{A}"}}], {}.get)
    assert info.value.var == "A"
    assert "environment[0].vars.B" in str(info.value) and "'A'" in str(info.value)


def test_unknown_env_variable_names_variable_and_path():
    with pytest.raises(SubstituteError, match=r"environment\[1\]\.vars\.URL: unknown variable 'DB_URL'"):
        environment_eval({}, [{"vars": {}}, {"vars": {"URL": "$env{DB_URL}"}}], {}.get)


@pytest.mark.parametrize("value, fragment", [
    ("x", "must be a list"),
    ([1], r"environment\[0\]: must be"),
    ([{"vars": {"A": "1"}, "extend": "yes"}], r"environment\[0\]\.extend: must be true or false"),
    ([{"vars": {"A": 1}}], r"environment\[0\]\.vars\.A: value must be a string"),
    ([{"vars": ["A=1"]}], r"environment\[0\]\.vars: must be a map"),
    ([{"extend": True}], r"missing \"vars\""),
    ([{"vars": {}, "extnd": True}], "unknown key"),
    ({"": "x"}, "invalid variable name"),
    ({"A=B": "x"}, "invalid variable name"),
])
def test_malformed_environment(value, fragment):
    with pytest.raises(SpecError, match=fragment):
        parse_environment(value)


_text = st.text(alphabet="ab$", max_size=12)


@SLOW_OK
@given(_text)
def test_no_env_or_prev_means_dollar_pairs_or_error(text):
    # Over the alphabet {a, b, $} the only valid inputs are those whose $ come in pairs.
    try:
        out = substitute(text, {}.get, {}.get)
    except SubstituteError as exc:
        assert exc.kind == SubstituteError.INVALID_VARIABLE
        return
    assert out == text.replace("$$", "$")


@SLOW_OK
@given(st.dictionaries(st.from_regex(r"[A-Z]{1,3}", fullmatch=True), st.text(alphabet="xy", max_size=3)),
       st.dictionaries(st.from_regex(r"[A-Z]{1,3}", fullmatch=True), st.text(alphabet="xy", max_size=3)))
def test_extend_merges_and_replace_drops(initial, vars_):
    assert environment_eval(initial, [{"vars": vars_, "extend": True}], {}.get) == dict(
        sorted({**initial, **vars_}.items()))
    assert environment_eval(initial, [{"vars": vars_, "extend": False}], {}.get) == dict(sorted(vars_.items()))


def test_unknown_variable_hint_names_the_right_source():
    with pytest.raises(SubstituteError) as info:
        substitute("$prev{X}", {}.get, {}.get)
    assert str(info.value).endswith("(set it in an earlier environment element, or give a default: $prev{X:-value})")
    with pytest.raises(SubstituteError) as info:
        substitute("$env{Y}", {}.get, {}.get)
    assert str(info.value).endswith("(set it in the controller's environment, or give a default: $env{Y:-value})")


def test_environment_check_at_build():
    specs = [{"vars": {"PATH": "/bin", "DB": "$env{DB_URL}"}, "extend": False},
             {"vars": {"PATH": "/x:$prev{PATH}", "LOG": "$env{LOG_LEVEL:-info}", "D": "$prev{DB}"}}]
    assert environment_check({}, specs) == ["DB_URL", "LOG_LEVEL"]
    with pytest.raises(SubstituteError, match=r"environment\[0\]\.vars\.A: unknown variable 'NOPE'"):
        environment_check({}, [{"vars": {"A": "$prev{NOPE}"}}])
    with pytest.raises(SubstituteError, match=r"vars\.A: \$ must be followed"):
        environment_check({}, {"A": "cost $5"})
    assert environment_check({"HOME": "/root"}, {"A": "$prev{HOME}"}) == []
