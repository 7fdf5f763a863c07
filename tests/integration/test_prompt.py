# SPDX-License-Identifier: MIT
"""The escalation prompt, on real terminals: each lazaret CLI runs in a tmux
pane (a real PTY; tmux renders the screen, so what the person would see is
what the test reads), a shell inside the sandbox asks with lazaret-escalate,
and the test answers with keys: approve, deny, edit, abort, cancel. The
prompt shows only on the terminal whose session signed the request."""
import json
import os
import re
import shlex
import subprocess
import time

import pytest

from test_escalation import esc_domain
from test_run import wait_sessions
from test_run import busybox_image  # noqa: F401  (fixture)


class Pane:
    """One tmux server with one pane running cmd (as the test user)."""

    def __init__(self, base, name, cmd, cwd, width=110, height=32):
        self.sock = os.path.join(base, f"tmux-{name}")
        # The CLI's exit status is printed in the pane once it ends.
        inner = shlex.join(cmd) + '; echo "LZEXIT=$?"; sleep 3600'
        subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null", "new-session", "-d", "-x", str(width),
                        "-y", str(height), "-c", cwd, "sh", "-c", inner], check=True)

    def keys(self, *keys, literal=False):
        subprocess.run(["tmux", "-S", self.sock, "send-keys", "-t", "0"] + (["-l"] if literal else []) + list(keys),
                       check=True)

    def type(self, text):
        self.keys(text, literal=True)

    def screen(self):
        return subprocess.run(["tmux", "-S", self.sock, "capture-pane", "-p", "-t", "0"], capture_output=True,
                              text=True, check=True).stdout

    def wait(self, *texts, timeout=30, dom=None, without=None):
        """The screen once it shows every one of texts (and, given without,
        no longer shows that): a prompt is painted in more than one write,
        so a screen taken as its first line appears may still be the last
        one's below it."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.screen()
            if all(t in s for t in texts) and (without is None or without not in s):
                return s
            time.sleep(0.1)
        raise AssertionError(f"did not see {texts!r}{f' without {without!r}' if without else ''} on the screen:\n"
                             f"{self.screen()}\n{dom.log() if dom else ''}")

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


@pytest.fixture
def panes(lz):
    made = []

    def make(dom, name):
        env = {**lz.env, **dom.env, "TERM": "screen"}
        p = Pane(lz.base, name, lz.cmdline(["--config", dom.cfg, "run", "--", "/bin/sh"], env), lz.work)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


@pytest.fixture
def pdom(lz, busybox_image):
    d = esc_domain(lz, busybox_image)
    yield d
    # Every pane is gone by now: the sandbox stops, nothing is left.
    deadline = time.time() + 30
    while time.time() < deadline and d.container_names():
        time.sleep(0.2)
    d.assert_clean()
    assert os.listdir(d.sock) == []


def open_shell(panes, dom, name):
    """A pane running lazaret run -- /bin/sh, once its shell answers."""
    p = panes(dom, name)
    p.type("echo UP$((1+1))\n")
    p.wait("UP2", dom=dom)
    return p


def leave(p, dom):
    """exit the shell: lazaret run ends with status 0."""
    p.type("exit\n")
    p.wait("LZEXIT=0", dom=dom)


def ask(pane, command, why="a test asks", marker="RC"):
    """From the sandbox's shell: lazaret-escalate, then its status."""
    pane.type(f"/run/lazaret/escalate --why {shlex.quote(why)} -- {shlex.quote(command)}; "
              f"echo {marker}=$?\n")


def audit(dom):
    r = dom.run("audit", "shell", "--json", "--verify")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verified"] == {"intact": True}
    return doc["records"]


