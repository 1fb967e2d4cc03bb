"""maand.core.gc planned (_gc): what removed allocations, jobs and workers left, never anything of an
active or disabled allocation; the KV side on a real KVStore; the worker-side deletion (gc_worker) on a
real folder tree with symbolic links."""

from __future__ import annotations


import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.maand.core.plugins.modules import gc_worker
from ansible_collections.maand.core.plugins.plugin_utils.ops import gc as _gc
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store

BID = "0b0f7a30-3f2b-4e3c-9a51-7f0a4c1d2e3f"
NOW = 1_800_000_000.0
DAY = 86400.0


def catalog(allocs, jobs=None, workers=None, removed_jobs=(), removed_workers=()):
    """allocs: [(job, worker, state)]."""
    jobs = sorted(set(jobs if jobs is not None else {a[0] for a in allocs}) | set(removed_jobs))
    workers = sorted(set(workers if workers is not None else {a[1] for a in allocs}) | set(removed_workers))
    return {"format": 1, "bucket_id": BID,
            "jobs": [dict({"name": j}, **({"removed": True} if j in removed_jobs else {})) for j in jobs],
            "workers": [dict({"host": w}, **({"removed": True} if w in removed_workers else {})) for w in workers],
            "allocations": [{"job": j, "worker": w, "state": s, "alloc_id": "x"} for j, w, s in allocs]}


def entry(value="v", modified=NOW, deleted=False, history=()):
    return _store.Entry(value, 1 + len(history), deleted, modified,
                        [_store.Revision(i + 1, "old", t) for i, t in enumerate(history)])


def listing(host, trees=(), deployed=(), pending=()):
    return _gc.Listing(host, True, "", tuple(trees), tuple(deployed), tuple(pending))


# --- the plan -------------------------------------------------------------------------------------------

def test_leftover_folders_go_active_and_disabled_stay():
    cat = catalog([("api", "w1", "active"), ("api", "w2", "disabled"), ("web", "w1", "active")],
                  workers=["w1", "w2", "w3"])
    plan = _gc.plan(cat, {}, [listing("w1", ["api", "web", "old"], deployed=["api", "web"]),
                              listing("w2", ["api", "web"]), listing("w3", ["web"])], NOW)
    assert [(p.host, p.job) for p in plan.paths] == [("w1", "old"), ("w2", "web"), ("w3", "web")]
    assert plan.paths[0].path == "/opt/worker/%s/jobs/old" % BID
    assert not plan.rows and not plan.problems


def test_job_moved_off_one_worker_goes_only_there():
    cat = catalog([("web", "w1", "active"), ("web", "w2", "removed")])
    plan = _gc.plan(cat, {"vars/job/web": {"a": entry()}, "maand/job/web/worker/w2": {"k": entry()},
                          "maand/job/web/worker/w1": {"k": entry()}},
                    [listing("w1", ["web"], deployed=["web"]), listing("w2", ["web"])], NOW)
    assert [(p.host, p.job, p.reason) for p in plan.paths] == [("w2", "web", "removed allocation")]
    assert [(r.table, r.key) for r in plan.rows] == [("allocations", "web@w2")]
    assert [n.namespace for n in plan.namespaces] == ["maand/job/web/worker/w2"]


def test_removed_allocation_not_yet_stopped_by_a_deploy_is_left_alone():
    cat = catalog([("api", "w1", "removed"), ("db", "w1", "removed")], removed_jobs=["api", "db"])
    plan = _gc.plan(cat, {"vars/job/api": {"a": entry()}},
                    [listing("w1", ["api"], deployed=["api"], pending=["db"])], NOW)
    assert not plan.paths and not plan.rows and not plan.namespaces
    assert len(plan.skipped) == 2 and all("run maand.core.deploy first" in s for s in plan.skipped)


