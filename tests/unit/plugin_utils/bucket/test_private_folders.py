"""Folders reused by a name others can guess (the shared temp folder: ssh ControlPath sockets, --check plan
summaries): made 0700, and refused when someone else made them, may write them or put a link there
(bucket/storage.own_private_dir; security review L6). Owner tests chown to another uid: they need root."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import storage
from ansible_collections.maand.core.plugins.plugin_utils.deploy import rsync as _rsync

OTHER_UID = 54321
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


def refused(path):
    with pytest.raises(storage.UnsafeFolder) as err:
        storage.own_private_dir(str(path))
    msg = str(err.value)
    assert msg.startswith(str(path) + " ") and "rm -rf %s" % path in msg and "TMPDIR" in msg, msg
    return msg


def test_a_missing_folder_is_made_0700_whatever_the_umask(tmp_path):
    old = os.umask(0o277)  # would leave the owner without x and w
    try:
        path = storage.own_private_dir(str(tmp_path / "cm"))
    finally:
        os.umask(old)
    info = os.lstat(path)
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()
    (tmp_path / "cm" / "kept").write_text("x")
    assert storage.own_private_dir(path) == path and (tmp_path / "cm" / "kept").exists()  # reused as it is


@needs_root
def test_a_folder_of_another_user_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "cm"
    path.mkdir(0o700)
    os.chown(path, OTHER_UID, OTHER_UID)
    assert "belongs to uid %d, not to this user (uid %d)" % (OTHER_UID, os.geteuid()) in refused(path)
    assert os.lstat(path).st_uid == OTHER_UID and stat.S_IMODE(os.lstat(path).st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o770, 0o720, 0o702, 0o777, 0o1700, 0o2700])
def test_a_folder_others_may_write_is_refused_not_tightened(tmp_path, mode):
    path = tmp_path / "cm"
    path.mkdir()
    os.chmod(path, mode)
    assert "has mode %04o: others may write in it" % mode in refused(path)
    assert stat.S_IMODE(os.lstat(path).st_mode) == mode


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o705, 0o500])
def test_a_folder_of_ours_others_could_only_read_is_narrowed_to_0700(tmp_path, mode):
    path = tmp_path / "maand-plans-0"  # earlier releases made this one 0755
    path.mkdir()
    os.chmod(path, mode)
    assert storage.own_private_dir(str(path)) == str(path) and stat.S_IMODE(os.lstat(path).st_mode) == 0o700


def test_a_link_is_refused_even_to_a_folder_of_ours(tmp_path):
    target = tmp_path / "mine"
    target.mkdir(0o700)
    os.chmod(target, 0o700)
    link = tmp_path / "cm"
    os.symlink(target, link)
    assert "is a symbolic link" in refused(link)
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    assert "is a symbolic link" in refused(tmp_path / "dangling")
    assert not (tmp_path / "nowhere").exists()  # mkdir never follows the link


def test_a_file_is_refused(tmp_path):
    (tmp_path / "cm").write_text("")
    assert "is not a folder" in refused(tmp_path / "cm")


@needs_root
def test_the_runs_ssh_multiplexing_refuses_a_control_folder_someone_else_made(tmp_path):
    folder = tmp_path / "maand-cm-0123456789"
    folder.mkdir(0o700)
    os.chown(folder, OTHER_UID, OTHER_UID)
    with pytest.raises(storage.UnsafeFolder, match="belongs to uid %d" % OTHER_UID):
        _rsync.ssh_command(["ssh", "-o", "Port=2222"], control_dir=str(folder))
    with pytest.raises(storage.UnsafeFolder, match="belongs to uid %d" % OTHER_UID):
        _rsync.with_mux({"h1": {"address": "10.0.0.1", "options": []}}, str(folder))
    # Ansible's own ControlPath in the argv: the run's folder is neither used nor made
    unused = tmp_path / "unused"
    ssh = ["ssh", "-o", "ControlPath=/root/.ansible/cp/%C"]
    assert _rsync.ssh_command(ssh, control_dir=str(unused)).endswith("ControlPath=/root/.ansible/cp/%C")
    assert _rsync.with_mux({"h1": {"address": "10.0.0.1", "options": ssh[1:]}}, str(unused))["h1"]["options"] == ssh[1:]
    assert not unused.exists()


def test_the_runs_ssh_multiplexing_makes_its_control_folder(tmp_path):
    folder = tmp_path / "maand-cm-0123456789"
    conns = _rsync.with_mux({"h1": {"address": "10.0.0.1", "options": ["-o", "Port=22"]}}, str(folder))
    assert conns["h1"]["options"][-2:] == ["-o", "ControlPath=%s/%%C" % folder]
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
