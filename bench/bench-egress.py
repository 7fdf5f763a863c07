#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Egress by name against a permitted route, from the same sandbox, in the
same run (Debian image, rootless, gVisor's own network stack; bash's
/dev/tcp and $EPOCHREALTIME, so no process of its own is timed). The
profile allows the test host's address (a route through the sidecar) and
its name (through lazaret-relay and the broker):

  throughput: 1 GiB over HTTP, GET from ADDR:8080 directly (the route) vs
              GET http://NAME:8080/ through the relay's HTTP proxy (relay,
              broker), alternating rounds; target: the name at least 0.7x
              the route's throughput
  latency:    40 connections each way, from connect to the response's
              first byte, timed one by one inside the sandbox; the added
              median must stay at most 3 ms
  held:       200 connections held open at once through the relay
              (lazaret-relay --connect), the broker's resident memory
              before and while they are held

The test host is a network namespace of the bench's own (a veth link,
198.51.100.240/29): no packet leaves the machine.

  sudo bench/bench-egress.py [--user lazaret-test] [--rounds 3] [--build build]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import Stage, parse_args

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from testnet import HELPERS, NetLab, sh  # noqa: E402

IMAGE = "localhost/lazaret/debian:bookworm"
ROOT4, HOST4 = "198.51.100.241", "198.51.100.242"
NAME = "bulk.example.test"
SIZE = 1 << 30
HELD = 200


def sandbox_bash(st, cfg, script, timeout=900):
    r = st.run([st.lz, "--config", cfg, "run", "--", "/bin/bash", "-c", script], check=False, timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"bench-egress: the sandbox's script failed: {r.stdout}{r.stderr}")
    return r.stdout


# One HTTP GET over bash's /dev/tcp: $1 host, $2 port, $3 request target,
# $4 Host; prints the microseconds to the first byte and to the end.
GET = r"""get() {
  local s=${EPOCHREALTIME/./} f e
  exec 3<>/dev/tcp/$1/$2 || return 1
  printf 'GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$3" "$4" >&3
  IFS= read -r -n 1 -u 3 || return 1
  f=${EPOCHREALTIME/./}
  cat <&3 >/dev/null
  e=${EPOCHREALTIME/./}
  exec 3<&-
  echo "$((f - s)) $((e - s))"
}
"""


def rss_kib(pid):
    """Resident KiB of pid, or None once it is gone."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except FileNotFoundError:
        return None
    return None


def main():
    args = parse_args(3)
    st = Stage("bench-egress", args.user, args.build)
    lab = NetLab()
    web = tempfile.mkdtemp(prefix="lazaret-bench-egress-")
    try:
        with open(os.path.join(web, "big"), "wb") as f:
            f.truncate(SIZE)
        with open(os.path.join(web, "small"), "w") as f:
            f.write("x\n")
        h = lab.netns("b")
        lab.veth(None, [f"{ROOT4}/29"], h, [f"{HOST4}/29"])
        sh("ip", "-n", h, "route", "add", "default", "via", ROOT4)
        for cmd in ([os.path.join(HELPERS, "testdns.py"), HOST4, "53", json.dumps({NAME: {"A": [HOST4]}})],
                    [os.path.join(HELPERS, "testhttp.py"), HOST4, "8080", web],
                    [os.path.join(HELPERS, "testecho.py"), HOST4, "9443"]):
            p = subprocess.Popen(["nsenter", f"--net={lab.path(h)}", sys.executable] + cmd, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            lab.procs.append(p)
            if p.stdout.readline().strip() != "ready":
                sys.exit("bench-egress: a test host did not start: " + p.stderr.read())
        if st.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
            st.run([st.lz, "image", "build", "debian"], timeout=1500)
        cfg = st.config(IMAGE, network=f'default_allow = ["{HOST4}/32"]\ndefault_deny = []\nipv6 = "disabled"\n'
                                       f'resolvers = ["{HOST4}"]\n',
                        extra=f'allow_domains = ["{NAME}:8080", "{NAME}:9443"]\n')

        # Throughput, alternating.
        route, name = [], []
        for i in range(args.rounds):
            out = sandbox_bash(st, cfg, GET + f"get {HOST4} 8080 /big {HOST4}:8080")
            route.append(int(out.split()[1]) / 1e6)
            out = sandbox_bash(st, cfg, GET + f"get 127.0.0.1 3128 http://{NAME}:8080/big {NAME}:8080")
            name.append(int(out.split()[1]) / 1e6)
        mib = SIZE / (1 << 20)
        tr, tn = mib / statistics.median(route), mib / statistics.median(name)
        print(f"throughput: route {tr:.0f} MiB/s, name {tn:.0f} MiB/s, ratio {tn / tr:.2f}x (target >= 0.7x)")

        # Latency: connect to first byte, each request timed inside.
        loop = GET + "for i in $(seq 40); do get ARGS | cut -d' ' -f1; done"
        out_r = sandbox_bash(st, cfg, loop.replace("ARGS", f"{HOST4} 8080 /small {HOST4}:8080"))
        out_n = sandbox_bash(st, cfg, loop.replace("ARGS", f"127.0.0.1 3128 http://{NAME}:8080/small {NAME}:8080"))
        lr = statistics.median(int(x) for x in out_r.split()) / 1e3
        ln = statistics.median(int(x) for x in out_n.split()) / 1e3
        print(f"latency: route {lr:.2f} ms, name {ln:.2f} ms to the first byte (median of 40), added "
              f"{ln - lr:.2f} ms (target <= 3 ms)")

        # 200 connections held; the broker's memory.
        holder = subprocess.Popen(st.cmd([st.lz, "--config", cfg, "run", "--", "/bin/bash", "-c",
                                          f"for i in $(seq {HELD}); do (sleep 20 | /run/lazaret/relay --connect "
                                          f"{NAME} 9443 >/dev/null &); done; sleep 15; echo held"]),
                                  cwd=st.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        broker, idle, peak, conns = None, 0, 0, 0
        deadline = time.time() + 60
        while time.time() < deadline and holder.poll() is None:
            # The newest broker of the user: the holder's (the earlier
            # runs' end with their sandboxes).
            pids = subprocess.run(["pgrep", "-n", "-u", st.pw.pw_name, "-x", "lazaret-broker"],
                                  capture_output=True, text=True).stdout.split()
            if pids and int(pids[0]) != broker:
                broker, idle, peak = int(pids[0]), rss_kib(int(pids[0])) or 0, 0
            kib = rss_kib(broker) if broker else None
            if kib is not None:
                peak = max(peak, kib)
                ss = subprocess.run(["ss", "-Htn", "state", "established", "dst", f"{HOST4}:9443"],
                                    capture_output=True, text=True).stdout
                conns = max(conns, len(ss.splitlines()))
            time.sleep(0.2)
        out, err = holder.communicate(timeout=120)
        if "held" not in out:
            sys.exit(f"bench-egress: the held connections' run failed: {err}")
        print(f"held: {conns} connections at once through the broker (target {HELD}); broker memory "
              f"{idle} KiB when first seen, {peak} KiB at the most")
        over = tn / tr < 0.7 or ln - lr > 3.0 or conns < HELD
        if over:
            print("bench-egress: over budget")
        return 1 if over else 0
    finally:
        lab.close()
        subprocess.run(["rm", "-rf", web], check=False)
        st.remove()


if __name__ == "__main__":
    sys.exit(main())
