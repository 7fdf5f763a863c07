# SPDX-License-Identifier: MIT
"""Host escalation from inside the sandbox, for real: lazaret-escalate in a
rootless runsc sandbox, mutual TLS 1.3 over the Escalation Socket, session
signatures, the auto_approve pipeline, the audit trail. Attacks come from
tests/escalate-attack (the requests a sandbox process could craft, with the
sandbox's own certificate and session credential) and from openssl s_client.

What needs the person at the terminal is refused in these non-interactive
runs, with that reason; test_prompt.py asks a person, on real terminals."""
import hashlib
import json
import os
import socket
import subprocess
import time

import pytest

from conftest import build_tool
from test_run import Domain, wait_sessions
from test_run import busybox_image  # noqa: F401  (fixture)

AUTO = ('["uname -a", "ls -l ...", "false", "pwd", "printenv", "cat /etc/hostname", "cat README.md", '
        '"cat /dev/zero", "sleep 9876"]')


def esc_domain(lz, image, auto=AUTO):
    """A Domain with escalation on and auto_approve = auto (TOML text)."""
    sock = os.path.join(lz.base, "sock")
    os.makedirs(sock, mode=0o700, exist_ok=True)
    os.chown(sock, lz.user.pw_uid, lz.user.pw_gid)
    d = Domain(lz, image)
    text = open(d.cfg).read().replace("[escalation]\nenabled = false\n",
                                      f"[escalation]\nenabled = true\nauto_approve = {auto}\n")
    lz.write("cfg.toml", text)
    d.sock = sock
    return d


@pytest.fixture
def edom(lz, busybox_image):
    d = esc_domain(lz, busybox_image)
    yield d
    d.assert_clean()
    # The socket and its directory went with the sandbox.
    assert os.listdir(d.sock) == []


def escalate(d, *args, env=None):
    return d.run("run", "--", "/run/lazaret/escalate", *args, env=env)


def test_auto_approved_commands_run_on_the_host(edom, lz):
    r = escalate(edom, "uname", "-a")
    host = subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout
    assert (r.returncode, r.stdout) == (0, host), r.stderr
    # One quoted command line works the same.
    r = escalate(edom, "uname -a")
    assert (r.returncode, r.stdout) == (0, host), r.stderr
    # A prefix entry ("ls -l ..."): more words, each naming a file in the
    # workspace.
    lz.write("work/notes.txt", "notes\n")
    r = escalate(edom, "ls", "-l", "notes.txt")
    assert r.returncode == 0 and r.stdout.endswith(" notes.txt\n"), r.stderr
    # The host command's exit status is ours.
    r = escalate(edom, "false")
    assert r.returncode == 1, r.stderr
    # It runs in the host directory behind /workspace.
    r = escalate(edom, "pwd")
    assert (r.returncode, r.stdout) == (0, lz.work + "\n"), r.stderr
    # With a fixed environment: nothing of the CLI's or the sandbox's.
    r = escalate(edom, "printenv", env={"GIT_DIR": "/x", "LD_PRELOAD": "/y", "PAGER": "sh"})
    assert r.returncode == 0, r.stderr
    names = sorted(line.split("=", 1)[0] for line in r.stdout.splitlines())
    assert names == ["HOME", "LANG", "LOGNAME", "PATH", "USER"], r.stdout
    # The sandbox's own hostname is the profile; the host's is not.
    r = escalate(edom, "cat", "/etc/hostname")
    assert r.stdout == open("/etc/hostname").read(), r.stderr


def test_a_symlinked_file_is_never_read_by_an_exact_entry(edom, lz):
    """"cat README.md" is exact, but README.md is the agent's to make: a
    symlink that leaves the workspace sends the request to the person."""
    os.symlink("/etc/shadow", os.path.join(lz.work, "README.md"))
    r = escalate(edom, "cat", "README.md")
    assert r.returncode == 126 and "needs the person at the terminal" in r.stderr, r.stderr
    assert r.stdout == ""
    os.unlink(os.path.join(lz.work, "README.md"))
    lz.write("work/README.md", "readme\n")
    r = escalate(edom, "cat", "README.md")
    assert (r.returncode, r.stdout) == (0, "readme\n"), r.stderr


