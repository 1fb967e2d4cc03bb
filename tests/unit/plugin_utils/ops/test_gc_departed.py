"""gc of departed workers (issue 23 item 4): a worker that left workers.json keeps jobs/*/data and
jobs/*/logs after the deploy that cleaned it; the build keeps it in the catalog's `departed` list, the
inventory puts it in maand_departed_workers (never maand_workers), and gc deletes its whole
/opt/worker/<bucket_id>, then drops the row. The core on plain catalogs, the build and the commit on a
real bucket folder, the inventory in process, and gc_worker's tree deletion on a real folder tree."""

from __future__ import annotations

import json

import pytest
from ansible.inventory.data import InventoryData
from hypothesis import given, settings, strategies as st

from ansible_collections.maand.core.plugins.inventory import workspace
from ansible_collections.maand.core.plugins.modules import gc_worker
from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog, service as _service
from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog_schema as _catalog_schema
from ansible_collections.maand.core.plugins.plugin_utils.bucket import schemas as _schemas
from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from ansible_collections.maand.core.plugins.plugin_utils.ops import gc as _gc
from tests.bucket_factory import make_bucket, set_workers

BID = "0b0f7a30-3f2b-4e3c-9a51-7f0a4c1d2e3f"
ROOT = "/opt/worker/%s" % BID
NOW = 1_800_000_000.0
W1 = {"host": "10.0.0.1", "labels": ["worker"], "memory": "4096 mb", "cpu": "4000 mhz"}
W2 = {"host": "10.0.0.2", "labels": ["worker"], "memory": "4096 mb", "cpu": "4000 mhz", "hostname": "node2"}


def catalog(allocs=(), workers=("w1",), departed=(), removed_workers=()):
    """allocs: [(job, worker, state)]; departed: hosts of the departed list."""
    cat = {"format": 1, "bucket_id": BID, "jobs": [{"name": j} for j in sorted({a[0] for a in allocs})],
           "workers": [{"host": w} for w in workers] + [{"host": w, "removed": True} for w in removed_workers],
           "allocations": [{"job": j, "worker": w, "state": s, "alloc_id": "x"} for j, w, s in allocs]}
    if departed:
        cat["departed"] = [{"host": h, "hostname": None} for h in departed]
    return cat


def listing(host, trees=(), deployed=(), pending=(), exists=True):
    return _gc.Listing(host, True, "", tuple(trees), tuple(deployed), tuple(pending), exists)


# --- the plan ---------------------------------------------------------------------------------------------

def test_a_departed_worker_loses_its_whole_bucket_folder_and_its_row():
    cat = catalog([("api", "w1", "active")], departed=["w9"])
    plan = _gc.plan(cat, {}, [listing("w1", ["api"], deployed=["api"]), listing("w9", ["api", "web"])], NOW)
    assert [(p.host, p.job, p.path) for p in plan.paths] == [("w9", _gc.TREE, ROOT)]
    assert "data/ and logs/ included" in plan.paths[0].reason
    assert [(r.table, r.key) for r in plan.rows] == [("departed", "w9")]
    assert plan.trees() == ["w9"] and plan.paths_by_host() == {}
    assert not plan.problems
    assert plan.lines()[:2] == ["worker w9:", "  delete %s (%s)" % (ROOT, plan.paths[0].reason)]
    new = _gc.apply_catalog(cat, plan)
    assert "departed" not in new and new["workers"] == cat["workers"] and new["allocations"] == cat["allocations"]
    assert _gc.Plan.from_dict(plan.as_dict()) == plan


def test_a_departed_worker_that_holds_nothing_only_loses_its_row():
    plan = _gc.plan(catalog(departed=["w9"]), {}, [listing("w9", exists=False)], NOW)
    assert not plan.paths
    assert [(r.table, r.key, r.reason) for r in plan.rows] == [
        ("departed", "w9", "departed worker, holds nothing of the bucket")]


