"""_readers.read_bytes: the size bound holds whatever the file's reported size (it asks the size first so
that a small file does not cost an allocation of the whole limit)."""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import readers as _readers


@pytest.mark.parametrize("size", [0, 1, 99, 100])
def test_files_up_to_the_limit_are_read_whole(tmp_path, size):
    path = tmp_path / "f"
    path.write_bytes(b"x" * size)
    assert _readers.read_bytes(str(path), limit=100) == b"x" * size


@pytest.mark.parametrize("size", [101, 250])
def test_files_over_the_limit_are_refused(tmp_path, size):
    path = tmp_path / "f"
    path.write_bytes(b"x" * size)
    with pytest.raises(_readers.InputError, match="larger than"):
        _readers.read_bytes(str(path), limit=100)


def test_a_file_that_reports_size_zero_is_still_read_and_bounded(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"y" * 60)
    real = _readers.os.fstat

    class Stat:
        st_size = 0
    monkeypatch.setattr(_readers.os, "fstat", lambda fd: Stat())
    assert _readers.read_bytes(str(path), limit=100) == b"y" * 60
    path.write_bytes(b"y" * 160)
    with pytest.raises(_readers.InputError):
        _readers.read_bytes(str(path), limit=100)
    monkeypatch.setattr(_readers.os, "fstat", real)


def test_a_file_that_grew_after_its_size_was_taken_is_read_on_to_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"z" * 80)

    class Stat:
        st_size = 10  # stale: the file grew to 80 bytes
    monkeypatch.setattr(_readers.os, "fstat", lambda fd: Stat())
    assert _readers.read_bytes(str(path), limit=100) == b"z" * 80
    path.write_bytes(b"z" * 120)
    with pytest.raises(_readers.InputError):
        _readers.read_bytes(str(path), limit=100)


def test_build_pauses_the_garbage_collector_and_restores_it(tmp_path, monkeypatch):
    import gc

    from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
    seen = []
    monkeypatch.setattr(_service, "_compute", lambda *a: seen.append(gc.isenabled()) or "result")
    assert gc.isenabled()
    assert _service.compute(str(tmp_path)) == "result"
    assert seen == [False] and gc.isenabled()

    def boom(*a):
        raise RuntimeError("x")
    monkeypatch.setattr(_service, "_compute", boom)
    with pytest.raises(RuntimeError):
        _service.compute(str(tmp_path))
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that runs without the collector keeps it off
        monkeypatch.setattr(_service, "_compute", lambda *a: None)
        _service.compute(str(tmp_path))
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("containers", [62, 63, 64, 65])
@pytest.mark.parametrize("opener, closer", [("[", "]"), ('{"a":', "}")])
def test_depth_limit_counts_leaves_like_the_walk(containers, opener, closer):
    """parse_json's quick gate and check_nesting agree with _walk (a leaf is one level deeper than its
    container): hypothesis found 64 containers around a leaf accepted although _walk refuses it."""
    text = opener * containers + "1" + closer * containers
    limit = _readers.MAX_DEPTH
    walk_refuses = containers + 1 > limit
    if walk_refuses:
        with pytest.raises(_readers.InputError, match="nested deeper"):
            _readers.parse_json(text)
    else:
        _readers.parse_json(text)
    empty = opener * containers + ("[]" if opener == "[" else "{}")[:0] + closer * containers
    if opener == "[" and containers <= limit:  # empty innermost container: no leaf, within the limit
        _readers.parse_json(empty)
