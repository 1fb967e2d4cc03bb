"""Pinned plans (plan hash), the wave picture and the bounded --diff (issue 14 items 3 and 5)."""

from __future__ import annotations

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.deploy import pin as _pin
from ansible_collections.maand.core.plugins.plugin_utils.deploy import plan as P
from tests.unit.plugin_utils.deploy.test_deploy_plan import _settle, catalog, content, job

HOSTS = ["h1", "h2", "h3"]


def _plan(files=None, version="1.0.0", **opts):
    cat = catalog([job("api", version="1.0.0"), job("web")], [("api", h, "active") for h in HOSTS] + [("web", "h1", "active")])
    st_ = _settle(cat, content("api", "web"), HOSTS)
    cat["jobs"][0]["version"] = version
    return P.compute_plan(cat, content("api", "web", files=files), st_, HOSTS, opts)


def _reordered(value):
    """The same data with every dict's keys in reverse order."""
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


def test_plan_hash_is_stable_across_runs_and_dict_orderings():
    a, b = _plan({"Makefile": "m2", "conf/a.conf": "c1"}), _plan({"Makefile": "m2", "conf/a.conf": "c1"})
    assert _pin.plan_digest(a) == _pin.plan_digest(b)
    assert _pin.plan_digest(_reordered(a)) == _pin.plan_digest(a)
    rows = copy.deepcopy(a)
    rows["rows"].reverse()
    assert _pin.plan_digest(rows) == _pin.plan_digest(a)


def test_plan_hash_ignores_reasons_lines_and_estimates():
    a = _plan({"Makefile": "m2", "conf/a.conf": "c1"})
    b = copy.deepcopy(a)
    b["lines"] = ["something else"]
    for row in b["rows"]:
        row["reason"] = "reworded"
    b["steps"][0]["ops"]["h1"][1]["estimate"] = 12.5
    assert _pin.plan_digest(a) == _pin.plan_digest(b)


def test_plan_hash_changes_with_content_version_and_options():
    same = _pin.plan_digest(_plan({"Makefile": "m2", "conf/a.conf": "c1"}))
    assert _pin.plan_digest(_plan({"Makefile": "m3", "conf/a.conf": "c1"})) != same      # content
    assert _pin.plan_digest(_plan({"Makefile": "m2", "conf/a.conf": "c1"}, version="1.1.0")) != same  # version
    assert _pin.plan_digest(_plan({"Makefile": "m2", "conf/a.conf": "c1"}, jobs="api")) != same  # scope
    assert _pin.plan_digest(_plan()) != same  # nothing to do


@given(st.text(min_size=1, max_size=30))
@settings(max_examples=50, deadline=None)
def test_plan_hash_never_carries_a_secret_value(secret):
    # a secret-bearing output's digest is an HMAC (_deploy_stage); the summary holds digests, never file text
    plan = _plan({"Makefile": "m2", "conf/a.conf": "c1"})
    for step in plan["steps"]:
        for ops in step["ops"].values():
            for op in ops:
                op["env"] = dict(op["env"], DB_PASSWORD=secret)
                if op.get("record"):
                    op["record"]["secret_value"] = secret
    summary = _pin.canonical(_pin.plan_summary(plan))
    assert "DB_PASSWORD" not in summary and "secret_value" not in summary
    assert _pin.plan_digest(plan) == _pin.plan_digest(_plan({"Makefile": "m2", "conf/a.conf": "c1"}))


def test_pin_validation_and_prefix_match():
    digest = _pin.plan_digest(_plan())
    assert _pin.pin_matches(digest[:16], digest) and _pin.pin_matches(digest.upper()[:12], digest)
    assert not _pin.pin_matches("0" * 16, digest) or digest.startswith("0" * 16)
    assert "not a plan hash" in _pin.pin_error("abc")
    assert "not a plan hash" in _pin.pin_error("xyz123456789012")
    assert _pin.pin_error(digest[:12]) is None


def test_describe_changes_names_allocations_and_batches():
    old = _pin.plan_summary(_plan({"Makefile": "m2", "conf/a.conf": "c1"}))
    new = _pin.plan_summary(_plan({"Makefile": "m3", "conf/a.conf": "c1"}))
    lines = _pin.describe_changes(old, new)
    assert len([line for line in lines if line.startswith("api@h")]) == 3, lines
    assert all("pinned plan: restart hash" in line for line in lines if line.startswith("api@"))
    assert _pin.describe_changes(old, old) == []
    newer = _pin.plan_summary(_plan({"Makefile": "m2", "conf/a.conf": "c1"}, version="2.0.0"))
    assert any("1.0.0 -> 2.0.0" in line for line in _pin.describe_changes(old, newer))


