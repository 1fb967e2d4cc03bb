"""Unit tests for the deploy plan core: batching, hashing, restart_globs, plan decisions, catalog prune."""

from __future__ import annotations

import copy
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.bucket import content as _content
from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan

BID = "11111111-2222-4333-8444-555555555555"


# --- batching ----------------------------------------------------------------------------------

@given(st.lists(st.integers(), unique=True, max_size=40), st.integers(min_value=-2, max_value=50))
@settings(max_examples=300, deadline=None)
def test_batches_cover_every_item_once_in_order_and_respect_size(items, size):
    out = _plan.batches(items, size)
    flat = [x for b in out for x in b]
    assert flat == items  # every item exactly once, stable order
    assert all(b for b in out)  # no empty batch
    if size > 0:
        assert all(len(b) <= size for b in out)
        assert len(out) == (-(-len(items) // size) if items else 0)
    else:
        assert len(out) == (1 if items else 0)


def test_batches_examples():
    assert _plan.batches(["a", "b", "c"], 0) == [["a", "b", "c"]]
    assert _plan.batches(["a", "b", "c"], 2) == [["a", "b"], ["c"]]
    assert _plan.batches([], 3) == []


# --- hashing -----------------------------------------------------------------------------------

def _tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_hash_tree_lists_files_and_skips_runtime_dirs(tmp_path):
    root = _tree(tmp_path, {"Makefile": "x", "conf/a.conf": "1", "data/db": "keep", "logs/l": "l", "bin/b": "b",
                            "conf/data/nested": "n"})
    h = _content.hash_tree(str(root))
    assert sorted(h["files"]) == ["Makefile", "conf/a.conf", "conf/data/nested"]
    assert h["hash"] == _content.tree_hash(h["files"])


def test_hash_changes_with_content_mode_add_remove(tmp_path):
    root = _tree(tmp_path, {"Makefile": "x", "a": "1"})
    base = _content.hash_tree(str(root))["hash"]
    (root / "a").write_text("2")
    h2 = _content.hash_tree(str(root))
    assert h2["hash"] != base
    os.chmod(root / "a", 0o755)
    h3 = _content.hash_tree(str(root))
    assert h3["hash"] != h2["hash"]
    assert _content.changed_paths(h2["files"], h3["files"]) == ["a"]
    (root / "b").write_text("")
    h4 = _content.hash_tree(str(root))
    assert _content.changed_paths(h3["files"], h4["files"]) == ["b"]
    (root / "a").unlink()
    assert _content.changed_paths(h4["files"], _content.hash_tree(str(root))["files"]) == ["a"]


def test_hash_tree_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(_content.ContentError, match="does not exist"):
        _content.hash_tree(str(tmp_path / "nope"))


@given(st.dictionaries(st.text("abc/", min_size=1, max_size=6), st.text("0123456789abcdef", min_size=4, max_size=4),
                       max_size=8))
def test_tree_hash_is_order_independent(files):
    items = list(files.items())
    assert _content.tree_hash(dict(items)) == _content.tree_hash(dict(reversed(items)))


# --- restart_globs -----------------------------------------------------------------------------

@pytest.mark.parametrize("pattern,rel,expected", [
    ("nginx.conf", "nginx.conf", True),
    ("nginx.conf", "conf/nginx.conf", True),        # literal matches the base name
    ("*.conf", "conf/a.conf", True),                # no slash: base name
    ("*.conf", "a.txt", False),
    ("conf/*.conf", "conf/a.conf", True),
    ("conf/*.conf", "conf/sub/a.conf", False),      # * never crosses /
    ("conf/", "conf/sub/a", True),                  # trailing slash: folder prefix
    ("conf/**", "conf/sub/a", True),
    ("conf/**", "confx/a", False),
    ("**/*.conf", "a/b/c.conf", True),
    ("**/etc/*.conf", "etc/x.conf", True),
    ("**/etc/*.conf", "var/x.conf", False),
    ("templates/**/*.tpl", "templates/a/b.tpl", True),
    ("templates/**.tpl", "templates/a/b.tpl", False),   # as maand: the suffix is matched as a whole glob
    ("?.txt", "a.txt", True),
    ("[ab].txt", "c.txt", False),
    ("[!ab].txt", "c.txt", True),
    ("Makefile", "sub/Makefile", True),
])
def test_glob_match(pattern, rel, expected):
    assert _content.glob_match(pattern, rel) is expected


def test_match_any_keeps_order_and_uniqueness():
    assert _content.match_any(["*.conf", "a.conf"], ["b.txt", "a.conf", "c.conf", "a.conf"]) == ["a.conf", "c.conf"]
    assert _content.match_any([], ["a"]) == []


@pytest.mark.parametrize("bad", ["", "   ", "[abc", "x\\"])
def test_validate_glob_rejects_malformed(bad):
    with pytest.raises(_content.GlobError):
        _content.validate_glob(bad)


# --- policy --------------------------------------------------------------------------------------

def test_lifecycle_action_mirrors_maand():
    assert _plan.lifecycle_action("always", [], ["a"], True, False, False) == ("restart", [])
    assert _plan.lifecycle_action("never", [], ["a"], True, False, False) == ("sync", [])
    assert _plan.lifecycle_action("reload", [], ["a"], True, False, False) == ("reload", [])
    assert _plan.lifecycle_action("reload", ["*.conf"], ["x.conf", "y"], True, False, False) == ("restart", ["x.conf"])
    assert _plan.lifecycle_action("reload", ["*.conf"], ["y"], True, False, False) == ("reload", [])
    assert _plan.lifecycle_action("reload", ["*.conf"], [], False, True, False) == ("reload", [])  # version only
    assert _plan.lifecycle_action("always", [], ["a"], True, False, True) == ("sync", [])  # sync_only


# --- plan --------------------------------------------------------------------------------------

def job(name, **kw):
    rec = {"name": name, "version": "1.0.0", "path": "workspace/jobs/%s" % name, "deployment_seq": 0,
           "restart_policy": "always", "restart_globs": [], "max_concurrent_starts": 0,
           "max_concurrent_upgrades": 1, "health_check": {}, "ports": {}, "removed": False}
    rec.update(kw)
    return rec


def catalog(jobs, allocs, workers=("h1", "h2", "h3"), removed_workers=()):
    ws = [{"host": h, "labels": ["worker"], "position": i, "removed": False} for i, h in enumerate(workers)]
    ws += [{"host": h, "labels": ["worker"], "position": None, "removed": True} for h in removed_workers]
    return {"format": 1, "bucket_id": BID, "workers": ws, "jobs": jobs,
            "allocations": [{"job": j, "worker": w, "alloc_id": "%s-%s" % (j, w), "state": s, "deployment_seq": 0}
                            for j, w, s in allocs]}


def content(*names, files=None):
    out = {}
    for n in names:
        f = dict(files or {"Makefile": "m1", "conf/a.conf": "c1"})
        out[n] = {"hash": _content.tree_hash(f), "files": f}
    return out


def record(name, cont, version="1.0.0", running=True, host="h1"):
    return _plan.state_record(name, "%s-%s" % (name, host), cont[name], version, running, 1)


def states(hosts, deployed=None, unreachable=()):
    out = {}
    for h in hosts:
        if h in unreachable:
            out[h] = {"reachable": False, "error": "ssh: connect refused"}
        else:
            d = (deployed or {}).get(h, {})
            out[h] = {"reachable": True, "worker": None, "jobs": None, "deployed": d, "trees": sorted(d)}
    return out


def actions(plan):
    return {(r["job"], r["worker"]): r["action"] for r in plan["rows"]}


def test_first_deploy_starts_everything_in_one_step_with_meta():
    cat = catalog([job("api"), job("web")], [("api", "h1", "active"), ("api", "h2", "active"), ("web", "h1", "active")])
    plan = _plan.compute_plan(cat, content("api", "web"), states(["h1", "h2", "h3"]), ["h1", "h2", "h3"])
    assert not plan["errors"]
    assert actions(plan) == {("api", "h1"): "start", ("api", "h2"): "start", ("web", "h1"): "start"}
    assert plan["update_seq"] == 1
    # nothing to reconcile: worker.json/jobs.json ride first in every host's request of the first wave step
    assert len(plan["steps"]) == 1 and plan["steps"][0]["label"] == "wave 0: api start batch 1/1; web start batch 1/1"
    wave = plan["steps"][0]
    assert {h: [o["id"] for o in ops] for h, ops in wave["ops"].items()} == {
        "h1": ["meta@h1", "api@h1", "web@h1"], "h2": ["meta@h2", "api@h2"], "h3": ["meta@h3"]}
    runs = [o for ops in wave["ops"].values() for o in ops if o["kind"] != "meta"]
    assert len(runs) == 3 and all(o["target"] == "start" and o["sync"] and o["promote_now"] for o in runs)
    assert wave["ops"]["h3"][0]["worker_json"]["update_seq"] == 1
    assert wave["ops"]["h1"][1]["env"] == {"CURRENT_VERSION": "0.0.0", "NEW_VERSION": "1.0.0", "JOB": "api",
                                           "ALLOCATION_ID": "api-h1", "ALLOCATION_IP": "h1", "ALLOCATION_INDEX": "0"}
    assert plan["has_work"]


def _deployed_everywhere(cat, cont, hosts):
    d = {}
    for a in cat["allocations"]:
        if a["state"] == "active":
            d.setdefault(a["worker"], {})[a["job"]] = record(a["job"], cont, host=a["worker"])
    st = states(hosts, d)
    for h in hosts:
        w, j = None, None
        st[h]["worker"], st[h]["jobs"] = w, j
    return st


def _settle(cat, cont, hosts):
    """States as a successful deploy leaves them (meta written too)."""
    st = _deployed_everywhere(cat, cont, hosts)
    plan = _plan.compute_plan(cat, cont, st, hosts)
    for h, ops in (plan["steps"][0]["ops"] if plan["steps"] else {}).items():
        for o in ops:
            if o["kind"] == "meta":
                st[h]["worker"] = o["worker_json"]
                st[h]["jobs"] = o["jobs_json"]
    return st


def test_unchanged_is_all_skip_and_no_steps():
    cat = catalog([job("api")], [("api", "h1", "active"), ("api", "h2", "active")])
    cont = content("api")
    st = _settle(cat, cont, ["h1", "h2"])
    plan = _plan.compute_plan(cat, cont, st, ["h1", "h2"])
    assert set(actions(plan).values()) == {"skip"}
    assert plan["steps"] == [] and not plan["has_work"]
    assert plan["update_seq"] == plan["previous_update_seq"]
    assert "no changes required" in plan["lines"][0]


def test_content_change_restarts_in_batches_of_max_concurrent_upgrades_with_paths():
    cat = catalog([job("api", max_concurrent_upgrades=2)], [("api", h, "active") for h in ("h1", "h2", "h3")])
    cont = content("api")
    st = _settle(cat, cont, ["h1", "h2", "h3"])
    new = content("api", files={"Makefile": "m1", "conf/a.conf": "c2", "new.txt": "n"})
    plan = _plan.compute_plan(cat, new, st, ["h1", "h2", "h3"])
    assert set(actions(plan).values()) == {"restart"}
    rows = {r["worker"]: r for r in plan["rows"]}
    assert rows["h1"]["paths"] == ["conf/a.conf", "new.txt"]
    assert "content changed: conf/a.conf, new.txt" in rows["h1"]["reason"]
    rollout = [s for s in plan["steps"] if s["wave"] is not None]
    assert [sorted(h for h, ops in s["ops"].items() if any(o["kind"] == "run" for o in ops)) for s in rollout] == [
        ["h1", "h2"], ["h3"]]
    # the new update_seq of each worker rides first in its own batch (no session of pure metadata)
    assert [{h: [o["kind"] for o in ops] for h, ops in s["ops"].items()} for s in rollout] == [
        {"h1": ["meta", "run"], "h2": ["meta", "run"]}, {"h3": ["meta", "run"]}]
    assert [s["last_in_wave"] for s in rollout] == [False, True]


def test_version_bump_with_reload_policy_and_globs():
    j = job("web", restart_policy="reload", restart_globs=["*.conf"], version="1.1.0")
    cat = catalog([j], [("web", "h1", "active"), ("web", "h2", "active")])
    cont = content("web")
    st = _settle(cat, cont, ["h1", "h2"])
    # version only -> reload
    plan = _plan.compute_plan(cat, cont, st, ["h1", "h2"])
    assert set(actions(plan).values()) == {"reload"}
    row = plan["rows"][0]
    assert "version 1.0.0 -> 1.1.0" in row["reason"]
    op = next(o for o in plan["steps"][-1]["ops"]["h2"] if o["kind"] == "run")
    assert op["env"] == {"CURRENT_VERSION": "1.0.0", "NEW_VERSION": "1.1.0", "JOB": "web", "ALLOCATION_ID": "web-h2",
                         "ALLOCATION_IP": "h2", "ALLOCATION_INDEX": "1"} and op["sync"] is False
    # a .conf changed -> restart, naming the match
    new = content("web", files={"Makefile": "m1", "conf/a.conf": "c9"})
    plan = _plan.compute_plan(cat, new, st, ["h1", "h2"])
    assert set(actions(plan).values()) == {"restart"}
    assert "restart_globs matched: conf/a.conf" in plan["rows"][0]["reason"]
    # only the Makefile changed -> reload
    new = content("web", files={"Makefile": "m2", "conf/a.conf": "c1"})
    plan = _plan.compute_plan(cat, new, st, ["h1", "h2"])
    assert set(actions(plan).values()) == {"reload"}


def test_never_policy_syncs_files_only_and_promotes_immediately():
    cat = catalog([job("cfg", restart_policy="never")], [("cfg", "h1", "active")])
    cont = content("cfg")
    st = _settle(cat, cont, ["h1"])
    new = content("cfg", files={"x": "1"})
    plan = _plan.compute_plan(cat, new, st, ["h1"])
    assert actions(plan) == {("cfg", "h1"): "sync"}
    assert [o["kind"] for o in plan["steps"][-1]["ops"]["h1"]] == ["meta", "run"]
    op = plan["steps"][-1]["ops"]["h1"][1]
    assert op["target"] is None and op["sync"] and op["promote_now"]


def test_disabled_running_is_stopped_and_not_synced_then_reenable_starts():
    cat = catalog([job("api")], [("api", "h1", "active"), ("api", "h2", "active")])
    cont = content("api")
    st = _settle(cat, cont, ["h1", "h2"])
    cat2 = copy.deepcopy(cat)
    cat2["allocations"][1]["state"] = "disabled"
    plan = _plan.compute_plan(cat2, content("api", files={"changed": "1"}), st, ["h1", "h2"])
    assert actions(plan)[("api", "h2")] == "stop"
    ops = [o for ops in plan["steps"][0]["ops"].values() for o in ops if o["kind"] != "meta"]
    assert [(o["kind"], o["target"], o["record"]["running"]) for o in ops] == [("stop", "stop", False)]
    assert not any(o["host"] == "h2" for s in plan["steps"][1:] for ops in s["ops"].values() for o in ops)
    # after the stop: disabled and not running -> skip
    st["h2"]["deployed"]["api"]["running"] = False
    plan = _plan.compute_plan(cat2, cont, st, ["h1", "h2"])
    assert actions(plan)[("api", "h2")] == "skip"
    # re-enabled -> start, no sync when content is unchanged
    plan = _plan.compute_plan(cat, cont, st, ["h1", "h2"])
    assert actions(plan)[("api", "h2")] == "start"
    op = [o for s in plan["steps"] for o in s["ops"].get("h2", []) if o["kind"] == "run"][0]
    assert op["target"] == "start" and op["sync"] is False


def test_removed_allocation_and_removed_worker():
    cat = catalog([job("api"), job("old", removed=True)],
                  [("api", "h1", "active"), ("old", "h1", "removed"), ("api", "h9", "removed")],
                  workers=("h1",), removed_workers=("h9",))
    cont = content("api", "old")
    d = {"h1": {"api": record("api", cont), "old": record("old", cont)}, "h9": {"api": record("api", cont, host="h9")}}
    st = states(["h1", "h9"], d)
    plan = _plan.compute_plan(cat, content("api"), st, ["h1", "h9"])
    acts = actions(plan)
    assert acts[("old", "h1")] == "remove" and acts[("api", "h9")] == "remove" and acts[(None, "h9")] == "purge"
    step0 = plan["steps"][0]["ops"]
    assert [o["kind"] for o in step0["h9"]] == ["remove", "purge"]
    assert [o["target"] for o in step0["h1"] if o["kind"] == "remove"] == ["stop"]


def test_unreachable_removed_worker_is_assumed_dead_and_unreachable_active_fails_only_its_allocs():
    cat = catalog([job("api")], [("api", "h1", "active"), ("api", "h2", "active"), ("api", "h9", "removed")],
                  workers=("h1", "h2"), removed_workers=("h9",))
    st = states(["h1", "h2", "h9"], unreachable=("h2", "h9"))
    plan = _plan.compute_plan(cat, content("api"), st, ["h1", "h2", "h9"])
    acts = actions(plan)
    assert acts[("api", "h1")] == "start"
    assert acts[("api", "h2")] == "unreachable"
    assert [f["worker"] for f in plan["failures"]] == ["h2"]
    assert "api@h2 not deployed: worker unreachable" in plan["failures"][0]["msg"]
    assert plan["dead_workers"] == ["h9"] and {"job": "api", "worker": "h9"} in plan["prune"]
    assert plan["has_work"]


def test_removed_with_nothing_deployed_is_only_pruned():
    cat = catalog([job("api")], [("api", "h1", "removed")], workers=("h1",))
    plan = _plan.compute_plan(cat, content(), states(["h1"]), ["h1"])
    assert actions(plan) == {("api", "h1"): "skip"}
    assert plan["prune"] == [{"job": "api", "worker": "h1"}]


def test_limit_only_plans_targeted_hosts():
    cat = catalog([job("api")], [("api", "h1", "active"), ("api", "h2", "active")])
    plan = _plan.compute_plan(cat, content("api"), states(["h1", "h2"]), ["h2"])
    assert list(actions(plan)) == [("api", "h2")]


def test_jobs_filter_force_and_sync_only():
    cat = catalog([job("api"), job("web", restart_policy="reload")], [("api", "h1", "active"), ("web", "h1", "active")])
    cont = content("api", "web")
    st = _settle(cat, cont, ["h1"])
    plan = _plan.compute_plan(cat, cont, st, ["h1"], {"jobs": "web", "force": True})
    assert actions(plan) == {("web", "h1"): "reload"}
    assert "forced" in plan["rows"][0]["reason"]
    plan = _plan.compute_plan(cat, cont, st, ["h1"], {"jobs": ["nope"]})
    assert plan["errors"] and "unknown job(s) nope" in plan["errors"][0] and not plan["steps"]
    # sync_only refuses when a start is needed
    plan = _plan.compute_plan(cat, cont, states(["h1"]), ["h1"], {"sync_only": True})
    assert any("maand_sync_only" in e and "needs a start" in e for e in plan["errors"])
    assert plan["steps"] == []
    plan = _plan.compute_plan(cat, content("api", "web", files={"z": "1"}), st, ["h1"], {"sync_only": True})
    assert set(actions(plan).values()) == {"sync"}


def test_inventory_job_records_are_not_a_filter():
    assert _plan.parse_jobs_filter({"api": {}}, ["api"])[1]  # a mapping is not a job list
    assert _plan.parse_jobs_filter("a, b", ["a", "b"]) == (["a", "b"], [])
    assert _plan.parse_jobs_filter(3, ["a"])[1]


def test_waves_follow_deployment_seq_and_health_gates_resolve_ports():
    hc = {"checks": [{"type": "tcp", "port": "http_port"}, {"type": "http", "port": 8080, "path": "health"}],
          "wait": {"attempts": 3, "interval_seconds": 0.5}}
    cat = catalog([job("db", deployment_seq=0), job("api", deployment_seq=1, health_check=hc, ports={"http_port": 30001},
                                                    max_concurrent_starts=1)],
                  [("db", "h1", "active"), ("api", "h1", "active"), ("api", "h2", "active")])
    plan = _plan.compute_plan(cat, content("db", "api"), states(["h1", "h2"]), ["h1", "h2"])
    waves = [s["wave"] for s in plan["steps"]]
    assert waves == [0, 1, 1]
    # maand's start semantics: no gate after api's first start batch, one after its last over both members
    assert plan["steps"][1]["gates"] == []
    gates = plan["steps"][2]["gates"]
    assert gates[0]["checks"] == [{"type": "tcp", "port": 30001},
                                  {"type": "http", "port": 8080, "path": "/health", "scheme": "http", "expect_status": 200}]
    assert gates[0]["hosts"] == ["h1", "h2"] and gates[0]["attempts"] == 3
    assert plan["steps"][1]["ops"]["h1"][0]["promote_now"] is False  # promoted after the gate
    # api's files (a fresh start of a later step) travel with h1's first rsync; h2 acts first in api's second
    # batch, where its metadata and its files go (one session on h2, none in the steps before)
    assert [{h: [(o["id"], o["kind"], o["sync"]) for o in ops] for h, ops in s["ops"].items()} for s in plan["steps"]] == [
        {"h1": [("meta@h1", "meta", False), ("db@h1", "run", True), ("api@h1/files", "files", True)]},
        {"h1": [("api@h1", "run", False)]},
        {"h2": [("meta@h2", "meta", False), ("api@h2", "run", True)]}]


@pytest.mark.parametrize("hc,msg", [
    ({"checks": [{"type": "udp", "port": 8080}]}, "not supported"),
    ({"checks": [{"type": "ssh"}]}, "needs the shell command"),
    ({"checks": [{"type": "tcp", "port": "nope"}]}, "is not a port of job api"),
    ({"checks": [{"type": "tcp", "port": 8080}], "wait": {"attempts": 0}}, "must be positive"),
])
def test_bad_health_check_fails_only_its_job(hc, msg):
    cat = catalog([job("api", health_check=hc), job("db")], [("api", "h1", "active"), ("db", "h1", "active")])
    plan = _plan.compute_plan(cat, content("api", "db"), states(["h1"]), ["h1"])
    assert plan["errors"] == []
    assert [f["job"] for f in plan["failures"]] == ["api"]
    assert msg in plan["failures"][0]["msg"] and "jobs/api/manifest.json health_check" in plan["failures"][0]["msg"]
    rows = {r["job"]: r for r in plan["rows"]}
    assert rows["api"]["action"] == "skip" and "health_check cannot run" in rows["api"]["reason"]
    assert rows["db"]["action"] == "start"
    ops = [o for s in plan["steps"] for os_ in s["ops"].values() for o in os_ if o.get("job")]
    assert {o["job"] for o in ops} == {"db"}  # db deploys, api is left out
    assert any(line.startswith("FAILED: job api not deployed") for line in plan["lines"])


def test_a_job_with_a_bad_probe_still_stops_its_disabled_allocations():
    hc = {"checks": [{"type": "udp", "port": 1}]}
    cat = catalog([job("api", health_check=hc)], [("api", "h1", "disabled")])
    cont = content("api")
    plan = _plan.compute_plan(cat, cont, states(["h1"], {"h1": {"api": record("api", cont)}}), ["h1"])
    assert [r["action"] for r in plan["rows"]] == ["stop"] and plan["failures"]


def test_an_ssh_probe_is_a_gate():
    hc = {"checks": [{"type": "ssh", "command": "systemctl is-active api"}]}
    cat = catalog([job("api", health_check=hc)], [("api", "h1", "active")])
    plan = _plan.compute_plan(cat, content("api"), states(["h1"]), ["h1"])
    assert not plan["errors"] and not plan["failures"]
    gates = [g for s in plan["steps"] for g in s["gates"]]
    assert gates[0]["checks"] == [{"type": "ssh", "command": "systemctl is-active api"}]


def test_block_after_failures():
    waves = {"db": 0, "cache": 0, "api": 1, "web": 2}
    assert _plan.block_after_failures(["db"], waves, 0, False, []) == ["db"]
    assert _plan.block_after_failures(["db"], waves, 0, True, []) == ["api", "db", "web"]
    assert _plan.block_after_failures([], waves, 0, True, ["x"]) == ["x"]


def test_prune_catalog_drops_only_cleaned_removed_rows():
    cat = catalog([job("api"), job("old", removed=True)],
                  [("api", "h1", "active"), ("old", "h1", "removed"), ("api", "h9", "removed"), ("api", "h2", "removed")],
                  workers=("h1", "h2"), removed_workers=("h9",))
    before = copy.deepcopy(cat)
    new = _plan.prune_catalog(cat, [{"job": "old", "worker": "h1"}, {"job": "api", "worker": "h1"}], dead_workers=["h9"])
    assert cat == before  # input untouched
    assert [(a["job"], a["worker"]) for a in new["allocations"]] == [("api", "h1"), ("api", "h2")]
    assert [w["host"] for w in new["workers"]] == ["h1", "h2"]
    assert [j["name"] for j in new["jobs"]] == ["api"]


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["h1", "h2", "h3"]),
                          st.sampled_from(["active", "disabled", "removed"])), unique_by=lambda t: t[:2]),
       st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["h1", "h2", "h3"]))))
