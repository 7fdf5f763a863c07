# SPDX-License-Identifier: MIT
"""lazaret-broker (issue 18) run directly, without Podman: a Unix socket in
a temporary directory, the configuration in a memfd, the events pipe read
by the test. The destinations are test hosts in a network namespace the
test makes (a veth link, 198.51.100.216/29 and 2001:db8:b0::/64): a DNS
responder answering from a map (helpers/testdns.py) and TCP echo servers
(helpers/testecho.py) that log every connection they accept; a listener of
the test on the host's loopback watches for what must never arrive."""
import contextlib
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import BUILD
from testnet import HELPERS, NetLab, sh

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="test hosts need network namespaces (root)")

ROOT4, HOST4, HOST4B, HOST4_DEAD = "198.51.100.217", "198.51.100.218", "198.51.100.219", "198.51.100.220"
ROOT6, HOST6 = "2001:db8:b0::1", "2001:db8:b0::2"

POLICY = ("lazaret-derived-network-policy v1\n"
          "family ipv4 enabled default deny\n"
          "family ipv6 enabled default deny\n"
          "rule 198.51.100.0/24 allow\n"
          "rule 198.51.100.219/32 deny\n"
          "rule 2001:db8::/32 allow\n")

DNS = {
    "www.example.test": {"A": [HOST4], "AAAA": [HOST6]},
    "v4.example.test": {"A": [HOST4]},
    "v6.example.test": {"AAAA": [HOST6]},
    "a.wild.test": {"A": [HOST4]},
    "wild.test": {"A": [HOST4]},
    "a.b.wild.test": {"A": [HOST4]},
    "fallback.example.test": {"A": [HOST4_DEAD, HOST4]},
    "loop.example.test": {"A": ["127.0.0.1"]},
    "private.example.test": {"A": ["10.1.2.3"]},
    "meta.example.test": {"A": ["169.254.169.254"]},
    "loop6.example.test": {"AAAA": ["::1"]},
    "ula.example.test": {"AAAA": ["fd00:ec2::254"]},
    "mapped.example.test": {"AAAA": ["::ffff:127.0.0.1"]},
    "nat64.example.test": {"AAAA": ["64:ff9b::a9fe:a9fe"]},
    "mix.example.test": {"A": [HOST4, "10.1.2.3"]},
    "mix6.example.test": {"A": [HOST4], "AAAA": ["fd00:ec2::254"]},
    "self.example.test": {"A": [ROOT4]},
    "denied.example.test": {"A": [HOST4B]},
    "broken.example.test": "SERVFAIL",
    "empty.example.test": {},
}


