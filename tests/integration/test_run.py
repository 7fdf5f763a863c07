# SPDX-License-Identifier: MIT
"""lazaret run against the real stack: rootless Podman, runsc, as the
unprivileged test user. Each test gets its own workspace and data root (so its
own Domain), and checks that nothing is left behind: no container, no
control socket, no coordinator process, no mount."""
import contextlib
import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import termios
import threading
import fcntl
import time

import pytest

from conftest import TEST_USER, ctl_frame, ctl_key, tool_dir

IMAGE = "localhost/lazaret/busybox:latest"


def podman(user, *args, check=True):
    cmd = ["runuser", "-u", user.pw_name, "--", "env", "-i", f"HOME={user.pw_dir}",
           "PATH=/usr/bin:/bin:/usr/sbin:/sbin", "podman"] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd="/")
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {r.stderr}")
    return r


@pytest.fixture(scope="session")
def busybox_image(lazaret_bin, test_user):
    """The test image, built with lazaret's own image builder in the test
    user's real Podman store (shared by every run test)."""
    r = subprocess.run(["runuser", "-u", test_user.pw_name, "--", "env", "-i", f"HOME={test_user.pw_dir}",
                        "PATH=/usr/bin:/bin:/usr/sbin:/sbin", lazaret_bin, "image", "build", "busybox"],
                       capture_output=True, text=True, timeout=300, cwd="/")
    assert r.returncode == 0, r.stderr
    return IMAGE