def test_prune_never_drops_non_removed_rows(allocs, cleaned):
    cat = catalog([job("a"), job("b"), job("c")], allocs)
    new = _plan.prune_catalog(cat, [{"job": j, "worker": w} for j, w in cleaned])
    kept = {(a["job"], a["worker"]) for a in new["allocations"]}
    for j, w, s in allocs:
        if s != "removed" or (j, w) not in set(cleaned):
            assert (j, w) in kept


@given(st.integers(min_value=1, max_value=7), st.integers(min_value=0, max_value=4), st.integers(min_value=0, max_value=4))
@settings(max_examples=60, deadline=None)
def test_every_changed_allocation_is_scheduled_exactly_once(n_hosts, starts, upgrades):
    hosts = ["h%d" % i for i in range(n_hosts)]
    cat = catalog([job("a", max_concurrent_starts=starts, max_concurrent_upgrades=upgrades or 1)],
                  [("a", h, "active") for h in hosts], workers=hosts)
    cont = content("a")
    st_ = _settle(cat, cont, hosts)
    # half the hosts are new (no record), half are upgraded
    for h in hosts[::2]:
        st_[h]["deployed"] = {}
    new = content("a", files={"changed": "1"})
    plan = _plan.compute_plan(cat, new, st_, hosts)
    scheduled = [o["id"] for s in plan["steps"] for ops in s["ops"].values() for o in ops if o["kind"] == "run"]
    assert sorted(scheduled) == sorted("a@%s" % h for h in hosts)
    for s in plan["steps"]:
        run = [o for ops in s["ops"].values() for o in ops if o["kind"] == "run"]
        kinds = {o["action"] for o in run}
        if kinds == {"start"} and starts:
            assert len(run) <= starts
        if kinds == {"restart"}:
            assert len(run) <= (upgrades or 1)


