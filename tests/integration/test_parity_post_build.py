"""maand's tests/build_post_build_test.go TestBuildFailsWhenPostBuildHooksFail, as the build action runs it:
a post_build command that exits 1 fails the build with a message naming post_build (the catalog row of the
command is tests/unit/plugin_utils/kv/test_parity_kv.py). Runs the hook as a python3 process, hence an integration test."""

from __future__ import annotations

import shutil

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.hooks import points as _points
from tests.maand_init import init_bucket, job, ws


def test_failing_post_build_fails_the_build_naming_the_event(tmp_path):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    job(root, "hookjob", '{"selectors":["worker"],"commands":{"command_post":{"executed_on":["post_build"]}}}')
    ws(root, "jobs/hookjob/_modules/command_post.py", "#!/usr/bin/env python3\nimport sys\nsys.exit(1)\n")
    result = _service.build(root)
    assert result.report.ok, [str(p) for p in result.report.errors]
    with _points.session(root, result.catalog) as ctx:
        failures = _points.post_build(ctx)
    assert len(failures) == 1 and failures[0].startswith("ErrJobCommandFailed: post_build: job hookjob command "
                                                         "command_post"), failures
    ws(root, "jobs/hookjob/_modules/command_post.py", "import sys\nsys.exit(0)\n")
    with _points.session(root, result.catalog) as ctx:
        assert _points.post_build(ctx) == []


def test_purge_job_kv_extra_var_is_maands_build_flag(tmp_path):
    """maand build --purge-job-kv (tests/build_vars_job_test.go) is -e maand_purge_job_kv=true: the keys job
    commands wrote for a job that left the workspace are marked deleted; without it they stay."""
    from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
    from tests.integration.test_kv_cat import playbook

    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1"}]')
    job(root, "api", '{"selectors":["worker"]}')
    job(root, "vault", '{"selectors":["worker"]}')
    assert _service.build(root).report.ok
    with _store.KVStore.edit(root) as store:
        store.put("vars/job/vault", "cluster_initialized", "true")
        store.put("secrets/job/vault", "root_token", "t0ken")
    shutil.rmtree("%s/workspace/jobs/vault" % root)
    kept = playbook("maand.core.build", "-e", "maand_bucket=%s" % root)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert _store.KVStore.load(root).get("vars/job/vault", "cluster_initialized") == "true"
    purged = playbook("maand.core.build", "-e", "maand_bucket=%s" % root, "-e", "maand_purge_job_kv=true")
    assert purged.returncode == 0, purged.stdout + purged.stderr
    assert "2 keys deleted in data/kv.json" in purged.stdout, purged.stdout
    store = _store.KVStore.load(root)
    assert store.get("vars/job/vault", "cluster_initialized") is None and store.get("secrets/job/vault", "root_token") is None
