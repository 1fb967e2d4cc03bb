"""Unit tests for the facts core (_facts.py, behind the maand.core.workers_file action): comparison, style,
atomic write. Reading maand.conf / workers.json is the model's job: see test_facts_reader.py."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[4]
COLLECTIONS = ROOT / ".collections"
# The root conftest.py links .collections/ansible_collections/maand/core to this repository.

from ansible_collections.maand.core.plugins.plugin_utils.ops import facts as _facts  # noqa: E402

WORKERS = """[
  {
    "host": "10.231.1.10",
    "labels": ["worker", "prod"],
    "memory": "4096 mb",
    "cpu": "2000 mhz",
    "tags": { "zone": "a" }
  },
  {
    "host": "10.231.1.11",
    "labels": ["worker"]
  },
  { "host": "w3.example", "labels": ["staging"], "hostname": "w3" }
]
"""


def facts(memory=7936, cpu=5600, storage=102400, **extra):
    result = {"changed": False, "memory_mb": memory, "cores": 4, "cpu_mhz": cpu,
              "cpu_mhz_source": "cpuinfo", "storage_total_mb": storage, "storage_mb": 1000}
    result.update(extra)
    return result


@pytest.fixture
def bucket(tmp_path):
    (tmp_path / "workspace").mkdir()
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "worker.key").write_text("key\n")
    (tmp_path / "maand.conf").write_text('ssh_user = "agent"\nssh_port = 2222\nuse_sudo = false\n')
    path = tmp_path / "workspace" / "workers.json"
    path.write_text(WORKERS)
    path.chmod(0o640)
    return tmp_path


def workers_path(bucket):
    return bucket / "workspace" / "workers.json"


def leftovers(bucket):
    return sorted(p.name for p in (bucket / "workspace").iterdir() if p.name != "workers.json")


# --------------------------------------------------------------------------- validation
# The messages are the model's (build's) own: see test_facts_reader.py for the same-as-build checks.


def write_workers(bucket, text):
    workers_path(bucket).write_text(text)


@pytest.mark.parametrize("text, expected", [
    ("[{\"host\": \"a\",}]", ["workspace/workers.json: invalid JSON", "line 1"]),
    ("{\"host\": \"a\"}", ["workspace/workers.json: $: expected array"]),
    ("[{\"labels\": [\"x\"]}]", ["$[0]: 'host' is a required property"]),
    ("[{\"host\": \"a\"}, {\"host\": \"b\"}, {\"host\": \"a\"}]",
     ["[2].host: duplicate host a (also at [0])", "list each host once"]),
    ("[\"10.0.0.1\"]", ["$[0]: expected object"]),
    ("[{\"host\": \"\"}]", ["$[0].host: must not be empty"]),
    ("[{\"host\": \"a\", \"labels\": \"prod\"}]", ["$[0].labels: expected array"]),
])
def test_bad_workers_json(bucket, text, expected):
    write_workers(bucket, text)
    with pytest.raises(_facts.WorkersFileError) as exc:
        _facts.inventory_entries(str(bucket))
    msg = str(exc.value)
    assert msg.startswith(str(workers_path(bucket)))
    assert "ErrInvalidWorkerJSON" in msg
    for part in expected:
        assert part in msg


def test_every_problem_is_reported_at_once(bucket):
    write_workers(bucket, '[{"x": 1}, {"host": "a"}, {"host": "a"}, 5]')
    with pytest.raises(_facts.WorkersFileError) as exc:
        _facts.inventory_entries(str(bucket))
    msg = str(exc.value)
    assert "2 errors" in msg and "$[0]" in msg and "$[3]" in msg


def test_bad_input_writes_nothing(bucket):
    path = workers_path(bucket)
    path.write_text('[{"host": "10.231.1.10"}, {"host": "10.231.1.10"}]\n')
    before = path.read_bytes()
    with pytest.raises(_facts.WorkersFileError, match=r"duplicate host 10.231.1.10 \(also at \[0\]\)"):
        _facts.update_workers_file(str(bucket), {"10.231.1.10": facts()})
    assert path.read_bytes() == before
    assert leftovers(bucket) == []


def test_conf_defaults_and_errors(bucket):
    (bucket / "maand.conf").write_text("job_config_selector = \"\"\n")
    assert _facts.inventory_entries(str(bucket))["connection"] == {
        "ansible_user": "agent", "ansible_port": 22, "ansible_become": True,
        "ansible_ssh_private_key_file": str(bucket / "secrets" / "worker.key")}
    (bucket / "maand.conf").write_text("ssh_port = 70000\nuse_sudo = \"yes\"\n")
    with pytest.raises(_facts.WorkersFileError) as exc:
        _facts.inventory_entries(str(bucket))
    assert "maand.conf: ssh_port: port 70000 is out of range" in str(exc.value)
    assert "maand.conf: use_sudo: expected true or false" in str(exc.value)
    (bucket / "maand.conf").write_text("ssh_port = \n")
    with pytest.raises(_facts.WorkersFileError, match="maand.conf: invalid TOML"):
        _facts.inventory_entries(str(bucket))
    with pytest.raises(_facts.WorkersFileError, match="is it a maand bucket"):
        _facts.inventory_entries(str(bucket / "missing"))


# --------------------------------------------------------------------------- load


def test_inventory_entries(bucket):
    out = _facts.inventory_entries(str(bucket))
    assert out["connection"] == {
        "ansible_user": "agent", "ansible_port": 2222, "ansible_become": False,
        "ansible_ssh_private_key_file": str(bucket / "secrets" / "worker.key"),
    }
    assert [t["host"] for t in out["targets"]] == ["10.231.1.10", "10.231.1.11", "w3.example"]
    # the model's labels: lower-cased, sorted, with "worker" (maand adds it to every host)
    assert out["targets"][0]["groups"] == ["maand_facts_targets", "label_prod", "label_worker"]
    assert out["targets"][2]["groups"] == ["maand_facts_targets", "label_staging", "label_worker"]


def test_label_and_host_filters(bucket):
    def hosts(**kw):
        return [t["host"] for t in _facts.inventory_entries(str(bucket), **kw)["targets"]]

    assert hosts(labels="prod") == ["10.231.1.10"]
    assert hosts(labels="prod,staging") == ["10.231.1.10", "w3.example"]
    assert hosts(labels=["worker"]) == ["10.231.1.10", "10.231.1.11", "w3.example"]
    assert hosts(hosts="w3.example, 10.231.1.11") == ["10.231.1.11", "w3.example"]
    assert hosts(hosts=["10.231.1.10", "w3.example"], labels="staging") == ["w3.example"]
    with pytest.raises(_facts.WorkersFileError, match="hosts not in workspace/workers.json: 10.9.9.9"):
        hosts(hosts="10.9.9.9")
    with pytest.raises(_facts.WorkersFileError, match='w3.exmple \\(did you mean "w3.example"\\?\\)'):
        hosts(hosts="w3.exmple")
    with pytest.raises(_facts.WorkersFileError, match="no worker .* matches labels=gpu"):
        hosts(labels="gpu")


def test_missing_key_is_reported(bucket):
    (bucket / "secrets" / "worker.key").unlink()
    with pytest.raises(_facts.WorkersFileError, match=r"SSH key .*worker.key not found"):
        _facts.inventory_entries(str(bucket))


def test_label_groups_are_the_inventorys_label_groups():
    from ansible_collections.maand.core.plugins.plugin_utils.bucket.naming import group_name
    assert _facts.label_group("prod") == "label_prod" == group_name("label", "prod")
    assert _facts.label_group("Prod") == "label_prod"  # labels are compared lower-cased
    import hashlib
    digest = hashlib.sha1(b"eu-west").hexdigest()[:8]
    assert _facts.label_group("eu-west") == "label_eu_west_" + digest


# --------------------------------------------------------------------------- compare


def test_change_lines_and_values():
    workers = json.loads(WORKERS)
    new, lines = _facts.plan_update(workers, {"10.231.1.10": facts(storage=None),
                                              "10.231.1.11": facts(memory=2048, cpu=3000, storage=500)})
    assert lines == [
        "10.231.1.10: memory 4096 MB -> 7936 MB, cpu 2000 MHz -> 5600 MHz, cores unset -> 4",
        "10.231.1.11: memory unset -> 2048 MB, cpu unset -> 3000 MHz, cores unset -> 4, storage unset -> 500 MB",
    ]
    assert new[0] == {"host": "10.231.1.10", "labels": ["worker", "prod"], "memory": "7936 mb",
                      "cpu": "5600 mhz", "tags": {"zone": "a"}, "cores": 4}
    assert list(new[1]) == ["host", "labels", "memory", "cpu", "cores", "storage"]
    assert new[2] == workers[2]
    assert workers == json.loads(WORKERS), "input must not be modified"


def test_equal_values_in_other_units_are_kept():
    workers = [{"host": "a", "memory": "8 gb", "cpu": "5.6 GHz", "cores": 4, "storage": "100 gb"}]
    new, lines = _facts.plan_update(workers, {"a": facts(memory=8192, cpu=5600, storage=102400)})
    assert lines == [] and new == workers


def test_unparsable_old_value_is_shown_and_replaced():
    new, lines = _facts.plan_update([{"host": "a", "memory": "lots", "cpu": ""}], {"a": facts(storage=None)})
    assert lines == ['a: memory "lots" -> 7936 MB, cpu unset -> 5600 MHz, cores unset -> 4']
    assert new[0]["memory"] == "7936 mb"


def test_probed_host_missing_from_file():
    with pytest.raises(_facts.WorkersFileError, match="no longer in workspace/workers.json: b"):
        _facts.plan_update([{"host": "a"}], {"b": facts()})


def test_classify_results():
    ok, failures = _facts.classify_results({
        "a": facts(),
        "b": {"unreachable": True, "msg": "Failed to connect to the host via ssh: timeout\nmore"},
        "c": {"failed": True, "msg": "cannot probe worker capacity: memory: ..."},
        "d": None,
        "e": {"changed": False, "memory_mb": 0, "cpu_mhz": 5},
    }, failed=["f"])
    assert list(ok) == ["a"]
    assert failures == {
        "b": "unreachable: Failed to connect to the host via ssh: timeout",
        "c": "failed: cannot probe worker capacity: memory: ...",
        "d": "no result (the host was not probed)",
        "e": "result lacks memory_mb (not a maand.core.worker_facts result?)",
        "f": "failed",
    }


# --------------------------------------------------------------------------- render


def test_render_patches_only_changed_values():
    workers = json.loads(WORKERS)
    new, _lines = _facts.plan_update(workers, {"10.231.1.10": facts(storage=None),
                                               "w3.example": facts()})
    text = _facts.render(new, WORKERS)
    assert json.loads(text) == new
    assert text == WORKERS.replace('"4096 mb"', '"7936 mb"').replace('"2000 mhz"', '"5600 mhz"').replace(
        '"tags": { "zone": "a" }\n', '"tags": { "zone": "a" },\n    "cores": 4\n').replace(
        '"hostname": "w3" }',
        '"hostname": "w3", "memory": "7936 mb", "cpu": "5600 mhz", "cores": 4, "storage": "102400 mb" }')


def test_render_multiline_entry_gets_its_indent():
    original = '[\n    {\n        "host": "a"\n    }\n]'
    text = _facts.render([{"host": "a", "memory": "1 mb"}], original)
    assert text == '[\n    {\n        "host": "a",\n        "memory": "1 mb"\n    }\n]'


def test_render_fallback_is_two_space_json():
    # unchanged text that cannot be patched (entry without members) -> plain 2-space JSON
    text = _facts.render([{"host": "a", "memory": "1 mb"}], "")
    assert text == '[\n  {\n    "host": "a",\n    "memory": "1 mb"\n  }\n]\n'


def test_render_keeps_non_ascii():
    original = '[{"host": "a", "tags": {"owner": "Jürgen"}}]\n'
    text = _facts.render([{"host": "a", "tags": {"owner": "Jürgen"}, "cpu": "1 mhz"}], original)
    assert "Jürgen" in text and text.endswith("}]\n")


_key = st.sampled_from(["host", "labels", "tags", "memory", "cpu", "hostname", "x"])
_scalar = st.one_of(st.text(max_size=5), st.integers(-5, 5), st.booleans(), st.none())


@settings(max_examples=150, deadline=None)
@given(
    entries=st.lists(st.dictionaries(_key, st.one_of(_scalar, st.lists(_scalar, max_size=2)), min_size=1,
                                     max_size=4), min_size=1, max_size=4),
    indent=st.sampled_from([None, 1, 2, 4, "\t"]),
    new_values=st.lists(st.dictionaries(st.sampled_from(["memory", "cpu", "storage"]),
                                        st.integers(1, 10**6).map(lambda v: "%d mb" % v), max_size=3),
                        min_size=4, max_size=4),
)
def test_render_always_round_trips(entries, indent, new_values):
    original = json.dumps(entries, indent=indent, ensure_ascii=False)
    new = [dict(entry, **values) for entry, values in zip(entries, new_values)]
    text = _facts.render(new, original)
    assert json.loads(text) == new
    for old_entry, new_entry in zip(entries, json.loads(text)):
        assert list(new_entry)[: len(old_entry)] == list(old_entry), "key order must be kept"


# --------------------------------------------------------------------------- update_workers_file


def test_write_keeps_everything_else_and_mode(bucket):
    path = workers_path(bucket)
    result = _facts.update_workers_file(str(bucket), {"10.231.1.10": facts(), "10.231.1.11": facts()})
    assert result["changed"] is True
    assert result["updated"] == ["10.231.1.10", "10.231.1.11"]
    data = json.loads(path.read_text())
    assert [w["host"] for w in data] == ["10.231.1.10", "10.231.1.11", "w3.example"]
    assert data[0]["tags"] == {"zone": "a"} and data[0]["labels"] == ["worker", "prod"]
    assert data[1] == {"host": "10.231.1.11", "labels": ["worker"], "memory": "7936 mb",
                       "cpu": "5600 mhz", "cores": 4, "storage": "102400 mb"}
    assert data[2] == {"host": "w3.example", "labels": ["staging"], "hostname": "w3"}
    assert "null" not in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert leftovers(bucket) == []
    assert result["diff"]["before"] == WORKERS and result["diff"]["after"] == path.read_text()


def test_unchanged_is_not_written(bucket):
    _facts.update_workers_file(str(bucket), {"10.231.1.10": facts()})
    path = workers_path(bucket)
    before = path.stat()
    result = _facts.update_workers_file(str(bucket), {"10.231.1.10": facts()})
    assert result["changed"] is False and result["lines"] == []
    assert result["msg"] == "workers.json already up to date"
    assert "diff" not in result
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_check_mode_writes_nothing_and_returns_diff(bucket):
    path = workers_path(bucket)
    result = _facts.update_workers_file(str(bucket), {"10.231.1.11": facts()}, check_mode=True)
    assert result["changed"] is True
    assert path.read_text() == WORKERS
    assert '"storage": "102400 mb"' in result["diff"]["after"]
    assert result["diff"]["before"] == WORKERS
    assert not (bucket / "data").exists(), "check mode must not even create the lock"


def test_all_or_nothing(bucket):
    path = workers_path(bucket)
    with pytest.raises(_facts.WorkersFileError) as exc:
        _facts.update_workers_file(str(bucket), {
            "10.231.1.10": facts(),
            "10.231.1.11": {"unreachable": True, "msg": "Failed to connect"},
            "w3.example": {"failed": True, "msg": "no MemTotal"},
        })
    msg = str(exc.value)
    assert "failed for 2 of 3 targeted workers" in msg and "not written" in msg
    assert "10.231.1.11: unreachable: Failed to connect" in msg
    assert "w3.example: failed: no MemTotal" in msg
    assert exc.value.args[1] == ["10.231.1.11", "w3.example"]
    assert path.read_text() == WORKERS


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_failed_rename_keeps_the_original(bucket, monkeypatch, error):
    path = workers_path(bucket)

    def boom(src, dst):
        assert Path(src).read_text().startswith("["), "temp file must be complete before the rename"
        raise error

    monkeypatch.setattr(_facts.os, "replace", boom)
    with pytest.raises(type(error)):
        _facts.update_workers_file(str(bucket), {"10.231.1.11": facts()})
    assert path.read_text() == WORKERS
    assert leftovers(bucket) == []


def test_killed_between_temp_write_and_rename(bucket):
    """SIGKILL right before os.replace: workers.json intact; the next write removes the stale temp."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(COLLECTIONS)!r})
        from ansible_collections.maand.core.plugins.plugin_utils.ops import facts as w
        w.os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)
        w.update_workers_file({str(bucket)!r}, {{"10.231.1.11": {facts()!r}}})
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    path = workers_path(bucket)
    assert path.read_text() == WORKERS
    stale = leftovers(bucket)
    assert len(stale) == 1 and stale[0].startswith(".workers.json.") and stale[0].endswith(".tmp")
    # the stale temp holds the complete new content, but it is never used
    assert json.loads((bucket / "workspace" / stale[0]).read_text())[1]["memory"] == "7936 mb"

    result = _facts.update_workers_file(str(bucket), {"10.231.1.11": facts()})
    assert result["changed"] is True
    assert leftovers(bucket) == []
    assert json.loads(path.read_text())[1]["memory"] == "7936 mb"