# --- faults: an unpromoted start, another bucket's tree on a worker ------------------------------

def test_start_not_promoted_after_a_failed_gate_is_a_named_retry():
    cat = catalog([job("api")], [("api", "h1", "active"), ("api", "h2", "active")])
    st = states(["h1", "h2"])
    st["h1"]["pending"] = ["api"]  # the agent's deploy/api.pending marker: a start ran, never promoted
    plan = _plan.compute_plan(cat, content("api"), st, ["h1", "h2"])
    rows = {r["worker"]: r for r in plan["rows"]}
    assert rows["h1"]["action"] == "start" and rows["h1"]["reason"].startswith("retry: the previous start failed its gate")
    assert "retry" not in rows["h2"]["reason"]
    assert any("retry: the previous start failed its gate" in line for line in plan["lines"])


def test_a_worker_holding_another_bucket_id_is_refused_naming_both_ids_and_the_fix():
    cat = catalog([job("api")], [("api", "h1", "active")])
    st = states(["h1", "h2"])
    st["h2"]["others"] = [{"bucket_id": "old-id", "path": "/opt/worker/old-id"}]
    plan = _plan.compute_plan(cat, content("api"), st, ["h1", "h2"])
    assert plan["steps"] == [] and len(plan["errors"]) == 1
    err = plan["errors"][0]
    assert "h2" in err and "old-id" in err and BID in err
    assert "Restore the data/catalog.json" in err and "-e maand_adopt_bucket_id=old-id" in err
    # the head says refused, not "no changes required" above rows that list starts (issue 23 item 10)
    assert plan["lines"][0] == "deploy plan for bucket %s: refused, nothing will be changed (1 error, listed after " \
                               "the plan)" % BID, plan["lines"][0]
    st["h2"]["others"] = [{"bucket_id": BID, "path": "/opt/worker/x"}]   # same id elsewhere is not foreign
    assert not _plan.compute_plan(cat, content("api"), st, ["h1", "h2"])["errors"]


