"""Serve a folder over HTTP: serve.py PORT DIR (the web job's server).

socketserver rather than `python3 -m http.server`: HTTPServer.server_bind does a reverse DNS lookup
(socket.getfqdn), which stalls for seconds on hosts without a reachable resolver.
"""
import functools
import http.server
import socketserver
import sys


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main(port, folder):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=folder)
    with Server(("", int(port)), handler) as server:
        server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
