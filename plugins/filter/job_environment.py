# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: job_environment
short_description: Expand a job's environment specs into the final variable map, as Maelstrom does
version_added: 1.0.0
author: maand.core developers
description:
  - >-
    Applies a list of environment elements C({"vars": {...}, "extend": true|false}) in turn to a running map that
    starts as O(initial), with Maelstrom's semantics (seed 004, C(crates/maelstrom-client-base/src/spec.rs)).
  - >-
    In every value C($env{V}) is the controller variable V from O(client_env), C($prev{V}) the value of V in the map
    as it was before the current element, C($env{V:-default}) and C($prev{V:-default}) give C(default) when V is unset
    or empty, and C($$) is a literal C($).
  - >-
    C(extend=true) (the default) merges the element's variables into the map; C(extend=false) replaces the map by them.
  - >-
    A map instead of a list is one element with C(extend=true).
  - >-
    An unknown variable, an unterminated C({) or a C($) not followed by C($), C(env{) or C(prev{) is an error naming
    the element, the variable being set and the unknown variable.
options:
  _input:
    description: The environment specs (the collapsed C(environment) of a job, parent-first), or one map.
    type: raw
    required: true
  client_env:
    description:
      - The controller-side variables that C($env{V}) reads, for example C(ansible_env) of localhost or a dict of
        C(lookup('ansible.builtin.env', ...)) values. Nothing is read from the process environment implicitly.
    type: dict
    default: {}
  initial:
    description: The map before the first element (for example an image's C(Env)); its values are not expanded.
    type: dict
    default: {}
seealso:
  - plugin: maand.core.collapse_spec
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Final environment of a job (PATH prepended, LOG_LEVEL with a default, DB_URL from the CI environment)
  ansible.builtin.debug:
    msg: "{{ specs | maand.core.job_environment(client_env={'DB_URL': lookup('ansible.builtin.env', 'DB_URL')}) }}"
  vars:
    specs:
      - vars: {PATH: /usr/bin, DB: "$env{DB_URL}"}
        extend: false
      - vars: {PATH: "/opt/x/bin:$prev{PATH}", LOG_LEVEL: "$env{LOG_LEVEL:-info}"}

- name: The environment of a job after its parent chain is folded in
  ansible.builtin.set_fact:
    job_env: "{{ (manifest | maand.core.collapse_spec(containers=containers)).environment | maand.core.job_environment }}"
"""

RETURN = r"""
_value:
  description: The final variables, sorted by name.
  type: dict
  sample: {DB: "postgres://db/app", LOG_LEVEL: info, PATH: "/opt/x/bin:/usr/bin"}
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.maand.core.plugins.plugin_utils.jobspec import SpecError, environment_eval


def job_environment(specs, client_env=None, initial=None):
    """The final environment map of ``specs`` (see DOCUMENTATION)."""
    client_env = {} if client_env is None else client_env
    initial = {} if initial is None else initial
    for name, value in (("client_env", client_env), ("initial", initial)):
        if not isinstance(value, Mapping):
            raise AnsibleFilterError(f"maand.core.job_environment: {name} must be a dict, not {type(value).__name__}")
    try:
        return environment_eval({str(k): str(v) for k, v in initial.items()}, specs, _lookup(client_env))
    except SpecError as exc:
        raise AnsibleFilterError(f"maand.core.job_environment: {exc}") from None


def _lookup(client_env):
    def lookup(name):
        value = client_env.get(name)
        return None if value is None else str(value)
    return lookup


class FilterModule:
    def filters(self):
        return {"job_environment": job_environment}
