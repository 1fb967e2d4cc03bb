# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Push the certificate expiry metrics to the bucket's Prometheus (docs: plugins/modules/cert_metrics.py)."""

from __future__ import annotations

from ansible.utils.display import Display

from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils.adapter import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils import catalog
from ansible_collections.maand.core.plugins.plugin_utils import ops
from ansible_collections.maand.core.plugins.plugin_utils import prometheus

display = Display()

ARGUMENT_SPEC = adapter.spec_for("cert_metrics")


class ActionModule(ControllerAction):
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args, task_vars):
        bucket_dir, best_effort = args["bucket"], args["best_effort"]
        try:
            cat = catalog.read_catalog(bucket_dir)
            if cat is None:
                raise ops.cert_metrics.CertMetricsError(
                    "%s has no data/catalog.json; build the bucket first (ansible-playbook maand.core.build"
                    " -e maand_bucket=%s)" % (bucket_dir, bucket_dir))
            outcome = ops.cert_metrics.push(bucket_dir, cat, check_mode=bool(self._task.check_mode),
                                            log=display.display)
        except (prometheus.PushError, catalog.CatalogError) as exc:  # CertMetricsError is one
            msg = "cert metrics: %s" % exc
            if not best_effort:
                result.update(failed=True, changed=False, state="failed", msg=msg)
                return result
            # maand's PushMetrics after a deploy: logged, the deploy's outcome stands
            result.update(changed=False, state="failed", msg=msg, warnings=[msg + " (the deploy's outcome stands)"])
            return result
        if outcome.state == "skipped" and best_effort:
            display.v(outcome.message)  # as maand: a bucket without a Prometheus server job hears nothing of it
        else:
            display.display(outcome.message)
        result.update(outcome.as_result(), changed=outcome.state == "pushed")
        return result