def test_compute_plan_rows_carry_the_content_hash():
    plan = _plan({"Makefile": "m2", "conf/a.conf": "c1"})
    want = content("api", files={"Makefile": "m2", "conf/a.conf": "c1"})["api"]["hash"]
    assert {r["hash"] for r in plan["rows"] if r["job"] == "api"} == {want}


# --- wave picture ----------------------------------------------------------------------------------

def test_wave_picture_from_deployment_seq_and_demands():
    poller = job("poller", deployment_seq=1, commands={"wait_api": {"executed_on": ["post_deploy"], "demands": {
        "job": "api", "command": "command_ready", "config": {"min_version": "1.0"}}}})
    cat = catalog([job("api"), job("web"), poller, job("gone", removed=True, deployment_seq=3)], [])
    assert _pin.wave_picture(cat) == ["waves: wave 0 api, web; wave 1 poller",
                                      "  wave 0 api --(command_ready >= 1.0)--> wave 1 poller"]


def test_wave_picture_is_empty_for_one_wave_and_bounds_both_ways():
    assert _pin.wave_picture(catalog([job("api"), job("web")], [])) == []
    b = job("b", deployment_seq=1, commands={"c": {"demands": {"job": "a", "command": "ready",
                                                               "config": {"min_version": "1", "max_version": "2"}}}})
    assert _pin.wave_picture(catalog([job("a"), b], []))[1] == "  wave 0 a --(ready >= 1 <= 2)--> wave 1 b"


def test_stamp_puts_the_wave_picture_after_the_head_line_and_the_hash_last():
    poller = job("poller", deployment_seq=1, commands={"w": {"demands": {"job": "api", "command": "ready"}}})
    cat = catalog([job("api"), poller], [("api", "h1", "active"), ("poller", "h1", "active")])
    plan = P.compute_plan(cat, content("api", "poller"), _settle(cat, content("api", "poller"), HOSTS), HOSTS)
    assert not any(line.startswith("waves:") for line in plan["lines"])
    head = plan["lines"][0]
    plan = _pin.stamp(P.Plan.from_json(plan), cat).to_json()
    digest = plan["plan_hash"]
    assert plan["plan_hash"] == digest == _pin.plan_digest(plan)  # the lines are not part of the hash
    assert plan["lines"][:3] == [head, "waves: wave 0 api; wave 1 poller", "  wave 0 api --(ready)--> wave 1 poller"]
    assert plan["lines"][-1] == "plan hash: %s (pin this plan: -e maand_plan=%s)" % (digest[:16], digest[:16])


# --- bounded diff ----------------------------------------------------------------------------------

def _row(job_, host, paths, action="restart", from_version="1.0.0"):
    return {"job": job_, "worker": host, "action": action, "paths": paths, "from_version": from_version}


def test_diff_requests_bound_files_skip_secrets_and_new_allocations():
    rows = [_row("api", "h1", ["f%02d" % i for i in range(15)] + ["secret.conf", ".maand-env/DB"]),
            _row("api", "h2", ["a"], action="start", from_version=None),   # new: nothing to diff against
            _row("web", "h1", ["index.html"], action="skip")]
    wanted, notes = _pin.diff_requests({"rows": rows}, lambda j, h, rel: rel == "secret.conf", max_files=10)
    assert wanted == {"h1": {"api": ["f%02d" % i for i in range(10)]}}
    assert notes == {"h1": ["api/secret.conf: secret-bearing, not shown",
                            "api: 5 more changed file(s) not shown (at most 10 per job)"]}


def test_render_diff_is_bounded_and_names_binary_and_large_files():
    before = {"text": "".join("line %d\n" % i for i in range(500))}
    after = {"text": "".join("LINE %d\n" % i for i in range(500))}
    out = _pin.render_diff("api", "h1", "big.txt", before, after, max_lines=50)
    assert out.count("\n") == 51 and "more diff lines of api/big.txt not shown" in out
    small = _pin.render_diff("api", "h1", "a.conf", {"text": "port=1\n"}, {"text": "port=2\n"})
    assert "-port=1\n+port=2\n" in small and "api/a.conf (h1)" in small
    assert _pin.render_diff("api", "h1", "b", {"binary": True}, {"text": "x"}) == \
        "api/b: binary file on h1, changed (not shown)\n"
    assert "larger than" in _pin.render_diff("api", "h1", "b", {"text": "x"}, _pin.text_of(b"x" * (_pin.MAX_BYTES + 1)))
    assert "/dev/null" in _pin.render_diff("api", "h1", "new", {"missing": True}, {"text": "x\n"})
    assert "No newline at end of file" in _pin.render_diff("api", "h1", "n", {"text": "a"}, {"text": "b"})