def test_approve_on_the_requesting_terminal_only(pdom, panes, lz):
    a = panes(pdom, "a")
    a.type("echo READY-A$((1+1))\n")
    a.wait("READY-A2", dom=pdom)
    b = panes(pdom, "b")
    b.type("echo BEFORE-B$((1+1))\n")
    b.wait("BEFORE-B2", dom=pdom)
    wait_sessions(pdom, 2)

    # The request hides an escape sequence that would clear the screen and
    # a right-to-left override; the prompt shows both, and the metacharacters.
    # (printf makes them inside: typed, the shell's line editor would eat them.)
    cmd = "echo ran-on-host > approved.txt; : \x1b[2Jhidden \u202eevil"
    b.type("/run/lazaret/escalate --why \"$(printf 'write \\033[31mred\\033[0m note')\" -- "
           "\"$(printf 'echo ran-on-host > approved.txt; : \\033[2Jhidden \\342\\200\\256evil')\"; echo RC=$?\n")
    s = b.wait("[A] Approve", dom=pdom)
    assert "the sandbox asks to run a command on this computer" in s
    assert "write \\x1b[31mred\\x1b[0m note" in s, s
    assert "echo ran-on-host > approved.txt; : \\x1b[2Jhidden <U+202E>evil" in s
    assert "! Shell metacharacters (highlighted): if approved, /bin/sh -c runs this." in s
    assert "(this terminal)" in s
    # The other terminal shows nothing of it, and still works.
    time.sleep(0.5)
    assert "Approve" not in a.screen()
    a.type("echo STILL-A$((1+1))\n")
    a.wait("STILL-A2", dom=pdom)
    assert not os.path.exists(os.path.join(lz.work, "approved.txt"))

    b.keys("a")
    s = b.wait("RC=0", dom=pdom)
    # The screen is as it was before the prompt, and the shell goes on.
    assert "BEFORE-B2" in s and "Approve" not in s
    assert open(os.path.join(lz.work, "approved.txt")).read() == "ran-on-host\n"
    b.type("echo AFTER-B$((1+1))\n")
    b.wait("AFTER-B2", dom=pdom)

    rec = audit(pdom)[-1]
    assert rec["decision"] == "user" and rec["decided_by"] == "user"
    assert rec["command"] == cmd and rec["exit_code"] == 0
    assert rec["final_command"] == "/bin/sh -c " + cmd
    sessions = {s["session_id"] for s in pdom.status()["sessions"]}
    assert rec["session_id"] in sessions

    a.type("exit\n")
    a.wait("LZEXIT=0", dom=pdom)
    b.type("exit\n")
    b.wait("LZEXIT=0", dom=pdom)


def test_deny(pdom, panes, lz):
    """While the prompt is up, TTY forwarding is suspended both ways: the
    session's output waits (it cannot paint over the prompt) and keys go to
    the prompt, not to the sandbox."""
    p = open_shell(panes, pdom, "p")
    p.type("(sleep 2; echo DURING$((1+1))) & ")
    ask(p, "touch denied.txt")
    s = p.wait("[A] Approve", dom=pdom)
    # No metacharacters: it would run as words, without a shell.
    assert "Runs as a program with these words, without a shell" in s
    time.sleep(3)
    s = p.screen()
    assert "DURING2" not in s and "[A] Approve" in s
    p.type("xyz")
    p.wait("Press A, D, E or Q.", dom=pdom)
    p.keys("d")
    s = p.wait("RC=126", dom=pdom)
    assert "lazaret-escalate: denied by the user" in s
    # What was said meanwhile comes after; the keys never reached the shell.
    p.wait("DURING2", dom=pdom)
    p.type("echo TYPED$((1+1))\n")
    s = p.wait("TYPED2", dom=pdom)
    assert "xyz" not in s
    assert not os.path.exists(os.path.join(lz.work, "denied.txt"))
    rec = audit(pdom)[-1]
    assert (rec["decision"], rec["decided_by"], rec["exit_code"]) == ("denied", "user", None)
    leave(p, pdom)


