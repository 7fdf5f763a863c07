# SPDX-License-Identifier: MIT
"""lazaret-relay on the host, against a fake broker (a Unix socket server in
this process that speaks src/shared/broker-proto.h) and a loopback HTTP
server: curl through its HTTP port (absolute-form and CONNECT) and its
SOCKS5 port, --connect and --probe, and the refusals: SOCKS4, SOCKS5 BIND
and UDP ASSOCIATE, userinfo, a head over 8 KiB, a client too slow to finish
its request, and the broker's ERR answers mapped to HTTP statuses and SOCKS
replies with the reason named. Loopback only; no Podman, no test user."""
import contextlib
import http.server
import os
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import BUILD

RELAY = os.path.join(BUILD, "src", "relay", "lazaret-relay")
CURL_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}

# The fake broker's rules: host -> its answer; "web.test" and "echo.test"
# connect, the rest is refused the way the real broker would.
REFUSE = {
    "evil.test": "ERR name-not-listed evil.test is not listed",
    "rebind.test": "ERR address-denied rebind.test resolves to 10.0.0.1",
    "nxdomain.test": "ERR dns-failed no answer for nxdomain.test",
    "down.test": "ERR connect-failed connection refused",
    "busy.test": "ERR limit too many connections",
    "ctl.test": "ERR name-not-listed bad\x1b[31mred\x07",
    "192.0.2.9": "ERR ip-literal no CIDR rule permits 192.0.2.9",
}


BLAST = 8 << 20


class Web(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):
        Web.seen.append((self.requestline, dict(self.headers)))
        body = f"hello from {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class Broker(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path, web_port):
        self.web_port = web_port
        self.requests = []
        self.banner = b""
        self.blasted = threading.Event()
        super().__init__(path, BrokerHandler)


class BrokerHandler(socketserver.BaseRequestHandler):
    def handle(self):
        s, srv = self.request, self.server
        line = b""
        while not line.endswith(b"\n") and len(line) < 600:
            d = s.recv(1)
            if not d:
                return
            line += d
        parts = line.decode().split()
        srv.requests.append(parts)
        if len(parts) != 4 or parts[0] != "CONNECT":
            s.sendall(b"ERR bad-request malformed\n")
            return
        host = parts[1]
        if host in REFUSE:
            s.sendall(REFUSE[host].encode() + b"\n")
            return
        if host == "echo.test":
            s.sendall(b"OK 127.0.0.1 7\n" + srv.banner)
            try:
                while True:
                    d = s.recv(65536)
                    if not d:
                        break
                    s.sendall(d)
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            return
        if host == "blast.test":
            # The end of a server that closed while its client still
            # sent: BLAST bytes, then a close with the client's bytes
            # unread (a reset after the last byte).
            s.sendall(b"OK 127.0.0.1 7\n" + b"x" * BLAST)
            srv.blasted.set()
            return
        if host == "silent.test":
            time.sleep(40)
            return
        up = socket.create_connection(("127.0.0.1", srv.web_port))
        s.sendall(f"OK 127.0.0.1 {srv.web_port}\n".encode())
        t = threading.Thread(target=pump, args=(up, s), daemon=True)
        t.start()
        pump(s, up)
        t.join(10)
        up.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    def __init__(self):
        if not os.access(RELAY, os.X_OK):
            pytest.fail(f"{RELAY} is missing: build first", pytrace=False)
        self.dir = tempfile.mkdtemp(prefix="lazaret-relay-")
        self.sock = os.path.join(self.dir, "sock")
        self.web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Web)
        self.web_port = self.web.server_address[1]
        threading.Thread(target=self.web.serve_forever, daemon=True).start()
        self.broker = Broker(self.sock, self.web_port)
        threading.Thread(target=self.broker.serve_forever, daemon=True).start()
        self.http_port, self.socks_port = free_port(), free_port()
        self.proc = subprocess.Popen([RELAY, "--broker", self.sock, "--http-port", str(self.http_port),
                                      "--socks-port", str(self.socks_port)], stderr=subprocess.PIPE)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.socks_port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            self.close()
            pytest.fail("the relay does not listen")

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.broker.shutdown()
        self.broker.server_close()
        self.web.shutdown()
        self.web.server_close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def curl(self, *args):
        return subprocess.run(["curl", "-sS", "--max-time", "20", *args], capture_output=True, env=CURL_ENV,
                              timeout=30)

    def http_conn(self):
        return socket.create_connection(("127.0.0.1", self.http_port), timeout=20)

    def socks_conn(self):
        return socket.create_connection(("127.0.0.1", self.socks_port), timeout=20)

    def relay_cmd(self, *args, input=b"", sock=None):
        return subprocess.run([RELAY, "--broker", sock or self.sock, *args], input=input, capture_output=True,
                              timeout=30)


