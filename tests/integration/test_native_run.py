# SPDX-License-Identifier: MIT
"""lazaret run with the native backend (issue 21): the coordinator starts a
sandbox of lazaret-native (--hold) instead of a Podman container, and each
session joins it (--join): one sandbox per Domain, shared by every terminal,
torn down with the last one, gone with its coordinator. The same profile,
workspace trust, masks and protected names (direct mode's workspace
router), branch mode's worktree (its .git read-only for now: status says
so) and the event record apply; what the native backend cannot provide
fails closed before anything starts, naming it.

The attacks run from inside a session as the agent would: write the host's
files, read the host user's secrets and masked files, reach the host's
sockets (the coordinator's own control socket among them), create
namespaces and mounts. Each asserts the failure AND that the host is
unchanged.

Nothing here uses Podman or runsc; network traffic goes to loopback only.
"""
import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import time

import pytest

from conftest import TEST_USER, Lazaret, tool_dir  # noqa: F401 (the harness's user)
from test_native import memory_cgroup_of
from test_run import Domain, busybox_image, git_as, kill_cli  # noqa: F401 (a fixture)

PYTHON = "/usr/bin/python3"
# The attacks' one way to report: each operation's name, and "OK" or its
# errno's name.
TRYIT = """def tryit(name, f):
    try:
        f()
        print(name, "OK")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
"""
# The native backend runs no image; the profile still names one.
IMAGE = "localhost/lazaret/unused:1"


def native(lz, extra="", network='default_allow = []\ndefault_deny = []\n'):
    # Without runtime.memory_cgroup the native backend takes no memory
    # limit (issue 41): these tests say so unless they set one.
    off = "" if "memory_limit" in extra or "memory_cgroup" in network else "memory_limit = 0\n"
    return Domain(lz, IMAGE, extra='backend = "native"\n' + off + extra, network=network)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is gone for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def domain_processes(d):
    """The processes of d's Domain: by their arguments (the holder, the
    router, the CLI) or by their log (the coordinator and its watchdog
    write coordinator.log in the Domain Root)."""
    out = subprocess.run(["ps", "-u", d.lz.user.pw_name, "-o", "pid=,args="], capture_output=True,
                         text=True).stdout
    found = []
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        try:
            log = os.readlink(f"/proc/{pid}/fd/2")
        except OSError:
            log = ""
        if d.data in args or log.startswith(d.data + "/"):
            found.append(line)
    return found


def end_cli(p):
    """End a lazaret run started with popen (the CLI itself, not runuser),
    unless it has ended by itself."""
    if p.poll() is None:
        try:
            kill_cli(p)
        except AssertionError:
            pass  # it ended meanwhile
    p.wait(timeout=30)


def wait_status(d, seconds=20):
    """The running sandbox's status (a session must be up)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        r = d.run("status", "--json")
        if r.returncode == 0:
            st = json.loads(r.stdout)
            if st.get("running") and st.get("sessions"):
                return st
        time.sleep(0.1)
    raise AssertionError("no running native sandbox with a session: " + d.log())


def repo(lz):
    """The workspace made a git repository with one commit; its HEAD."""
    git_as(lz, "init", "-q", "-b", "main")
    lz.write("work/a.txt", "a\n")
    git_as(lz, "add", "-A")
    git_as(lz, "commit", "-q", "-m", "first")
    return git_as(lz, "rev-parse", "HEAD").strip()


def bin_without(lz, missing):
    """A copy of the build's programs without one (lazaret finds its
    helpers beside itself); the directory."""
    bindir = os.path.join(lz.base, f"bin-no-{missing}")
    os.makedirs(bindir)
    os.chmod(bindir, 0o755)
    src = os.path.dirname(lz.binary)
    for name in os.listdir(src):
        if name != missing:
            shutil.copy2(os.path.join(src, name), os.path.join(bindir, name))
    return bindir


def test_native_run_direct_mode(lz):
    """A workspace outside git: the workspace router serves it at
    /workspace (masked names read empty, protected ones read-only); the
    command runs as the user in its own namespaces, sees no host home and
    no process of the host; what it writes in the workspace lands on the
    host."""
    lz.write("work/hello.txt", "from the host\n")
    lz.write("work/.env", "SECRET=host-secret\n")
    lz.write("work/.envrc", "export A=1\n")
    d = native(lz)
    script = r"""
set -u
pwd
cat hello.txt
echo written > out.txt
printf 'env:[%s]\n' "$(cat .env)"
echo x >> .envrc 2>/dev/null && echo ENVRC-CHANGED || echo envrc-refused
id -u
ls /home
ls /proc | grep -c '^[0-9]' > /tmp/n; echo "pids:$(cat /tmp/n)"
"""
    r = d.run("run", "--backend", "native", "--tui=none", "--", "/bin/sh", "-c", script)
    assert r.returncode == 0, r.stderr + d.log()
    lines = r.stdout.splitlines()
    assert lines[0] == "/workspace", r.stdout
    assert lines[1] == "from the host"
    assert lines[2] == "env:[]", "a masked file must read as empty: " + r.stdout
    assert lines[3] == "envrc-refused", r.stdout
    assert lines[4] == str(lz.user.pw_uid)
    assert lines[5] == "sandbox", "only the sandbox's own home: " + r.stdout
    # Its own PID namespace: a handful of processes, not the host's.
    assert int(lines[6].split(":")[1]) < 10, r.stdout
    assert open(os.path.join(lz.work, "out.txt")).read() == "written\n"
    assert open(os.path.join(lz.work, ".env")).read() == "SECRET=host-secret\n"
    assert open(os.path.join(lz.work, ".envrc")).read() == "export A=1\n"
    # Torn down with its last session: no holder, no runtime socket.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (domain_processes(d) or d.runtime_leftovers()):
        time.sleep(0.1)
    assert not domain_processes(d), d.log()
    assert not d.runtime_leftovers()
    assert "native sandbox held by" in d.log()


def test_native_run_branch_mode(lz):
    """Branch mode: the agent's worktree at /workspace, the repository's .git
    through the git router at its own path: the agent commits on its
    branch; .git's config and hooks stay the host's; the host's tree and
    HEAD are unchanged."""
    head = repo(lz)
    config = open(os.path.join(lz.work, ".git", "config")).read()
    d = native(lz)
    p = d.popen("run", "--backend", "native", "--tui=none", "--", "/bin/sh", "-c",
                "echo agent > b.txt; cat a.txt; sleep 30")
    try:
        st = wait_status(d)
        sb = st["sandbox"]
        assert sb["backend"] == "native", sb
        assert "git" not in sb, "routed, not read-only: " + json.dumps(sb)
        assert st["limits"]["pids"]["enforced"] is True, st["limits"]
        # No memory cgroup here: the profile says memory_limit = 0 (no
        # limit), and status says so; what it holds is still measured.
        assert (st["limits"]["memory"]["enforced"], st["limits"]["memory"]["limit_mib"]) == (False, 0), st["limits"]
        assert st["limits"]["memory"]["used_mib"] < 200, st["limits"]
        text = d.run("status")
        assert text.returncode == 0, text.stderr
        assert "native:" in text.stdout and "NOT ENFORCED" not in text.stdout, text.stdout
        assert "MiB held, no limit: nothing: memory_limit = 0" in text.stdout, text.stdout
        script = r"""
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a
cat b.txt
git add -A && git commit -qm 'agent commit' && echo COMMITTED
gd="$(git rev-parse --git-common-dir)"
echo '[core]' >> "$gd/config" 2>/dev/null && echo CONFIG-CHANGED || echo config-refused
printf '#!/bin/sh\ntouch /tmp/pwned\n' > "$gd/hooks/post-checkout" 2>/dev/null; echo hook-tried
"""
        r = d.run("run", "--backend", "native", "--tui=none", "--", "/bin/sh", "-c", script)
        assert r.returncode == 0, r.stderr + d.log()
        out = r.stdout.splitlines()
        assert out[0] == "agent", r.stdout
        assert "COMMITTED" in out, r.stdout + r.stderr
        assert "config-refused" in out, r.stdout
    finally:
        end_cli(p)
    assert not os.path.exists(os.path.join(lz.work, "b.txt"))
    assert git_as(lz, "rev-parse", "HEAD").strip() == head
    assert git_as(lz, "status", "--porcelain") == ""
    assert git_as(lz, "log", "-1", "--format=%s", "lazaret/agent-shell").strip() == "agent commit"
    assert open(os.path.join(lz.work, ".git", "config")).read() == config
    assert not os.path.exists(os.path.join(lz.work, ".git", "hooks", "post-checkout"))


def test_native_sessions_share_one_sandbox(lz):
    """Two terminals, one sandbox: the second sees the first's /tmp and its
    processes; the host's /tmp has neither. Leaving ends it all."""
    d = native(lz)
    marker = f"shared-{os.getpid()}"
    p = d.popen("run", "--backend", "native", "--tui=none", "--", "/bin/sh", "-c",
                f"echo {marker} > /tmp/shared; exec sleep 300")
    try:
        st = wait_status(d)
        init = st["sandbox"]["init_pid"]
        assert alive(init)
        r = d.run("run", "--backend", "native", "--tui=none", "--", "/bin/sh", "-c",
                  "cat /tmp/shared; for p in /proc/[0-9]*; do cat $p/comm; done")
        assert r.returncode == 0, r.stderr + d.log()
        out = r.stdout.split()
        assert out[0] == marker, r.stdout
        assert "sleep" in out, "the first session's process is in the same PID namespace: " + r.stdout
        assert not os.path.exists("/tmp/shared") or marker not in open("/tmp/shared").read()
        assert len(d.status()["sessions"]) == 1  # the second has ended
    finally:
        end_cli(p)
    assert wait_gone(init, 15), "the sandbox outlived its last session: " + d.log()


