"""Never accept silently: every field, file or folder that maand acts on and maand.core does not is a
build warning that names it (an error with strict=True, i.e. -e maand_strict=true), and unknown keys
and names get a "did you mean" from the known ones."""

import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service, catalog as _catalog
from ansible_collections.maand.core.plugins.plugin_utils.bucket.problems import did_you_mean
from tests.bucket_factory import write
from tests.maand_init import init_bucket, job, ws


def unhonoured(result):
    return [(w.file, w.field) for w in result.report.warnings if w.unhonoured]


def text(result):
    return "\n".join(str(w) for w in result.report.warnings + result.report.errors)


# (id, setup, file, field, words)
CASES = [
    ("selector_typo", lambda r: job(r, "a", {"selector": ["web"]}),
     "workspace/jobs/a/manifest.json", "selector", 'did you mean "selectors"?'),
    ("memroy_typo", lambda r: job(r, "a", {"resources": {"memroy": {"max": "1 gb"}}}),
     "workspace/jobs/a/manifest.json", "resources.memroy", 'did you mean "memory"?'),
    ("bounds_typo", lambda r: job(r, "a", {"resources": {"cpu": {"mn": "1 ghz"}}}),
     "workspace/jobs/a/manifest.json", "resources.cpu.mn", 'did you mean "min"?'),
    ("probe_typo", lambda r: job(r, "a", {"resources": {"ports": {"p_port": {}}},
                                          "health_check": {"checks": [{"type": "tcp", "port": "p_port", "prot": 1}]}}),
     "workspace/jobs/a/manifest.json", "health_check.checks[0].prot", 'did you mean "port"?'),
    ("command_key_typo", lambda r: job(r, "a", {"commands": {"command_x": {"executed_on": ["cli"], "demand": {}}}},
                                       modules=["command_x.py"]),
     "workspace/jobs/a/manifest.json", "commands.command_x.demand", 'did you mean "demands"?'),
    ("worker_key_typo", lambda r: ws(r, "workers.json", '[{"host":"10.0.0.1","lables":["a"]}]'),
     "workspace/workers.json", "[0].lables", 'did you mean "labels"?'),
    ("maand_conf_typo", lambda r: write(os.path.join(r, "maand.conf"), 'ssh_prot = 22\n'),
     "maand.conf", "ssh_prot", 'did you mean "ssh_port"?'),
    ("disabled_job_typo", lambda r: (job(r, "api", {}), ws(r, "disabled.json", {"jobs": {"apii": {}}})),
     "workspace/disabled.json", "jobs.apii", 'unknown job apii is ignored (did you mean "api"?)'),
    ("disabled_worker_typo", lambda r: (ws(r, "workers.json", '[{"host":"10.0.0.1"}]'),
                                        ws(r, "disabled.json", {"workers": ["10.0.0.l"]})),
     "workspace/disabled.json", "workers", 'did you mean "10.0.0.1"?'),
    ("disabled_key_typo", lambda r: ws(r, "disabled.json", {"job": {}}),
     "workspace/disabled.json", "job", 'did you mean "jobs"?'),
]


@pytest.mark.parametrize("name, setup, file, field, words", CASES, ids=[c[0] for c in CASES])
def test_not_honoured_is_a_warning_naming_it_and_an_error_in_strict(tmp_path, name, setup, file, field, words):
    root = init_bucket(tmp_path)
    with open(root + "/maand.conf", "a", encoding="utf-8") as handle:  # a manifest typo is an error otherwise
        handle.write('near_miss_keys = "warn"\n')                     # (tests/unit/plugin_utils/bucket/test_near_miss.py)
    setup(root)
    result = _service.compute(root)
    assert result.report.ok, text(result)
    assert (file, field) in unhonoured(result), text(result)
    assert words in text(result)
    strict = _service.build(root, strict=True)
    assert (file, field) in [(p.file, p.field) for p in strict.report.errors]
    assert not strict.written and _catalog.read_catalog(root) is None  # nothing written
    assert _service.build(root).written  # without strict: built, with the warning


def test_a_plain_maand_bucket_has_nothing_unhonoured(tmp_path):
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1","labels":["worker","web"],"memory":"1 gb","cpu":"1 ghz",'
                             '"tags":{"zone":"a"},"position":0,"hostname":"w1"}]')
    job(root, "web", {"version": "1.0.0", "selectors": ["web"], "resources": {
        "memory": {"min": "128 mb", "max": "256 mb"}, "cpu": {"min": "100 mhz"}, "ports": {"http_port": {}}},
        "min_allocations_count": 1, "max_concurrent_starts": 1, "max_concurrent_upgrades": 1,
        "restart_policy": "reload", "restart_globs": ["*.conf"],
        "health_check": {"checks": [{"type": "http", "port": "http_port", "path": "/", "expect_status": 200}],
                         "timeout_seconds": 2, "wait": {"attempts": 3, "interval_seconds": 1}}},
        makefile="start:\n\ttrue\nreload:\n\ttrue\n")
    ws(root, "disabled.json", {"jobs": {"web": {"allocations": ["10.0.0.1"]}}, "workers": []})
    result = _service.build(root, strict=True)
    assert result.report.ok and not result.report.warnings, text(result)


# Honoured now (issue 10): templates are rendered at deploy, vars.toml, bucket.conf and
# bucket.jobs.conf reach the jobs through the KV that build writes (data/kv.json).
NOW_HONOURED = [
    ("templates", lambda r: (job(r, "a", {}), ws(r, "jobs/a/conf/app.json.tpl", "{}"), ws(r, "jobs/a/x.j2", ""))),
    ("makefile_tpl_only", lambda r: (job(r, "a", {}, makefile=None), ws(r, "jobs/a/Makefile.tpl", "start:\n"))),
    ("vars_toml", lambda r: (job(r, "a", {}), ws(r, "jobs/a/vars.toml", 'a = "1"\n'))),
    ("bucket_vars", lambda r: ws(r, "bucket.conf", 'port_min = "30000"\nregion = "eu"\n')),
    ("job_vars", lambda r: (job(r, "a", {}), ws(r, "bucket.jobs.conf", '[a]\nmemory = "1 mb"\nmode = "x"\n'))),
    # issue 12: job commands run (build, deploy, maand.core.job_command); _modules/ stays on the controller
    ("commands", lambda r: job(r, "a", {"commands": {"command_m": {"executed_on": ["pre_deploy"]}}},
                               modules=["command_m.py"])),
    ("modules", lambda r: (job(r, "a", {}), ws(r, "jobs/a/_modules/helper.py", ""))),
    ("certs", lambda r: job(r, "a", {"certs": {"tls": {"subject": {"common_name": "a"}}}})),  # issue 13
]


@pytest.mark.parametrize("name, setup", NOW_HONOURED, ids=[c[0] for c in NOW_HONOURED])
def test_templates_and_kv_inputs_are_honoured(tmp_path, name, setup):
    root = init_bucket(tmp_path)
    setup(root)
    result = _service.build(root, strict=True)
    assert result.report.ok and not unhonoured(result), text(result)
    assert result.written and os.path.isfile(os.path.join(root, "data", "kv.json"))


@pytest.mark.parametrize("name, known, hint", [
    ("selector", ["selectors", "resources"], "selectors"), ("memroy", ["memory", "cpu"], "memory"),
    ("SELECTOR", ["selectors"], "selectors"), ("zzz", ["memory", "cpu"], None),
])
def test_did_you_mean(name, known, hint):
    assert did_you_mean(name, known) == ('' if hint is None else ' (did you mean "%s"?)' % hint)
