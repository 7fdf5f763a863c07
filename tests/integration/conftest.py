# SPDX-License-Identifier: MIT
"""Integration test harness.

Every test runs the real lazaret binary as the unprivileged test user that
`make check` creates (scripts/setup.sh --test-user), with a fresh HOME, so
nothing depends on the invoking user's files. The binary is copied to a
world-readable directory first: the checkout may live somewhere the test user
cannot read.
"""
import hashlib
import json
import os
import pwd
import shutil
import struct
import subprocess
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("LAZARET_BUILD", os.path.join(REPO, "build"))
TEST_USER = os.environ.get("LAZARET_TEST_USER", "lazaret-test")


def _test_user():
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pytest.fail(f"test user '{TEST_USER}' does not exist: run 'make check' "
                    f"(scripts/setup.sh --test-user creates it)", pytrace=False)


@pytest.fixture(scope="session")
def test_user():
    return _test_user()


@pytest.fixture(scope="session")
def world_dir():
    """A 0755 scratch directory the test user can traverse."""
    d = tempfile.mkdtemp(prefix="lazaret-it-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def lazaret_bin(world_dir):
    src = os.path.join(BUILD, "src", "lazaret", "lazaret")
    if not os.access(src, os.X_OK):
        pytest.fail(f"{src} is missing: build first (make check does)", pytrace=False)
    bindir = os.path.join(world_dir, "bin")
    os.makedirs(bindir, exist_ok=True)
    os.chmod(bindir, 0o755)
    dst = os.path.join(bindir, "lazaret")
    shutil.copy2(src, dst)
    os.chmod(dst, 0o755)
    # PID 1 of every sandbox is lazaret-init from beside the binary.
    init = os.path.join(os.path.dirname(src), "lazaret-init")
    if not os.access(init, os.X_OK):
        pytest.fail(f"{init} is missing: build first (make check does)", pytrace=False)
    shutil.copy2(init, os.path.join(bindir, "lazaret-init"))
    os.chmod(os.path.join(bindir, "lazaret-init"), 0o755)
    # The git router, also looked up beside the binary.
    router = os.path.join(BUILD, "src", "gitrouter", "lazaret-gitrouter")
    if not os.access(router, os.X_OK):
        pytest.fail(f"{router} is missing: build first (make check does)", pytrace=False)
    shutil.copy2(router, os.path.join(bindir, "lazaret-gitrouter"))
    os.chmod(os.path.join(bindir, "lazaret-gitrouter"), 0o755)
    # The sidecar's program, beside the binary too.
    netd = os.path.join(BUILD, "src", "netd", "lazaret-netd")
    if not os.access(netd, os.X_OK):
        pytest.fail(f"{netd} is missing: build first (make check does)", pytrace=False)
    shutil.copy2(netd, os.path.join(bindir, "lazaret-netd"))
    os.chmod(os.path.join(bindir, "lazaret-netd"), 0o755)
    # The Escalation Client, mounted into sandboxes from beside the binary.
    esc = os.path.join(BUILD, "src", "escalate", "lazaret-escalate")
    if not os.access(esc, os.X_OK):
        pytest.fail(f"{esc} is missing: build first (make check does)", pytrace=False)
    shutil.copy2(esc, os.path.join(bindir, "lazaret-escalate"))
    os.chmod(os.path.join(bindir, "lazaret-escalate"), 0o755)
    # Egress by name: the broker (host) and the relay (mounted in sandboxes).
    # ... and the native backend's boundary (issue 21).
    for sub, name in (("broker", "lazaret-broker"), ("relay", "lazaret-relay"), ("native", "lazaret-native")):
        path = os.path.join(BUILD, "src", sub, name)
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is missing: build first (make check does)", pytrace=False)
        shutil.copy2(path, os.path.join(bindir, name))
        os.chmod(os.path.join(bindir, name), 0o755)
    return dst


class Lazaret:
    """Runs lazaret as the test user in a private HOME.

    home:   the user's HOME (owned by the test user)
    work:   a workspace directory (owned by the test user), the default cwd
    """

    def __init__(self, binary, user, base):
        self.binary = binary
        self.user = user
        self.base = base
        self.home = os.path.join(base, "home")
        self.work = os.path.join(base, "work")
        for d in (self.home, self.work):
            os.makedirs(d, exist_ok=True)
            os.chown(d, user.pw_uid, user.pw_gid)
            os.chmod(d, 0o755)
        self.env = {
            "HOME": self.home,
            "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "LANG": "C.UTF-8",
        }
        # A sanitizer build (make check runs one) must report through the
        # options make chose, even across env -i.
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if k in os.environ:
                self.env[k] = os.environ[k]

    def write(self, rel, text, mode=0o644):
        """Write a file (path relative to base) owned by the test user."""
        path = os.path.join(self.base, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        parent = os.path.dirname(path)
        while parent.startswith(self.base) and parent != self.base:
            os.chown(parent, self.user.pw_uid, self.user.pw_gid)
            parent = os.path.dirname(parent)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        os.chown(path, self.user.pw_uid, self.user.pw_gid)
        os.chmod(path, mode)
        return path

    def cmdline(self, args, env):
        envv = [f"{k}={v}" for k, v in sorted(env.items())]
        inner = ["env", "-i"] + envv + [self.binary] + list(args)
        if os.geteuid() == 0:
            return ["runuser", "-u", self.user.pw_name, "--"] + inner
        return ["sudo", "-n", "-u", self.user.pw_name, "--"] + inner

    def raw(self, socket_path, data, env=None, timeout=60, confine_key=None, hold=False):
        """Bytes sent to a control socket as they are, by the real binary
        with tests/ctl-shim.c preloaded (the coordinator talks to its own
        binary only; release builds have no raw entry point); returns
        (every byte it answered, its standard error). A Hello needs the
        socket's key (ctl_key). confine_key: the shim first confines itself
        under Landlock, as an auto-approved host command is, and tries to
        read that key file. hold: keep the connection open after sending
        (until the server closes it or is silent for 10 s)."""
        shim = build_tool(self, "ctl-shim.so")
        e = dict(self.env)
        e.update(env or {})
        e["LD_PRELOAD"] = shim
        e["CTL_SHIM_SOCKET"] = socket_path
        # An ASan build wants its runtime first; the shim runs before it matters.
        e["ASAN_OPTIONS"] = ":".join(filter(None, [e.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
        if confine_key:
            e["CTL_SHIM_CONFINE"] = confine_key
        if hold:
            e["CTL_SHIM_HOLD"] = "1"
        r = subprocess.run(self.cmdline(["--version"], e), input=data, capture_output=True, timeout=timeout)
        assert r.returncode == 0, r.stderr
        return r.stdout, r.stderr.decode()

    def run(self, *args, cwd=None, env=None, input=None, timeout=60):
        e = dict(self.env)
        if env:
            e.update(env)
        e = {k: v for k, v in e.items() if v is not None}
        return subprocess.run(self.cmdline(args, e), cwd=cwd or self.work,
                              input=input, capture_output=True, text=True,
                              timeout=timeout)


SYSTEM_DIRS = ["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]


def ctl_key(socket_path):
    """The key a control socket's server wrote beside it (ctl-key.h)."""
    base = socket_path[:-5] if socket_path.endswith(".sock") else socket_path
    with open(base + ".key") as f:
        return f.read()


def ctl_frame(obj):
    """One control frame: u32 big-endian length, then the JSON."""
    b = json.dumps(obj).encode()
    return struct.pack(">I", len(b)) + b


def build_tool(lz, name):
    """A helper program from the build's tests/ (audit-tool, escalate-attack),
    copied where the test user can run it."""
    src = os.path.join(BUILD, "tests", name)
    if not os.access(src, os.X_OK):
        pytest.fail(f"{src} is missing: build first (make check does)", pytrace=False)
    dst = os.path.join(lz.base, name)
    shutil.copy2(src, dst)
    os.chmod(dst, 0o755)
    return dst


def tool_dir(lz, omit=(), fakes=None, name="tools"):
    """A directory of symlinks to every program in the system directories,
    except the names in omit, plus fake scripts (name -> text); used as the
    whole PATH, so a test controls which tools lazaret finds."""
    d = os.path.join(lz.base, name)
    os.makedirs(d)
    for src in SYSTEM_DIRS:
        if not os.path.isdir(src):
            continue
        for name in os.listdir(src):
            dst = os.path.join(d, name)
            if name in omit or os.path.lexists(dst):
                continue
            os.symlink(os.path.join(src, name), dst)
    for name, text in (fakes or {}).items():
        path = os.path.join(d, name)
        if os.path.lexists(path):
            os.unlink(path)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(path, 0o755)
    os.chmod(d, 0o755)
    return d


@pytest.fixture
def lz(lazaret_bin, test_user, world_dir):
    base = tempfile.mkdtemp(prefix="t-", dir=world_dir)
    os.chmod(base, 0o755)
    yield Lazaret(lazaret_bin, test_user, base)
    leftover = leftover_containers(test_user, base)
    shutil.rmtree(base, ignore_errors=True)
    if leftover:
        pytest.fail("the test left containers of its Domains behind (removed now): " + ", ".join(leftover),
                    pytrace=False)


def leftover_containers(user, base, seconds=15):
    """The test user's Podman containers of the Domains below base (their
    io.lazaret.domain label) still there once their coordinators had
    time to tear down; removed. A coordinator killed between creating its
    sandbox and recording it, whose Domain is never started again, would
    leave one for good."""
    hashes = set()
    for d, dirs, _ in os.walk(base):
        if os.path.basename(d) == "domains":
            hashes.update(dirs)
            dirs[:] = []
        elif d.count(os.sep) - base.count(os.sep) >= 3:
            dirs[:] = []
    if not hashes:
        return []
    cmd = ["runuser", "-u", user.pw_name, "--", "env", "-i", f"HOME={user.pw_dir}", "PATH=/usr/bin:/bin",
           "podman", "ps", "-a", "--format", "{{.Names}} {{.Labels}}"]
    deadline = time.monotonic() + seconds
    while True:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd="/")
        left = [line.split()[0] for line in r.stdout.splitlines()
                if any(f"io.lazaret.domain:{h}" in line for h in hashes)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for name in left:
        subprocess.run(cmd[:8] + ["podman", "rm", "-f", name], capture_output=True, cwd="/")
    return left


def tree_digest(root, skip_top_git=False):
    """Every path below root (symlinks not followed) with its type, mode and
    content; the top-level .git left out with skip_top_git."""
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not (skip_top_git and d == root and x == ".git"))
        for name in sorted(files) + dirs:
            p = os.path.join(d, name)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, root)}\0{st.st_mode}\0".encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Rootful:
    """Lazaret run by root: data/, work/ and home/ below tmp_path, a
    configuration with one profile, root, on the busybox image (built into
    root's Podman store), and run() to call lazaret with it."""

    def __init__(self, lazaret_bin, tmp_path, top="", profile=""):
        self.bin = lazaret_bin
        self.data, self.work, self.home = tmp_path / "data", tmp_path / "work", tmp_path / "home"
        self.work.mkdir(exist_ok=True)
        self.home.mkdir(exist_ok=True)
        self.env = {"PATH": ROOT_PATH, "HOME": str(self.home)}
        self.cfg = tmp_path / "cfg.toml"
        self.cfg.write_text(f"""[storage]
data_root = "{self.data}"
[network]
default_allow = []
default_deny = []
[escalation]
enabled = false
socket_dir = "{tmp_path}/sock"
{top}[profiles.root]
image = "localhost/lazaret/busybox:latest"
runsc_network = "host"
{profile}""")
        r = subprocess.run([lazaret_bin, "image", "build", "busybox"], capture_output=True, text=True,
                           env=self.env, cwd=self.work, timeout=300)
        assert r.returncode == 0, r.stderr

    def run(self, *args, cwd=None, env=None, timeout=300):
        return subprocess.run([self.bin, "--config", str(self.cfg)] + list(args), capture_output=True, text=True,
                              env={**self.env, **(env or {})}, cwd=cwd or self.work, timeout=timeout)
