# SPDX-License-Identifier: MIT
"""git's file system monitor answered from the host (issue 44).

In branch mode every session's git gets core.fsmonitor (lazaret-init
--fsmonitor, through the dispenser to the coordinator's inotify watch of the
agent's worktree) and core.untrackedCache. What git then says must be what
it says without them: each step below compares `git status` with the
monitor against `git status` with none (the oracle), after changes made
inside and on the host. The hook's own answers are read too, so a monitor
that always said "everything changed" (correct, and no faster) fails."""
import base64
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from test_run import Domain, debian_image, git_as  # noqa: F401

# Without the monitor and without the untracked cache the index may hold
# (git keeps using one without core.untrackedCache, and trusts the "valid"
# marks the monitor left in it); GIT_OPTIONAL_LOCKS=0: the index is not
# written, so the next monitored step starts from the monitored state.
ORACLE = ("env -u GIT_CONFIG_COUNT GIT_OPTIONAL_LOCKS=0 git -c core.fsmonitor=false -c core.untrackedCache=false "
          "status --porcelain -uall")
MONITORED = "git status --porcelain -uall"
HOOK = "/run/lazaret/init --fsmonitor 2"


def answer(raw):
    """The hook's output: (token, [paths])."""
    parts = raw.split("\0")
    assert parts and parts[-1] == "", repr(raw)
    return parts[0], parts[1:-1]


@pytest.fixture
def fsdom(lz, debian_image):  # noqa: F811
    git_as(lz, "init", "-q", "-b", "main")
    for d in range(1, 6):
        for f in range(1, 6):
            lz.write(f"work/d{d}/f{f}", f"{d}.{f}\n")
    git_as(lz, "add", "-A")
    git_as(lz, "commit", "-q", "-m", "base")
    dom = Domain(lz, debian_image)
    # One session keeps the sandbox up; each step joins it.
    keep = dom.popen("run", "--", "/bin/sleep", "600")
    dom.keep = keep
    for _ in range(600):
        r = dom.run("status", "--json")
        if r.returncode == 0 and json.loads(r.stdout).get("sessions"):
            break
        if keep.poll() is not None:
            pytest.fail(f"the sandbox did not start: {keep.stderr.read().decode()}")
        threading.Event().wait(0.1)
    yield dom
    keep.kill()
    keep.wait()
    dom.run("stop")


def inside(dom, script):
    r = dom.run("run", "--", "/bin/bash", "-c", "cd /workspace && " + script, timeout=120)
    assert r.returncode == 0, (script, r.stdout, r.stderr)
    return r.stdout


def same_status(dom, after=""):
    out = inside(dom, (after + " && " if after else "") + f"{MONITORED}; echo ---; {ORACLE}")
    mon, _, oracle = out.partition("---\n")
    assert mon == oracle, (after, mon, oracle)
    return mon


CLIENT = r"""
import os, socket, sys, time
P = "/run/lazaret/dispense/fsmonitor"


def connect():
    # The dispenser answers with a status byte and the host's connected socket.
    d = socket.socket(socket.AF_UNIX)
    d.connect(P)
    msg, fds, _, _ = socket.recv_fds(d, 1, 1)
    d.close()
    assert msg == b"\0" and len(fds) == 1, (msg, fds)
    return socket.socket(fileno=fds[0])


def ask(data):
    s = connect()
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b
    except (BrokenPipeError, ConnectionResetError):
        return b"reset"
    finally:
        s.close()


if sys.argv[1] == "attack":
    # Not the protocol: closed unanswered (a request past its 72 bytes is
    # never read to its end); a token it never gave: "everything".
    for data in (b"", b"garbage\n", b"1 x\n", b"\0\n", b"2 " + b"A" * 100000 + b"\n"):
        out = ask(data)
        assert out in (b"", b"reset"), (data[:20], out)
    out = ask(b"2 ../../etc/passwd\n")
    assert out.split(b"\0")[1:] == [b"/", b""], out
    # One that never finishes its request: the monitor gives up on it.
    s = connect()
    s.sendall(b"2 ")
    time.sleep(3)
    s.close()
    print("ok")
elif sys.argv[1] == "swap":
    # Hold the monitor in a half-sent request; meanwhile make x/inner, move
    # x away and put a link to a host directory in its place.
    s = connect()
    s.sendall(b"2 ")
    time.sleep(0.3)
    os.mkdir("x/inner")
    os.rename("x", "x-moved")
    os.symlink(sys.argv[2], "x")
    s.sendall(b"none\n")
    s.settimeout(5)
    print(len(s.recv(100000)))
"""


