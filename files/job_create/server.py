"""@job@: a placeholder service from maand.core.job_create (stdlib only); replace it with yours.

Listens on the port in the config file rendered from @job@.conf.tpl; GET /health answers 200 (the
manifest's health_check probes it), every other GET answers with the version.
"""
import http.server
import socketserver
import sys


def read_conf(path):
    conf = {}
    with open(path) as handle:
        for line in handle:
            key, sep, value = line.partition("=")
            if sep and not key.strip().startswith("#"):
                conf[key.strip()] = value.strip()
    return conf


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("ok\n" if self.path == "/health" else "@job@ %s\n" % CONF.get("version", "?")).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


CONF = read_conf(sys.argv[1] if len(sys.argv) > 1 else "@job@.conf")

if __name__ == "__main__":
    Server(("0.0.0.0", int(CONF["port"])), Handler).serve_forever()