@pytest.mark.parametrize("target", ["outside", "masked"])
def test_a_symlink_swapped_in_after_the_check_is_not_followed_out(edom, lz, target):
    """The agent swaps README.md between a file and a symlink to a file of
    the person's outside the workspace (or to the workspace's .env, which
    the sandbox reads empty), as fast as it can, while it asks for the
    auto-approved "cat README.md" again and again: the check finds a file
    beneath the workspace, and by the time cat opens the name it may be the
    symlink. Landlock holds the command to the workspace as the sandbox
    sees it (and the system's files): the secret never comes back. Without
    it, it came back in most runs of this test."""
    if target == "outside":
        secret = lz.write("secret.txt", "the person's secret\n", mode=0o600)
    else:
        lz.write("work/.env", "the person's secret\n", mode=0o600)
        secret = ".env"
    lz.write("work/README.md", "readme\n")
    script = f"""
cd /workspace
printf 'readme\\n' > /tmp/r
( while :; do ln -sf {secret} .a && mv -f .a README.md; cp /tmp/r .b && mv -f .b README.md; done ) &
i=0
while [ $i -lt 120 ]; do /run/lazaret/escalate cat README.md; i=$((i+1)); done
kill $!
"""
    r = edom.run("run", "--", "/bin/sh", "-c", script, timeout=600)
    assert "secret" not in r.stdout, r.stdout
    # The race ran: requests were approved and read the file, others found
    # the symlink (the person's to decide), and some were approved on the
    # file and found the symlink when they opened it (Landlock refused).
    assert r.stdout.count("readme\n") >= 5, (r.stdout, r.stderr)
    assert "needs the person at the terminal" in r.stderr, r.stderr
    assert "Permission denied" in r.stderr, r.stderr


def test_what_needs_a_person_is_refused_without_a_terminal(edom):
    cases = [
        "uname -a; id",  # metacharacters: never auto-approved
        "uname -a && id",
        "uname $(id)",
        "uname `id`",
        "uname -a > /tmp/x",
        "ls",  # "ls -l ..." does not approve "ls"
        "lsblk",  # nor "lsblk"
        "uname -a -r",  # "uname -a" is exact
        "cat README.md /etc/shadow",  # nor does "cat README.md" take more words
        "ls -l /etc/hostname",  # a prefix's added words name files in the workspace
        "ls -l /root/.ssh",
        "ls -l ../",
        "ls -l --hide=x",  # an option with a value might name a file
        "./ls -l",  # nor a relative path
        "/proc/self/root/usr/bin/ls -l",
        "id",
    ]
    for command in cases:
        r = escalate(edom, command)
        assert r.returncode == 126, (command, r.stdout, r.stderr)
        assert "needs the person at the terminal, and this session has none" in r.stderr, (command, r.stderr)
        assert r.stdout == ""
    r = edom.run("audit", "--json", "--verify")
    doc = json.loads(r.stdout)
    assert doc["verified"] == {"intact": True}
    assert [x["command"] for x in doc["records"]] == cases
    assert all(x["decision"] == "refused" and x["exit_code"] is None for x in doc["records"])


def test_audit_trail(edom, lz):
    assert escalate(edom, "--why", "to know the kernel", "--", "uname", "-a").returncode == 0
    assert escalate(edom, "false").returncode == 1
    assert escalate(edom, "id").returncode == 126
    r = edom.run("audit", "--json", "--verify")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verified"] == {"intact": True}
    recs = doc["records"]
    assert [(x["command"], x["decision"], x["exit_code"]) for x in recs] == [
        ("uname -a", "auto", 0), ("false", "auto", 1), ("id", "refused", None)]
    host = subprocess.run(["uname", "-a"], capture_output=True).stdout
    assert recs[0]["stdout_bytes"] == len(host)
    assert recs[0]["stdout_sha256"] == hashlib.sha256(host).hexdigest()
    assert recs[0]["justification"] == "to know the kernel"
    assert recs[0]["final_command"] == "/usr/bin/uname -a"
    assert recs[0]["profile"] == "shell"
    for x in recs:
        assert len(x["request_id"]) == 36 and len(x["session_id"]) == 36
        assert x["received_at"].endswith("Z") and x["finished_at"].endswith("Z")


def test_output_is_capped(lz, busybox_image):
    d = esc_domain(lz, busybox_image)
    text = open(d.cfg).read().replace("enabled = true\n", "enabled = true\noutput_limit = 1024\n", 1)
    lz.write("cfg.toml", text)
    lz.write("work/README.md", "x" * 5000)
    r = d.run("run", "--", "/run/lazaret/escalate", "cat", "README.md")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.encode()) == 1024
    assert "lazaret-escalate: the host command's standard output was cut at 1024 bytes" in r.stderr
    doc = json.loads(d.run("audit", "--json").stdout)
    assert doc["records"][0]["stdout_truncated"] is True and doc["records"][0]["stdout_bytes"] == 1024
    d.assert_clean()


@pytest.fixture
def attack(lz):
    return build_tool(lz, "escalate-attack")


