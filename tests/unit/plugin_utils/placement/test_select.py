"""Constraints (RFC 31 + named groups) and hardware minimums, through the build (_build.compute / build)."""

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from tests.bucket_factory import make_bucket

CONF = 'ssh_user = "agent"\nssh_key = "worker.key"\nssh_port = 22\nuse_sudo = false\n'

# position = list index; host names double as hostnames for hostlist tests
FLEET = [
    {"host": "10.0.0.1", "hostname": "node01", "labels": ["ssd"], "tags": {"zone": "a"},
     "memory": "4 gb", "cpu": "4000 mhz", "cores": 2, "storage": "100 gb"},
    {"host": "10.0.0.2", "hostname": "node02", "labels": ["ssd", "huge"], "tags": {"zone": "b"},
     "memory": "6 gb", "cpu": "8000 mhz", "cores": 4, "storage": "500 gb"},
    {"host": "10.0.0.3", "hostname": "node03", "labels": ["slowgpu"], "tags": {"zone": "a"},
     "memory": "2 gb", "cpu": "2000 mhz", "cores": 1},
    {"host": "10.0.0.4", "labels": ["huge", "slowgpu"], "tags": {"zone": "c"},
     "memory": "16 gb", "cpu": "16000 mhz", "cores": 8, "storage": "20 gb"},
]
ALL = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]


def hosts_of(result, job):
    return [a["worker"] for a in result.catalog["allocations"] if a["job"] == job and a["state"] != "removed"]


def build_one(tmp_path, manifest, conf_extra="", workers=None):
    workers = FLEET if workers is None else workers
    manifest = dict({"selectors": ["worker"]}, **manifest)
    make_bucket(tmp_path, workers, {"api": manifest}, maand_conf=CONF + conf_extra)
    return _service.compute(str(tmp_path))


def errors(result):
    return [(p.kind, p.file, p.field, p.message, p.fix) for p in result.report.errors]


# --- every RFC 31 operator through the build --------------------------------------------------

@pytest.mark.parametrize("constraints, want", [
    ({"properties": ["ssd"]}, ["10.0.0.1", "10.0.0.2"]),
    ({"properties": ["^slowgpu"]}, ["10.0.0.1", "10.0.0.2"]),
    ({"properties": ["zone=a"]}, ["10.0.0.1", "10.0.0.3"]),  # tags are key=value properties
    ({"properties": ["ZONE=A", "SSD"]}, ["10.0.0.1"]),  # case-insensitive
    ({"not": [{"properties": ["slowgpu"]}]}, ["10.0.0.1", "10.0.0.2"]),
    ({"or": [{"properties": ["ssd"]}, {"properties": ["huge"]}]}, ["10.0.0.1", "10.0.0.2", "10.0.0.4"]),
    ({"and": [{"properties": ["huge"]}, {"properties": ["slowgpu"]}]}, ["10.0.0.4"]),
    ({"hostlist": ["node[01-02]"]}, ["10.0.0.1", "10.0.0.2"]),  # hostname
    ({"hostlist": ["10.0.0.[3-4]"]}, ["10.0.0.3", "10.0.0.4"]),  # host
    ({"hostlist": ["node03,10.0.0.1"]}, ["10.0.0.1", "10.0.0.3"]),
    ({"not": [{"hostlist": ["node[01-02]"]}]}, ["10.0.0.3", "10.0.0.4"]),
    ({"ranks": ["0,3"]}, ["10.0.0.1", "10.0.0.4"]),  # position in workers.json
    ({"ranks": ["[1-2]"]}, ["10.0.0.2", "10.0.0.3"]),
    ({"and": [{"hostlist": ["node[01-03]"]}, {"or": [{"ranks": ["2"]}, {"properties": ["huge"]}]}]},
     ["10.0.0.2", "10.0.0.3"]),
    ({}, ALL), ({"and": []}, ALL), ({"or": []}, ALL), ({"properties": []}, ALL),
    ({"not": []}, []), ({"hostlist": []}, []), ({"ranks": [""]}, []),
])
def test_each_operator_through_the_build(tmp_path, constraints, want):
    result = build_one(tmp_path, {"constraints": constraints})
    assert result.report.ok, errors(result)
    assert hosts_of(result, "api") == want


def test_constraints_and_selectors_combine_by_and(tmp_path):
    result = build_one(tmp_path, {"selectors": ["huge"], "constraints": {"properties": ["ssd"]}})
    assert hosts_of(result, "api") == ["10.0.0.2"]


def test_job_matching_no_worker_warns_with_summary(tmp_path):
    result = build_one(tmp_path, {"constraints": {"properties": ["gpu"]}})
    assert result.report.ok
    [warning] = [w for w in result.report.warnings if "matches no worker" in w.message]
    assert warning.field == "$.constraints"
    assert "api: 0/4 workers: 4 missing property gpu" in warning.message


