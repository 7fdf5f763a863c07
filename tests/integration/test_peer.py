# SPDX-License-Identifier: MIT
"""No way back to the host through a coordinator's control socket (issue
14). A sandbox that reached the runtime directory (through a mount that
holds it, when runsc ran with host-uds=open) could otherwise speak to its own
coordinator as the same uid: send a wider policy, open sessions, answer its
own prompts. Four walls, each tested on its own: gVisor reaches no host
Unix socket (issue 41); the launch refuses any mount that reaches the
runtime directory, socket_dir or the data root; the coordinator talks only to its own binary outside every sandbox; and only a
client that shows the key in the runtime directory gets past Hello (issue
41: a process of the user can run that binary too)."""
import hashlib
import json
import os
import shutil

import pytest

from conftest import build_tool, ctl_frame, ctl_key
from test_escalation import esc_domain
from test_run import Domain, busybox_image, wait_sessions  # noqa: F401

WIDER = ("lazaret-derived-network-policy v1\nfamily ipv4 enabled default allow\nfamily ipv6 disabled\n")


def runtime_dir(lz):
    return f"/tmp/lazaret-{lz.user.pw_uid}"


def add_volumes(d, lz, text):
    """The Domain's configuration with these volumes (and no others)."""
    if not hasattr(d, "base_cfg"):
        d.base_cfg = open(d.cfg).read()
    lz.write("cfg.toml", d.base_cfg.replace('runsc_network = "host"\n', 'runsc_network = "host"\n' + text))


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_a_volume_reaching_the_runtime_directory_is_refused(lz, busybox_image, mode):
    d = esc_domain(lz, busybox_image)
    rt = runtime_dir(lz)
    add_volumes(d, lz, f'volumes = [{{ host = "{rt}", container = "/rt", mode = "{mode}" }}]\n')
    r = d.run("run", "--", "true")
    assert r.returncode == 125
    assert r.stderr.splitlines() == [
        f"lazaret: error: volume /rt: host path {rt} lies inside the runtime directory (every sandbox's control "
        f"socket) {rt}, which the sandbox must not reach, read-only or not; choose another path (in the data root, "
        "only {profile_dir} may be a volume)"]
    assert d.domain_dirs() == []
    d.assert_clean()


def test_volumes_reaching_socket_dir_or_the_data_root_are_refused(lz, busybox_image):
    d = esc_domain(lz, busybox_image)
    for host, what in ((lz.base, "contains socket_dir (the escalation sockets) " + d.sock),
                       (os.path.join(d.data, "domains"), "lies inside the data root (every sandbox's store and "
                                                         "worktrees) " + d.data)):
        if not os.path.exists(host):
            os.makedirs(host)
            os.chown(host, lz.user.pw_uid, lz.user.pw_gid)
        add_volumes(d, lz, f'volumes = [{{ host = "{host}", container = "/x", mode = "ro" }}]\n')
        r = d.run("run", "--", "true")
        assert r.returncode == 125, r.stderr
        assert r.stderr.startswith(f"lazaret: error: volume /x: host path {host} {what}, which the sandbox must "
                                   "not reach"), r.stderr
    # {profile_dir} is the profile's own part of the data root: allowed.
    add_volumes(d, lz, 'volumes = [{ host = "{profile_dir}/home", container = "/home/agent" }]\n')
    r = d.run("run", "--", "true")
    assert r.returncode == 0, r.stderr
    d.assert_clean()


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_the_control_socket_is_out_of_the_sandboxs_reach(lz, busybox_image, mode):
    """With the launch check bypassed by its test hook and the runtime
    directory mounted: a client in the sandbox cannot even connect to the
    control socket (runsc runs without host-uds, issue 41; the peer check
    behind it is tested from the host in test_run.py), and the policy and
    sessions are as they were."""
    poke = build_tool(lz, "ctl-poke")
    tools = os.path.dirname(poke)
    d = esc_domain(lz, busybox_image)
    rt = runtime_dir(lz)
    add_volumes(d, lz, f'volumes = [{{ host = "{rt}", container = "/rt", mode = "{mode}" }},\n'
                       f'           {{ host = "{tools}", container = "/tools", mode = "ro" }}]\n')
    hook = {"LAZARET_TEST_ALLOW_UNSAFE_MOUNTS": "1"}
    holder = d.popen("run", "--", "/bin/sleep", "1000", env=hook)
    try:
        before = wait_sessions(d, 1)
        sock = "/rt/" + os.path.basename(d.socket_path())
        hello = json.dumps({"type": "Hello", "version": 1, "cli_pid": 1, "netpolicy": WIDER})
        status = json.dumps({"type": "StatusRequest"})
        r = d.run("run", "--", "/bin/sh", "-c",
                  f"test -S {sock} && echo SEEN; /tools/ctl-poke {sock} '{hello}'; /tools/ctl-poke {sock} '{status}'",
                  env=hook)
        assert r.stdout == "SEEN\n" + "cannot connect: Connection refused\n" * 2, (r.stdout, r.stderr)
        assert "refused a control connection" not in d.log()
        after = wait_sessions(d, 1)
        assert after["network"] == before["network"] and after["generation"] == before["generation"]
    finally:
        d.run("stop")
        holder.wait(timeout=30)
    d.assert_clean()