def test_removed_rows_jobs_and_workers_go_when_cleaned():
    cat = catalog([("api", "w1", "removed"), ("api", "w9", "removed"), ("web", "w1", "active")],
                  removed_jobs=["api"], removed_workers=["w9"])
    plan = _gc.plan(cat, {}, [listing("w1", ["api", "web"], deployed=["web"]), listing("w9", [])], NOW)
    assert [(r.table, r.key) for r in plan.rows] == [
        ("allocations", "api@w1"), ("allocations", "api@w9"), ("jobs", "api"), ("workers", "w9")]
    new = _gc.apply_catalog(cat, plan)
    assert [(a["job"], a["worker"]) for a in new["allocations"]] == [("web", "w1")]
    assert [j["name"] for j in new["jobs"]] == ["web"] and [w["host"] for w in new["workers"]] == ["w1"]


def test_an_unreachable_worker_is_a_problem_and_keeps_its_rows():
    cat = catalog([("api", "w1", "removed"), ("web", "w2", "active")], removed_jobs=["api"])
    plan = _gc.plan(cat, {"vars/job/api": {"a": entry()}},
                    [_gc.Listing("w1", False, "ssh: connect to host w1 port 22: No route to host"), listing("w2")], NOW)
    assert not plan.rows and not plan.paths
    assert not plan.namespaces  # api still holds a row: its namespaces wait
    [problem] = plan.problems
    assert "w1" in problem and "No route to host" in problem and "fix:" in problem


def test_kv_namespaces_of_gone_jobs_allocations_and_workers():
    cat = catalog([("api", "w1", "active"), ("web", "w1", "disabled")])
    spaces = {ns: {"k": entry()} for ns in (
        "maand/job/api", "vars/job/api", "maand/job/web", "secrets/job/web", "maand/job/api/worker/w1",
        "maand/job/old", "vars/job/old", "secrets/job/old", "vars/bucket/job/old", "maand/job/old/worker/w1",
        "maand/job/api/worker/w2", "maand/worker/w1", "maand/worker/w2", "maand/worker/w2/tags",
        "maand/bucket", "vars/bucket", "maand/worker")}
    plan = _gc.plan(cat, spaces, [listing("w1", ["api", "web"])], NOW)
    assert [n.namespace for n in plan.namespaces] == [
        "maand/job/api/worker/w2", "maand/job/old", "maand/job/old/worker/w1", "maand/worker/w2",
        "maand/worker/w2/tags", "secrets/job/old", "vars/bucket/job/old", "vars/job/old"]
    assert plan.namespaces[0].keys == ("k",)


def test_a_job_still_in_the_catalog_without_allocations_keeps_its_namespaces():
    cat = catalog([], jobs=["idle"], workers=["w1"])
    plan = _gc.plan(cat, {"vars/job/idle": {"k": entry()}}, [listing("w1")], NOW)
    assert not plan.namespaces


def test_history_as_maand_gc_purges_it():
    """maand kv/purge.go: rows of a key whose latest version is older than retain days go when that
    version is a tombstone, or when they are more than MaxVersionsToKeep (7) versions behind it;
    history within 7 versions stays whatever its age."""
    spaces = {"vars/job/api": {"fresh": entry(modified=NOW - DAY, history=[NOW - 20 * DAY]),
                               "old": entry(modified=NOW - 3 * DAY, history=[NOW - 10 * DAY, NOW - 9 * DAY]),
                               "long": entry(modified=NOW - 3 * DAY, history=[NOW - 30 * DAY + i for i in range(9)]),
                               "gone": entry(deleted=True, modified=NOW - 8 * DAY, history=[NOW - 9 * DAY]),
                               "just_gone": entry(deleted=True, modified=NOW - DAY)}}
    cat = catalog([("api", "w1", "active")])
    plan = _gc.plan(cat, spaces, [], NOW, 2)
    assert [(h.key, h.revisions, h.whole_key) for h in plan.history] == [("gone", 2, True), ("long", 2, False)]
    everything = _gc.plan(cat, spaces, [], NOW, 0)
    assert [(h.key, h.revisions, h.whole_key) for h in everything.history] == [
        ("gone", 2, True), ("just_gone", 1, True), ("long", 2, False)]
    assert not _gc.plan(cat, spaces, [], NOW, 9).history
    text = "\n".join(plan.lines())
    assert "vars/job/api long: 2 revision(s) beyond the 7 kept" in text and "more than 2 day(s) ago" in text
    assert "vars/job/api gone: the deleted key and its 2 revision(s)" in text