def client(dom, *args):
    """Run CLIENT inside the sandbox, in /workspace."""
    b64 = base64.b64encode(CLIENT.encode()).decode()
    return inside(dom, f"echo {b64} | base64 -d > /tmp/fsmon-client.py && python3 /tmp/fsmon-client.py "
                       + " ".join(args))


def worktree(dom):
    [domain] = dom.domain_dirs()
    return os.path.join(domain, "agent-shell")


def test_status_with_the_monitor_is_status_without(fsdom, lz):
    assert same_status(fsdom) == ""
    assert same_status(fsdom) == ""  # now with a token git kept
    assert " M d1/f1" in same_status(fsdom, "echo x >> d1/f1")
    assert "?? new.txt" in same_status(fsdom, "echo n > new.txt")
    assert "?? n1/n2/x" in same_status(fsdom, "mkdir -p n1/n2 && echo x > n1/n2/x")
    assert " D d2/f2" in same_status(fsdom, "rm d2/f2")
    st = same_status(fsdom, "mv d3 d3b")
    assert " D d3/f1" in st and "?? d3b/f1" in st
    same_status(fsdom, "echo y >> d3b/f1")
    # A name git quotes, with a newline in it.
    assert '?? "a\\nb"' in same_status(fsdom, "echo q > $'a\\nb'")
    # Changes made on the host, to the worktree itself, are seen inside.
    wt = worktree(fsdom)
    subprocess.run(["runuser", "-u", lz.user.pw_name, "--", "sh", "-c",
                    f"echo host >> {wt}/d4/f4 && echo h > {wt}/d5/host-new && rm {wt}/d1/f3"], check=True)
    st = same_status(fsdom)
    assert " M d4/f4" in st and "?? d5/host-new" in st and " D d1/f3" in st, st
    # Committing and staging through the monitor, too.
    inside(fsdom, "git add -A && GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a "
                  "GIT_COMMITTER_EMAIL=a@a git commit -qm step")
    assert same_status(fsdom) == ""
    assert " M d5/f5" in same_status(fsdom, "echo z >> d5/f5")
    s = fsdom.status()["git_fsmonitor"]
    assert s["on"] and s["queries"] > s["trivial_answers"] > 0, s


def test_the_hook_names_what_changed_and_only_that(fsdom):
    token, paths = answer(inside(fsdom, f"{HOOK} none"))
    assert paths == ["/"]  # a token it never gave: everything
    token2, paths = answer(inside(fsdom, f"{HOOK} {token}"))
    assert paths == [] and token2 >= token
    token3, paths = answer(inside(fsdom, f"echo a >> d2/f3 && mkdir -p nd && touch nd/x && {HOOK} {token2}"))
    assert "d2/f3" in paths and "nd/" in paths and "nd/x" in paths, paths
    assert all(not p.startswith("d1") for p in paths), paths
    # The top's .git (a file in a worktree) is not watched or named.
    _, paths = answer(inside(fsdom, f"touch .git; {HOOK} {token3}"))
    assert ".git" not in paths, paths


def test_the_sandbox_can_only_ask(fsdom, lz):
    """From inside: garbage, an endless request, a huge token, symbolic links
    to the host's directories; the monitor answers the next question right,
    follows no link, and the host is unchanged."""
    wt = worktree(fsdom)
    before = sorted(os.listdir("/etc"))
    token, _ = answer(inside(fsdom, f"{HOOK} none"))
    assert client(fsdom, "attack").strip() == "ok"
    inside(fsdom, "ln -s /etc etclink && ln -s / rootlink && mkdir real && touch real/x")
    _, paths = answer(inside(fsdom, f"{HOOK} {token}"))
    assert "real/" in paths and "etclink" in paths and "rootlink" in paths, paths
    s = fsdom.status()["git_fsmonitor"]
    # The tree's own directories (the top, five, real/ and the .. of none):
    # a followed link would have added thousands.
    assert s["directories"] < 20, s
    assert sorted(os.listdir("/etc")) == before
    assert os.path.islink(os.path.join(wt, "etclink"))
    assert same_status(fsdom) == same_status(fsdom)