def session_credentials(d):
    """A running session's id and credential, as a process in it sees them."""
    p = d.popen("run", "--", "/bin/sh", "-c",
                "echo $LAZARET_SESSION_ID; echo $LAZARET_SESSION_CREDENTIAL; echo $LAZARET_PROFILE; sleep 1000")
    sid = p.stdout.readline().decode().strip()
    cred = p.stdout.readline().decode().strip()
    profile = p.stdout.readline().decode().strip()
    assert len(sid) == 36 and cred.startswith("{") and profile == "shell"
    return p, sid, cred


def paths(d, lz):
    [domain] = d.domain_dirs()
    h = os.path.basename(domain)
    sock = os.path.join(d.sock, h, "escalate.sock")
    certs = f"/tmp/lazaret-{lz.user.pw_uid}/escalate-{h}/certs"
    return sock, certs


def test_attacks_on_the_socket(edom, lz, attack):
    p, sid, cred = session_credentials(edom)
    try:
        wait_sessions(edom, 1)
        sock, certs = paths(edom, lz)

        def send(mode, command="uname -a", session=sid, credential=cred):
            r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--", attack, sock, certs, session, credential,
                                "shell", mode, command], capture_output=True, text=True, timeout=60)
            return r.stdout.splitlines()

        # The sandbox's own certificate and credential: approved.
        assert send("good") == ["approved=1 ran=1 exit=0 reason="]
        # The same request id twice: the second is refused.
        assert send("replay") == ["approved=1 ran=1 exit=0 reason=",
                                  "approved=0 ran=0 exit=0 reason=this request id was used before"]
        assert send("stale") == ["approved=0 ran=0 exit=0 reason=the request's time is more than five minutes off"]
        assert send("badsig") == ["approved=0 ran=0 exit=0 reason=the request's signature does not verify"]
        assert send("extra") == ["approved=0 ran=0 exit=0 reason=the request has unknown or missing fields"]
        assert send("oversized") == ["approved=0 ran=0 exit=0 reason=the request is larger than 64 KiB"]
        assert send("malformed") == ["approved=0 ran=0 exit=0 reason=the request is not one JSON object"]
        # Unknown session id; and a real session's id with another
        # session's credential.
        assert send("good", session="aaaaaaaa-0000-4000-8000-00000000000a") == [
            "approved=0 ran=0 exit=0 reason=no open session has this id"]
        q, sid2, cred2 = session_credentials(edom)
        try:
            wait_sessions(edom, 2)
            assert send("good", session=sid2, credential=cred) == [
                "approved=0 ran=0 exit=0 reason=the delegation was not signed by the session's anchor"]
            assert send("good", session=sid2, credential=cred2) == ["approved=1 ran=1 exit=0 reason="]
        finally:
            q.kill()
            q.wait()
        # No client certificate: no answer at all, and nothing was parsed.
        assert send("nocert") == ["no answer"]
        log = edom.log()
        assert "TLS handshake refused" in log

        # openssl s_client, an independent client, completes no exchange
        # without a certificate.
        # (-ign_eof: it waits for the server, whose refusal comes after the
        # client's side of a TLS 1.3 handshake is done.)
        r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--", "openssl", "s_client", "-unix", sock,
                            "-tls1_3", "-ign_eof", "-CAfile", os.path.join(certs, "ca.pem")],
                           input="\0\0\0\2{}", capture_output=True, text=True, timeout=30)
        assert "certificate required" in (r.stdout + r.stderr), r.stdout + r.stderr
        # With the sandbox's certificate it does complete the handshake.
        r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--", "openssl", "s_client", "-unix", sock,
                            "-tls1_3", "-CAfile", os.path.join(certs, "ca.pem"), "-cert",
                            os.path.join(certs, "client.pem"), "-key", os.path.join(certs, "client.key")],
                           input="", capture_output=True, text=True, timeout=30)
        assert "Verify return code: 0 (ok)" in r.stdout and "TLSv1.3" in r.stdout, r.stdout + r.stderr
        # TLS 1.2 is not spoken.
        r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--", "openssl", "s_client", "-unix", sock,
                            "-tls1_2", "-CAfile", os.path.join(certs, "ca.pem"), "-cert",
                            os.path.join(certs, "client.pem"), "-key", os.path.join(certs, "client.key")],
                           input="", capture_output=True, text=True, timeout=30)
        assert "Cipher is (NONE)" in r.stdout and "TLSv1.2" not in r.stdout.split("Cipher is")[0], r.stdout

        # Everything past the handshake is on record, refusals included.
        doc = json.loads(edom.run("audit", "--json", "--verify").stdout)
        assert doc["verified"] == {"intact": True}
        decisions = [(x["decision"], x.get("reason")) for x in doc["records"]]
        assert ("refused", "this request id was used before") in decisions
        assert ("refused", "the request's signature does not verify") in decisions
        assert ("refused", "the request is larger than 64 KiB") in decisions
        assert sum(1 for d, _ in decisions if d == "auto") == 3
    finally:
        edom.run("stop")
        p.kill()
        p.wait()