# --- bad constraints: file, job, JSON path and fix; nothing written ----------------------------

@pytest.mark.parametrize("constraints, path, words", [
    ({"bogus": []}, "$.constraints.bogus", "unknown operator 'bogus'"),
    ({"properties": "ssd"}, "$.constraints.properties", "takes a list"),
    ({"properties": ["ssd"], "hostlist": ["a"]}, "$.constraints", "exactly one operator"),
    ({"and": [{"hostlist": ["n[3-1]"]}]}, "$.constraints.and[0].hostlist[0]", "bad range 3-1"),
    ({"hostlist": ["n[1-2"]}, "$.constraints.hostlist[0]", "unbalanced brackets"),
    ({"hostlist": ["a,,b"]}, "$.constraints.hostlist[0]", "empty element"),
    ({"hostlist": ["n[1,]"]}, "$.constraints.hostlist[0]", "empty element"),
    ({"ranks": [0]}, "$.constraints.ranks[0]", "write \"0\""),
    ({"ranks": ["3-1"]}, "$.constraints.ranks[0]", "bad range 3-1"),
    ({"ranks": ["1,,2"]}, "$.constraints.ranks[0]", "empty element"),
    ({"or": [{"not": [{"properties": ["a b"]}]}]}, "$.constraints.or[0].not[0].properties[0]", "not allowed"),
    ({"group": ["nope"]}, "$.constraints.group[0]", "unknown constraint group 'nope'"),
])
def test_bad_constraints_are_errors_with_file_job_path_and_fix(tmp_path, constraints, path, words):
    result = build_one(tmp_path, {"constraints": constraints})
    found = [e for e in errors(result) if e[2] == path]
    assert found, errors(result)
    kind, file, dummy, message, fix = found[0]
    assert kind == "ErrInvalidConstraint" and file == "workspace/jobs/api/manifest.json"
    assert message.startswith("job api: ") and words in message + fix
    assert fix
    assert result.catalog is None
    outcome = _service.build(str(tmp_path))
    assert not outcome.written and not os.path.exists(os.path.join(str(tmp_path), "data", "catalog.json"))


def test_every_constraint_error_is_reported_at_once(tmp_path):
    result = build_one(tmp_path, {"constraints": {"and": [{"bogus": []}, {"hostlist": ["x[2-1]"]},
                                                          {"ranks": ["a"]}]}})
    assert {e[2] for e in errors(result)} == {"$.constraints.and[0].bogus", "$.constraints.and[1].hostlist[0]", "$.constraints.and[2].ranks[0]"}


# --- named constraint groups (maand.conf [constraint_groups]) ------------------------------------

GROUPS = ('\n[constraint_groups]\nfast-network = {and = [{hostlist = ["node[01-02]"]}, {properties = ["zone=b"]}]}\n'
          'big = {properties = ["huge"]}\n')


def test_constraint_group_is_defined_once_and_referenced(tmp_path):
    result = build_one(tmp_path, {"constraints": {"group": ["fast-network"]}}, GROUPS)
    assert result.report.ok, errors(result)
    assert hosts_of(result, "api") == ["10.0.0.2"]
    result = build_one(tmp_path, {"constraints": {"not": [{"group": ["big"]}]}}, GROUPS)
    assert hosts_of(result, "api") == ["10.0.0.1", "10.0.0.3"]
    result = build_one(tmp_path, {"constraints": {"or": [{"group": ["big"]}, {"ranks": ["0"]}]}}, GROUPS)
    assert hosts_of(result, "api") == ["10.0.0.1", "10.0.0.2", "10.0.0.4"]


def test_bad_group_definition_names_maand_conf_and_its_path(tmp_path):
    bad = '\n[constraint_groups]\nfast = {hostlist = ["n[5-1]"]}\n'
    result = build_one(tmp_path, {"constraints": {"group": ["fast"]}}, bad)
    errs = errors(result)
    assert ("ErrInvalidConstraint", "maand.conf", "$.constraint_groups.fast.hostlist[0]") in [e[:3] for e in errs]
    # the job that uses it is told too, not silently placed everywhere
    assert any(e[1] == "workspace/jobs/api/manifest.json" and "itself invalid" in e[3] for e in errs)


def test_group_operator_needs_groups_plain_rfc31_stays_plain():
    from ansible_collections.maand.core.plugins.plugin_utils.placement.constraints import ConstraintError, compile_constraint
    with pytest.raises(ConstraintError) as exc:
        compile_constraint({"group": ["x"]})
    assert "unknown operator 'group'" in str(exc.value)


def test_constraint_groups_not_a_table(tmp_path):
    result = build_one(tmp_path, {}, '\nconstraint_groups = "fast"\n')
    assert ("ErrInvalidConstraint", "maand.conf", "$.constraint_groups") in [e[:3] for e in errors(result)]


# --- hardware ------------------------------------------------------------------------------------

