"""The worker agent runs job-spec fields (seed 004): env, working directory, user/group, per-op timeout
naming the target, and run ops of different jobs side by side in up to `slots` processes."""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.worker import agent as _agent

MAKEFILE = ("start:\n\t@echo \"cwd=$$(pwd) db=$$DB uid=$$(id -u)\" > $(CURDIR)/out\n"
            "hang:\n\t@echo before; sleep 30 & sleep 30\n"
            "nap:\n\t@sleep 0.6\n")


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "bid"
    for job in ("a", "b", "c"):
        (r / "jobs" / job / "bin").mkdir(parents=True)
        (r / "jobs" / job / "Makefile").write_text(MAKEFILE)
    return r


def op(job, target, **kw):
    out = {"id": "%s@h" % job, "kind": "run", "job": job, "host": "h", "target": target, "env": {},
           "promote_now": False, "record": None}
    out.update(kw)
    return out


def step(root, ops, slots=1, timeout=30):
    return _agent.run_step({"root": str(root), "timeout": timeout, "tail": 5, "slots": slots, "ops": ops})["ops"]


def test_env_and_working_directory_reach_make(root):
    out = step(root, [op("a", "start", env={"DB": "pg://x"}, cwd="bin")])[0]
    assert out["ok"], out
    text = (root / "jobs/a/bin/out").read_text()
    assert "cwd=%s" % (root / "jobs/a/bin") in text and "db=pg://x" in text
    assert out["seconds"] >= 0 and out["started"] >= 0


def test_missing_working_directory_is_named(root):
    out = step(root, [op("a", "start", cwd="nope")])[0]
    assert not out["ok"] and out["reason"] == "no_cwd" and "working_directory" in out["msg"]


def test_op_timeout_kills_the_group_and_names_the_target(root):
    out = step(root, [op("a", "hang", timeout=1)], timeout=600)[0]
    assert not out["ok"] and out["reason"] == "timeout"
    assert "make hang timed out after 1 s" in out["msg"] and out["output_tail"] == ["before"]
    assert out["seconds"] < 20


def test_op_timeout_zero_means_none_and_falls_back_to_the_step(root):
    assert step(root, [op("a", "nap", timeout=0)], timeout=0.2)[0]["ok"]
    assert not step(root, [op("a", "nap")], timeout=0.2)[0]["ok"]


def test_unknown_user_and_group_fail_before_make(root):
    out = step(root, [op("a", "start", user="no-such-user-x")])[0]
    assert out["reason"] == "no_user" and "does not exist on the worker" in out["msg"]
    out = step(root, [op("a", "start", group="no-such-group-x")])[0]
    assert out["reason"] == "no_group"
    assert not (root / "jobs/a/out").exists()


def test_slots_run_targets_side_by_side_in_order(root):
    ops = [op(j, "nap") for j in ("a", "b", "c")]
    serial = step(root, ops, slots=1)
    assert serial[1]["started"] >= serial[0]["started"] + serial[0]["seconds"] - 0.05
    side = step(root, ops, slots=2)
    assert [o["id"] for o in side] == ["a@h", "b@h", "c@h"] and all(o["ok"] for o in side)
    first_end = min(side[0]["started"] + side[0]["seconds"], side[1]["started"] + side[1]["seconds"])
    assert side[1]["started"] < side[0]["started"] + side[0]["seconds"]  # overlapped
    assert side[2]["started"] >= first_end - 0.05  # the third waited for a free slot


NET_MAKEFILE = """\
start:
\t@/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1); \\
c = socket.create_connection(s.getsockname(), timeout=2); print("loopback-ok")' 2>/dev/null || echo loopback-down
\t@/usr/bin/python3 -c 'import os; print(sorted(os.listdir("/sys/class/net")))'
"""


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="a network namespace needs root")
@pytest.mark.parametrize("network, expect", [("disabled", "loopback-down"), ("loopback", "loopback-ok")])
def test_private_network(root, network, expect):
    (root / "jobs/a/Makefile").write_text(NET_MAKEFILE)
    out = step(root, [op("a", "start", network=network)])[0]
    assert out["ok"], out
    assert out["output_tail"][0] == expect, out["output_tail"]


MOUNT_MAKEFILE = """\
start:
\t@touch $(SCRATCH)/inside && stat -f -c %T $(SCRATCH)
\t@touch $(OUTSIDE)/x 2>/dev/null && echo outside-rw || echo outside-ro
\t@touch job-file && echo job-rw
"""


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="a mount namespace needs root")
def test_private_mounts_and_read_only_file_system(root):
    scratch, outside = root / "scratch", root / "outside"
    scratch.mkdir()
    outside.mkdir()
    (root / "jobs/a/Makefile").write_text(MOUNT_MAKEFILE)
    env = {"SCRATCH": str(scratch), "OUTSIDE": str(outside)}
    mounts = [{"type": "tmp", "mount_point": str(scratch)}]
    out = step(root, [op("a", "start", env=env, mounts=mounts, enable_writable_file_system=False)])[0]
    assert out["ok"], out
    assert out["output_tail"] == ["tmpfs", "outside-ro", "job-rw"]
    assert not (scratch / "inside").exists() and not (outside / "x").exists()
    out = step(root, [op("a", "start", env=env)])[0]  # without the spec: the worker's own file system
    assert out["output_tail"][1:] == ["outside-rw", "job-rw"]


def test_missing_mount_point_is_named(root):
    out = step(root, [op("a", "start", mounts=[{"type": "tmp", "mount_point": "/no/such/dir"}])])[0]
    assert out["reason"] == "no_mount_point" and "/no/such/dir" in out["msg"]


BIND_MAKEFILE = """\
start:
\t@cat $(POINT)/seen
\t@touch $(POINT)/x 2>/dev/null && echo bind-rw || echo bind-ro
"""


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="a mount namespace needs root")
@pytest.mark.parametrize("read_only, expect", [(True, "bind-ro"), (False, "bind-rw")])
def test_bind_mount(root, read_only, expect):
    local, point = root / "local", root / "point"
    local.mkdir()
    point.mkdir()
    (local / "seen").write_text("from-local\n")
    (root / "jobs/a/Makefile").write_text(BIND_MAKEFILE)
    mounts = [{"type": "bind", "mount_point": str(point), "local_path": str(local), "read_only": read_only}]
    out = step(root, [op("a", "start", env={"POINT": str(point)}, mounts=mounts)])[0]
    assert out["ok"], out
    assert out["output_tail"] == ["from-local", expect]
    assert not (point / "seen").exists()  # the bind lived only in the target's mount namespace
    assert (local / "x").exists() == (not read_only)
