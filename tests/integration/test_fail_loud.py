"""Fail loud under Ansible's default configuration: deploy, job and explain never exit 0 on a bucket
whose workspace inventory did not load (issue 8 item 5), and the plays target only the workspace's
hosts. No fleet: every run here stops before any SSH connection (or lists hosts only).

Every ansible-playbook runs with ANSIBLE_CONFIG pointing at an empty file, from a folder without an
ansible.cfg, as a new user would run it: the repository's ansible.cfg (which makes a failing
inventory fatal) must not be what makes these tests pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "resources-and-placement"  # workers 10.0.0.10 (prod) and 10.0.0.20 (staging)
NOT_LOADED = "The maand workspace inventory did not load"
HAS_ERRORS = "has errors; nothing was run"


@pytest.fixture(name="home")
def _home(tmp_path):
    """An empty working folder and an empty ansible.cfg elsewhere (Ansible's defaults)."""
    (tmp_path / "empty.cfg").write_text("")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return tmp_path


def run(home, *args):
    env = dict(os.environ, ANSIBLE_CONFIG=str(home / "empty.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    proc = subprocess.run(list(args), cwd=str(home / "cwd"), env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(name="built", scope="module")
def _built(tmp_path_factory):
    """The documentation example, built once under the default config (copied for each test)."""
    home = tmp_path_factory.mktemp("built")
    (home / "empty.cfg").write_text("")
    (home / "cwd").mkdir()
    dest = home / "bucket"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("data"))
    rc, out = run(home, "ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % dest)
    assert rc == 0, out
    (dest / "secrets").mkdir(mode=0o700)  # deploy and status check the key file up front (issue 31 item 4)
    (dest / "secrets" / "worker.key").write_text("not a key: nothing here connects\n")
    (dest / "secrets" / "worker.key").chmod(0o600)
    return dest


@pytest.fixture(name="bucket")
def _bucket(home, built):
    """A valid, built bucket of this test's own."""
    dest = home / "bucket"
    shutil.copytree(built, dest)
    return dest


def break_workers(bucket):
    (bucket / "workspace" / "workers.json").write_text("[{not json")


def break_conf(bucket):
    """A maand.conf the inventory cannot use (job and status would run on the last built catalog of a workspace
    that is only stale, catalog/freshness.py; a bad connection setting stops every verb)."""
    (bucket / "maand.conf").write_text('ssh_user = "agent"\nssh_port = "twenty-two"\n')


# the same extra vars go to every playbook of a parametrized test: the ones a playbook does not read are allowed
ANY_VARS = ("-e", "maand_allow_unknown_vars=true")


@pytest.mark.parametrize("playbook", ["deploy", "job"])
def test_invalid_bucket_exits_non_zero_naming_the_cause(home, bucket, playbook):
    break_conf(bucket)
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.%s" % playbook,
                  "-e", "maand_job=api", "-e", "maand_target=status", *ANY_VARS)
    assert rc != 0, out
    assert "maand.conf" in out, out  # the bucket's own error (inventory warning or maand_inventory_errors)
    assert "Assert that the maand.core.workspace inventory loaded" in out, out
    if HAS_ERRORS not in out:  # an inventory that raised (only a warning) rather than reporting its errors
        assert NOT_LOADED in out and "ansible-inventory -i <bucket>/maand.yml --graph" in out, out
        assert "enable_plugins" in out and "maand.core.workspace" in out, out


@pytest.mark.parametrize("playbook", ["deploy", "job"])
def test_inventory_errors_are_listed(home, playbook):
    """The contract with the inventory plugin: on a bad workspace it sets maand_workspace_ok=false and
    maand_inventory_errors on `all` (instead of raising); the first play prints every error."""
    inventory = home / "errors.yml"
    inventory.write_text(
        "all:\n  vars:\n    maand_workspace_ok: false\n    maand_bucket_dir: /srv/bucket\n"
        "    maand_inventory_errors:\n"
        "      - 'ErrInvalidWorkerJSON: workspace/workers.json: $[1].host: duplicate host 10.0.0.1'\n"
        "      - 'ErrInvalidManifest: workspace/jobs/api/manifest.json: selectors: not a list'\n"
        "  children:\n    maand_workers:\n      hosts:\n        10.0.0.1:\n")
    rc, out = run(home, "ansible-playbook", "-i", str(inventory), "maand.core.%s" % playbook)
    assert rc != 0, out
    assert HAS_ERRORS in out and "/srv/bucket" in out, out
    assert "  - ErrInvalidWorkerJSON: workspace/workers.json: $[1].host: duplicate host 10.0.0.1" in out, out
    assert "  - ErrInvalidManifest: workspace/jobs/api/manifest.json: selectors: not a list" in out, out
    assert "10.0.0.1 " not in out.split("PLAY RECAP")[-1], out  # nothing ran on the worker


@pytest.mark.parametrize("playbook", ["deploy", "job"])
def test_missing_inventory_exits_non_zero(home, playbook):
    rc, out = run(home, "ansible-playbook", "-i", str(home / "nowhere" / "maand.yml"), "maand.core.%s" % playbook)
    assert rc != 0, out
    assert NOT_LOADED in out, out


@pytest.mark.parametrize("playbook", ["deploy", "job"])
def test_no_inventory_at_all_exits_non_zero(home, playbook):
    rc, out = run(home, "ansible-playbook", "maand.core.%s" % playbook)
    assert rc != 0, out
    assert NOT_LOADED in out, out


@pytest.mark.parametrize("playbook", ["deploy", "job"])
def test_a_limit_that_skips_the_localhost_check_still_fails(home, bucket, playbook):
    """--limit leaves the first play (localhost) without hosts; the worker play's pattern still refuses."""
    break_conf(bucket)
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.%s" % playbook,
                  "--limit", "10.0.0.10")
    assert rc != 0, out
    assert "did not load (no maand_workers group)" in out, out


def test_plays_target_only_the_workspace_hosts(home, bucket):
    """A second -i source cannot add unrelated hosts to a deploy (the play is not on `all`)."""
    other = home / "other.ini"
    other.write_text("unrelated.example ansible_host=192.0.2.1\n")
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "-i", str(other),
                  "maand.core.deploy", "--list-hosts")
    assert rc == 0, out
    assert "10.0.0.10" in out and "10.0.0.20" in out, out
    assert "unrelated.example" not in out, out
    assert "pattern: ['maand_workers:maand_removed_workers']" in out, out


