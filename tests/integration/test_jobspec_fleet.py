"""Job specs on a real SSH fleet (seed 004): the controller's environment reaches make (and never the
catalog, the run folder or the worker's records), working_directory and user, a changed value restarts
the job, targets of one wave start side by side in Maelstrom's order (asserted by the order of start/end
events, never by wall-clock seconds), and a job timeout kills its target. Every playbook runs with -vvvv
(deploys also with --diff) and the secret value is in none of their output, data/ or the worker's records."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.integration.deploy.bucket import add_job, make_bucket, write
from tests.integration.deploy.env import Env

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

SECRET = "pg://user:s3cret-9f1c@db/app"
DB_PASSWORD = "pw-7d1e-rendered"

ENV_MAKEFILE = """\
.PHONY: start stop restart reload
start restart:
\techo "db=$$DB level=$$LEVEL user=$$(id -un) group=$$(id -gn) cwd=$$(pwd) new=$$NEW_VERSION" > ../data/out.txt
stop reload:
\t@true
"""

# Each nap job appends "<job> start" / "<job> end" to one events file per worker, under flock. nap3
# ends only once nap1 started (waiting at most 30 s): run side by side, nap1 starts before nap3
# ends; run one after another, nap3 ends first. No wall-clock numbers are asserted.
NAP_MAKEFILE = """\
.PHONY: start stop restart reload
start:
\tflock {events} -c 'echo "{name} start" >> {events}'
\tsleep {secs}
{wait}\tflock {events} -c 'echo "{name} end" >> {events}'
stop restart reload:
\t@true
"""
WAIT_FOR = "\tfor i in $$(seq 300); do grep -qx '{event}' {events} 2>/dev/null && break; sleep 0.1; done\n"

NET_MAKEFILE = """\
.PHONY: start stop restart reload
start:
\t/usr/bin/python3 -c 'import socket; socket.create_connection(("$(PEER)", 22), timeout=3)' \
2>/dev/null && echo reach=yes > reach.txt || echo reach=no > reach.txt
stop restart reload:
\t@true
"""

HANG_MAKEFILE = """\
.PHONY: start stop restart reload
start:
\techo hanging; sleep 297 & sleep 297
stop restart reload:
\t@true
"""


SEALED_MAKEFILE = """\
.PHONY: start stop restart reload
start restart:
\tstat -f -c %T /tmp > fs.txt
\ttouch /var/tmp/maand-sealed-probe 2>/dev/null && rm -f /var/tmp/maand-sealed-probe && echo rw >> fs.txt \
|| echo ro >> fs.txt
stop reload:
\t@true
"""

IMAGE_MAKEFILE = """\
.PHONY: start stop restart reload
start restart:
\techo "x=$$X" > out.txt
stop reload:
\t@true
"""


def _blob(root: Path, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": "sha256:" + digest, "size": len(data)}


def _image(root: Path) -> None:
    """A one-layer OCI image layout (as skopeo copy ... oci: writes it): opt/tool.sh, Env TOOL_HOME."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"#!/bin/sh\necho tool\n"
        info = tarfile.TarInfo("opt/tool.sh")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    layer = _blob(root, buf.getvalue())
    config = _blob(root, json.dumps({"config": {"Env": ["TOOL_HOME=/opt"]}}).encode())
    manifest = _blob(root, json.dumps({"schemaVersion": 2, "config": config, "layers": [layer]}).encode())
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest]}))


class Run(Env):
    timeout = 400
    outputs: list = []  # every playbook's output, for the no-leak check

    def __init__(self, fleet, bucket):
        super().__init__(fleet, bucket)
        self.env.update(JS_DB_URL=SECRET, MAAND_HOOK_JS_MARK=str(bucket.parent / "pre_deploy.log"))

    def playbook(self, name, *args, **kwargs):
        proc = super().playbook(name, *args, **kwargs)
        self.outputs.append(proc.stdout + proc.stderr)
        return proc