def test_an_unreachable_departed_worker_fails_loud_and_keeps_its_row():
    plan = _gc.plan(catalog(departed=["w9"]), {}, [_gc.Listing("w9", False, "ssh: No route to host")], NOW)
    assert not plan.paths and not plan.rows
    [problem] = plan.problems
    assert problem.startswith("departed worker w9 could not be read (ssh: No route to host)")
    assert "-e maand_departed_forget=w9" in problem and "fix:" in problem


def test_a_departed_worker_with_jobs_no_deploy_stopped_fails_loud():
    plan = _gc.plan(catalog(departed=["w9"]), {}, [listing("w9", ["api"], deployed=["api"], pending=["db"])], NOW)
    assert not plan.paths and not plan.rows
    [problem] = plan.problems
    assert "still holds deploy records of api, db" in problem and "make stop" in problem


def test_a_departed_worker_still_holding_allocation_rows_waits_for_the_deploy():
    cat = catalog([("api", "w9", "removed")], departed=["w9"], removed_workers=["w9"])
    plan = _gc.plan(cat, {}, [listing("w9", ["api"], deployed=["api"])], NOW)
    assert not [p for p in plan.paths if p.job == _gc.TREE]
    assert not [r for r in plan.rows if r.table == "departed"]
    assert any("departed worker w9: its bucket folder" in s and "run maand.core.deploy first" in s
               for s in plan.skipped), plan.skipped


def test_named_departed_hosts_are_cleaned_without_a_row():
    plan = _gc.plan(catalog(), {}, [listing("w1"), listing("w7", ["api"]), listing("w8", exists=False)], NOW,
                    departed=["w7", "w8"])
    assert [(p.host, p.job) for p in plan.paths] == [("w7", _gc.TREE)]
    assert not plan.rows
    assert any("departed worker w8 (maand_departed): holds nothing" in s for s in plan.skipped)


def test_a_worker_of_workers_json_is_never_departed():
    with pytest.raises(_gc.GCError, match=r"maand_departed: w1 is a worker of workspace/workers.json"):
        _gc.plan(catalog(), {}, [listing("w1")], NOW, departed=["w1"])
    # a hand-edited catalog listing a live worker as departed: it is collected as a worker, never wiped
    cat = catalog([("api", "w1", "active")], departed=["w1"])
    plan = _gc.plan(cat, {}, [listing("w1", ["api"], deployed=["api"])], NOW)
    assert not plan.paths and not plan.rows


def test_forget_drops_the_row_without_contact():
    cat = catalog(departed=["w8", "w9"])
    plan = _gc.plan(cat, {}, [_gc.Listing("w9", False, "not listed")], NOW, forget=["w9"])
    assert not plan.problems and not plan.paths
    assert [(r.table, r.key) for r in plan.rows] == [("departed", "w9")]
    assert [d["host"] for d in _gc.apply_catalog(cat, plan)["departed"]] == ["w8"]


def test_forget_and_named_hosts_are_checked():
    cat = catalog([("api", "w7", "removed")], departed=["w7", "w9"], removed_workers=["w7"])
    with pytest.raises(_gc.GCError, match=r"maand_departed_forget: w5 is not in the catalog's departed list \(w7, w9\)"):
        _gc.check_departed(cat, [], ["w5"])
    with pytest.raises(_gc.GCError, match="w7 still holds allocation rows"):
        _gc.check_departed(cat, [], ["w7"])
    with pytest.raises(_gc.GCError, match="in both maand_departed"):
        _gc.check_departed(cat, ["w9"], ["w9"])
    _gc.check_departed(cat, ["w7", "w3"], ["w9"])