def test_an_expired_certificate_is_refused(edom, lz, attack):
    """The sandbox's own certificate, once expired, opens nothing: from
    inside (lazaret-escalate) and from outside (the attack tool with the
    same files), refused in the handshake, before any request is read."""
    env = {"LAZARET_ESCALATION_CERT_SECONDS": "3"}
    p = edom.popen("run", "--", "/bin/sh", "-c",
                   "echo $LAZARET_SESSION_ID; echo $LAZARET_SESSION_CREDENTIAL; "
                   "/run/lazaret/escalate uname -a >/dev/null; echo early=$?; sleep 6; "
                   "/run/lazaret/escalate uname -a; echo late=$?; sleep 1000", env=env)
    try:
        sid = p.stdout.readline().decode().strip()
        cred = p.stdout.readline().decode().strip()
        assert p.stdout.readline().decode().strip() == "early=0"
        assert p.stdout.readline().decode().strip() == "late=125"
        sock, certs = paths(edom, lz)
        r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--", attack, sock, certs, sid, cred, "shell",
                            "good"], capture_output=True, text=True, timeout=60)
        assert r.stdout.splitlines() == ["no answer"]
        assert "TLS handshake refused (certificate verify failed: certificate has expired)" in edom.log()
        records = json.loads(edom.run("audit", "--json").stdout)["records"]
        assert len(records) == 1 and records[0]["decision"] == "auto"
    finally:
        edom.run("stop")
        p.kill()
        p.wait()


def test_a_killed_coordinators_socket_and_certificates_are_removed(lz, busybox_image):
    """kill -9 of the coordinator and its watchdog leaves the socket and the
    certificates; the next start of the Domain removes them from its record,
    even with escalation now off (so nothing would overwrite them)."""
    import signal
    d = esc_domain(lz, busybox_image)
    p = d.popen("run", "--", "/bin/sleep", "1000")
    try:
        wait_sessions(d, 1)
        sock, certs = paths(d, lz)
        assert os.path.exists(sock) and os.path.exists(os.path.join(certs, "client.key"))
        # Its watchdog too, so that what it recorded is left for the next
        # coordinator (which has escalation off) to remove.
        [wd] = d.watchdog_pids()
        os.kill(wd, signal.SIGKILL)
        [pid] = d.coordinator_pids()
        os.kill(pid, signal.SIGKILL)
        p.communicate(timeout=30)
        assert os.path.exists(sock) and os.path.exists(os.path.join(certs, "client.key"))
    finally:
        p.kill()
        p.wait()
    text = open(d.cfg).read().replace("[escalation]\nenabled = true\n", "[escalation]\nenabled = false\n")
    lz.write("cfg.toml", text)
    r = d.run("run", "--", "/bin/true")
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(sock) and not os.path.exists(os.path.dirname(sock))
    assert not os.path.exists(os.path.dirname(certs))
    assert "recovering participant" in d.log()
    d.assert_clean()


def test_another_sandboxs_certificate_is_refused(lz, busybox_image, attack):
    """Two Domains: each has its own CA; B's certificate opens nothing of A."""
    a = esc_domain(lz, busybox_image)
    pa, sid_a, cred_a = session_credentials(a)
    other = os.path.join(lz.base, "ws2")
    os.makedirs(other)
    os.chown(other, lz.user.pw_uid, lz.user.pw_gid)
    pb = a.popen("--workspace", other, "run", "--", "/bin/sleep", "1000")
    try:
        deadline = time.time() + 30
        while len(a.domain_dirs()) < 2 or not all(
                os.path.exists(paths_for(a, lz, d)[0]) for d in a.domain_dirs()):
            assert time.time() < deadline, a.log()
            time.sleep(0.2)
        dom_a = [d for d in a.domain_dirs() if os.path.exists(os.path.join(d, "coordinator.log")) and
                 sid_a in open(os.path.join(d, "coordinator.log")).read()][0]
        dom_b = [d for d in a.domain_dirs() if d != dom_a][0]
        sock_a, _ = paths_for(a, lz, dom_a)
        _, certs_b = paths_for(a, lz, dom_b)
        r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--", attack, sock_a, certs_b, sid_a, cred_a, "shell",
                            "good"], capture_output=True, text=True, timeout=60)
        assert r.stdout.splitlines() == ["no answer"]
    finally:
        a.run("stop")
        a.run("--workspace", other, "stop")
        pa.kill()
        pb.kill()
        pa.wait()
        pb.wait()
    a.assert_clean()