@pytest.fixture(scope="module")
def run(fleet_factory, tmp_path_factory):
    fleet = fleet_factory(2)
    bucket = make_bucket(tmp_path_factory.mktemp("jobspec") / "bucket", fleet.state_dir, n_jobs=1)
    write(bucket / "workspace" / "containers" / "base.json", json.dumps({
        "environment": {"DB": "$env{JS_DB_URL}", "LEVEL": "$env{JS_LEVEL:-info}"},
        "working_directory": "run", "user": "nobody", "group": "daemon"}))
    root = add_job(bucket, "envjob", makefile=ENV_MAKEFILE, parent={"container": "base"},
                   commands={"command_mark": {"executed_on": ["pre_deploy"]}})
    write(root / "_modules" / "command_mark.py",  # a pre_deploy hook: one line per run and worker
          'import os\nwith open(os.environ["MAAND_HOOK_JS_MARK"], "a") as f:\n    f.write(os.environ["ALLOCATION_IP"] + "\\n")\n')
    (root / "run").mkdir()
    os.chmod(root / "run", 0o777)  # shipped without group/world write: the job's user writes in data/ only
    write(root / "conf" / "db.conf.tpl", 'password={{ getSecret "db_password" }}\n')  # read by nobody only
    write(root / "conf" / "plain.conf", "plain\n")
    os.chmod(root / "conf" / "plain.conf", 0o4775)  # setuid, group write: dropped on the way
    write(bucket / "layers" / "common" / "conf" / "shared.conf", "shared=1\n")
    write(bucket / "layers" / "common" / "conf" / "own.conf", "from the layer\n")
    add_job(bucket, "layered", files={"conf/own.conf": "own\n"}, layers=["layers/common"])
    _image(bucket / "workspace" / "images" / "tiny")
    add_job(bucket, "imaged", makefile=IMAGE_MAKEFILE, parent={"image": "tiny"}, environment={"X": "$prev{TOOL_HOME}"})
    add_job(bucket, "sealed", makefile=SEALED_MAKEFILE, mounts=[{"type": "tmp", "mount_point": "/tmp"}],
            enable_writable_file_system=False)
    peer = fleet.addresses[0]
    add_job(bucket, "netoff", makefile=NET_MAKEFILE.replace("$(PEER)", peer), network="disabled")
    add_job(bucket, "neton", makefile=NET_MAKEFILE.replace("$(PEER)", peer))
    events_dir = tmp_path_factory.mktemp("nap-events")
    os.chmod(events_dir, 0o777)
    events = "%s/events-$$ALLOCATION_IP.log" % events_dir
    for name, secs in (("nap1", 1), ("nap2", 2), ("nap3", 3)):
        wait = WAIT_FOR.format(event="nap1 start", events=events) if name == "nap3" else ""
        add_job(bucket, name, makefile=NAP_MAKEFILE.format(name=name, secs=secs, events=events, wait=wait),
                estimated_duration=secs, selectors=["worker"])
    out = Run(fleet, bucket)
    out.events_dir = Path(events_dir)
    return out


def test_01_plan_shows_the_worker_order(run):
    run.play("build")
    from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
    store = _store.KVStore.load(str(run.bucket))  # what a hook of envjob would have written
    store.put("secrets/job/envjob", "db_password", DB_PASSWORD)
    store.save()
    rc, out = run.play("deploy", "--check", "--diff", "-vvvv", "-e", "maand_worker_slots=2")
    assert "worker order" in out, out
    for h in run.fleet.addresses:
        assert re.search(r"on %s: 2 slot\(s\): .*nap3 \(3s\), nap2 \(2s\), nap1 \(1s\)" % re.escape(h), out), out


def _events(run, host):
    return (run.events_dir / ("events-%s.log" % host)).read_text().split("\n")[:-1]


def test_02_env_cwd_user_reach_make_and_targets_run_side_by_side(run):
    run.play("deploy", "-vvvv", "--diff", "-e", "maand_worker_slots=2")
    for h in run.fleet.addresses:
        text = (run.job(h, "envjob") / "data" / "out.txt").read_text()
        assert "db=%s level=info user=nobody group=daemon" % SECRET in text, text
        assert "/jobs/envjob/run new=1.0.0" in text, text
        ev = _events(run, h)
        assert sorted(ev) == sorted("%s %s" % (n, e) for n in ("nap1", "nap2", "nap3") for e in ("start", "end")), ev
        at = {e: i for i, e in enumerate(ev)}
        first_end = min(at["nap1 end"], at["nap2 end"], at["nap3 end"])
        assert at["nap3 start"] < first_end and at["nap2 start"] < first_end, ev  # the two longest overlap
        assert at["nap1 start"] > at["nap2 end"], ev  # the shortest waits for a free slot (2 slots)...
        assert at["nap1 start"] < at["nap3 end"], ev  # ...and then runs beside nap3 (serial: nap3 ends first)


