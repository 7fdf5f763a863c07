#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The round trip of an auto-approved escalation against the cheapest way
into the sandbox, in the same sandbox (Debian image, rootless):

  escalate:   inside a session, `/run/lazaret/escalate true` (mutual TLS 1.3,
              signature checks, posix_spawn of /usr/bin/true on the host,
              audit record), timed inside with bash's $EPOCHREALTIME
  runsc exec: from the host, `runsc exec <sandbox> /bin/true`, timed around
              the process

Alternating rounds; prints medians and the ratio. Target: below 1.0.

  sudo bench/bench-escalate.py [--user lazaret-test] [--rounds 15] [--build build]
"""
import json
import os
import statistics
import subprocess
import sys
import time

from benchlib import Stage, parse_args

IMAGE = "localhost/lazaret/debian:bookworm"


def main():
    args = parse_args(15)
    st = Stage("bench-escalate", args.user, args.build)
    sock = os.path.join(st.base, "sock")
    os.makedirs(sock, mode=0o700)
    os.chown(sock, st.pw.pw_uid, st.pw.pw_gid)
    cfg = st.config(IMAGE)
    text = open(cfg).read().replace("[escalation]\nenabled = false\n",
                                    '[escalation]\nenabled = true\nauto_approve = ["true"]\n')
    with open(cfg, "w") as f:
        f.write(text)
    holder = None
    try:
        if st.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
            st.run([st.lz, "image", "build", "debian"], timeout=1500)
        holder = subprocess.Popen(st.cmd([st.lz, "--config", cfg, "run", "--", "/bin/sleep", "100000"]),
                                  cwd=st.work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        sid = None
        while time.time() < deadline:
            r = st.run([st.lz, "--config", cfg, "status", "--json"], check=False)
            doc = json.loads(r.stdout or "{}")
            if doc.get("running") and doc.get("sessions"):
                sid = doc["sandbox"]["id"]
                break
            time.sleep(0.2)
        if not sid:
            sys.exit("bench-escalate: the sandbox did not start")
        root = f"/tmp/podman-run-{st.pw.pw_uid}/runsc"
        # bash's EPOCHREALTIME: no process of its own inside the timing
        # (a date(1) there would add a gVisor exec to what is measured).
        once = ('s=${EPOCHREALTIME/./}; /run/lazaret/escalate true || exit 1; e=${EPOCHREALTIME/./}; '
                'echo $(( e - s ))')
        # Warm both.
        st.run([st.lz, "--config", cfg, "run", "--", "/bin/bash", "-c", once])
        st.run(["runsc", f"--root={root}", "--ignore-cgroups", "exec", sid, "/bin/true"])
        esc, exe = [], []
        for _ in range(args.rounds):
            r = st.run([st.lz, "--config", cfg, "run", "--", "/bin/bash", "-c", once])
            esc.append(int(r.stdout.strip()) / 1000.0)
            t = time.perf_counter()
            st.run(["runsc", f"--root={root}", "--ignore-cgroups", "exec", sid, "/bin/true"])
            exe.append((time.perf_counter() - t) * 1000)
        e, x = statistics.median(esc), statistics.median(exe)
        print(f"bench-escalate ({args.rounds} rounds, medians, same sandbox):")
        print(f"  lazaret-escalate true (auto-approved, inside) {e:7.1f} ms   runsc exec true (host) {x:7.1f} ms   "
              f"ratio {e / x:.2f} (target below 1.0)")
        return 0 if e < x else 1
    finally:
        if holder:
            st.run([st.lz, "--config", cfg, "stop"], check=False)
            holder.wait(timeout=60)
        st.remove()


if __name__ == "__main__":
    sys.exit(main())
