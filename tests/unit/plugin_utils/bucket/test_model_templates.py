"""The model's one walk of a job folder lists its .tpl and .j2 files exactly as _kv_build.job_templates (an
os.walk) does: same files, same order; build's template check uses that list instead of a second walk."""

from __future__ import annotations

import os
import random

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import kv_build as _kv_build
from ansible_collections.maand.core.plugins.plugin_utils.bucket import model as _model
from ansible_collections.maand.core.plugins.plugin_utils.bucket.problems import Report

NAMES = ["a", "b", "conf", "_modules", "_prometheus", "z.tpl", "A.tpl", "m.tpl", "x.j2", "y.j2", "x.txt",
         "Makefile.tpl"]


def walk(tmp_path, job_root, suffix=".tpl"):
    bucket = _model.Bucket(str(tmp_path))
    rel_dir = os.path.relpath(job_root, str(tmp_path))
    dummy, dummy, files = _model._walk_job(bucket, "j", rel_dir, Report(), rel_dir + "/manifest.json")
    return list(files[suffix])


def random_tree(root, rng, depth=0):
    os.makedirs(root, exist_ok=True)
    for name in rng.sample(NAMES, rng.randint(1, 6)):
        path = os.path.join(root, name)
        if "." not in name and depth < 3 and rng.random() < 0.6:
            random_tree(path, rng, depth + 1)
        elif not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as handle:
                handle.write("x")


@pytest.mark.parametrize("seed", range(40))
def test_same_templates_as_the_os_walk(tmp_path, seed):
    job = tmp_path / "workspace" / "jobs" / "j"
    random_tree(str(job), random.Random(seed))
    assert walk(tmp_path, str(job)) == _kv_build.job_templates(str(job))
    assert walk(tmp_path, str(job), ".j2") == _kv_build.job_templates(str(job), ".j2")


def test_links_and_skipped_folders(tmp_path):
    job = tmp_path / "workspace" / "jobs" / "j"
    for rel in ("conf/app.conf.tpl", "_modules/cmd.tpl", "_prometheus/rules.tpl", "deep/_modules/kept.tpl", "a.tpl",
                "sub/b.tpl", "sub/inner/c.tpl", "sub.tpl"):
        (job / rel).parent.mkdir(parents=True, exist_ok=True)
        (job / rel).write_text("x")
    os.symlink("a.tpl", str(job / "link.tpl"))          # a link to a file: listed
    os.symlink("sub", str(job / "dirlink.tpl"))         # a link to a folder: not a file, not walked
    os.symlink("missing", str(job / "broken.tpl"))      # a broken link: listed (os.walk lists it as a file)
    (job / "sub" / "page.j2").write_text("x")
    os.symlink("sub/page.j2", str(job / "page.j2"))
    assert walk(tmp_path, str(job), ".j2") == _kv_build.job_templates(str(job), ".j2") == ["page.j2", "sub/page.j2"]
    expected = _kv_build.job_templates(str(job))
    assert walk(tmp_path, str(job)) == expected
    assert "_modules/cmd.tpl" not in expected and "deep/_modules/kept.tpl" in expected and "link.tpl" in expected
    assert expected.index("sub.tpl") < expected.index("sub/b.tpl") < expected.index("sub/inner/c.tpl")
