# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand.core.gotemplate: render Go text/template text (docs: gotemplate.yml beside this file)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.maand.core.plugins.plugin_utils import gotemplate
from ansible_collections.maand.core.plugins.plugin_utils.kv import AllocationData, KVError, render_allocation

_FUNC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def _plain(value, where):
    """Ansible's tagged/lazy containers and strings as plain Python values."""
    if isinstance(value, Mapping):
        return {_plain(k, where): _plain(v, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    raise AnsibleFilterError("gotemplate: %s holds a %s; only maps, lists, strings, numbers,"
                             " booleans and null are template data" % (where, type(value).__name__))


def _kv_snapshot(kv):
    if kv is None:
        return {}
    if not isinstance(kv, Mapping):
        raise AnsibleFilterError("gotemplate: kv must be a map of namespace -> {key: value},"
                                 " got %s" % type(kv).__name__)
    out = {}
    for ns, keys in kv.items():
        if not isinstance(keys, Mapping):
            raise AnsibleFilterError("gotemplate: kv[%s] must be a map of key -> value" % ns)
        out[str(ns)] = {str(k): "" if v is None else str(v) for k, v in keys.items()}
    return out


def _funcs(funcs):
    if funcs is None:
        return {}
    if not isinstance(funcs, Mapping):
        raise AnsibleFilterError("gotemplate: funcs must be a map of name -> callable")
    for name, fn in funcs.items():
        if not _FUNC_NAME.match(str(name)) or not callable(fn):
            raise AnsibleFilterError("gotemplate: funcs[%s] must be a callable under a Go"
                                     " identifier name" % name)
    return dict(funcs)


def _allocation(data, job, worker_ip):
    data = _plain(data or {}, "data")
    if not isinstance(data, dict):
        raise AnsibleFilterError("gotemplate: with job=, data is the allocation context (a map"
                                 " of AllocationID, Job, WorkerIP, ...)")
    for field, value in (("Job", job), ("WorkerIP", worker_ip)):
        if value is None:
            continue
        if data.get(field) not in (None, "", value):
            raise AnsibleFilterError("gotemplate: data.%s is %r but %s=%r; give one or make them"
                                     " agree" % (field, data[field], field.lower(), value))
        data[field] = value
    try:
        alloc = AllocationData.from_mapping(data)
    except (KVError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("gotemplate: data: %s" % exc) from None
    if not alloc.WorkerIP:
        raise AnsibleFilterError("gotemplate: with job=, give worker_ip= (or data.WorkerIP):"
                                 " the namespaces a job may read depend on its worker")
    return alloc


def render(text, data=None, kv=None, job=None, worker_ip=None, upstream_jobs=None,
           deleted=None, funcs=None, name="template"):
    """Render text as Go text/template; with job=, as maand's deploy renders a job's .tpl."""
    if not isinstance(text, str):
        raise AnsibleFilterError("gotemplate: the input must be template text (a string)")
    extra = _funcs(funcs)
    try:
        if job is None:
            tmpl = gotemplate.parse(str(text), str(name), extra)
            return tmpl.execute(_plain(data, "data"))
        alloc = _allocation(data, str(job), None if worker_ip is None else str(worker_ip))
        upstream = [str(j) for j in (upstream_jobs or [])]
        return render_allocation(str(text), str(name), alloc, _kv_snapshot(kv), upstream,
                                 _plain(deleted, "deleted"), extra)
    except gotemplate.TemplateError as exc:
        where = "line %s" % exc.line if exc.line else "template %s" % exc.name
        if exc.column is not None and exc.line:
            where += ", column %s" % exc.column
        raise AnsibleFilterError("gotemplate: %s (%s: %s)" % (exc, where, exc.cause)) from None
    except KVError as exc:
        raise AnsibleFilterError("gotemplate: %s" % exc) from None


class FilterModule:
    """maand.core filters."""

    def filters(self):
        return {"gotemplate": render}
