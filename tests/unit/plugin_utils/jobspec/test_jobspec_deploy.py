"""Deploy side of job specs (seed 004): environment expansion on the controller, environment changes
in the plan by key only, the worker order with estimates, run fields of ops, history."""

from __future__ import annotations

import json

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from ansible_collections.maand.core.plugins.plugin_utils.jobspec import deploy as _deploy
from tests.unit.plugin_utils.deploy.test_deploy_plan import BID, _settle, catalog, content, job, states


def digest_key():
    return _deploy.env_digest_key(b"k" * 32)


SPEC = {"environment": [{"vars": {"DB": "$env{DB_URL}", "LOG": "$env{LOG_LEVEL:-info}"}, "extend": True}],
        "initial_environment": {}, "working_directory": "bin", "user": "nobody", "timeout": 5, "priority": 0}


def test_expand_and_unknown_variable_names_job_file_and_variable():
    assert _deploy.expand("api", SPEC, {"DB_URL": "pg://x"}.get) == {"DB": "pg://x", "LOG": "info"}
    with pytest.raises(_deploy.EnvError, match=r"^job api: workspace/jobs/api/manifest.json: environment\[0\].vars.DB: "
                       r"unknown variable 'DB_URL'"):
        _deploy.expand("api", SPEC, {}.get)
    spec = dict(SPEC, environment=[dict(SPEC["environment"][0], origin="workspace/containers/base.json: environment")])
    with pytest.raises(_deploy.EnvError, match=r"^job api: workspace/containers/base.json: environment.vars.DB: "):
        _deploy.expand("api", spec, {}.get)


def test_check_env_names_every_in_scope_job_and_no_value():
    bad = dict(SPEC, environment=[{"vars": {"A": "$env{MISSING_A}"}, "extend": True,
                                   "origin": "workspace/containers/base.json: environment"}])
    cat = catalog([dict(job("api"), spec=SPEC), dict(job("web"), spec=bad), job("plain")], [])
    errors = _deploy.check_env(cat, ["api", "web", "plain"], {}.get)
    assert len(errors) == 2, errors
    assert errors[0].startswith("job api: workspace/jobs/api/manifest.json: environment[0].vars.DB: "
                                "unknown variable 'DB_URL' (set it in the controller's environment"), errors
    assert errors[1].startswith("job web: workspace/containers/base.json: environment.vars.A: "
                                "unknown variable 'MISSING_A'"), errors
    assert _deploy.check_env(cat, ["api", "plain"], {"DB_URL": "pg://secret-value"}.get) == []  # web out of scope
    errors = _deploy.check_env(cat, ["api", "web"], {"DB_URL": "pg://secret-value"}.get)
    assert errors and not any("secret-value" in e for e in errors), errors
    assert _deploy.check_env(cat, ["plain"], {}.get) == []


def test_env_digests_hide_values_and_change_with_them():
    cont = content("api")["api"]
    one = _deploy.with_env(cont, BID, "api", {"DB": "secret-1"}, digest_key)
    two = _deploy.with_env(cont, BID, "api", {"DB": "secret-2"}, digest_key)
    assert one["hash"] != two["hash"] != cont["hash"]
    assert "secret" not in json.dumps(one)
    assert _deploy.with_env(cont, BID, "api", {}, digest_key) is cont  # no environment: the hash a bucket had before


def test_env_digests_are_hmacs_keyed_from_the_kv_key():
    """L8: not a public-salt hash anyone can test guesses against: another KV key gives another digest."""
    cont = content("api")["api"]
    one = _deploy.with_env(cont, BID, "api", {"DB": "secret-1"}, digest_key)
    other = _deploy.with_env(cont, BID, "api", {"DB": "secret-1"}, lambda: _deploy.env_digest_key(b"o" * 32))
    assert one["files"][".maand-env/DB"] != other["files"][".maand-env/DB"]
    assert _deploy.env_digest_key(b"k" * 32) != b"k" * 32
    assert not hasattr(_deploy, "DIGEST_ROUNDS")
    called = []
    assert _deploy.with_env(cont, BID, "api", {}, lambda: called.append(1)) is cont and not called  # no key read


def test_changed_environment_restarts_and_says_which_key():
    cat = catalog([job("api")], [("api", "h1", "active")])
    old = {"api": _deploy.with_env(content("api")["api"], BID, "api", {"DB": "a", "LOG": "info"}, digest_key)}
    st = _settle(cat, old, ["h1"])
    new = {"api": _deploy.with_env(content("api")["api"], BID, "api", {"DB": "b", "LOG": "info"}, digest_key)}
    plan = _plan.compute_plan(cat, new, st, ["h1"])
    row = plan["rows"][0]
    assert row["action"] == "restart" and row["reason"] == "environment changed: DB"
    assert "content changed" not in row["reason"]