def test_lines_list_paths_per_worker_rows_and_keys():
    cat = catalog([("api", "w1", "removed")], removed_jobs=["api"])
    plan = _gc.plan(cat, {"vars/job/api": {"a": entry(), "b": entry()}}, [listing("w1", ["api"])], NOW)
    assert plan.lines() == [
        "worker w1:", "  delete /opt/worker/%s/jobs/api (removed allocation)" % BID,
        "catalog: delete allocations row api@w1 (removed allocation, cleaned on the worker)",
        "catalog: delete jobs row api (removed job without allocations)",
        "kv: delete namespace vars/job/api (2 keys: a, b; job api is gone)"]
    assert _gc.plan(catalog([]), {}, [], NOW).lines() == ["nothing to collect"]
    assert _gc.Plan.from_dict(plan.as_dict()) == plan


def test_confirm_keeps_only_what_both_plans_hold_and_rows_of_failed_deletions():
    cat = catalog([("api", "w1", "removed"), ("api", "w2", "removed")], removed_jobs=["api"])
    spaces = {"vars/job/api": {"a": entry()}}
    shown = _gc.plan(cat, spaces, [listing("w1", ["api"]), listing("w2", ["api"])], NOW)
    # a build re-added api on w2 meanwhile: its row and the job's namespace are no longer collected
    now = catalog([("api", "w1", "removed"), ("api", "w2", "active")])
    fresh = _gc.plan(now, spaces, [listing("w1", ["api"]), listing("w2", ["api"])], NOW)
    done = _gc.confirm(shown, fresh, failed_paths=[("w1", "api")])
    assert done.rows == [] and done.namespaces == []
    ok = _gc.confirm(shown, shown)
    assert [r.key for r in ok.rows] == ["api@w1", "api@w2", "api"]


def test_retain_days_input():
    assert _gc.retain_days(None) == 0 and _gc.retain_days("7") == 7 and _gc.retain_days(1.5) == 1.5
    for bad in ("week", -1, "nan", "inf"):
        with pytest.raises(_gc.GCError, match="maand_retain_days"):
            _gc.retain_days(bad)


def test_kv_store_purge_and_prune_before(tmp_path):
    clock = [NOW - 10 * DAY]
    store = _store.KVStore(str(tmp_path), clock=lambda: clock[0])
    store.put("vars/job/api", "a", "1")
    clock[0] = NOW - 5 * DAY
    store.put("vars/job/api", "a", "2")
    store.put("vars/job/api", "b", "x")
    store.put("vars/job/old", "c", "y")
    clock[0] = NOW
    store.put("vars/job/api", "a", "3")
    store.save()
    store = _store.KVStore.load(str(tmp_path))
    assert store.purge_namespace("vars/job/old") == 1 and store.purge_namespace("vars/job/old") == 0
    store.delete("vars/job/api", "b")  # the loaded store's clock is the real one (before NOW + DAY)
    assert store.prune_before(NOW + DAY, only={("vars/job/api", "a")}) == 0  # history within 7 versions stays
    assert [r.value for r in store.history("vars/job/api", "a")] == ["1", "2", "3"]
    assert store.prune_before(NOW + DAY) == 2  # b: its tombstone and the value before it
    assert store.history("vars/job/api", "b") == []
    store.save()
    again = _store.KVStore.load(str(tmp_path))
    assert "vars/job/old" not in again.namespaces and "b" not in again.namespaces["vars/job/api"]
    assert [r.value for r in again.history("vars/job/api", "a")] == ["1", "2", "3"]


