#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A TCP echo server for tests, run inside a network namespace a test made:
it sends back every byte it gets; when the client half-closes, it sends
"eof\\n" and closes. The log records each connection: "accept ADDR PEER"
when it comes, "close ADDR PEER NBYTES" when it ends.

usage: testecho.py ADDR PORT [--log FILE]
Prints "ready" on stdout once listening."""
import socket
import sys
import threading

lock = threading.Lock()


def note(log, line):
    if log:
        with lock:
            log.write(line + "\n")


def serve(c, addr, peer, log):
    total = 0
    try:
        while True:
            data = c.recv(65536)
            if not data:
                c.sendall(b"eof\n")
                break
            total += len(data)
            c.sendall(data)
    except OSError:
        pass
    finally:
        note(log, f"close {addr} {peer} {total}")
        c.close()


def main():
    addr, port = sys.argv[1], int(sys.argv[2])
    log = open(sys.argv[sys.argv.index("--log") + 1], "a", buffering=1) if "--log" in sys.argv else None
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(64)
    print("ready", flush=True)
    while True:
        c, peer = s.accept()
        note(log, f"accept {addr} {peer[0]}")
        threading.Thread(target=serve, args=(c, addr, peer[0], log), daemon=True).start()


main()