def test_job_refuses_unknown_workers(home, bucket):
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.job",
                  "-e", "maand_job=api", "-e", "maand_target=status", "-e", "maand_job_workers=10.0.0.10,10.9.9.9")
    assert rc != 0, out
    assert "Unknown workers in maand_job_workers: 10.9.9.9" in out, out


def test_job_refuses_unknown_workers_under_limit(home, bucket):
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.job", "--limit", "10.0.0.10",
                  "-e", "maand_job=nope", "-e", "maand_target=status")
    assert rc != 0, out
    assert "Job nope must be one of this bucket's jobs (api, api-staging)" in out, out


def no_worker_bucket(home):
    """The example, built without a worker (maand builds such a bucket: zero workers)."""
    dest = home / "bucket"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("data"))
    (dest / "workspace" / "workers.json").write_text("[]")
    rc, out = run(home, "ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % dest)
    assert rc == 0, out
    return dest


def test_deploy_of_a_bucket_without_workers_refuses(home):
    """A valid bucket with nothing to deploy to must not end in "skipping: no hosts matched", exit 0."""
    bucket = no_worker_bucket(home)
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.deploy")
    assert rc != 0, out
    assert "has no workers" in out and "nothing was run" in out, out
    assert "workspace/workers.json" in out, out


def test_deploy_to_removed_workers_only_still_runs_the_plan(home, bucket):
    """Workers that left the bucket still hold its jobs: that deploy (which removes them) is not refused."""
    (bucket / "workspace" / "workers.json").write_text("[]")
    rc, out = run(home, "ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % bucket)
    assert rc != 0 and "ErrRemoveAll" in out, out  # every allocation of api would be removed: said, then allowed
    rc, out = run(home, "ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % bucket,
                  "-e", "maand_allow_remove_all=true")
    assert rc == 0, out
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.deploy", "--list-hosts")
    assert rc == 0, out
    assert "10.0.0.10" in out and "10.0.0.20" in out, out
    # only the localhost play (the workers do not exist): its check passes
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "-i", "localhost,", "maand.core.deploy",
                  "--check", "--limit", "localhost")
    assert "has no workers" not in out, out
    assert "TASK [Assert that the maand.core.workspace inventory loaded, with workers and their SSH key, and known maand_ extra vars]" in out, out
    assert "ok: [localhost]" in out, out


def test_job_without_workers_refuses(home):
    bucket = no_worker_bucket(home)
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.job",
                  "-e", "maand_job=api", "-e", "maand_target=status")
    assert rc != 0, out
    assert "Job api has no active allocation, so `make status` would run nowhere; nothing was run." in out, out