def test_unknown_jobs_in_maand_jobs_get_a_did_you_mean():
    dummy, errors = _plan.parse_jobs_filter("api,wbe", ["api", "web", "store"])
    assert errors and 'wbe (did you mean "web"?)' in errors[0]
    dummy, errors = _plan.parse_jobs_filter(["zzzz"], ["api", "web"])
    assert errors and "zzzz;" in errors[0] and "did you mean" not in errors[0]


# --- templates and the allocation context (_deploy_stage content, make environment) -----------------

def _rendered(files, origins):
    return {"hash": _content.tree_hash(files), "files": files, "origins": origins}


def test_rendered_content_per_allocation_drives_restarts_and_names_template_output():
    cat = catalog([job("api", ports={"api_http_port": 30001, "api_admin_port": 30002})],
                  [("api", "h1", "active"), ("api", "h2", "active")], workers=("h1", "h2"))
    old = {"Makefile": "m", "config.json": "c1"}
    new = {"Makefile": "m", "config.json": "c2", "certs/api.crt": "k"}
    content = {"api": {"hash": "job", "files": {"Makefile": "m"}, "origins": {},
                       "allocations": {"h1": _rendered(new, {"config.json": "template", "certs/api.crt": "certs"}),
                                       "h2": _rendered(old, {"config.json": "template"})}}}
    states = {h: {"reachable": True, "worker": None, "jobs": None, "trees": ["api"],
                  "deployed": {"api": _plan.state_record("api", "api-%s" % h, _rendered(old, {}), "1.0.0", True, 1)}}
              for h in ("h1", "h2")}
    plan = _plan.compute_plan(cat, content, states, ["h1", "h2"])
    rows = {r["worker"]: r for r in plan["rows"]}
    assert rows["h2"]["action"] == "skip"  # its own rendered output did not change: not touched
    assert rows["h1"]["action"] == "restart"
    assert "template output changed: config.json" in rows["h1"]["reason"]
    assert "certs changed: certs/api.crt" in rows["h1"]["reason"]
    op = next(o for s in plan["steps"] for ops in s["ops"].values() for o in ops if o["id"] == "api@h1")
    assert op["record"]["hash"] == content["api"]["allocations"]["h1"]["hash"]
    assert op["env"]["API_HTTP_PORT"] == "30001" and op["env"]["API_ADMIN_PORT"] == "30002"
    assert op["env"]["ALLOCATION_INDEX"] == "0" and op["env"]["ALLOCATION_IP"] == "h1"