@pytest.mark.parametrize("key", ["none", "wrong"])
def test_a_borrowed_lazaret_binary_cannot_open_a_session(lz, busybox_image, key):
    """Issue 41: a host process of the person's uid that is not the CLI
    runs the real lazaret binary with a library preloaded (so the check of
    the peer's executable passes), confined as an auto-approved host
    command is (Landlock: no runtime directory). It cannot read the
    control socket's key, and without it the coordinator opens no session
    and takes no other frame (a prompt is answered only on the connection
    of the session it belongs to); the person's CLI goes on working."""
    d = esc_domain(lz, busybox_image)
    holder = d.popen("run", "--", "/bin/sleep", "1000")
    try:
        before = wait_sessions(d, 1)
        sock = d.socket_path()
        keyfile = sock[:-5] + ".key"
        hello = {"type": "Hello", "version": 1, "cli_pid": 1}
        if key == "wrong":
            hello["key"] = "0" * 64
        frames = ctl_frame(hello) + ctl_frame({
            "type": "SessionOpen", "argv": ["/bin/touch", "/workspace/pwned"], "env": [], "interactive": False,
            "rows": 24, "columns": 80})
        out, err = lz.raw(sock, frames, env=d.env, confine_key=keyfile, hold=True)
        assert b"SessionOpened" not in out and b"SessionExit" not in out, out
        assert "key: Permission denied" in err.splitlines(), err
        st = os.stat(keyfile)
        assert (st.st_uid, st.st_mode & 0o777) == (lz.user.pw_uid, 0o600)
        assert json.loads(out[4:]) == {
            "type": "Error", "message": "this connection did not show the control socket's key, which only the "
                                        "lazaret CLI of this user, outside every sandbox, can read; if this is it, "
                                        "run it again"}
        assert (f"its Hello carried {'no key' if key == 'none' else 'another key'}, not the control socket's key"
                in d.log())
        after = wait_sessions(d, 1)
        assert after["generation"] == before["generation"]
        assert not os.path.exists(os.path.join(lz.work, "pwned"))
        # The person's CLI, the same binary without the library, still works.
        r = d.run("run", "--", "echo", "ok")
        assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
    finally:
        d.run("stop")
        holder.wait(timeout=30)
    d.assert_clean()


def test_a_hello_whose_policy_digest_is_not_the_sandboxs_is_refused(lz, busybox_image):
    """Issue 45: the Hello of the CLI that started the coordinator carries
    its policy's digest instead of the text. A digest that is not the one
    of the coordinator's declared policy (another terminal changed it
    since) is refused with the reason, and the session behind it never
    opens; the declared policy's digest opens one, as the CLI's does. The
    running sandbox is the same throughout."""
    d = Domain(lz, busybox_image)
    holder = d.popen("run", "--", "/bin/sleep", "1000")
    try:
        before = wait_sessions(d, 1)
        sock = d.socket_path()
        specs = [os.path.join(x, "launch-spec.json") for x in d.domain_dirs()]
        declared = open(next(p for p in specs if os.path.exists(p)), "rb").read().split(b"\0", 1)[1]
        good = hashlib.sha256(b"lazaret/derived-network-policy/v1\n" + declared).hexdigest()

        def hello_then_open(digest, name):
            hello = {"type": "Hello", "version": 1, "cli_pid": 1, "key": ctl_key(sock), "netpolicy_digest": digest}
            frames = ctl_frame(hello) + ctl_frame({
                "type": "SessionOpen", "argv": ["/bin/touch", f"/workspace/{name}"], "env": [],
                "interactive": False, "rows": 24, "columns": 80})
            out, _ = lz.raw(sock, frames, env=d.env, hold=True)
            return out

        out = hello_then_open("0" * 64, "refused")
        assert b"the sandbox's network policy changed since this command started it" in out, out
        assert b"SessionOpened" not in out, out
        out = hello_then_open(good, "opened")
        assert b"SessionOpened" in out and b"network policy changed" not in out, out
        assert os.path.exists(os.path.join(lz.work, "opened"))
        assert not os.path.exists(os.path.join(lz.work, "refused"))
        after = wait_sessions(d, 1)
        assert after["generation"] == before["generation"]
    finally:
        d.run("stop")
        holder.wait(timeout=30)
    d.assert_clean()


