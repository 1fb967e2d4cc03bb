"""First contact with a fresh fleet (issue 31 item 4), through maand.core.facts run from the bucket folder under the
ansible.cfg init wrote: a worker whose host key is not known fails with the host-key hint, the step that hint names
(ssh-keyscan into the bucket's own known_hosts, UserKnownHostsFile=known_hosts in ssh_args) makes facts pass, and
`use_sudo = true` on workers without sudo (this machine has none) fails facts naming the hosts and the fix, not
the first deploy. The steps run in file order on one fleet."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.integration.test_status_fleet import StatusEnv

pytestmark = [pytest.mark.fleet, pytest.mark.slow]


@pytest.fixture(scope="module")
def env(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    root = tmp_path_factory.mktemp("contact")
    bucket = root / "bucket"
    bucket.mkdir()
    e = StatusEnv(fleet, bucket)
    # the bucket's own ansible.cfg decides (no ANSIBLE_SSH_ARGS, host key checking as init wrote it); a control
    # folder of this test's own, so no connection another test left open answers for a worker
    e.env.update(ANSIBLE_SSH_ARGS=None, ANSIBLE_HOST_KEY_CHECKING=None, ANSIBLE_SSH_CONTROL_PATH_DIR=str(root / "cp"),
                 ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3")  # the fleet shares this machine's pyenv shims
    e.play("init")
    fleet.workers_json(path=bucket / "workspace" / "workers.json")
    fleet.install_bucket_key(bucket)
    cfg = bucket / "ansible.cfg"
    text = cfg.read_text()
    assert "ssh-keyscan -H" in text and "StrictHostKeyChecking=accept-new" in text, text  # the step is named
    # the bucket's own known_hosts, as its notes say (the file does not exist yet: no key is known)
    cfg.write_text(text.replace("ssh_args = -C -o ControlMaster=auto -o ControlPersist=15m",
                                "ssh_args = -C -o ControlMaster=auto -o ControlPersist=15m "
                                "-o UserKnownHostsFile=known_hosts"))
    return e


def facts(env, check=False):
    return env.play("facts", "-e", "maand_bucket=.", check=check)


def test_01_an_unknown_host_key_fails_facts_with_the_step_to_take(env):
    rc, out = facts(env)
    assert rc != 0, out
    assert "Host key verification failed" in out, out
    for host in env.hosts:
        assert re.search(r"%s: unreachable: .*hint: the worker's SSH host key is not known here \(first contact\): "
                         r"from the bucket folder, add it to the bucket's own known_hosts, `ssh-keyscan -H %s >> "
                         r"known_hosts`" % (re.escape(host), re.escape(host)), out), out
    assert '"memory"' not in (env.bucket / "workspace" / "workers.json").read_text()  # all or nothing


def test_02_the_named_step_makes_facts_pass(env):
    scan = subprocess.run(["ssh-keyscan", "-H", *env.hosts], capture_output=True, text=True, timeout=60, check=False)
    assert scan.returncode == 0 and scan.stdout.strip(), scan.stderr
    (env.bucket / "known_hosts").write_text(scan.stdout)
    rc, out = facts(env, check=True)
    assert "memory unset ->" in out, out
    assert '"memory"' in (env.bucket / "workspace" / "workers.json").read_text()


def test_03_use_sudo_without_sudo_fails_facts_naming_the_hosts_and_the_fix(env):
    """ssh_user is root here, so Ansible's become has nothing to do and the probe itself runs: what the deploy
    will need is what fails (the deploy runs its agent under sudo)."""
    conf = env.bucket / "maand.conf"
    conf.write_text(conf.read_text().replace("use_sudo = false", "use_sudo = true"))
    rc, out = facts(env)
    assert rc != 0, out
    assert ("the deploy needs rsync, make, python3 on every worker (and sudo with use_sudo = true): %s lacks sudo; "
            "%s lacks sudo. Fix: install sudo there (Debian: apt-get install sudo); or set use_sudo = false in "
            "maand.conf when ssh_user is root" % tuple(sorted(env.hosts))) in out, out
    conf.write_text(conf.read_text().replace("use_sudo = true", "use_sudo = false"))
    facts(env, check=True)  # everything the deploy needs is there


LOSING_SSH = """#!/bin/bash
# ssh that ends before it reads the module, as ssh does on an unknown host key, but later than Ansible's 1 ms wait:
# Ansible then reports a broken pipe without ssh's words. 'always', or only the first two calls (one per worker).
if [ "$MAAND_TEST_LOSE" = always ] || mkdir "$MAAND_TEST_MARKS/1" 2>/dev/null || mkdir "$MAAND_TEST_MARKS/2" 2>/dev/null
then
  exec 0<&-
  sleep 0.5
  echo "Host key verification failed." >&2
  exit 255
fi
exec /usr/bin/ssh "$@"
"""


def losing_ssh(tmp_path, mode):
    script = tmp_path / "ssh"
    script.write_text(LOSING_SSH)
    script.chmod(0o755)
    (tmp_path / "marks").mkdir()
    return {"ANSIBLE_SSH_EXECUTABLE": str(script), "MAAND_TEST_LOSE": mode, "MAAND_TEST_MARKS": str(tmp_path / "marks"),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp_path / "cp")}  # no open connection answers for the worker


def test_04_a_broken_pipe_without_ssh_words_is_probed_again(env, tmp_path):
    rc, out = env.play("facts", "-e", "maand_bucket=.", env=losing_ssh(tmp_path, "once"))
    assert sorted(p.name for p in (tmp_path / "marks").iterdir()) == ["1", "2"], out  # both first probes lost
    # and facts passed (env.play checks rc): the second probe of each worker answered
    assert '"memory"' in (env.bucket / "workspace" / "workers.json").read_text()


def test_05_words_lost_twice_fail_with_the_way_to_see_them(env, tmp_path):
    rc, out = env.play("facts", "-e", "maand_bucket=.", check=False, env=losing_ssh(tmp_path, "always"))
    assert rc != 0, out
    for host in env.hosts:
        assert re.search(r"%s: unreachable: .*Broken pipe; hint: ssh ended before Ansible could send the command, "
                         r"and Ansible did not keep ssh's own words .*`ssh -o BatchMode=yes -i <ssh_key> "
                         r"<ssh_user>@%s true`" % (re.escape(host), re.escape(host)), out), out