def test_render_errors_refuse_the_deploy_and_skip_the_allocation():
    cat = catalog([job("api")], [("api", "h1", "active")], workers=("h1",))
    content = {"api": {"hash": "x", "files": {}, "allocations": {"h1": {"error": "job api, file a.tpl: boom"}}}}
    states = {"h1": {"reachable": True, "deployed": {}, "trees": []}}
    plan = _plan.compute_plan(cat, content, states, ["h1"], {"stage_errors": ["template: job api, file a.tpl: boom"]})
    assert plan["errors"] == ["template: job api, file a.tpl: boom"] and plan["steps"] == []
    assert plan["rows"][0]["action"] == "skip" and "cannot render" in plan["rows"][0]["reason"]


def test_allocation_index_counts_non_removed_allocations_in_worker_order():
    cat = catalog([job("api")], [("api", "h3", "active"), ("api", "h1", "disabled"), ("api", "h2", "removed")])
    position = {w["host"]: (w["position"], i) for i, w in enumerate(cat["workers"])}
    assert _plan.allocation_indexes(cat, position) == {("api", "h1"): 0, ("api", "h3"): 1}
    assert _plan.port_env({"b_port": 2, "a_port": 1}) == {"A_PORT": "1", "B_PORT": "2"}


def test_current_versions_and_seen_update_seq_from_worker_states():
    rec = _plan.state_record("api", "x", None, "1.2.0", True, 3)
    states = {"h1": {"deployed": {"api": rec}, "worker": {"update_seq": 4}},
              "h2": {"deployed": {"api": {"format": 99, "version": "9"}}, "worker": {"update_seq": "bad"}}}
    assert _plan.current_versions(states) == {("api", "h1"): "1.2.0"}
    assert _plan.seen_update_seq(states) == 4


