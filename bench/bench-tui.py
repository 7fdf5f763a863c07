#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Terminal throughput with the status line on and off (issue 20): two
terminals (tmux panes, 200x50, TERM=screen), each running a shell in the
same sandbox, one through the status line's emulator (--tui=status) and one
with the filter alone (--tui=none). In each, alternating, a 100 MB cat of
text lines to the terminal; the time is taken inside the sandbox from the
cat's start to its end (the PTY is only drained as fast as the terminal
layer and tmux take it, so that is the layer's throughput).

Prints medians and the ratio of throughputs (on / off); exits 1 when the
status line's is below 0.9 of the other's.

  sudo bench/bench-tui.py [--user lazaret-test] [--rounds 5] [--build build]
"""
import os
import shlex
import statistics
import subprocess
import sys
import time

from benchlib import Stage, parse_args

BUSYBOX = "localhost/lazaret/busybox:latest"
SIZE = 100 * 1000 * 1000
LINE = "lazaret bench-tui: a line of what an agent prints, 0123456789 abcdefghijklmnopqrstuvwxyz"


class Pane:
    def __init__(self, sock, argv, cwd):
        self.sock = sock
        inner = shlex.join(argv) + "; sleep 3600"
        subprocess.run(["tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "50",
                        "-c", cwd, "sh", "-c", inner], check=True)

    def type(self, text):
        subprocess.run(["tmux", "-S", self.sock, "send-keys", "-t", "0", "-l", text], check=True)

    def screen(self):
        return subprocess.run(["tmux", "-S", self.sock, "capture-pane", "-p", "-t", "0"], capture_output=True,
                              text=True).stdout

    def wait(self, marker, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.screen()
            for line in s.split("\n"):
                if line.startswith(marker):
                    return line
            time.sleep(0.2)
        sys.exit(f"bench-tui: {marker!r} never showed:\n{self.screen()}")

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


def main():
    args = parse_args(5)
    st = Stage("bench-tui", args.user, args.build)
    panes = {}
    try:
        cfg = st.config(BUSYBOX)
        st.run([st.lz, "image", "build", "busybox"], timeout=600)
        env = ["TERM=screen"]
        for side in ("on", "off"):
            argv = st.cmd([st.lz, "--config", cfg, "run", f"--tui={'status' if side == 'on' else 'none'}", "--",
                           "/bin/sh"], env)
            panes[side] = Pane(os.path.join(st.base, f"tmux-{side}"), argv, st.work)
            panes[side].type("echo UP$((1+1))\n")
            panes[side].wait("UP2")
        on = panes["on"]
        on.type(f"yes '{LINE}' | head -c {SIZE} > /tmp/big; echo MADE$((1+1))\n")
        on.wait("MADE2")
        times = {"on": [], "off": []}
        for i in range(args.rounds):
            for side in (("on", "off") if i % 2 == 0 else ("off", "on")):
                p = panes[side]
                p.type("clear\n")
                time.sleep(0.5)
                # /proc/uptime: a hundredth of a second is enough here.
                p.type(f"read s x < /proc/uptime; cat /tmp/big; read e x < /proc/uptime; echo; echo T{i}=$s,$e\n")
                line = p.wait(f"T{i}=")
                s, e = line.split("=")[1].split()[0].split(",")
                times[side].append(float(e) - float(s))
        med = {s: statistics.median(v) for s, v in times.items()}
        mb = SIZE / 1e6
        ratio = med["off"] / med["on"]
        print(f"bench-tui ({args.rounds} rounds, medians, a {mb:.0f} MB cat to a 200x50 tmux pane):")
        for s in ("on", "off"):
            print(f"  status line {s:3}: {med[s]:.2f} s  ({mb / med[s]:.0f} MB/s)  rounds: "
                  + " ".join(f"{x:.2f}" for x in times[s]))
        print(f"  throughput, on / off: {ratio:.2f} (budget: at least 0.90)")
        for p in panes.values():
            p.type("exit\n")
        return 0 if ratio >= 0.9 else 1
    finally:
        for p in panes.values():
            p.close()
        deadline = time.time() + 60
        while time.time() < deadline and subprocess.run(["pgrep", "-u", st.pw.pw_name, "-f", "__coordinator"],
                                                        capture_output=True).returncode == 0:
            time.sleep(0.2)
        st.remove()


if __name__ == "__main__":
    sys.exit(main())
