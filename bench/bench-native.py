#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The native backend's boundary against bubblewrap (issue 21): `lazaret-native
--workspace W -- true` and `bwrap --unshare-all --die-with-parent --ro-bind / /
true` (Debian's bubblewrap), as the test user, alternating, ten of each per
round. Prints the medians of a run and their ratio; exits 1 when
lazaret-native takes more than twice as long.

This is the launcher alone; bench-native-run.py measures the issue's figures
for `lazaret run --backend native`.

  sudo bench/bench-native.py [--user lazaret-test] [--rounds 20] [--build build]
"""
import shutil
import statistics
import subprocess
import sys
import time

from benchlib import Stage, parse_args

PER_ROUND = 10


def timed(st, argv):
    """Seconds for one run of argv as the user (runuser's own cost is in
    both sides alike)."""
    cmd = st.cmd(argv)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=st.work, capture_output=True, text=True)
    t = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"bench-native: {' '.join(argv[:3])} failed ({r.returncode}): {r.stderr.strip()}")
    return t


def main():
    args = parse_args(20)
    bwrap = shutil.which("bwrap")
    if not bwrap:
        sys.exit("bench-native: bwrap is missing (scripts/setup.sh installs bubblewrap)")
    st = Stage("bench-native", args.user, args.build)
    try:
        native = [st.bindir + "/lazaret-native", "--workspace", st.work, "--", "true"]
        base = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"]
        for argv in (native, base):  # warm the page cache
            timed(st, argv)
        times = {"native": [], "bwrap": []}
        for i in range(args.rounds):
            order = (("native", native), ("bwrap", base)) if i % 2 == 0 else (("bwrap", base), ("native", native))
            for name, argv in order:
                for _ in range(PER_ROUND):
                    times[name].append(timed(st, argv))
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = med["native"] / med["bwrap"]
        print(f"bench-native ({args.rounds} rounds of {PER_ROUND}, medians, as {args.user} through runuser):")
        print(f"  lazaret-native -- true:                       {med['native'] * 1000:.1f} ms")
        print(f"  bwrap --unshare-all --ro-bind / / true:       {med['bwrap'] * 1000:.1f} ms")
        print(f"  ratio: {ratio:.2f} (budget: at most 2.00)")
        return 0 if ratio <= 2.0 else 1
    finally:
        st.remove()


if __name__ == "__main__":
    sys.exit(main())
