"""Property tests over generated workspaces: a build either succeeds or reports only known error
kinds (never a traceback), placement is deterministic and matches the label rule, and a failed build
writes nothing."""

import json
import os
import shutil
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.bucket.problems import KINDS
from tests.bucket_factory import make_bucket

LABELS = ["worker", "prod", "web", "db", "gpu", "Prod"]
QUANTITY = st.one_of(st.sampled_from(["", "512", "1 gb", "2GB", "300 mb", "2 ghz", "lots", "1.5 tb", "-3"]),
                     st.integers(-5, 9000), st.none(), st.booleans())

worker = st.fixed_dictionaries(
    {"host": st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3", "w4.example", "bad host"])},
    optional={"labels": st.lists(st.sampled_from(LABELS), max_size=3), "memory": QUANTITY, "cpu": QUANTITY,
              "tags": st.dictionaries(st.sampled_from(["zone", "rack"]), st.sampled_from(["a", "b"]), max_size=2)},
)

manifest = st.fixed_dictionaries(
    {},
    optional={
        "version": st.one_of(st.sampled_from(["1", "v2.1", "1.2.3.4", "", "2.0.0-rc1"]), st.integers(-1, 3)),
        "selectors": st.lists(st.sampled_from(LABELS), max_size=2),
        "resources": st.fixed_dictionaries({}, optional={
            "memory": st.fixed_dictionaries({}, optional={"min": QUANTITY, "max": QUANTITY}),
            "cpu": st.fixed_dictionaries({}, optional={"min": QUANTITY, "max": QUANTITY}),
            "ports": st.dictionaries(st.sampled_from(["http_port", "Bad", "db"]),
                                     st.one_of(st.just({}), st.integers(-1, 70000)), max_size=2),
        }),
        "min_allocations_count": st.integers(-1, 4),
        "restart_policy": st.sampled_from(["always", "reload", "never", "sometimes"]),
        "commands": st.dictionaries(
            st.sampled_from(["command_a", "command_b", "hook"]),
            st.fixed_dictionaries({"executed_on": st.lists(st.sampled_from(["cli", "pre_deploy", "x"]), max_size=2)},
                                  optional={"demands": st.fixed_dictionaries({
                                      "job": st.sampled_from(["", "j0", "j1", "j2", "nope"]),
                                      "command": st.sampled_from(["", "command_a", "command_b"])})}),
            max_size=2),
    },
)

workspace = st.tuples(st.lists(worker, max_size=4), st.lists(manifest, min_size=0, max_size=3),
                      st.dictionaries(st.sampled_from(["j0", "j1", "ghost"]),
                                      st.fixed_dictionaries({}, optional={"memory": QUANTITY}), max_size=2))


def _write(root, workers, manifests, overrides):
    lines = []
    for job, section in overrides.items():
        lines.append("[%s]" % job)
        for key, value in section.items():
            if value is not None:
                lines.append("%s = %s" % (key, json.dumps(value)))
    make_bucket(root, workers, {"j%d" % i: m for i, m in enumerate(manifests)}, jobs_conf="\n".join(lines) + "\n")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workspace)
def test_build_succeeds_or_reports_only_known_kinds(ws):
    root = tempfile.mkdtemp(prefix="maand-prop-")
    try:
        _write(root, *ws)
        result = _service.build(root)
        assert all(p.kind in KINDS and p.file and p.message for p in result.report.errors)
        if result.report.ok:
            assert os.path.exists(_catalog.catalog_path(root))
            again = _service.compute(root, inputs=result.catalog.get("inputs"))  # the fingerprint is taken by build()
            assert again.catalog == result.catalog, "placement must be deterministic"
            _check_label_rule(result.bucket, result.catalog)
        else:
            assert result.catalog is None and not os.path.exists(_catalog.catalog_path(root))
    finally:
        shutil.rmtree(root)


def _check_label_rule(bucket, catalog):
    placed = {(a["job"], a["worker"]) for a in catalog["allocations"] if a["state"] != "removed"}
    expected = {(job.name, w.host) for job in bucket.jobs.values() for w in bucket.workers
                if set(job.selectors) <= set(w.labels)}
    assert placed == expected