class Domain:
    """A workspace + data root + config for one profile, run as the test user
    with the test user's real HOME (where the image lives)."""

    def __init__(self, lz, image, extra="", network='default_allow = []\ndefault_deny = []\n', runsc_network="host"):
        self.lz = lz
        self.runsc_network = runsc_network
        self.data = os.path.join(lz.base, "data")
        os.makedirs(self.data, exist_ok=True)
        os.chown(self.data, lz.user.pw_uid, lz.user.pw_gid)
        self.cfg = lz.write("cfg.toml", f"""[storage]
data_root = "{self.data}"
[network]
{network}
[escalation]
enabled = false
socket_dir = "{lz.base}/sock"
[profiles.shell]
image = "{image}"
runsc_network = "{runsc_network}"
{extra}""")
        # The real HOME: the test image lives in its Podman store, and its
        # storage.conf (overlay) must apply. It must hold no lazaret config
        # of its own, or that would merge into every test's.
        self.env = {"HOME": lz.user.pw_dir}
        user_cfg = os.path.join(lz.user.pw_dir, ".config/lazaret/config.toml")
        assert not os.path.exists(user_cfg), f"{user_cfg} would leak into the tests; remove it"

    def cmd(self, *args):
        return self.lz.cmdline(["--config", self.cfg] + list(args), {**self.lz.env, **self.env})

    def run(self, *args, input=None, timeout=120, env=None):
        return self.lz.run("--config", self.cfg, *args, input=input, timeout=timeout, env={**self.env, **(env or {})})

    def popen(self, *args, **kw):
        e = {**self.lz.env, **self.env, **kw.pop("env", {})}
        return subprocess.Popen(self.lz.cmdline(["--config", self.cfg] + list(args), e), cwd=self.lz.work,
                                stdin=kw.pop("stdin", subprocess.PIPE), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, **kw)

    def status(self):
        r = self.run("status", "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def domain_dirs(self):
        d = os.path.join(self.data, "domains")
        return [os.path.join(d, x) for x in os.listdir(d)] if os.path.isdir(d) else []

    def log(self):
        text = ""
        for d in self.domain_dirs():
            p = os.path.join(d, "coordinator.log")
            if os.path.exists(p):
                text += open(p).read()
        return text

    def socket_path(self):
        h = os.path.basename(self.domain_dirs()[0])
        return f"/tmp/lazaret-{self.lz.user.pw_uid}/lazaret_coord_{h}.sock"

    def runtime_leftovers(self):
        rt = f"/tmp/lazaret-{self.lz.user.pw_uid}"
        hs = {os.path.basename(d) for d in self.domain_dirs()}
        return [os.path.join(rt, n) for n in (os.listdir(rt) if os.path.isdir(rt) else [])
                if any(n.endswith("_" + h) for h in hs) and not os.path.islink(os.path.join(rt, n))]

    def container_names(self):
        r = podman(self.lz.user, "ps", "-a", "--format", "{{.Names}}")
        hs = {os.path.basename(d) for d in self.domain_dirs()}
        # The sandbox and the network sidecar.
        return [n for n in r.stdout.split()
                if any(n.startswith(p) and n[len(p):] in hs for p in ("lazaret-coord-", "lazaret-net-"))]

    def watchdog_pids(self):
        """The coordinators' watchdogs of this Domain: their stderr is its
        coordinator.log."""
        out = subprocess.run(["ps", "-u", self.lz.user.pw_name, "-o", "pid=,args="], capture_output=True,
                             text=True).stdout
        pids = []
        for line in out.splitlines():
            pid, _, args = line.strip().partition(" ")
            if "__watchdog" not in args:
                continue
            try:
                if os.readlink(f"/proc/{pid}/fd/2").startswith(self.data + "/"):
                    pids.append(int(pid))
            except OSError:
                pass
        return pids

    def coordinator_pids(self):
        out = subprocess.run(["ps", "-u", self.lz.user.pw_name, "-o", "pid=,args="], capture_output=True,
                             text=True).stdout
        pids = []
        for line in out.splitlines():
            pid, _, args = line.strip().partition(" ")
            if "__coordinator" in args and os.path.exists(f"/proc/{pid}/environ"):
                try:
                    # our coordinators run with cwd / and the spec on fd 3; match by log
                    pids.append(int(pid))
                except ValueError:
                    pass
        mine = []
        log = self.log()
        for p in pids:
            if f"lazaret-coordinator[{p}]" in log:
                mine.append(p)
        return mine

    def assert_clean(self, timeout=15):
        """Nothing of this Domain remains (teardown may take a moment)."""
        deadline = time.time() + timeout
        while True:
            left = {
                "containers": self.container_names(),
                "coordinators": self.coordinator_pids(),
                "watchdogs": self.watchdog_pids(),
                # The control socket, its key, git's file system monitor's socket.
                "socket": [p for p in ([self.socket_path(), self.socket_path()[:-5] + ".key",
                                        self.socket_path() + ".fsmon"] if self.domain_dirs() else [])
                           if os.path.exists(p)],
                # The trace sink's directory: its configuration, the sessions' pid files.
                "runtime files": [p for p in self.runtime_leftovers() if "lazaret_trace_" in p],
                "mounts": [ln for ln in open("/proc/self/mountinfo") if self.data in ln],
                # FUSE mounts (git router, State Anchor) live in Podman's
                # namespace, and so do their daemons.
                "podman-ns mounts": pause_mounts(self.lz.user, self.data),
                "fuse daemons": subprocess.run(["pgrep", "-u", self.lz.user.pw_name, "-a", "-f", self.data + "/"],
                                               capture_output=True, text=True).stdout.split("\n")[:-1],
            }
            if not any(left.values()):
                # Under the ASan+UBSan build the coordinator reports leaks
                # and undefined behaviour into its log when it exits.
                log = self.log()
                for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
                    assert marker not in log, f"{marker} in the coordinator's log:\n{log}"
                return
            if time.time() > deadline:
                raise AssertionError(f"left behind: {left}\n--- log ---\n{self.log()}")
            time.sleep(0.2)


def wait_sessions(dom, n, timeout=20):
    """Wait until the Domain's sandbox runs with n sessions (n=0: just runs)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = dom.run("status", "--json")
        if r.returncode == 0:
            st = json.loads(r.stdout)
            if st.get("running") and (n == 0 or len(st.get("sessions", [])) == n):
                return st
        time.sleep(0.1)
    raise AssertionError(f"the sandbox did not reach {n} sessions\n{dom.log()}")


@pytest.fixture
def dom(lz, busybox_image):
    d = Domain(lz, busybox_image)
    yield d
    # Whatever a test did, its Domain must end clean.
    try:
        d.assert_clean()
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)


def test_exit_code_and_streams(dom):
    r = dom.run("run", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 7")
    assert (r.returncode, r.stdout, r.stderr) == (7, "out\n", "err\n"), r.stderr
    dom.assert_clean()


def test_default_command_and_profile(dom):
    # One profile: the name may be left out; no command: the profile's (sh -l).
    r = dom.run("run", input="echo $0 in $(pwd)\nexit 3\n")
    assert r.returncode == 3, r.stderr
    assert r.stdout.strip().endswith("in /workspace")


def test_stdin_is_relayed(dom):
    data = "".join(f"line {i}\n" for i in range(5000))
    r = dom.run("run", "--", "/bin/cat", input=data)
    assert r.returncode == 0, r.stderr
    assert r.stdout == data


def test_workspace_is_mounted(dom, lz):
    lz.write("work/hello.txt", "from the host\n")
    r = dom.run("run", "--", "/bin/sh", "-c", "cat /workspace/hello.txt; echo back > /workspace/out.txt")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "from the host\n"
    assert open(os.path.join(lz.work, "out.txt")).read() == "back\n"


def test_only_profile_env_enters(lz, busybox_image):
    d = Domain(lz, busybox_image, extra='env = { GIVEN = "env:LZ_HOST_GIVEN", FIXED = "v1" }\n')
    r = d.run("run", "--", "/bin/sh", "-c", "env", env={"LZ_HOST_GIVEN": "g", "LZ_HOST_SECRET": "s"})
    assert r.returncode == 0, r.stderr
    env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert env["GIVEN"] == "g" and env["FIXED"] == "v1"
    assert "LZ_HOST_SECRET" not in env and "LZ_HOST_GIVEN" not in env
    assert "HOME" not in env or env["HOME"] != lz.user.pw_dir
    assert len(env["LAZARET_SESSION_ID"]) == 36
    d.assert_clean()


def test_volume_read_only_and_masks(lz, busybox_image):
    os.makedirs(os.path.join(lz.work, ".vscode"))
    lz.write("work/.vscode/settings.json", "{\"secret\": 1}\n")
    lz.write("shared/data.txt", "shared\n")
    d = Domain(lz, busybox_image,
               extra=f'volumes = [{{ host = "{lz.base}/shared", container = "/shared", mode = "ro" }},\n'
                     f'  {{ host = "{{profile_dir}}/state", container = "/state" }}]\n')
    r = d.run("run", "--", "/bin/sh", "-c",
              "cat /shared/data.txt; echo x > /shared/new 2>/dev/null && echo WROTE; "
              "ls -A /workspace/.vscode; echo y > /workspace/.vscode/settings.json 2>/dev/null && echo WROTE; "
              "echo s > /state/f; echo done")
    assert r.returncode == 0, r.stderr
    # .vscode is a protected host-run file in direct mode (issue 13): the
    # workspace router lets the sandbox read it, never change it.
    assert r.stdout == "shared\nsettings.json\ndone\n"
    assert not os.path.exists(os.path.join(lz.base, "shared/new"))
    assert open(os.path.join(lz.work, ".vscode/settings.json")).read() == "{\"secret\": 1}\n"
    # {profile_dir} was created (Lazaret's own storage) and is writable.
    assert open(os.path.join(d.data, "shell/state/f")).read() == "s\n"
    d.assert_clean()


def test_two_clis_share_one_sandbox(dom):
    a = dom.popen("run", "--", "/bin/sh", "-c", "echo a > /tmp/marker; read x; echo got $x")
    # Wait until A's session runs.
    wait_sessions(dom, 1)
    st = dom.status()
    assert st["running"] and len(st["sessions"]) == 1
    r = dom.run("run", "--", "/bin/cat", "/tmp/marker")
    assert (r.returncode, r.stdout) == (0, "a\n"), r.stderr
    st2 = dom.status()
    assert st2["generation"] == st["generation"]
    out, err = a.communicate(input=b"bye\n", timeout=30)
    assert a.returncode == 0, err
    assert out == b"got bye\n"
    dom.assert_clean()


def test_a_lagging_reader_bounds_the_coordinator(lz, busybox_image):
    """The sandbox prints 60 MB to a CLI whose reader takes it slowly: the
    coordinator (on the host) holds at most its queue's bound of it, not the
    output (its queue once grew by all it had written ahead of the reader,
    so an agent could fill the host's memory by printing), and every byte
    arrives."""
    d = Domain(lz, busybox_image)
    env = {}
    if "ASAN_OPTIONS" in os.environ:
        env["ASAN_OPTIONS"] = os.environ["ASAN_OPTIONS"] + ":quarantine_size_mb=8"
    holder = d.popen("run", "--", "/bin/sh", "-c", "sleep 300", env=env)
    try:
        wait_sessions(d, 1, timeout=60)
        pid = d.status()["coordinator_pid"]

        def rss():
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        base = rss()
        size = 60 * 1000 * 1000
        p = d.popen("run", "--", "/bin/sh", "-c", f"yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c {size}",
                    stdin=subprocess.DEVNULL)
        got, peak, reads = 0, 0, 0
        while True:
            b = p.stdout.read1(16384)
            if not b:
                break
            got += len(b)
            reads += 1
            if reads % 16 == 0:
                peak = max(peak, rss() - base)
            time.sleep(0.001)
        p.wait(timeout=60)
        assert p.returncode == 0, p.stderr.read()
        assert got == size
        assert peak < 48 * 1024, f"the coordinator grew by {peak} KiB behind a slow reader"
    finally:
        kill_cli(holder)
    d.assert_clean()


def test_eight_clis_one_coordinator(dom):
    procs = [dom.popen("run", "--", "/bin/sh", "-c", "sleep 2; echo ok", stdin=subprocess.DEVNULL,
                       env={"LAZARET_DEBUG": "1"})
             for _ in range(8)]
    seen = set()
    deadline = time.time() + 30
    while any(p.poll() is None for p in procs) and time.time() < deadline:
        seen.update(dom.container_names())
        time.sleep(0.1)
    results = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, (out, err)
        assert out == b"ok\n"
    assert len(seen) == 1, seen
    assert dom.log().count("starting for shell") == 1
    dom.assert_clean()


def test_kill_cli_ends_its_session(dom):
    a = dom.popen("run", "--", "/bin/sleep", "1000")
    b = dom.popen("run", "--", "/bin/sh", "-c", "read x; echo $x")
    wait_sessions(dom, 2)
    assert len(dom.status()["sessions"]) == 2
    kill_cli(a)
    a.wait()
    deadline = time.time() + 10
    while len(dom.status()["sessions"]) != 1 and time.time() < deadline:
        time.sleep(0.1)
    assert len(dom.status()["sessions"]) == 1
    out, _ = b.communicate(input=b"still\n", timeout=30)
    assert out == b"still\n"
    dom.assert_clean()


def test_kill_coordinator_then_recover(dom):
    a = dom.popen("run", "--", "/bin/sleep", "1000")
    # The session open: a coordinator killed before it answers SessionOpen
    # makes the CLI start a new one (its retry), another case.
    wait_sessions(dom, 1)
    gen = dom.status()["generation"]
    [pid] = dom.coordinator_pids()
    assert len(dom.watchdog_pids()) == 1
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    a.communicate(timeout=30)
    assert a.returncode == 125
    # Issue 16: its watchdog removes the sandbox (and everything else the
    # store records) within a few seconds, then ends.
    dom.assert_clean(timeout=10)
    gone = time.monotonic() - killed
    log = dom.log()
    assert "the coordinator died: removing the sandbox" in log and "recovering participant" in log, log
    assert "nothing of the dead coordinator is left" in log, log
    print(f"everything gone {gone:.1f} s after the kill")
    assert gone < 10, gone
    # Status tells the truth, and the next run starts afresh.
    assert dom.run("status").stdout == "shell: not running\n"
    r = dom.run("run", "--", "/bin/echo", "again")
    assert (r.returncode, r.stdout) == (0, "again\n"), r.stderr
    assert f"(generation {gen + 1}, " in dom.log()
    dom.assert_clean()


def test_the_domains_spec_copy_follows_the_configuration(dom, lz):
    """The coordinator writes <domain>/launch-spec.json (what the watchdog
    and 'lazaret stop' act on) only when it is not the spec already: the
    same configuration leaves the file as it was; a changed one writes it
    again, with the change in it."""
    def spec():
        [domain] = dom.domain_dirs()
        path = os.path.join(domain, "launch-spec.json")
        data = open(path, "rb").read()
        return os.stat(path), json.loads(data.split(b"\0")[0])
    for _ in range(2):
        r = dom.run("run", "--", "/bin/true")
        assert r.returncode == 0, r.stderr
        dom.assert_clean()
    st, before = spec()
    r = dom.run("run", "--", "/bin/true")
    assert r.returncode == 0, r.stderr
    dom.assert_clean()
    st2, again = spec()
    assert (st2.st_ino, st2.st_mtime_ns) == (st.st_ino, st.st_mtime_ns) and again == before
    lz.write("cfg.toml", open(dom.cfg).read() + "pids_limit = 123\n")
    r = dom.run("run", "--", "/bin/true")
    assert r.returncode == 0, r.stderr
    dom.assert_clean()
    st3, after = spec()
    assert st3.st_ino != st.st_ino and after["nproc"] == 123 and before["nproc"] != 123, (before, after)


def test_coordinator_and_watchdog_killed_stop_removes(dom):
    """Both the coordinator and its watchdog killed with -9: status tells
    the truth (what is left, and what removes it), stop removes it from
    the store's record, and the next run starts afresh."""
    a = dom.popen("run", "--", "/bin/sleep", "1000")
    wait_sessions(dom, 1)
    [wd] = dom.watchdog_pids()
    os.kill(wd, signal.SIGKILL)
    [pid] = dom.coordinator_pids()
    os.kill(pid, signal.SIGKILL)
    a.communicate(timeout=30)
    [name] = dom.container_names()
    r = dom.run("status")
    assert r.stdout == (f"shell: not running, but a coordinator that died left {name}; its watchdog removes "
                        "them, or 'lazaret stop'\n"), r.stdout + r.stderr
    assert dom.status()["left_by_a_dead_coordinator"] == [name]
    r = dom.run("stop")
    [domain] = dom.domain_dirs()
    assert (r.returncode, r.stdout) == (0, f"shell: stopped what a coordinator that died left (see {domain}/"
                                           "coordinator.log)\n"), r.stdout + r.stderr
    dom.assert_clean(timeout=5)
    assert "lazaret stop: no coordinator answers" in dom.log()
    # Nothing left now: stop and status say so.
    assert dom.run("stop").stdout == "shell: not running\n"
    assert dom.run("status").stdout == "shell: not running\n"
    r = dom.run("run", "--", "/bin/echo", "again")
    assert (r.returncode, r.stdout) == (0, "again\n"), r.stderr
    dom.assert_clean()


def test_volume_stage_left_by_a_killed_coordinator_is_detached_by_a_native_recovery(lz, busybox_image):
    """gVisor's volumes are bound onto stages in the Domain, in Podman's
    mount namespace. The coordinator and its watchdog killed with -9 leave
    the stage bound there (the person's directory, reachable by that name
    in Podman's namespace); the next coordinator recovers the generation
    and detaches it even when its own launch is native (another spec, with
    no volume: the stages are found in the Domain, not in the spec)."""
    cache = os.path.join(lz.base, "cache")
    os.makedirs(cache)
    os.chown(cache, lz.user.pw_uid, lz.user.pw_gid)
    d = Domain(lz, busybox_image, extra=f'memory_limit = 0\nvolumes = [{{ host = "{cache}", container = "/cache" }}]\n')
    a = d.popen("run", "--tui=none", "--", "/bin/sleep", "1000")
    wait_sessions(d, 1)
    [wd] = d.watchdog_pids()
    os.kill(wd, signal.SIGKILL)
    [pid] = d.coordinator_pids()
    os.kill(pid, signal.SIGKILL)
    a.communicate(timeout=30)
    [domain] = d.domain_dirs()
    stages = os.path.join(domain, "volumes") + "/"
    assert pause_mounts(lz.user, stages), "the stage was not bound in Podman's namespace"
    # The next launch native, and with no volume.
    lz.write("cfg.toml", open(d.cfg).read().replace(f'volumes = [{{ host = "{cache}", container = "/cache" }}]\n', ""))
    r = d.run("run", "--backend", "native", "--tui=none", "--", "/bin/echo", "again")
    assert (r.returncode, r.stdout) == (0, "again\n"), r.stderr + d.log()[-3000:]
    assert not pause_mounts(lz.user, stages), pause_mounts(lz.user, stages)
    d.assert_clean()


def test_coordinator_killed_while_podman_makes_the_sandbox_leaves_nothing(lz, busybox_image):
    """The coordinator killed while its `podman run` of the sandbox is still
    at work (here a podman that waits 3 s first): the watchdog ends what the
    coordinator was running in its process group before it reads the
    records, so that podman cannot make its container afterwards; nothing
    is left. (A start ended by SIGTERM while Podman worked once left the
    sandbox's container, and its sidecar, which the sandbox then held.)"""
    real = shutil.which("podman", path="/usr/bin:/bin")
    marks = os.path.join(lz.base, "marks")
    os.makedirs(marks)
    os.chmod(marks, 0o777)
    fake = f"""#!/bin/sh
case " $* " in
*" run "*lazaret-coord-*) touch {marks}/waiting; sleep 3; touch {marks}/went-on ;;
esac
exec {real} "$@"
"""
    tools = tool_dir(lz, fakes={"podman": fake})
    d = Domain(lz, busybox_image)
    p = d.popen("run", "--", "/bin/true", env={"PATH": tools})
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(marks, "waiting")):
        assert time.monotonic() < deadline and p.poll() is None, p.communicate()
        time.sleep(0.05)
    [pid] = d.coordinator_pids()
    os.kill(pid, signal.SIGKILL)
    p.communicate(timeout=30)
    assert p.returncode != 0
    time.sleep(4)  # past the fake's wait
    assert not os.path.exists(os.path.join(marks, "went-on")), "podman went on after its coordinator died"
    d.assert_clean(timeout=10)
    assert "the coordinator died: removing the sandbox" in d.log()


def test_kill_container_is_runtime_lost(dom):
    a = dom.popen("run", "--", "/bin/sleep", "1000")
    deadline = time.time() + 20
    while not dom.container_names() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    [name] = dom.container_names()
    podman(dom.lz.user, "kill", name)
    out, err = a.communicate(timeout=30)
    assert a.returncode == 125
    assert b"the sandbox stopped unexpectedly" in err
    dom.assert_clean()


def test_stop_ends_every_session(dom):
    procs = [dom.popen("run", "--", "/bin/sleep", "1000") for _ in range(2)]
    wait_sessions(dom, 2)
    r = dom.run("stop")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "shell: stopped\n"
    for p in procs:
        out, err = p.communicate(timeout=30)
        assert p.returncode == 143
        assert b"stopped with 'lazaret stop'" in err
    dom.assert_clean(timeout=5)
    r = dom.run("status")
    assert r.stdout == "shell: not running\n"


def test_runsc_sandbox_network_refused_here(lz, busybox_image):
    """With Debian's runsc (20221219, which setup leaves in /usr/bin) first on
    PATH, runsc's own network stack cannot start on this kernel; the launch
    says so and why, and does not switch modes by itself."""
    ver = subprocess.run(["/usr/bin/runsc", "--version"], capture_output=True, text=True).stdout
    if "20221219" not in ver:
        pytest.skip(f"LOUD SKIP: /usr/bin/runsc is not Debian's 20221219 ({ver!r}); nothing known to refuse")
    tools = tool_dir(lz, omit={"runsc"}, fakes={"runsc": '#!/bin/sh\nexec /usr/bin/runsc "$@"\n'})
    d = Domain(lz, busybox_image)
    text = open(d.cfg).read().replace('runsc_network = "host"', 'runsc_network = "sandbox"')
    lz.write("cfg.toml", text)
    r = d.run("run", "--", "/bin/true", env={"PATH": tools})
    assert r.returncode == 125, r.stderr
    assert "runsc_network = \"sandbox\", which cannot work on this host" in r.stderr
    assert "set runsc_network = \"host\"" in r.stderr and "release-20240807" in r.stderr
    assert d.domain_dirs() == []
    d.assert_clean()


def test_runtime_runsc_names_the_runtime(lz, busybox_image):
    """[runtime] runsc: the runsc every part of the launch uses (Podman's
    runtime, the coordinator's runsc exec) and the one doctor checks; a path
    that is no executable file is a configuration error with the fix."""
    log = os.path.join(lz.base, "runsc.log")
    real = shutil.which("runsc", path="/usr/local/bin:/usr/bin:/bin")
    wrapper = lz.write("bin2/runsc-wrapped", f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n', mode=0o755)
    open(log, "w").close()
    os.chown(log, lz.user.pw_uid, lz.user.pw_gid)
    d = Domain(lz, busybox_image)
    base = open(d.cfg).read()
    lz.write("cfg.toml", base.replace("[profiles.shell]", f'[runtime]\nrunsc = "{wrapper}"\n[profiles.shell]'))
    r = d.run("run", "--", "/bin/sh", "-c", "echo ran")
    assert r.returncode == 0 and r.stdout == "ran\n", r.stderr + d.log()
    calls = open(log).read()
    assert "create" in calls.split() and "exec" in calls.split(), calls
    r = d.run("doctor", "--json")
    runsc = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "runsc")
    assert wrapper in runsc["detail"], runsc
    d.assert_clean()
    for bad, why in ((os.path.join(lz.base, "no-such-runsc"), "is not an executable file"),
                     (log, "is not an executable file"),
                     ("runsc", "is not absolute after expansion")):
        lz.write("cfg.toml", base.replace("[profiles.shell]", f'[runtime]\nrunsc = "{bad}"\n[profiles.shell]'))
        r = d.run("config", "check")
        assert r.returncode == 65, r.stderr
        assert "runtime.runsc: " in r.stderr and why in r.stderr, r.stderr


def test_missing_image(lz, busybox_image):
    d = Domain(lz, "localhost/lazaret/no-such-image:1")
    r = d.run("run", "--", "/bin/true")
    assert r.returncode == 125
    assert "cannot start the sandbox from localhost/lazaret/no-such-image:1" in r.stderr
    d.assert_clean()


def test_peer_with_other_uid_refused(dom):
    a = dom.popen("run", "--", "/bin/sleep", "1000")
    wait_sessions(dom, 1)
    # We are root here: another uid than the coordinator's.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(dom.socket_path())
    hello = json.dumps({"type": "Hello", "version": 1, "cli_pid": os.getpid()}).encode()
    s.settimeout(10)
    try:
        s.sendall(struct.pack(">I", len(hello)) + hello)
        assert s.recv(100) == b""
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed before we finished: refused all the same
    s.close()
    assert "refused a control connection from uid 0" in dom.log()
    # Our own user, but not the lazaret binary (issue 14: a process in the
    # sandbox reaches the socket as our uid, through runsc): refused too.
    probe = ("import socket,struct,sys,json; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
             "h=json.dumps({'type':'Hello','version':1,'cli_pid':1}).encode(); s.settimeout(10)\n"
             "try:\n  s.sendall(struct.pack('>I',len(h))+h); print(s.recv(4096)==b'')\n"
             "except (BrokenPipeError, ConnectionResetError):\n  print(True)")
    r = subprocess.run(["runuser", "-u", TEST_USER, "--", "/usr/bin/python3", "-c", probe, dom.socket_path()],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["True"], r.stderr
    assert "not this lazaret binary outside the sandbox" in dom.log()
    # A malformed frame from the lazaret binary drops that peer only.
    d, _ = dom.lz.raw(dom.socket_path(), struct.pack(">I", 5) + b"{bad}", env=dom.env)
    assert b"Error" in d
    st = dom.status()
    assert st["running"] and len(st["sessions"]) == 1
    kill_cli(a)
    a.wait()
    dom.assert_clean()


def kill_cli(popen, sig=signal.SIGKILL):
    """Kill the lazaret CLI itself (the child of runuser), not runuser."""
    deadline = time.time() + 10
    while time.time() < deadline:
        for tid in os.listdir(f"/proc/{popen.pid}/task"):
            kids = open(f"/proc/{popen.pid}/task/{tid}/children").read().split()
            for k in kids:
                try:
                    cmd = open(f"/proc/{k}/cmdline", "rb").read().split(b"\0")
                except FileNotFoundError:
                    continue
                if cmd and cmd[0].endswith(b"/lazaret"):
                    os.kill(int(k), sig)
                    return int(k)
        time.sleep(0.05)
    raise AssertionError("the lazaret CLI process was not found")


def _read_until(fd, needle, timeout=20):
    buf = b""
    deadline = time.time() + timeout
    while needle not in buf:
        left = deadline - time.time()
        if left <= 0:
            raise AssertionError(f"did not see {needle!r} in {buf!r}")
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    return buf


@contextlib.contextmanager
def pty_session(dom, env=None):
    """lazaret run --tui=none -- /bin/sh on a real PTY (the output as the
    sandbox wrote it, through the filter alone; test_tui.py has the status
    line); yields (pid, master fd). The CLI is killed and the fd closed
    however the test ends."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(dom.lz.work)
            cmd = dom.lz.cmdline(["--config", dom.cfg, "run", "--tui=none", "--", "/bin/sh"],
                                 {**dom.lz.env, **dom.env, **(env or {})})
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    try:
        yield pid, fd
    finally:
        try:
            # The whole process group: runuser waits in a parent of its own
            # for the CLI, and killing that parent alone left the CLI.
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)


@pytest.mark.parametrize("key", [True, False])
def test_retries_end_in_one_line_naming_the_cause(dom, key):
    """Issue 17: a listener at the control socket that hangs up before a
    session opens (as a coordinator that is stopping does) makes lazaret
    run try three times, then say so in one line; it never exits without
    a message. Without the socket's key beside it (a stopping coordinator
    removes it with the socket, issue 41) the same, naming that."""
    r = dom.run("run", "--", "/bin/true")
    assert r.returncode == 0, r.stderr
    # Its coordinator removes the socket as it tears down.
    deadline = time.time() + 60
    while "torn down" not in dom.log():
        assert time.time() < deadline, dom.log()
        time.sleep(0.05)
    path = dom.socket_path()
    assert not os.path.exists(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o777)
    srv.listen(8)
    srv.settimeout(60)
    keyfile = path[:-5] + ".key"
    if key:
        with open(keyfile, "w") as f:
            f.write("ab" * 32)
        os.chown(keyfile, dom.lz.user.pw_uid, dom.lz.user.pw_gid)
        os.chmod(keyfile, 0o600)
    seen = []

    def hang_up():
        try:
            while len(seen) < 3:
                c, _ = srv.accept()
                seen.append(c)
                c.close()
        except OSError:
            pass

    t = threading.Thread(target=hang_up, daemon=True)
    t.start()
    try:
        r = dom.run("run", "--", "/bin/echo", "never")
    finally:
        srv.close()
        for p in (path, keyfile):
            if os.path.exists(p):
                os.unlink(p)
        t.join(timeout=10)
    assert r.returncode == 125, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    why = (r"the coordinator closed the connection before the session opened \(it was stopping\)(: .*)?" if key else
           r"the coordinator was stopping before the session opened \(its control socket's key is gone\)")
    assert re.fullmatch(r"lazaret: error: cannot open a session after three attempts: " + why + "; run it again",
                        lines[0]), lines[0]
    assert len(seen) == 3


def test_terminal_answers_during_image_builds(dom):
    """Issue 17: image builds (Podman importing into the user's store) run
    back to back while a terminal types; every keystroke is echoed within
    a second, most of them while a build runs, and another terminal joins
    the sandbox meanwhile."""
    tag = "localhost/lz-test/during-build"
    stop = threading.Event()
    builds, running = [], threading.Event()

    def build_loop():
        while not stop.is_set():
            p = dom.popen("image", "build", "busybox", "--tag", tag, stdin=subprocess.DEVNULL)
            running.set()
            out, err = p.communicate(timeout=300)
            builds.append((p.returncode, err))

    t = threading.Thread(target=build_loop, daemon=True)
    try:
        with pty_session(dom) as (pid, fd):
            os.write(fd, b"echo MARK$((0+1))\n")
            _read_until(fd, b"MARK1\r\n", timeout=120)
            t.start()
            assert running.wait(60)
            during, slow = 0, []
            for i in range(2, 12):
                before = len(builds)
                t0 = time.monotonic()
                os.write(fd, f"echo MARK$((0+{i}))\n".encode())
                _read_until(fd, f"MARK{i}\r\n".encode(), timeout=20)
                took = time.monotonic() - t0
                if took > 1.0:
                    slow.append(round(took, 2))
                # No build ended meanwhile: the echo came during one.
                if len(builds) == before:
                    during += 1
                if i == 6:
                    r = dom.run("run", "--", "/bin/echo", "joined")
                    assert r.returncode == 0 and r.stdout == "joined\n", r.stderr
                time.sleep(0.2)
            stop.set()
            t.join(timeout=300)
            assert not slow, f"keystrokes echoed only after {slow} s"
            assert during >= 5, f"only {during} of 10 keystrokes came during a build"
            assert builds and all(rc == 0 for rc, _ in builds), builds
    finally:
        stop.set()
        if t.is_alive():
            t.join(timeout=300)
        podman(dom.lz.user, "rmi", "-f", tag, check=False)


def test_terminal_resize_and_ctrl_c(dom):
    with pty_session(dom) as (pid, fd):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 31, 97, 0, 0))
        # $((...)) makes the marker differ from the echoed input line.
        os.write(fd, b"stty size; echo MARK$((0+1))\n")
        out = _read_until(fd, b"MARK1\r\n")
        assert b"31 97" in out
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 44, 120, 0, 0))
        os.kill(pid, signal.SIGWINCH)
        time.sleep(0.5)
        os.write(fd, b"stty size; echo MARK$((0+2))\n")
        out = _read_until(fd, b"MARK2\r\n")
        assert b"44 120" in out
        os.write(fd, b"sleep 60; echo SLE''PT\n")
        time.sleep(1)
        t0 = time.time()
        os.write(fd, b"\x03")
        os.write(fd, b"echo AFTER$((1+1))\n")
        out = _read_until(fd, b"AFTER2\r\n")
        assert time.time() - t0 < 10
        assert b"SLEPT" not in out
        # Ctrl-Z suspends the foreground job, as in a local terminal.
        os.write(fd, b"sleep 60\n")
        time.sleep(1)
        t0 = time.time()
        os.write(fd, b"\x1a")
        os.write(fd, b"echo SUSP$((1+1)); kill -9 %1\n")
        out = _read_until(fd, b"SUSP2\r\n")
        assert b"Stopped" in out and time.time() - t0 < 10
        # Ctrl-\ quits it.
        os.write(fd, b"sleep 60\n")
        time.sleep(1)
        t0 = time.time()
        os.write(fd, b"\x1c")
        os.write(fd, b"echo QUIT$((1+1))\n")
        out = _read_until(fd, b"QUIT2\r\n")
        assert time.time() - t0 < 10 and b"Quit" in out
        os.write(fd, b"exit 5\n")
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 5
    dom.assert_clean()


def test_terminfo_of_the_host_terminal(dom, lz):
    """A terminal type the image does not know (as with Kitty, Ghostty,
    Alacritty) works: its compiled entry, found through TERMINFO like Kitty
    sets it, is provided read-only under /run/lazaret/terminfo."""
    import hashlib
    src = lz.write("lztest.ti", "xterm-lztest|a terminal only this test knows,\n\tuse=xterm,\n")
    tdir = os.path.join(lz.base, "terminfo")
    os.makedirs(tdir)
    subprocess.run(["tic", "-x", "-o", tdir, src], check=True)
    os.chmod(tdir, 0o755)
    for root, dirs, files in os.walk(tdir):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
    entry = open(os.path.join(tdir, "x", "xterm-lztest"), "rb").read()
    with pty_session(dom, {"TERM": "xterm-lztest", "TERMINFO": tdir}) as (pid, fd):
        os.write(fd, b"md5sum /run/lazaret/terminfo/x/xterm-lztest; echo T=$TERM I=$TERMINFO; "
                     b"echo hi > /run/lazaret/terminfo/x/w 2>/dev/null || echo RO$((1+1))\n")
        out = _read_until(fd, b"RO2")
        assert hashlib.md5(entry).hexdigest().encode() in out
        assert b"T=xterm-lztest I=/run/lazaret/terminfo" in out
        os.write(fd, b"exit\n")
        os.waitpid(pid, 0)
    dom.assert_clean()


def test_missing_prerequisite(lz, busybox_image):
    """runsc not installed: one line naming it and the fix, 125, nothing made."""
    bindir = tool_dir(lz, omit={"runsc"})
    d = Domain(lz, busybox_image)
    r = d.run("run", "--", "/bin/true", env={"PATH": bindir})
    assert r.returncode == 125
    assert r.stderr == ("lazaret: error: runsc (gVisor) is not installed or not in PATH; "
                        "install it: sudo apt-get install runsc\n")
    assert d.domain_dirs() == []
    d.assert_clean()


def test_oversized_frame_drops_that_peer_only(dom):
    a = dom.popen("run", "--", "/bin/sh", "-c", "read x; echo $x")
    wait_sessions(dom, 1)
    h = ctl_frame({"type": "Hello", "version": 1, "cli_pid": 1, "key": ctl_key(dom.socket_path())})
    d, _ = dom.lz.raw(dom.socket_path(), h + struct.pack(">I", 0xffffffff) + b"x" * 1000, env=dom.env)
    assert b"Error" in d
    out, err = a.communicate(input=b"alive\n", timeout=30)
    assert (a.returncode, out) == (0, b"alive\n"), err
    dom.assert_clean()


def git_as(lz, *args, cwd=None):
    env = ["env", "-i", f"HOME={lz.home}", "PATH=/usr/bin:/bin", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
           "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"]
    r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--"] + env + ["git"] + list(args),
                       cwd=cwd or lz.work, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def make_repo(lz):
    git_as(lz, "init", "-q", "-b", "main")
    lz.write("work/tracked.txt", "committed\n")
    git_as(lz, "add", "tracked.txt")
    git_as(lz, "commit", "-q", "-m", "first")
    lz.write("work/dirty.txt", "not committed\n")
    return git_as(lz, "status", "--porcelain")


def test_slow_worktree_is_waited_for(dom, lz):
    """Making the agent's worktree of a large repository on a busy disk can
    take longer than the leader's 10 s for a start (9 s measured here for
    20,000 files right after they were written): the coordinator says so
    before the step, and the run waits. A git whose worktree add takes 11 s
    stands in for that disk."""
    make_repo(lz)
    tools = tool_dir(lz, omit={"git"}, fakes={"git": '#!/bin/sh\n'
                                                   'case " $* " in *" worktree add "*) sleep 11;; esac\n'
                                                   'exec /usr/bin/git "$@"\n'})
    start = time.monotonic()
    r = dom.run("run", "--", "/bin/cat", "/workspace/tracked.txt", env={"PATH": tools}, timeout=120)
    assert (r.returncode, r.stdout) == (0, "committed\n"), r.stderr + dom.log()
    assert time.monotonic() - start > 11
    dom.assert_clean()


def test_leader_gives_up_nothing_outlives_it(dom, lz):
    """A start slower than the leader's limit (a runsc whose create takes
    11 s): the run fails, naming the step, and the coordinator, finding its
    leader gone when it would say "ok", tears everything down."""
    tools = tool_dir(lz, omit={"runsc"}, fakes={"runsc": '#!/bin/sh\n'
                                                     'case " $* " in *" create "*) sleep 11;; esac\n'
                                                     'exec /usr/local/bin/runsc "$@"\n'})
    r = dom.run("run", "--", "/bin/true", env={"PATH": tools}, timeout=120)
    assert r.returncode == 125, r.stderr
    assert "the coordinator did not accept connections within 10 s (start)" in r.stderr, r.stderr
    dom.assert_clean(timeout=60)
    assert "the lazaret that started this coordinator is gone" in dom.log()


def test_branch_mode_worktree(dom, lz):
    """workspace_mode = "branch" (the default): the agent works in its own
    worktree on lazaret/agent-<profile>; the host tree is not touched."""
    before = make_repo(lz)
    r = dom.run("run", "--", "/bin/sh", "-c",
                "ls /workspace; cat /workspace/tracked.txt; echo mine > /workspace/agent.txt; cat /workspace/.git")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "tracked.txt" in lines and "dirty.txt" not in lines and "committed" in lines
    assert f"gitdir: {lz.work}/.git/worktrees/agent-shell" in lines
    # The host's working tree and status are as they were.
    assert not os.path.exists(os.path.join(lz.work, "agent.txt"))
    assert git_as(lz, "status", "--porcelain") == before
    head = git_as(lz, "rev-parse", "HEAD").strip()
    assert git_as(lz, "rev-parse", "--verify", "refs/heads/lazaret/agent-shell").strip() == head
    dom.assert_clean()

    # The next generation reuses the worktree and its branch.
    [domain] = dom.domain_dirs()
    wt = os.path.join(domain, "agent-shell")
    assert open(os.path.join(wt, "agent.txt")).read() == "mine\n"
    r = dom.run("run", "--", "/bin/cat", "/workspace/agent.txt")
    assert (r.returncode, r.stdout) == (0, "mine\n"), r.stderr

    # What the agent commits on its branch, lazaret diff shows on the host.
    git_as(lz, "add", "agent.txt", cwd=wt)
    git_as(lz, "commit", "-q", "-m", "agent work", cwd=wt)
    r = dom.run("diff")
    assert r.returncode == 0, r.stderr
    assert "+++ b/agent.txt" in r.stdout and "+mine" in r.stdout
    dom.assert_clean()


def test_direct_mode(lz, busybox_image):
    make_repo(lz)
    config_before = open(os.path.join(lz.work, ".git", "config")).read()
    d = Domain(lz, busybox_image, extra='workspace_mode = "direct"\n')
    r = d.run("run", "--", "/bin/sh", "-c",
              "cat /workspace/dirty.txt; test -d /workspace/.git && echo dir; "
              "echo '[core]' >> /workspace/.git/config 2>/dev/null && echo WROTE-CONFIG; "
              "mv /workspace/.git /workspace/.git2 2>/dev/null && echo MOVED; "
              "mkdir -p /workspace/.git/hooks && echo x > /workspace/.git/hooks/post-commit && echo hook")
    assert (r.returncode, r.stdout) == (0, "not committed\ndir\nhook\n"), r.stderr
    # The working tree is the host's; .git went through the router.
    assert not os.path.exists(os.path.join(lz.work, ".git", "hooks", "post-commit"))
    assert open(os.path.join(lz.work, ".git", "config")).read() == config_before
    r = d.run("diff")
    assert r.returncode == 125
    assert "no branch lazaret/agent-shell yet" in r.stderr
    d.assert_clean()


def test_branch_mode_needs_a_commit(dom, lz):
    git_as(lz, "init", "-q", "-b", "main")
    r = dom.run("run", "--", "/bin/true")
    assert r.returncode == 125
    assert "has no commit yet" in r.stderr and 'workspace_mode = \\"direct\\"' not in r.stderr
    assert 'set workspace_mode = "direct"' in r.stderr
    dom.assert_clean()


def pause_mounts(user, needle):
    """Mounts containing needle in Podman's rootless namespace (where the git
    router mounts), as seen through the pause process."""
    for d in (f"/tmp/podman-run-{user.pw_uid}", f"/run/user/{user.pw_uid}"):
        p = os.path.join(d, "libpod/tmp/pause.pid")
        if os.path.exists(p):
            pid = open(p).read().strip()
            try:
                return [ln for ln in open(f"/proc/{pid}/mountinfo") if needle in ln]
            except FileNotFoundError:
                return []
    return []


def test_git_router_guards_dot_git(dom, lz):
    """Attacks on the host's .git from inside the sandbox (branch mode): the
    router refuses them, hooks land in the isolated root, and the host's own
    git afterwards runs nothing the sandbox chose."""
    make_repo(lz)
    gd = os.path.join(lz.work, ".git")
    config_before = open(os.path.join(gd, "config")).read()
    marker = os.path.join(lz.base, "pwned")
    script = f"""