def test_02e_secret_bearing_files_are_the_jobs_users_alone_and_nothing_keeps_controller_modes(run):
    """Issue 21: a file rendered from a secret is 0600 and owned by the job's user (nobody); rsync carries no
    controller owner, no group/world write, no setuid; the job's user gets data/ and logs/, nothing else."""
    import pwd
    import stat as st
    nobody = pwd.getpwnam("nobody").pw_uid
    for h in run.fleet.addresses:
        job = run.job(h, "envjob")
        conf = os.lstat(job / "conf" / "db.conf")
        assert (job / "conf" / "db.conf").read_text() == "password=%s\n" % DB_PASSWORD
        assert st.S_IMODE(conf.st_mode) == 0o600 and conf.st_uid == nobody, oct(conf.st_mode)
        plain = os.lstat(job / "conf" / "plain.conf")
        assert st.S_IMODE(plain.st_mode) == 0o755 and plain.st_uid == 0, oct(plain.st_mode)
        for folder in (job, job / "run", job / "conf"):
            info = os.lstat(folder)
            assert info.st_uid == 0 and not info.st_mode & 0o022, (folder, oct(info.st_mode))
        for folder in ("data", "logs"):
            assert os.lstat(job / folder).st_uid == nobody
        make = os.lstat(job / "Makefile")
        assert make.st_uid == 0 and st.S_IMODE(make.st_mode) == 0o644


def test_02b_network_disabled_has_no_network(run):
    for h in run.fleet.addresses:
        assert (run.job(h, "netoff") / "reach.txt").read_text().strip() == "reach=no"
        assert (run.job(h, "neton") / "reach.txt").read_text().strip() == "reach=yes"


def test_02d_private_tmp_and_read_only_file_system(run):
    for h in run.fleet.addresses:
        assert (run.job(h, "sealed") / "fs.txt").read_text().split() == ["tmpfs", "ro"]


def test_02c_layers_are_stacked_under_the_job(run):
    for h in run.fleet.addresses:
        layered = run.job(h, "layered")
        assert (layered / "conf" / "shared.conf").read_text() == "shared=1\n"
        assert (layered / "conf" / "own.conf").read_text() == "own\n"  # the job's own file on top
        imaged = run.job(h, "imaged")
        assert (imaged / "opt" / "tool.sh").read_text() == "#!/bin/sh\necho tool\n"
        assert (imaged / "out.txt").read_text().strip() == "x=/opt"  # the image's Env starts the environment
    write(run.bucket / "layers" / "common" / "conf" / "shared.conf", "shared=2\n")
    rc, out = run.play("deploy", "--check", "--diff")
    assert re.search(r"layered\s+\S+\s+restart\s+content changed: conf/shared.conf", out), out


def test_03_values_never_land_in_catalog_run_folder_or_records(run):
    for path in (run.bucket / "data").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    for h in run.fleet.addresses:  # the worker's records: everything but what make itself wrote
        made = run.job(h, "envjob") / "data" / "out.txt"
        for path in run.job(h, "envjob").parents[1].rglob("*"):
            if path.is_file() and not path.is_symlink() and path != made:
                assert b"s3cret-9f1c" not in path.read_bytes(), path
    assert any("ESTABLISH SSH CONNECTION" in out for out in run.outputs)  # -vvvv did print the details
    for out in run.outputs:  # deploy -vvvv --diff, the plan -vvvv: not in any output
        assert SECRET not in out and "s3cret-9f1c" not in out
    history = json.loads((run.bucket / "data" / "job_history.json").read_text())
    assert history["version"] == 2 and "nap3/start" not in history["targets"]
    for h in run.fleet.addresses:  # one entry per allocation, each with its own run
        entry = history["targets"]["nap3/start@%s" % h]
        assert len(entry["timings"]) == 1 and entry["timings"][0] >= 3 and entry["failed"] is False, history