def test_write_takes_the_bucket_lock(bucket):
    import fcntl

    (bucket / "data").mkdir()
    lock = os.open(bucket / "data" / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(COLLECTIONS)!r})
        from ansible_collections.maand.core.plugins.plugin_utils.ops import facts as w
        w.update_workers_file({str(bucket)!r}, {{"10.231.1.11": {facts()!r}}})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=2)
        assert workers_path(bucket).read_text() == WORKERS, "must wait for the lock"
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    assert proc.wait(timeout=60) == 0
    assert json.loads(workers_path(bucket).read_text())[1]["memory"] == "7936 mb"


@pytest.mark.parametrize("probed, old, want, line", [
    ("x86_64", None, "amd64", "a: arch (unset) -> amd64"),
    ("aarch64", "amd64", "arm64", "a: arch amd64 -> arm64"),
    ("x86_64", "amd64", None, None),      # equal once named as Juju names it: left alone
    ("x86_64", "X86_64", None, None),
    ("sparc64", None, None, None),        # unknown to Juju's list: not written
    (None, None, None, None),
])
def test_arch_is_written_as_juju_names_it(probed, old, want, line):
    entry = {"host": "a"} if old is None else {"host": "a", "arch": old}
    result = {"arch": probed} if probed is not None else {}
    new, lines = _facts.plan_update([entry], {"a": result})
    assert lines == ([line] if line else [])
    assert new[0].get("arch") == (want if want else old)
