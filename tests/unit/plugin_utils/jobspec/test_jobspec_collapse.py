"""Job spec inheritance (seed 004): Maelstrom's CollapsedJobSpec::new, ported as a table.

tests/data/maelstrom/collapse.json holds every assert_eq! of the collapse tests in
maelstrom-software/maelstrom crates/maelstrom-client-process/src/collapsed_job_spec.rs (mod tests:
missing_parent, parent_loop, parent_traversal_short_circuits, layers, enable_writable_file_system,
environment, working_directory, mounts, network, user, group, image_parent*), written as manifests.
"""

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.jobspec.environment import SpecError, environment_eval
from ansible_collections.maand.core.plugins.plugin_utils.jobspec.spec import (
    CONTAINER_USES, IMAGE_USES, VECTOR_USES, collapse_spec, collapse_specs, parse_parent,
)

TABLE = json.loads((Path(__file__).resolve().parents[3] / "data" / "maelstrom" / "collapse.json").read_text())


@pytest.mark.parametrize("case", TABLE["cases"], ids=[c["test"] for c in TABLE["cases"]])
def test_maelstrom_collapse(case):
    if "expected" in case:
        assert collapse_spec(case["job"], case["containers"]).to_dict() == case["expected"]
        return
    with pytest.raises(SpecError) as info:
        collapse_spec(case["job"], case["containers"])
    assert str(info.value).startswith(case["error"])


def test_table_covers_every_collapse_test():
    names = {c["test"].split("#")[0] for c in TABLE["cases"]}
    assert len(TABLE["cases"]) == 70
    assert {"missing_parent", "parent_loop", "layers", "environment", "mounts", "network", "user",
            "group", "working_directory", "enable_writable_file_system"} <= names


def test_missing_parent_names_chain():
    containers = {"base": {"parent": {"container": "gone"}}}
    with pytest.raises(SpecError, match=r'job -> "base" -> "gone"\); create containers/gone.json'):
        collapse_spec({"parent": {"container": "base"}}, containers)


def test_explicit_false_is_a_value():
    containers = {"a": {"enable_writable_file_system": True, "parent": {"container": "b"}},
                  "b": {"network": "loopback"}}
    job = {"enable_writable_file_system": False, "parent": {"container": "a"}}
    got = collapse_spec(job, containers).to_dict()
    assert got["enable_writable_file_system"] is False and got["network"] == "loopback"


def test_use_sets_narrow_along_the_chain():
    containers = {
        "a": {"parent": {"container": "b", "use": ["user", "layers"]}, "layers": ["a"]},
        "b": {"parent": {"container": "c"}, "user": None, "group": 7, "layers": ["b"]},
        "c": {"user": 5, "group": 8, "layers": ["c"]},
    }
    got = collapse_spec({"parent": {"container": "a", "use": ["user", "group", "layers"]}}, containers)
    # group is cut at a -> b (a's use lacks it) although b and c have one; user comes from c.
    assert (got.user, got.group, got.layers) == (5, None, ["c", "b", "a"])


def test_map_environment_in_chain_is_one_element():
    containers = {"base": {"environment": {"A": "1"}}}
    got = collapse_spec({"environment": [{"vars": {"B": "2"}, "extend": False}],
                         "parent": {"container": "base"}}, containers).to_dict()
    assert got["environment"] == [{"vars": {"A": "1"}, "extend": True}, {"vars": {"B": "2"}, "extend": False}]


@pytest.mark.parametrize("value, fragment", [
    ("base", "must be"),
    ({"use": ["layers"]}, 'exactly one of "container" or "image"'),
    ({"container": "a", "image": "b"}, "exactly one"),
    ({"container": "a", "uses": []}, "unknown key"),
    ({"container": ""}, "non-empty name"),
    ({"container": "a", "use": ["layer"]}, r"unknown field\(s\) 'layer'"),
    ({"image": "a", "use": ["user"]}, r"unknown field\(s\) 'user'; choose from layers, environment, working_directory"),
    ({"container": "a", "use": "layers"}, "must be a list"),
])
def test_malformed_parent(value, fragment):
    with pytest.raises(SpecError, match=fragment):
        parse_parent(value)


def test_malformed_parent_in_container_names_file():
    with pytest.raises(SpecError, match=r"containers/a.json: parent.use"):
        collapse_spec({"parent": {"container": "a"}}, {"a": {"parent": {"container": "b", "use": ["x"]}}})