def test_edit_then_approve(pdom, panes, lz):
    p = open_shell(panes, pdom, "p")
    ask(p, "echo one > asked.txt")
    p.wait("[E] Edit", dom=pdom)
    p.keys("e")
    p.wait("Command (editing)", dom=pdom)
    # Clear the line (^U) and type another command; an unclosed quote is
    # refused at Enter, then fixed.
    p.keys("C-u")
    p.type("touch 'edited.txt")
    p.keys("Enter")
    p.wait("A quotation is not closed.", dom=pdom)
    p.type("'")
    p.keys("Enter")
    s = p.wait("Command (edited by you)", dom=pdom)
    # Decided again: no metacharacters now, so no shell.
    assert "touch 'edited.txt'" in s
    assert "Runs as a program with these words, without a shell" in s
    p.keys("a")
    p.wait("RC=0", dom=pdom)
    assert os.path.exists(os.path.join(lz.work, "edited.txt"))
    assert not os.path.exists(os.path.join(lz.work, "asked.txt"))
    rec = audit(pdom)[-1]
    assert (rec["decision"], rec["decided_by"]) == ("edited", "edited")
    assert rec["command"] == "echo one > asked.txt"
    assert rec["edited_command"] == "touch 'edited.txt'"
    assert rec["final_command"] == "/usr/bin/touch edited.txt"
    leave(p, pdom)


def test_cancel_a_running_command(pdom, panes, lz):
    p = open_shell(panes, pdom, "p")
    ask(p, "sleep 60; touch late.txt")
    p.wait("[A] Approve", dom=pdom)
    p.keys("a")
    p.wait("[C] Cancel it", dom=pdom)
    t0 = time.time()
    p.keys("c")
    # sh -c got SIGTERM: 128 + 15.
    p.wait("RC=143", timeout=15, dom=pdom)
    assert time.time() - t0 < 10
    time.sleep(0.5)
    assert not os.path.exists(os.path.join(lz.work, "late.txt"))
    rec = audit(pdom)[-1]
    assert rec["cancelled"] is True and rec["exit_code"] == 143
    leave(p, pdom)


def test_abort_ends_the_session_and_the_sandbox(pdom, panes, lz):
    p = open_shell(panes, pdom, "p")
    ask(p, "touch aborted.txt")
    p.wait("[Q] Abort", dom=pdom)
    p.keys("q")
    s = p.wait("LZEXIT=130", dom=pdom)
    assert "lazaret: session ended at the escalation prompt" in s
    assert not os.path.exists(os.path.join(lz.work, "aborted.txt"))
    rec = audit(pdom)[-1]
    assert rec["decision"] == "denied" and "ended the session" in rec["reason"]
    # It was the last session: the sandbox stops (pdom checks it is gone).