@pytest.fixture
def lab():
    Web.seen.clear()
    t = Lab()
    yield t
    t.close()
    assert t.proc.returncode is not None


def recv_all(s):
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            return out
        out += d


def http_exchange(lab, data):
    with lab.http_conn() as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        return recv_all(s)


def status_of(resp):
    head = resp.split(b"\r\n\r\n", 1)[0].decode()
    lines = head.split("\r\n")
    headers = dict(l.split(": ", 1) for l in lines[1:])
    return int(lines[0].split()[1]), headers, resp.split(b"\r\n\r\n", 1)[1]


def socks_connect(lab, req):
    s = lab.socks_conn()
    s.sendall(b"\x05\x01\x00")
    assert s.recv(2) == b"\x05\x00"
    s.sendall(req)
    return s


def socks_name(host, port):
    return b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode() + port.to_bytes(2, "big")


# ---- accepted ----

def test_curl_absolute_form(lab):
    r = lab.curl("-x", f"http://127.0.0.1:{lab.http_port}", f"http://web.test:{lab.web_port}/a/b?c=1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello from /a/b?c=1\n"
    assert lab.broker.requests[-1] == ["CONNECT", "web.test", str(lab.web_port), "http"]
    line, headers = Web.seen[-1]
    # The server sees origin-form, the Host the client meant, no proxy
    # headers, and a connection that ends with this request.
    assert line == "GET /a/b?c=1 HTTP/1.1"
    assert headers["Host"] == f"web.test:{lab.web_port}"
    assert "Proxy-Connection" not in headers
    assert headers["Connection"] == "close"


def test_curl_two_hosts_one_proxy_connection(lab):
    # curl reuses a proxy connection across hosts; each request must still
    # reach the broker with its own host.
    r = lab.curl("-x", f"http://127.0.0.1:{lab.http_port}", f"http://web.test:{lab.web_port}/1",
                 f"http://evil.test:{lab.web_port}/2")
    assert r.stdout.startswith(b"hello from /1\n")
    assert b"name-not-listed" in r.stdout
    assert [q[1] for q in lab.broker.requests] == ["web.test", "evil.test"]


def test_curl_connect(lab):
    r = lab.curl("-p", "-x", f"http://127.0.0.1:{lab.http_port}", f"http://web.test:{lab.web_port}/t")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello from /t\n"
    assert lab.broker.requests[-1] == ["CONNECT", "web.test", str(lab.web_port), "connect"]


def test_curl_socks5_hostname(lab):
    r = lab.curl("--socks5-hostname", f"127.0.0.1:{lab.socks_port}", f"http://web.test:{lab.web_port}/s")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello from /s\n"
    assert lab.broker.requests[-1] == ["CONNECT", "web.test", str(lab.web_port), "socks"]


def test_socks5_ip_literal_goes_to_broker(lab):
    s = socks_connect(lab, b"\x05\x01\x00\x01\xc0\x00\x02\x09\x01\xbb")
    rep = s.recv(10)
    s.close()
    assert rep[:2] == b"\x05\x02"
    assert lab.broker.requests[-1] == ["CONNECT", "192.0.2.9", "443", "socks"]


def test_connect_early_bytes_and_half_close(lab):
    lab.broker.banner = b"SSH-2.0-fake\r\n"
    with lab.http_conn() as s:
        # The head and the first payload in one packet; the broker sends a
        # banner right after its OK line.
        s.sendall(b"CONNECT echo.test:22 HTTP/1.1\r\nHost: echo.test:22\r\n\r\nfirst;")
        time.sleep(0.2)
        s.sendall(b"second")
        s.shutdown(socket.SHUT_WR)
        out = recv_all(s)
    assert out == b"HTTP/1.1 200 Connection established\r\n\r\nSSH-2.0-fake\r\nfirst;second"


def test_large_transfer_both_ways(lab):
    data = os.urandom(8 << 20)
    s = socks_connect(lab, socks_name("echo.test", 7))
    assert s.recv(10) == b"\x05\x00\x00\x01" + bytes(6)

    def send():
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=send)
    t.start()
    got = recv_all(s)
    t.join()
    s.close()
    assert len(got) == len(data) and got == data


