#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writing into a persistent directory (the State Anchor: fuse-overlayfs
under gVisor's gofer) against writing into the container's own root file
system, in the same sandbox.

Inside one session of the Debian image, alternating:
  persistent:  tar -xf tree.tar -C /usr/bench-N   (/usr is in persistent_dirs)
  rootfs:      tar -xf tree.tar -C /opt/bench-N   (the container's own layer)
with a tree of 50 MB (2,500 files of 20 KiB in 50 directories). Each
extraction is removed again, untimed. Prints medians and the ratio.

  sudo bench/bench-state.py [--user lazaret-test] [--rounds 7] [--build build]
"""
import os
import statistics
import sys

from benchlib import Stage, make_tree, parse_args, spread

IMAGE = "localhost/lazaret/debian:bookworm"
DIRS, FILES, SIZE = 50, 2500, 20 * 1024


def main():
    args = parse_args(7)
    st = Stage("bench-state", args.user, args.build)
    try:
        tree = os.path.join(st.work, "tree.tar")
        make_tree(tree, 20261130, DIRS, FILES, SIZE)
        os.chmod(tree, 0o644)
        mb = os.path.getsize(tree) / 1e6
        cfg = st.config(IMAGE, extra='persistent_dirs = ["/usr"]\n')
        if st.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
            st.run([st.lz, "image", "build", "debian"], timeout=1500)

        script = f"""
set -e
t() {{ local s=$(date +%s%N); tar -xf /workspace/tree.tar -C "$2"; echo "$1 $(( ($(date +%s%N) - s) / 1000 ))";
      rm -rf "$2"; mkdir "$2"; }}
mkdir -p /usr/bench /opt/bench
t warm-persistent /usr/bench; t warm-rootfs /opt/bench
for i in $(seq 1 {args.rounds}); do
  t persistent /usr/bench
  t rootfs /opt/bench
done
rmdir /usr/bench /opt/bench
"""
        r = st.run([st.lz, "--config", cfg, "run", "--", "/bin/bash", "-c", script], timeout=3600)
        times = {}
        for line in r.stdout.splitlines():
            k, _, v = line.partition(" ")
            times.setdefault(k, []).append(int(v) / 1000.0)
        p, o = statistics.median(times["persistent"]), statistics.median(times["rootfs"])
        print(f"bench-state ({mb:.0f} MB, {FILES} files, {args.rounds} rounds, medians, same sandbox):")
        print(f"  untar  persistent /usr {p:8.1f} ms   container rootfs /opt {o:8.1f} ms   ratio {p / o:.2f}")
        print(f"  spread persistent {spread(times['persistent'])}; rootfs {spread(times['rootfs'])}")
        return 0
    finally:
        st.remove()


if __name__ == "__main__":
    sys.exit(main())
