# SPDX-License-Identifier: MIT
"""No way back to the host through a coordinator's control socket (issue
14). A sandbox that reaches the runtime directory (runsc host-uds=open with
escalation on, and any mount that holds it) could otherwise speak to its own
coordinator as the same uid: send a wider policy, open sessions, answer its
own prompts. Two walls, each tested on its own: the launch refuses any
mount that reaches the runtime directory, socket_dir or the data root; and
the coordinator talks only to its own binary outside every sandbox."""
import json
import os

import pytest

from conftest import build_tool
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
def test_the_control_socket_refuses_the_sandbox(lz, busybox_image, mode):
    """With the launch check bypassed by its test hook, a client in the
    sandbox reaches the control socket: refused by the peer check, and the
    policy and sessions are as they were."""
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
                  f"/tools/ctl-poke {sock} '{hello}'; /tools/ctl-poke {sock} '{status}'", env=hook)
        assert (r.returncode, r.stdout) == (0, "closed\nclosed\n"), r.stderr
        assert "not this lazaret binary outside the sandbox" in d.log()
        after = wait_sessions(d, 1)
        assert after["network"] == before["network"] and after["generation"] == before["generation"]
    finally:
        d.run("stop")
        holder.wait(timeout=30)
    d.assert_clean()