# --- the property: nothing of an active or disabled allocation is ever planned ----------------------------

NAMES = st.sampled_from(["api", "web", "db", "old"])
HOSTS = st.sampled_from(["w1", "w2", "w3"])
STATES = st.sampled_from(["active", "disabled", "removed"])


@st.composite
def buckets(draw):
    allocs = draw(st.dictionaries(st.tuples(NAMES, HOSTS), STATES, max_size=12))
    removed_jobs = draw(st.sets(NAMES))
    removed_workers = draw(st.sets(HOSTS))
    cat = catalog([(j, w, s) for (j, w), s in sorted(allocs.items())],
                  jobs=draw(st.sets(NAMES)) | {j for j, dummy in allocs},
                  workers=draw(st.sets(HOSTS)) | {w for dummy, w in allocs}, removed_jobs=removed_jobs, removed_workers=removed_workers)
    job_ns = ["maand/job/%s", "vars/job/%s", "secrets/job/%s", "vars/bucket/job/%s"]
    namespaces = draw(st.sets(st.one_of(
        st.builds(lambda f, j: f % j, st.sampled_from(job_ns), NAMES),
        st.builds(lambda j, h: "maand/job/%s/worker/%s" % (j, h), NAMES, HOSTS),
        st.builds(lambda h, t: "maand/worker/%s%s" % (h, t), HOSTS, st.sampled_from(["", "/tags"])),
        st.sampled_from(["maand/bucket", "vars/bucket", "maand/worker"]))))
    spaces = {ns: {"k": entry(deleted=draw(st.booleans()), modified=NOW - draw(st.integers(0, 10)) * DAY,
                              history=[NOW - d * DAY for d in draw(st.lists(st.integers(0, 10), max_size=3))])}
              for ns in sorted(namespaces)}
    listings = []
    for host in draw(st.sets(HOSTS)):
        if draw(st.booleans()):
            listings.append(_gc.Listing(host, False, "down"))
        else:
            listings.append(listing(host, draw(st.sets(NAMES)), draw(st.sets(NAMES)), draw(st.sets(NAMES))))
    return cat, spaces, listings


def owned_by_live(cat, namespace):
    live = {(a["job"], a["worker"]) for a in cat["allocations"] if a["state"] in ("active", "disabled")}
    owner = _gc.namespace_owner(namespace)
    if owner is None:
        return True
    kind, what = owner
    if kind == "job":
        return any(job == what for job, dummy in live)
    if kind == "allocation":
        return what in live
    return any(host == what for dummy, host in live)


@settings(max_examples=300, deadline=None)
@given(buckets(), st.sampled_from([0, 1, 7]))
def test_property_no_active_or_disabled_allocation_is_ever_planned(bucket, days):
    cat, spaces, listings = bucket
    plan = _gc.plan(cat, spaces, listings, NOW, days)
    live = {(a["job"], a["worker"]) for a in cat["allocations"] if a["state"] in ("active", "disabled")}
    assert not {(p.job, p.host) for p in plan.paths} & live
    assert not [n for n in plan.namespaces if owned_by_live(cat, n.namespace)]
    dropped = {r.key for r in plan.rows if r.table == "allocations"}
    assert not dropped & {"%s@%s" % pair for pair in live}
    new = _gc.apply_catalog(cat, plan)
    assert [a for a in new["allocations"] if a["state"] != "removed"] == \
        [a for a in cat["allocations"] if a["state"] != "removed"]
    live_jobs = {j for j, dummy in live}
    live_hosts = {h for dummy, h in live}
    assert [j for j in cat["jobs"] if j["name"] in live_jobs] == [j for j in new["jobs"] if j["name"] in live_jobs]
    assert [w for w in cat["workers"] if w["host"] in live_hosts] == \
        [w for w in new["workers"] if w["host"] in live_hosts]
    unreachable = {item.host for item in listings if not item.reachable}
    assert not {p.host for p in plan.paths} & unreachable
    assert len(plan.problems) == len(unreachable)


