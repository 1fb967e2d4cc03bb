"""MaandAction.run maps the core's error family once: a MaandError that act() lets through is a failed task
(msg as str(exc), error_kind and what is known of file, field and fix); any other exception propagates."""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.adapter.action_base import ControllerAction
from ansible_collections.maand.core.plugins.plugin_utils.bucket import locks as _locks, readers as _readers, storage as _storage
from ansible_collections.maand.core.plugins.plugin_utils.errors import MaandError


class Raising(ControllerAction):
    """act() records what it did, then raises what the test gives it."""

    ARGUMENT_SPEC = {"bucket": {"type": "str"}}
    error = None

    def act(self, result, args, task_vars):
        result.update(changed=False, jobs=["api"], bucket=args["bucket"])
        raise self.error


def run(error, args=None):
    task = SimpleNamespace(args=args or {}, async_val=0, check_mode=False, diff=False, action="x",
                           resolved_action="maand.core.x", environment=[], no_log=False, delegate_to=None)
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = Raising(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    action.error = error
    return action.run(task_vars={})


def test_a_maand_error_is_a_failed_task_with_its_fields():
    res = run(MaandError("workers.json: position 2 is also used by h1", kind="input", file="workers.json",
                         field="$[1].position", fix="give every worker a distinct position"),
              {"bucket": "~/b"})
    assert res["failed"] is True and res["msg"] == "workers.json: position 2 is also used by h1"
    assert (res["error_kind"], res["error_file"], res["error_field"], res["error_fix"]) == (
        "input", "workers.json", "$[1].position", "give every worker a distinct position")
    assert res["jobs"] == ["api"] and res["changed"] is False  # what act() set before it raised stays
    assert not res["bucket"].startswith("~")  # the bucket argument was made absolute before act()


def test_what_is_not_known_is_left_out():
    res = run(_storage.UnsafeFolder("/tmp/x is a symbolic link: rm -rf /tmp/x"))
    assert res["failed"] is True and res["msg"] == "/tmp/x is a symbolic link: rm -rf /tmp/x"
    assert res["error_kind"] == "error"
    assert not {"error_file", "error_field", "error_fix"} & set(res)


@pytest.mark.parametrize("error", [
    _storage.StateStoreError("postgresql://db/maand: connection refused (fix: start the server)"),
    _locks.LockBusy("another maand.core run holds the bucket"),
    _readers.InputError("$.a", "integer 9223372036854775808 is out of range", "write numbers in range"),
])
def test_every_core_error_maps_the_same_way(error):
    res = run(error)
    assert res["failed"] is True and res["msg"] == str(error)
    if isinstance(error, _readers.InputError):  # the reader's field and fix ride along
        assert (res["error_field"], res["error_fix"]) == ("$.a", "write numbers in range")


def test_any_other_exception_propagates():
    # Ansible turns it into a failed task with its traceback: a bug is never dressed up as an answer
    with pytest.raises(RuntimeError, match="a bug"):
        run(RuntimeError("a bug"))
    with pytest.raises(ValueError):
        run(ValueError("not of the family"))