def test_host_list_input():
    assert _gc.host_list(None, "maand_departed") == () and _gc.host_list("", "maand_departed") == ()
    assert _gc.host_list(" 10.0.0.5, 10.0.0.6,,10.0.0.5 ", "maand_departed") == ("10.0.0.5", "10.0.0.6")
    assert _gc.host_list(["node-1.example.com", "fd00::5"], "maand_departed") == ("node-1.example.com", "fd00::5")
    for bad in ("a b", "x;rm", "../x", {"h": 1}, [3]):
        with pytest.raises(_gc.GCError, match="maand_departed"):
            _gc.host_list(bad, "maand_departed")


def test_a_failed_tree_deletion_keeps_the_row():
    cat = catalog(departed=["w8", "w9"])
    planned = _gc.plan(cat, {}, [listing("w8"), listing("w9")], NOW)
    assert planned.trees() == ["w8", "w9"]
    answers = {"w8": {"results": [{"job": "", "ok": True, "deleted": True}]},
               "w9": {"unreachable": True, "msg": "ssh: connection timed out"}}
    failed, problems = _gc.deletions(answers, planned)
    assert failed == {("w9", _gc.TREE)}
    assert problems == ["worker w9: nothing was deleted (ssh: connection timed out); fix: check that it is reachable "
                        "over SSH, then run maand.core.gc again"]
    done = _gc.confirm(planned, planned, failed)
    assert [r.key for r in done.rows] == ["w8"]
    assert [d["host"] for d in _gc.apply_catalog(cat, done)["departed"]] == ["w9"]


# --- the property: nothing of a worker of workers.json or of a live allocation is ever wiped ----------------

HOSTS = st.sampled_from(["w1", "w2", "w3", "w4"])


@st.composite
def departed_buckets(draw):
    live = draw(st.sets(HOSTS))
    allocs = draw(st.dictionaries(st.tuples(st.sampled_from(["api", "web"]), HOSTS),
                                  st.sampled_from(["active", "disabled", "removed"]), max_size=6))
    allocs = {k: ("removed" if k[1] not in live else s) for k, s in allocs.items()}
    removed = {w for dummy, w in allocs if w not in live}
    cat = catalog([(j, w, s) for (j, w), s in sorted(allocs.items())], workers=sorted(live),
                  departed=sorted(draw(st.sets(HOSTS))), removed_workers=sorted(removed))
    listings = []
    for host in draw(st.sets(HOSTS)):
        if draw(st.booleans()):
            listings.append(_gc.Listing(host, False, "down"))
        else:
            listings.append(listing(host, draw(st.sets(st.sampled_from(["api", "web"]))),
                                    draw(st.sets(st.sampled_from(["api", "web"]))), (), draw(st.booleans())))
    named = sorted(draw(st.sets(HOSTS)) - live)
    return cat, listings, named


@settings(max_examples=300, deadline=None)
@given(departed_buckets())
def test_property_only_departed_workers_without_rows_or_deploy_records_are_wiped(bucket):
    cat, listings, named = bucket
    plan = _gc.plan(cat, {}, listings, NOW, departed=named)
    live = {w["host"] for w in cat["workers"] if not w.get("removed")}
    holding = {a["worker"] for a in cat["allocations"]}
    wiped = set(plan.trees())
    assert not wiped & (live | holding)
    by_host = {item.host: item for item in listings}
    for host in wiped:
        item = by_host[host]
        assert item.reachable and item.exists and not item.deployed and not item.pending
    dropped = {r.key for r in plan.rows if r.table == "departed"}
    assert dropped <= set(_catalog.departed_hosts(cat)) and not dropped & holding
    unread = {h for h in (set(_catalog.departed_hosts(cat)) | set(named)) - live - holding
              if h in by_host and not by_host[h].reachable}
    assert not dropped & unread and len([p for p in plan.problems if p.startswith("departed worker") and "could not be read" in p]) == len(unread)


# --- the build keeps the list; the inventory reaches it; the commit drops the row ---------------------------