def test_queue_and_a_session_that_goes(pdom, panes, lz):
    """Requests of one session wait their turn at its terminal; the
    requests of a session whose terminal goes away are refused."""
    p = open_shell(panes, pdom, "p")
    before = pdom.log().count("waits its turn at session")
    p.type("for f in q1 q2 q3; do /run/lazaret/escalate -- \"touch $f.txt\" & sleep 1; done; wait; "
           "echo QDONE$((1+1))\n")
    p.wait("touch q1.txt", dom=pdom)
    # q2 and q3 wait behind it: the coordinator says so as each comes.
    deadline = time.time() + 20
    while time.time() < deadline and pdom.log().count("waits its turn at session") < before + 2:
        time.sleep(0.1)
    assert pdom.log().count("waits its turn at session") == before + 2, pdom.log()
    p.keys("d")
    p.wait("touch q2.txt", "1 more request of this session is waiting.", dom=pdom)
    p.keys("a")
    # The last in the queue says no more is waiting.
    s = p.wait("touch q3.txt", without="waiting", dom=pdom)
    p.keys("d")
    p.wait("QDONE2", dom=pdom)
    assert [os.path.exists(os.path.join(lz.work, f"q{i}.txt")) for i in (1, 2, 3)] == [False, True, False]
    recs = audit(pdom)[-3:]
    assert [(r["command"], r["decision"]) for r in recs] == [
        ("touch q1.txt", "denied"), ("touch q2.txt", "user"), ("touch q3.txt", "denied")]

    # A requester that gives up takes its prompt down.
    p.type("/run/lazaret/escalate -- 'touch withdrawn.txt' & sleep 3; kill $!; wait; echo KILLED$((1+1))\n")
    p.wait("[A] Approve", dom=pdom)
    s = p.wait("KILLED2", dom=pdom)
    assert "[A] Approve" not in s
    rec = audit(pdom)[-1]
    assert (rec["command"], rec["decision"], rec["reason"]) == (
        "touch withdrawn.txt", "refused", "withdrawn: the requester hung up before the person answered")

    # Another terminal asks, then goes away before anyone answers.
    g = panes(pdom, "g")
    g.type("echo UP$((1+3))\n")
    g.wait("UP4", dom=pdom)
    # setsid: the requester outlives its session's hang-up, so what refuses
    # it is the session's end, not the requester giving up.
    g.type("setsid /run/lazaret/escalate -- 'touch gone.txt' &\n")
    g.wait("[A] Approve", dom=pdom)
    g.close()
    deadline = time.time() + 20
    while time.time() < deadline and audit(pdom)[-1]["command"] != "touch gone.txt":
        time.sleep(0.2)
    rec = audit(pdom)[-1]
    assert rec["command"] == "touch gone.txt" and rec["decision"] == "refused", rec
    assert rec["reason"] == "the session that asked has ended", rec
    assert not os.path.exists(os.path.join(lz.work, "gone.txt"))
    # The first terminal never saw it, and goes on.
    assert "gone.txt" not in p.screen()
    leave(p, pdom)


def test_a_flood_of_requests_waits_in_a_bounded_queue(pdom, panes, lz):
    """Eight requests of a session may wait for its terminal; more are
    refused at once, and the terminal stays usable."""
    p = open_shell(panes, pdom, "p")
    p.type("for i in 1 2 3 4 5 6 7 8 9 10; do /run/lazaret/escalate -- \"touch f$i.txt\" 2>/dev/null & done; "
           "wait; echo FLOOD$((1+1))\n")
    p.wait("[A] Approve", dom=pdom)
    # Two are refused without a prompt.
    deadline = time.time() + 20
    while time.time() < deadline:
        refused = [r for r in audit(pdom) if r["decision"] == "refused"]
        if len(refused) == 2:
            break
        time.sleep(0.2)
    assert [r["reason"] for r in refused] == [
        "too many requests of this session are waiting for the person at its terminal"] * 2
    seen = set()
    for _ in range(8):
        # The next prompt: another request id than those answered.
        deadline = time.time() + 20
        while time.time() < deadline:
            s = p.screen()
            ids = re.findall(r"Request   ([0-9a-f-]{36})", s)
            if "[D] Deny" in s and ids and ids[0] not in seen:
                break
            time.sleep(0.1)
        seen.add(ids[0])
        p.keys("d")
    p.wait("FLOOD2", dom=pdom)
    assert len([r for r in audit(pdom) if r["decision"] == "denied"]) == 8
    assert not any(f.startswith("f") for f in os.listdir(lz.work))
    leave(p, pdom)


def test_a_command_longer_than_the_screen_cannot_be_approved(pdom, panes, lz):
    """What the person cannot see, they cannot approve."""
    p = open_shell(panes, pdom, "p")
    p.type("/run/lazaret/escalate -- \"touch long-$(printf '%04000d' 0)\"; echo RC=$?\n")
    p.wait("[... more: the terminal is too small to show the whole command]", dom=pdom)
    p.keys("a")
    p.wait("Make the terminal larger to see the whole command first.", dom=pdom)
    p.keys("d")
    p.wait("RC=126", dom=pdom)
    assert not any(f.startswith("long-") for f in os.listdir(lz.work))
    assert audit(pdom)[-1]["decision"] == "denied"
    leave(p, pdom)
