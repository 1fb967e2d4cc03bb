"""A latency relay for the benchmark fleet: an ssh ProxyCommand that delays each direction by D ms and
counts what crosses it (stdlib only; not a test, never run by .ci/run).

    ssh -o ProxyCommand="python3 -I -S bench/relay.py --delay-ms 25 --log FILE %h %p" root@HOST

One relay process per TCP connection (ssh starts it; with ControlPersist that is one per master, and
rsync or any other ssh sharing the master's ControlPath rides on it). Every chunk read on one side is
written to the other side D ms after it was read, in order: a reader thread never waits for the delay
(it queues the chunk with its due time), so the delay does not limit throughput. The kernel of this
machine has no netem; D = 25 ms here adds 50 ms to every round trip.

With --log, it appends one JSON line when the connection opens ({"event": "open", ...}) and one when it
closes: bytes and chunks each way, and round_trips = how many times a burst from the server followed
a burst from the client (a request answered; the SSH handshake counts too). Bursts are told apart by
the direction of consecutive reads, not by time.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import socket
import sys
import threading
import time

CHUNK = 65536


class Relay:
    def __init__(self, host, port, delay_s, log):
        self.host, self.port, self.delay, self.log = host, port, delay_s, log
        self.lock = threading.Lock()
        self.last = None
        self.counts = {"up_bytes": 0, "down_bytes": 0, "up_chunks": 0, "down_chunks": 0, "round_trips": 0}
        self.t0 = time.time()
        self.closed = False

    def seen(self, direction, n):
        with self.lock:
            self.counts[direction + "_bytes"] += n
            self.counts[direction + "_chunks"] += 1
            if direction == "down" and self.last == "up":
                self.counts["round_trips"] += 1
            self.last = direction

    def record(self, event, **extra):
        if not self.log:
            return
        line = dict(event=event, host=self.host, port=self.port, pid=os.getpid(), delay_ms=self.delay * 1000,
                    start=round(self.t0, 3), **extra)
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(line, sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)

    def close(self):
        with self.lock:
            if self.closed:
                return
            self.closed = True
            counts = dict(self.counts)
        self.record("close", end=round(time.time(), 3), **counts)

    def pump(self, read, write, finish, direction):
        """Read until EOF; a writer thread delivers every chunk at its due time, then calls finish()."""
        due = queue.SimpleQueue()

        def deliver():
            try:
                while True:
                    at, data = due.get()
                    wait = at - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    if not data:
                        break
                    write(data)
            except OSError:
                pass
            finish()

        writer = threading.Thread(target=deliver, daemon=True)
        writer.start()
        while True:
            try:
                data = read(CHUNK)
            except OSError:
                data = b""
            if data:
                self.seen(direction, len(data))
            due.put((time.monotonic() + self.delay, data))
            if not data:
                break
        writer.join()


def write_all(fd):
    def write(data):
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    return write


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay-ms", type=float, default=0.0, help="delay of each direction (ms)")
    ap.add_argument("--log", help="append one JSON line per connection open and close to this file")
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    args = ap.parse_args(argv)
    relay = Relay(args.host, args.port, args.delay_ms / 1000.0, args.log)
    sock = socket.create_connection((args.host, args.port), timeout=30)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    relay.record("open")

    def stop(signum, frame):  # ssh sends SIGHUP to its ProxyCommand when it exits
        relay.close()
        os._exit(0)

    signal.signal(signal.SIGHUP, stop)
    signal.signal(signal.SIGTERM, stop)

    def up_done():
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def down_done():
        try:
            os.close(1)
        except OSError:
            pass

    up = threading.Thread(target=relay.pump, args=(lambda n: os.read(0, n), sock.sendall, up_done, "up"), daemon=True)
    up.start()
    relay.pump(sock.recv, write_all(1), down_done, "down")
    up.join()
    relay.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