def test_attach_orders_by_priority_then_longest_estimate_and_marks_ops():
    jobs = [job(n) for n in ("a", "b", "c", "d")]
    cat = catalog(jobs, [(n, "h1", "active") for n in "abcd"], workers=("h1",))
    cat["workers"][0]["cores"] = 2
    plan = _plan.compute_plan(cat, content(*"abcd"), states(["h1"]), ["h1"])
    specs = {"a": {"estimated_duration": 1}, "b": {"estimated_duration": 8}, "c": {"priority": 5},
             "d": dict(SPEC, estimated_duration=3)}
    history = {"targets": {"a/start": {"timings": [1], "failed": False}, "b/start": {"timings": [1]},
                           "c/start": {"timings": [1]}, "d/start": {"timings": [1]}}}
    attached = _plan.with_job_specs(_plan.Plan.from_json(plan), specs, {"h1": cat["workers"][0]}, history).to_json()
    lines, plan = attached["lines"][len(plan["lines"]):], attached
    assert len(plan["steps"]) == 1
    meta, *ops = plan["steps"][0]["ops"]["h1"]
    assert meta["kind"] == "meta" and meta["slots"] == 2  # without a target: first, marked, not reordered
    assert [o["job"] for o in ops] == ["c", "b", "d", "a"]
    assert all(o["slots"] == 2 for o in ops)
    assert ops[2]["spec"]["working_directory"] == "bin" and "spec" not in ops[3]
    assert lines == ["worker order (priority, longest estimate first; slots in parallel):",
                     "  step 0 on h1: 2 slot(s): c (1s), b (8s), d (3s), a (1s)"]


def test_estimates_from_history_and_failed_last_time_first():
    ops = [{"id": j + "@h", "job": j, "target": "start"} for j in ("x", "y", "z")]
    history = {"targets": {"x/start": {"timings": [2, 4, 6]}, "y/start": {"timings": [9]},
                           "z/start": {"timings": [1], "failed": True}}}
    ordered, runs = _deploy.order_host_ops(ops, {}, history, 1)
    assert [o["job"] for o in ordered] == ["z", "y", "x"]
    assert [r.estimated_duration for r in runs] == [1, 9, 4]


def test_slots_for():
    assert _deploy.slots_for({"cores": 8}) == 8 and _deploy.slots_for({}) == 2 and _deploy.slots_for({"cores": 8}, 3) == 3


def test_runtime_op_puts_values_only_in_the_request():
    op = {"id": "api@h1", "job": "api", "target": "start", "env": {"NEW_VERSION": "2", "DB": "mine"},
          "spec": _deploy.op_spec(SPEC)}
    out = _deploy.runtime_op(op, {"DB_URL": "pg://x"}.get)
    assert out["env"] == {"DB": "mine", "LOG": "info", "NEW_VERSION": "2"}  # the op's own variables win
    assert (out["cwd"], out["user"], out["timeout"]) == ("bin", "nobody", 5) and "spec" not in out
    assert "spec" in op and "pg://x" not in json.dumps(op)
    with pytest.raises(_deploy.EnvError):
        _deploy.runtime_op(op, {}.get)


def test_record_history_keeps_last_three_per_allocation(tmp_path):
    (tmp_path / "data").mkdir()
    for seconds in (1, 2, 3, 4):
        _deploy.record_history(str(tmp_path), [("api", "start", seconds, False, "h1")])
    _deploy.record_history(str(tmp_path), [("api", "start", 7, True, "h2"), ("web", "start", 7, True, "h1")])
    hist = _deploy.load_history(str(tmp_path))
    assert hist["targets"]["api/start@h1"] == {"timings": [2.0, 3.0, 4.0], "failed": False}
    assert hist["targets"]["api/start@h2"] == {"timings": [7.0], "failed": True}
    assert hist["targets"]["web/start@h1"]["failed"] is True
    ops = [{"id": "api@" + h, "job": "api", "host": h, "target": "start"} for h in ("h1", "h2")]
    assert [_deploy._queued(op, {}, hist).priority for op in ops] == [0, 1]  # h2 failed last time, h1 did not


def test_unknown_user_or_group_on_a_worker_refuses_the_plan():
    cat = catalog([dict(job("api"), spec={"user": "svc", "group": "svc"}), job("web")],
                  [("api", "h1", "active"), ("api", "h2", "active"), ("api", "h3", "disabled"), ("web", "h1", "active")])
    st = states(["h1", "h2", "h3"])
    st["h1"].update(users=["root", "svc"], groups=["root", "svc"])
    st["h2"].update(users=["root"], groups=["root", "svc"])
    st["h3"].update(users=[], groups=[])
    errors = _deploy.check_ids(cat, st, ["api", "web"])
    assert errors == ["job api: user 'svc' does not exist on worker h2; create it there, or fix \"user\" in "
                      "workspace/jobs/api/manifest.json (or the container it inherits from)"]
    assert _deploy.check_ids(cat, st, ["web"]) == []
    del st["h2"]["users"]  # an older agent: not checked here (the worker names it when make would run)
    assert _deploy.check_ids(cat, st, ["api"]) == []