# --- the worker side (gc_worker) on a real tree --------------------------------------------------------

def tree(tmp_path):
    root = tmp_path / "worker" / BID
    (root / "jobs" / "old" / "data").mkdir(parents=True)
    (root / "jobs" / "old" / "data" / "db").write_text("rows")
    (root / "deploy").mkdir()
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (root / "jobs" / "old" / "link").symlink_to(outside)
    (root / "jobs" / "live").mkdir()
    (root / "deploy" / "live.json").write_text("{}")
    return root, outside


def test_gc_worker_deletes_the_folder_never_following_links(tmp_path):
    root, outside = tree(tmp_path)
    would = gc_worker.delete_one(str(root), "old", check=True)
    assert would["deleted"] and (root / "jobs" / "old").exists()
    done = gc_worker.delete_one(str(root), "old", check=False)
    assert done == {"job": "old", "path": str(root / "jobs" / "old"), "ok": True, "deleted": True, "msg": "deleted"}
    assert not (root / "jobs" / "old").exists() and (outside / "keep.txt").read_text() == "keep"
    assert gc_worker.delete_one(str(root), "old", check=False)["msg"] == "already gone"


def test_gc_worker_refuses_bad_names_deployed_jobs_and_linked_trees(tmp_path):
    root, outside = tree(tmp_path)
    for bad in ("", ".", "..", "../x", "a/b"):
        assert not gc_worker.delete_one(str(root), bad, check=False)["ok"]
    live = gc_worker.delete_one(str(root), "live", check=False)
    assert not live["ok"] and "deploy/live.json" in live["msg"] and (root / "jobs" / "live").exists()
    linked = tmp_path / "worker" / "11111111-1111-1111-1111-111111111111"
    linked.symlink_to(outside)
    assert "symbolic link" in gc_worker.check_tree(str(linked))
    (tmp_path / "w2").mkdir()
    (tmp_path / "w2" / "jobs").symlink_to(outside)
    assert "symbolic link" in gc_worker.check_tree(str(tmp_path / "w2"))
    assert gc_worker.check_tree(str(root)) is None


# --- worker answers passed as arguments ({host: registered result}), not read from hostvars by name ----


def test_listings_from_answers_name_hosts_without_a_result_as_not_reachable():
    answers = {"10.0.0.1": {"state": {"reachable": True, "jobs": ["a"]}},
               "10.0.0.2": {"unreachable": True, "msg": "ssh: connect refused\nHost down"},
               "10.0.0.3": {}}
    got = {item.host: item for item in _gc.listings(answers, ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"])}
    assert got["10.0.0.1"].reachable
    assert not got["10.0.0.2"].reachable and got["10.0.0.2"].error == "Host down"
    assert not got["10.0.0.3"].reachable and "not listed" in got["10.0.0.3"].error
    assert not got["10.0.0.4"].reachable


def test_deletions_from_answers_fail_what_did_not_run_and_name_the_worker():
    paths = [_gc.PathDeletion("h1", "old", "/opt/worker/b/jobs/old", "removed"),
             _gc.PathDeletion("h2", "old", "/opt/worker/b/jobs/old", "removed"),
             _gc.PathDeletion("h3", "x", "/opt/worker/b/jobs/x", "removed")]
    planned = _gc.Plan("b", 0.0, NOW, paths=paths)
    answers = {"h1": {"results": [{"job": "old", "ok": True}]},
               "h2": {"results": [{"job": "old", "ok": False, "msg": "permission denied"}]}}
    failed, problems = _gc.deletions(answers, planned)
    assert failed == {("h2", "old"), ("h3", "x")}
    assert any("worker h2: permission denied" in p for p in problems)
    assert any(p.startswith("worker h3: nothing was deleted (the deletion did not run)") for p in problems)
