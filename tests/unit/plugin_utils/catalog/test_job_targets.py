"""maand.core.job takes any target the job's Makefile defines (maand job run --target migrate), a safe name only."""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.filter.makefile_target import makefile_target
from ansible_collections.maand.core.plugins.plugin_utils.bucket.job_checks import target_problem

MAKEFILE = """.PHONY: start stop migrate
VAR := 1
start:
\t./run &
stop status:
\tpkill run || true
migrate: start
\techo migrate
%.o: %.c
\tcc $<
"""


@pytest.mark.parametrize("target", ["start", "stop", "status", "migrate"])
def test_defined_targets_run(target):
    assert target_problem(target, MAKEFILE) is None
    assert makefile_target(target, MAKEFILE) == ""


def test_an_undefined_target_names_the_makefile_targets():
    problem = target_problem("seed", MAKEFILE, "Makefile.tpl")
    assert problem == "the job's Makefile.tpl defines no target 'seed'; its targets: migrate, start, status, stop"


def test_maands_lifecycle_targets_are_always_accepted():
    assert target_problem("reload", MAKEFILE) is None  # as maand: make names the missing target when it runs


@pytest.mark.parametrize("target", ["-f", "--eval=x", "VAR=1", "a b", "", ".PHONY", "x;rm", None])
def test_unsafe_names_are_refused_even_without_a_makefile(target):
    assert "not a safe Makefile target name" in target_problem(target, None)
    assert "not a safe" in makefile_target(target)


def test_a_makefile_that_includes_others_is_not_second_guessed():
    assert target_problem("deploy-db", "include common.mk\nstart:\n\ttrue\n") is None
    assert target_problem("deploy-db", None) is None
