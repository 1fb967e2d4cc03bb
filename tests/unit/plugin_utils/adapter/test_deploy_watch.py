"""adapter/deploy_watch.py: what an interrupted deploy says (the callback prints it at exit)."""

from __future__ import annotations

from ansible_collections.maand.core.plugins.plugin_utils.adapter import deploy_watch

STEPS = [{"index": 0, "label": "wave 0: api upgrade batch 1/3"}, {"index": 1, "label": "wave 0: api upgrade batch 2/3"},
         {"index": 2, "label": "wave 0: api upgrade batch 3/3"}]


def test_an_interrupted_deploy_names_what_ran_what_did_not_and_how_to_resume():
    lines = deploy_watch.interrupted_lines(STEPS, [0, 1], ["api upgrade batch 1/3"], 1)
    assert lines[0] == "interrupted: the deploy stopped before its end during wave 0: api upgrade batch 2/3"
    assert lines[1] == "  done: wave 0: api upgrade batch 1/3"
    assert lines[2] == "  gates passed (those batches are promoted): api upgrade batch 1/3"
    assert lines[3] == "  not run: wave 0: api upgrade batch 3/3"
    assert lines[4].startswith("  to resume: run the deploy again (ansible-playbook maand.core.deploy)")


def test_interrupted_in_the_first_step_and_in_the_final_promotions():
    lines = deploy_watch.interrupted_lines(STEPS, [0], [], 0)
    assert lines[1] == "  done: no step finished" and lines[2].startswith("  not run: wave 0: api upgrade batch 2/3; ")
    lines = deploy_watch.interrupted_lines(STEPS, [0, 1, 2, "final"], [], "final")
    assert lines[0].endswith("during final promotions") and lines[-2] == "  not run: nothing"
