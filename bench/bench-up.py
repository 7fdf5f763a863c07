#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""lazaret up (issue 22): starting 4 agents at once against starting the
slowest of them alone, measured side by side in one run (alternating):

  up     lazaret up MANIFEST   (4 agents, each `true` in a sandbox of its own)
  alone  lazaret --agent aN run -- true, for each of the 4 (the slowest one
         of each round counts)

On the native backend (no image, nothing to pull), as the test user through
runuser; each round starts cold (every Domain torn down first). Prints the
medians and their ratio against the issue's budget (at most 1.5); exits 1
over it.

  sudo bench/bench-up.py [--user lazaret-test] [--rounds 9] [--build build]
"""
import os
import statistics
import sys
import time

from benchlib import Stage, parse_args

AGENTS = ("a1", "a2", "a3", "a4")
BUDGET = 1.5


def main():
    args = parse_args(9)
    st = Stage("bench-up", args.user, args.build)
    lz = st.lz
    cfg = st.config("localhost/lazaret/unused:1", extra='backend = "native"\n')
    manifest = os.path.join(st.work, "agents.toml")
    with open(manifest, "w") as f:
        for a in AGENTS:
            f.write(f'[agents.{a}]\nprofile = "bench"\ncommand = ["true"]\n')
    os.chmod(manifest, 0o644)

    def timed(argv):
        t = time.perf_counter()
        st.run(argv)
        return time.perf_counter() - t

    def all_gone():
        deadline = time.time() + 30
        while time.time() < deadline:
            if all(": not running" in st.run([lz, "--config", cfg, "--agent", a, "status"], check=False).stdout
                   for a in AGENTS):
                return
            time.sleep(0.02)
        sys.exit("bench-up: an agent's sandbox did not finish its teardown")

    up = [lz, "--config", cfg, "up", manifest]
    alone = [[lz, "--config", cfg, "--agent", a, "run", "--tui=none", "bench", "--", "true"] for a in AGENTS]
    try:
        st.run(up)  # each Domain made once
        all_gone()
        t_up, t_alone = [], []
        for i in range(args.rounds):
            if i % 2:
                t_up.append(timed(up))
                all_gone()
            slowest = 0.0
            for a in alone:
                slowest = max(slowest, timed(a))
                all_gone()
            t_alone.append(slowest)
            if not i % 2:
                t_up.append(timed(up))
                all_gone()
    finally:
        st.remove()
    m_up, m_alone = statistics.median(t_up), statistics.median(t_alone)
    ratio = m_up / m_alone
    print(f"bench-up ({args.rounds} rounds, medians, as {args.user} through runuser, native backend):")
    print(f"  lazaret up (4 agents) {m_up * 1000:7.1f} ms   the slowest agent alone {m_alone * 1000:7.1f} ms   "
          f"ratio {ratio:.2f} (budget {BUDGET:.2f})")
    return 0 if ratio <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
