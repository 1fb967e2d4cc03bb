"""The deploy plan's JSON is a contract (run folder, Ansible vars, _run_state, _deploy_run, the worker
agent, _deploy_view, _deploy_pin, the callback): plans of representative buckets must serialize exactly
as the golden file captured before the plan's rows and ops became dataclasses (issue 9 item 5).

Regenerate only on purpose: `python3 -m tests.unit.plugin_utils.deploy.test_deploy_plan_golden` rewrites the file."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import content as _content
from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as _plan
from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, catalog, content, job, record, states

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "deploy_plan", "golden.json")
H3 = ["h1", "h2", "h3"]
NEW_FILES = {"Makefile": "m1", "conf/a.conf": "c2", "new.txt": "n"}


def _cmds(*events):
    return {"command_x": {"executed_on": list(events), "demands": {"job": "", "command": ""}}}


def first_deploy():
    cat = catalog([job("api"), job("web")], [("api", "h1", "active"), ("api", "h2", "active"), ("web", "h1", "active")])
    return cat, content("api", "web"), states(H3), H3, None


def upgrades():
    jobs = [job("api", max_concurrent_upgrades=2),
            job("rel", restart_policy="reload", restart_globs=["conf/*"]),
            job("relv", restart_policy="reload", restart_globs=["other/*"], version="1.1.0"),
            job("nev", restart_policy="never")]
    cat = catalog(jobs, [(j["name"], h, "active") for j in jobs for h in H3])
    st = _settle(cat, content("api", "rel", "relv", "nev"), H3)
    new = content("api", "rel", "nev", files=NEW_FILES)
    new.update(content("relv"))
    return cat, new, st, H3, None


def reconcile():
    cat = catalog([job("api"), job("gone", removed=True)],
                  [("api", "h1", "disabled"), ("api", "h2", "disabled"), ("api", "h3", "active"),
                   ("gone", "h1", "removed"), ("gone", "h2", "removed"), ("api", "r1", "active"),
                   ("api", "r2", "active")], removed_workers=("r1", "r2"))
    cont = content("api", "gone")
    hosts = H3 + ["r1", "r2"]
    st = states(hosts, {"h1": {"api": record("api", cont), "gone": record("gone", cont)},
                        "h2": {"api": record("api", cont, running=False, host="h2")},
                        "r1": {"api": record("api", cont, host="r1")}}, unreachable=("h3", "r2"))
    return cat, content("api"), st, hosts, None


def options():
    cat = catalog([job("api"), job("web")], [(j, h, "active") for j in ("api", "web") for h in H3])
    cont = content("api", "web")
    st = _settle(cat, cont, H3)
    st["h3"]["deployed"] = {}
    return cat, cont, st, H3, {"jobs": "api", "force": True}


def sync_only():
    cat = catalog([job("api"), job("web", restart_policy="reload")], [(j, h, "active") for j in ("api", "web") for h in H3])
    st = _settle(cat, content("api", "web"), H3)
    return cat, content("api", "web", files=NEW_FILES), st, H3, {"sync_only": True}


def refused():
    cat = catalog([job("api"), job("broken")], [("api", "h1", "active"), ("broken", "h1", "active"),
                                                ("ghost", "h1", "active")], workers=("h1",))
    cont = content("api")
    cont["broken"] = {"error": "cannot read jobs/broken"}
    cont["api"]["allocations"] = {"h1": {"error": "job api, file a.tpl: boom"}}
    st = states(["h1"])
    st["h1"]["others"] = [{"bucket_id": "other-id", "path": "/opt/worker/other-id"}]
    return cat, cont, st, ["h1"], {"sync_only": True, "stage_errors": ["template: job api, file a.tpl: boom"]}


def gates():
    hc = {"checks": [{"type": "tcp", "port": "http_port"}, {"type": "http", "port": 8080, "path": "health"}],
          "wait": {"attempts": 3, "interval_seconds": 0.5}}
    cat = catalog([job("db"), job("api", deployment_seq=1, health_check=hc, ports={"http_port": 30001},
                                  max_concurrent_starts=1),
                   job("bad", health_check={"checks": [{"type": "udp", "port": 1}]})],
                  [("db", "h1", "active"), ("api", "h1", "active"), ("api", "h2", "active"), ("bad", "h1", "active")])
    cont = content("db", "api", "bad")
    return cat, cont, states(["h1", "h2"]), ["h1", "h2"], None


def hooks():
    cat = catalog([job("ctl", commands=_cmds("job_control")),
                   job("web", commands=_cmds("after_allocation_started"), max_concurrent_starts=2),
                   job("ord", commands=_cmds("post_deploy"), max_concurrent_starts=1),
                   job("bado", commands=_cmds("post_deploy"), max_concurrent_starts=1)],
                  [(j, h, "active") for j in ("ctl", "web", "ord", "bado") for h in H3])
    return cat, content("ctl", "web", "ord", "bado"), states(H3), H3, {
        "rollout_orders": {"ord": "h3, h1,h2", "bado": "h1,h1,h2"}}


def _rollback_states(cat, hosts, v1, v2):
    st = _settle(cat, content("api", "web", files=v2), hosts)
    for h in hosts:
        st[h]["deployed"]["api"]["version"] = "1.2.0"
        st[h]["previous"] = {"api": _plan.state_record("api", "api-%s" % h, content("api", files=v1)["api"],
                                                       "1.1.0", True, 1)}
    return st


def rollback():
    v1, v2 = {"Makefile": "m1", "conf/a.conf": "c1"}, {"Makefile": "m1", "conf/a.conf": "c2"}
    cat = catalog([job("api", version="1.2.0"), job("web")],
                  [("api", h, "active") for h in H3] + [("web", "h1", "active")])
    st = _rollback_states(cat, H3, v1, v2)
    st["h2"]["deployed"]["api"]["running"] = False
    return cat, content("api", "web", files=v2), st, H3, {"rollback": "api"}


def roll_forward():
    v1, v2 = {"Makefile": "m1", "conf/a.conf": "c1"}, {"Makefile": "m1", "conf/a.conf": "c2"}
    cat = catalog([job("api", version="1.2.0"), job("web")],
                  [("api", h, "active") for h in H3] + [("web", "h1", "active")])
    st = _rollback_states(cat, H3, v1, v2)
    st["h1"]["deployed"]["api"] = dict(st["h1"]["previous"]["api"], rolled_back_from="1.2.0")
    st["h2"]["rollback_pending"] = ["api"]
    st["h3"]["pending"] = ["api"]
    st["h3"]["deployed"]["api"]["running"] = False
    return cat, content("api", "web", files=v2), st, H3, None


def start_gates():
    hc = {"checks": [{"type": "tcp", "port": 2379}]}
    cat = catalog([job("etcd", health_check=hc, max_concurrent_starts=1),
                   job("each", health_check=hc, max_concurrent_starts=1, start_gate="every_batch")],
                  [(j, h, "active") for j in ("etcd", "each") for h in H3])
    return cat, content("etcd", "each"), states(H3), H3, None


def auto_revert():
    hc = {"checks": [{"type": "tcp", "port": 2379}]}
    cat = catalog([job("etcd", health_check=hc, auto_revert=True, version="1.1.0"),
                   job("bare", auto_revert=True, max_concurrent_upgrades=2, version="1.1.0")],
                  [(j, h, "active") for j in ("etcd", "bare") for h in H3])
    st = _settle(cat, content("etcd", "bare"), H3)
    for h in H3:
        for name in ("etcd", "bare"):
            st[h]["deployed"][name]["version"] = "1.0.0"
    return cat, content("etcd", "bare", files=NEW_FILES), st, H3, None


def rollback_failed():
    v1, v2 = {"Makefile": "m1", "conf/a.conf": "c1"}, {"Makefile": "m1", "conf/a.conf": "c2"}
    cat = catalog([job("api", version="1.1.0")], [("api", h, "active") for h in H3])
    st = _settle(cat, content("api", files=v2), H3)
    old = _plan.state_record("api", "api-x", content("api", files=v1)["api"], "1.0.0", True, 1)
    new = dict(st["h1"]["deployed"]["api"], version="1.1.0")
    st["h1"]["deployed"]["api"] = new  # h1 got 1.1.0 and passed its gate
    st["h1"]["previous"] = {"api": dict(old, alloc_id="api-h1")}
    for h in ("h2", "h3"):  # h2 failed its gate on 1.1.0; h3 never got it
        st[h]["deployed"]["api"] = dict(old, alloc_id="api-%s" % h)
        st[h]["kept"] = ["api"]
    st["h2"]["attempts"] = {"api": dict(new, alloc_id="api-h2", attempt={"target": "restart", "ok": True})}
    return cat, content("api", files=v2), st, H3, {"rollback": "api"}


def adopt():
    cat = catalog([job("api")], [("api", h, "active") for h in H3])
    st = states(H3)
    st["h1"]["trees"] = ["api"]
    st["h2"]["trees"] = ["api"]
    return cat, content("api"), st, H3, {"adopted": {("api", "h1"): "1.0.0", ("api", "h2"): "0.9.0"}}


def _rendered(files, origins):
    return {"hash": _content.tree_hash(files), "files": files, "origins": origins}


def rendered():
    cat = catalog([job("api", ports={"api_http_port": 30001}), job("env")],
                  [("api", h, "active") for h in H3] + [("env", "h1", "active")])
    old = {"Makefile": "m", "config.json": "c1"}
    new = {"Makefile": "m", "config.json": "c2", "certs/api.crt": "k", ".maand-env/TOKEN": "t"}
    cont = {"api": {"hash": "job", "files": {"Makefile": "m"}, "origins": {},
                    "allocations": {"h1": _rendered(new, {"config.json": "template", "certs/api.crt": "certs"}),
                                    "h2": _rendered(old, {"config.json": "template"}),
                                    "h3": _rendered(new, {})}},
            "env": _rendered({"Makefile": "m", ".maand-env/KEY": "2"}, {})}
    st = {h: {"reachable": True, "worker": None, "jobs": None, "trees": ["api"],
              "deployed": {"api": _plan.state_record("api", "api-%s" % h, _rendered(old, {}), "1.0.0", True, 1)}}
          for h in H3}
    st["h1"]["deployed"]["env"] = _plan.state_record("env", "env-h1", _rendered({"Makefile": "m", ".maand-env/KEY": "1"},
                                                                                {}), "1.0.0", True, 1)
    return cat, cont, st, H3, None


SCENARIOS = {f.__name__: f for f in (first_deploy, upgrades, reconcile, options, sync_only, gates, hooks, rollback,
                                     roll_forward, adopt, rendered, refused, start_gates, auto_revert, rollback_failed)}


def emitted(name):
    """The plan of a scenario as the run folder stores it (_deploy_run writes it with sort_keys)."""
    cat, cont, st, hosts, opts = SCENARIOS[name]()
    return json.loads(json.dumps(_plan.compute_plan(cat, cont, st, hosts, opts), sort_keys=True))


def _golden():
    with open(GOLDEN, encoding="utf-8") as handle:
        return json.load(handle)


def test_the_golden_file_covers_every_scenario():
    assert sorted(_golden()) == sorted(SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_plan_json_is_unchanged(name):
    got = json.dumps(emitted(name), sort_keys=True, indent=1)
    assert got == json.dumps(_golden()[name], sort_keys=True, indent=1)


if __name__ == "__main__":
    with open(GOLDEN, "w", encoding="utf-8") as out:
        json.dump({name: emitted(name) for name in sorted(SCENARIOS)}, out, sort_keys=True, indent=1)
        out.write("\n")