def test_04_changed_value_restarts_and_plan_names_the_key(run):
    run.env["JS_LEVEL"] = "debug"
    rc, out = run.play("deploy", "--check", "--diff")
    assert re.search(r"envjob\s+\S+\s+restart\s+environment changed: LEVEL", out), out
    run.play("deploy")
    for h in run.fleet.addresses:
        assert "level=debug" in (run.job(h, "envjob") / "data" / "out.txt").read_text()


def test_04b_job_playbook_runs_targets_with_the_spec(run):
    run.env["JS_LEVEL"] = "trace"
    rc, out = run.play("job", "-vvvv", "-e", "maand_job=envjob", "-e", "maand_target=restart")
    assert "s3cret-9f1c" not in out
    for h in run.fleet.addresses:
        text = (run.job(h, "envjob") / "data" / "out.txt").read_text()
        assert "level=trace user=nobody group=daemon" in text and "/jobs/envjob/run" in text, text
        assert "db=%s" % SECRET in text, text  # the value did reach make
    run.env["JS_LEVEL"] = "debug"


def test_05_unknown_variable_refuses_before_touching_workers(run):
    hooks = Path(run.env["MAAND_HOOK_JS_MARK"]).read_text()
    assert hooks, "the pre_deploy hook ran in the deploys before"
    outs = {h: (run.job(h, "envjob") / "data" / "out.txt").read_text() for h in run.fleet.addresses}
    run.env["JS_DB_URL"] = None  # unset
    run.env["JS_LEVEL"] = "changed-so-the-plan-would-restart"
    rc, out = run.play("deploy", check=False)
    assert rc != 0 and "job envjob: workspace/containers/base.json: environment.vars.DB: unknown variable " \
        "'JS_DB_URL'" in out and "nothing was changed" in out, out
    assert Path(run.env["MAAND_HOOK_JS_MARK"]).read_text() == hooks  # refused before the pre_deploy hook ran
    rc, out = run.play("job", "-e", "maand_job=envjob", "-e", "maand_target=restart", check=False)  # rolling
    assert rc != 0 and "unknown variable 'JS_DB_URL'" in out and "deploy refused, nothing was changed" in out, out
    rc, out = run.play("job", "-e", "maand_job=envjob", "-e", "maand_target=restart", "-e",
                       "maand_job_all_at_once=true", check=False)  # maand's all at once
    assert rc != 0 and "unknown variable 'JS_DB_URL'" in out and "nothing was run" in out, out
    assert {h: (run.job(h, "envjob") / "data" / "out.txt").read_text() for h in run.fleet.addresses} == outs
    run.env["JS_DB_URL"] = SECRET
    run.env["JS_LEVEL"] = "debug"


def test_05b_unknown_user_refuses_the_plan(run):
    base = run.bucket / "workspace" / "containers" / "base.json"
    good = base.read_text()
    base.write_text(good.replace('"nobody"', '"no-such-user-zz"'))
    run.play("build")
    before = (run.job(run.fleet.addresses[0], "envjob") / "data" / "out.txt").read_text()
    hooks = Path(run.env["MAAND_HOOK_JS_MARK"]).read_text()
    assert hooks, "the pre_deploy hook ran in the deploys before"
    rc, out = run.play("deploy", check=False)
    assert rc != 0 and "user 'no-such-user-zz' does not exist on worker" in out and "nothing was changed" in out, out
    assert (run.job(run.fleet.addresses[0], "envjob") / "data" / "out.txt").read_text() == before
    assert Path(run.env["MAAND_HOOK_JS_MARK"]).read_text() == hooks  # refused before pre_deploy hooks ran
    base.write_text(good)


def test_06_timeout_kills_the_target_and_names_it(run):
    add_job(run.bucket, "hang", makefile=HANG_MAKEFILE, timeout=2)
    run.play("build")
    rc, out = run.play("deploy", check=False)
    assert rc != 0 and "make start timed out after 2 s" in out and "hanging" in out, out
    # the fleet's hosts share the controller's process table: the whole group was killed everywhere
    left = subprocess.run(["pgrep", "-f", "[s]leep 297"], capture_output=True, text=True, check=False).stdout
    assert not left.strip(), left