def test_job_on_workers_without_its_allocation_refuses(home, bucket):
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.job",
                  "-e", "maand_job=api", "-e", "maand_target=status", "-e", "maand_job_workers=10.0.0.20")
    assert rc != 0, out
    assert "Job api has no active allocation on 10.0.0.20 (its active allocations are on: 10.0.0.10)" in out, out


def test_explain_new_names_and_deprecated_aliases(home, bucket):
    new = run(home, "ansible-playbook", "maand.core.explain", "-e", "maand_bucket=%s" % bucket,
              "-e", "maand_job=api", "-e", "maand_show=rejected", "-e", "maand_job_workers=10.0.0.20")
    old = run(home, "ansible-playbook", "maand.core.explain", "-e", "maand_bucket=%s" % bucket,
              "-e", "job=api", "-e", "show=rejected", "-e", "worker=10.0.0.20")
    for rc, out in (new, old):
        assert rc == 0, out
        assert "10.0.0.20 (position 1): not placed" in out and "missing label prod" in out, out
        assert "10.0.0.10" not in out.split("TASK [Explain the placement]")[1], out
    assert "DEPRECATION" not in new[1], new[1]
    for name, replacement in (("job", "maand_job"), ("show", "maand_show"), ("worker", "maand_job_workers")):
        assert "the extra var '%s' is deprecated: use -e %s=" % (name, replacement) in old[1], old[1]


def test_explain_limit_alias(home, bucket):
    rc, out = run(home, "ansible-playbook", "maand.core.explain", "-e", "maand_bucket=%s" % bucket,
                  "-e", "job=api", "-e", "limit=1")
    assert rc == 0, out
    assert "the extra var 'limit' is deprecated: use -e maand_limit=" in out, out


def test_explain_takes_the_bucket_from_the_inventory(home, bucket):
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.explain")
    assert rc == 0, out
    assert "api: 1/2 workers: 1 missing label prod" in out, out


def test_explain_missing_bucket_exits_non_zero(home):
    rc, out = run(home, "ansible-playbook", "maand.core.explain", "-e", "maand_bucket=%s" % (home / "nowhere"))
    assert rc != 0, out
    assert "cannot explain" in out, out


def test_a_limit_on_a_good_bucket_still_runs(home, bucket):
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.deploy",
                  "--limit", "10.0.0.10", "--list-hosts")
    assert rc == 0, out
    assert "10.0.0.10" in out and "10.0.0.20" not in out, out


USER_CFGS = {
    "plugins-without-maand": "[inventory]\nenable_plugins = host_list, ini, yaml\nunparsed_is_failed = False\n",
    "lenient": "[defaults]\nany_errors_fatal = False\nhost_key_checking = False\n"
               "[inventory]\nunparsed_is_failed = False\nany_unparsed_is_failed = False\n",
}