def built_and_departed(tmp_path):
    """W1 and W2 hold api; W2 leaves workers.json; a deploy cleans it (its rows are pruned)."""
    make_bucket(tmp_path, [W1, W2], {"api": {"selectors": ["worker"]}},
                maand_conf='ssh_user = "deploy"\nssh_key = "id"\nssh_port = 2222\n')
    assert _service.build(str(tmp_path)).written
    set_workers(tmp_path, [W1])
    result = _service.build(str(tmp_path))
    assert result.written
    assert "+ departed worker 10.0.0.2 (left workers.json; maand.core.gc deletes its bucket folder, data/ and logs/ " \
           "included)" in result.changes
    cat = _catalog.read_catalog(str(tmp_path))
    assert cat["departed"] == [{"host": "10.0.0.2", "hostname": "node2"}]
    pruned = _plan.prune_catalog(cat, [{"job": "api", "worker": "10.0.0.2"}])
    assert "10.0.0.2" not in [w["host"] for w in pruned["workers"]] and pruned["departed"] == cat["departed"]
    _catalog.write_catalog(str(tmp_path), pruned)
    return str(tmp_path), pruned


def test_the_build_keeps_departed_workers_until_they_come_back(tmp_path):
    bucket, cat = built_and_departed(tmp_path)
    assert not _schemas.check(cat, _catalog_schema.CATALOG)
    again = _service.build(bucket)  # a rebuild keeps the row the deploy left (the workers row is gone)
    assert _catalog.read_catalog(bucket)["departed"] == [{"host": "10.0.0.2", "hostname": "node2"}]
    assert not [c for c in again.changes if "departed" in c]
    set_workers(tmp_path, [W1, W2])
    back = _service.build(bucket)
    assert "- departed worker 10.0.0.2 (back in workers.json)" in back.changes
    assert "departed" not in _catalog.read_catalog(bucket)


def test_a_worker_without_allocations_that_leaves_is_departed_too(tmp_path):
    make_bucket(tmp_path, [W1, W2], {"api": {"selectors": ["api"]}})
    assert _service.build(str(tmp_path)).written
    set_workers(tmp_path, [W1])
    _service.build(str(tmp_path))
    cat = _catalog.read_catalog(str(tmp_path))
    assert [d["host"] for d in cat["departed"]] == ["10.0.0.2"] and [w["host"] for w in cat["workers"]] == ["10.0.0.1"]


def test_the_catalog_schema_refuses_a_malformed_departed_list():
    cat = catalog(departed=["w9"])
    assert not _schemas.check(cat, _catalog_schema.CATALOG)
    cat["departed"] = [{"hostname": "x"}]
    assert _schemas.check(cat, _catalog_schema.CATALOG)
    cat["departed"] = [{"host": ""}]
    assert _schemas.check(cat, _catalog_schema.CATALOG)


def inventory_of(bucket):
    module = workspace.InventoryModule()
    module.inventory = InventoryData()
    module.get_option = lambda name: None
    module._populate(workspace.load_from_catalog(bucket))
    return module.inventory


def test_departed_workers_are_reachable_hosts_of_their_own_group(tmp_path):
    bucket, dummy = built_and_departed(tmp_path)
    inventory = inventory_of(bucket)
    assert [h.name for h in inventory.groups["maand_departed_workers"].get_hosts()] == ["10.0.0.2"]
    assert [h.name for h in inventory.groups["maand_workers"].get_hosts()] == ["10.0.0.1"]
    assert not inventory.groups["maand_removed_workers"].get_hosts()
    group = inventory.groups["maand_departed_workers"].get_vars()
    assert group["ansible_user"] == "deploy" and group["ansible_port"] == 2222 and group["maand_departed"] is True
    assert group["maand_bucket_id"] == _catalog.read_catalog(bucket)["bucket_id"]
    host = inventory.get_host("10.0.0.2").get_vars()
    assert host["ansible_host"] == "10.0.0.2" and host["maand_allocations"] == []
    assert host["maand_worker"] == {"host": "10.0.0.2", "hostname": "node2", "removed": True}


