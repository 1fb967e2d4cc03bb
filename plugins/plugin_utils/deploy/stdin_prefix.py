# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remote shell (rsync -e) of a deploy step whose agent call rides in its rsync (stdlib only, run as a
script on the controller, never imported by the deploy):

    python3 stdin_prefix.py FD ssh ARGS...

ssh's stdin gets what the controller writes to pipe FD (the step request, read by the worker agent before it
starts rsync's receiver), then this process's own stdin (rsync's stream). This process becomes ssh (exec),
so rsync's child is ssh itself: when ssh ends, rsync sees its stream end at once. A detached copy of it
feeds ssh's stdin and holds nothing else of rsync's (not its stdout, not its stderr).
"""

from __future__ import annotations

import os
import sys


def _feed(sources, out):
    try:
        for src in sources:
            while True:
                data = os.read(src, 65536)
                if not data:
                    break
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view):]
    except OSError:  # ssh ended (a broken pipe) or rsync closed its end: nothing more to feed
        pass


def main(argv):
    if len(argv) < 3 or not argv[1].isdigit():
        sys.stderr.write("usage: stdin_prefix.py FD COMMAND [ARGS...]\n")
        return 2
    prefix_fd, command = int(argv[1]), argv[2:]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # detach (a grandchild, reparented at once), keep only what it reads and the pipe
        if os.fork() != 0:
            os._exit(0)
        os.close(read_end)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        _feed((prefix_fd, 0), write_end)
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(write_end)
    os.close(prefix_fd)
    os.dup2(read_end, 0)
    os.close(read_end)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write("cannot run %s: %s\n" % (command[0], exc))
        return 127
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