export G={gd}
try() {{ if sh -c "$1" 2>/dev/null; then echo "ALLOWED: $1"; else echo "refused: $1"; fi; }}
try 'printf "[core]\\n\\tfsmonitor = touch {marker}\\n" >> $G/config'
try 'printf "[core]\\n\\tpager = touch {marker}\\n" > $G/config'
try 'rm $G/config'
try 'mv $G/config $G/config.old'
try 'echo x > $G/refs/heads/lazaret/prep && mv $G/refs/heads/lazaret/prep $G/config'
try 'echo ../../tmp > $G/commondir'
try 'echo /tmp/objects > $G/objects/info/alternates'
try 'echo 0000000000000000000000000000000000000000 > $G/refs/heads/main'
try 'echo x > $G/packed-refs'
try 'mv $G $G.moved'
try 'rm -rf $G'
try 'printf "[core]\n\tfsmonitor = touch {marker}\n" > $G/config.worktree'
try 'printf "[core]\n\tfsmonitor = touch {marker}\n" > $G/worktrees/agent-shell/config.worktree'
try 'ln -s /tmp $G/refs/heads/lazaret/evil'
try 'ln -sf /tmp/evil-config $G/config'
try 'echo x > $G/info/attributes'
try 'sed -i "s/bare = false/bare = false\n\tfsmonitor = touch {marker}/" $G/config'
mkdir -p $G/hooks && printf '#!/bin/sh\\ntouch {marker}\\n' > $G/hooks/pre-commit && chmod +x $G/hooks/pre-commit && echo hook-written
"""
    # Twice: before and after the host's own git config, which replaces
    # the file by rename (what detached the spec's read-only bind mount).
    for round in range(2):
        r = dom.run("run", "--", "/bin/sh", "-c", script)
        assert r.returncode == 0, r.stderr
        assert "ALLOWED" not in r.stdout, r.stdout
        assert r.stdout.count("refused:") == 17, r.stdout
        assert "hook-written" in r.stdout
        if round == 0:
            git_as(lz, "config", "user.name", "host-user")
            config_before = open(os.path.join(gd, "config")).read()
    assert "git router" in dom.log()
    # The host's .git is as it was, the hook went to the isolated root.
    assert open(os.path.join(gd, "config")).read() == config_before
    assert not os.path.exists(os.path.join(gd, "hooks", "pre-commit"))
    assert not os.path.exists(os.path.join(gd, "objects", "info", "alternates"))
    [domain] = dom.domain_dirs()
    assert os.path.exists(os.path.join(domain, "git-isolated", "hooks", "pre-commit"))
    # The host's own git runs no sandbox-chosen command.
    git_as(lz, "status")
    lz.write("work/more.txt", "x\n")
    git_as(lz, "add", "more.txt")
    git_as(lz, "commit", "-q", "-m", "host commit")
    assert not os.path.exists(marker)
    dom.assert_clean()
    assert pause_mounts(lz.user, domain) == []


def test_git_router_killed_ends_the_sandbox(dom, lz):
    make_repo(lz)
    a = dom.popen("run", "--", "/bin/sleep", "1000")
    wait_sessions(dom, 1)
    [domain] = dom.domain_dirs()
    out = subprocess.run(["pgrep", "-u", lz.user.pw_name, "-f", "lazaret-gitrouter --host-git " + lz.work],
                         capture_output=True, text=True).stdout.split()
    assert len(out) == 1, out
    os.kill(int(out[0]), signal.SIGKILL)
    _, err = a.communicate(timeout=30)
    assert a.returncode == 143
    assert b"the git router stopped unexpectedly" in err
    dom.assert_clean()
    # Its stale mount was detached too.
    assert pause_mounts(lz.user, domain) == []


DEBIAN = "localhost/lazaret/debian:bookworm"
DEBIAN_PACKAGES = "git,ca-certificates,bash,curl,python3,openssh-client"  # verb-image.c's


@pytest.fixture(scope="session")
def debian_image(lazaret_bin, test_user):
    """The Debian image (with git) in the test user's real store, built once
    per machine (about 40 s, from deb.debian.org)."""
    if os.environ.get("LAZARET_TEST_DEBIAN") != "1":
        pytest.skip("LOUD SKIP: git inside the sandbox needs the Debian image, built only with "
                    "LAZARET_TEST_DEBIAN=1 (make check sets it for the gcc pass)")
    # An image built before the package list changed is built again.
    label = podman(test_user, "image", "inspect", "--format", '{{index .Labels "io.lazaret.debian-packages"}}', DEBIAN,
                   check=False)
    if label.returncode != 0 or label.stdout.strip() != DEBIAN_PACKAGES:
        r = subprocess.run(["runuser", "-u", test_user.pw_name, "--", "env", "-i", f"HOME={test_user.pw_dir}",
                            "PATH=/usr/bin:/bin:/usr/sbin:/sbin", lazaret_bin, "image", "build", "debian"],
                           capture_output=True, text=True, timeout=1500, cwd="/")
        assert r.returncode == 0, r.stderr
    return DEBIAN


@pytest.fixture(scope="session")
def node_image(lazaret_bin, test_user):
    """The node image (the Debian image with Node.js and npm from the npm
    registry) in the test user's real store, built once per machine for the
    versions this lazaret pins (read from its help); returns its name and
    the Node.js version."""
    if os.environ.get("LAZARET_TEST_DEBIAN") != "1":
        pytest.skip("LOUD SKIP: Node.js inside the sandbox needs the node image, built only with "
                    "LAZARET_TEST_DEBIAN=1 (make check sets it for the gcc pass)")
    env = ["runuser", "-u", test_user.pw_name, "--", "env", "-i", f"HOME={test_user.pw_dir}",
           "PATH=/usr/bin:/bin:/usr/sbin:/sbin"]
    h = subprocess.run(env + [lazaret_bin, "image", "build", "--help"], capture_output=True, text=True, cwd="/")
    m = re.search(r"Node\.js (\S+) and npm (\S+) in /usr/local", h.stdout)
    assert m, h.stdout
    node, npm = m.groups()
    name = f"localhost/lazaret/node:{node}"
    label = podman(test_user, "image", "inspect", "--format",
                   '{{index .Labels "io.lazaret.node"}} {{index .Labels "io.lazaret.debian-packages"}}', name,
                   check=False)
    if label.returncode != 0 or label.stdout.split() != [node, "npm", npm, DEBIAN_PACKAGES]:
        r = subprocess.run(env + [lazaret_bin, "image", "build", "node"], capture_output=True, text=True,
                           timeout=1500, cwd="/")
        assert r.returncode == 0, r.stderr
    return name, node


def test_debian_files_and_packages_in_the_sandbox(lz, debian_image):
    """Issue 15: on the runsc setup installs, the Debian image's file system
    works as on a machine: ls -l /, stat, find / -xdev, symbolic links, and
    apt-get install of a local .deb (built in the sandbox, nothing fetched)."""
    d = Domain(lz, debian_image)
    script = r"""