def test_gc_commit_wipes_and_drops_the_departed_row(tmp_path):
    bucket, dummy = built_and_departed(tmp_path)
    states = {"10.0.0.1": {"state": {"reachable": True, "exists": True, "trees": ["api"], "deployed": ["api"]}},
              "10.0.0.2": {"state": {"reachable": True, "exists": True, "trees": ["api"]}}}
    hosts = sorted(states)
    planned = _gc.plan_bucket(bucket, states, hosts, NOW, 0)
    bid = _catalog.read_catalog(bucket)["bucket_id"]
    assert [(p.host, p.path) for p in planned.paths] == [("10.0.0.2", "/opt/worker/%s" % bid)]
    before = json.dumps(_catalog.read_catalog(bucket))
    failed = _gc.commit(bucket, _gc.Plan.from_dict(planned.as_dict()), states,
                        {"10.0.0.2": {"unreachable": True, "msg": "timed out"}}, hosts)
    assert failed.problems and json.dumps(_catalog.read_catalog(bucket)) == before  # the row stays
    done = _gc.commit(bucket, _gc.Plan.from_dict(planned.as_dict()), states,
                      {"10.0.0.2": {"results": [{"job": "", "ok": True, "deleted": True}]}}, hosts)
    assert done.changed and not done.problems
    assert "departed" not in _catalog.read_catalog(bucket)
    assert "catalog: deleted departed row 10.0.0.2 (departed worker, cleaned)" in done.done.lines(done=True)


def test_named_hosts_must_be_in_the_run(tmp_path):
    bucket, dummy = built_and_departed(tmp_path)
    with pytest.raises(_gc.GCError, match=r"maand_departed: 10.0.0.7 not in this run"):
        _gc.plan_bucket(bucket, {}, ["10.0.0.1"], NOW, 0, departed="10.0.0.7")
    with pytest.raises(_gc.GCError, match="is a worker of workspace/workers.json"):
        _gc.targets(bucket, "10.0.0.1", None)
    assert _gc.targets(bucket, "10.0.0.7", ["10.0.0.2"]) == (("10.0.0.7",), ("10.0.0.2",))


# --- gc_worker: the whole bucket folder -------------------------------------------------------------------

def test_gc_worker_deletes_the_bucket_folder_never_following_links(tmp_path):
    root = tmp_path / "worker" / BID
    (root / "jobs" / "api" / "data").mkdir(parents=True)
    (root / "jobs" / "api" / "logs").mkdir()
    (root / "jobs" / "api" / "data" / "db").write_text("rows")
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (root / "jobs" / "api" / "data" / "link").symlink_to(outside)
    would = gc_worker.delete_tree(str(root), check=True)
    assert would == {"job": "", "path": str(root), "ok": True, "deleted": True, "msg": "would delete"}
    assert (root / "jobs" / "api" / "data" / "db").exists()
    assert gc_worker.delete_tree(str(root), check=False)["msg"] == "deleted"
    assert not root.exists() and (outside / "keep.txt").read_text() == "keep"
    gone = {"job": "", "path": str(root), "ok": True, "deleted": False, "msg": "already gone"}
    assert gc_worker.delete_tree(str(root), check=False) == gone


def test_gc_worker_refuses_a_bucket_folder_with_deploy_records_or_a_link(tmp_path):
    root = tmp_path / "worker" / BID
    (root / "deploy").mkdir(parents=True)
    (root / "deploy" / "api.pending").write_text("{}")
    held = gc_worker.delete_tree(str(root), check=False)
    assert not held["ok"] and "deploy/api.pending" in held["msg"] and root.exists()
    (root / "deploy" / "api.pending").unlink()
    linked = tmp_path / "worker" / "11111111-1111-1111-1111-111111111111"
    linked.symlink_to(root)
    refused = gc_worker.delete_tree(str(linked), check=False)
    assert not refused["ok"] and "symbolic link" in refused["msg"] and root.exists()
    assert gc_worker.delete_tree(str(root), check=False)["deleted"]
