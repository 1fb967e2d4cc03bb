"""maand_* extra vars a playbook does not read are refused, with a "did you mean" (issue 9 item 2, issue 31 item 3)."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.adapter import extra_vars as adapter_extra_vars
from ansible_collections.maand.core.plugins.plugin_utils.ops import extra_vars as _extra_vars


def test_unknown_maand_vars_get_a_did_you_mean():
    msgs = _extra_vars.unknown_extra_vars({"maand_job": "api", "maand_jobs": "web", "other": 1, "maand_forse": True},
                                          ["maand_jobs", "maand_force"], "maand.core.deploy")
    assert len(msgs) == 2
    assert msgs[0].startswith('the extra var maand_forse is not read by maand.core.deploy '
                              '(did you mean "maand_force"?)')
    assert msgs[1].startswith('the extra var maand_job is not read by maand.core.deploy '
                              '(did you mean "maand_jobs"?)')
    assert _extra_vars.unknown_extra_vars({"maand_jobs": 1, "job": 2}, ["maand_jobs"], "x") == []


def test_the_deploy_knows_every_option_of_its_role():
    known = adapter_extra_vars.deploy_extra_vars()
    assert {"maand_jobs", "maand_force", "maand_sync_only", "maand_adopt_bucket_id", "maand_deploy_make_timeout",
            "maand_deploy_output_tail", "maand_deploy_rsync_verify_host", "maand_bucket"} <= known


def test_deploy_plan_warns_about_a_typo_in_the_extra_vars():
    with mock.patch.object(adapter_extra_vars, "load_extra_vars", return_value={"maand_job": "api", "maand_force": True}), \
            mock.patch.object(adapter_extra_vars.display, "warning") as warning:
        messages = adapter_extra_vars.warn_unknown_extra_vars(None)
    assert len(messages) == 1 and 'maand_job is not read' in messages[0] and '"maand_jobs"' in messages[0]
    warning.assert_called_once_with(messages[0])


def test_old_deploy_option_names_are_deprecated():
    assert _extra_vars.deprecated_extra_vars({"deploy_make_timeout": 5, "maand_jobs": "a"},
                                             _extra_vars.DEPLOY_RENAMED) == [
        "the extra var deploy_make_timeout is deprecated: use -e maand_deploy_make_timeout=... instead"]
    with mock.patch.object(adapter_extra_vars, "load_extra_vars", return_value={"deploy_output_tail": 5}), \
            mock.patch.object(adapter_extra_vars.display, "deprecated") as deprecated:
        assert adapter_extra_vars.warn_unknown_extra_vars(None) == []
    deprecated.assert_called_once()
    assert "maand_deploy_output_tail" in deprecated.call_args[0][0]


def _action(args):
    from types import SimpleNamespace

    from ansible_collections.maand.core.plugins.action import preflight
    task = SimpleNamespace(args=args, async_val=0, check_mode=False, diff=False, action="x",
                           resolved_action="maand.core.preflight", environment=[], no_log=False, delegate_to=None)
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    return preflight, preflight.ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(),
                                             mock.MagicMock())


def test_extra_vars_action_refuses_by_default_and_warns_when_told():
    module, act = _action({"playbook": "maand.core.job"})  # known: the registry's list
    with mock.patch.object(module, "load_extra_vars", return_value={"maand_job_worker": "h1"}):
        res = act.run(task_vars={})
    assert res["failed"] and res["msg"].startswith("nothing was run: the extra var maand_job_worker")
    assert "maand_allow_unknown_vars=true" in res["msg"]
    module, act = _action({"known": ["maand_strict"], "playbook": "maand.core.build", "refuse": False})
    with mock.patch.object(module, "load_extra_vars", return_value={"maand_strcit": True}):
        res = act.run(task_vars={})
    assert not res.get("failed") and '(did you mean "maand_strict"?)' in res["warnings"][0]
    with mock.patch.object(module, "load_extra_vars", return_value={"maand_strict": True, "other": 1}):
        res = act.run(task_vars={})
    assert not res.get("failed") and not res.get("warnings") and res["unknown"] == []


def test_a_var_of_another_maand_playbook_is_refused_unless_allowed():
    """status -e maand_job=web refuses (the README says so); an AWX workflow that passes one set of extra vars
    to every node says maand_allow_unknown_vars=true and gets warnings."""
    module, act = _action({"playbook": "maand.core.status"})
    with mock.patch.object(module, "load_extra_vars", return_value={"maand_job": "web"}):
        res = act.run(task_vars={})
    assert res["failed"] and 'maand_job is not read by maand.core.status (did you mean "maand_jobs"?)' in res["msg"]
    module, act = _action({"playbook": "maand.core.job"})
    with mock.patch.object(module, "load_extra_vars", return_value={"maand_jobs": "api", "maand_force": True,
                                                                    "maand_job": "api",
                                                                    "maand_allow_unknown_vars": "true"}):
        res = act.run(task_vars={})
    assert not res.get("failed"), res
    assert [m.split()[3] for m in res["warnings"]] == ["maand_force", "maand_jobs"]


@pytest.mark.parametrize("extra, word", [({"maand_rollbak": "api"}, "maand_rollback"),
                                         ({"maand_plans": "ab" * 8}, "maand_plan")])
def test_the_deploy_refuses_a_typo_that_would_change_what_runs(extra, word):
    """-e maand_rollbak=api rolled forward; -e maand_plans=HASH ran unpinned (issue 31 item 3)."""
    module, act = _action({"playbook": "maand.core.deploy"})
    with mock.patch.object(module, "load_extra_vars", return_value=extra):
        res = act.run(task_vars={})
    assert res["failed"] and '(did you mean "%s"?)' % word in res["msg"], res


def test_every_playbook_has_a_row_and_every_row_a_playbook():
    from pathlib import Path
    root = Path(__file__).resolve().parents[4] / "playbooks"
    names = {"maand.core." + p.stem for p in root.glob("*.yml")}
    assert set(_extra_vars.PLAYBOOK_VARS) | {_extra_vars.DEPLOY} == names
    for path in root.glob("*.yml"):
        assert "maand.core.preflight:" in path.read_text(), path.name
        assert "refuse: false" not in path.read_text(), path.name


def test_allow_unknown_reads_booleans_as_ansible_passes_them():
    assert _extra_vars.allows_unknown({"maand_allow_unknown_vars": True})
    assert _extra_vars.allows_unknown({"maand_allow_unknown_vars": "yes"})
    assert not _extra_vars.allows_unknown({"maand_allow_unknown_vars": "false"})
    assert not _extra_vars.allows_unknown({})
    verdict = _extra_vars.check({"maand_x": 1}, ["maand_y"], "p", refuse=False)
    assert not verdict.refused and verdict.warnings == [verdict.messages[0] + " (ignored)"]


def test_the_registry_names_what_the_playbooks_use():
    """Every maand_ extra var a playbook reads with default(...) is in its registry list."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[4] / "playbooks"
    for playbook, known in _extra_vars.PLAYBOOK_VARS.items():
        text = (root / ("%s.yml" % playbook.rsplit(".", 1)[1])).read_text()
        read = set(re.findall(r"\b(maand_[a-z_]+) \| default\(", text)) | set(re.findall(r"\b(maand_[a-z_]+) is defined", text))
        inventory = {"maand_bucket_dir", "maand_bucket_id", "maand_catalog_jobs", "maand_allocations",
                     "maand_inventory_errors", "maand_workspace_ok", "maand_catalog"}
        assert read - inventory <= set(known), (playbook, sorted(read - inventory - set(known)))
