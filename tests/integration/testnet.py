# SPDX-License-Identifier: MIT
"""Test hosts in network namespaces that the tests make themselves, joined
by veth links: the only destinations other than loopback that a test may
send packets to."""
import itertools
import os
import subprocess
import sys

HELPERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers")
_count = itertools.count()


def sh(*cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


class NetLab:
    def __init__(self):
        self.tag = f"lzt{os.getpid() % 100000}x{next(_count)}"
        self.namespaces = []
        self.root_links = []
        self.procs = []

    def netns(self, suffix):
        name = f"{self.tag}{suffix}"
        sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")
        return name

    def path(self, ns):
        return f"/var/run/netns/{ns}"

    def veth(self, ns_a, addrs_a, ns_b, addrs_b):
        """A veth pair between ns_a and ns_b (None: the root namespace),
        with the given "ADDR/LEN" lists. Returns the two link names."""
        n = next(_count)
        a, b = f"{self.tag[:6]}a{n}", f"{self.tag[:6]}b{n}"
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        for link, ns, addrs in ((a, ns_a, addrs_a), (b, ns_b, addrs_b)):
            pre = ["ip"] if ns is None else ["ip", "-n", ns]
            if ns is None:
                self.root_links.append(link)
            else:
                sh("ip", "link", "set", link, "netns", ns)
            for addr in addrs:
                sh(*pre, "addr", "add", addr, "dev", link, *(["nodad"] if ":" in addr else []))
            sh(*pre, "link", "set", link, "up")
        return a, b

    def run_in(self, ns, *cmd, **kw):
        return subprocess.run(["nsenter", f"--net={self.path(ns)}", *cmd], capture_output=True, text=True,
                              timeout=kw.pop("timeout", 30), **kw)

    def host(self, ns, addr, port, dns=False, log=None, hold=None):
        """Start the test host's services at addr in ns; wait until ready."""
        cmd = ["nsenter", f"--net={self.path(ns)}", sys.executable, os.path.join(HELPERS, "testhost.py"), addr,
               str(port)]
        if dns:
            cmd.append("--dns")
        if log:
            cmd += ["--log", log]
        if hold:
            cmd += ["--hold", hold]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        line = p.stdout.readline()
        assert line.strip() == "ready", p.stderr.read()
        return p

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()
        for link in self.root_links:
            sh("ip", "link", "del", link, check=False)
        for ns in self.namespaces:
            sh("ip", "netns", "del", ns, check=False)
