# SPDX-License-Identifier: MIT
"""lazaret-netd on its own, in network namespaces the tests make: what it
installs is read back with iproute2 (an independent reader of the kernel's
tables) and compared with the policy's routes; its attestation is checked
field by field; a policy fd that is not a fully sealed memfd is refused with
nothing changed; updates replace the routes; the probe mode's verdicts
against a real test host (TCP and DNS)."""
import fcntl
import hashlib
import json
import os
import socket
import subprocess

import pytest

from conftest import BUILD
from testnet import NetLab, sh

NETD = os.path.join(BUILD, "src", "netd", "lazaret-netd")
TOOL = os.path.join(BUILD, "tests", "netpolicy-tool")
DOMAIN = b"lazaret/derived-network-policy/v1\n"
SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (make check runs as root)")


def compile_policy(lines):
    """Canonical form and routes from the compiler's line interface."""
    out = subprocess.run([TOOL], input="".join(l + "\n" for l in lines), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    canon = "".join(l[len("canonical "):] + "\n" for l in out if l.startswith("canonical "))
    routes = [tuple(l.split()[1:]) for l in out if l.startswith("route ")]
    return canon, routes


def sealed(text, seals=SEALS):
    fd = os.memfd_create("policy", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    os.write(fd, text.encode())
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


@pytest.fixture
def net():
    t = NetLab()
    try:
        t.sbx = t.netns("s")  # where netd runs
        t.gw = t.netns("g")   # its uplink's far end, a test host
        t.sbx_link, _ = t.veth(t.sbx, ["198.18.0.2/24", "2001:db8:5::2/64"], t.gw, ["198.18.0.1/24", "2001:db8:5::1/64"])
        sh("ip", "-n", t.sbx, "route", "add", "default", "via", "198.18.0.1")
        sh("ip", "-n", t.sbx, "-6", "route", "add", "default", "via", "2001:db8:5::1")
        yield t
    finally:
        t.close()


class Netd:
    def __init__(self, net, policy_fd, args=()):
        self.ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl.settimeout(10)

        def place_fds():
            # Via high numbers: either source may sit on 3 or 4 already.
            os.dup2(policy_fd, 100)
            os.dup2(theirs.fileno(), 101)
            os.dup2(100, 3)
            os.dup2(101, 4)

        self.proc = subprocess.Popen(["nsenter", f"--net={net.path(net.sbx)}", NETD, *args], close_fds=False,
                                     preexec_fn=place_fds, stderr=subprocess.PIPE, text=True)
        theirs.close()
        os.close(policy_fd)

    def recv(self):
        return json.loads(self.ctl.recv(65536).decode())

    def update(self, fd):
        socket.send_fds(self.ctl, [b"update"], [fd])
        os.close(fd)
        return self.recv()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.ctl.close()


def routes_of(net, family, table="main"):
    """A table as iproute2 reads it: {(dst, kind, gateway, onlink)}."""
    r = sh("ip", "-n", net.sbx, "-j", family, "route", "show", "table", table)
    out = set()
    for e in json.loads(r.stdout or "[]"):
        dst = e["dst"]
        if dst != "default" and "/" not in dst:
            dst += "/128" if ":" in dst else "/32"
        out.add((dst, e.get("type", "unicast"), e.get("gateway"), "onlink" in e.get("flags", [])))
    return out


def expected(routes, gw4="198.18.0.1", gw6="2001:db8:5::1"):
    out = set()
    for dst, kind in routes:
        if kind == "permit":
            out.add((dst, "unicast", gw6 if ":" in dst else gw4, True))
        else:
            out.add((dst, "prohibit", None, False))
    return out


STARTER = ["allow 0.0.0.0/0", "allow ::/0", "deny 10.0.0.0/8", "deny 169.254.0.0/16", "deny 127.0.0.0/8",
           "deny fe80::/10", "deny fd00:ec2::254/128", "deny fc00::/7", "allow 10.0.2.3/32"]


def test_installs_exactly_the_policy_and_attests(net):
    canon, routes = compile_policy(["ipv6 enabled", *STARTER])
    d = Netd(net, sealed(canon))
    try:
        a = d.recv()
        assert a["type"] == "attestation", a
        assert a["derived_policy_digest"] == hashlib.sha256(DOMAIN + canon.encode()).hexdigest()
        assert a["observation"] == {"policy_delivery": "SealedMemfd", "helper_ready": True,
                                    "observed_routes": len(routes), "routes_attested": True}
        st = os.stat(net.path(net.sbx))
        assert a["enforcement_namespace"] == {"device": st.st_dev, "inode": st.st_ino}
        got = routes_of(net, "-4") | routes_of(net, "-6")
        assert got == expected(routes)
        assert not any(dst in ("default", "0.0.0.0/0", "::/0") for dst, *_ in got)
        # The kernel's own verdicts, without sending a packet.
        r = sh("ip", "-n", net.sbx, "route", "get", "169.254.169.254", check=False)
        assert r.returncode != 0 and "Permission denied" in r.stderr
        r = sh("ip", "-n", net.sbx, "route", "get", "10.0.2.3")
        assert "via 198.18.0.1" in r.stdout
        r = sh("ip", "-n", net.sbx, "-6", "route", "get", "fd00:ec2::254", check=False)
        assert r.returncode != 0
        # Port 53 goes nowhere but to the resolvers (none here): rules that
        # match the port, a table without routes, then prohibit.
        rules = json.loads(sh("ip", "-n", net.sbx, "-j", "rule").stdout)
        ours = [(x["priority"], x.get("ipproto"), x.get("dport"), x.get("table", x.get("action"))) for x in rules
                if x["priority"] in (100, 101, 102, 103)]
        assert ours == [(100, "udp", 53, "53"), (101, "udp", 53, "prohibit"), (102, "tcp", 53, "53"),
                        (103, "tcp", 53, "prohibit")], rules
        r = sh("ip", "-n", net.sbx, "route", "get", "10.0.2.3", "ipproto", "udp", "dport", "53", check=False)
        assert r.returncode != 0 and "Permission denied" in r.stderr
        assert a["dns_rules"] == 8
    finally:
        d.stop()


@pytest.mark.parametrize("how", ["unsealed", "partly-sealed", "regular-file"])
def test_refuses_policy_that_is_not_a_sealed_memfd(net, how, tmp_path):
    canon, _ = compile_policy(["allow 0.0.0.0/0"])
    if how == "regular-file":
        p = tmp_path / "policy"
        p.write_text(canon)
        fd = os.open(p, os.O_RDONLY)
    else:
        fd = sealed(canon, 0 if how == "unsealed" else fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    before = routes_of(net, "-4")
    d = Netd(net, fd)
    try:
        e = d.recv()
        assert e["type"] == "error"
        want = "not in a memfd" if how == "regular-file" else "is not sealed"
        assert want in e["message"], e
        assert d.proc.wait(timeout=10) == 1
        assert routes_of(net, "-4") == before  # nothing changed
    finally:
        d.ctl.close()


def test_update_replaces_routes_and_attests_again(net):
    canon1, routes1 = compile_policy(["ipv6 enabled", *STARTER])
    canon2, routes2 = compile_policy(["ipv6 enabled", "allow 198.51.100.0/24", "allow 2001:db8:77::/48"])
    d = Netd(net, sealed(canon1))
    try:
        assert d.recv()["observation"]["routes_attested"]
        a = d.update(sealed(canon2))
        assert a["type"] == "attestation", a
        assert a["derived_policy_digest"] == hashlib.sha256(DOMAIN + canon2.encode()).hexdigest()
        assert a["observation"]["routes_attested"] is True
        # Switched at once: the new policy in a table of its own with a
        # prohibit catch-all, one rule in front of main, main empty.
        catch = {("default", "prohibit", None, False)}
        assert routes_of(net, "-4", "101") | routes_of(net, "-6", "101") == expected(routes2) | catch
        assert routes_of(net, "-4") == set() and routes_of(net, "-6") == set()

        def policy_rules():
            rules = json.loads(sh("ip", "-n", net.sbx, "-j", "rule").stdout)
            rules += json.loads(sh("ip", "-n", net.sbx, "-6", "-j", "rule").stdout)
            return sorted((x["priority"], x.get("table")) for x in rules if 900 <= x["priority"] <= 1000)

        assert policy_rules() == [(1000, "101"), (1000, "101")]
        r = sh("ip", "-n", net.sbx, "route", "get", "10.1.2.3", check=False)
        assert r.returncode != 0 and "Permission denied" in r.stderr  # the catch-all, not main
        # Back again: the other table, the first one gone.
        a = d.update(sealed(canon1))
        assert a["observation"]["routes_attested"] is True, a
        assert routes_of(net, "-4", "102") | routes_of(net, "-6", "102") == expected(routes1) | catch
        assert routes_of(net, "-4", "101") == set() and policy_rules() == [(1000, "102"), (1000, "102")]
        # An update without a sealed memfd is refused; the routes stay.
        e = d.update(sealed(canon2, 0))
        assert e["type"] == "error" and "not sealed" in e["message"]
        assert routes_of(net, "-4", "102") | routes_of(net, "-6", "102") == expected(routes1) | catch
    finally:
        d.stop()


def test_nothing_permitted_leaves_no_route(net):
    canon, routes = compile_policy(["ipv6 enabled"])
    assert routes == []
    d = Netd(net, sealed(canon))
    try:
        a = d.recv()
        assert a["observation"]["routes_attested"] is True and a["observation"]["observed_routes"] == 0
        assert routes_of(net, "-4") == set() and routes_of(net, "-6") == set()
    finally:
        d.stop()


def test_ipv6_disabled_is_checked(net):
    canon, routes = compile_policy(["ipv6 disabled", "allow 0.0.0.0/0"])
    # Not switched off in the namespace: the attestation says so.
    d = Netd(net, sealed(canon))
    try:
        a = d.recv()
        assert a["observation"]["routes_attested"] is False
        assert "IPv6 is disabled by the policy but on" in a["error"]
    finally:
        d.stop()
    sh("ip", "netns", "exec", net.sbx, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
    # The first netd took the default route away; a fresh namespace has one.
    sh("ip", "-n", net.sbx, "route", "replace", "default", "via", "198.18.0.1", "dev", net.sbx_link, "onlink")
    d = Netd(net, sealed(canon))
    try:
        a = d.recv()
        assert a["observation"]["routes_attested"] is True and a["ipv6_disabled"] is True
        assert routes_of(net, "-6") == set()
    finally:
        d.stop()


def test_dns_only_to_the_resolvers(net):
    canon, _ = compile_policy(["ipv6 disabled", "allow 198.18.0.0/24", "resolver 198.18.0.1"])
    sh("ip", "netns", "exec", net.sbx, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
    d = Netd(net, sealed(canon))
    try:
        a = d.recv()
        assert a["observation"]["routes_attested"] is True and a["dns_rules"] == 4, a
        t = sh("ip", "-n", net.sbx, "-j", "route", "show", "table", "53").stdout
        assert [(x["dst"], x["gateway"]) for x in json.loads(t)] == [("198.18.0.1", "198.18.0.1")]
        for proto in ("udp", "tcp"):
            ok = sh("ip", "-n", net.sbx, "route", "get", "198.18.0.1", "ipproto", proto, "dport", "53")
            assert "table 53" in ok.stdout, ok.stdout
            r = sh("ip", "-n", net.sbx, "route", "get", "198.18.0.9", "ipproto", proto, "dport", "53", check=False)
            assert r.returncode != 0 and "Permission denied" in r.stderr
            # Other ports of a permitted address are unaffected.
            r = sh("ip", "-n", net.sbx, "route", "get", "198.18.0.9", "ipproto", proto, "dport", "443")
            assert "via 198.18.0.1" in r.stdout
        r = net.run_in(net.sbx, NETD, "probe", "--dns-blocked", "198.18.0.9", "--dns-blocked", "198.18.0.1")
        obs = [json.loads(l) for l in r.stdout.splitlines()]
        assert [o["unreachable"] for o in obs] == [True, False], obs
        assert r.returncode == 1
    finally:
        d.stop()


def frame_to_port_53(src, dst, proto):
    """An Ethernet frame carrying a UDP or TCP packet (SYN) to dst port 53,
    as gVisor's own stack writes it to the device from a packet socket."""
    import struct
    if proto == "udp":
        l4 = struct.pack("!HHHH", 40000, 53, 12, 0) + b"lzrt"
        num = 17
    else:
        l4 = struct.pack("!HHIIBBHHH", 40000, 53, 1, 0, 0x50, 0x02, 8192, 0, 0)
        num = 6
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 1, 0, 64, num, 0, socket.inet_aton(src),
                     socket.inet_aton(dst))
    return b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00" + ip + l4


def test_dns_filter_on_the_uplinks_egress(net):
    """The DNS filter as nft(8) reads it back, and its effect on frames sent
    from a packet socket, which the route rules never see (gVisor's own
    stack): port 53 leaves only towards the resolvers."""
    canon, _ = compile_policy(["ipv6 enabled", "allow 198.18.0.0/24", "allow 2001:db8:5::/64",
                               "resolver 198.18.0.1", "resolver 2001:db8:5::1"])
    d = Netd(net, sealed(canon))
    try:
        a = d.recv()
        assert a["observation"]["routes_attested"] is True and a["dns_filter_rules"] == 4, a
        assert a["uplinks"] == {"ipv4": {"gateway": "198.18.0.1", "device": net.sbx_link},
                                "ipv6": {"gateway": "2001:db8:5::1", "device": net.sbx_link}}, a
        listed = sh("ip", "netns", "exec", net.sbx, "nft", "list", "ruleset").stdout
        assert [l.split()[:3] for l in listed.splitlines() if l.startswith(("table", "\tchain"))] == \
            [["table", "netdev", "lazaret"], ["chain", "egress0", "{"]], listed
        assert f'type filter hook egress device "{net.sbx_link}" priority filter; policy accept;' in listed, listed
        rules = [l.strip() for l in listed.splitlines() if "dport 53" in l]
        assert rules == ["udp dport 53 ip daddr != 198.18.0.1 drop", "tcp dport 53 ip daddr != 198.18.0.1 drop",
                         "udp dport 53 ip6 daddr != 2001:db8:5::1 drop",
                         "tcp dport 53 ip6 daddr != 2001:db8:5::1 drop"], listed
        # Frames from a packet socket: the ones to a permitted address that
        # is no resolver are dropped on the way out (the kernel answers the
        # send with ENOBUFS), the ones to the resolver leave.
        script = f"""
import socket, sys
sys.path.insert(0, {os.path.dirname(__file__)!r})
from test_netd import frame_to_port_53
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(({net.sbx_link!r}, 0))
for dst in ("198.18.0.9", "198.18.0.1"):
    for proto in ("udp", "tcp"):
        try:
            s.send(frame_to_port_53("198.18.0.2", dst, proto))
            print(dst, proto, "sent")
        except OSError as e:
            print(dst, proto, e.strerror)
"""
        r = net.run_in(net.sbx, "/usr/bin/python3", "-c", script)
        assert r.stdout.splitlines() == ["198.18.0.9 udp No buffer space available",
                                         "198.18.0.9 tcp No buffer space available",
                                         "198.18.0.1 udp sent", "198.18.0.1 tcp sent"], r.stdout + r.stderr
        # A new policy replaces the filter: another resolver.
        canon2, _ = compile_policy(["ipv6 enabled", "allow 198.18.0.0/24", "allow 2001:db8:5::/64",
                                    "resolver 198.18.0.9"])
        a = d.update(sealed(canon2))
        assert a["observation"]["routes_attested"] is True and a["dns_filter_rules"] == 4, a
        listed = sh("ip", "netns", "exec", net.sbx, "nft", "list", "table", "netdev", "lazaret").stdout
        rules = [l.strip() for l in listed.splitlines() if "dport 53" in l]
        assert rules == ["udp dport 53 ip daddr != 198.18.0.9 drop", "tcp dport 53 ip daddr != 198.18.0.9 drop",
                         "meta protocol ip6 udp dport 53 drop", "meta protocol ip6 tcp dport 53 drop"], listed
    finally:
        d.stop()


def test_probe_against_a_test_host(net):
    canon, _ = compile_policy(["ipv6 enabled", "allow 198.18.0.1/32", "allow 2001:db8:5::1/128",
                               "allow 198.51.100.0/24", "deny 198.51.100.128/25", "resolver 198.18.0.1",
                               "resolver 2001:db8:5::1"])
    log = os.path.join("/tmp", net.tag + ".log")
    net.host(net.gw, "198.18.0.1", 8080, dns=True, log=log)
    net.host(net.gw, "2001:db8:5::1", 8080, dns=True, log=log)
    d = Netd(net, sealed(canon))
    try:
        assert d.recv()["observation"]["routes_attested"]
        r = net.run_in(net.sbx, NETD, "probe", "--deny", "10.0.0.1", "--deny", "198.51.100.200",
                       "--deny", "2001:db8:99::1", "--route", "198.51.100.7", "--permit", "198.18.0.1:8080",
                       "--permit", "[2001:db8:5::1]:8080", "--dns", "198.18.0.1", "--dns", "2001:db8:5::1",
                       "--dns-name", "probe.test", "--timeout-ms", "3000")
        assert r.returncode == 0, r.stdout + r.stderr
        obs = [json.loads(l) for l in r.stdout.splitlines()]
        denied = {o["destination"]: o for o in obs if o["kind"] == "denied"}
        assert all(o["unreachable"] for o in denied.values()), denied
        assert denied["198.51.100.200"]["detail"] == "EACCES"  # a prohibit route
        assert denied["10.0.0.1"]["detail"] == "ENETUNREACH"  # no route at all
        perm = [o for o in obs if o["kind"] == "permitted"]
        assert len(perm) == 3 and all(o["reachable"] for o in perm), perm
        dns = {o["resolver"]: o for o in obs if o["kind"] == "dns"}
        assert dns["198.18.0.1"]["resolved_addresses"] == ["192.0.2.80"]
        assert dns["2001:db8:5::1"]["resolved_addresses"] == ["2001:db8::80"]

        # A resolver that answers "refused" is still reachable: answered.
        r = net.run_in(net.sbx, NETD, "probe", "--dns", "198.18.0.1", "--dns-name", "refused.test")
        o = json.loads(r.stdout)
        assert r.returncode == 0 and o["answered"] is True and o["rcode"] == 5, r.stdout

        # A permitted destination that does not answer, and a "denied" one
        # that has a route: both fail the probe, and the latter is found by
        # route lookup without a packet sent (the test host logs none).
        with open(log) as f:
            before = f.read()
        r = net.run_in(net.sbx, NETD, "probe", "--deny", "198.18.0.1", "--permit", "198.18.0.1:8081",
                       "--timeout-ms", "2000")
        assert r.returncode == 1
        obs = [json.loads(l) for l in r.stdout.splitlines()]
        assert obs[0] == {"kind": "denied", "destination": "198.18.0.1", "unreachable": False,
                          "detail": "a route leads there"}
        assert obs[1]["reachable"] is False
        with open(log) as f:
            assert f.read() == before
    finally:
        d.stop()