def paths_for(d, lz, domain):
    h = os.path.basename(domain)
    return (os.path.join(d.sock, h, "escalate.sock"), f"/tmp/lazaret-{lz.user.pw_uid}/escalate-{h}/certs")


def test_disabled_means_no_socket_and_no_certs(lz, busybox_image):
    d = Domain(lz, busybox_image)  # [escalation] enabled = false
    r = d.run("run", "--", "/bin/sh", "-c",
              "ls /run/lazaret; test -e /run/lazaret/certs || echo no-certs; echo ${LAZARET_SESSION_CREDENTIAL:-none}")
    assert r.returncode == 0, r.stderr
    assert "escalate" not in r.stdout and "sock" not in r.stdout
    assert r.stdout.splitlines()[-2:] == ["no-certs", "none"]
    d.assert_clean()


@pytest.mark.parametrize("broker", [False, True])
def test_host_sockets_in_what_the_sandbox_mounts_are_out_of_reach(lz, busybox_image, broker):
    """Issue 41, item 4: a Unix socket a host program listens on, in the
    workspace, a volume or a read-only volume, cannot be connected to from
    inside (runsc ran with host-uds=open whenever escalation or egress by
    name was on, and reached every one); escalation (and the broker) still
    work, through the dispenser."""
    tools = os.path.join(lz.base, "tools")
    os.makedirs(tools)
    os.rename(build_tool(lz, "ctl-poke"), os.path.join(tools, "ctl-poke"))
    os.chmod(tools, 0o755)
    vol, rovol = os.path.join(lz.base, "vol"), os.path.join(lz.base, "rovol")
    for v in (vol, rovol):
        os.makedirs(v)
        os.chown(v, lz.user.pw_uid, lz.user.pw_gid)
    d = esc_domain(lz, busybox_image)
    text = open(d.cfg).read().replace(
        'runsc_network = "host"\n',
        'runsc_network = "host"\n'
        f'volumes = [{{ host = "{vol}", container = "/vol" }}, {{ host = "{rovol}", container = "/rovol", '
        f'mode = "ro" }}, {{ host = "{tools}", container = "/tools", mode = "ro" }}]\n')
    if broker:
        text = text.replace('runsc_network = "host"\n', 'runsc_network = "host"\nallow_domains = ["example.invalid"]\n')
    lz.write("cfg.toml", text)
    os.makedirs(os.path.join(lz.work, "deep", "er"))
    paths = {"/workspace/deep/er/agent.sock": os.path.join(lz.work, "deep", "er", "agent.sock"),
             "/vol/bus.sock": os.path.join(vol, "bus.sock"), "/rovol/bus.sock": os.path.join(rovol, "bus.sock")}
    servers = []
    for host in paths.values():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(host)
        os.chmod(host, 0o777)
        s.listen(8)
        s.setblocking(False)
        servers.append(s)
    try:
        script = "; ".join(f"/tools/ctl-poke {p} '{{}}'" for p in paths) + "; /run/lazaret/escalate uname -a"
        r = d.run("run", "--", "/bin/sh", "-c", script)
        lines = r.stdout.splitlines()
        assert lines[:3] == ["cannot connect: Connection refused"] * 3, (r.stdout, r.stderr)
        host = subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout
        assert (r.returncode, "\n".join(lines[3:]) + "\n") == (0, host), (r.stdout, r.stderr)
        assert "Unix socket" not in r.stderr
        for s in servers:
            with pytest.raises(BlockingIOError):
                s.accept()
        if broker:
            # The relay reaches the broker (which refuses the name it was
            # not given): the door works for it too.
            r = d.run("run", "--", "/run/lazaret/relay", "--probe", "not-listed.example", "443")
            assert r.stdout.startswith("refused "), (r.stdout, r.stderr)
    finally:
        for s, p in zip(servers, paths.values()):
            s.close()
            os.unlink(p)
    d.assert_clean()
    assert os.listdir(d.sock) == []