class Loopback:
    """A listener of the test on the host's loopback: the broker must never
    connect here, whatever a name resolves to."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.sock6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        self.sock6.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock6.bind(("::1", self.port))
        self.sock6.listen(8)
        self.peers = []
        self.stop = False
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop:
            r, _, _ = select.select([self.sock, self.sock6], [], [], 0.2)
            for s in r:
                c, peer = s.accept()
                self.peers.append(peer[0])
                c.close()

    def close(self):
        self.stop = True
        self.t.join()
        self.sock.close()
        self.sock6.close()


@pytest.fixture(scope="module")
def lab():
    binary = os.path.join(BUILD, "src", "broker", "lazaret-broker")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary} is missing: build first", pytrace=False)
    t = NetLab()
    loop = None
    try:
        loop = Loopback()
        t.binary = binary
        t.port = loop.port  # the same port everywhere: a wrong connect would show
        t.loop = loop
        h = t.netns("b")
        t.veth(None, [f"{ROOT4}/29", f"{ROOT6}/64"], h,
               [f"{HOST4}/29", f"{HOST4B}/29", f"{HOST4_DEAD}/29", f"{HOST6}/64"])
        t.log = tempfile.mktemp(prefix="lazaret-broker-hosts-", suffix=".log")
        open(t.log, "w").close()
        for addr in (HOST4, HOST4B, HOST6):
            start(t, h, "testecho.py", addr, str(t.port), "--log", t.log)
        start(t, h, "testdns.py", HOST4, "53", json.dumps(DNS), "--log", t.log)
        start(t, h, "testdns.py", HOST6, "53", json.dumps(DNS), "--log", t.log)
        # HOST4_DEAD: an address with nothing listening (connection refused).
        yield t
    finally:
        t.close()
        if loop:
            loop.close()
        if getattr(t, "log", None) and os.path.exists(t.log):
            os.unlink(t.log)


def start(t, ns, helper, *args):
    p = subprocess.Popen(["nsenter", f"--net={t.path(ns)}", sys.executable, os.path.join(HELPERS, helper), *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t.procs.append(p)
    line = p.stdout.readline()
    assert line.strip() == "ready", p.stderr.read()


def accepts(lab):
    with open(lab.log) as f:
        return [l.split() for l in f if l.startswith("accept ")]


def closes(lab):
    with open(lab.log) as f:
        return [l.split() for l in f if l.startswith("close ")]


class Broker:
    def __init__(self, lab, **overrides):
        self.dir = tempfile.mkdtemp(prefix="lazaret-broker-")
        self.path = os.path.join(self.dir, "sock")
        self.lab = lab
        cfg = {
            "version": 1,
            "rules": [f"www.example.test:{lab.port}", f"*.example.test:{lab.port}", f"*.wild.test:{lab.port}",
                      f"other.test:{lab.port + 1}"],
            "check_server_name": False,
            "max_connections": 256,
            "idle_timeout": 600,
            "connect_timeout": 3,
            "netpolicy": POLICY,
            "resolvers": [HOST4],
        }
        cfg.update(overrides)
        self.cfg = cfg
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(self.path)
        ls.listen(64)
        cfd = os.memfd_create("broker-config", os.MFD_CLOEXEC)
        os.write(cfd, json.dumps(cfg).encode())
        self.events_r, ew = os.pipe()
        self.stderr = open(os.path.join(self.dir, "stderr"), "w+")
        fds = (ls.fileno(), cfd, ew)
        self.proc = subprocess.Popen([lab.binary, "--listen-fd", str(fds[0]), "--config-fd", str(fds[1]),
                                      "--events-fd", str(fds[2])], pass_fds=fds, stderr=self.stderr)
        ls.close()
        os.close(cfd)
        os.close(ew)
        self.pending = b""

    def log(self):
        self.stderr.flush()
        with open(self.stderr.name) as f:
            return f.read()

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(20)
        s.connect(self.path)
        return s

    def ask(self, host, port=None, via="connect", raw=None):
        """Send one request; returns (socket, answer line)."""
        s = self.connect()
        if raw is None:
            h = host if isinstance(host, bytes) else host.encode()
            raw = b"CONNECT " + h + b" " + str(port or self.lab.port).encode() + b" " + via.encode() + b"\n"
        s.sendall(raw)
        return s, read_line(s)

    def event(self, timeout=10):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.events_r], [], [], max(left, 0))
            assert r, f"no event within {timeout} s; log: {self.log()}"
            chunk = os.read(self.events_r, 65536)
            assert chunk, "the events pipe closed"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with contextlib.suppress(OSError):
            os.close(self.events_r)
        self.text = self.log()  # a sanitizer build reports at exit
        self.stderr.close()
        for f in ("sock", "stderr"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.dir, f))
        os.rmdir(self.dir)


def read_line(s):
    buf = b""
    while not buf.endswith(b"\n"):
        c = s.recv(1)
        if not c:
            break
        buf += c
    return buf.decode("ascii", "replace")


@pytest.fixture
def broker(lab):
    made = []

    def make(**overrides):
        b = Broker(lab, **overrides)
        made.append(b)
        return b

    yield make
    reports = []
    for b in made:
        b.close()
        if "Sanitizer" in b.text or "runtime error" in b.text:
            reports.append(b.text)
    assert not reports, reports[0]
    assert lab.loop.peers == [], "something reached the host's loopback"


def echo(s, data):
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        c = s.recv(65536)
        assert c, "closed early"
        got += c
    return got


def test_allowed_name_pumps_both_ways(lab, broker):
    b = broker()
    before = len(accepts(lab))
    s, line = b.ask("www.example.test")
    assert line.startswith("OK "), line
    addr = line.split()[1]
    assert addr in (HOST4, HOST6) and line.split()[2] == str(lab.port)
    assert echo(s, b"hello\n") == b"hello\n"
    # A few MiB both ways at once: the pipes are bounded, nothing is lost.
    blob = os.urandom(4 << 20)
    got = []

    def reader():
        buf = bytearray()
        while len(buf) < len(blob):
            c = s.recv(1 << 16)
            if not c:
                break
            buf += c
        got.append(bytes(buf))

    t = threading.Thread(target=reader)
    t.start()
    s.sendall(blob)
    t.join(60)
    assert got and got[0] == blob
    # Half-close reaches the server, whose last words come back.
    s.shutdown(socket.SHUT_WR)
    assert read_line(s) == "eof\n"
    assert s.recv(10) == b""
    s.close()
    e = b.event()
    assert e["verdict"] == "allowed" and e["reason"] is None
    assert e["host"] == "www.example.test" and e["name"] == "www.example.test" and e["port"] == lab.port
    assert e["via"] == "connect" and e["address"] == addr
    assert sorted(e["addresses"]) == sorted([HOST4, HOST6])
    assert e["bytes_out"] == 6 + len(blob) and e["bytes_in"] == 6 + len(blob) + 4
    assert e["duration_ms"] >= 0 and e["time"].endswith("Z") and "T" in e["time"]
    assert len(accepts(lab)) == before + 1


def test_name_forms(lab, broker):
    b = broker()
    # Upper case folds, one trailing dot goes; the event keeps what was asked.
    for host, name in (("WWW.Example.TEST", "www.example.test"), ("v4.example.test.", "v4.example.test"),
                       ("a.wild.test", "a.wild.test"), ("v6.example.test", "v6.example.test")):
        s, line = b.ask(host, via="socks")
        assert line.startswith("OK "), (host, line)
        assert echo(s, b"x") == b"x"
        s.close()
        e = b.event()
        assert e["verdict"] == "allowed" and e["host"] == host and e["name"] == name and e["via"] == "socks"
    # The wildcard is one label, never the bare suffix.
    for host in ("wild.test", "a.b.wild.test", "example.org"):
        s, line = b.ask(host)
        assert line.startswith("ERR name-not-listed "), (host, line)
        assert s.recv(10) == b""
        e = b.event()
        assert e["verdict"] == "refused" and e["reason"] == "name-not-listed" and e["addresses"] == []
    s, line = b.ask("www.example.test", port=lab.port + 1)
    assert line.startswith("ERR port-not-listed "), line
    s, line = b.ask("other.test")
    assert line.startswith("ERR port-not-listed "), line
    assert b.event()["reason"] == "port-not-listed"
    assert b.event()["reason"] == "port-not-listed"


def test_bad_names(lab, broker):
    b = broker()
    before = len(accepts(lab))
    for host in (b"www\x00.example.test", b"www%00.example.test", b"a" * 64 + b".example.test",
                 b"a" * 300 + b".example.test", b"user@www.example.test", b"www..example.test",
                 b"caf\xc3\xa9.example.test", b"-a.example.test", b"127.1", b"[::1]", b"www.example.test.."):
        s, line = b.ask(host)
        assert line.startswith("ERR bad-name "), (host, line)
        e = b.event()
        assert e["verdict"] == "refused" and e["reason"] == "bad-name" and e["name"] is None
        assert e["host"].isascii() and len(e["host"]) <= 260
    s, line = b.ask(b"www\x00.example.test")
    e_nul = b.event()
    assert "\\x00" in e_nul["host"]
    assert len(accepts(lab)) == before


def test_malformed_requests(lab, broker):
    b = broker()
    p = str(lab.port).encode()
    for raw in (b"GET / HTTP/1.1\n", b"CONNECT www.example.test " + p + b"\n",
                b"CONNECT www.example.test 0 connect\n", b"CONNECT www.example.test 65536 connect\n",
                b"CONNECT www.example.test 0" + p + b" connect\n", b"CONNECT www.example.test " + p + b" connect\r\n",
                b"CONNECT  www.example.test " + p + b" connect\n", b"CONNECT www.example.test " + p + b" telnet\n",
                b"CONNECT www.example.test " + p + b" connect \n", b"connect www.example.test " + p + b" connect\n",
                b"CONNECT www example.test " + p + b" connect\n", b"CONNECT " + b"a" * 700 + b"\n",
                b"\n"):
        s, line = b.ask(None, raw=raw)
        assert line.startswith("ERR bad-request "), (raw, line)
        try:
            assert s.recv(10) == b""
        except ConnectionResetError:
            assert len(raw) > 600  # closed with the rest of the line unread
        e = b.event()
        assert e["verdict"] == "refused" and e["reason"] == "bad-request", e
    # No newline, then the client's end: refused at once.
    s = b.connect()
    s.sendall(b"CONNECT www.example.test " + p)
    s.shutdown(socket.SHUT_WR)
    assert read_line(s).startswith("ERR bad-request ")
    assert b.event()["reason"] == "bad-request"


@pytest.mark.parametrize("name,why", [
    ("loop.example.test", "127.0.0.1 is in 127.0.0.0/8"),
    ("private.example.test", "10.1.2.3 is in 10.0.0.0/8"),
    ("meta.example.test", "169.254.169.254 is in 169.254.0.0/16"),
    ("loop6.example.test", "::1 is in ::1/128"),
    ("ula.example.test", "fd00:ec2::254 is in fc00::/7"),
    ("mapped.example.test", "::ffff:127.0.0.1 embeds 127.0.0.1 (IPv4-mapped)"),
    ("nat64.example.test", "64:ff9b::a9fe:a9fe embeds 169.254.169.254 (NAT64)"),
    ("mix.example.test", "10.1.2.3 is in 10.0.0.0/8"),
    ("mix6.example.test", "fd00:ec2::254 is in fc00::/7"),
    ("self.example.test", f"{ROOT4} is refused: one of the host's own addresses"),
    ("denied.example.test", f"{HOST4B} is refused: a deny rule"),
])
def test_rebinding_refused(lab, broker, name, why):
    b = broker()
    before = len(accepts(lab))
    s, line = b.ask(name)
    assert line.startswith("ERR address-denied "), line
    assert why in line, line
    assert s.recv(10) == b""
    e = b.event()
    assert e["verdict"] == "refused" and e["reason"] == "address-denied" and e["address"] is None
    assert e["addresses"], e
    assert why in e["message"]
    time.sleep(0.2)
    assert len(accepts(lab)) == before, "a refused name's answer was connected to"


def test_dns_failures(lab, broker):
    b = broker()
    for name in ("nx.example.test", "broken.example.test", "empty.example.test"):
        s, line = b.ask(name)
        assert line.startswith("ERR dns-failed "), (name, line)
        assert b.event()["reason"] == "dns-failed"


def test_ipv6_disabled_asks_a_only(lab, broker):
    b = broker(netpolicy=POLICY.replace("family ipv6 enabled default deny", "family ipv6 disabled")
               .replace("rule 2001:db8::/32 allow\n", ""))
    s, line = b.ask("www.example.test")
    assert line == f"OK {HOST4} {lab.port}\n"
    s.close()
    assert b.event()["addresses"] == [HOST4]
    s, line = b.ask("v6.example.test")
    assert line.startswith("ERR dns-failed "), line


def test_ipv6_resolver_and_fallback(lab, broker):
    b = broker(resolvers=[f"[{HOST6}]:53"])
    s, line = b.ask("fallback.example.test")
    # The first answer refuses the connection; the second one serves.
    assert line == f"OK {HOST4} {lab.port}\n", line
    assert echo(s, b"ok") == b"ok"
    s.close()
    e = b.event()
    assert e["addresses"] == [HOST4_DEAD, HOST4] and e["address"] == HOST4


def test_ip_literals(lab, broker):
    b = broker()
    before = len(accepts(lab))
    for lit in ("127.0.0.1", "::1", "::ffff:127.0.0.1", "192.0.2.1", ROOT4, HOST4B, "0.0.0.0", "::"):
        s, line = b.ask(lit)
        assert line.startswith("ERR ip-literal "), (lit, line)
        e = b.event()
        assert e["reason"] == "ip-literal" and e["name"] is None and e["host"] == lit
    assert len(accepts(lab)) == before
    # A CIDR allow rule permits a literal.
    for lit in (HOST4, HOST6):
        s, line = b.ask(lit)
        assert line == f"OK {lit} {lab.port}\n", line
        assert echo(s, b"lit") == b"lit"
        s.close()
        e = b.event()
        assert e["verdict"] == "allowed" and e["address"] == lit and e["name"] is None
    s, line = b.ask(HOST4_DEAD)
    assert line.startswith("ERR connect-failed "), line


def test_connection_limit(lab, broker):
    b = broker(max_connections=3)
    held = [b.connect() for _ in range(3)]
    time.sleep(0.3)
    s, line = b.ask("www.example.test")
    assert line.startswith("ERR limit "), line
    e = b.event()
    assert e["reason"] == "limit" and e["verdict"] == "refused"
    held.pop().close()
    time.sleep(0.3)
    s, line = b.ask("www.example.test")
    assert line.startswith("OK "), line
    s.close()
    for h in held:
        h.close()


def test_slow_client_times_out(lab, broker):
    b = broker()
    s = b.connect()
    t0 = time.monotonic()
    s.sendall(b"CONNECT www.exa")
    line = read_line(s)
    took = time.monotonic() - t0
    assert line.startswith("ERR timeout "), line
    assert 9 <= took <= 13, took
    assert b.event()["reason"] == "timeout"


def client_hello(name):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=name)
    with contextlib.suppress(ssl.SSLWantReadError):
        obj.do_handshake()
    return out.read()


def test_server_name_check(lab, broker):
    b = broker(check_server_name=True)
    before = closes(lab)
    hello = client_hello("WWW.example.test")
    s, line = b.ask("www.example.test")
    assert line.startswith("OK "), line
    assert echo(s, hello) == hello
    s.close()
    e = b.event()
    assert e["verdict"] == "allowed" and e["bytes_out"] == len(hello)

    http = b"GET / HTTP/1.1\r\nHost: v4.example.test:443\r\n\r\n"
    s, line = b.ask("v4.example.test", via="http")
    assert line.startswith("OK "), line
    assert echo(s, http) == http
    s.close()
    assert b.event()["verdict"] == "allowed"

    for payload, via in ((client_hello("evil.test"), "connect"),
                         (b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", "http"),
                         (b"GET http://evil.test/ HTTP/1.1\r\nHost: www.example.test\r\n\r\n", "http"),
                         (b"SSH-2.0-OpenSSH_9.2\r\n", "stream")):
        s, line = b.ask("www.example.test", via=via)
        assert line.startswith("OK "), line
        s.sendall(payload)
        with contextlib.suppress(ConnectionResetError):  # closed with the payload unread
            assert s.recv(100) == b"", payload
        s.close()
        e = b.event()
        assert e["verdict"] == "refused" and e["reason"] == "server-name-mismatch", e
        assert e["bytes_out"] == 0
    time.sleep(0.3)
    new = closes(lab)[len(before):]
    # Four refused ones reached the server but sent it nothing.
    assert sorted(int(c[3]) for c in new) == [0, 0, 0, 0, len(http), len(hello)]


def test_server_name_check_every_request(lab, broker):
    """Issue 41, item 9: with check_server_name, every request of a
    kept-alive or pipelined plain-HTTP connection must name the server
    asked for, not only the first: another Host closes the connection and
    the server never gets that request; a body is passed by its
    Content-Length; a chunked body, whose end cannot be found, is refused."""
    b = broker(check_server_name=True)
    before = closes(lab)
    one = b"POST /a HTTP/1.1\r\nHost: v4.example.test\r\nContent-Length: 5\r\n\r\nHost:"
    two = b"GET /b HTTP/1.1\r\nHost: V4.example.test:443\r\n\r\n"
    # Pipelined and kept alive, all for the name asked for: all pass.
    s, line = b.ask("v4.example.test", via="http")
    assert line.startswith("OK "), line
    assert echo(s, one + two) == one + two
    assert echo(s, two) == two
    s.close()
    e = b.event()
    assert e["verdict"] == "allowed" and e["bytes_out"] == len(one) + 2 * len(two), e
    # A second request for another host, pipelined or kept alive: closed
    # before any of it reaches the server.
    evil = b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"
    for pipelined in (True, False):
        s, line = b.ask("v4.example.test", via="http")
        assert line.startswith("OK "), line
        if pipelined:
            # Closed as soon as the broker sees it (the first request's
            # answer may be lost with it: the client asked for both).
            s.sendall(one + evil)
            with contextlib.suppress(ConnectionResetError):
                while s.recv(100):
                    pass
        else:
            assert echo(s, one) == one
            s.sendall(evil)
        with contextlib.suppress(ConnectionResetError):
            assert s.recv(100) == b""
        s.close()
        e = b.event()
        assert (e["verdict"], e["reason"]) == ("refused", "server-name-mismatch"), e
        assert "next request names the server evil.test" in e["message"], e
        assert e["bytes_out"] == len(one), e
    # A chunked body: refused at once, nothing sent.
    s, line = b.ask("v4.example.test", via="http")
    assert line.startswith("OK "), line
    s.sendall(b"POST / HTTP/1.1\r\nHost: v4.example.test\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"5\r\nHost:\r\n0\r\n\r\n" + evil)
    with contextlib.suppress(ConnectionResetError):
        assert s.recv(100) == b""
    s.close()
    e = b.event()
    assert (e["verdict"], e["reason"], e["bytes_out"]) == ("refused", "server-name-mismatch", 0), e
    time.sleep(0.3)
    new = closes(lab)[len(before):]
    # What reached the server: the allowed connection's three requests, the
    # first request of each refused one, nothing of the chunked one (or of
    # evil.test's requests).
    assert sorted(int(c[3]) for c in new) == sorted([0, len(one), len(one), len(one) + 2 * len(two)]), new


def test_server_reset_loses_nothing_it_sent(lab, broker):
    """A server that closes while its client still sends (the client's
    bytes unread: the kernel resets the connection), after sending
    everything: what it sent still reaches the client, though the client's
    next bytes find the server gone. (A git clone over SSH lost the end of
    its pack so: the broker ended the connection on the failed write
    towards the server, with the server's last bytes still in its pipe.)"""
    b = broker()
    n = 2_000_000
    s, line = b.ask("www.example.test")
    assert line.startswith("OK "), line
    s.sendall(b"blast %d\n" % n)
    got = len(s.recv(1))
    # Bytes the server will not read, then its close (a reset).
    s.sendall(b"y" * 1000)
    # Read slowly until the server is done: what it sent last waits in
    # the broker's queue and pipe and in the client's socket.
    deadline = time.monotonic() + 30
    while not any(c[3] == str(n) for c in closes(lab)) and time.monotonic() < deadline:
        got += len(s.recv(16384))
        time.sleep(0.01)
    assert any(c[3] == str(n) for c in closes(lab)), "the server did not finish"
    assert got < n - 100_000, "the client read too fast: nothing waited for it"
    time.sleep(0.2)
    # The client writes again, to a server that is gone; only then reads.
    with contextlib.suppress(OSError):
        s.sendall(b"z" * 1000)
    time.sleep(0.2)
    with contextlib.suppress(ConnectionResetError):
        while True:
            k = len(s.recv(1 << 16))
            if not k:
                break
            got += k
    s.close()
    assert got == n, (got, n)
    e = b.event()
    assert e["verdict"] == "allowed" and e["bytes_in"] == n, e


def test_events_dropped_and_log_bounded(lab, broker):
    b = broker()
    # Refusals without reading the events pipe (64 KiB) until it is full.
    for _ in range(400):
        s, line = b.ask("nothere.test")
        assert line.startswith("ERR name-not-listed")
        s.close()
    n = 0
    while True:
        r, _, _ = select.select([b.events_r], [], [], 0.2)
        if not r:
            break
        b.pending += os.read(b.events_r, 1 << 20)
    lines = b.pending.splitlines()
    n = len(lines)
    assert 0 < n < 400
    b.pending = b""
    # Each delivered event counts the ones lost since the one before it. A
    # short event can still fit in the pipe's last page after a longer one
    # was dropped, so the losses may be spread over several events: all of
    # them, with the next one's, account for every refusal not delivered.
    counted = sum(json.loads(x).get("dropped", 0) for x in lines)
    s, line = b.ask("nothere.test")
    e = b.event()
    assert counted + e.get("dropped", 0) == 400 - n
    s, line = b.ask("nothere.test")
    assert "dropped" not in b.event()
    # The log did not get a line per refusal.
    assert b.log().count("refused") < 60


def test_exits_when_events_reader_closes(lab, broker):
    b = broker()
    s, line = b.ask("www.example.test")
    assert line.startswith("OK ")
    os.close(b.events_r)
    assert b.proc.wait(timeout=10) == 0
    s.close()


def test_sigterm(lab, broker):
    b = broker()
    s, line = b.ask("www.example.test")
    assert line.startswith("OK ")
    b.proc.send_signal(signal.SIGTERM)
    assert b.proc.wait(timeout=10) == 0
    # The open connection ends, and is recorded.
    assert s.recv(10) == b""
    assert b.event()["verdict"] == "allowed"


@pytest.mark.parametrize("override,message", [
    ({"colour": "blue"}, 'unknown key "colour"'),
    ({"max_connections": 0}, '"max_connections" must be an integer'),
    ({"version": 2}, '"version" must be 1'),
    ({"rules": ["*.com"]}, '"rules"[0]'),
    ({"netpolicy": "nonsense"}, '"netpolicy"'),
    ({"resolvers": ["example.com"]}, '"resolvers"[0]'),
    ({"check_server_name": "yes"}, '"check_server_name"'),
])
def test_bad_configuration(lab, broker, override, message):
    b = broker(**override)
    assert b.proc.wait(timeout=10) == 2
    log = b.log()
    assert message in log, log
    assert len(log.strip().splitlines()) == 1, log


def test_serve_mode(lab):
    """--serve SOCKET --config FILE (kube's egress pod): the broker makes
    its socket and reads its file itself, answers as with descriptors
    (a listed name pumps, an unlisted one is refused), writes each decision
    to standard output, ends on SIGTERM with status 0 and removes the
    socket. Bad use is exit 2, one line naming it, nothing made."""
    d = tempfile.mkdtemp(prefix="lazaret-broker-serve-")
    try:
        cfg_path = os.path.join(d, "broker.json")
        with open(cfg_path, "w") as f:
            json.dump({"version": 1, "rules": [f"www.example.test:{lab.port}"], "netpolicy": POLICY,
                       "resolvers": [HOST4], "connect_timeout": 3}, f)
        sock = os.path.join(d, "sock")
        p = subprocess.Popen([lab.binary, "--serve", sock, "--config", cfg_path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(sock) and time.monotonic() < deadline:
                time.sleep(0.02)
            for host, want in (("www.example.test", "OK "), ("nope.example.test", "ERR name-not-listed")):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(20)
                s.connect(sock)
                s.sendall(f"CONNECT {host} {lab.port} connect\n".encode())
                assert read_line(s).startswith(want), host
                if want == "OK ":
                    assert echo(s, b"ping\n") == b"ping\n"
                s.close()
            got = b""
            while got.count(b"\n") < 2:
                r, _, _ = select.select([p.stdout], [], [], 10)
                assert r, f"no decision on standard output: {got!r}"
                chunk = os.read(p.stdout.fileno(), 65536)
                assert chunk, "standard output closed"
                got += chunk
            lines = [json.loads(x) for x in got.splitlines()]
            assert sorted((x["host"], x["verdict"]) for x in lines) == [("nope.example.test", "refused"),
                                                                       ("www.example.test", "allowed")], lines
        finally:
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=10)
        assert p.returncode == 0, err
        assert not os.path.exists(sock)
        assert "Sanitizer" not in err.decode() and "runtime error" not in err.decode(), err
        # Bad use: exit 2, one line, nothing made.
        plain = os.path.join(d, "plain")
        open(plain, "w").close()
        for args, why in (([ "--serve", "rel/sock", "--config", cfg_path], "the socket path must be absolute"),
                          (["--serve", plain, "--config", cfg_path], "exists and is not a socket"),
                          (["--serve", os.path.join(d, "s2")], "--serve SOCKET and --config FILE go together"),
                          (["--serve", os.path.join(d, "s2"), "--config", os.path.join(d, "none.json")],
                           "none.json: No such file or directory")):
            r = subprocess.run([lab.binary] + args, capture_output=True, text=True, timeout=10)
            assert r.returncode == 2 and why in r.stderr and r.stderr.count("\n") == 1, (args, r.stderr)
        assert sorted(os.listdir(d)) == ["broker.json", "plain"]
    finally:
        subprocess.run(["rm", "-rf", d], check=False)