def read_after_reset(lab, s, got):
    """Read slowly until the broker has sent everything and closed, write
    to it again (it is gone), then read the rest: the relay lost nothing
    the broker sent."""
    while not lab.broker.blasted.is_set():
        got += len(s.recv(16384))
        time.sleep(0.005)
    assert got < BLAST - 100_000, "read too fast: nothing waited in the relay"
    time.sleep(0.2)
    with contextlib.suppress(OSError):
        s.sendall(b"z" * 100000)
    time.sleep(0.2)
    with contextlib.suppress(ConnectionResetError):  # after the last byte
        while d := s.recv(65536):
            got += len(d)
    return got


def test_broker_reset_loses_nothing_it_sent(lab):
    s = socks_connect(lab, socks_name("blast.test", 7))
    assert s.recv(10) == b"\x05\x00\x00\x01" + bytes(6)
    s.sendall(b"y" * 1000)  # unread by the broker: its close is a reset
    assert read_after_reset(lab, s, 0) == BLAST
    s.close()


def test_connect_mode_broker_reset_loses_nothing_it_sent(lab):
    a, b = socket.socketpair()
    p = subprocess.Popen([RELAY, "--broker", lab.sock, "--connect", "blast.test", "7"], stdin=b.fileno(),
                         stdout=b.fileno(), stderr=subprocess.PIPE)
    b.close()
    a.settimeout(20)
    try:
        a.sendall(b"y" * 1000)
        assert read_after_reset(lab, a, 0) == BLAST
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        a.close()


def test_connect_mode(lab):
    r = lab.relay_cmd("--connect", "echo.test", "22", input=b"ping\n" * 1000)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"ping\n" * 1000
    assert lab.broker.requests[-1] == ["CONNECT", "echo.test", "22", "stream"]
    r = lab.relay_cmd("--connect", "evil.test", "22")
    assert r.returncode == 1
    assert r.stderr == b"lazaret-relay: refused: name-not-listed evil.test is not listed\n"
    r = lab.relay_cmd("--connect", "[2001:db8::1]", "22")
    assert lab.broker.requests[-1] == ["CONNECT", "2001:db8::1", "22", "stream"]
    r = lab.relay_cmd("--connect", "a b", "22")
    assert r.returncode == 2 and b"bad host" in r.stderr


def test_probe_mode(lab):
    r = lab.relay_cmd("--probe", "web.test", "443")
    assert (r.returncode, r.stdout) == (0, f"ok 127.0.0.1 {lab.web_port}\n".encode())
    r = lab.relay_cmd("--probe", "evil.test", "443")
    assert (r.returncode, r.stdout) == (3, b"refused name-not-listed evil.test is not listed\n")
    # Control bytes from the broker are escaped, never printed raw.
    r = lab.relay_cmd("--probe", "ctl.test", "443")
    assert (r.returncode, r.stdout) == (3, b"refused name-not-listed bad\\x1b[31mred\\x07\n")
    r = lab.relay_cmd("--probe", "web.test", "443", sock=os.path.join(lab.dir, "nothing"))
    assert r.returncode == 1 and r.stdout.startswith(b"error cannot connect to the broker")


# ---- refused here ----

def test_socks4_refused(lab):
    with lab.socks_conn() as s:
        s.sendall(b"\x04\x01\x00\x50\x7f\x00\x00\x01user\x00")
        assert recv_all(s) == b"\x00\x5b" + bytes(6)
    assert lab.broker.requests == []


@pytest.mark.parametrize("cmd", [2, 3], ids=["bind", "udp-associate"])
def test_socks5_bind_udp_refused(lab, cmd):
    s = socks_connect(lab, bytes([5, cmd, 0, 1, 127, 0, 0, 1, 0, 80]))
    assert recv_all(s) == b"\x05\x07\x00\x01" + bytes(6)
    s.close()
    assert lab.broker.requests == []