def test_the_dispenser_comes_back(edom, lz):
    """The agent (root in the sandbox) can kill the dispenser or take its
    socket away: only its own escalation waits, and both come back within
    a few seconds."""
    holder = edom.popen("run", "--", "/bin/sleep", "120")
    try:
        wait_sessions(edom, 1)
        script = ("for p in $(ls /proc | grep -E '^[0-9]+$'); do "
                  "tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q '^/run/lazaret/init --dispense' && "
                  "kill -9 $p && echo KILLED; done; "
                  "i=0; until /run/lazaret/escalate uname -a >/dev/null 2>&1; do i=$((i+1)); "
                  "[ $i -gt 20 ] && echo NEVER && exit 1; sleep 0.5; done; echo BACK; "
                  "rm -f /run/lazaret/dispense/escalate; mkdir /run/lazaret/dispense/escalate; "
                  "i=0; until /run/lazaret/escalate uname -a >/dev/null 2>&1; do i=$((i+1)); "
                  "[ $i -gt 20 ] && echo NEVER && exit 1; sleep 0.5; done; test -S /run/lazaret/dispense/escalate "
                  "&& echo MADE-AGAIN")
        r = edom.run("run", "--", "/bin/sh", "-c", script)
        assert (r.returncode, r.stdout) == (0, "KILLED\nBACK\nMADE-AGAIN\n"), (r.stdout, r.stderr)
        assert "the sandbox's dispenser ended; running again" in edom.log()
    finally:
        edom.run("stop")
        holder.wait(timeout=30)


def test_flooding_the_socket(edom, lz):
    """Hundreds of connections that never finish a handshake: the sandbox's
    terminals stay responsive, the coordinator keeps at most 16 and drops
    each after 10 s, and escalation works again after."""
    p, sid, cred = session_credentials(edom)
    try:
        wait_sessions(edom, 1)
        sock, _ = paths(edom, lz)
        held = []
        for _ in range(200):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(sock)
            held.append(s)
        t = time.time()
        r = edom.run("run", "--", "/bin/echo", "still here")
        assert (r.returncode, r.stdout) == (0, "still here\n"), r.stderr
        assert time.time() - t < 10
        # The 16 it kept are dropped after 10 s without a request; the
        # flood is still open, and escalation works again.
        deadline = time.time() + 30
        while True:
            r = escalate(edom, "uname", "-a")
            if r.returncode == 0:
                break
            assert time.time() < deadline, r.stderr
            time.sleep(1)
        assert time.time() - t >= 9, "escalation worked while the flood held every slot"
        for s in held:
            s.close()
        log = edom.log()
        assert "connections already; closing another" in log
        assert "no complete request within 10 s; closed" in log
    finally:
        edom.run("stop")
        p.kill()
        p.wait()


def test_socket_dir_not_private_is_refused(lz, busybox_image):
    """A socket_dir others can enter: one clear error, nothing started, no
    certificates or socket left behind."""
    d = esc_domain(lz, busybox_image)
    os.chmod(d.sock, 0o755)
    # The runtime directory is the test user's, shared with the tests before
    # this one: an escalation directory of a Domain whose coordinator is
    # still ending after its test may be there (CI's ASan pass saw one).
    run_dir = f"/tmp/lazaret-{lz.user.pw_uid}"
    escalate_dirs = lambda: ({n for n in os.listdir(run_dir) if n.startswith("escalate-")}
                             if os.path.isdir(run_dir) else set())
    before = escalate_dirs()
    r = d.run("run", "--", "/bin/true")
    assert r.returncode == 125
    assert r.stderr.splitlines() == [
        f"lazaret: error: escalation.socket_dir {d.sock} is accessible to group or others (it must be mode 0700); "
        f"run 'chmod 0700 {d.sock}'"], r.stderr
    d.assert_clean()
    assert os.listdir(d.sock) == []
    # Checked before anything starts: no Domain, no escalation state.
    assert d.domain_dirs() == []
    assert escalate_dirs() <= before


def host_sleepers(lz):
    """The test user's host processes running the approved "sleep 9876"."""
    r = subprocess.run(["pgrep", "-u", lz.user.pw_name, "-f", "^/usr/bin/sleep 9876$"], capture_output=True,
                       text=True)
    return r.stdout.split()