NOBODY = 65534


class Squatted:
    """/tmp/lazaret-UID made first by another user (nobody), the test
    user's own one set aside meanwhile and put back after."""

    def __init__(self, lz, owner=NOBODY, mode=0o755):
        self.rt = runtime_dir(lz)
        self.aside = f"{self.rt}.aside-{os.getpid()}"
        self.had = os.path.lexists(self.rt)
        if self.had:
            os.rename(self.rt, self.aside)
        os.mkdir(self.rt)
        os.chown(self.rt, owner, owner)
        os.chmod(self.rt, mode)

    def restore(self):
        shutil.rmtree(self.rt)
        if self.had:
            os.rename(self.aside, self.rt)


def test_a_squatted_runtime_directory_is_not_used(lz, busybox_image):
    """Another user made /tmp/lazaret-UID first: Lazaret says so, with the
    fix, and keeps its sockets in the user's own cache directory instead;
    nothing lands in the squatter's directory."""
    d = esc_domain(lz, busybox_image)
    alt = os.path.join(lz.user.pw_dir, ".cache/lazaret/run")
    shutil.rmtree(alt, ignore_errors=True)
    sq = Squatted(lz)
    try:
        r = d.run("run", "--", "echo", "ran")
        assert r.returncode == 0 and r.stdout == "ran\n", r.stderr
        warning = (f"lazaret: warning: the runtime directory {sq.rt} belongs to another user (uid {NOBODY}), who "
                   f"may have made it first to block or watch Lazaret; remove it (as root or as that user) or set "
                   f"XDG_RUNTIME_DIR to a directory of your own; using {alt} instead")
        assert warning in r.stderr.splitlines(), r.stderr
        assert os.listdir(sq.rt) == []
        st = os.stat(alt)
        assert (st.st_uid, st.st_mode & 0o777) == (lz.user.pw_uid, 0o700)
        h = os.path.basename(d.domain_dirs()[0])
        assert os.path.exists(os.path.join(alt, f"lazaret_coord_{h}.lock"))
        # Every verb finds the same place.
        r = d.run("status")
        assert r.returncode == 0 and "not running" in r.stdout + r.stderr, r.stdout + r.stderr
        assert warning in r.stderr.splitlines()
    finally:
        sq.restore()
        shutil.rmtree(alt, ignore_errors=True)
    d.assert_clean()


def test_a_runtime_directory_open_to_others_is_refused(lz, busybox_image):
    d = esc_domain(lz, busybox_image)
    sq = Squatted(lz, owner=lz.user.pw_uid, mode=0o755)
    try:
        r = d.run("run", "--", "echo", "ran")
        assert r.returncode == 125 and "ran" not in r.stdout
        assert r.stderr.splitlines() == [
            f"lazaret: error: the runtime directory {sq.rt} is accessible to group or others (it must be mode "
            f"0700); run 'chmod 0700 {sq.rt}'"], r.stderr
        assert os.listdir(sq.rt) == []
    finally:
        sq.restore()
    d.assert_clean()


def test_a_squatted_socket_dir_is_refused(lz, busybox_image):
    """socket_dir made by another user, or below a directory anyone may
    change: one error naming it and the fix, nothing started or made."""
    def refused(error):
        r = d.run("run", "--", "echo", "ran")
        assert r.returncode == 125 and "ran" not in r.stdout
        assert r.stderr.splitlines() == ["lazaret: error: " + error], r.stderr

    d = esc_domain(lz, busybox_image)
    os.chown(d.sock, NOBODY, NOBODY)
    refused(f"escalation.socket_dir {d.sock} belongs to another user (uid {NOBODY}), who may have made it first "
            "to block or watch Lazaret; remove it (as root or as that user) or choose another socket_dir in "
            "[escalation]")
    assert os.listdir(d.sock) == []
    # Below a directory that anyone may write to (not sticky): its owner
    # could swap socket_dir for their own after the check.
    open_dir = os.path.join(lz.base, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    cfg = open(d.cfg).read().replace(f'socket_dir = "{d.sock}"', f'socket_dir = "{open_dir}/sock"')
    lz.write("cfg.toml", cfg)
    refused(f"escalation.socket_dir {open_dir}/sock lies in {open_dir}, which is writable by others and not "
            "sticky (uid 0, mode 0777), so its owner could put another directory in its place; choose another "
            "socket_dir in [escalation]")
    assert os.listdir(open_dir) == []
    assert d.domain_dirs() == []
    d.assert_clean()
