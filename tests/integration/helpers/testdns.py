#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A DNS responder for tests, run inside a network namespace a test made
(or on loopback). It answers from a JSON map given on the command line:

  {"www.example.test": {"A": ["198.51.100.218"], "AAAA": ["2001:db8:b0::2"]},
   "broken.example.test": "SERVFAIL"}

A listed name gets its records of the asked type (none: an empty answer);
"SERVFAIL" makes it fail; any other name is NXDOMAIN. Names match without
regard to case and to a trailing dot. UDP only.

usage: testdns.py ADDR PORT MAP_JSON [--log FILE]
Prints "ready" on stdout once listening; the log gets "dns NAME TYPE"."""
import ipaddress
import json
import socket
import sys

QTYPES = {1: "A", 28: "AAAA"}


def parse_question(q):
    labels, off = [], 12
    while off < len(q) and q[off] != 0:
        n = q[off]
        if n & 0xc0:
            raise ValueError("compressed question")
        labels.append(q[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n
    off += 1
    qtype = int.from_bytes(q[off:off + 2], "big")
    return ".".join(labels).lower(), qtype, q[12:off + 4]


def answer(q, records):
    name, qtype, question = parse_question(q)
    entry = records.get(name)
    rd = q[2] & 0x01
    if entry is None:
        rcode, rrs = 3, []
    elif entry == "SERVFAIL":
        rcode, rrs = 2, []
    else:
        rcode = 0
        kind = QTYPES.get(qtype)
        rrs = []
        for addr in entry.get(kind, []) if kind else []:
            packed = ipaddress.ip_address(addr).packed
            rrs.append(b"\xc0\x0c" + qtype.to_bytes(2, "big") + b"\x00\x01" + (60).to_bytes(4, "big") +
                       len(packed).to_bytes(2, "big") + packed)
    flags = bytes([0x84 | rd, 0x80 | rcode])  # QR, AA, RD as asked; RA
    header = q[0:2] + flags + b"\x00\x01" + len(rrs).to_bytes(2, "big") + b"\x00\x00\x00\x00"
    return name, qtype, header + question + b"".join(rrs)


def main():
    addr, port, records = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    records = {k.lower().rstrip("."): v for k, v in records.items()}
    log = open(sys.argv[sys.argv.index("--log") + 1], "a", buffering=1) if "--log" in sys.argv else None
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, port))
    print("ready", flush=True)
    while True:
        q, peer = s.recvfrom(4096)
        try:
            name, qtype, a = answer(q, records)
        except (ValueError, IndexError):
            continue
        if log:
            log.write(f"dns {name} {QTYPES.get(qtype, qtype)}\n")
        s.sendto(a, peer)


main()
