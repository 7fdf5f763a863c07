#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""lazaret up (issue 22): how long 4 agents take to start together against
the slowest of them started alone, side by side in one run (alternating):

  up     lazaret up MANIFEST   (4 agents, each `sleep 600` in a sandbox of
         its own)
  alone  lazaret up MANIFEST-N (that agent alone), for each of the 4: the
         slowest one of each round counts

"Started" is what up itself reports: from its start (the checks of every
agent included) until every agent's session is open; `lazaret stop` then
ends them, untimed (an agent that ended at once would add its teardown to
the others' start). On the native backend (no image, nothing to pull) or,
with --backend gvisor, in the busybox image (`lazaret image build busybox`
first); as the test user through runuser; each round starts cold, on a
settled machine (every Domain torn down and its coordinator gone first).
Prints the medians, their ratio against the issue's budget (at most 1.5;
exits 1 over it), and the floor the machine puts under that ratio: the CPU
time the whole machine was busy while the 4 agents started (/proc/stat,
summed over the rounds), spread over its cores, against the single start.
Starts that need the processor all the time they take cannot overlap below
it.

  sudo bench/bench-up.py [--user lazaret-test] [--rounds 9] [--build build]
                         [--backend native|gvisor]
"""
import os
import re
import statistics
import subprocess
import sys
import time

from benchlib import Stage, parse_args

AGENTS = ("a1", "a2", "a3", "a4")
BUDGET = 1.5


def busy_ticks():
    """Clock ticks the whole machine spent busy (not idle, not waiting on
    a disk) since it booted."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


def main():
    args = parse_args(9, lambda ap: ap.add_argument("--backend", choices=("native", "gvisor"), default="native"))
    st = Stage("bench-up", args.user, args.build)
    lz = st.lz
    if args.backend == "native":
        cfg = st.config("localhost/lazaret/unused:1", extra='backend = "native"\n')
    else:
        cfg = st.config("localhost/lazaret/busybox:latest")
    busy = {"up": 0}

    def manifest(name, agents):
        path = os.path.join(st.work, name)
        with open(path, "w") as f:
            # An agent that runs on, as a real one does: the timed start
            # is the start alone, not an early one's end beside the others'.
            for a in agents:
                f.write(f'[agents.{a}]\nprofile = "bench"\ncommand = ["sleep", "600"]\n')
        os.chmod(path, 0o644)
        # The user's own file, its bytes trusted (lazaret trust --manifest).
        os.chown(path, st.pw.pw_uid, st.pw.pw_gid)
        st.run([lz, "trust", "--manifest", path, "--yes"])
        return path

    group = manifest("agents.toml", AGENTS)
    alone = [manifest(f"alone-{a}.toml", (a,)) for a in AGENTS]

    def started(path, kind=None):
        """lazaret up PATH until it says all started; then each agent's
        sandbox is stopped (untimed) and up ends with them."""
        names = [line[len("[agents."):-1] for line in open(path).read().splitlines() if line.startswith("[agents.")]
        c0 = busy_ticks()
        p = subprocess.Popen(st.cmd([lz, "--config", cfg, "up", path]), cwd=st.work, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        said = ""
        for line in p.stderr:
            said += line
            m = re.search(r"started in (\d+) ms", line)
            if m:
                break
        c1 = busy_ticks()
        for a in names:
            st.run([lz, "--config", cfg, "--agent", a, "stop"], check=False)
        said += p.stderr.read()
        p.wait()
        if not m:
            sys.exit(f"bench-up: up said no start time: {said}")
        if kind:
            busy[kind] += c1 - c0
        all_gone()
        return int(m.group(1)) / 1000

    def all_gone():
        deadline = time.time() + 30
        while time.time() < deadline:
            if all(": not running" in st.run([lz, "--config", cfg, "--agent", a, "status"], check=False).stdout
                   for a in AGENTS):
                # The coordinators' last steps (the store released) too:
                # the next start would wait for that lock.
                time.sleep(0.5)
                return
            time.sleep(0.02)
        sys.exit("bench-up: an agent's sandbox did not finish its teardown")

    try:
        started(group)  # each Domain made once
        t_up, t_alone = [], []
        for i in range(args.rounds):
            if i % 2:
                t_up.append(started(group, "up"))
            t_alone.append(max(started(p) for p in alone))
            if not i % 2:
                t_up.append(started(group, "up"))
    finally:
        for p in [group] + alone:
            st.run([lz, "trust", "--revoke", "--manifest", p], check=False)
        st.remove()
    m_up, m_alone = statistics.median(t_up), statistics.median(t_alone)
    ratio = m_up / m_alone
    cores = os.cpu_count()
    cpu_up = busy["up"] * 1000 / os.sysconf("SC_CLK_TCK") / args.rounds
    print(f"bench-up ({args.rounds} rounds, medians, as {args.user} through runuser, {args.backend} backend):")
    print(f"  4 agents started by lazaret up {m_up * 1000:7.1f} ms   the slowest alone {m_alone * 1000:7.1f} ms   "
          f"ratio {ratio:.2f} (budget {BUDGET:.2f})")
    print(f"  while the 4 started the machine was busy {cpu_up:.0f} ms of CPU (mean): on {cores} cores at best "
          f"{cpu_up / cores:.0f} ms, a floor of {cpu_up / cores / (m_alone * 1000):.2f} under the ratio")
    return 0 if ratio <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
