#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A TCP echo server for tests, run inside a network namespace a test made:
it sends back every byte it gets; when the client half-closes, it sends
"eof\\n" and closes. A connection that begins "blast N\\n" gets N bytes
of "x" instead, then the end a server gives that closes while its client
still sends: its bytes acknowledged, then a close with the client's later
bytes unread, which the kernel answers with a reset. The log records each
connection: "accept ADDR PEER" when it comes, "close ADDR PEER NBYTES"
(the bytes it got, or sent for blast) when it ends.

usage: testecho.py ADDR PORT [--log FILE]
Prints "ready" on stdout once listening."""
import fcntl
import select
import socket
import struct
import sys
import termios
import threading
import time

lock = threading.Lock()


def note(log, line):
    if log:
        with lock:
            log.write(line + "\n")


def blast(c, n):
    c.sendall(b"x" * n)
    c.shutdown(socket.SHUT_WR)
    # Every byte acknowledged (the send queue empty), so that only the
    # client's unread bytes make the close a reset.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        queued = struct.unpack("i", fcntl.ioctl(c.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
        if queued == 0:
            break
        time.sleep(0.01)
    # The client's bytes after the request: in the queue, unread.
    select.select([c], [], [], 10)


def serve(c, addr, peer, log):
    total = 0
    try:
        first = True
        while True:
            data = c.recv(65536)
            if first and data.startswith(b"blast "):
                n = int(data.split(b"\n")[0].split()[1])
                blast(c, n)
                total = n
                break
            first = False
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