@pytest.mark.parametrize("cfg", sorted(USER_CFGS))
@pytest.mark.parametrize("broken", [False, True], ids=["valid-bucket", "invalid-bucket"])
def test_deploy_fails_loud_under_a_users_own_ansible_cfg(home, bucket, cfg, broken):
    """The user's ansible.cfg (in the working folder, as Ansible finds it) cannot make a deploy that ran
    nothing exit 0: the workspace inventory must have loaded, else the run fails naming why."""
    if broken:
        break_workers(bucket)
    (home / "cwd" / "ansible.cfg").write_text(USER_CFGS[cfg])
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run(["ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.deploy", "--check"],
                          cwd=str(home / "cwd"), env=env, capture_output=True, text=True, timeout=180, check=False)
    out = proc.stdout + proc.stderr
    if cfg == "plugins-without-maand" or broken:
        assert proc.returncode != 0, out
        assert "Assert that the maand.core.workspace inventory loaded" in out, out
        assert (HAS_ERRORS in out and "workers.json" in out) or (NOT_LOADED in out and "enable_plugins" in out), out
    else:  # a valid bucket under a lenient cfg reaches the deploy play (its unreachable example hosts fail it)
        assert "Assert that the maand.core.workspace inventory loaded" in out and NOT_LOADED not in out, out


def test_job_refuses_a_typo_in_its_extra_vars(home, bucket):
    """-e maand_job_worker=... (for maand_job_workers) would run the target on every worker of the job."""
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.job", "-e", "maand_job=api",
                  "-e", "maand_target=restart", "-e", "maand_job_worker=10.0.0.20")
    assert rc != 0, out
    flat = " ".join(out.split())
    assert 'the extra var maand_job_worker is not read by maand.core.job (did you mean ' \
           '"maand_job_workers"?)' in flat, out
    assert "nothing was run" in flat, out


def test_build_refuses_a_typo_in_its_extra_vars_unless_allowed(home, bucket):
    rc, out = run(home, "ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % bucket,
                  "-e", "maand_strcit=true")
    assert rc != 0, out
    assert 'nothing was run: the extra var maand_strcit is not read by maand.core.build (did you mean ' \
           '"maand_strict"?)' in " ".join(out.split()), out
    rc, out = run(home, "ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % bucket,
                  "-e", "maand_strcit=true", *ANY_VARS)
    assert rc == 0, out
    assert 'maand_strcit is not read by maand.core.build (did you mean "maand_strict"?)' in " ".join(out.split()), out


def test_the_deploy_role_refuses_a_play_without_the_workspace_inventory(home):
    """The role in a user's own play over a plain inventory: its first task (the lock) refuses to run,
    naming the fix, before any connection to the play's hosts."""
    inventory = home / "hosts.ini"
    inventory.write_text("w1 ansible_host=192.0.2.1\n")
    play = home / "play.yml"
    play.write_text("- hosts: all\n  gather_facts: false\n  roles:\n    - role: maand.core.deploy\n")
    rc, out = run(home, "ansible-playbook", "-i", str(inventory), str(play))
    assert rc != 0, out
    assert "This play needs a maand.core.workspace inventory" in out, out
    assert "Take the bucket deploy lock" in out and "Read the promoted deploy state" not in out, out


@pytest.mark.parametrize("limit", [[], ["--limit", "10.0.0.10"]])
def test_a_bad_deploy_option_is_refused_once_before_any_worker(home, bucket, limit):
    """The role checks its options against meta/argument_specs.yml once (in its run_once lock task), also when a
    --limit skips the localhost play, and before any connection to a worker (10.0.0.10 does not exist)."""
    rc, out = run(home, "ansible-playbook", "-i", str(bucket / "maand.yml"), "maand.core.deploy",
                  "-e", "maand_lock_wait=soon", *limit)
    assert rc != 0, out
    assert "validation of the options (roles/deploy/meta/argument_specs.yml) failed" in out, out
    assert "argument 'maand_lock_wait' is of type str" in out, out
    assert "Validating arguments against arg spec" not in out, out  # Ansible's per-host check is off
    assert "Read the promoted deploy state" not in out, out
