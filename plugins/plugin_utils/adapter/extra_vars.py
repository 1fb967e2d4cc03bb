# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The maand_* extra vars of a run (Ansible's load_extra_vars) against those the deploy reads (its
role's options): warnings with a "did you mean", deprecations of the old names (ops/extra_vars.py
words them); and the check of the role's options against their spec, once per run (role_option_errors)."""

from __future__ import annotations

import functools
import os

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.utils.display import Display
from ansible.utils.vars import load_extra_vars

from ..ops import extra_vars

display = Display()

ROLE_SPECS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "deploy", "meta", "argument_specs.yml")
OTHER_KNOWN = ("maand_bucket",)  # the bucket of build/explain/cat; harmless here


@functools.lru_cache(maxsize=1)
def role_options():
    """The deploy role's options: roles/deploy/meta/argument_specs.yml, entry point main."""
    with open(ROLE_SPECS, encoding="utf-8") as handle:
        return yaml.safe_load(handle)["argument_specs"]["main"]["options"]


def deploy_extra_vars():
    """The maand_* extra vars the deploy reads: the role's options (meta/argument_specs.yml)."""
    return set(role_options()) | set(OTHER_KNOWN)


def role_option_errors(task_vars, templar):
    """What ansible.builtin.validate_argument_spec says of the role's options in task_vars (templated): its error
    messages, [] when they pass. The deploy's lock task calls it, once per run: Ansible's own check of a role's
    arguments runs on every host of the play (4 s of a first deploy at 64 hosts), and a task of its own costs a
    round of the strategy (maand.core.deploy imports the role with rolespec_validate: false)."""
    spec = role_options()
    args = templar.template({name: task_vars[name] for name in spec if name in task_vars})
    return list(ArgumentSpecValidator(spec).validate(args, validate_role_argument_spec=True).error_messages)


def warn_unknown_extra_vars(loader):
    """Warn about maand_* extra vars the deploy does not read (the deploy playbook refuses them in its first play,
    playbooks/deploy.yml; this covers a playbook of the user's that imports the role)."""
    try:
        extra = load_extra_vars(loader)
        known = deploy_extra_vars()
    # a check that cannot run is a warning: it guards against typos, it must never fail the deploy
    except Exception as exc:  # pylint: disable=broad-exception-caught
        display.warning("could not check the maand_ extra vars: %s" % exc)
        return []
    messages = extra_vars.unknown_extra_vars(extra, extra_vars.known_vars(extra_vars.DEPLOY, known), extra_vars.DEPLOY)
    for message in messages:
        display.warning(message)
    for message in extra_vars.deprecated_extra_vars(extra, extra_vars.DEPLOY_RENAMED):
        display.deprecated(message, version="2.0.0", collection_name="maand.core")
    return messages
