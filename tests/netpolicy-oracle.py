#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The network policy compiler against an independent oracle.

Python's ipaddress module computes, for generated policies, what the policy
means: which entry is an error, the canonical form and its digest, and the
longest-prefix verdict for addresses at and around every rule's edges and at
random. The C compiler (through tests/netpolicy-tool) must agree, and the
routes it compiles must give the same verdict under longest-prefix matching
(gateway route: reachable; prohibit route or no route: not), with no
default route and no two gateway routes overlapping. So must the routes
for the kernel's stack (one per rule, overlapping), which must not number
more than the rules and the two halves of a default.

usage: netpolicy-oracle.py TOOL [SEED]
"""

import hashlib
import ipaddress
import random
import subprocess
import sys

SCHEMA = "lazaret-derived-network-policy v1"
DOMAIN = b"lazaret/derived-network-policy/v1\n"

V4_ANCHORS = ["10.0.0.0", "10.1.2.3", "169.254.169.254", "198.51.100.7", "203.0.113.9", "0.0.0.0",
              "255.255.255.255", "128.0.0.1"]
V6_ANCHORS = ["2001:db8::1", "2001:db8:0:1::5", "fd00:ec2::254", "fe80::1", "2001:db8:ffff::", "4000::",
              "ffff:ffff::"]


def rand_net(rng, v6):
    base = ipaddress.ip_address(rng.choice(V6_ANCHORS if v6 else V4_ANCHORS))
    bits = 128 if v6 else 32
    # Mostly long prefixes near the anchors (nesting), sometimes short ones.
    plen = rng.choice([0, 1, 2, 4, 8, 9, 10, 16, 17, 24, 25, 31, 32] if not v6 else
                      [0, 1, 3, 7, 10, 16, 32, 33, 48, 64, 96, 120, 127, 128])
    plen = min(plen, bits)
    return ipaddress.ip_network((int(base) >> (bits - plen) << (bits - plen), plen) if plen else (0, 0),
                                strict=True) if not v6 else ipaddress.IPv6Network(
        (int(base) >> (bits - plen) << (bits - plen), plen))


def key(net):
    return (net.version, int(net.network_address), net.prefixlen)


def expected(ipv6, entries, resolvers):
    """Return ("error", index, kind) or ("ok", rules, defaults, resolvers)."""
    for i, (act, net) in enumerate(entries):
        if net.version == 6 and not ipv6:
            return ("error", i, "entry")
    byprefix = {}
    for i, (act, net) in enumerate(entries):
        byprefix.setdefault(key(net), []).append((i, act))
    for k in sorted(byprefix):
        lst = byprefix[k]  # in input order
        for (i0, a0), (i1, a1) in zip(lst, lst[1:]):
            if a0 != a1:
                return ("error", i1, "entry")
    defaults = {4: "deny", 6: "deny"}
    rules = {}
    for k, lst in byprefix.items():
        act = lst[0][1]
        if k[2] == 0:
            defaults[k[0]] = act
        else:
            rules[k] = act
    pol = ("ok", rules, defaults, None)
    for i, r in enumerate(resolvers):
        if r.version == 6 and not ipv6:
            return ("error", i, "resolver")
        if verdict(pol, ipv6, r) != "allow":
            return ("error", i, "resolver")
    res = sorted(set(resolvers), key=lambda a: (a.version, int(a)))
    return ("ok", rules, defaults, res)


def verdict(pol, ipv6, addr):
    _, rules, defaults, _ = pol
    if addr.version == 6 and not ipv6:
        return "deny"
    best, v = -1, defaults[addr.version]
    for (ver, net, plen), act in rules.items():
        if ver != addr.version or plen <= best:
            continue
        n = ipaddress.ip_network((net, plen)) if ver == 4 else ipaddress.IPv6Network((net, plen))
        if addr in n:
            best, v = plen, act
    return v


def route_verdict(routes, addr):
    best, v = -1, "deny"
    for net, kind in routes:
        if net.version == addr.version and net.prefixlen > best and addr in net:
            best, v = net.prefixlen, ("allow" if kind == "permit" else "deny")
    return v


def canonical(pol, ipv6):
    _, rules, defaults, res = pol
    out = [SCHEMA]
    out.append("family ipv4 enabled default " + defaults[4])
    out.append(("family ipv6 enabled default " + defaults[6]) if ipv6 else "family ipv6 disabled")
    for (ver, net, plen) in sorted(rules):
        n = ipaddress.ip_network((net, plen)) if ver == 4 else ipaddress.IPv6Network((net, plen))
        out.append("rule %s %s" % (n, rules[(ver, net, plen)]))
    for r in res:
        out.append("resolver %s" % r)
    return "\n".join(out) + "\n"


def run(tool, text, *args):
    p = subprocess.run([tool, *args], input=text, capture_output=True, text=True, timeout=60)
    # Under ASan a leak also exits 1: anything on stderr is a failure.
    if p.returncode not in (0, 1) or p.stderr:
        raise SystemExit("tool failed (%d): %s" % (p.returncode, p.stderr))
    return p.stdout


def queries(rng, entries, resolvers):
    qs = set(resolvers)
    for _, net in entries:
        lo, hi = int(net.network_address), int(net.broadcast_address)
        top = (1 << net.max_prefixlen) - 1
        cls = ipaddress.IPv4Address if net.version == 4 else ipaddress.IPv6Address
        for x in (lo, hi, lo - 1, hi + 1, (lo + hi) // 2):
            if 0 <= x <= top:
                qs.add(cls(x))
    for _ in range(20):
        qs.add(ipaddress.IPv4Address(rng.getrandbits(32)))
        qs.add(ipaddress.IPv6Address(rng.getrandbits(128)))
    # Avoid the IPv4-embedding IPv6 ranges, which inet_ntop and Python write differently.
    return [q for q in qs if not (q.version == 6 and (int(q) >> 32) in (0, 0xffff))]


def check_one(tool, rng, case):
    ipv6 = rng.random() < 0.8
    n = rng.choice([0, 1, 2, 5, 10, 30])
    entries = [(rng.choice(["allow", "deny"]), rand_net(rng, rng.random() < 0.4)) for _ in range(n)]
    if rng.random() < 0.3 and entries:  # a repeat, sometimes with the other action
        a, net = rng.choice(entries)
        entries.insert(rng.randrange(len(entries) + 1), (rng.choice(["allow", "deny"]), net))
    resolvers = [ipaddress.ip_address(rng.choice(V4_ANCHORS + V6_ANCHORS)) for _ in range(rng.choice([0, 0, 1, 2]))]
    resolvers = [r for r in resolvers if not (r.version == 6 and (int(r) >> 32) in (0, 0xffff))]
    qs = queries(rng, entries, resolvers)

    text = "ipv6 %s\n" % ("enabled" if ipv6 else "disabled")
    text += "".join("%s %s\n" % (a, net) for a, net in entries)
    text += "".join("resolver %s\n" % r for r in resolvers)
    text += "".join("query %s\n" % q for q in qs)
    out = run(tool, text, "kernel").splitlines()
    exp = expected(ipv6, entries, resolvers)
    where = "case %d:\n%s" % (case, text)

    if exp[0] == "error":
        want = "error %d %s " % (exp[1], exp[2])
        assert out and out[0].startswith(want), "%s\nwant %r, got %r" % (where, want, out[:1])
        return "error"
    assert out and out[0].startswith("digest "), "%s\nunexpected %r" % (where, out[:1])

    canon = canonical(exp, ipv6)
    got_canon = "".join(l[len("canonical "):] + "\n" for l in out if l.startswith("canonical "))
    assert got_canon == canon, "%s\ncanonical differs:\n%s\nvs oracle\n%s" % (where, got_canon, canon)
    digest = hashlib.sha256(DOMAIN + canon.encode()).hexdigest()
    assert out[0] == "digest " + digest, where
    assert "parse ok" in out, where

    routes = []
    for l in out:
        if l.startswith("route "):
            _, net, kind = l.split()
            routes.append((ipaddress.ip_network(net), kind))
    assert all(net.prefixlen > 0 for net, _ in routes), "%s\na default route" % where
    if not ipv6:
        assert all(net.version == 4 for net, _ in routes), "%s\nIPv6 routes while disabled" % where
    permits = sorted((n for n, k in routes if k == "permit"), key=lambda x: (x.version, int(x.network_address)))
    for a, b in zip(permits, permits[1:]):
        assert a.version != b.version or not a.overlaps(b), "%s\ngateway routes overlap: %s %s" % (where, a, b)
    prohibits = {n for n, k in routes if k == "prohibit"}
    assert not prohibits & set(permits), where

    kroutes = [(ipaddress.ip_network(l.split()[1]), l.split()[2]) for l in out if l.startswith("kroute ")]
    assert all(net.prefixlen > 0 for net, _ in kroutes), "%s\na default route (kernel)" % where
    if not ipv6:
        assert all(net.version == 4 for net, _ in kroutes), "%s\nIPv6 kernel routes while disabled" % where
    assert len(set(n for n, _ in kroutes)) == len(kroutes), "%s\na prefix routed twice (kernel)" % where
    halves = sum(2 for v in (4, 6) if exp[2][v] == "allow" and (v == 4 or ipv6))
    assert len(kroutes) <= len(exp[1]) + halves, "%s\n%d kernel routes for %d rules" % (where, len(kroutes),
                                                                                       len(exp[1]))

    got_verdicts = dict(l.split()[1:] for l in out if l.startswith("verdict "))
    for q in qs:
        want = verdict(exp, ipv6, q)
        assert got_verdicts[str(q)] == want, "%s\nverdict %s: C %s, oracle %s" % (where, q, got_verdicts[str(q)], want)
        assert route_verdict(routes, q) == want, "%s\nroutes give %s for %s, policy %s" % (
            where, route_verdict(routes, q), q, want)
        assert route_verdict(kroutes, q) == want, "%s\nkernel routes give %s for %s, policy %s" % (
            where, route_verdict(kroutes, q), q, want)
    for l in out:
        if l.startswith("probe "):
            _, net, addr = l.split()
            if addr != "none":
                a = ipaddress.ip_address(addr)
                assert a in ipaddress.ip_network(net) and verdict(exp, ipv6, a) == "deny", where
            else:
                # Every address of the rule is allowed by longer rules; check its edges.
                n = ipaddress.ip_network(net)
                assert verdict(exp, ipv6, n.network_address) == "allow", where

    # Parse must refuse anything but the exact canonical bytes.
    lines = canon.splitlines(keepends=True)
    bad = [canon + "\n", canon.replace("\n", " \n", 1), canon[:-1], canon.upper()]
    if len(lines) > 4:
        swapped = lines[:]
        swapped[3], swapped[4] = swapped[4], swapped[3]
        if swapped != lines:
            bad.append("".join(swapped))
    for b in bad:
        if b == canon:
            continue
        r = run(tool, b, "parse")
        assert r.startswith("error "), "%s\nparse accepted a non-canonical form:\n%r" % (where, b)
    return "ok"


def main():
    tool = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else random.SystemRandom().randrange(1 << 32)
    print("seed", seed)
    rng = random.Random(seed)
    counts = {"ok": 0, "error": 0}
    for case in range(400):
        counts[check_one(tool, rng, case)] += 1
    print("policies checked: %d valid, %d rejected" % (counts["ok"], counts["error"]))
    assert counts["ok"] > 100 and counts["error"] > 20, "generator lost its balance: %r" % counts


main()