def test_socks5_pipelined(lab):
    # Greeting and request in one packet: the method reply still comes
    # first, then the request's reply.
    with lab.socks_conn() as s:
        s.sendall(b"\x05\x01\x00" + bytes([5, 2, 0, 1, 127, 0, 0, 1, 0, 80]))
        assert recv_all(s) == b"\x05\x00" + b"\x05\x07\x00\x01" + bytes(6)
    with lab.socks_conn() as s:
        s.sendall(b"\x05\x01\x00" + socks_name("echo.test", 7) + b"hello")
        s.shutdown(socket.SHUT_WR)
        assert recv_all(s) == b"\x05\x00" + b"\x05\x00\x00\x01" + bytes(6) + b"hello"


def test_socks5_auth_only_refused(lab):
    with lab.socks_conn() as s:
        s.sendall(b"\x05\x01\x02")
        assert recv_all(s) == b"\x05\xff"


def test_userinfo_refused(lab):
    st, h, body = status_of(http_exchange(lab, b"CONNECT user:pw@web.test:443 HTTP/1.1\r\n\r\n"))
    assert st == 400 and h["X-Lazaret-Refused"] == "bad-request" and b"userinfo" in body
    r = lab.curl("-x", f"http://127.0.0.1:{lab.http_port}", f"http://u:p@web.test:{lab.web_port}/")
    # curl moves userinfo into an Authorization header; the request line is clean.
    assert r.returncode == 0
    assert lab.broker.requests[-1][1] == "web.test"
    assert len(lab.broker.requests) == 1


def test_header_over_8k_refused(lab):
    big = b"GET http://web.test/ HTTP/1.1\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n"
    st, h, body = status_of(http_exchange(lab, big))
    assert st == 431 and b"header over 8 KiB" in body
    r = lab.curl("-x", f"http://127.0.0.1:{lab.http_port}", "-H", "X-Big: " + "a" * 9000, "-o", "/dev/null",
                 "-w", "%{http_code}", f"http://web.test:{lab.web_port}/")
    assert r.stdout == b"431"
    assert lab.broker.requests == []


def test_origin_form_and_https_absolute_refused(lab):
    st, _, body = status_of(http_exchange(lab, b"GET / HTTP/1.1\r\nHost: web.test\r\n\r\n"))
    assert st == 405 and b"not a proxy request" in body
    st, _, body = status_of(http_exchange(lab, b"GET https://web.test/ HTTP/1.1\r\n\r\n"))
    assert st == 400 and b"use CONNECT" in body
    st, _, body = status_of(http_exchange(lab, b"CONNECT we%00b.test:443 HTTP/1.1\r\n\r\n"))
    assert st == 400 and b"not a letter, digit, hyphen or dot" in body
    assert lab.broker.requests == []


def test_slow_client_dropped(lab):
    with lab.http_conn() as s, lab.socks_conn() as k:
        s.sendall(b"CONNECT web.test:443 HTTP/1.1\r\nHost: web")
        k.sendall(b"\x05\x01")
        t0 = time.monotonic()
        s.settimeout(30)
        k.settimeout(30)
        out = recv_all(s)
        took = time.monotonic() - t0
        assert recv_all(k) == b""
    assert 9 <= took <= 15, took
    st, h, _ = status_of(out)
    assert st == 408 and h["X-Lazaret-Refused"] == "timeout"
    assert lab.broker.requests == []


# ---- refused by the broker ----

@pytest.mark.parametrize("host,status,code", [
    ("evil.test", 403, "name-not-listed"),
    ("rebind.test", 403, "address-denied"),
    ("nxdomain.test", 502, "dns-failed"),
    ("down.test", 502, "connect-failed"),
    ("busy.test", 503, "limit"),
])
def test_broker_err_mapped(lab, host, status, code):
    r = lab.curl("-x", f"http://127.0.0.1:{lab.http_port}", "-D", "-", f"http://{host}/")
    st, h, body = status_of(r.stdout)
    assert st == status
    assert h["X-Lazaret-Refused"] == code
    assert body.startswith(f"lazaret-relay: refused ({code}): ".encode())
    assert REFUSE[host].split(" ", 2)[2].encode() in body
    r = lab.curl("-p", "-x", f"http://127.0.0.1:{lab.http_port}", f"http://{host}:443/")
    assert r.returncode != 0 and f"{status}".encode() in r.stderr
    s = socks_connect(lab, socks_name(host, 443))
    rep = {"name-not-listed": 2, "address-denied": 2, "dns-failed": 4, "connect-failed": 5, "limit": 1}[code]
    assert recv_all(s) == bytes([5, rep, 0, 1]) + bytes(6)
    s.close()