def test_catalog_allocation_env_is_the_deploys():
    cat = catalog([job("api", ports={"api_http_port": 30001})], [("api", "h2", "active"), ("api", "h3", "active")])
    assert _plan.catalog_allocation_env(cat, "api", "h3", "1.0.0", "1.0.0") == {
        "ALLOCATION_ID": "api-h3", "ALLOCATION_IP": "h3", "ALLOCATION_INDEX": "1", "JOB": "api",
        "CURRENT_VERSION": "1.0.0", "NEW_VERSION": "1.0.0", "API_HTTP_PORT": "30001"}


# --- taking over from maand (issue 13): allocations maand deployed are adopted, not restarted ---

def test_adopted_allocations_sync_without_a_target_and_get_recorded():
    cat = catalog([job("api")], [("api", "h1", "active"), ("api", "h2", "active"), ("api", "h3", "active")])
    st = states(["h1", "h2", "h3"])
    st["h1"]["trees"] = ["api"]  # maand's tree, no maand.core record
    st["h2"]["trees"] = ["api"]
    adopted = {("api", "h1"): "1.0.0", ("api", "h2"): "0.9.0"}  # h3: maand never deployed it
    plan = _plan.compute_plan(cat, content("api"), st, ["h1", "h2", "h3"], {"adopted": adopted})
    assert not plan["errors"]
    assert actions(plan) == {("api", "h1"): "sync", ("api", "h2"): "restart", ("api", "h3"): "start"}
    rows = {r["worker"]: r for r in plan["rows"]}
    assert "taken over from maand" in rows["h1"]["reason"] and "0.9.0 -> 1.0.0" in rows["h2"]["reason"]
    ops = {o["host"]: o for s in plan["steps"] for ops in s["ops"].values() for o in ops if o.get("job") == "api"}
    assert ops["h1"]["target"] is None and ops["h1"]["sync"] and ops["h1"]["record"]["running"]
    assert ops["h2"]["target"] == "restart" and ops["h2"]["env"]["CURRENT_VERSION"] == "0.9.0"


