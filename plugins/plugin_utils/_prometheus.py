# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maand's Prometheus support for job templates (maand-sh/maand promconfig/, deploy/templates.go).

maand gives every job template two more functions, ``scrapeConfigs`` and ``ruleFiles``, used by
the Prometheus server job's ``prometheus.yml.tpl``. Build accepts them wherever maand does (every
job's ``.tpl``); deploy renders them from the catalog and the jobs' ``_prometheus/`` folders.

No Ansible imports.
"""

from __future__ import annotations

from typing import Callable

FUNC_NAMES = ("scrapeConfigs", "ruleFiles")


class PrometheusError(Exception):
    """A _prometheus/ file or a scrape/rule assembly maand would refuse; the message names it."""


def _not_at_build(name: str) -> Callable[[], str]:
    def func() -> str:
        raise PrometheusError("%s is rendered at deploy, with the catalog" % name)
    func.__name__ = name
    return func


# The names build parses job templates with (maand's deploy FuncMap has them for every job).
PARSE_FUNCS: dict[str, Callable] = {name: _not_at_build(name) for name in FUNC_NAMES}
