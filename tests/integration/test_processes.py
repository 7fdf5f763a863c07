# SPDX-License-Identifier: MIT
"""The processes started inside the sandbox on the event record (issue 19),
from the pinned runsc's trace points, on the real stack as the test user:
each exec with its command line, directory and user, on the session whose
process tree it belongs to (also through a subshell that never execs);
what the agent chose shown inert; the environment (where the sessions'
credentials live) never recorded; a flood of execs recorded at a bounded
rate with the rest counted, terminals still answering; the sink's socket
gone once runsc has connected. The decoder's malformed input is in
tests/unit/test-trace-wire.c."""
import os
import time

from test_events import events
from test_run import Domain, busybox_image, kill_cli  # noqa: F401  (fixture)


def procs(evs):
    return [e for e in evs if e["source"] == "process" and e["kind"] == "started"]


def release(p, want):
    """Let a held session go on (a line on its input), read its last line,
    wait for it."""
    p.stdin.write(b"\n")
    p.stdin.flush()
    assert p.stdout.readline() == want
    p.wait(timeout=60)


def reap(p):
    if p.poll() is None:
        kill_cli(p)
        p.wait()


def test_processes_on_record(lz, busybox_image):
    d = Domain(lz, busybox_image)
    evil = "\x1b]0;owned\x07\u202egnp.exe</script>|a|"
    script = ("/bin/true; cd /tmp && /bin/echo \"$1\" >/dev/null; "
              "( cd / && ( /bin/ls -d /etc >/dev/null ) ); "
              "SECRET_TOKEN=$(printf 'hunter%s' 2-xyzzy) /usr/bin/env >/dev/null")
    r = d.run("run", "--", "/bin/sh", "-c", script, "sh", evil)
    assert r.returncode == 0, r.stderr
    d.assert_clean()

    evs = events(d, want=lambda evs: len(procs(evs)) >= 4)
    [session] = [e["session"] for e in evs if e["source"] == "session" and e["kind"] == "started"]
    ps = procs(evs)
    by_argv0 = {p["data"]["argv"][0]: p for p in ps}
    # Every exec of the session, on the session, with what it ran where.
    for argv0 in ("/bin/true", "/bin/echo", "/bin/ls", "/usr/bin/env"):
        assert argv0 in by_argv0, (argv0, ps)
        assert by_argv0[argv0]["session"] == session, by_argv0[argv0]
    assert by_argv0["/bin/echo"]["data"]["argv"] == ["/bin/echo", evil], by_argv0["/bin/echo"]
    assert by_argv0["/bin/echo"]["data"]["cwd"] == "/tmp"
    assert by_argv0["/bin/ls"]["data"]["cwd"] == "/"  # two subshells deep, neither an exec
    assert by_argv0["/bin/true"]["data"]["cwd"] == "/workspace"
    true = by_argv0["/bin/true"]["data"]
    assert true["path"].startswith("/bin/") and true["argc"] == 1, true
    assert isinstance(true["pid"], int) and true["pid"] > 0 and true["ppid"] > 0, true
    assert (true["uid"], true["gid"]) == (0, 0), true
    assert not any(p["data"].get("probe") for p in ps), ps

    # The environment is never on record: a variable the agent set, nor
    # anything of the session's own.
    [dom] = d.domain_dirs()
    raw = b"".join(open(os.path.join(dom, "events", n), "rb").read()
                   for n in os.listdir(os.path.join(dom, "events")))
    assert b"hunter2-xyzzy" not in raw and b"LAZARET_SESSION_ID" not in raw
    assert all(b == 0x0A or 0x20 <= b < 0x7F for b in raw), raw

    # lazaret events shows them, inert.
    r = d.run("events", "--source", "process")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout, repr(r.stdout)
    assert "\\x1b]0;owned\\x07<U+202E>gnp.exe</script>" in r.stdout, r.stdout
    assert len(r.stdout.splitlines()) == len(ps)