def test_adoption_needs_the_tree_on_the_worker():
    cat = catalog([job("api")], [("api", "h1", "active")], workers=("h1",))
    plan = _plan.compute_plan(cat, content("api"), states(["h1"]), ["h1"], {"adopted": {("api", "h1"): "1.0.0"}})
    assert actions(plan) == {("api", "h1"): "start"}


def test_worker_and_jobs_json_are_maands_formats():
    cat = catalog([job("api")], [("api", "h1", "active")], workers=("h1",))
    cat["workers"][0]["worker_id"] = "wid-1"
    plan = _plan.compute_plan(cat, content("api"), states(["h1"]), ["h1"])
    meta = next(o for o in plan["steps"][0]["ops"]["h1"] if o["kind"] == "meta")
    assert {k: meta["worker_json"][k] for k in ("bucket_id", "worker_id", "worker_ip", "labels", "update_seq")} == {
        "bucket_id": BID, "worker_id": "wid-1", "worker_ip": "h1", "labels": ["worker"], "update_seq": 1}
    assert meta["jobs_json"] == [{"job": "api", "disabled": 0, "alloc_id": "api-h1", "version": "1.0.0"}]


def _two_waves(hosts=("h1", "h2")):
    return catalog([job("db", deployment_seq=0), job("api", deployment_seq=1)],
                   [("db", "h1", "active")] + [("api", h, "active") for h in hosts])


