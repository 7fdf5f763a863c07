#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A test host's services, run inside a network namespace a test made:
a TCP listener that accepts and closes, and a DNS responder that answers
every A query with ANSWER_A and every AAAA query with ANSWER_AAAA (and
REFUSED for names starting with "refused").

With --hold FILE, a DNS query that arrives while FILE exists is answered
only once FILE is gone, or after HOLD_MAX seconds (within the probes' time
limit of 3 s): the log says "dns-held" when it starts waiting and
"dns-answered" with how it ended.

usage: testhost.py ADDR TCP_PORT [--dns] [--log FILE] [--hold FILE]
Prints "ready" on stdout once listening."""
import ipaddress
import os
import select
import socket
import sys
import time

HOLD_MAX = 2.5

ANSWER_A = "192.0.2.80"
ANSWER_AAAA = "2001:db8::80"


def dns_answer(q):
    if len(q) < 12:
        return None
    # Question: name, then type and class.
    off = 12
    while off < len(q) and q[off] != 0:
        off += 1 + q[off]
    off += 1
    qtype = int.from_bytes(q[off:off + 2], "big")
    question = q[12:off + 4]
    if q[13:20] == b"refused":  # a resolver whose upstream said no
        return q[0:2] + b"\x81\x85" + b"\x00\x01" + b"\x00\x00\x00\x00\x00\x00" + question
    header = q[0:2] + b"\x81\x80" + b"\x00\x01"
    if qtype == 1:
        rdata = ipaddress.IPv4Address(ANSWER_A).packed
    elif qtype == 28:
        rdata = ipaddress.IPv6Address(ANSWER_AAAA).packed
    else:
        return header + b"\x00\x00\x00\x00\x00\x00" + question
    answer = b"\xc0\x0c" + qtype.to_bytes(2, "big") + b"\x00\x01" + (60).to_bytes(4, "big") + \
        len(rdata).to_bytes(2, "big") + rdata
    return header + b"\x00\x01\x00\x00\x00\x00" + question + answer


def hold(path, log):
    if not path or not os.path.exists(path):
        return
    if log:
        log.write("dns-held\n")
    deadline = time.monotonic() + HOLD_MAX
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    if log:
        log.write("dns-answered " + ("released" if not os.path.exists(path) else "after the time limit") + "\n")


def main():
    addr, port = sys.argv[1], int(sys.argv[2])
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    log = open(sys.argv[sys.argv.index("--log") + 1], "a", buffering=1) if "--log" in sys.argv else None
    tcp = socket.socket(fam, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((addr, port))
    tcp.listen(16)
    socks = [tcp]
    if "--dns" in sys.argv:
        udp = socket.socket(fam, socket.SOCK_DGRAM)
        udp.bind((addr, 53))
        socks.append(udp)
    print("ready", flush=True)
    while True:
        r, _, _ = select.select(socks, [], [])
        for s in r:
            if s is tcp:
                c, peer = tcp.accept()
                if log:
                    log.write(f"tcp {peer[0]}\n")
                try:
                    c.sendall(b"hello from the test host\n")
                except OSError:
                    pass
                c.close()
            else:
                q, peer = s.recvfrom(2048)
                if log:
                    log.write(f"dns {peer[0]}\n")
                hold(sys.argv[sys.argv.index("--hold") + 1] if "--hold" in sys.argv else None, log)
                a = dns_answer(q)
                if a:
                    s.sendto(a, peer)


main()
