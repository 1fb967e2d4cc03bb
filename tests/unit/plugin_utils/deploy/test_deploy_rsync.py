"""The rsync commands of a deploy step (plugins/plugin_utils/deploy/rsync.py)."""

from __future__ import annotations

import os
import shlex
import socket
import stat
import subprocess

from ansible_collections.maand.core.plugins.plugin_utils.deploy import rsync as _rsync

SSH = ["ssh", "-C", "-o", "ControlMaster=auto", "-o", "ControlPersist=60s", "-o", 'ControlPath="/root/.ansible/cp/abc"']


def op(job, src=None):
    return {"id": "%s@h" % job, "job": job, "src": src or "workspace/jobs/%s" % job, "sync": True}


def test_one_rsync_for_all_jobs_named_after_their_folder():
    cmds = _rsync.commands("/b", [op("api"), op("web")], "/opt/worker/bid", "10.0.0.2", "ssh")
    assert len(cmds) == 1
    ids, argv = cmds[0]
    assert ids == ["api@h", "web@h"]
    assert argv[-3:] == ["/b/workspace/jobs/api", "/b/workspace/jobs/web", "10.0.0.2:/opt/worker/bid/jobs/"]
    assert {"--delete", "--checksum", "--archive"} <= set(argv)
    # never the controller's owner, group, group/world write or setuid bits (issue 21)
    assert {"--no-owner", "--no-group", "--chmod=go-w,ug-s,-t"} <= set(argv)
    assert ["--exclude=/*/data", "--exclude=/*/logs", "--exclude=/*/bin"] == [a for a in argv if a.startswith("--exclude")]
    assert "--rsync-path=mkdir -p /opt/worker/bid/jobs/ && rsync" in argv


def test_a_job_in_another_folder_gets_its_own_rsync_and_sudo_prefix():
    cmds = _rsync.commands("/b", [op("api", "trees/api-v2")], "/opt/worker/bid", "fe80::1", "ssh", sudo=True)
    ids, argv = cmds[0]
    assert ids == ["api@h"] and argv[-2:] == ["/b/trees/api-v2/", "[fe80::1]:/opt/worker/bid/jobs/api/"]
    assert "--exclude=/data" in argv and "--rsync-path=sudo mkdir -p /opt/worker/bid/jobs/api/ && sudo rsync" in argv


def test_ssh_command_reuses_ansibles_control_path_or_adds_its_own(tmp_path):
    cm = str(tmp_path / "cm")
    words = shlex.split(_rsync.ssh_command(SSH, verify_host=True, control_dir=cm))
    assert words == SSH and not os.path.exists(cm)  # Ansible's ControlPath kept, nothing added or made
    words = shlex.split(_rsync.ssh_command(["ssh", "-o", "Port=2222"], verify_host=False, control_dir=cm))
    assert words[:5] == ["ssh", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    assert words[-6:] == ["-o", "ControlMaster=auto", "-o", "ControlPersist=60s", "-o", "ControlPath=%s/%%C" % cm]
    assert stat.S_IMODE(os.lstat(cm).st_mode) == 0o700  # made when used (bucket/storage.own_private_dir)


def test_control_dir_is_short_and_stable(tmp_path, monkeypatch):
    monkeypatch.setattr(_rsync.tempfile, "tempdir", str(tmp_path))
    a = _rsync.control_dir("/very/long/" + "x" * 200)
    assert a == os.path.join(str(tmp_path), os.path.basename(a)) and len(os.path.basename(a)) == 19
    assert a == _rsync.control_dir("/very/long/" + "x" * 200) != _rsync.control_dir("/other")
    assert not os.path.exists(a)  # made (or checked) only when an ssh command uses it


def control_socket(path):
    """A unix socket file where an ssh master keeps its ControlPath socket."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    return sock


def test_close_control_dir_stops_each_master_and_removes_the_folder(tmp_path):
    cm = tmp_path / "cm"
    _rsync.mux_options(str(cm))  # as an ssh command of the run makes it
    sockets = [control_socket(cm / name) for name in ("a1", "b2")]
    asked = []

    def master_stops(argv, **kw):  # ssh -O stop: the master removes its socket, then exits
        asked.append(argv)
        assert kw["timeout"] and kw["stdin"] == subprocess.DEVNULL
        os.unlink(argv[2][len("ControlPath="):])
        return subprocess.CompletedProcess(argv, 0, "", "Stop listening request sent.")

    try:
        assert _rsync.close_control_dir(str(cm), run=master_stops) is True
    finally:
        for sock in sockets:
            sock.close()
    assert not cm.exists()
    assert sorted(asked) == [["ssh", "-o", "ControlPath=%s" % (cm / n), "-O", "stop", "maand-cm"] for n in ("a1", "b2")]
    assert _rsync.close_control_dir(str(cm), run=master_stops) is True and len(asked) == 2  # gone already: nothing asked


def test_close_control_dir_leaves_a_master_that_keeps_its_socket_and_a_folder_not_its_own(tmp_path):
    cm = tmp_path / "cm"
    _rsync.mux_options(str(cm))
    sock = control_socket(cm / "a1")
    naps = []

    def master_stays(argv, **kw):
        return subprocess.CompletedProcess(argv, 255, "", "Control socket connect: Connection refused")

    try:
        assert _rsync.close_control_dir(str(cm), run=master_stays, sleep=naps.append, polls=5) is False
    finally:
        sock.close()
    assert os.path.exists(cm / "a1") and naps == [0.05] * 4  # waited a while for it, then left it
    os.unlink(cm / "a1")
    os.chmod(cm, 0o777)  # someone else may write in it: what is in it is not ours to stop or remove

    def never(argv, **kw):
        raise AssertionError("asked %s" % argv)

    assert _rsync.close_control_dir(str(cm), run=never, sleep=never) is False and cm.is_dir()
    os.chmod(cm, 0o700)
    assert _rsync.close_control_dir(str(cm), run=never, sleep=never) is True and not cm.exists()  # empty: removed
