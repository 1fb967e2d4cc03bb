# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""First contact with a worker: what a failed SSH connection means and what to do (pure Python).

A new bucket's first `facts` meets the SSH details the workspace does not hold: the worker's host key,
the user and key of maand.conf, sudo when `use_sudo = true`. `ssh_hint(text)` turns ssh's, sudo's and Ansible's words
into the step to take (issue 31 item 4), for facts, status and the deploy's unreachable workers. NEEDS are the
commands the deploy runs on a worker (facts checks them, ops/facts.py).
"""

from __future__ import annotations

FIRST_CONTACT = "docs/commands.md#first-contact"

HOST_KEY = ("the worker's SSH host key is not known here (first contact): from the bucket folder, add it to the "
            "bucket's own known_hosts, `ssh-keyscan -H %(host)s >> known_hosts` (compare the fingerprints with the "
            "worker's `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), and use that file: add "
            "-o UserKnownHostsFile=known_hosts to ssh_args in the bucket's ansible.cfg; or trust each new key on "
            "first use: -o StrictHostKeyChecking=accept-new there (" + FIRST_CONTACT + ")")
KEY_CHANGED = ("the worker's SSH host key changed since it was recorded: if the worker was reinstalled, remove the "
               "old key (`ssh-keygen -R %(host)s -f known_hosts`, or from ~/.ssh/known_hosts) and add the new one; "
               "otherwise do not connect (" + FIRST_CONTACT + ")")
DENIED = ("the worker refused the login: check ssh_user and ssh_key in maand.conf (the key file is in secrets/) "
          "and that the key's public half is in that user's ~/.ssh/authorized_keys on the worker")
SUDO = ("maand.conf says use_sudo = true, and sudo did not run on the worker: install sudo there with a "
        "passwordless rule for ssh_user, or set use_sudo = false in maand.conf when ssh_user is root")
WORDS_LOST = ("ssh ended before Ansible could send the command, and Ansible did not keep ssh's own words (it waits "
              "1 ms for them): run again, or see them from the bucket folder with `ssh -o BatchMode=yes -i <ssh_key> "
              "<ssh_user>@%(host)s true`; at first contact it is most often the host key (" + FIRST_CONTACT + ")")

# (words in ssh's, sudo's or Ansible's message, the hint), first match wins
_PATTERNS = (
    ("host key verification failed", HOST_KEY),
    ("remote host identification has changed", KEY_CHANGED),
    ("permission denied (publickey", DENIED),
    ("sudo: command not found", SUDO),
    ("sudo: not found", SUDO),
    ("sudo: a password is required", SUDO),
    ("sudo: a terminal is required", SUDO),
    ("no tty present", SUDO),
    ("is not in the sudoers file", SUDO),
    ("missing sudo password", SUDO),
    ("broken pipe", WORDS_LOST),  # Ansible's 'Data could not be sent ... over SSH: [Errno 32] Broken pipe'
)

# what the deploy runs on a worker (rsync receives the job trees, make runs the targets, python3 the agent)
NEEDS = ("rsync", "make", "python3")


def ssh_hint(text, host=""):
    """'hint: ...' for a failed connection or become whose words say why, else ''."""
    lowered = str(text or "").lower()
    for words, advice in _PATTERNS:
        if words in lowered:
            return "hint: " + advice % {"host": host or "<worker>"}
    return ""


def with_ssh_hint(text, host=""):
    """text, then its hint (if any) after '; '."""
    found = ssh_hint(text, host)
    return "%s; %s" % (text, found) if found else str(text)


def deploy_needs(use_sudo):
    """The commands a worker must have for the deploy: NEEDS, and sudo when use_sudo."""
    return list(NEEDS) + (["sudo"] if use_sudo else [])


def lacking_message(lacking):
    """One clause per worker that lacks a command the deploy needs ({host: [names]}), with what to do; '' if none."""
    lines = ["%s lacks %s" % (host, ", ".join(names)) for host, names in sorted(lacking.items()) if names]
    if not lines:
        return ""
    names = sorted({n.split(" ")[0] for ns in lacking.values() for n in ns})  # "sudo (sudo -n true failed)"
    fix = "install %s there (Debian: apt-get install %s)" % (", ".join(names), " ".join(names))
    if "sudo" in names:
        fix += "; or set use_sudo = false in maand.conf when ssh_user is root"
    return ("the deploy needs %s on every worker (and sudo with use_sudo = true): %s. Fix: %s"
            % (", ".join(NEEDS), "; ".join(lines), fix))


def ssh_result_words(result):
    """The words of a registered task result where ssh, sudo and Ansible say why it failed."""
    if not isinstance(result, dict):
        return ""
    return " ".join(str(result.get(k) or "") for k in ("msg", "module_stderr", "module_stdout", "stderr"))


def ssh_hints_for(results, hosts):
    """One line per distinct hint over the registered results of `hosts` ({host: result}), naming the hosts."""
    found = {}
    for host in hosts:
        text = ssh_hint(ssh_result_words(results.get(host)), host if len(hosts) == 1 else "")
        if text:
            found.setdefault(text, []).append(host)
    return ["%s: %s" % (", ".join(names), text) for text, names in found.items()]
