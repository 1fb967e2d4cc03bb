"""ansible-builder: the EE definition (examples/awx/execution-environment.yml) produces a build context
with `ansible-builder create`, and the collection's own meta/execution-environment.yml is what
ansible-builder's introspection reads from the installed collection (issue 8 item 6).

No container engine here: `create` only writes the context; the image's dependency step is checked by
running ansible-builder's own introspection (the script the image build runs) on an installed copy of
the collection tarball.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EE_DEFINITION = REPO / "examples" / "awx" / "execution-environment.yml"

pytestmark = pytest.mark.skipif(shutil.which("ansible-builder") is None,
                                reason="ansible-builder is not installed (requirements-dev.txt)")


def run(*args, cwd=None):
    proc = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1"))
    assert proc.returncode == 0, "%s failed (rc=%d):\n%s%s" % (" ".join(args), proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    dist = tmp_path_factory.mktemp("dist")
    run("ansible-galaxy", "collection", "build", "--output-path", str(dist), str(REPO))
    (built,) = dist.glob("maand-core-*.tar.gz")
    return built


@pytest.fixture(scope="module")
def context(tmp_path_factory, tarball):
    work = tmp_path_factory.mktemp("ee")
    shutil.copy(EE_DEFINITION, work / "execution-environment.yml")
    shutil.copy(tarball, work / "maand-core.tar.gz")
    run("ansible-builder", "create", "-f", "execution-environment.yml", "--context", "context", cwd=str(work))
    return work / "context"


def test_create_writes_a_context_that_installs_ansible_core_runner_and_the_collections(context):
    containerfile = next(p for p in (context / "Containerfile", context / "Dockerfile") if p.exists()).read_text()
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core>=2.19,<2.20 ansible-runner>=2.4"' in containerfile
    assert "ansible-galaxy collection install" in containerfile and "-r requirements.yml" in containerfile
    # the image build runs the introspection that reads every collection's meta/execution-environment.yml
    assert "introspect.py introspect" in containerfile
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    names = [c["name"] for c in requirements["collections"]]
    assert names == ["/build/collections/maand-core.tar.gz"]  # galaxy.yml declares no dependencies
    # ansible-galaxy reads the tarball's MANIFEST.json, not its file name
    with tarfile.open(context / "_build" / "collections" / "maand-core.tar.gz") as tar:
        members = set(tar.getnames())
    assert {"MANIFEST.json", "meta/execution-environment.yml", "requirements.txt", "bindep.txt",
            "playbooks/deploy.yml"} <= members


def test_the_collection_metadata_is_what_the_image_build_introspects(tmp_path, tarball):
    """The EE build installs the collection, then introspects it: our requirements.txt and bindep.txt."""
    collections = tmp_path / "collections"
    run("ansible-galaxy", "collection", "install", "--no-deps", "--force", "-p", str(collections), str(tarball))
    installed = collections / "ansible_collections" / "maand" / "core"
    assert (installed / "meta" / "execution-environment.yml").exists()
    report = yaml.safe_load(run("ansible-builder", "introspect", "--sanitize", str(collections)))
    python = report["python"]
    system = report["system"]
    # expected lines come from the files themselves, so a change to either file is followed here
    wanted_python = [line.strip() for line in (REPO / "requirements.txt").read_text().splitlines()
                     if line.strip() and not line.startswith("#")]
    wanted_system = [line.strip() for line in (REPO / "bindep.txt").read_text().splitlines()
                     if line.strip() and not line.startswith("#")]
    assert wanted_python and wanted_system
    assert python == ["%s  # from collection maand.core" % line for line in wanted_python], report
    assert system == ["%s  # from collection maand.core" % line for line in wanted_system], report
    assert any(line.startswith("rsync ") for line in wanted_system)


def test_collection_metadata_paths_are_relative_to_the_collection_root():
    """ansible-builder refuses absolute paths and resolves these from the collection root."""
    meta = yaml.safe_load((REPO / "meta" / "execution-environment.yml").read_text())
    for kind in ("python", "system"):
        path = meta["dependencies"][kind]
        assert not os.path.isabs(path) and (REPO / path).is_file(), (kind, path)
