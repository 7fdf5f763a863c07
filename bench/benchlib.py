# SPDX-License-Identifier: MIT
"""What the benchmarks share: a private directory with the built binaries,
a workspace and a data root owned by the test user, a configuration, and
running commands as that user."""
import argparse
import io
import os
import pwd
import shutil
import subprocess
import random
import sys
import tarfile
import tempfile
import time

PATH = "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


def runsc_path():
    """The runsc lazaret finds on PATH, for the baseline's --runtime: by
    name, Podman would take the first of its own list (/usr/bin/runsc,
    Debian's, where setup has put a current one in /usr/local/bin)."""
    found = shutil.which("runsc", path=PATH.partition("=")[2])
    if not found:
        sys.exit("runsc is not on PATH")
    return found
BINARIES = ("lazaret", "lazaret-init", "lazaret-gitrouter", "lazaret-netd", "lazaret-escalate", "lazaret-broker",
            "lazaret-relay", "lazaret-native")


def make_tree(path, seed, dirs=50, files=2500, size=20 * 1024):
    """A tar of files random bytes each (the same for the same seed) in
    dirs directories: what the file-system benchmarks extract."""
    rng = random.Random(seed)
    with tarfile.open(path, "w") as tf:
        for i in range(files):
            data = rng.randbytes(size)
            info = tarfile.TarInfo(f"d{i % dirs}/f{i}")
            info.size, info.mode = len(data), 0o644
            tf.addfile(info, io.BytesIO(data))


def spread(values):
    """The range of a figure's rounds, for the line under its median: other
    sessions share these machines, so one median alone hides the noise."""
    return f"{min(values):.1f} to {max(values):.1f} ms over {len(values)} rounds"


def parse_args(rounds, extra=None):
    """The options every benchmark takes (--user, --rounds, --build), plus
    extra(parser) for its own."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--user", default="lazaret-test")
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--build", default="build")
    if extra:
        extra(ap)
    return ap.parse_args()


class Stage:
    """base/ (0755) with bin/ (the build's binaries), work/ and data/ (the
    user's); remove() takes it all away."""

    def __init__(self, name, user, build):
        if os.geteuid() != 0:
            sys.exit(f"{name}: run as root (it runs the commands as --user)")
        self.name = name
        self.pw = pwd.getpwnam(user)
        self.base = tempfile.mkdtemp(prefix=f"lazaret-{name}-")
        os.chmod(self.base, 0o755)
        self.bindir = os.path.join(self.base, "bin")
        os.makedirs(self.bindir)
        for f in BINARIES:
            shutil.copy2(os.path.join(build, "bin", f), self.bindir)
        self.lz = os.path.join(self.bindir, "lazaret")
        self.work, self.data = os.path.join(self.base, "work"), os.path.join(self.base, "data")
        for d in (self.work, self.data):
            os.makedirs(d)
            os.chown(d, self.pw.pw_uid, self.pw.pw_gid)

    def config(self, image, network='default_allow = []\ndefault_deny = []\n', extra="", name="cfg.toml"):
        """A configuration with one profile, bench, in the default network
        mode (runsc_network = "sandbox", gVisor's own stack)."""
        path = os.path.join(self.base, name)
        with open(path, "w") as f:
            f.write(f"""[storage]
data_root = "{self.data}"
[network]
{network}[escalation]
enabled = false
socket_dir = "{self.base}/sock"
[profiles.bench]
image = "{image}"
runsc_network = "sandbox"
{extra}""")
        os.chmod(path, 0o644)
        return path

    def cmd(self, argv, env=()):
        return (["runuser", "-u", self.pw.pw_name, "--", "env", "-i", f"HOME={self.pw.pw_dir}", PATH] + list(env)
                + list(argv))

    def run(self, argv, cwd=None, check=True, env=(), **kw):
        r = subprocess.run(self.cmd(argv, env), cwd=cwd or self.work, capture_output=True, text=True, **kw)
        if check and r.returncode != 0:
            sys.exit(f"{self.name}: {' '.join(argv[:4])} failed: {r.stderr}")
        return r

    def remove(self):
        """Stop every configuration's sandbox first and wait out its
        coordinator: removing the data root under a coordinator still
        tearing down left its image mount held (one per run)."""
        for name in sorted(os.listdir(self.base)):
            if name.endswith(".toml"):
                self.run([self.lz, "--config", os.path.join(self.base, name), "stop"], check=False, timeout=120)
        deadline = time.time() + 60
        while time.time() < deadline:
            r = subprocess.run(["pgrep", "-u", self.pw.pw_name, "-f", "__coordinator"], capture_output=True,
                               text=True)
            ours = []
            for pid in r.stdout.split():
                try:
                    if os.readlink(f"/proc/{pid}/exe").startswith(self.bindir + "/"):
                        ours.append(pid)
                except OSError:
                    pass
            if not ours:
                break
            time.sleep(0.1)
        shutil.rmtree(self.base, ignore_errors=True)