def test_a_directory_swapped_for_a_link_is_not_followed(fsdom):
    """The race an agent can win on purpose: it holds the monitor in a
    half-sent request, meanwhile makes x/inner, renames x away and puts a
    link to a host directory at x, then finishes the request. The monitor
    then reads "x/inner was made" while x leads out of the worktree: it must
    not watch (and name the changes of) the host's directory behind it."""
    # A directory of the host the test user may read (the monitor runs as
    # that user): /tmp's own, not pytest's private one.
    base = tempfile.mkdtemp(prefix="lazaret-fsmon-host-", dir="/tmp")
    host = pathlib.Path(base) / "host-dir"
    (host / "inner").mkdir(parents=True)
    for d in (base, host, host / "inner"):
        os.chmod(d, 0o755)
    try:
        _swap_and_check(fsdom, host)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _swap_and_check(fsdom, host):
    token, _ = answer(inside(fsdom, f"mkdir x && {HOOK} none"))
    dirs = fsdom.status()["git_fsmonitor"]["directories"]
    client(fsdom, "swap", str(host))
    # A change in the host's directory, behind the link.
    (host / "inner" / "host-secret").write_text("x")
    _, paths = answer(inside(fsdom, f"{HOOK} {token}"))
    assert not any("host-secret" in p for p in paths), paths
    assert "x" in paths and "x-moved/" in paths, paths
    # x-moved and x-moved/inner at most: nothing of the host's.
    assert fsdom.status()["git_fsmonitor"]["directories"] <= dirs + 2


FLOOD = r"""
import os, socket, sys, time
sock, staging, target, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# Made beforehand, outside the worktree (a new inode costs more on these
# hosts than the 2 s a request may take allows); moved in while held.
if not os.path.isdir(staging):
    os.mkdir(staging)
    for i in range(n):
        os.mkdir(f"{staging}/d{i}")
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
s.sendall(b"2 ")
time.sleep(0.2)
t = time.monotonic()
for i in range(n):
    os.rename(f"{staging}/d{i}", f"{target}/d{i}")
took = time.monotonic() - t
os.rmdir(staging)
try:
    s.sendall(b"none\n")
    s.settimeout(10)
    print(len(s.recv(100000)), took)
except OSError as e:
    print(0, took, e)
"""


def test_an_overflowed_queue_loses_no_directory(fsdom, lz):
    """More directories made at once than the kernel queues events for
    (fs.inotify.max_queued_events): the events past the limit are lost, and
    with them the news of directories to watch. The monitor must then watch
    the whole tree again, or a file made later in one of those directories
    is never named and git, trusting its untracked cache, does not see it."""
    inside(fsdom, "mkdir many")
    token, _ = answer(inside(fsdom, f"{HOOK} none"))  # many/ is watched now
    with open("/proc/sys/fs/inotify/max_queued_events") as f:
        n = int(f.read()) + 1000
    # On the host as the user (making them inside takes longer than the 2 s
    # a request may take): hold the monitor in a half-sent request while
    # the directories are moved in.
    wt = worktree(fsdom)
    r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--", "/usr/bin/python3", "-c", FLOOD,
                        fsdom.socket_path() + ".fsmon", wt + "-staging", os.path.join(wt, "many"), str(n)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    answered, took = r.stdout.split()[:2]
    assert int(answered) > 0 and float(took) < 1.8, f"{n} directories moved in {took} s: not held all along: {r.stdout}"
    s = fsdom.status()["git_fsmonitor"]
    assert s["queue_overflows"] >= 1, s
    # The first question after the overflow: everything. Then files in the
    # first and the last of the directories, committed, and changed: git
    # looks at a tracked file only when the monitor names it.
    assert same_status(fsdom) == ""
    inside(fsdom, f"echo a > many/d0/a && echo b > many/d{n - 1}/b && git add -A && GIT_AUTHOR_NAME=a "
                  "GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a git commit -qm many")
    assert same_status(fsdom) == ""
    assert f" M many/d{n - 1}/b" in same_status(fsdom, f"echo x >> many/d{n - 1}/b")
    assert " M many/d0/a" in same_status(fsdom, "echo x >> many/d0/a")
    # The hook itself names a change in a directory whose event was lost
    # (the last moved in); before the rewalk it named nothing.
    token, _ = answer(inside(fsdom, f"{HOOK} none"))
    _, paths = answer(inside(fsdom, f"echo y >> many/d{n - 1}/b && {HOOK} {token}"))
    assert paths == [f"many/d{n - 1}/b"], paths
    assert fsdom.status()["git_fsmonitor"]["directories"] >= n