ls -l / >/dev/null && echo ls-ok
stat -c '%F %s' /etc/passwd && [ "$(stat -c %s /etc/passwd)" = "$(wc -c </etc/passwd)" ] && echo stat-ok
n=$(find / -xdev 2>/dev/null | wc -l); [ "$n" -gt 5000 ] && echo find-ok
ln -s /etc/hostname /tmp/link && ls -l /tmp/link >/dev/null && [ "$(readlink /tmp/link)" = /etc/hostname ] &&
  [ -L /tmp/link ] && cat /tmp/link >/dev/null && echo symlink-ok
mkdir -p /tmp/p/DEBIAN /tmp/p/usr/local/bin
printf 'Package: lazaret-probe\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: t\n' \
  > /tmp/p/DEBIAN/control
printf '#!/bin/sh\necho probe-ran\n' > /tmp/p/usr/local/bin/lazaret-probe && chmod 755 /tmp/p/usr/local/bin/lazaret-probe
dpkg-deb --build /tmp/p /tmp/probe.deb >/dev/null && apt-get install -y /tmp/probe.deb >/tmp/apt.log 2>&1 &&
  lazaret-probe && dpkg -s lazaret-probe | grep -q 'install ok installed' && echo deb-ok || cat /tmp/apt.log
"""
    r = d.run("run", "--", "/bin/bash", "-c", script, timeout=300)
    assert r.returncode == 0, r.stderr + d.log()
    for ok in ("ls-ok", "stat-ok", "find-ok", "symlink-ok", "probe-ran", "deb-ok"):
        assert ok in r.stdout.splitlines(), r.stdout + r.stderr
    # (stat -c %F alone says "regular empty file": gVisor's statx fills the
    # size only when asked, and coreutils asks only for the type there.)
    assert re.search(r"^regular file [1-9][0-9]*$", r.stdout, re.M), r.stdout
    d.assert_clean()


def test_agent_commits_on_its_branch(lz, debian_image):
    """Real git in the sandbox: the agent commits on lazaret/agent-<profile>
    and the host sees it at once; it cannot move main or change config; a
    host config edit is visible inside at once."""
    make_repo(lz)
    main_before = git_as(lz, "rev-parse", "main").strip()
    d = Domain(lz, debian_image)
    script = r"""