def test_commands_end_at_the_time_limit_and_with_their_requester(lz, busybox_image):
    d = esc_domain(lz, busybox_image)
    text = open(d.cfg).read().replace("enabled = true\n", "enabled = true\ntime_limit = 2\n", 1)
    lz.write("cfg.toml", text)
    # An endless command ends at the limit: SIGTERM (exit 143).
    t = time.time()
    r = d.run("run", "--", "/run/lazaret/escalate", "cat", "/dev/zero", timeout=120)
    assert r.returncode == 143, r.stderr
    assert 1.5 < time.time() - t < 30
    # Eight requesters killed after a second: their host commands end too.
    script = ("p=''; for i in 1 2 3 4 5 6 7 8; do /run/lazaret/escalate sleep 9876 & p=\"$p $!\"; done; "
              "sleep 2; kill $p; sleep 1; echo done")
    text = open(d.cfg).read().replace("time_limit = 2\n", "time_limit = 600\n", 1)
    lz.write("cfg.toml", text)
    # Another session keeps the sandbox (and its coordinator) up, so only
    # the hang-ups can end the commands.
    holder = d.popen("run", "--", "/bin/sleep", "120")
    try:
        wait_sessions(d, 1)
        r = d.run("run", "--", "/bin/sh", "-c", script, timeout=120)
        assert r.returncode == 0 and r.stdout == "done\n", r.stderr
        deadline = time.time() + 10
        while host_sleepers(lz) and time.time() < deadline:
            time.sleep(0.2)
        assert host_sleepers(lz) == []
        assert d.status()["running"]
    finally:
        d.run("stop")
        holder.wait(timeout=30)
    records = json.loads(d.run("audit", "--json").stdout)["records"]
    assert records[0]["ended_by"] == "time_limit"
    ended = [x.get("ended_by") for x in records if x["command"] == "sleep 9876"]
    assert len(ended) == 8 and set(ended) == {"requester_hung_up"}, records
    d.assert_clean()


def test_the_socket_cannot_be_replaced_from_inside(edom, lz):
    """The host's socket directory is not mounted (the dispenser's socket is
    in the sandbox's own tmpfs): nothing made inside reaches it, and the
    next run of the Domain still escalates (issue 14: a directory in its
    place failed every later run)."""
    script = ("ls -A /run/lazaret/sock 2>/dev/null; cd /run/lazaret/dispense; (rm -f escalate) 2>/dev/null; "
              "(mkdir escalate) 2>/dev/null; (mkdir x) 2>/dev/null && echo WROTE; echo DONE")
    r = edom.run("run", "--", "/bin/sh", "-c", script)
    assert r.returncode == 0 and r.stdout.endswith("DONE\n"), r.stderr
    for h in os.listdir(edom.sock):
        assert set(os.listdir(os.path.join(edom.sock, h))) <= {"escalate.sock"}
    r = escalate(edom, "uname", "-a")
    assert r.returncode == 0, r.stderr


def probe_domain(lz, image, entries):
    return esc_domain(lz, image, auto=json.dumps(entries))


def test_a_prefix_entry_takes_no_option_the_person_did_not_write(lz, busybox_image):
    """Issue 41: with "sort ...", GNU sort's --compress-program runs a program
    of the request's choosing on the agent's data: a shell on the host.
    Options the entry did not name (and values stuck to one, -m/etc/shadow)
    now send the request to the person."""
    d = probe_domain(lz, busybox_image, ["sort ..."])
    marker = os.path.join(lz.base, "sort-ran")
    lz.write("work/sub/data.txt", "".join(f"touch {marker} # {i:06d}\n" for i in range(20000)))
    lz.write("work/sh", "")
    for words in (["sort", "-S1", "-Tsub", "--compress-program", "sh", "sub/data.txt"],
                  ["sort", "--compress-program", "sh", "sub/data.txt"], ["sort", "-m/etc/shadow", "sub/data.txt"]):
        r = escalate(d, *words)
        assert r.returncode == 126 and "needs the person at the terminal" in r.stderr, (words, r.stderr)
        assert not os.path.exists(marker), words
    r = escalate(d, "sort", "sub/data.txt")
    assert r.returncode == 0 and r.stdout.startswith(f"touch {marker} # 000000\n"), r.stderr
    assert not os.path.exists(marker)
    d.assert_clean()


def test_auto_approve_never_hands_out_a_masked_file(lz, busybox_image):
    """Issue 41: .env reads empty inside the sandbox; an auto-approved host
    command read the real one through a symlink the agent made or, with a
    prefix entry, by its name."""
    d = probe_domain(lz, busybox_image, ["cat README.md", "cat ..."])
    lz.write("work/.env", "API_KEY=hostsecret\n")
    lz.write("work/sub/x", "x\n")
    r = d.run("run", "--", "/bin/sh", "-c", "cd /workspace && cat .env; rm -f README.md && ln -s .env README.md && "
              "/run/lazaret/escalate cat README.md; /run/lazaret/escalate cat .env; "
              "/run/lazaret/escalate cat sub/../.env; echo DONE")
    assert "hostsecret" not in r.stdout, r.stdout
    assert r.stdout.strip().endswith("DONE"), r.stdout + r.stderr
    assert r.stderr.count("needs the person at the terminal") == 3, r.stderr
    d.assert_clean()