def test_native_attacks_from_a_session(lz):
    """From inside a session: the host's files, the host user's secrets and
    sockets, namespaces and mounts. Each fails; the host is unchanged."""
    secret_dir = os.path.join(lz.user.pw_dir, ".ssh")
    os.makedirs(secret_dir, exist_ok=True)
    key = os.path.join(secret_dir, f"id_native_{os.getpid()}")
    with open(key, "w") as f:
        f.write("PRIVATE\n")
    os.chown(key, lz.user.pw_uid, lz.user.pw_gid)
    # A pathname socket of the host user's, like ssh-agent's or D-Bus's.
    sock_path = os.path.join(lz.base, "agent.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    os.chmod(sock_path, 0o777)
    srv.listen(4)
    srv.setblocking(False)
    # Outside the workspace and not below /tmp (the sandbox's own /tmp
    # is private, so writing there proves nothing): the user's home.
    outside = os.path.join(lz.user.pw_dir, f"outside-native-{os.getpid()}.txt")
    d = native(lz)
    attack = f"""
import ctypes, errno, os, socket
{TRYIT}tryit("write-outside", lambda: open({outside!r}, "w").write("x"))
tryit("write-usr", lambda: open("/usr/lazaret-native-test", "w").write("x"))
tryit("read-key", lambda: open({key!r}).read())
def agent():
    s = socket.socket(socket.AF_UNIX)
    s.connect({sock_path!r})
tryit("connect-agent", agent)
def coord():
    s = socket.socket(socket.AF_UNIX)
    s.connect("/tmp/lazaret-{lz.user.pw_uid}/x")
tryit("runtime-dir", coord)
libc = ctypes.CDLL(None, use_errno=True)
def unshare():
    if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
tryit("unshare-user", unshare)
def mount():
    if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mount")
tryit("mount", mount)
def tcp():
    s = socket.socket()
    s.settimeout(2)
    s.connect(("127.0.0.1", {{srv_port}}))
tryit("tcp-host-loopback", tcp)
"""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    tcp.setblocking(False)
    attack = attack.replace("{srv_port}", str(tcp.getsockname()[1]))
    lz.write("work/attack.py", attack)
    try:
        r = d.run("run", "--backend", "native", "--tui=none", "--", PYTHON, "attack.py")
        assert r.returncode == 0, r.stderr + d.log()
        got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
        assert got["write-outside"] in ("ENOENT", "EACCES"), got
        assert got["write-usr"] in ("EROFS", "EACCES"), got
        assert got["read-key"] in ("ENOENT", "EACCES"), got
        # The host's /tmp and the socket's directory are not in its root.
        assert got["connect-agent"] in ("ENOENT", "EACCES"), got
        assert got["runtime-dir"] == "ENOENT", got
        assert got["unshare-user"] == "EPERM", got
        assert got["mount"] == "EPERM", got
        # No interface but its own loopback: the host's is another.
        assert got["tcp-host-loopback"] in ("ECONNREFUSED", "ENETUNREACH", "EACCES"), got
        with pytest.raises(BlockingIOError):
            srv.accept()
        with pytest.raises(BlockingIOError):
            tcp.accept()
        assert not os.path.exists(outside)
        assert not os.path.exists("/usr/lazaret-native-test")
        # TERMINFO's directory, read-only where gVisor's sandbox has it.
        r = d.run("run", "--tui=none", "--", "/bin/sh", "-c",
                  "test -d /run/lazaret/terminfo && ! touch /run/lazaret/terminfo/x 2>/dev/null && echo RO")
        assert r.stdout == "RO\n", r.stdout + r.stderr
        assert open(key).read() == "PRIVATE\n"
    finally:
        srv.close()
        tcp.close()
        os.unlink(key)


@pytest.mark.parametrize("case,extra,network,env,want", [
    ("landlock-missing", "", None, {"LAZARET_TEST_LANDLOCK_ABI": "0"}, "Landlock is not available"),
    # Address rules run the sandbox in the sidecar's namespace (issue 45):
    # FS-ONLY has no user namespace of its own to do that from.
    ("allow-egress-fs-only", 'allow_egress = ["192.0.2.0/24"]\n', None, {"LAZARET_TEST_NO_USERNS": "1"},
     "address rules need FULL mode"),
    # Issue 45: persistent_dirs are kept, but not over the sandbox's memory.
    ("persistent-tmp", 'persistent_dirs = ["/tmp/keep"]\n', None, {}, "cannot keep persistent directory /tmp/keep"),
])
def test_native_preflight_fails_closed(lz, case, extra, network, env, want):
    """What the native backend cannot provide is refused before anything
    starts: one line naming it and the way out, exit 125, and no
    coordinator, holder, socket or Domain left behind."""
    kw = {"network": network} if network else {}
    d = native(lz, extra=extra, **kw)
    r = d.run("run", "--tui=none", "--", "/bin/true", env=env)
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    errs = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(errs) == 1 and want in errs[0] and 'backend = "native"' in errs[0], r.stderr
    # Nothing of this Domain runs (other tests' sandboxes may).
    assert not domain_processes(d)
    assert not d.runtime_leftovers()
    assert not d.domain_dirs() or not os.path.exists(os.path.join(d.domain_dirs()[0], "data.mdb"))


def test_native_address_rules_need_slirp4netns_not_podman(lz):
    """Issue 45: the native backend enforces address rules in a network
    namespace the coordinator makes itself (netd in it, slirp4netns its
    uplink), no container: without slirp4netns on PATH the start is refused
    in one line naming it and the two ways out, and nothing is left;
    without podman on PATH the same profile starts, its policy attested."""
    d = native(lz, extra='allow_egress = ["192.0.2.0/24"]\n')
    no_slirp = tool_dir(lz, omit={"slirp4netns"}, name="tools-no-slirp")
    r = d.run("run", "--tui=none", "--", "/bin/true", env={"PATH": no_slirp})
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    errs = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(errs) == 1 and "slirp4netns is not installed or not in PATH" in errs[0], errs
    assert "apt-get install slirp4netns" in errs[0] and "remove allow_egress from the profile" in errs[0], errs
    assert not domain_processes(d)
    assert not d.domain_dirs() or not os.path.exists(os.path.join(d.domain_dirs()[0], "data.mdb"))
    no_podman = tool_dir(lz, omit={"podman"}, name="tools-no-podman")
    r = d.run("run", "--tui=none", "--", "/bin/echo", "ran", env={"PATH": no_podman})
    assert r.returncode == 0 and r.stdout == "ran\n", (r.stdout, r.stderr, d.log()[-2000:])
    assert "attested policy" in d.log(), d.log()
    d.assert_clean()


def test_native_flag_names_the_flag_and_the_inherited_rules(lz):
    """Issue 42: --backend native on a profile that says nothing of a
    backend, under the starter's global default_allow: the error said the
    profile "uses backend = native" and to remove allow_egress it did not
    have. Now it names the flag, where the rules come from, and the way
    out (FS-ONLY, where address rules cannot hold since issue 45); with
    inherit_default_allow = false the same profile starts."""
    d = Domain(lz, IMAGE, extra="memory_limit = 0\n", network='default_allow = ["0.0.0.0/0"]\ndefault_deny = []\n')
    r = d.run("run", "--backend", "native", "--tui=none", "--", "/bin/true", env={"LAZARET_TEST_NO_USERNS": "1"})
    assert r.returncode == 125, (r.stdout, r.stderr)
    errs = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(errs) == 1 and "--backend native (for profile 'shell') runs FS-ONLY" in errs[0], errs
    assert "address rules need FULL mode" in errs[0], errs
    assert "set inherit_default_allow = false in it (names only, through the broker)" in errs[0], errs
    assert 'uses backend = "native"' not in errs[0], errs
    text = open(d.cfg).read().replace("[profiles.shell]\n", "[profiles.shell]\ninherit_default_allow = false\n")
    lz.write("cfg.toml", text)
    r = d.run("run", "--backend", "native", "--tui=none", "--", "/bin/echo", "ran")
    assert r.returncode == 0 and r.stdout == "ran\n", (r.stdout, r.stderr)


def test_native_backend_flag_and_mismatch(lz):
    """--backend native overrides the profile's gvisor; a CLI asking for the
    other backend is refused by the running sandbox, naming both, and never
    silently joins it."""
    d = Domain(lz, IMAGE, extra="memory_limit = 0\n")  # the profile says gvisor; no memory cgroup here
    p = d.popen("run", "--backend", "native", "--tui=none", "--", "/bin/sh", "-c", "exec sleep 300")
    try:
        st = wait_status(d)
        assert st["sandbox"]["backend"] == "native"
        r = d.run("run", "--tui=none", "--", "/bin/true")
        assert r.returncode == 125, (r.stdout, r.stderr)
        assert 'runs with backend "native"' in r.stderr and '"gvisor"' in r.stderr, r.stderr
        bad = d.run("run", "--backend", "docker", "--", "/bin/true")
        assert bad.returncode == 125 and "--backend docker" in bad.stderr, bad.stderr
    finally:
        end_cli(p)


def test_native_coordinator_killed_takes_the_sandbox(lz):
    """SIGKILL of the coordinator: the holder and the sandbox's init die
    with it (PR_SET_PDEATHSIG at each level), and the next run starts
    clean."""
    d = native(lz)
    p = d.popen("run", "--tui=none", "--", "/bin/sh", "-c", "exec sleep 300")
    try:
        st = wait_status(d)
        init, coord = st["sandbox"]["init_pid"], st["coordinator_pid"]
        subprocess.run(["kill", "-KILL", str(coord)], check=True)
        assert wait_gone(init, 10), "the sandbox outlived its coordinator"
    finally:
        end_cli(p)
    # The watchdog cleans up; then a new run works.
    r = d.run("run", "--tui=none", "--", "/bin/echo", "again", timeout=120)
    assert r.returncode == 0 and r.stdout == "again\n", r.stderr + d.log()


def native_escalating(lz, auto_approve):
    """A native Domain with escalation on and auto_approve (a TOML list);
    also its socket directory, made the test user's."""
    sock = os.path.join(lz.base, "sock")
    os.makedirs(sock, mode=0o700, exist_ok=True)
    os.chown(sock, lz.user.pw_uid, lz.user.pw_gid)
    d = native(lz)
    text = open(d.cfg).read().replace("[escalation]\nenabled = false\n",
                                      f"[escalation]\nenabled = true\nauto_approve = {auto_approve}\n")
    lz.write("cfg.toml", text)
    return d, sock


def test_native_escalation(lz):
    """The one door back to the host works the same through the native
    sandbox: lazaret-escalate at /run/lazaret/escalate, the sandbox's
    certificates and the socket's directory read-only beside it; an
    auto-approved command runs on the host, in the workspace, and the audit
    trail has it. The socket's directory cannot be changed from inside."""
    d, sock = native_escalating(lz, '["uname -a", "pwd"]')
    host = subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout
    r = d.run("run", "--tui=none", "--", "/run/lazaret/escalate", "uname", "-a")
    assert (r.returncode, r.stdout) == (0, host), r.stderr + d.log()
    r = d.run("run", "--tui=none", "--", "/run/lazaret/escalate", "pwd")
    assert (r.returncode, r.stdout) == (0, lz.work + "\n"), r.stderr
    r = d.run("run", "--tui=none", "--", "/bin/sh", "-c",
              "ls /run/lazaret/sock; rm -f /run/lazaret/sock/* 2>/dev/null; mkdir /run/lazaret/sock/x 2>/dev/null;"
              " ls /run/lazaret/sock; touch /run/lazaret/certs/x 2>/dev/null || echo certs-ro")
    assert r.returncode == 0, r.stderr
    listed = r.stdout.split()
    assert listed[0] == "escalate.sock" and listed[1] == "escalate.sock" and listed[2] == "certs-ro", r.stdout
    a = d.run("audit", "--json")
    assert a.returncode == 0, a.stderr
    assert a.stdout.count("uname -a") >= 1 and a.stdout.count("pwd") >= 1, a.stdout
    # Gone with the sandbox.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and os.listdir(sock):
        time.sleep(0.1)
    assert os.listdir(sock) == []


# An OpenSSL configuration that fails every program that reads it: its
# provider module does not exist, and config_diagnostics makes that an error
# at the first digest or key.
BROKEN_OPENSSL_CNF = """openssl_conf = openssl_init
config_diagnostics = 1
[openssl_init]
providers = provider_sect
[provider_sect]
bogus = bogus_sect
[bogus_sect]
module = /nonexistent/lazaret-test-provider.so
activate = 1
"""


def test_the_systems_openssl_configuration_is_not_read(lz):
    """Lazaret's programs never read OpenSSL's configuration (crypto_init:
    what they use is fixed, and reading it cost a millisecond of every
    start). One that fails every program reading it, named by OPENSSL_CONF,
    changes nothing: the CLI's keys and digests, the coordinator's and the
    git router's, the escalation's TLS and its audit all work. (Before, the
    run failed with no message at all.)"""
    bad = lz.write("broken-openssl.cnf", BROKEN_OPENSSL_CNF)
    d, _ = native_escalating(lz, '["uname -a"]')
    host = subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout
    env = {"OPENSSL_CONF": bad}
    r = d.run("run", "--tui=none", "--", "/run/lazaret/escalate", "uname", "-a", env=env)
    assert (r.returncode, r.stdout) == (0, host), r.stderr + d.log()
    a = d.run("audit", "--json", env=env)
    assert a.returncode == 0 and "uname -a" in a.stdout, a.stderr
    # The file does fail a program that reads it: the test can fail.
    o = subprocess.run(["openssl", "dgst", "-sha256", "/dev/null"], capture_output=True, text=True,
                       env={**os.environ, "OPENSSL_CONF": bad})
    assert o.returncode != 0, o.stdout


def test_native_warns_of_host_sockets_it_mounts(lz):
    """Landlock guards files, not a Unix socket's connect: the native
    backend's sandbox can reach a host socket in what it mounts, so the
    launch names each one (gVisor reaches none; test_escalation.py)."""
    d = native(lz)
    os.makedirs(os.path.join(lz.work, "deep"))
    path = os.path.join(lz.work, "deep", "agent.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    try:
        r = d.run("run", "--tui=none", "--", "/bin/true")
        assert r.returncode == 0, r.stderr
        assert (f"lazaret: warning: {path} is a Unix socket inside what the sandbox mounts; with the native backend "
                "the sandbox can connect to it: move it out, or use backend = \"gvisor\"") in r.stderr, r.stderr
    finally:
        s.close()
        os.unlink(path)
    r = d.run("run", "--tui=none", "--", "/bin/true")
    assert r.returncode == 0 and "Unix socket" not in r.stderr, r.stderr


def test_native_volumes(lz):
    """Volumes where they say: a read-only one read, not written; a
    read-write one written by every session (each join may write it), the
    host's directory getting it. One over the sandbox's own mounts is
    refused before anything starts, naming it."""
    ro, rw = os.path.join(lz.base, "ro-vol"), os.path.join(lz.base, "rw-vol")
    for p in (ro, rw):
        os.makedirs(p, exist_ok=True)
        os.chown(p, lz.user.pw_uid, lz.user.pw_gid)
    lz.write("ro-vol/f", "read only\n")
    vols = (f'volumes = [{{ host = "{ro}", container = "/data/ro", mode = "ro" }}, '
            f'{{ host = "{rw}", container = "/data/rw", mode = "rw" }}]\n')
    d = native(lz, extra=vols)
    r = d.run("run", "--tui=none", "--", "/bin/sh", "-c",
              "cat /data/ro/f; echo x > /data/ro/g 2>/dev/null || echo ro-refused; echo one > /data/rw/a && echo rw-ok")
    assert r.returncode == 0, r.stderr + d.log()
    assert r.stdout.splitlines() == ["read only", "ro-refused", "rw-ok"], r.stdout
    assert open(os.path.join(rw, "a")).read() == "one\n"
    assert not os.path.exists(os.path.join(ro, "g"))
    bad = native(lz, extra='volumes = [{ host = "' + rw + '", container = "/workspace/v", mode = "rw" }]\n')
    r = bad.run("run", "--tui=none", "--", "/bin/true")
    assert r.returncode == 125 and "cannot take volume /workspace/v" in r.stderr, r.stderr


@pytest.mark.parametrize("backend", ["native", "gvisor"])
def test_volume_the_agent_made_a_link_is_never_bound(lz, busybox_image, backend):  # noqa: F811
    """SECURITY: a volume whose host directory lies in the workspace is a
    name the agent can rewrite. Inside, it replaces that directory with a
    symbolic link to a secret of the user's (an absolute host path, which
    means nothing inside); the next start must not bind what the link
    names: refused in one line naming the volume, the link and the fix,
    nothing started, the secret unread. The directory put back, the volume
    works again."""
    secret = os.path.join(lz.base, "secret")
    os.makedirs(secret)
    with open(os.path.join(secret, "key"), "w") as f:
        f.write("CANARY-KEY\n")
    for p in (secret, os.path.join(secret, "key")):
        os.chown(p, lz.user.pw_uid, lz.user.pw_gid)
    cache = os.path.join(lz.work, "cache")
    os.makedirs(cache)
    os.chown(cache, lz.user.pw_uid, lz.user.pw_gid)
    vol = f'volumes = [{{ host = "{cache}", container = "/cache", mode = "rw" }}]\n'
    d = native(lz, extra=vol) if backend == "native" else Domain(lz, busybox_image, extra=vol)
    r = d.run("run", "--tui=none", "--", "/bin/sh", "-c",
              f"echo kept > /cache/f && rm -rf /workspace/cache && ln -s {secret} /workspace/cache && echo swapped")
    assert r.returncode == 0 and "swapped" in r.stdout, r.stdout + r.stderr + d.log()[-2000:]
    assert os.path.islink(cache) and os.readlink(cache) == secret
    r = d.run("run", "--tui=none", "--", "/bin/sh", "-c", "cat /cache/key; ls /cache")
    assert "CANARY-KEY" not in r.stdout, r.stdout
    assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
    errs = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(errs) == 1 and "volume /cache" in errs[0] and "symbolic link" in errs[0], errs
    d.assert_clean()
    os.unlink(cache)
    os.makedirs(cache)
    os.chown(cache, lz.user.pw_uid, lz.user.pw_gid)
    r = d.run("run", "--tui=none", "--", "/bin/sh", "-c", "echo back > /cache/g && cat /cache/g")
    assert r.returncode == 0 and r.stdout == "back\n", r.stdout + r.stderr
    assert open(os.path.join(secret, "key")).read() == "CANARY-KEY\n" and os.listdir(secret) == ["key"]


def test_volume_inside_another_agents_workspace_made_a_link_is_never_bound(lz):
    """SECURITY: profile other's volume lies in the workspace of another
    profile's agent (direct mode). That agent replaces the volume's
    directory with a symbolic link to a secret of the person's; other's next
    start, in a workspace of its own, must not bind what the link names:
    refused in one line naming the link, the secret unread; and so is a
    profile of another configuration with another data root (the record is
    the person's, not a data root's). It stays refused when the other
    Domain's launch-spec.json is gone (the record keeps it), and when the
    record is gone (before the first one: the Domains' specs stand for it,
    and the next coordinator makes it again)."""
    secret = os.path.join(lz.base, "secret")
    os.makedirs(secret)
    with open(os.path.join(secret, "key"), "w") as f:
        f.write("CANARY-KEY\n")
    shared = os.path.join(lz.work, "shared")
    other = os.path.join(lz.base, "other-work")
    os.makedirs(shared)
    os.makedirs(other)
    for p in (secret, os.path.join(secret, "key"), shared, other):
        os.chown(p, lz.user.pw_uid, lz.user.pw_gid)
    d = native(lz)
    # The person's records (and this one) in a place of this test's own.
    xdg = os.path.join(lz.base, "xdg")
    os.makedirs(xdg)
    os.chown(xdg, lz.user.pw_uid, lz.user.pw_gid)
    d.env["XDG_DATA_HOME"] = xdg
    lz.write("cfg.toml", open(d.cfg).read() + f"""
[profiles.other]
backend = "native"
memory_limit = 0
volumes = [{{ host = "{shared}", container = "/shared", mode = "rw" }}]
""")
    # A second configuration, with a data root of its own.
    data2 = os.path.join(lz.base, "data2")
    os.makedirs(data2)
    os.chown(data2, lz.user.pw_uid, lz.user.pw_gid)
    cfg2 = lz.write("cfg2.toml", open(d.cfg).read().replace(f'data_root = "{d.data}"', f'data_root = "{data2}"'))
    assert data2 in open(cfg2).read()

    def run_other(script, cfg=d.cfg):
        return lz.run("--config", cfg, "run", "other", "--tui=none", "--", "/bin/sh", "-c", script,
                      cwd=other, env=d.env, timeout=120)

    r = run_other("echo from-b > /shared/f && cat /shared/f")
    assert r.returncode == 0 and r.stdout == "from-b\n", r.stdout + r.stderr + d.log()[-2000:]
    r = d.run("run", "shell", "--tui=none", "--", "/bin/sh", "-c",
              f"rm -rf /workspace/shared && ln -s {secret} /workspace/shared && echo swapped")
    assert r.returncode == 0 and "swapped" in r.stdout, r.stdout + r.stderr + d.log()[-2000:]
    assert os.path.islink(shared) and os.readlink(shared) == secret

    def refused(cfg=d.cfg):
        r = run_other("cat /shared/key; ls /shared", cfg)
        assert "CANARY-KEY" not in r.stdout, r.stdout
        assert r.returncode == 125, (r.returncode, r.stdout, r.stderr)
        errs = [line for line in r.stderr.splitlines() if line.strip()]
        assert len(errs) == 1 and "volume /shared" in errs[0] and f"{shared} is a symbolic link" in errs[0] \
            and "a tree an agent was given" in errs[0], errs

    refused()
    refused(cfg2)
    record = os.path.join(xdg, "lazaret", "agent-trees")
    assert lz.work.encode() + b"\0" in open(record, "rb").read()
    # The other Domain's spec gone: the record still names its workspace.
    specs = [os.path.join(x, "launch-spec.json") for x in d.domain_dirs()]
    # The spec's JSON ends at a NUL; the policy follows it.
    mine = [p for p in specs
            if os.path.exists(p) and json.loads(open(p, "rb").read().split(b"\0")[0])["workspace"] == lz.work]
    assert len(mine) == 1, specs
    saved = open(mine[0], "rb").read()
    os.unlink(mine[0])
    refused()
    # The record gone (as before the first): the Domains' specs stand for
    # it, and the next coordinator makes it again from them.
    with open(mine[0], "wb") as f:
        f.write(saved)
    os.chown(mine[0], lz.user.pw_uid, lz.user.pw_gid)
    os.unlink(record)
    refused()
    assert not os.path.exists(record)
    r = run_other("true")
    assert r.returncode == 125 and not os.path.exists(record), r.stderr
    r = d.run("run", "shell", "--tui=none", "--", "true")
    assert r.returncode == 0, r.stdout + r.stderr
    assert lz.work.encode() + b"\0" in open(record, "rb").read()
    refused()
    assert open(os.path.join(secret, "key")).read() == "CANARY-KEY\n" and os.listdir(secret) == ["key"]


def test_volume_holding_lazarets_own_configuration_is_never_read_write(lz):
    """SECURITY: a read-write volume that holds the person's configuration
    file (or its directory), or the records of what they trusted, lets the
    agent rewrite what configures its next sandbox (auto_approve, volumes,
    the network): the next start would read what the agent wrote. Refused
    in one line naming the volume, the file and the fix; nothing started;
    read-only, or a volume beside the file, runs."""
    conf = os.path.join(lz.base, "conf")
    xdg = os.path.join(lz.base, "xdg")
    for p in (conf, os.path.join(conf, "cache"), xdg):
        os.makedirs(p)
        os.chown(p, lz.user.pw_uid, lz.user.pw_gid)
    d = native(lz)
    moved = os.path.join(conf, "cfg.toml")
    text = open(d.cfg).read()

    def with_volume(host, mode):
        lz.write(moved, text + f'volumes = [{{ host = "{host}", container = "/v", mode = "{mode}" }}]\n')

    def run(*cmd, env=None):
        return lz.run("--config", moved, "run", "--tui=none", "--", *cmd, env={**d.env, **(env or {})},
                      timeout=120)

    for host, env, what in ((conf, None, f"holds your configuration file {moved}"),
                            (xdg, {"XDG_DATA_HOME": xdg},
                             f"holds the record of the workspaces you trusted {xdg}/lazaret/trusted-workspaces")):
        if env:
            os.makedirs(os.path.join(xdg, "lazaret"), exist_ok=True)
            os.chown(os.path.join(xdg, "lazaret"), lz.user.pw_uid, lz.user.pw_gid)
        with_volume(host, "rw")
        r = run("/bin/sh", "-c", "echo '[profiles.shell]' >> /v/cfg.toml; echo WROTE", env=env)
        assert r.returncode == 125 and "WROTE" not in r.stdout, (r.returncode, r.stdout, r.stderr)
        errs = [line for line in r.stderr.splitlines() if line.strip()]
        assert len(errs) == 1 and "volume /v" in errs[0] and what in errs[0] and 'mode = "ro"' in errs[0], errs
        d.assert_clean()
        # Read-only: it runs, and cannot write.
        with_volume(host, "ro")
        r = run("/bin/sh", "-c", "echo x >> /v/probe 2>/dev/null && echo WROTE; echo RAN", env=env)
        assert r.returncode == 0 and r.stdout == "RAN\n", r.stdout + r.stderr
    # A volume beside the file, not holding it, is the person's to give.
    with_volume(os.path.join(conf, "cache"), "rw")
    r = run("/bin/sh", "-c", "echo mine > /v/f && cat /v/f")
    assert r.returncode == 0 and r.stdout == "mine\n", r.stdout + r.stderr
    assert open(moved).read().endswith(f'volumes = [{{ host = "{os.path.join(conf, "cache")}", container = "/v", '
                                       'mode = "rw" }]\n')


@pytest.mark.parametrize("backend", ["native", "gvisor"])
def test_volume_swapped_while_the_sandbox_starts_is_not_what_is_bound(lz, busybox_image, backend):  # noqa: F811
    """SECURITY: the race behind the test above. Another agent writing the
    workspace swaps the volume's directory for a link to a secret of the
    person's after launch checked it and before the sandbox binds it (here
    at the moment the backend starts: Podman's `run` for gVisor,
    lazaret-native for the native backend, through a wrapper of either).
    gVisor's Podman is given a stage in the Domain, bound from a
    descriptor of what launch checked, never the volume's name; the native
    backend binds only what launch checked. Either way the secret is not
    read: gVisor binds the directory launch checked (moved, but the same
    one), the native backend refuses the start."""
    secret = os.path.join(lz.base, "secret")
    os.makedirs(secret)
    with open(os.path.join(secret, "key"), "w") as f:
        f.write("CANARY-KEY\n")
    cache = os.path.join(lz.work, "cache")
    os.makedirs(cache)
    with open(os.path.join(cache, "mine"), "w") as f:
        f.write("mine\n")
    for p in (secret, os.path.join(secret, "key"), cache, os.path.join(cache, "mine")):
        os.chown(p, lz.user.pw_uid, lz.user.pw_gid)
    swap = f"mv {cache} {cache}.real && ln -s {secret} {cache}"
    if backend == "gvisor":
        real = shutil.which("podman", path="/usr/bin:/bin")
        fake = {"podman": f"""#!/bin/sh
case " $* " in
*" run "*lazaret-coord-*) {swap} ;;
esac
exec {real} "$@"
"""}
    else:
        real = os.path.join(os.path.dirname(lz.binary), "lazaret-native")
        fake = None
    vol = f'volumes = [{{ host = "{cache}", container = "/cache", mode = "rw" }}]\n'
    if backend == "gvisor":
        tools = tool_dir(lz, fakes=fake)
        d = Domain(lz, busybox_image, extra=vol)
        r = d.run("run", "--tui=none", "--", "/bin/sh", "-c", "cat /cache/*", env={"PATH": tools})
        assert "CANARY-KEY" not in r.stdout, r.stdout
        assert r.returncode == 0 and r.stdout == "mine\n", r.stdout + r.stderr + d.log()[-2000:]
    else:
        # lazaret-native next to lazaret: a copy of the programs whose
        # lazaret-native swaps first.
        bindir = os.path.join(lz.base, "bin")
        shutil.copytree(os.path.dirname(lz.binary), bindir)
        os.rename(os.path.join(bindir, "lazaret-native"), os.path.join(bindir, "lazaret-native.real"))
        with open(os.path.join(bindir, "lazaret-native"), "w") as f:
            f.write(f"#!/bin/sh\ncase \" $* \" in *\" --hold \"*) {swap} ;; esac\n"
                    f"exec {bindir}/lazaret-native.real \"$@\"\n")
        os.chmod(os.path.join(bindir, "lazaret-native"), 0o755)
        os.chmod(bindir, 0o755)
        other = Lazaret(os.path.join(bindir, "lazaret"), lz.user, lz.base)
        d = native(other, extra=vol)
        r = d.run("run", "--tui=none", "--", "/bin/sh", "-c", "cat /cache/*")
        assert "CANARY-KEY" not in r.stdout, r.stdout
        assert r.returncode == 125 and "is no longer what lazaret checked" in r.stderr, r.stdout + r.stderr
    d.assert_clean()
    assert os.path.islink(cache) and open(os.path.join(secret, "key")).read() == "CANARY-KEY\n"


def test_native_pids_limit(lz):
    """pids_limit in the native sandbox: RLIMIT_NPROC, counted in its own
    user namespace. With 40 processes of the same user already running on
    the host, a loop of sleepers inside still starts a dozen (the host's do
    not count), and fails at the limit (16) with EAGAIN; nothing of it is
    left."""
    host = [subprocess.Popen(["runuser", "-u", lz.user.pw_name, "--", "sleep", "60"]) for _ in range(40)]
    try:
        d = native(lz, extra="pids_limit = 16\n")
        r = d.run("run", "--tui=none", "--", "/bin/sh", "-c",
                  "n=0; while [ $n -lt 100 ]; do sleep 30 & n=$((n+1)); echo $n; done", timeout=120)
        out = r.stdout + r.stderr
        started = int(r.stdout.split()[-1])
        assert 5 < started < 16, out
        assert "Cannot fork" in r.stderr, out  # dash's words for EAGAIN from fork()
        st = d.run("run", "--tui=none", "--", "/bin/true")
        assert st.returncode == 0, st.stderr
    finally:
        for p in host:
            p.kill()
            p.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and domain_processes(d):
        time.sleep(0.1)
    assert not domain_processes(d)


@contextlib.contextmanager
def without_setups_memory_cgroup():
    """The host as the test user sees it after a reboot, before setup ran
    again: a cgroup v1 memory hierarchy with no lazaret-USER in it. A
    private mount namespace whose /sys/fs/cgroup/memory is an empty cgroup
    of root's, bound over it (the real one, which other tests use, is left
    alone). Yields the prefix a command runs under."""
    if not os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        pytest.skip("SKIPPED LOUDLY: this host has no cgroup v1 memory hierarchy (cgroup v2 is not supported yet)")
    t = f"/sys/fs/cgroup/memory/lazaret-t-{secrets.token_hex(4)}"
    os.mkdir(t)
    try:
        yield ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /sys/fs/cgroup/memory && exec "$@"', t]
    finally:
        os.rmdir(t)


def test_native_memory_limit_without_a_memory_cgroup_is_refused(lz):
    """Issue 41, item 10 (decision 20): on the host's kernel only a memory
    cgroup holds memory_limit (a watch of what processes map misses a
    memfd none maps), so with neither runtime.memory_cgroup nor the one
    setup gives the user (issue 42: as after a reboot) a limit is refused
    before anything starts, one error saying why there is none and the
    fixes, instead of a warning while 1 GiB sits in a memfd under a limit
    of 256 MiB. Said off (memory_limit = 0), the sandbox runs and status
    says nothing limits its memory."""
    lz.write("work/hide.py", HIDDEN_MEMORY.replace("300 * (1 << 20)", "1024 * (1 << 20)"))
    d = native(lz, extra="memory_limit = 256\n")
    with without_setups_memory_cgroup() as prefix:
        r = subprocess.run(prefix + d.cmd("run", "--tui=none", "--", PYTHON, "hide.py", "memfd"), cwd=lz.work,
                           capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "still running" not in r.stdout, r.stdout
    errs = [x for x in r.stderr.splitlines() if "error" in x]
    assert len(errs) == 1, r.stderr
    assert ("memory_limit = 256 MiB" in errs[0] and "runtime.memory_cgroup is not set" in errs[0]
            and f"there is no /sys/fs/cgroup/memory/lazaret-{TEST_USER} (sudo scripts/setup.sh --memory-cgroup "
                f"{TEST_USER} makes it; a reboot removes it)" in errs[0]
            and "memory_limit = 0" in errs[0]), errs[0]
    assert not domain_processes(d) and not d.runtime_leftovers()
    d = native(lz, extra="memory_limit = 0\n")
    p = d.popen("run", "--tui=none", "--", "/bin/sh", "-c", "exec sleep 300")
    try:
        mem = wait_status(d)["limits"]["memory"]
        assert (mem["limit_mib"], mem["enforced"]) == (0, False), mem
        assert mem["enforced_by"].startswith("nothing: memory_limit = 0"), mem
    finally:
        end_cli(p)


# Shared memory the watch cannot see: pages a process wrote and then let
# go of without freeing them (a memfd only a descriptor holds, a shared
# mapping cut down to one page, SysV segments detached), 300 MiB of each.
HIDDEN_MEMORY = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
print(open("/proc/self/cgroup").read(), flush=True)
CHUNK = 16 << 20
for i in range(300 * (1 << 20) // CHUNK):
    if sys.argv[1] == "memfd":
        fd = os.memfd_create("x")
        os.write(fd, b"x" * CHUNK)
    elif sys.argv[1] == "shared":
        p = libc.mmap(None, CHUNK, 3, 0x01 | 0x20, -1, 0)
        ctypes.memset(p, 1, CHUNK)
        libc.munmap(p + 4096, CHUNK - 4096)
    elif sys.argv[1] == "sysv":
        p = libc.shmat(libc.shmget(0, CHUNK, 0o1600), None, 0)
        ctypes.memset(p, 1, CHUNK)
        libc.shmdt(p)
    else:
        globals().setdefault("held", []).append(bytearray(b"x" * CHUNK))
time.sleep(5)
print("still running", flush=True)
"""


def memory_cgroup():
    return memory_cgroup_of(pwd.getpwnam(TEST_USER))


def native_in_cgroup(lz, extra):
    return native(lz, extra=extra, network=f'default_allow = []\ndefault_deny = []\n[runtime]\n'
                                            f'memory_cgroup = "{memory_cgroup()}"\n')


def sandbox_cgroups():
    d = memory_cgroup()
    return sorted(x for x in os.listdir(d) if x.startswith("lazaret-"))


@pytest.mark.parametrize("how", ["memfd", "shared", "sysv", "process"])
def test_native_memory_cgroup_holds_what_the_watch_cannot_see(lz, how):
    """With runtime.memory_cgroup the sandbox's processes run in a memory
    cgroup of their own limited to memory_limit: 300 MiB of shared memory
    no process maps (which the coordinator's watch does not see: the
    SECURITY hole this closes) or of a process's own cannot be held under
    memory_limit = 128. The kernel ends the process, the sandbox stops, the
    terminal is told why; the cgroup is removed with the sandbox, and
    nothing is left. Under a larger limit the same program runs to its end."""
    lz.write("work/hidden.py", HIDDEN_MEMORY)
    d = native_in_cgroup(lz, "memory_limit = 128\n")
    r = d.run("run", "--tui=none", "--", PYTHON, "hidden.py", how, timeout=120)
    assert r.returncode == 125, r.stdout + r.stderr + d.log()
    assert "still running" not in r.stdout, r.stdout
    assert ("the sandbox reached its memory limit: the kernel ended a process in it" in r.stderr
            and "memory_limit = 128 MiB" in r.stderr), r.stderr
    assert "watched by the coordinator" not in r.stderr, r.stderr
    mine = f"/lazaret-{TEST_USER}/lazaret-"
    assert mine in r.stdout, "the command ran in the sandbox's own memory cgroup: " + r.stdout
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (domain_processes(d) or sandbox_cgroups()):
        time.sleep(0.1)
    assert not domain_processes(d)
    assert not sandbox_cgroups(), "the sandbox's memory cgroup outlived it"
    if how in ("memfd", "process"):
        d2 = native_in_cgroup(lz, "memory_limit = 1024\n")
        r = d2.run("run", "--tui=none", "--", PYTHON, "hidden.py", how, timeout=120)
        assert r.returncode == 0 and "still running" in r.stdout, r.stdout + r.stderr


def test_native_memory_cgroup_in_status_and_gone_with_the_coordinator(lz):
    """Status says the kernel enforces memory_limit, and how much is held;
    the cgroup holds the sandbox's init. A coordinator killed outright: its
    watchdog's recovery removes the cgroup (its processes died with the
    holder). One a dead coordinator left all the same (named after a
    process that is gone) the next start removes; a live one's it leaves."""
    d = native_in_cgroup(lz, "memory_limit = 256\n")
    p = d.popen("run", "--tui=none", "--", "/bin/sleep", "60")
    try:
        st = wait_status(d)
        mem = st["limits"]["memory"]
        assert mem["enforced"] is True and "the kernel" in mem["enforced_by"], mem
        assert isinstance(mem["used_mib"], int) and mem["used_mib"] < 256, mem
        (cg,) = sandbox_cgroups()
        assert mem["cgroup"] == os.path.join(memory_cgroup(), cg), mem
        procs = open(os.path.join(memory_cgroup(), cg, "cgroup.procs")).read().split()
        assert str(st["sandbox"]["init_pid"]) in procs, (procs, st["sandbox"])
        coord = int(cg.split("-")[1])  # lazaret-PID-START: the coordinator's
        with open(f"/proc/{coord}/stat") as f:
            assert cg.split("-")[2] == f.read().rsplit(")", 1)[1].split()[19], "named after its start time"
        os.kill(coord, signal.SIGKILL)
    finally:
        end_cli(p)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (domain_processes(d) or sandbox_cgroups()):
        time.sleep(0.1)
    assert not domain_processes(d)
    assert not sandbox_cgroups(), "the killed coordinator's cgroup outlived its recovery"
    # A dead coordinator's (no such process), and a live process's.
    dead = os.path.join(memory_cgroup(), "lazaret-999999999-1")
    with open("/proc/self/stat") as f:
        live = os.path.join(memory_cgroup(), f"lazaret-{os.getpid()}-{f.read().rsplit(')', 1)[1].split()[19]}")
    for c in (dead, live):
        subprocess.run(["runuser", "-u", TEST_USER, "--", "mkdir", c], check=True)
    try:
        r = d.run("run", "--tui=none", "--", "/bin/true")
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and sandbox_cgroups() != [os.path.basename(live)]:
            time.sleep(0.1)
        assert sandbox_cgroups() == [os.path.basename(live)]
    finally:
        for c in (dead, live):
            if os.path.isdir(c):
                os.rmdir(c)


def test_native_profile_needs_no_image_and_finds_setups_memory_cgroup(lz):
    """Issue 42, item 8: a profile that says backend = "native" names no
    image (it runs none), and with the default memory_limit it runs with no
    workaround: the memory cgroup setup gave the user is found without
    runtime.memory_cgroup (nothing wrote that key), the command runs in a
    cgroup of its own there, status says the kernel holds the limit, and
    nothing warns. gVisor still needs the image: the same profile run with
    --backend gvisor (or made a Kubernetes pod), and one that leaves backend
    out, are one clear error each, and nothing starts; that one runs with
    --backend native (issue 45: a native launch needs no image), and status
    reads it."""
    parent = memory_cgroup()  # a loud skip without setup's
    d = Domain(lz, IMAGE, extra='backend = "native"\n', runsc_network="sandbox")
    text = open(d.cfg).read()
    assert f'image = "{IMAGE}"\n' in text and "memory_limit" not in text and "[runtime]" not in text
    lz.write("cfg.toml", text.replace(f'image = "{IMAGE}"\n', ""))
    r = d.run("run", "--tui=none", "--", "/bin/true")
    assert r.returncode == 0, r.stdout + r.stderr
    r = d.run("run", "--tui=none", "--", "/bin/sh", "-c", "grep memory /proc/self/cgroup")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"/lazaret-{TEST_USER}/lazaret-" in r.stdout, "in a cgroup of its own in setup's: " + r.stdout
    assert "memory_cgroup" not in r.stderr and "warning" not in r.stderr, r.stderr
    p = d.popen("run", "--tui=none", "--", "/bin/sleep", "60")
    try:
        mem = wait_status(d)["limits"]["memory"]
        assert (mem["limit_mib"], mem["enforced"]) == (8192, True), mem
        assert mem["enforced_by"].startswith("the kernel"), mem
        assert os.path.dirname(mem["cgroup"]) == parent, mem
    finally:
        end_cli(p)
    r = d.run("kube")  # a pod runs an image too
    assert r.returncode == 65 and r.stderr.splitlines() == [
        "lazaret: error: profile shell names no image (it says backend = \"native\"), and a Kubernetes pod runs one: "
        "add image = \"REGISTRY/NAME@sha256:...\" to [profiles.shell]"] and r.stdout == "", r.stdout + r.stderr
    marker = os.path.join(lz.work, "ran")
    r = d.run("run", "--backend", "gvisor", "--tui=none", "--", "/bin/touch", "/workspace/ran")
    errs = [x for x in r.stderr.splitlines() if "error" in x]
    assert r.returncode == 125 and len(errs) == 1, r.stderr
    assert ("--backend gvisor runs an image, and profile 'shell' names none" in errs[0]
            and "add image = " in errs[0] and "[profiles.shell]" in errs[0]), errs[0]
    lz.write("cfg.toml", text.replace(f'image = "{IMAGE}"\n', "").replace('backend = "native"\n', ""))
    for args, status in ((("run", "--tui=none", "--", "/bin/touch", "/workspace/ran"), 125),
                         (("config", "check"), 65)):
        r = d.run(*args)
        assert r.returncode == status, r.stdout + r.stderr
        assert r.stderr.splitlines() == [
            f"{d.cfg}:10:11: profiles.shell.image is required: the image gVisor runs the sandbox from (add image = "
            "\"localhost/lazaret/debian:bookworm\", which 'lazaret image build debian' makes), or say backend = "
            "\"native\" to run the host's own programs"], r.stderr
    assert not os.path.exists(marker)
    r = d.run("run", "--backend", "native", "--tui=none", "--", "/bin/sh", "-c",
              "touch /workspace/ran; grep memory /proc/self/cgroup")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"/lazaret-{TEST_USER}/lazaret-" in r.stdout, "the native sandbox's own cgroup: " + r.stdout
    assert os.path.exists(marker)
    os.unlink(marker)
    r = d.run("status")  # a verb that starts nothing needs no image either
    assert "image is required" not in r.stderr and r.returncode != 65, r.stdout + r.stderr
    r = d.run("kube")
    assert r.returncode == 65 and r.stderr.splitlines() == [
        "lazaret: error: profile shell names no image, and a Kubernetes pod runs one: "
        "add image = \"REGISTRY/NAME@sha256:...\" to [profiles.shell]"] and r.stdout == "", r.stdout + r.stderr
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and domain_processes(d):
        time.sleep(0.1)
    assert not domain_processes(d) and not d.runtime_leftovers()


def test_native_memory_cgroup_bad_config(lz):
    """runtime.memory_cgroup must be a cgroup v1 memory directory the user
    may make cgroups in: anything else is one error naming it, and nothing
    runs."""
    marker = os.path.join(lz.work, "ran")
    for path, why in (("/tmp", "is not a directory of a cgroup file system"),
                      ("/sys/fs/cgroup/memory", "you may not make cgroups in it"),
                      ("/sys/fs/cgroup/pids", "is not in a cgroup v1 memory hierarchy")):
        d = native(lz, network=f'default_allow = []\ndefault_deny = []\n[runtime]\nmemory_cgroup = "{path}"\n')
        r = d.run("run", "--tui=none", "--", "/bin/touch", "/workspace/ran")
        assert r.returncode != 0 and "runtime.memory_cgroup" in r.stderr and why in r.stderr, r.stderr
        assert not os.path.exists(marker)


def test_native_processes_on_record(lz):
    """The native sandbox has no trace points: its processes are observed
    by a scan of /proc. Each program the session runs is on the record
    with its command line, its directory as the sandbox sees it and its
    session, marked observed_by "scan"; a fork that never execs, a process
    already ending and lazaret-native's own are not; an orphan the init
    took stays on its session. Status says how they are observed, and the
    report lists them."""
    from test_events import events
    d = native(lz)
    script = ("sleep 0.4; /usr/bin/python3 -c 'import time; time.sleep(0.4)' arg1; "
              "cd /tmp && sleep 0.4; (sleep 0.6 &); ( : ; sleep 0.3 ); exit 0")
    p = d.popen("run", "--tui=none", "--", "/bin/sh", "-c", script)
    try:
        st = wait_status(d)
        pr = st["events"]["processes"]
        assert pr["observed"] is True and "scan" in pr["via"], pr
        r = d.run("status")
        assert "processes   observed (a scan of /proc" in r.stdout, r.stdout
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    finally:
        end_cli(p)

    def procs(evs):
        return [e for e in evs if e["source"] == "process" and e["kind"] == "started"]

    evs = events(d, want=lambda evs: len(procs(evs)) >= 6)
    [session] = [e["session"] for e in evs if e["source"] == "session" and e["kind"] == "started"]
    ps = procs(evs)
    for e in ps:
        assert e["data"]["observed_by"] == "scan", e
        assert e["data"]["argv"] and e["data"]["path"], "only programs that run: " + repr(e)
        assert "lazaret-native" not in e["data"]["path"], e
        assert e["session"] == session, e
    by = {}
    for e in ps:
        by.setdefault(" ".join(e["data"]["argv"]), []).append(e["data"])
    assert by["/bin/sh -c " + script][0]["cwd"] == "/workspace", by
    assert by["/bin/sh -c " + script][0]["ppid"] == 0, "a joined command's parent is outside"
    py = by["/usr/bin/python3 -c import time; time.sleep(0.4) arg1"][0]
    assert py["cwd"] == "/workspace" and py["path"].startswith("/usr/bin/python3"), py
    assert py["ppid"] == by["/bin/sh -c " + script][0]["pid"], py
    assert [x["cwd"] for x in by["sleep 0.4"]] == ["/workspace", "/tmp"], by["sleep 0.4"]
    assert len(by["sleep 0.6"]) == 1 and len(by["sleep 0.3"]) == 1, by  # the orphan, the subshell's exec
    # The subshell that forked and never exec'd is not a program of its own.
    assert len(by["/bin/sh -c " + script]) == 1, by
    r = d.run("report", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "time.sleep(0.4)" in r.stdout and "sleep 0.6" in r.stdout.replace('", "', " "), r.stdout[:2000]


def test_native_branch_mode_without_the_git_router(lz):
    """Where the git router cannot run (here: it is not installed beside
    lazaret), branch mode goes on with the repository's .git read-only: the
    start warns, status says commits are refused, a commit and a hook fail,
    and the host's .git is unchanged. Never a writable .git unguarded."""
    head = repo(lz)
    bindir = bin_without(lz, "lazaret-gitrouter")
    d = native(lz)
    env = {**lz.env, **d.env}
    cmd = [c if c != lz.binary else os.path.join(bindir, "lazaret") for c in
           lz.cmdline(["--config", d.cfg, "run", "--tui=none", "--", "/bin/sh", "-c",
                       "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a; "
                       "echo x > b.txt; git add -A 2>/dev/null && git commit -qm agent 2>/dev/null && echo COMMITTED; "
                       "echo '#!/bin/sh' > \"$(git rev-parse --git-common-dir)/hooks/post-checkout\" 2>/dev/null "
                       "|| echo hook-refused; echo done"], env)]
    r = subprocess.run(cmd, cwd=lz.work, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr + d.log()
    assert "COMMITTED" not in r.stdout and "hook-refused" in r.stdout and "done" in r.stdout, r.stdout
    assert ".git is read-only in the sandbox (commits are refused)" in r.stderr, r.stderr
    assert "no git router" in d.log()
    assert git_as(lz, "rev-parse", "HEAD").strip() == head
    assert not os.path.exists(os.path.join(lz.work, ".git", "hooks", "post-checkout"))


# ---- FS-ONLY: a host without user namespaces (simulated) --------------------

def fs_only(lz, extra="", cgroup=True, network='default_allow = []\ndefault_deny = []\n'):
    """A native Domain on a host whose user namespaces are off, as
    LAZARET_TEST_NO_USERNS=1 has lazaret-native --check say."""
    if cgroup:
        network += f'[runtime]\nmemory_cgroup = "{memory_cgroup()}"\n'
    d = native(lz, extra=extra, network=network)
    d.env["LAZARET_TEST_NO_USERNS"] = "1"
    return d


def test_native_fs_only_direct_mode(lz):
    """Without user namespaces the native backend runs FS-ONLY: each
    session is lazaret-native --mode fs-only at the host's paths, in the
    sandbox's memory cgroup, its workspace the router's mount (masked
    names read empty, protected ones read-only). The start says what it
    lacks; status says FS-ONLY, pids_limit not enforced, the processes
    observed. From inside: the host's files outside the workspace, the
    test user's home, the real workspace behind the router and host
    sockets (TCP and Unix) are refused; a daemon that left its process
    group with setsid ends with the session; what it writes in the
    workspace lands on the host; nothing is left."""
    lz.write("work/hello.txt", "from the host\n")
    lz.write("work/.env", "SECRET=host-secret\n")
    lz.write("work/.envrc", "export A=1\n")
    victim = lz.write("victim.txt", "unchanged\n")
    home_secret = os.path.join(lz.user.pw_dir, "lazaret-fs-only-secret")
    with open(home_secret, "w") as f:
        f.write("home-secret\n")
    os.chown(home_secret, lz.user.pw_uid, lz.user.pw_gid)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    tcp.settimeout(0.5)
    unix_path = os.path.join(lz.base, "host.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    os.chmod(unix_path, 0o777)
    unix.listen(1)
    unix.settimeout(0.5)
    d = fs_only(lz)
    attack = f"""
import errno, os, socket, subprocess
print("cwd", os.getcwd())
print("hello", open("hello.txt").read().strip())
print("env", repr(open(".env").read()))
open("out.txt", "w").write("written\\n")
{TRYIT}tryit("write-outside", lambda: open({victim!r}, "w").write("x"))
tryit("read-home", lambda: open({home_secret!r}).read())
tryit("read-real-workspace", lambda: open({os.path.join(lz.work, "hello.txt")!r}).read())
tryit("envrc", lambda: open(".envrc", "a").write("x"))
tryit("tcp", lambda: socket.create_connection(("127.0.0.1", {tcp.getsockname()[1]}), timeout=1))
tryit("unix", lambda: socket.socket(socket.AF_UNIX).connect({unix_path!r}))
subprocess.Popen(["setsid", "sleep", "97"])
"""
    lz.write("work/attack.py", attack)
    p = d.popen("run", "--tui=none", "--", "/bin/sh", "-c", f"{PYTHON} attack.py; sleep 2; echo end")
    try:
        st = wait_status(d)
        sb = st["sandbox"]
        assert sb["mode"] == "fs-only" and "FS-ONLY" in sb["boundary"], sb
        assert st["limits"]["pids"]["enforced"] is False, st["limits"]
        assert st["limits"]["memory"]["enforced"] is True and "the kernel" in st["limits"]["memory"]["enforced_by"]
        assert st["events"]["processes"]["observed"] is True, st["events"]
        text = d.run("status").stdout
        assert "network     none (FS-ONLY: no IP sockets, no connect(2))" in text, text
        out, err = p.communicate(timeout=60)
    finally:
        end_cli(p)
    out, err = out.decode(), err.decode()
    assert p.returncode == 0, err + d.log()
    assert "FS-ONLY (no user namespaces here)" in err, err
    res = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert res["cwd"].endswith("/git-mnt"), res  # the router's mount, at its host path
    assert res["hello"] == "from the host", res
    assert res["env"] == "''", "a masked file reads empty: " + repr(res)
    # Landlock (files), seccomp (connect): EACCES; no IP socket at all:
    # EAFNOSUPPORT; the router: EROFS.
    for name in ("write-outside", "read-home", "read-real-workspace", "unix"):
        assert res[name] == "EACCES", (name, res)
    assert res["tcp"] == "EAFNOSUPPORT", res
    assert res["envrc"] == "EROFS", res
    with pytest.raises(socket.timeout):
        tcp.accept()
    with pytest.raises(socket.timeout):
        unix.accept()
    assert open(victim).read() == "unchanged\n"
    assert open(os.path.join(lz.work, "out.txt")).read() == "written\n"
    assert open(os.path.join(lz.work, ".envrc")).read() == "export A=1\n"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (domain_processes(d) or sandbox_cgroups()):
        time.sleep(0.1)
    assert not domain_processes(d), d.log()
    assert not sandbox_cgroups()
    sleepers = subprocess.run(["ps", "-u", lz.user.pw_name, "-o", "args="], capture_output=True, text=True).stdout
    assert "sleep 97" not in sleepers, "the setsid daemon outlived the sandbox"
    os.unlink(home_secret)


def test_native_fs_only_branch_mode_git_read_only(lz):
    """FS-ONLY branch mode: the agent's worktree at its host path, the
    repository's .git read-only (no mount namespace to put the git router
    at .git's path): a commit and a hook are refused, the host's .git is
    unchanged, and the start says so."""
    head = repo(lz)
    d = fs_only(lz)
    r = d.run("run", "--tui=none", "--", "/bin/sh", "-c",
              "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a; "
              "cat a.txt; echo x > b.txt; git add -A 2>/dev/null && git commit -qm agent 2>/dev/null && echo COMMITTED; "
              "echo '#!/bin/sh' > \"$(git rev-parse --git-common-dir)/hooks/post-checkout\" 2>/dev/null "
              "|| echo hook-refused; echo done")
    assert r.returncode == 0, r.stderr + d.log()
    assert r.stdout.startswith("a\n") and "hook-refused" in r.stdout and "COMMITTED" not in r.stdout, r.stdout
    assert ".git read-only (commits are refused)" in r.stderr, r.stderr
    assert git_as(lz, "rev-parse", "HEAD").strip() == head
    assert not os.path.exists(os.path.join(lz.work, ".git", "hooks", "post-checkout"))
    assert not os.path.exists(os.path.join(lz.work, "b.txt"))


def test_native_fs_only_lock_on_git_stalls_no_other_start(lz):
    """Attack: a sandbox that sees the repository's .git read-only (FS-ONLY
    branch mode) takes an exclusive flock on it and holds it. Another agent
    of the same repository still starts at once: coordinators make their
    worktrees one at a time under a lock of the user's that no sandbox
    reaches, not under one on .git (which stalled it until the holder let
    go)."""
    repo(lz)
    d = fs_only(lz)
    p = d.popen("run", "--tui=none", "--", "/bin/sh", "-c",
                'exec flock -x "$(git rev-parse --git-common-dir)" -c "echo LOCKED; sleep 20"', text=True)
    try:
        line = p.stdout.readline()
        assert line == "LOCKED\n", line + p.stderr.read()
        t = time.time()
        r = d.run("--agent", "second", "run", "--tui=none", "--", "/bin/true", timeout=60)
        took = time.time() - t
        assert r.returncode == 0, r.stderr + d.log()
        assert took < 12, f"the second agent took {took:.1f} s to start"
    finally:
        p.wait(timeout=60)


@pytest.mark.parametrize("case", ["no-cgroup", "escalation", "domains", "volume", "abi5"])
def test_native_fs_only_refuses_what_needs_namespaces(lz, case):
    """What FS-ONLY cannot do is refused before anything runs, naming it:
    memory_limit without a memory cgroup, escalation, egress by name,
    volumes, and a Landlock without signal scoping (ABI 5: nothing else
    would keep the agent's signals from the user's processes). Nothing is
    left."""
    vol = os.path.join(lz.base, "vol")
    os.makedirs(vol, exist_ok=True)
    extra = {"domains": 'allow_domains = ["example.org"]\n',
             "volume": f'volumes = [{{ host = "{vol}", container = "/data", mode = "ro" }}]\n'}.get(case, "")
    d = fs_only(lz, extra=extra, cgroup=case != "no-cgroup")
    if case == "escalation":
        d.cfg = lz.write("cfg.toml", open(d.cfg).read().replace("enabled = false", "enabled = true"))
    if case == "abi5":
        d.env["LAZARET_TEST_LANDLOCK_ABI"] = "5"
    if case == "no-cgroup":  # nor setup's (as after a reboot)
        with without_setups_memory_cgroup() as prefix:
            r = subprocess.run(prefix + d.cmd("run", "--tui=none", "--", "/bin/touch", "ran"), cwd=lz.work,
                               capture_output=True, text=True, timeout=120)
    else:
        r = d.run("run", "--tui=none", "--", "/bin/touch", "ran")
    want = {"no-cgroup": f"runtime.memory_cgroup is not set and there is no /sys/fs/cgroup/memory/lazaret-{TEST_USER}",
            "escalation": "escalation needs FULL mode",
            "domains": "egress by name (allow_domains) needs FULL mode", "volume": "volumes need FULL mode",
            "abi5": "FS-ONLY needs Landlock ABI 6 (Linux 6.12)"}[case]
    assert r.returncode != 0 and "FS-ONLY" in r.stderr and want in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(lz.work, "ran"))
    assert not domain_processes(d)


def test_native_fs_only_killed_coordinator_leaves_nothing(lz):
    """FS-ONLY has no init whose end ends the sandbox: a coordinator killed
    outright leaves its sessions' processes running, and its watchdog's
    recovery kills every process in the sandbox's memory cgroup (by
    pidfd, each checked to be in it still) and removes the cgroup."""
    d = fs_only(lz)
    p = d.popen("run", "--tui=none", "--", "/bin/sh", "-c", "setsid sleep 61 & sleep 62")
    try:
        wait_status(d)
        (cg,) = sandbox_cgroups()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(open(os.path.join(memory_cgroup(), cg, "cgroup.procs")).read().split()) < 4:
            time.sleep(0.05)
        inside = open(os.path.join(memory_cgroup(), cg, "cgroup.procs")).read().split()
        assert len(inside) >= 4, inside  # lazaret-native, sh, and both sleeps
        os.kill(int(cg.split("-")[1]), signal.SIGKILL)
    finally:
        end_cli(p)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (sandbox_cgroups() or any(os.path.exists(f"/proc/{x}") for x in inside)):
        time.sleep(0.1)
    assert not sandbox_cgroups(), "the cgroup outlived the recovery"
    left = [x for x in inside if os.path.exists(f"/proc/{x}")]
    assert not left, "processes of the sandbox outlived its coordinator: " + repr(left)


def test_native_agents_of_one_profile_have_their_own_domains_and_branches(lz):
    """--agent NAME (issue 22's foundation): two agents of one profile on
    one repository each get a Domain, a sandbox and a branch
    (lazaret/agent-NAME) of their own, so one never sees or touches the
    other's work; status, diff and the Domain's files are the agent's; the
    host's HEAD and tree are unchanged. A bad name is one error, nothing
    started."""
    head = repo(lz)
    d = native(lz)
    commit = ("export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a; "
              "ls; echo \"$0\" > mine.txt; git add -A && git commit -qm \"by $0\" && echo COMMITTED")
    p = d.popen("--agent", "a1", "run", "--tui=none", "--", "/bin/sh", "-c", commit + "; sleep 30", "a1")
    try:
        end = time.monotonic() + 20
        st = None
        while time.monotonic() < end:
            r = d.run("--agent", "a1", "status", "--json")
            if r.returncode == 0 and json.loads(r.stdout).get("running"):
                st = json.loads(r.stdout)
                break
            time.sleep(0.1)
        assert st and st["agent"] == "a1", st
        r = d.run("status", "--json")
        assert r.returncode == 0 and not json.loads(r.stdout).get("running"), "the profile's own Domain is another"
        r = d.run("--agent", "a2", "run", "--tui=none", "--", "/bin/sh", "-c", commit, "a2")
        assert r.returncode == 0 and "COMMITTED" in r.stdout, r.stdout + r.stderr
        assert "mine.txt" not in r.stdout.split("COMMITTED")[0], "a2 saw a1's work: " + r.stdout
        text = d.run("--agent", "a1", "status").stdout
        assert text.startswith("shell, agent a1: running"), text
    finally:
        end_cli(p)
    for name in ("a1", "a2"):
        assert git_as(lz, "log", "-1", "--format=%s", f"lazaret/agent-{name}").strip() == f"by {name}"
        assert git_as(lz, "show", f"lazaret/agent-{name}:mine.txt") == f"{name}\n"
        r = d.run("--agent", name, "diff")
        assert r.returncode == 0 and "mine.txt" in r.stdout, r.stdout + r.stderr
    assert len(d.domain_dirs()) == 2, d.domain_dirs()
    assert git_as(lz, "rev-parse", "HEAD").strip() == head
    assert git_as(lz, "status", "--porcelain") == ""
    r = d.run("--agent", "Bad Name", "run", "--tui=none", "--", "/bin/true")
    assert r.returncode != 0 and "--agent Bad Name: an agent's name is 2 to 32" in r.stderr, r.stderr
    assert len(d.domain_dirs()) == 2


@pytest.mark.parametrize("mode", ["full", "fs-only"])
def test_native_ca_certificates(lz, mode):
    """ca_certificates on the native backend: the bundle (only its
    certificates, a comment of the file left out) is readable and not
    writable where the four variables point (FULL: /run/lazaret; FS-ONLY:
    the host's path in the Domain's directory)."""
    ca = os.path.join(lz.base, "ca")
    os.makedirs(ca)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", f"{ca}/k", "-out", f"{ca}/c.pem", "-days", "1", "-subj", "/CN=native test CA"],
                   check=True, capture_output=True)
    pem = lz.write("ca-with-comment.pem", "# a comment\n" + open(f"{ca}/c.pem").read())
    extra = f'ca_certificates = ["{pem}"]\n'
    d = fs_only(lz, extra=extra) if mode == "fs-only" else native(lz, extra=extra)
    r = d.run("run", "--tui=none", "--", "/bin/sh", "-c",
              'echo "$SSL_CERT_FILE|$NODE_EXTRA_CA_CERTS|$REQUESTS_CA_BUNDLE|$GIT_SSL_CAINFO"; '
              'grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"; grep -c comment "$SSL_CERT_FILE"; '
              'echo x >> "$SSL_CERT_FILE" 2>/dev/null && echo written || echo not-written')
    assert r.returncode == 0, r.stderr + d.log()
    first, count, comments, written = r.stdout.splitlines()
    path = "/run/lazaret/ca-certificates.crt" if mode == "full" else \
        os.path.join(d.domain_dirs()[0], "ca-certificates.crt")
    assert first == "|".join([path] * 4), r.stdout
    assert (count, comments, written) == ("1", "0", "not-written"), r.stdout


# ---- persistent directories (issue 45) ----------------------------------------

def user_mounts_of(uid, text):
    """Mount lines naming text in the mount table of any process of uid
    (every mount namespace it has), and in the host's."""
    found = [ln for ln in open("/proc/self/mountinfo") if text in ln]
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/mountinfo") as f:
                found += [f"{pid}: {ln}" for ln in f if text in ln]
        except OSError:
            continue
    return found


def test_native_persistent_dirs_live_in_the_sandboxs_namespace(lz):
    """The persistent directories are mounted in the sandbox's own mount
    namespace (overlayfs over the host's /usr/local, userxattr; /opt its
    layer bound alone), never on the host: a SIGKILL of the coordinator
    takes them with the sandbox, nothing stays mounted in any namespace of
    the user, and the next run has what was written."""
    d = native(lz, extra='persistent_dirs = ["/usr/local", "/opt"]\n')
    p = d.popen("run", "--tui=none", "--", "/bin/sh", "-c", "echo kept > /usr/local/lz-k; echo o > /opt/o; exec sleep 300")
    try:
        st = wait_status(d)
        init, coord = st["sandbox"]["init_pid"], st["coordinator_pid"]
        # The session has written both (the kill must not cut a write).
        [domain] = d.domain_dirs()
        kept = [os.path.join(domain, "usr_2flocal_native/upper/lz-k"), os.path.join(domain, "opt_native/upper/o")]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(os.path.exists(k) and os.path.getsize(k) for k in kept):
            time.sleep(0.05)
        inside = open(f"/proc/{init}/mountinfo").read()
        lines = {ln.split()[4]: ln for ln in inside.splitlines()}
        assert " - overlay overlay " in lines["/usr/local"] and "userxattr" in lines["/usr/local"], inside
        assert "/opt" in lines, inside
        assert not [ln for ln in open("/proc/self/mountinfo") if "_native/" in ln or "userxattr" in ln]
        subprocess.run(["kill", "-KILL", str(coord)], check=True)
        assert wait_gone(init, 10), "the sandbox outlived its coordinator"
    finally:
        end_cli(p)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and user_mounts_of(lz.user.pw_uid, "_native/"):
        time.sleep(0.1)
    assert not user_mounts_of(lz.user.pw_uid, "_native/")
    assert not user_mounts_of(lz.user.pw_uid, "/usr/local overlay")
    r = d.run("run", "--tui=none", "--", "/bin/sh", "-c", "cat /usr/local/lz-k /opt/o", timeout=120)
    assert (r.returncode, r.stdout) == (0, "kept\no\n"), r.stderr + d.log()
    assert not os.path.exists("/usr/local/lz-k")


ATTACK_PERSIST = TRYIT + r"""
import ctypes, errno, os, stat, subprocess
def write(p):
    with open(p, "a") as f:
        f.write("x")
victim = "/usr/local/bin/" + sorted(os.listdir("/usr/local/bin"))[0]
su = "/usr/bin/su"
tryit("append-host-file", lambda: write(victim))
tryit("chmod-host-file", lambda: os.chmod(victim, 0o4777))
tryit("chown-host-file", lambda: os.chown(victim, os.getuid(), -1))
tryit("link-setuid-root", lambda: os.link(su, "/usr/bin/su-copy"))
tryit("rename-setuid-root", lambda: os.rename(su, "/usr/bin/su-moved"))
tryit("mknod-char", lambda: os.mknod("/usr/local/null2", stat.S_IFCHR | 0o666, os.makedev(1, 3)))
tryit("mknod-block", lambda: os.mknod("/usr/local/sda2", stat.S_IFBLK | 0o666, os.makedev(8, 0)))
libc = ctypes.CDLL(None, use_errno=True)
def mount_over():
    if libc.mount(b"x", b"/usr/local", b"tmpfs", 0, None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
tryit("mount-over", mount_over)
# What the sandbox may do: its own files, set-uid to itself at most.
with open("/usr/local/mine", "w") as f:
    f.write("mine")
os.chmod("/usr/local/mine", 0o6755)
tryit("chown-own-to-root", lambda: os.chown("/usr/local/mine", 0, 0))
subprocess.run(["cp", "-a", su, "/usr/local/su-cp"], capture_output=True)
os.unlink(victim)
print("victim-gone", not os.path.exists(victim))
"""


def test_native_persistent_dirs_attacks(lz):
    """From inside, against persistent /usr (the host's /usr the lower
    layer, read-only): the host's files cannot be written, re-moded,
    re-owned, hard-linked (a set-uid root program) or moved; no device
    node can be made; removing one hides it in the sandbox only. On the
    host the layer holds only the user's own files (set-uid at most to the
    user itself, which grants nothing), no device but overlayfs's 0:0
    whiteouts, in a directory only the user can enter; the host's /usr is
    unchanged."""
    d = native(lz, extra='persistent_dirs = ["/usr"]\n')
    victim = "/usr/local/bin/" + sorted(os.listdir("/usr/local/bin"))[0]
    before = {p: (os.stat(p).st_mode, os.stat(p).st_uid, open(p, "rb").read()) for p in (victim, "/usr/bin/su")}
    r = d.run("run", "--tui=none", "--", PYTHON, "-c", ATTACK_PERSIST, timeout=180)
    assert r.returncode == 0, r.stderr + d.log()[-3000:]
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    for name in ("append-host-file", "chmod-host-file", "chown-host-file"):
        assert got[name] in ("EACCES", "EPERM", "EROFS"), (name, r.stdout)
    # A copy-up would have to give the copy its owner, root, whom the
    # sandbox's namespace does not map (EOVERFLOW).
    assert got["link-setuid-root"] in ("EPERM", "EACCES", "EXDEV", "EOVERFLOW"), r.stdout
    assert got["rename-setuid-root"] in ("EPERM", "EACCES", "EXDEV", "EOVERFLOW"), r.stdout
    assert got["mknod-char"] == "EPERM" and got["mknod-block"] == "EPERM", r.stdout
    assert got["mount-over"] != "OK", r.stdout
    assert got["chown-own-to-root"] in ("EPERM", "EINVAL"), r.stdout
    assert got["victim-gone"] == "True", r.stdout
    # The host's files are as they were.
    for p, (mode, uid, data) in before.items():
        st = os.stat(p)
        assert (st.st_mode, st.st_uid, open(p, "rb").read()) == (mode, uid, data), p
    assert not os.path.exists("/usr/local/mine") and not os.path.exists("/usr/bin/su-copy")
    [domain] = d.domain_dirs()
    layer = os.path.join(domain, "usr_native")
    assert os.stat(layer).st_mode & 0o777 == 0o700 and os.stat(layer).st_uid == lz.user.pw_uid
    seen = 0
    for root, dirs, files in os.walk(os.path.join(layer, "upper")):
        for n in dirs + files:
            st = os.lstat(os.path.join(root, n))
            seen += 1
            assert st.st_uid == lz.user.pw_uid and st.st_gid == lz.user.pw_gid, (root, n, st)
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                assert stat.S_ISCHR(st.st_mode) and st.st_rdev == 0, (root, n, st)  # a whiteout
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                assert st.st_uid == lz.user.pw_uid, (root, n, st)
    assert seen > 100  # the mirrored directories, the sandbox's files
    mine = os.stat(os.path.join(layer, "upper", "local", "mine"))
    assert mine.st_uid == lz.user.pw_uid and mine.st_mode & stat.S_ISUID
    cp = os.path.join(layer, "upper", "local", "su-cp")
    assert not os.path.exists(cp) or (os.stat(cp).st_uid == lz.user.pw_uid), os.stat(cp)


def test_native_workspace_swapped_for_a_link_is_never_mounted(lz):
    """Attack: a process that may rename entries of the workspace's parent
    (another agent's direct-mode sandbox whose workspace holds this one)
    swaps the workspace for a symbolic link to a directory it cannot read
    itself, again and again, while runs start from it. Each run's
    /workspace is the directory the leader resolved and checked, or the run
    is refused naming why; never the link's target. Before the workspace
    was pinned (the routers, the coordinator and the leader each resolving
    it by name) 5 or 6 runs in 40 got the target."""
    d = native(lz)
    sub, secret = os.path.join(lz.work, "sub"), os.path.join(lz.work, "secret")
    for p in (sub, secret):
        os.mkdir(p)
        os.chown(p, lz.user.pw_uid, lz.user.pw_gid)
    lz.write("work/sub/own", "mine\n")
    lz.write("work/secret/CANARY", "secret\n")
    fd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY)
    stop = os.path.join(lz.base, "stop-swapping")
    loop = (f"cd {lz.work} && while [ ! -e {stop} ]; do mv sub sub.real; ln -s secret sub; rm sub; "
            "mv sub.real sub; done")
    swapper = subprocess.Popen(["runuser", "-u", lz.user.pw_name, "--", "/bin/sh", "-c", loop])
    outcomes = {"ok": 0, "refused": 0}
    try:
        for _ in range(24):
            # Started in the directory itself (its descriptor), as a shell
            # in it would: the leader's getcwd names it wherever it is.
            r = subprocess.run(d.cmd("run", "--tui=none", "--", "/bin/sh", "-c", "ls /workspace"),
                               preexec_fn=lambda: os.fchdir(fd), capture_output=True, text=True, timeout=120)
            assert "CANARY" not in r.stdout, "the link's target was mounted at /workspace: " + r.stdout + d.log()
            if r.returncode == 0:
                assert "own" in r.stdout, r.stdout + r.stderr
                outcomes["ok"] += 1
            else:
                assert ("changed while lazaret started" in r.stderr or "no longer the directory" in r.stderr
                        or "No such file or directory" in r.stderr), r.stderr + d.log()
                outcomes["refused"] += 1
    finally:
        open(stop, "w").close()
        swapper.wait(timeout=30)
        os.close(fd)
    assert outcomes["ok"] > 0, outcomes
    deadline = time.monotonic() + 20
    while domain_processes(d) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not domain_processes(d), domain_processes(d)


def test_native_workspace_not_what_up_checked_is_refused(lz):
    """lazaret up hands each agent's run the identity of the workspace it
    checked (LAZARET_WORKSPACE_ID): a run whose workspace is another
    directory by then (swapped since) is refused before anything starts,
    and the router refuses a root that is not the one it was given."""
    d = native(lz)
    r = d.run("run", "--tui=none", "--", "/bin/touch", "ran", env={"LAZARET_WORKSPACE_ID": "1:1"})
    assert r.returncode != 0, r.stdout
    assert "is not the directory lazaret up checked" in r.stderr, r.stderr
    assert r.stderr.count("error") == 1, r.stderr
    assert not os.path.exists(os.path.join(lz.work, "ran"))
    assert not domain_processes(d)
    st = os.stat(lz.work)
    r = d.run("run", "--tui=none", "--", "/bin/touch", "ran",
              env={"LAZARET_WORKSPACE_ID": f"{st.st_dev}:{st.st_ino}"})
    assert r.returncode == 0, r.stderr + d.log()
    assert os.path.exists(os.path.join(lz.work, "ran"))

    router = os.path.join(os.path.dirname(lz.binary), "lazaret-gitrouter")
    iso, mnt = os.path.join(lz.base, "iso"), os.path.join(lz.base, "mnt")
    os.makedirs(iso)
    os.makedirs(mnt)
    r = subprocess.run([router, "--workspace", lz.work, "--expect-id", f"{st.st_dev}:{st.st_ino + 1}",
                        "--isolated", iso, mnt], capture_output=True, text=True, timeout=30)
    assert r.returncode == 3 and "is not the one lazaret checked" in r.stderr, r.stderr
    with open("/proc/self/mountinfo") as f:
        assert f" {mnt} " not in f.read()


EVIL_GIT_DIR = r"""set -e
cd /workspace
GD=$(sed -n 's/^gitdir: //p' .git)
COMMON=$(cd "$GD" && cd "$(cat commondir)" && pwd)
git init -q --bare .evil
echo "$COMMON/objects" > .evil/objects/info/alternates
git --git-dir=.evil update-ref refs/heads/x "$(git rev-parse HEAD)"
echo 'ref: refs/heads/x' > .evil/HEAD
git --git-dir=.evil config core.bare false
git --git-dir=.evil config filter.x.clean "sh -c 'id > {marker}; cat'"
echo '* filter=x' > .gitattributes
cp "$GD/index" .evil/index
echo changed >> a.txt
echo 'gitdir: .evil' > .git
echo PLANTED
"""


def test_native_agent_git_dir_never_configures_the_hosts_git(lz):
    """Attack: in branch mode the worktree's .git file is the agent's to
    write. It points it at a git directory of its own making whose
    configuration names a clean filter (a command git runs to compare a
    changed file), with the index git needs to want one. When the session
    ends the coordinator asks the host's git what changed (the files
    record): that git must take the worktree's git directory from the
    repository, never from the file, so the filter never runs on the host.
    Before, it did (the marker was written, as the user, outside any
    sandbox). The next start puts the .git file back; approved host
    commands get the same git directory in GIT_DIR."""
    repo(lz)
    # Where the host's user may write and the sandbox cannot reach (its
    # /tmp is its own): only a command run on the host can put it there.
    host_only = os.path.join(lz.base, "host-only")
    os.makedirs(host_only)
    os.chown(host_only, lz.user.pw_uid, lz.user.pw_gid)
    marker = os.path.join(host_only, "pwned-by-filter")
    d, _ = native_escalating(lz, '["printenv GIT_DIR GIT_WORK_TREE"]')
    r = d.run("run", "--tui=none", "--", "/bin/sh", "-c", EVIL_GIT_DIR.replace("{marker}", marker))
    assert r.returncode == 0 and "PLANTED" in r.stdout, r.stderr + d.log()
    # The files record is written once the session has ended.
    end = time.monotonic() + 20
    ev = ""
    while time.monotonic() < end:
        ev = d.run("events", "--json").stdout
        if '"changed"' in ev and "a.txt" in ev:
            break
        time.sleep(0.2)
    assert '"changed"' in ev and "a.txt" in ev, ev + d.log()
    assert not os.path.exists(marker), "the agent's clean filter ran on the host: " + open(marker).read()
    worktree = [os.path.join(x, "agent-shell") for x in d.domain_dirs()][0]
    dotgit = os.path.join(worktree, ".git")
    assert open(dotgit).read() == "gitdir: .evil\n"
    r = d.run("run", "--tui=none", "--", "/run/lazaret/escalate", "printenv", "GIT_DIR", "GIT_WORK_TREE")
    assert r.returncode == 0, r.stderr + d.log()
    assert r.stdout == f"{lz.work}/.git/worktrees/agent-shell\n{worktree}\n", r.stdout
    assert open(dotgit).read() == f"gitdir: {lz.work}/.git/worktrees/agent-shell\n"
    assert not os.path.exists(marker)