def test_text_of_matches_the_agents_reader(tmp_path):
    from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent
    for data in (b"plain\n", b"\x00\x01", "caf\xe9".encode("latin-1"), "café\n".encode("utf-8")):
        (tmp_path / "f").write_bytes(data)
        assert _pin.text_of(data) == _agent.read_file_text(str(tmp_path / "f"))
    assert json.dumps(_pin.text_of(None)) == json.dumps(_agent.read_file_text(str(tmp_path / "nope")))


def test_the_workers_side_is_shown_only_when_it_is_the_promoted_content(tmp_path):
    from ansible_collections.maand.core.plugins.plugin_utils.bucket import content as _content
    from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent
    job_dir = tmp_path / "jobs" / "api"
    job_dir.mkdir(parents=True)
    (job_dir / "plain.conf").write_text("port=1\n")
    (job_dir / "secret.conf").write_text("password=hunter2\n")
    recorded = _content.hash_tree(str(job_dir))["files"]
    recorded["secret.conf"] = "0" * 64  # what an HMAC digest looks like to anyone without the key
    got = _agent.read_files(str(tmp_path), {"api": ["plain.conf", "secret.conf", "new.conf"]})["files"]["api"]
    assert "previous" not in _agent.read_files(str(tmp_path), {"api": ["plain.conf"]})
    plain = _pin.checked_before(got["plain.conf"], recorded["plain.conf"])
    assert "-port=1\n+port=2\n" in _pin.render_diff("api", "h1", "plain.conf", plain, {"text": "port=2\n"})
    hidden = _pin.render_diff("api", "h1", "secret.conf", _pin.checked_before(got["secret.conf"], recorded["secret.conf"]),
                              {"text": "password=other\n"})
    assert "hunter2" not in hidden and "not shown" in hidden
    assert _pin.checked_before(got["new.conf"], None) == {"missing": True}


def test_maand_plan_and_maand_rollback_are_deploy_options():
    from ansible_collections.maand.core.plugins.plugin_utils.adapter import extra_vars as adapter_extra_vars
    from ansible_collections.maand.core.plugins.plugin_utils.ops import extra_vars as _extra_vars
    known = adapter_extra_vars.deploy_extra_vars()
    assert {"maand_plan", "maand_rollback"} <= set(_extra_vars.DEPLOY_VARS) <= known
    assert _extra_vars.unknown_extra_vars({"maand_plan": "ab" * 8, "maand_rollback": "api"}, known,
                                          "maand.core.deploy") == []


def test_a_rollback_diff_compares_the_workers_current_and_previous_copies():
    rows = [_row("api", "h1", ["conf/a.conf"], action="rollback", from_version="1.2.0")]
    wanted, notes = _pin.diff_requests({"rows": rows}, lambda j, h, rel: False)
    assert wanted == {"h1": {"api": ["conf/a.conf"]}} and notes == {}
    out = _pin.render_diff("api", "h1", "conf/a.conf", {"text": "v=2\n"}, {"text": "v=1\n"}, after_label="previous")
    assert "+++ api/conf/a.conf (previous)" in out and "-v=2\n+v=1\n" in out
    hidden = _pin.render_diff("api", "h1", "s", {"text": "a"}, {"unverified": True}, after_label="previous")
    assert hidden == ("api/s: changed; the previous copy is not shown (secret-bearing, or not the promoted content: "
                      "its digest differs from the deploy record)\n")


def test_the_new_texts_of_a_diff_are_deduplicated_and_bounded():
    blobs = _pin.Blobs(budget=10)
    a = blobs.add({"text": "12345678"})
    assert blobs.add({"text": "12345678"}) == a  # the same rendered text on every worker is carried once
    assert blobs.add({"binary": True}) != a
    over = blobs.add({"text": "abcdef"})
    assert blobs.texts[over] == {"over_budget": True}
    assert "not shown: --diff carries at most" in _pin.render_diff("api", "h1", "f", {"text": "x"}, blobs.texts[over])
