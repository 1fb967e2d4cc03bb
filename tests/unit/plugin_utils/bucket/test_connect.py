"""First contact (issue 31 item 4): ssh's, sudo's and Ansible's words turned into the step to take."""

from __future__ import annotations

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import connect
from ansible_collections.maand.core.plugins.plugin_utils.ops import facts


@pytest.mark.parametrize("text, words", [
    ('Data could not be sent to remote host "10.0.0.1". Make sure this host can be reached over ssh: Host key '
     'verification failed.', "ssh-keyscan -H 10.0.0.1 >> known_hosts"),
    ("@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@", "ssh-keygen -R 10.0.0.1 -f known_hosts"),
    ("agent@10.0.0.1: Permission denied (publickey).", "check ssh_user and ssh_key in maand.conf"),
    ("/bin/sh: 1: sudo: not found", "use_sudo = true"),
    ("sudo: a password is required", "use_sudo = true"),
    ("Missing sudo password", "use_sudo = true"),
    ("Data could not be sent to remote host '10.0.0.1'. Make sure this host can be reached over SSH: [Errno 32] Broken "
     "pipe", "`ssh -o BatchMode=yes -i <ssh_key> <ssh_user>@10.0.0.1 true`"),
])
def test_hints_name_the_step(text, words):
    assert connect.ssh_hint(text, "10.0.0.1").startswith("hint: ")
    assert words in connect.ssh_hint(text, "10.0.0.1")


def test_ssh_words_win_over_the_broken_pipe():
    assert "ssh-keyscan" in connect.ssh_hint("Host key verification failed. [Errno 32] Broken pipe")


def test_no_hint_for_other_words():
    assert connect.ssh_hint("Connection timed out during banner exchange") == ""
    assert connect.with_ssh_hint("x") == "x"
    assert connect.ssh_hint(None) == ""


def test_hints_for_several_hosts_are_given_once():
    results = {h: {"unreachable": True, "msg": "ssh: Host key verification failed."} for h in ("a", "b")}
    results["c"] = {"failed": True, "msg": "MODULE FAILURE", "module_stderr": "/bin/sh: 1: sudo: not found"}
    lines = connect.ssh_hints_for(results, ["a", "b", "c"])
    assert len(lines) == 2 and lines[0].startswith("a, b: hint: ") and "<worker>" in lines[0]
    assert lines[1].startswith("c: hint: maand.conf says use_sudo = true")


def test_what_the_deploy_needs_and_the_message():
    assert connect.deploy_needs(False) == ["rsync", "make", "python3"]
    assert connect.deploy_needs(True)[-1] == "sudo"
    assert connect.lacking_message({}) == ""
    text = connect.lacking_message({"b": ["sudo (sudo -n true failed)"], "a": ["rsync", "make"]})
    assert text == ("the deploy needs rsync, make, python3 on every worker (and sudo with use_sudo = true): a lacks "
                    "rsync, make; b lacks sudo (sudo -n true failed). Fix: install make, rsync, sudo there (Debian: "
                    "apt-get install make rsync sudo); or set use_sudo = false in maand.conf when ssh_user is root")


def test_facts_failures_carry_the_hint_and_the_module_stderr():
    found, failures = facts.classify_results({
        "10.0.0.1": {"unreachable": True, "msg": "Failed to connect: Host key verification failed."},
        "10.0.0.2": {"failed": True, "msg": "MODULE FAILURE\nSee stdout/stderr", "module_stderr": "/bin/sh: 1: sudo: not found"},
    })
    assert found == {}
    assert "ssh-keyscan -H 10.0.0.1 >> known_hosts" in failures["10.0.0.1"]
    assert failures["10.0.0.2"].startswith("failed: MODULE FAILURE: /bin/sh: 1: sudo: not found; hint: maand.conf says")
    assert facts.with_needs({}, {"10.0.0.1": {"lacks": ["rsync"]}, "10.0.0.2": {}})["lacking"] == {"10.0.0.1": ["rsync"]}