def test_collapse_specs_parses_each_container_once_and_matches_single():
    containers = {"a": {"parent": {"container": "b"}, "layers": ["a"]}, "b": {"user": 3, "layers": ["b"]}}
    jobs = {f"j{i}": {"parent": {"container": "a"}, "layers": [f"own{i}"]} for i in range(3)}
    got = collapse_specs(jobs, containers)
    assert {n: s.to_dict() for n, s in got.items()} == {n: collapse_spec(j, containers).to_dict() for n, j in jobs.items()}
    assert got["j2"].layers == ["b", "a", "own2"] and got["j2"].user == 3


# --- Property: collapse_spec agrees with a field-by-field restatement of the rules ---

SLOW_OK = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_OPTIONAL_VALUES = {
    "enable_writable_file_system": st.booleans(), "working_directory": st.sampled_from(["a", "b"]),
    "network": st.sampled_from(["disabled", "loopback"]), "user": st.integers(0, 3), "group": st.integers(0, 3),
}


@st.composite
def _spec(draw, tag):
    spec = {}
    for name in CONTAINER_USES:
        if not draw(st.booleans()):
            continue
        if name == "environment":
            spec[name] = [{"vars": {"K": tag}, "extend": True}]
        elif name in VECTOR_USES:
            spec[name] = [f"{name}-{tag}"] if name == "layers" else [{"type": "tmp", "mount_point": "/" + tag}]
        else:
            spec[name] = draw(_OPTIONAL_VALUES[name])
    return spec


@st.composite
def _chains(draw):
    depth = draw(st.integers(0, 4))
    uses = [draw(st.one_of(st.none(), st.lists(st.sampled_from(CONTAINER_USES), unique=True))) for level in range(depth)]
    job = draw(_spec("job"))
    containers = {f"c{i}": draw(_spec(f"c{i}")) for i in range(1, depth + 1)}
    for i in range(depth):
        parent = {"container": f"c{i + 1}"} | ({} if uses[i] is None else {"use": uses[i]})
        (job if i == 0 else containers[f"c{i}"])["parent"] = parent
    image_use = draw(st.one_of(st.none(), st.lists(st.sampled_from(IMAGE_USES), unique=True)))
    if draw(st.booleans()):
        parent = {"image": "img"} | ({} if image_use is None else {"use": image_use})
        (job if depth == 0 else containers[f"c{depth}"])["parent"] = parent
    return job, containers, uses, (image_use if image_use is not None else list(IMAGE_USES))


def _reference(job, containers, uses, image_use):
    chain = [containers[f"c{i}"] for i in range(1, len(uses) + 1)]
    expected, still_wanted = {}, set()
    for name in CONTAINER_USES:
        reach = 0  # how many containers up the chain this field can be taken from
        for use in uses:
            if use is not None and name not in use:
                break
            reach += 1
        own = job.get(name)
        if name in VECTOR_USES:
            value = [x for c in reversed(chain[:reach]) for x in c.get(name, [])] + (own or [])
            wanted = reach == len(chain)
        else:
            value = own
            for c in chain[:reach]:
                if value is not None:
                    break
                value = c.get(name)
            wanted = value is None and reach == len(chain)
        expected[name] = value
        if wanted:
            still_wanted.add(name)
    has_image = "image" in (chain[-1] if chain else job).get("parent", {})
    image_fields = [u for u in IMAGE_USES if u in still_wanted and u in image_use] if has_image else []
    expected["environment"] = [{"vars": e["vars"], "extend": True} for e in expected["environment"]]
    expected["image"] = {"name": "img", "use": image_fields} if image_fields else None
    return expected


@SLOW_OK
@given(_chains())
def test_collapse_matches_field_by_field_rules(data):
    job, containers, uses, image_use = data
    assert collapse_spec(job, containers).to_dict() == _reference(job, containers, uses, image_use)


def test_environment_errors_name_the_file_they_come_from():
    containers = {"base": {"environment": [{"vars": {"P": "$prev{NOPE}"}}]}}
    spec = collapse_spec({"parent": {"container": "base"}, "environment": {"A": "1"}}, containers)
    with pytest.raises(SpecError, match=r"^containers/base.json: environment\[0\]\.vars\.P: unknown variable 'NOPE'"):
        environment_eval({}, spec.environment, {}.get)
    spec = collapse_spec({"parent": {"container": "base", "use": []}, "environment": {"A": "$env{X}"}}, containers)
    with pytest.raises(SpecError, match=r"^environment\.vars\.A: unknown variable 'X'"):
        environment_eval({}, spec.environment, {}.get)