def test_overflows_over_and_over_stop_the_monitor(fsdom, lz):
    """The sandbox makes the events: overflowing the queue again within
    10 s of the last walk does not make the coordinator walk the tree again
    (it could keep it walking); the monitor gives up, every answer is
    "everything", and git status is still right."""
    inside(fsdom, "mkdir many1 many2")
    token, _ = answer(inside(fsdom, f"{HOOK} none"))
    with open("/proc/sys/fs/inotify/max_queued_events") as f:
        n = int(f.read()) + 1000
    wt = worktree(fsdom)
    stagings = [f"{wt}-staging{k}" for k in (1, 2)]
    subprocess.run(["runuser", "-u", lz.user.pw_name, "--", "/usr/bin/python3", "-c",
                    f"import os\nfor s in {stagings!r}:\n  os.mkdir(s)\n  [os.mkdir(f'{{s}}/d{{i}}') for i in range({n})]"],
                   check=True, timeout=120)
    start = time.monotonic()
    for k, staging in ((1, stagings[0]), (2, stagings[1])):
        r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--", "/usr/bin/python3", "-c", FLOOD,
                            fsdom.socket_path() + ".fsmon", staging, os.path.join(wt, f"many{k}"), str(n)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    assert time.monotonic() - start < 9, "the two overflows were not within 10 s"
    s = fsdom.status()["git_fsmonitor"]
    assert s["queue_overflows"] >= 2 and s["why_trivial"] == "the kernel's event queue overflowed twice within 10 s", s
    _, paths = answer(inside(fsdom, f"{HOOK} {token}"))
    assert paths == ["/"], paths[:5]
    assert " M d1/f1" in same_status(fsdom, "echo x >> d1/f1")


def test_a_tree_too_deep_or_too_big_is_answered_everything(fsdom, lz):
    """The fallback (issue 44): a working tree more than 256 directories
    deep, or with more directories than the monitor watches (65,536, or a
    quarter of the user's inotify watches), is not watched: every answer is
    "everything" (git looks at every file, as with no monitor), status says
    why, and git status is still right."""
    token, _ = answer(inside(fsdom, f"{HOOK} none"))
    inside(fsdom, "mkdir -p deep/$(printf 'd/%.0s' $(seq 1 260))")
    _, paths = answer(inside(fsdom, f"{HOOK} {token}"))
    assert paths == ["/"], paths
    s = fsdom.status()["git_fsmonitor"]
    assert s["why_trivial"] == "the working tree is more than 256 directories deep", s
    assert "?? deep/" + "d/" * 260 + "x" in same_status(fsdom, "touch deep/" + "d/" * 260 + "x")
    assert " M d1/f1" in same_status(fsdom, "echo x >> d1/f1")


def test_too_many_directories_are_answered_everything(fsdom, lz):
    with open("/proc/sys/fs/inotify/max_user_watches") as f:
        limit = min(65536, int(f.read()) // 4)
    token, _ = answer(inside(fsdom, f"{HOOK} none"))
    # Made on the host as the user (faster than inside), in the worktree.
    many = os.path.join(worktree(fsdom), "many")
    subprocess.run(["runuser", "-u", lz.user.pw_name, "--", "/usr/bin/python3", "-c",
                    f"import os\nos.mkdir({many!r})\nfor i in range({limit + 1}): os.mkdir({many!r} + '/d%d' % i)"],
                   check=True)
    _, paths = answer(inside(fsdom, f"{HOOK} {token}"))
    assert paths == ["/"], paths[:5]
    s = fsdom.status()["git_fsmonitor"]
    assert s["why_trivial"] == f"the working tree has more than {limit} directories", s
    assert f"?? many/d{limit}/x" in same_status(fsdom, f"touch many/d{limit}/x")
    assert " M d1/f1" in same_status(fsdom, "echo x >> d1/f1")


def test_a_killed_coordinator_leaves_no_monitor_socket(fsdom):
    """kill -9 of the coordinator: its watchdog's recovery removes the
    monitor's socket with the control socket (assert_clean looks for it)."""
    path = fsdom.socket_path() + ".fsmon"
    assert os.path.exists(path)
    [pid] = fsdom.coordinator_pids()
    os.kill(pid, signal.SIGKILL)
    fsdom.keep.communicate(timeout=30)
    fsdom.assert_clean(timeout=15)
    assert not os.path.exists(path)


def test_direct_mode_has_no_monitor(lz, debian_image):  # noqa: F811
    git_as(lz, "init", "-q", "-b", "main")
    lz.write("work/a", "a\n")
    git_as(lz, "add", "-A")
    git_as(lz, "commit", "-q", "-m", "base")
    dom = Domain(lz, debian_image, extra='workspace_mode = "direct"\n')
    r = dom.run("run", "--", "/bin/sh", "-c", "echo ${GIT_CONFIG_COUNT:-none}; git -C /workspace status --porcelain")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "none", r.stdout
