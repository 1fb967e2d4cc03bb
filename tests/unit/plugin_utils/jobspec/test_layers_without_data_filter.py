"""Layer containment is the collection's own, not tarfile.data_filter's (security review 4, N1): the review's
chmod escape and every earlier crafted layer are refused with data_filter removed, and on the system Python
(Debian 12's /usr/bin/python3, 3.11.2, which has none)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tarfile

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.jobspec import layers as _layers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import layer_escape_case as _case  # noqa: E402
import test_layers_attacks as _attacks  # noqa: E402
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture
def no_data_filter(monkeypatch):
    monkeypatch.delattr(tarfile, "data_filter", raising=False)


def test_a_link_made_to_lead_out_later_never_chmods_an_outside_folder(tmp_path, no_data_filter):
    assert _case.run(str(tmp_path), _layers) == ""


def test_the_link_alone_is_refused_once_it_leads_out(tmp_path, no_data_filter):
    assert _case.run(str(tmp_path), _layers, folder=False) == ""


def test_the_same_with_data_filter_where_python_has_it(tmp_path):
    assert _case.run(str(tmp_path), _layers) == ""


@pytest.mark.parametrize("index", range(10))
def test_every_crafted_layer_is_refused_without_data_filter(tmp_path, no_data_filter, index):
    members, member, why = _attacks.test_a_crafted_layer_writes_nothing_outside_and_is_named.pytestmark[0] \
        .args[1][index]
    _attacks.test_a_crafted_layer_writes_nothing_outside_and_is_named(tmp_path, members, member, why)


def test_modes_and_inside_links_without_data_filter(tmp_path, no_data_filter):
    _attacks.test_setuid_setgid_and_group_write_are_dropped_and_links_inside_are_kept(tmp_path)


def test_a_folder_replaces_a_link_at_its_path(tmp_path, no_data_filter):
    bucket, outside = _attacks._bucket(tmp_path)
    layer = _attacks._layer(bucket, [("etc", "dir", None, 0o755), ("conf", "sym", "etc", 0o777),
                                     ("conf", "dir", None, 0o755), ("conf/x", "file", "x", 0o644)])
    dest = _attacks._stage(bucket, layer)
    assert stat.S_ISDIR(os.lstat(os.path.join(dest, "conf")).st_mode)
    assert os.listdir(os.path.join(dest, "etc")) == []
    _attacks._untouched(outside)


def test_a_link_leaving_and_reentering_through_the_trees_own_name_is_refused(tmp_path, no_data_filter):
    # realpath says inside on this controller, but on a worker the tree sits elsewhere
    bucket, outside = _attacks._bucket(tmp_path)
    layer = _attacks._layer(bucket, [("l", "sym", "../j/etc", 0o777)])
    with pytest.raises(_layers.LayerError, match="member l is a symlink"):
        _attacks._stage(bucket, layer)


@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason="no system python")
def test_the_escape_is_refused_on_the_system_python(tmp_path):
    collections = os.path.join(HERE, "..", "..", "..", "..", ".collections")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(collections), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([SYSTEM_PYTHON, os.path.join(HERE, "layer_escape_case.py"), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.startswith("OK"), (done.stdout, done.stderr)
    if SYSTEM_PYTHON != sys.executable:
        print(done.stdout)
