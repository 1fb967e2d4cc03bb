"""Manifest job-spec field validation (seed 004): every problem names its JSON path and a fix."""

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.jobspec.validate import (
    FieldProblem, validate_container, validate_job_spec,
)


def test_no_fields_no_problems():
    assert validate_job_spec({}) == []
    assert validate_job_spec({"version": "1.0", "selectors": ["a"]}) == []


def test_good_fields():
    manifest = {
        "environment": [{"vars": {"PATH": "/opt/x/bin:$prev{PATH}"}, "extend": True}],
        "parent": {"container": "base", "use": ["environment", "user"]},
        "working_directory": "bin", "layers": ["layers/common"], "user": "nobody", "group": 65534,
        "network": "loopback", "mounts": [{"type": "tmp", "mount_point": "/tmp"}],
        "enable_writable_file_system": False, "timeout": 0, "estimated_duration": 2.5, "priority": -128,
    }
    assert validate_job_spec(manifest) == []


@pytest.mark.parametrize("manifest, field, fragment", [
    ({"timeout": -1}, "timeout", "whole number of seconds >= 0"),
    ({"timeout": 1.5}, "timeout", "whole number"),
    ({"timeout": True}, "timeout", "whole number"),
    ({"estimated_duration": "5s"}, "estimated_duration", "number of seconds"),
    ({"estimated_duration": -0.1}, "estimated_duration", ">= 0"),
    ({"priority": 128}, "priority", "-128 to 127"),
    ({"priority": -129}, "priority", "-128 to 127"),
    ({"priority": "high"}, "priority", "-128 to 127"),
    ({"priority": False}, "priority", "-128 to 127"),
    ({"environment": [{"vars": {"A": 1}}]}, "environment[0].vars.A", "value must be a string"),
    ({"environment": "A=1"}, "environment", "must be a list"),
    ({"parent": {"container": "b", "use": ["layer"]}}, "parent.use", "unknown field(s) 'layer'"),
    ({"parent": "base"}, "parent", "must be"),
    ({"working_directory": "/srv"}, "working_directory", "leaves the job folder"),
    ({"working_directory": "a/../../x"}, "working_directory", "leaves the job folder"),
    ({"layers": ["../other"]}, "layers[0]", "leaves the bucket folder"),
    ({"layers": "common"}, "layers", "must be a list"),
    ({"user": "Bad Name"}, "user", "user/group name or a numeric id"),
    ({"group": -1}, "group", "numeric id"),
    ({"network": "host"}, "network", "disabled, loopback, local"),
    ({"mounts": [{"type": "nfs", "mount_point": "/x"}]}, "mounts[0].type", "tmp, proc"),
    ({"mounts": [{"type": "tmp", "mount_point": "tmp"}]}, "mounts[0].mount_point", "absolute path"),
    ({"mounts": [{"type": "bind", "mount_point": "/srv"}]}, "mounts[0].local_path", "bind mount needs"),
    ({"mounts": [{"type": "bind", "mount_point": "/srv", "local_path": "/d", "read_only": "yes"}]},
     "mounts[0].read_only", "true or false"),
    ({"enable_writable_file_system": "yes"}, "enable_writable_file_system", "true or false"),
])
def test_bad_field(manifest, field, fragment):
    problems = validate_job_spec(manifest)
    assert len(problems) == 1, problems
    problem = problems[0]
    assert isinstance(problem, FieldProblem)
    assert problem.field == field
    assert fragment in problem.message
    assert problem.fix and str(problem).startswith(field + ": ")


def test_all_problems_at_once():
    problems = validate_job_spec({"timeout": -1, "priority": 500, "network": "x", "user": []})
    assert sorted(p.field for p in problems) == ["network", "priority", "timeout", "user"]


def test_container_refuses_job_fields_and_unknown_keys():
    problems = validate_container({"timeout": 5, "environment": {"A": "1"}, "colour": "red"})
    assert [(p.field, p.message) for p in problems] == [
        ("colour", "is not a container field"), ("timeout", "is not a container field")]
    assert validate_container(["x"])[0].field == "$"
    assert validate_container({"parent": {"image": "debian", "use": ["layers"]}, "user": 0}) == []
