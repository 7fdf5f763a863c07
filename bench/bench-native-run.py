#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""lazaret run with the native backend (issue 21), measured side by side in
one run (alternating, so both see the same machine state):

  cold:  lazaret run --backend native -- true   vs  bwrap --unshare-all --die-with-parent --ro-bind / / true
         (the whole launch: leader, coordinator, store, workspace router, holder, join, teardown awaited
         after each; Debian's bubblewrap); and the same with address rules (a policy of 3 prefixes,
         as the starter's default_allow: netd's namespace, slirp4netns, the attestation and probes)
  warm:  lazaret run --backend native -- true   vs  podman exec CONTAINER true
         (a session joining a running native sandbox; a bare runc container of the busybox image)

As the test user, through runuser (its cost is in both sides alike). Prints
medians and ratios against the issue's budgets (cold at most 5x bwrap, issue 45; warm
at most 0.1x podman exec); exits 1 when a ratio is over its budget.

  sudo bench/bench-native-run.py [--user lazaret-test] [--rounds 15] [--build build]
"""
import shutil
import statistics
import subprocess
import sys
import time

from benchlib import Stage, parse_args

IMAGE = "localhost/lazaret/busybox:latest"
COLD_BUDGET, WARM_BUDGET = 5.0, 0.1


def main():
    args = parse_args(15)
    bwrap = shutil.which("bwrap")
    if not bwrap:
        sys.exit("bench-native-run: bwrap is missing (scripts/setup.sh installs bubblewrap)")
    st = Stage("bench-native-run", args.user, args.build)
    lz = st.lz
    cfg = st.config(IMAGE, extra='backend = "native"\n')
    rules = st.config(IMAGE, network='default_allow = ["0.0.0.0/0"]\ndefault_deny = ["10.0.0.0/8", "192.0.2.0/24"]\n',
                      extra='backend = "native"\n', name="rules.toml")
    run = st.run

    def timed(argv):
        t = time.perf_counter()
        run(argv)
        return time.perf_counter() - t

    def domain_gone(c=cfg):
        # Each cold run starts cold: the last one's coordinator has ended.
        deadline = time.time() + 30
        while time.time() < deadline:
            r = subprocess.run(["pgrep", "-u", st.pw.pw_name, "-f", f"lazaret-native .*{st.data}"],
                               capture_output=True)
            if r.returncode != 0 and ": not running" in run([lz, "--config", c, "status"], check=False).stdout:
                return
            time.sleep(0.02)
        sys.exit("bench-native-run: a native sandbox did not finish its teardown")

    lazaret = [lz, "--config", cfg, "run", "--tui=none", "--", "/bin/true"]
    lazaret_rules = [lz, "--config", rules, "run", "--tui=none", "--", "/bin/true"]
    base = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"]
    run([lz, "image", "build", "busybox"])
    exec_name = "lazaret-bench-native-exec"
    try:
        # Warm both paths once.
        run(lazaret)
        domain_gone()
        run(lazaret_rules)
        domain_gone(rules)
        run(base)
        cold_l, cold_b, cold_r = [], [], []
        for i in range(args.rounds):
            if i % 2:
                cold_b.append(timed(base))
            cold_l.append(timed(lazaret))
            domain_gone()
            cold_r.append(timed(lazaret_rules))
            domain_gone(rules)
            if not i % 2:
                cold_b.append(timed(base))

        holder = subprocess.Popen(st.cmd([lz, "--config", cfg, "run", "--tui=none", "--", "/bin/sleep", "1000"]),
                                  cwd=st.work, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        run(["podman", "run", "-d", "--rm", "--name", exec_name, "--runtime=runc", "--network=none", IMAGE,
             "/bin/sleep", "1000"])
        try:
            deadline = time.time() + 30
            while ": running" not in run([lz, "--config", cfg, "status"], check=False).stdout:
                if time.time() > deadline:
                    sys.exit("bench-native-run: the holding session did not start")
                time.sleep(0.05)
            run(["podman", "exec", exec_name, "/bin/true"])
            warm_l, warm_p = [], []
            for _ in range(args.rounds):
                warm_p.append(timed(["podman", "exec", exec_name, "/bin/true"]))
                warm_l.append(timed(lazaret))
        finally:
            run([lz, "--config", cfg, "stop"], check=False)
            holder.wait(timeout=60)
            run(["podman", "rm", "-f", "-t", "0", exec_name], check=False)
            domain_gone()
    finally:
        st.remove()

    med = {k: statistics.median(v) for k, v in
           (("cold_l", cold_l), ("cold_b", cold_b), ("cold_r", cold_r), ("warm_l", warm_l), ("warm_p", warm_p))}
    cold = med["cold_l"] / med["cold_b"]
    warm = med["warm_l"] / med["warm_p"]
    cold_rules = med["cold_r"] / med["cold_b"]
    print(f"bench-native-run ({args.rounds} rounds, medians, as {args.user} through runuser):")
    print(f"  cold  lazaret run --backend native -- true {med['cold_l'] * 1000:7.1f} ms   "
          f"bwrap --unshare-all ... true {med['cold_b'] * 1000:7.1f} ms   ratio {cold:.2f} (budget {COLD_BUDGET:.2f})")
    print(f"  cold  the same with address rules (3 prefixes) {med['cold_r'] * 1000:7.1f} ms   "
          f"bwrap {med['cold_b'] * 1000:7.1f} ms   ratio {cold_rules:.2f} (budget {COLD_BUDGET:.2f})")
    print(f"  warm  lazaret run --backend native -- true {med['warm_l'] * 1000:7.1f} ms   "
          f"podman exec (runc)          {med['warm_p'] * 1000:7.1f} ms   ratio {warm:.2f} (budget {WARM_BUDGET:.2f})")
    return 0 if cold <= COLD_BUDGET and cold_rules <= COLD_BUDGET and warm <= WARM_BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