def _files_ops(plan):
    return {(s["index"], h): [o["of"] for o in ops if o["kind"] == "files"] for s in plan["steps"]
            for h, ops in s["ops"].items() if any(o["kind"] == "files" for o in ops)}


def test_fresh_starts_of_later_waves_ship_their_files_in_the_first_step_of_their_host():
    cat = _two_waves()
    plan = _plan.compute_plan(cat, content("db", "api"), states(["h1", "h2"]), ["h1", "h2"])
    assert [s["label"] for s in plan["steps"]] == ["wave 0: db start batch 1/1", "wave 1: api start batch 1/1"]
    assert _files_ops(plan) == {(0, "h1"): ["api@h1"]}  # h2 acts first in wave 1: its files go there
    files = plan["steps"][0]["ops"]["h1"][-1]
    assert files == {"id": "api@h1/files", "kind": "files", "job": "api", "host": "h1", "action": "sync",
                     "target": None, "sync": True, "env": {}, "record": None, "promote_now": False,
                     "src": "workspace/jobs/api", "of": "api@h1"}
    later = [o for ops in plan["steps"][1]["ops"].values() for o in ops]
    assert [(o["id"], o["sync"], o["target"]) for o in later] == [
        ("api@h1", False, "start"), ("meta@h2", False, None), ("api@h2", True, "start")]


def test_files_travel_early_only_for_a_fresh_start():
    cat = _two_waves()
    cont = content("db", "api")
    # an upgrade: the running version keeps its tree until its own batch
    st = _settle(cat, cont, ["h1", "h2"])
    plan = _plan.compute_plan(cat, content("db", "api", files={"Makefile": "m9"}), st, ["h1", "h2"])
    assert set(actions(plan).values()) == {"restart"} and _files_ops(plan) == {}
    # a start whose previous attempt failed its gate (its tree is on the worker and may be running)
    st = states(["h1", "h2"])
    st["h2"]["pending"], st["h2"]["trees"] = ["api"], ["api"]
    assert _files_ops(_plan.compute_plan(cat, cont, st, ["h1", "h2"])) == {(0, "h1"): ["api@h1"]}
    # a tree of the job is on the worker without a record
    st = states(["h1", "h2"])
    st["h1"]["trees"] = ["api"]
    assert _files_ops(_plan.compute_plan(cat, cont, st, ["h1", "h2"])) == {}  # h1 acts in wave 0 but is not fresh
    # a job with deploy hooks keeps its files in its own step
    cmds = {"c": {"executed_on": ["post_deploy"], "demands": {"job": "", "command": ""}}}
    hooked = catalog([job("db", deployment_seq=0), job("api", deployment_seq=1, commands=cmds)],
                     [("db", "h1", "active"), ("api", "h1", "active")])
    assert _files_ops(_plan.compute_plan(hooked, cont, states(["h1", "h2"]), ["h1", "h2"])) == {}


def test_files_never_travel_into_the_reconcile_step_and_reconcile_keeps_its_meta():
    cat = _two_waves(hosts=("h1",))
    cat["allocations"].append({"job": "db", "worker": "h2", "alloc_id": "db-h2", "state": "disabled", "deployment_seq": 0})
    cont = content("db", "api")
    st = states(["h1", "h2"], {"h2": {"db": record("db", cont, host="h2")}})
    plan = _plan.compute_plan(cat, cont, st, ["h1", "h2"])
    assert [s["label"] for s in plan["steps"]] == ["reconcile", "wave 0: db start batch 1/1", "wave 1: api start batch 1/1"]
    assert [o["kind"] for o in plan["steps"][0]["ops"]["h2"]] == ["meta", "stop"]
    assert [o["kind"] for o in plan["steps"][0]["ops"]["h1"]] == ["meta"]
    assert _files_ops(plan) == {(1, "h1"): ["api@h1"]}