def test_read_state_lists_users_and_groups(tmp_path):
    import os
    import pwd
    from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent
    st = _agent.read_state(str(tmp_path / "nope"))
    assert "root" in st["users"] and "root" in st["groups"]
    assert (st["euid"], st["egid"]) == (os.geteuid(), os.getegid())
    assert st["euser"] == pwd.getpwuid(os.geteuid()).pw_name and st["egroup"] in st["groups"]
    json.dumps(st)  # travels as JSON


def test_specs_that_need_root_are_refused_at_plan_on_a_non_root_agent():
    """network, mounts, a read-only file system and a switch to another user or group need root:
    on a worker whose agent is not root the plan refuses, naming job, worker, field and the fix."""
    jobs = [dict(job("net"), spec={"network": "disabled"}), dict(job("ro"), spec={"enable_writable_file_system": False}),
            dict(job("mnt"), spec={"mounts": [{"type": "tmp", "mount_point": "/tmp"}]}),
            dict(job("own"), spec={"user": "deploy", "group": 1000, "network": "local"}),
            dict(job("other"), spec={"user": "svc"}), dict(job("plain"), spec={"timeout": 5})]
    names = [j["name"] for j in jobs]
    cat = catalog(jobs, [(n, "h1", "active") for n in names] + [(n, "h2", "active") for n in names])
    st = states(["h1", "h2"])
    common = dict(users=["root", "deploy", "svc"], groups=["root", "deploy"])
    st["h1"].update(common, euid=1000, egid=1000, euser="deploy", egroup="deploy")
    st["h2"].update(common, euid=0, egid=0, euser="root", egroup="root")
    errors = _deploy.check_ids(cat, st, names)
    assert [e.split(" needs root")[0] for e in errors] == [
        'job net: "network": "disabled"', 'job ro: "enable_writable_file_system": false',
        'job mnt: "mounts": "1 mount(s)"', 'job other: "user": "svc"']  # own user/group, local network: fine
    assert all("on worker h1, but the maand agent runs there as deploy (uid 1000); set use_sudo = true in "
               "maand.conf (ansible_become), or drop" in e for e in errors), errors
    assert errors[0].endswith('drop "network" from workspace/jobs/net/manifest.json (or the container it '
                              'inherits from)')
    assert _deploy.check_ids(cat, st, ["plain", "own"]) == []
    del st["h1"]["euid"]  # an older agent: not checked here (the worker names it when make would run)
    assert _deploy.check_ids(cat, st, names) == []


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as hst  # noqa: E402

_JOB = hst.tuples(hst.integers(-3, 3), hst.one_of(hst.none(), hst.integers(0, 20)), hst.booleans(), hst.booleans())


@given(hst.lists(_JOB, max_size=12), hst.integers(1, 4))
@settings(max_examples=200, deadline=None)
def test_worker_order_is_maelstroms_order_property(jobs, slots):
    """Any mix: a permutation, ops without target first, then priority (+1 when never run or failed)
    descending, within a priority unknown estimates first, then the longest first."""
    ops, specs, history = [], {}, {"targets": {}}
    for i, (priority, estimate, has_target, ran) in enumerate(jobs):
        name = "j%d" % i
        ops.append({"id": name + "@h", "job": name, "host": "h", "target": "start" if has_target else None})
        specs[name] = {"priority": priority, "estimated_duration": estimate}
        if ran:
            history["targets"][name + "/start@h"] = {"timings": [1.0], "failed": False}
    ordered, runs = _deploy.order_host_ops(ops, specs, history, slots)
    assert sorted(o["id"] for o in ordered) == sorted(o["id"] for o in ops)
    quiet = [o for o in ordered if not o["target"]]
    assert ordered[:len(quiet)] == quiet
    keys = []
    for op in ordered[len(quiet):]:
        spec = specs[op["job"]]
        bump = 0 if (op["job"] + "/start@h") in history["targets"] else 1
        est = spec["estimated_duration"]
        if est is None and bump == 0:
            est = 1.0
        keys.append((-(spec["priority"] + bump), 0 if est is None else 1, -(est or 0)))
    assert keys == sorted(keys)
    assert len(runs) == len(ordered) - len(quiet) and all(0 <= r.slot < slots for r in runs)