def test_two_sessions_each_their_own(lz, busybox_image):
    """Two sessions at once: each exec on the session that started it; a
    process left behind stays its session's after that session ends."""
    d = Domain(lz, busybox_image)
    holder = d.popen("run", "--", "/bin/sh", "-c", "/bin/echo up; read x; /bin/echo held")
    a = None
    try:
        assert holder.stdout.readline() == b"up\n"
        a = d.popen("run", "--", "/bin/sh", "-c",
                    "/bin/sleep 60 & (/bin/sleep 3; /bin/echo late-a >/dev/null) & "
                    "/bin/echo a-started; read x; /bin/echo a-done")
        assert a.stdout.readline() == b"a-started\n"
        st = d.status()
        assert st["events"]["processes"]["observed"] is True, st["events"]
        assert st["events"]["processes"]["via"].startswith("gVisor"), st["events"]
        r = d.run("run", "--", "/bin/sh", "-c", "/bin/echo b1; /bin/echo b2")
        assert r.returncode == 0 and r.stdout == "b1\nb2\n", r.stderr
        release(a, b"a-done\n")
        evs = events(d, want=lambda evs: any(p["data"]["argv"] == ["/bin/echo", "late-a"] for p in procs(evs)))
        release(holder, b"held\n")
    finally:
        reap(holder)
        if a:
            reap(a)
    starts = [e for e in evs if e["source"] == "session" and e["kind"] == "started"]
    sa = [s["session"] for s in starts if "a-started" in " ".join(s["data"]["argv"])][0]
    sb = [s["session"] for s in starts if "b1" in " ".join(s["data"]["argv"])][0]
    owner = {tuple(p["data"]["argv"]): p for p in procs(evs)}
    assert owner[("/bin/sleep", "60")]["session"] == sa, owner
    assert owner[("/bin/echo", "a-started")]["session"] == sa, owner
    assert owner[("/bin/echo", "a-done")]["session"] == sa, owner
    assert owner[("/bin/echo", "b1")]["session"] == sb and owner[("/bin/echo", "b2")]["session"] == sb, owner
    # Started after its session ended, in a subshell that never exec'd.
    [a_end] = [e for e in evs if e["source"] == "session" and e["kind"] == "ended" and e["session"] == sa]
    late = owner[("/bin/echo", "late-a")]
    assert late["time"] > a_end["time"] and late["session"] == sa, (late, a_end)
    d.assert_clean()


def test_a_flood_of_execs_is_bounded(lz, busybox_image):
    """The agent execs as fast as it can: a burst is recorded, then a
    bounded rate, the rest counted on the next record and in status; a
    second terminal still answers; the sink's socket is not reachable."""
    d = Domain(lz, busybox_image)
    n = 3000
    t0 = time.time()
    flood = d.popen("run", "--", "/bin/sh", "-c",
                    f"i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done; /bin/sleep 1.2; "
                    "/bin/echo after; read x; echo done")
    try:
        assert flood.stdout.readline() == b"after\n"
        elapsed = time.time() - t0
        t0 = time.time()
        r = d.run("run", "--", "/bin/echo", "still here", timeout=60)
        assert (r.returncode, r.stdout) == (0, "still here\n"), r.stderr
        assert time.time() - t0 < 20
        # The socket runsc connected to is gone: nothing else can connect.
        [dom] = d.domain_dirs()
        tdir = f"/tmp/lazaret-{lz.user.pw_uid}/lazaret_trace_{os.path.basename(dom)}"
        assert os.path.isdir(tdir), tdir
        assert "sink.sock" not in os.listdir(tdir), os.listdir(tdir)
        st = d.status()["events"]["processes"]
        assert st["observed"] is True and st["execs"] >= n, st
        assert st["over_rate"] > 0 and st["recorded"] + st["over_rate"] == st["execs"], st
        # The coordinator's bucket: 500 at once, then 50 a second.
        assert st["recorded"] <= 500 + 50 * elapsed + 10, (st, elapsed)
        release(flood, b"done\n")
    finally:
        reap(flood)
    evs = events(d, want=lambda evs: any(p["data"]["argv"] == ["/bin/echo", "after"] for p in procs(evs)))
    ps = procs(evs)
    # What was not recorded is counted on the records that follow.
    not_recorded = sum(p["data"].get("not_recorded", 0) for p in ps)
    trues = [p for p in ps if p["data"]["argv"] == ["/bin/true"]]
    # (the sleep's record may be among those not recorded)
    assert not_recorded > 0 and n <= len(trues) + not_recorded <= n + 1, (len(trues), not_recorded)
    d.assert_clean()
    assert not os.path.exists(tdir), os.listdir(tdir)


def test_no_trace_socket_no_processes_but_a_sandbox(lz, busybox_image, tmp_path):
    """When the trace socket cannot be made (here a planted symlink where
    its directory goes, which is never followed), the sandbox runs without
    the processes and status says why."""
    d = Domain(lz, busybox_image)
    assert d.run("run", "--", "/bin/true").returncode == 0
    d.assert_clean()
    [dom] = d.domain_dirs()
    tdir = f"/tmp/lazaret-{lz.user.pw_uid}/lazaret_trace_{os.path.basename(dom)}"
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.chown(target, lz.user.pw_uid, lz.user.pw_gid)
    os.symlink(target, tdir)
    try:
        holder = d.popen("run", "--", "/bin/sh", "-c", "/bin/echo up; read x")
        try:
            assert holder.stdout.readline() == b"up\n"
            pr = d.status()["events"]["processes"]
            assert pr["observed"] is False and "cannot make" in pr["why"] and tdir in pr["why"], pr
            r = d.run("status")
            assert r.returncode == 0 and "processes   NOT OBSERVED: cannot make" in r.stdout, r.stdout
            holder.stdin.write(b"\n")
            holder.stdin.flush()
            holder.wait(timeout=60)
        finally:
            reap(holder)
        assert os.listdir(target) == [] and os.path.islink(tdir)
    finally:
        os.unlink(tdir)
    d.assert_clean()