PROBE = r"""#!/bin/sh
# An auto-approved program of the person's that the agent turns (issue 41):
# it tries the network, a host Unix socket and a masked file, and leaves
# processes behind.
/usr/bin/python3 -c '
import socket
for fam, addr in ((socket.AF_INET, ("127.0.0.1", PORT)), (socket.AF_UNIX, "SOCK")):
    try:
        s = socket.socket(fam)
        s.settimeout(5)
        s.connect(addr)
        print("CONNECTED", fam.name)
    except OSError as e:
        print("refused", fam.name, e.errno)
try:
    print("SECRET", open(".env").read().strip())
except OSError as e:
    print("env refused", e.errno)
'
setsid sleep 3171 </dev/null >/dev/null 2>&1 &
( sleep 3172 </dev/null >/dev/null 2>&1 & )
echo "probe-uid $(id -u)"; echo probe-done
"""


def test_an_auto_approved_command_runs_in_a_sandbox_of_its_own(lz, busybox_image, request):
    """Issue 41: an auto-approved command is confined beyond files: no
    network and no socket (a host loopback service, a host Unix socket in
    the workspace, which Landlock up to ABI 8 does not guard), no masked
    file, and nothing it starts outlives it (setsid or double fork)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    unix_path = os.path.join(lz.work, "host.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    os.chmod(unix_path, 0o777)
    unix.listen(8)
    probe = "/usr/local/bin/lazaret-test-probe"
    with open(probe, "w") as f:
        f.write(PROBE.replace("PORT", str(port)).replace("SOCK", unix_path))
    os.chmod(probe, 0o755)
    request.addfinalizer(lambda: os.unlink(probe))
    request.addfinalizer(listener.close)
    request.addfinalizer(unix.close)
    lz.write("work/.env", "API_KEY=hostsecret\n")
    d = probe_domain(lz, busybox_image, ["lazaret-test-probe"])
    r = escalate(d, "lazaret-test-probe")
    time.sleep(0.5)
    # (Any user's: rootful, the command would run as the workspace's owner.)
    survivors = subprocess.run(["pgrep", "-f", "^sleep 317[12]$"], capture_output=True, text=True).stdout.split()
    for pid in survivors:
        os.kill(int(pid), 9)
    assert r.returncode == 0 and "probe-done" in r.stdout, (r.stdout, r.stderr)
    assert "CONNECTED" not in r.stdout and "SECRET" not in r.stdout, r.stdout
    assert "refused AF_INET" in r.stdout and "refused AF_UNIX" in r.stdout and "env refused" in r.stdout, r.stdout
    assert f"probe-uid {lz.user.pw_uid}" in r.stdout, r.stdout
    assert survivors == [], "processes outlived the auto-approved command"
    d.assert_clean()


def test_rootful_an_auto_approved_command_never_runs_as_root(lazaret_bin, tmp_path, test_user):
    """Issue 41: run by root, lazaret ran auto-approved commands as root
    (Landlock lets them read /etc, where /etc/shadow is root's). Now they
    run as the workspace's owner, and a workspace of root's sends every
    request to the person."""
    from conftest import Rootful
    rf = Rootful(lazaret_bin, tmp_path)
    rf.cfg.write_text(rf.cfg.read_text().replace("[escalation]\nenabled = false\n",
                                                 '[escalation]\nenabled = true\nauto_approve = ["id -u"]\n'))
    r = rf.run("run", "--", "/run/lazaret/escalate", "id", "-u")
    assert r.returncode == 126 and "needs the person at the terminal" in r.stderr, (r.stdout, r.stderr)
    os.chown(rf.work, test_user.pw_uid, test_user.pw_gid)
    r = rf.run("run", "--", "/run/lazaret/escalate", "id", "-u")
    assert (r.returncode, r.stdout) == (0, f"{test_user.pw_uid}\n"), r.stderr


def test_an_auto_approved_command_cannot_take_a_protected_name_away(lz, busybox_image):
    """Removing or renaming a name is a right of its directory: a directory
    that holds a protected (or masked) name is granted to an auto-approved
    command for listing only, so "rm ..." cannot remove .envrc (which the
    sandbox itself may not remove either), at the top or deeper; in a
    directory that holds none, it works."""
    d = probe_domain(lz, busybox_image, ["rm ..."])
    for f in ("work/.envrc", "work/sub/.envrc", "work/sub/plain.txt", "work/other/x.txt"):
        lz.write(f, "x\n")
    for word in (".envrc", "sub/.envrc", "sub/plain.txt"):
        r = escalate(d, "rm", word)
        assert r.returncode != 0 and "Permission denied" in r.stdout + r.stderr, (word, r.stdout, r.stderr)
        assert os.path.exists(os.path.join(lz.work, word)), word
    r = escalate(d, "rm", "other/x.txt")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not os.path.exists(os.path.join(lz.work, "other", "x.txt"))
    d.assert_clean()
