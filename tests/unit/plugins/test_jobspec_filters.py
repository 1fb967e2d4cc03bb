"""The three public filters: maand.core.job_environment, collapse_spec, schedule_order (thin wrappers)."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.maand.core.plugins.filter.collapse_spec import FilterModule as CollapseModule
from ansible_collections.maand.core.plugins.filter.job_environment import FilterModule as EnvModule
from ansible_collections.maand.core.plugins.filter.schedule_order import FilterModule as OrderModule

job_environment = EnvModule().filters()["job_environment"]
collapse_spec = CollapseModule().filters()["collapse_spec"]
schedule_order = OrderModule().filters()["schedule_order"]


def test_job_environment_example():
    specs = [{"vars": {"PATH": "/usr/bin", "DB": "$env{DB_URL}"}, "extend": False},
             {"vars": {"PATH": "/opt/x/bin:$prev{PATH}", "LOG_LEVEL": "$env{LOG_LEVEL:-info}"}}]
    assert job_environment(specs, client_env={"DB_URL": "postgres://db/app"}) == {
        "DB": "postgres://db/app", "LOG_LEVEL": "info", "PATH": "/opt/x/bin:/usr/bin"}


def test_job_environment_initial_and_map():
    assert job_environment({"A": "$prev{B}-$$"}, initial={"B": "b"}) == {"A": "b-$", "B": "b"}


@pytest.mark.parametrize("specs, kwargs, fragment", [
    ([{"vars": {"URL": "$env{DB_URL}"}}], {}, r"environment\[0\]\.vars\.URL: unknown variable 'DB_URL'"),
    ({"X": "$HOME"}, {}, r"vars\.X: \$ must be followed by"),
    ({"X": "$env{A"}, {}, r"vars\.X: unterminated"),
    ([{"vars": {"A": 1}}], {}, r"environment\[0\]\.vars\.A: value must be a string"),
    ({}, {"client_env": ["A"]}, "client_env must be a dict"),
])
def test_job_environment_errors(specs, kwargs, fragment):
    with pytest.raises(AnsibleFilterError, match="maand.core.job_environment: .*" + fragment):
        job_environment(specs, **kwargs)


def test_collapse_spec_example():
    base = {"environment": {"LOG_LEVEL": "$env{LOG_LEVEL:-info}"}, "user": "nobody", "working_directory": "bin"}
    manifest = {"parent": {"container": "base", "use": ["environment", "user"]}, "environment": {"PORT": "8080"}}
    got = collapse_spec(manifest, containers={"base": base})
    assert got == {
        "layers": [], "enable_writable_file_system": None,
        "environment": [{"vars": {"LOG_LEVEL": "$env{LOG_LEVEL:-info}"}, "extend": True},
                        {"vars": {"PORT": "8080"}, "extend": True}],
        "working_directory": None, "mounts": [], "network": None, "user": "nobody", "group": None, "image": None}


def test_collapse_then_environment():
    containers = {"base": {"environment": [{"vars": {"PATH": "/bin"}, "extend": False}]},
                  "web": {"parent": {"container": "base"}, "environment": {"PATH": "/web:$prev{PATH}"}}}
    spec = collapse_spec({"parent": {"container": "web"}}, containers=containers)
    assert job_environment(spec["environment"]) == {"PATH": "/web:/bin"}


@pytest.mark.parametrize("job, containers, fragment", [
    ({"parent": {"container": "a"}}, {"a": {"parent": {"container": "a"}}}, 'parent loop found: "a" -> "a"'),
    ({"parent": {"container": "x"}}, {}, r'couldn\'t find parent container "x" \(chain: job -> "x"\)'),
    ("job", {}, "must be a job manifest"),
    ({}, {"a": "b"}, "containers must be a dict"),
])
def test_collapse_spec_errors(job, containers, fragment):
    with pytest.raises(AnsibleFilterError, match="maand.core.collapse_spec: .*" + fragment):
        collapse_spec(job, containers=containers)


def test_schedule_order_example():
    jobs = [{"name": "web", "estimated_duration": 2}, {"name": "db", "estimated_duration": 8},
            {"name": "cache"}, {"name": "api", "priority": 1, "estimated_duration": 1}]
    out = schedule_order(jobs)
    assert [j["name"] for j in out] == ["api", "cache", "db", "web"]
    assert out[0] is jobs[3]


@pytest.mark.parametrize("jobs, fragment", [
    ([{"name": "a", "priority": 200}], r"job \[0\] \(a\): priority must be an integer from -128 to 127"),
    ([{}, {"estimated_duration": "long"}], r"job \[1\]: estimated_duration must be seconds"),
    ([{"estimated_duration": -1}], "estimated_duration"),
    (["a"], r"job \[0\] must be a dict"),
    ({"a": 1}, "must be a list"),
])
def test_schedule_order_errors(jobs, fragment):
    with pytest.raises(AnsibleFilterError, match="maand.core.schedule_order: .*" + fragment):
        schedule_order(jobs)


def test_docs_worked_example():
    # docs/jobspec.md "one base spec shared by three jobs"
    base = {"environment": [{"vars": {"PATH": "/usr/local/bin:/usr/bin:/bin", "LOG_LEVEL": "$env{LOG_LEVEL:-info}"},
                             "extend": False}],
            "user": "maand", "group": "maand", "working_directory": "bin", "layers": ["layers/common"]}
    web = {"selectors": ["web"], "parent": {"container": "base"},
           "environment": {"PORT": "8080", "PATH": "/opt/web/bin:$prev{PATH}"}, "priority": 1}
    worker = {"selectors": ["worker"], "parent": {"container": "base", "use": ["environment", "layers"]},
              "user": "nobody", "timeout": 120, "estimated_duration": 30}
    got = collapse_spec(web, containers={"base": base})
    assert (got["user"], got["group"], got["working_directory"], got["layers"]) == ("maand", "maand", "bin", ["layers/common"])
    assert job_environment(got["environment"]) == {
        "LOG_LEVEL": "info", "PATH": "/opt/web/bin:/usr/local/bin:/usr/bin:/bin", "PORT": "8080"}
    got = collapse_spec(worker, containers={"base": base})
    assert (got["user"], got["group"], got["working_directory"], got["layers"]) == ("nobody", None, None, ["layers/common"])
    assert job_environment(got["environment"])["LOG_LEVEL"] == "info"