@pytest.mark.parametrize("hardware, want", [
    ("mem=3G", ["10.0.0.1", "10.0.0.2", "10.0.0.4"]),
    ({"mem": "3G"}, ["10.0.0.1", "10.0.0.2", "10.0.0.4"]),
    ("ram=5G", ["10.0.0.2", "10.0.0.4"]),
    ("mem=3 gb cores=4", ["10.0.0.2", "10.0.0.4"]),
    ("cpu=8ghz", ["10.0.0.2", "10.0.0.4"]),
    ({"cpu": 8000}, ["10.0.0.2", "10.0.0.4"]),
    ("storage=50G", ["10.0.0.1", "10.0.0.2"]),  # 10.0.0.3 has no storage: unknown does not satisfy
    ("mem=max", ["10.0.0.4"]),
    ("storage=max", ["10.0.0.2"]),
    ("mem=0 cores=0", ALL),  # 0 = don't care
    ("", ALL),
])
def test_hardware_through_the_build(tmp_path, hardware, want):
    result = build_one(tmp_path, {"hardware": hardware})
    assert result.report.ok, errors(result)
    assert hosts_of(result, "api") == want


def test_bucket_hardware_default_job_override_and_empty_restores_default(tmp_path):
    conf = 'hardware = "mem=5G cores=2"\n'
    assert hosts_of(build_one(tmp_path, {}, conf), "api") == ["10.0.0.2", "10.0.0.4"]
    # job overrides mem only; cores=2 still inherited
    assert hosts_of(build_one(tmp_path, {"hardware": "mem=3G"}, conf), "api") == ["10.0.0.1", "10.0.0.2", "10.0.0.4"]
    # empty value: back to the built-in default (no constraint) for that key
    assert hosts_of(build_one(tmp_path, {"hardware": "mem="}, conf), "api") == ["10.0.0.1", "10.0.0.2", "10.0.0.4"]
    assert hosts_of(build_one(tmp_path, {"hardware": {"mem": None, "cores": ""}}, conf), "api") == ALL
    # object form in maand.conf
    assert hosts_of(build_one(tmp_path, {}, '[hardware]\nmem = "10G"\n'), "api") == ["10.0.0.4"]


@pytest.mark.parametrize("hardware, path, words", [
    ("disk=3G", "$.hardware.disk", "unknown hardware key"),
    ("mem=3X", "$.hardware.mem", "bad unit"),
    ({"cores": 1.5}, "$.hardware.cores", "whole number"),
    ("mem=-1", "$.hardware.mem", "negative"),
    ("mem=1G ram=2G", "$.hardware.ram", "duplicate"),
    ("mem=3G,cores=2", "$.hardware.mem", "separate key=value pairs with spaces"),
])
def test_bad_hardware_is_an_error_with_path_and_fix(tmp_path, hardware, path, words):
    result = build_one(tmp_path, {"hardware": hardware})
    found = [e for e in errors(result) if e[2] == path]
    assert found, errors(result)
    assert found[0][0] == "ErrInvalidConstraint" and found[0][1] == "workspace/jobs/api/manifest.json"
    assert words in found[0][3] and found[0][3].startswith("job api: ") and found[0][4]
    assert result.catalog is None


def test_bad_bucket_hardware_default_names_maand_conf(tmp_path):
    result = build_one(tmp_path, {}, 'hardware = "mem=lots"\n')
    assert [e[:3] for e in errors(result)] == [("ErrInvalidConstraint", "maand.conf", "$.hardware.mem")]


def test_reservations_still_charge_capacity_with_hardware(tmp_path):
    # hardware says 2G+ is enough, but two 3 GB reservations do not fit 4 GB: capacity error as before
    make_bucket(tmp_path, FLEET[:1], {
        "a": {"selectors": ["worker"], "hardware": "mem=2G", "resources": {"memory": {"max": "3 gb"}}},
        "b": {"selectors": ["worker"], "resources": {"memory": {"max": "3 gb"}}},
    }, maand_conf=CONF)
    result = _service.compute(str(tmp_path))
    assert [e[0] for e in errors(result)] == ["ErrInsufficientResource"]


def test_catalog_records_rules_only_for_jobs_that_use_them(tmp_path):
    make_bucket(tmp_path, FLEET, {"plain": {"selectors": ["worker"]},
                                  "fancy": {"selectors": ["worker"], "hardware": "mem=3G",
                                            "constraints": {"properties": ["ssd"]}}}, maand_conf=CONF)
    result = _service.compute(str(tmp_path))
    jobs = {j["name"]: j for j in result.catalog["jobs"]}
    assert "hardware" not in jobs["plain"] and "constraints" not in jobs["plain"]
    assert jobs["fancy"]["hardware"] == "mem=3072" and jobs["fancy"]["constraints"] == {"properties": ["ssd"]}
    json.dumps(result.catalog)