set -u
cd /workspace
export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=a@a
echo work > agent.txt && git add agent.txt && git commit -qm 'agent work' && echo COMMITTED
git update-ref refs/heads/main HEAD 2>/dev/null && echo MOVED-MAIN || echo main-refused
git branch -f main HEAD 2>/dev/null && echo MOVED-MAIN || echo branch-refused
git config core.pager 'touch /tmp/x' 2>/dev/null && echo CONFIG-CHANGED || echo config-refused
git tag agent-tag 2>/dev/null && echo TAGGED || echo tag-refused
echo READY
read line
git config --get lz.marker || echo no-marker
"""
    p = d.popen("run", "--", "/bin/bash", "-c", script)
    buf = b""
    deadline = time.time() + 120
    while b"READY" not in buf and time.time() < deadline:
        chunk = os.read(p.stdout.fileno(), 4096)
        if not chunk:
            break
        buf += chunk
    assert b"READY" in buf, (buf, p.stderr.read() if p.poll() is not None else b"")
    out = buf.decode()
    assert "COMMITTED" in out and "main-refused" in out and "branch-refused" in out, out
    assert "config-refused" in out and "tag-refused" in out, out
    # The host sees the agent's commit at once; main is where it was.
    assert git_as(lz, "log", "-1", "--format=%s", "lazaret/agent-shell").strip() == "agent work"
    assert git_as(lz, "rev-parse", "main").strip() == main_before
    assert git_as(lz, "tag", "--list").strip() == ""
    # A host config edit (git replaces the file by rename) shows inside at once.
    git_as(lz, "config", "lz.marker", "from-the-host")
    rest, err = p.communicate(input=b"go\n", timeout=60)
    assert p.returncode == 0, err
    assert rest.decode().strip().splitlines()[-1] == "from-the-host"
    d.assert_clean()


def test_agent_cannot_shadow_the_persons_objects(lz, debian_image):
    """Issue 40, item 1, from inside the sandbox: the agent writes a pack
    and index of its own that file its bytes under the ID of the person's
    committed file (host git reads packs first and never re-hashes a blob
    for checkout). The index is refused, the person's checkout, diff and
    log show their own bytes, and what git itself writes inside (commits,
    a pack stored by index-pack as a fetch does) is still admitted."""
    from test_gitrouter import FORGE
    make_repo(lz)
    oid = git_as(lz, "rev-parse", "main:tracked.txt").strip()
    d = Domain(lz, debian_image)
    gitdir = os.path.join(lz.work, ".git")
    r = d.run("run", "--", "/usr/bin/python3", "-c", FORGE, gitdir, "pack", oid, "echo pwned", "blob")
    assert r.returncode != 0 and "renamed pack-" in r.stdout and "refused pack-" in r.stdout, r.stdout + r.stderr
    r = d.run("run", "--", "/usr/bin/python3", "-c", FORGE, gitdir, "loose", "ab" * 20, "echo pwned", "blob")
    assert r.returncode != 0 and "refused" in r.stdout, r.stdout + r.stderr
    script = r"""
