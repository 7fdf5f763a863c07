#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A plain HTTP server for tests, run inside a network namespace a test
made: it serves the files of DIR (GET and HEAD; git's dumb HTTP works on a
bare repository after `git update-server-info`). Unlike `python3 -m
http.server` it looks up no name (http.server asks DNS for its own address's
name before it listens). The log gets "http METHOD PATH HOST" per request.

With --tls CERT KEY it speaks HTTPS with that certificate chain.

usage: testhttp.py ADDR PORT DIR [--log FILE] [--tls CERT KEY]
Prints "ready" on stdout once listening."""
import http.server
import socketserver
import ssl
import sys


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def server_bind(self):
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def main():
    addr, port, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    log = open(sys.argv[sys.argv.index("--log") + 1], "a", buffering=1) if "--log" in sys.argv else None

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=root, **kw)

        def log_message(self, fmt, *args):
            if log:
                log.write(f"http {self.command} {self.path} {self.headers.get('Host', '-')}\n")

    srv = Server((addr, port), Handler)
    if "--tls" in sys.argv:
        i = sys.argv.index("--tls")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[i + 1], sys.argv[i + 2])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("ready", flush=True)
    srv.serve_forever()


main()
