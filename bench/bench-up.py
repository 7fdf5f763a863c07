#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""lazaret up (issue 22): how long 4 agents take to start together against
the slowest of them started alone, side by side in one run (alternating):

  up     lazaret up MANIFEST   (4 agents, each `true` in a sandbox of its own)
  alone  lazaret up MANIFEST-N (that agent alone), for each of the 4: the
         slowest one of each round counts

"Started" is what up itself reports: from its start (the checks of every
agent included) until every agent's session is open. On the native backend
(no image, nothing to pull), as the test user through runuser; each round
starts cold (every Domain torn down first). Prints the medians and their
ratio against the issue's budget (at most 1.5); exits 1 over it.

  sudo bench/bench-up.py [--user lazaret-test] [--rounds 9] [--build build]
"""
import os
import re
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

    def manifest(name, agents):
        path = os.path.join(st.work, name)
        with open(path, "w") as f:
            for a in agents:
                f.write(f'[agents.{a}]\nprofile = "bench"\ncommand = ["true"]\n')
        os.chmod(path, 0o644)
        # The user's own file, its bytes trusted (lazaret trust --manifest).
        os.chown(path, st.pw.pw_uid, st.pw.pw_gid)
        st.run([lz, "trust", "--manifest", path, "--yes"])
        return path

    group = manifest("agents.toml", AGENTS)
    alone = [manifest(f"alone-{a}.toml", (a,)) for a in AGENTS]

    def started(path):
        r = st.run([lz, "--config", cfg, "up", path])
        m = re.search(r"started in (\d+) ms", r.stderr)
        if not m:
            sys.exit(f"bench-up: up said no start time: {r.stderr}")
        all_gone()
        return int(m.group(1)) / 1000

    def all_gone():
        deadline = time.time() + 30
        while time.time() < deadline:
            if all(": not running" in st.run([lz, "--config", cfg, "--agent", a, "status"], check=False).stdout
                   for a in AGENTS):
                return
            time.sleep(0.02)
        sys.exit("bench-up: an agent's sandbox did not finish its teardown")

    try:
        started(group)  # each Domain made once
        t_up, t_alone = [], []
        for i in range(args.rounds):
            if i % 2:
                t_up.append(started(group))
            t_alone.append(max(started(p) for p in alone))
            if not i % 2:
                t_up.append(started(group))
    finally:
        for p in [group] + alone:
            st.run([lz, "trust", "--revoke", "--manifest", p], check=False)
        st.remove()
    m_up, m_alone = statistics.median(t_up), statistics.median(t_alone)
    ratio = m_up / m_alone
    print(f"bench-up ({args.rounds} rounds, medians, as {args.user} through runuser, native backend):")
    print(f"  4 agents started by lazaret up {m_up * 1000:7.1f} ms   the slowest alone {m_alone * 1000:7.1f} ms   "
          f"ratio {ratio:.2f} (budget {BUDGET:.2f})")
    return 0 if ratio <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