set -eu
cd /workspace
export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=a@a
for i in 1 2 3; do echo $i > f$i; git add f$i; git commit -qm c$i; done
echo HEAD | git pack-objects --revs --stdout > /tmp/p.pack
git index-pack --stdin < /tmp/p.pack >/dev/null
echo PACKED
"""
    r = d.run("run", "--", "/bin/bash", "-c", script)
    assert r.returncode == 0 and "PACKED" in r.stdout, r.stdout + r.stderr + d.log()
    # The person's file, as host git shows and checks it out.
    assert git_as(lz, "cat-file", "-p", oid) == "committed\n"
    git_as(lz, "checkout", "-q", "--", "tracked.txt")
    with open(os.path.join(lz.work, "tracked.txt")) as f:
        assert f.read() == "committed\n"
    assert git_as(lz, "diff", "main", "--", "tracked.txt") == ""
    assert git_as(lz, "log", "--format=%s", "lazaret/agent-shell").split() == ["c3", "c2", "c1", "first"]
    packs = os.listdir(os.path.join(gitdir, "objects", "pack"))
    assert len([n for n in packs if n.endswith(".idx")]) == 1, packs
    assert not os.path.exists(os.path.join(gitdir, "objects", "ab", "ab" * 19))
    git_as(lz, "fsck", "--no-dangling")
    d.assert_clean()


def test_output_reader_goes_away(dom):
    """lazaret run -- cmd | head: when the reader leaves, the session ends
    as with a local pipe (128 + SIGPIPE), and nothing is left behind."""
    p = subprocess.Popen(dom.cmd("run", "--", "/bin/sh", "-c", "yes lazaret"), cwd=dom.lz.work,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.read(4096)
    assert first.startswith(b"lazaret\n")
    p.stdout.close()
    p.wait(timeout=60)
    assert p.returncode == 141, p.stderr.read()
    dom.assert_clean()


def test_git_router_guards_submodules(dom, lz):
    """The same protection inside .git/modules/*: a submodule's config is
    read-only and its hooks are private."""
    make_repo(lz)
    lib = os.path.join(lz.base, "lib")
    os.makedirs(lib)
    os.chown(lib, lz.user.pw_uid, lz.user.pw_gid)
    git_as(lz, "init", "-q", "-b", "main", cwd=lib)
    lz.write("lib/lib.txt", "lib\n")
    git_as(lz, "add", "lib.txt", cwd=lib)
    git_as(lz, "commit", "-q", "-m", "lib", cwd=lib)
    git_as(lz, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "sub")
    git_as(lz, "commit", "-q", "-m", "add sub")
    gd = os.path.join(lz.work, ".git")
    mconfig = os.path.join(gd, "modules", "sub", "config")
    before = open(mconfig).read()
    marker = os.path.join(lz.base, "pwned-sub")
    script = f"""
export M={gd}/modules/sub
printf "[core]\\n\\tfsmonitor = touch {marker}\\n" >> $M/config 2>/dev/null && echo WROTE || echo refused
mv $M/config $M/config.x 2>/dev/null && echo MOVED || echo refused
mkdir -p $M/hooks && printf '#!/bin/sh\\ntouch {marker}\\n' > $M/hooks/pre-commit && chmod +x $M/hooks/pre-commit && echo hook
"""
    r = dom.run("run", "--", "/bin/sh", "-c", script)
    assert (r.returncode, r.stdout) == (0, "refused\nrefused\nhook\n"), r.stderr
    assert open(mconfig).read() == before
    assert not os.path.exists(os.path.join(gd, "modules", "sub", "hooks", "pre-commit"))
    [domain] = dom.domain_dirs()
    assert os.path.exists(os.path.join(domain, "git-isolated", "modules", "sub", "hooks", "pre-commit"))
    # Host git inside the submodule runs nothing the sandbox chose.
    lz.write("work/sub/more.txt", "x\n")
    git_as(lz, "add", "more.txt", cwd=os.path.join(lz.work, "sub"))
    git_as(lz, "commit", "-q", "-m", "host", cwd=os.path.join(lz.work, "sub"))
    git_as(lz, "status")
    assert not os.path.exists(marker)
    dom.assert_clean()


def alive(pid):
    """A process that exists and is not a zombie."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_kill_coordinator_with_router_then_recover(dom, lz):
    """A coordinator killed with -9: its watchdog finds the router in the
    store, ends it by pid + start time, detaches its mount; the next run
    starts afresh."""
    make_repo(lz)
    a = dom.popen("run", "--", "/bin/sleep", "1000")
    wait_sessions(dom, 1)
    [domain] = dom.domain_dirs()
    routers = subprocess.run(["pgrep", "-u", lz.user.pw_name, "-f", "lazaret-gitrouter --host-git " + lz.work],
                             capture_output=True, text=True).stdout.split()
    assert len(routers) == 1
    [pid] = dom.coordinator_pids()
    os.kill(pid, signal.SIGKILL)
    a.communicate(timeout=30)
    # The watchdog ends it by pid + start time and detaches its mount.
    dom.assert_clean(timeout=10)
    assert not alive(routers[0])
    assert pause_mounts(lz.user, domain) == []
    assert "recovering participant" in dom.log()
    r = dom.run("run", "--", "/bin/sh", "-c", "cat /workspace/tracked.txt")
    assert (r.returncode, r.stdout) == (0, "committed\n"), r.stderr
    dom.assert_clean()
