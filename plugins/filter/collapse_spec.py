# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: collapse_spec
short_description: Fold a job's parent chain of named container specs into one spec, as Maelstrom does
version_added: 1.0.0
author: maand.core developers
description:
  - >-
    Walks the C(parent) chain of a job manifest (C({"container": NAME, "use": [...]}), or C({"image": NAME, "use": [...]})
    for a local OCI image) through O(containers), with the semantics of Maelstrom's C(CollapsedJobSpec::new)
    (seed 004, C(crates/maelstrom-client-process/src/collapsed_job_spec.rs)).
  - >-
    C(use) omitted means every field. The wanted fields start as C(layers), C(environment), C(mounts) and every optional
    field the job leaves unset; each container parent narrows them to its C(use).
  - >-
    Vector fields (C(layers), C(environment), C(mounts)) concatenate parent-first. An optional field
    (C(enable_writable_file_system), C(working_directory), C(network), C(user), C(group)) takes the nearest value up the
    chain; an explicit C(false) is a value.
  - >-
    The walk stops when no field is wanted any more (a parent beyond that point is not looked up), at a container
    without parent, or at an image parent, which is returned in C(image) with the image fields still wanted.
  - >-
    A missing parent and a parent loop are errors naming the chain. Reading the image itself (its layers, Env and
    WorkingDir) is left to the caller.
options:
  _input:
    description: A job manifest (its job-spec fields; other keys are ignored).
    type: dict
    required: true
  containers:
    description: The named container specs, C(workspace/containers/<name>.json) by name.
    type: dict
    default: {}
seealso:
  - plugin: maand.core.job_environment
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Three jobs share one base spec
  ansible.builtin.debug:
    msg: "{{ manifest | maand.core.collapse_spec(containers={'base': base}) }}"
  vars:
    base:
      environment: {LOG_LEVEL: "$env{LOG_LEVEL:-info}"}
      user: nobody
      working_directory: bin
    manifest:
      parent: {container: base, use: [environment, user]}
      environment: {PORT: "8080"}
# -> environment [{vars: {LOG_LEVEL: ...}, extend: true}, {vars: {PORT: "8080"}, extend: true}], user nobody,
#    working_directory null (not in use)
"""

RETURN = r"""
_value:
  description: The collapsed spec, before defaults are applied; unset optional fields are null.
  type: dict
  contains:
    layers:
      description: Layers, parent-first.
      type: list
      elements: raw
    enable_writable_file_system:
      description: C(true), C(false) or null.
      type: bool
    environment:
      description: Environment elements C({vars, extend}), parent-first; feed them to P(maand.core.job_environment#filter).
      type: list
      elements: dict
    working_directory:
      description: Working directory, or null.
      type: str
    mounts:
      description: Mounts, parent-first.
      type: list
      elements: dict
    network:
      description: C(disabled), C(loopback), C(local) or null.
      type: str
    user:
      description: User name or uid, or null.
      type: raw
    group:
      description: Group name or gid, or null.
      type: raw
    image:
      description:
        - Null, or C({name, use}) with C(use) reduced to the image fields (C(layers), C(environment),
          C(working_directory)) still wanted.
      type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.maand.core.plugins.plugin_utils import jobspec


def collapse_spec(job, containers=None):
    """The collapsed spec of ``job`` as a dict (see DOCUMENTATION)."""
    containers = {} if containers is None else containers
    if not isinstance(job, Mapping):
        raise AnsibleFilterError(f"maand.core.collapse_spec: the input must be a job manifest (dict), not {type(job).__name__}")
    if not isinstance(containers, Mapping) or not all(isinstance(c, Mapping) for c in containers.values()):
        raise AnsibleFilterError("maand.core.collapse_spec: containers must be a dict of name: container spec (dict)")
    try:
        return jobspec.collapse_spec(job, containers).to_dict()
    except jobspec.SpecError as exc:
        raise AnsibleFilterError(f"maand.core.collapse_spec: {exc}") from None


class FilterModule:
    def filters(self):
        return {"collapse_spec": collapse_spec}
