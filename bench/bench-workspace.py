#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The workspace router (direct mode: the working tree served by
lazaret-gitrouter --workspace, which guards protected and masked names)
against a plain bind mount of a host directory, in the same sandbox.

Inside one session of the Debian image, alternating:
  router:  tar -xf tree.tar -C /workspace/bench-N, then read every file back
  plain:   the same in /plain/bench-N (a volume: a bind mount, no router)
with a tree of 50 MB (2,500 files of 20 KiB in 50 directories). Each
extraction is removed again, untimed. Prints medians and the ratio.

  sudo bench/bench-workspace.py [--user lazaret-test] [--rounds 5] [--build build]
"""
import os
import statistics
import sys

from benchlib import Stage, make_tree, parse_args, spread

IMAGE = "localhost/lazaret/debian:bookworm"
DIRS, FILES, SIZE = 50, 2500, 20 * 1024


def main():
    args = parse_args(5)
    st = Stage("bench-workspace", args.user, args.build)
    try:
        tree = os.path.join(st.work, "tree.tar")
        make_tree(tree, 20261201, DIRS, FILES, SIZE)
        os.chmod(tree, 0o644)
        plain = os.path.join(st.base, "plain")
        os.makedirs(plain)
        os.chown(plain, st.pw.pw_uid, st.pw.pw_gid)
        mb = os.path.getsize(tree) / 1e6
        cfg = st.config(IMAGE, extra=f'workspace_mode = "direct"\n'
                                     f'volumes = [{{ host = "{plain}", container = "/plain", mode = "rw" }}]\n')
        if st.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
            st.run([st.lz, "image", "build", "debian"], timeout=1500)

        script = f"""
set -e
t() {{ local s=$(date +%s%N); tar -xf /workspace/tree.tar -C "$2"; find "$2" -type f -exec cat {{}} + >/dev/null
      echo "$1 $(( ($(date +%s%N) - s) / 1000 ))"; rm -rf "$2"; mkdir "$2"; }}
mkdir -p /workspace/bench /plain/bench
t warm-router /workspace/bench; t warm-plain /plain/bench
for i in $(seq 1 {args.rounds}); do
  t router /workspace/bench
  t plain /plain/bench
done
rmdir /workspace/bench /plain/bench
"""
        r = st.run([st.lz, "--config", cfg, "run", "--", "/bin/bash", "-c", script], timeout=3600)
        times = {}
        for line in r.stdout.splitlines():
            k, _, v = line.partition(" ")
            times.setdefault(k, []).append(int(v) / 1000.0)
        w, p = statistics.median(times["router"]), statistics.median(times["plain"])
        print(f"bench-workspace ({mb:.0f} MB, {FILES} files, {args.rounds} rounds, medians, same sandbox):")
        print(f"  untar + read back  workspace router {w:8.1f} ms   plain bind mount {p:8.1f} ms   ratio {w / p:.2f}")
        print(f"  spread router {spread(times['router'])}; plain {spread(times['plain'])}")
        return 0
    finally:
        st.remove()


if __name__ == "__main__":
    sys.exit(main())
