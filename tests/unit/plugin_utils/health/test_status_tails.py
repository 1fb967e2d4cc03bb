"""A failed gate's status command may run as root in a folder the job's user writes: it reads the newest log
without following a link at any step (security review 4, L4: no check-then-`tail` a link can be swapped into)."""

from __future__ import annotations

import os
import subprocess

from ansible_collections.maand.core.plugins.plugin_utils import health as _health
from ansible_collections.maand.core.plugins.plugin_utils.health import tails as _tails


def _job(tmp_path):
    job = tmp_path / "worker" / "jobs" / "api"
    (job / "logs").mkdir(parents=True)
    (job / "Makefile").write_text("status:\n\t@echo running\n")
    (job / "logs" / "app.log").write_text("".join("log %d\n" % i for i in range(30)))
    os.utime(job / "logs" / "app.log", (1, 1))
    secret = tmp_path / "root-only"
    secret.write_text("do not leak\n")
    return job, secret


def _run(tmp_path, lines=3):
    return subprocess.run(["sh", "-c", _health.status_command(str(tmp_path / "worker"), "api", lines=lines)],
                          capture_output=True, text=True, check=True, timeout=60).stdout


def test_the_command_opens_the_log_without_following_links():
    text = _health.status_command("/opt/worker", "api", lines=5)
    assert 'tail -n 5 "logs/' not in text and "[ -L" not in text  # no check-then-use of a path
    assert "python3 -I -c " in text
    assert text.rstrip().endswith(" 5; else echo '--- logs: not read (no python3 on the worker)'; fi")
    assert "os.O_NOFOLLOW" in _tails.READ_NEWEST_LOG and "dir_fd=d" in _tails.READ_NEWEST_LOG
    assert "os.fstat(fd)" in _tails.READ_NEWEST_LOG  # what is read is judged by the open file, not the path


def test_the_newest_regular_log_is_tailed(tmp_path):
    _job(tmp_path)
    out = _run(tmp_path).splitlines()
    assert out[:2] == ["--- make status (exit 0):", "running"]
    assert out[2:] == ["--- logs/app.log:", "log 27", "log 28", "log 29"]


def test_a_symlink_a_hard_link_or_a_linked_logs_folder_is_named_never_read(tmp_path):
    job, secret = _job(tmp_path)
    (job / "logs" / "zz.log").symlink_to(secret)
    out = _run(tmp_path)
    assert "--- logs/zz.log: a symlink, not read" in out and "do not leak" not in out, out
    (job / "logs" / "zz.log").unlink()
    os.link(str(secret), str(job / "logs" / "zz.log"))
    out = _run(tmp_path)
    assert "--- logs/zz.log: a hard link, not read" in out and "do not leak" not in out, out
    (job / "logs" / "zz.log").unlink()
    os.mkfifo(str(job / "logs" / "zz.log"))
    out = _run(tmp_path)  # a fifo neither blocks nor is read
    assert "zz.log" not in out and "do not leak" not in out, out
    (job / "logs" / "zz.log").unlink()
    (job / "logs").rename(job / "old-logs")
    (job / "logs").symlink_to(tmp_path)
    out = _run(tmp_path)
    assert "--- logs: a symlink, not read" in out and "do not leak" not in out, out


def test_no_logs_folder_reads_nothing(tmp_path):
    job, _secret = _job(tmp_path)
    (job / "logs" / "app.log").unlink()
    (job / "logs").rmdir()
    assert _run(tmp_path).splitlines() == ["--- make status (exit 0):", "running"]