def test_broker_message_escaped(lab):
    st, h, body = status_of(http_exchange(lab, b"CONNECT ctl.test:443 HTTP/1.1\r\n\r\n"))
    assert st == 403
    assert body == b"lazaret-relay: refused (name-not-listed): bad\\x1b[31mred\\x07\n"
    assert int(h["Content-Length"]) == len(body)


def test_broker_unreachable(lab):
    os.unlink(lab.sock)
    st, h, body = status_of(http_exchange(lab, b"CONNECT web.test:443 HTTP/1.1\r\n\r\n"))
    assert st == 502 and h["X-Lazaret-Refused"] == "broker-unreachable"
    s = socks_connect(lab, socks_name("web.test", 443))
    assert recv_all(s) == b"\x05\x01\x00\x01" + bytes(6)
    s.close()


def test_relay_survives_and_closes_fds(lab):
    # Many clients on every path, then the relay's descriptors are back to
    # the listening ones.
    fds_before = len(os.listdir(f"/proc/{lab.proc.pid}/fd"))
    for i in range(30):
        http_exchange(lab, b"CONNECT evil.test:443 HTTP/1.1\r\n\r\n")
        http_exchange(lab, b"CONNECT echo.test:443 HTTP/1.1\r\n\r\n")
        with lab.http_conn() as s:
            s.sendall(b"CONNECT web.test:443 HTTP/1.1\r\n")  # and hang up
        with lab.socks_conn() as s:
            s.sendall(b"\x04")
    time.sleep(0.5)
    assert lab.proc.poll() is None
    # No more than before: a connection of the test before may still have
    # been open when they were counted.
    assert len(os.listdir(f"/proc/{lab.proc.pid}/fd")) <= fds_before


# ---- lazaret-init --relay ----

def test_init_restarts_relay_and_stops_it(tmp_path):
    init = os.path.join(BUILD, "src", "lazaret", "lazaret-init")
    log = tmp_path / "starts"
    pidf = tmp_path / "pid"
    # A relay that dies at once for its first two starts, then stays.
    fake = tmp_path / "relay"
    fake.write_text(f"""#!/bin/sh
echo "$# $(date +%s.%N)" >> {log}
[ "$(wc -l < {log})" -lt 3 ] && exit 1
echo $$ > {pidf}
exec sleep 60
""")
    fake.chmod(0o755)
    p = subprocess.Popen([init, "--relay", str(fake)])
    try:
        for _ in range(100):
            if pidf.exists() and pidf.read_text().strip():
                break
            time.sleep(0.1)
        starts = [l.split() for l in log.read_text().splitlines()]
        assert len(starts) == 3
        assert all(s[0] == "0" for s in starts)  # no arguments
        times = [float(s[1]) for s in starts]
        # At most once a second.
        assert times[1] - times[0] >= 0.9 and times[2] - times[1] >= 0.9
        relay_pid = int(pidf.read_text())
        os.kill(relay_pid, 0)
        p.send_signal(15)
        assert p.wait(10) == 0
        for _ in range(50):
            try:
                os.kill(relay_pid, 0)
            except ProcessLookupError:
                break
            # A zombie until its parent (gone) is reaped by our init.
            with open(f"/proc/{relay_pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    break
            time.sleep(0.1)
        else:
            pytest.fail("the relay outlived init's SIGTERM")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_init_without_flag_unchanged():
    init = os.path.join(BUILD, "src", "lazaret", "lazaret-init")
    r = subprocess.run([init, "extra"], capture_output=True, timeout=10)
    assert r.returncode == 2
    p = subprocess.Popen([init])
    time.sleep(0.3)
    assert p.poll() is None
    p.send_signal(2)
    assert p.wait(10) == 0
