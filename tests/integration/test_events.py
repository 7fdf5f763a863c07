# SPDX-License-Identifier: MIT
"""The Domain's event record (issue 19) and `lazaret events`: sessions,
escalations and the sandbox's start and stop on record, as the test user,
on the real stack; strings the agent chose shown inert; the record's
directory never followed through a symlink. The broker's decisions are
checked in test_egress.py."""
import json
import os
import select
import subprocess
import time

from test_egress import HOST4, RULES, names  # noqa: F401  (fixture)
from test_escalation import esc_domain, escalate
from test_run import Domain, busybox_image, debian_image, kill_cli, make_repo  # noqa: F401  (fixture)


def events(d, *args, want=lambda evs: True, timeout=10):
    """lazaret events --json, once want(records) holds or the time is up
    (the record is written by a thread of the coordinator's own)."""
    deadline = time.time() + timeout
    while True:
        r = d.run("events", "--json", *args)
        assert r.returncode == 0, r.stderr
        assert r.stdout.isascii(), r.stdout
        evs = [json.loads(x) for x in r.stdout.splitlines()]
        if want(evs) or time.time() > deadline:
            return evs
        time.sleep(0.2)


def kinds(evs):
    return [(e["source"], e["kind"]) for e in evs]


def test_sessions_and_escalations_on_record(lz, busybox_image):
    d = esc_domain(lz, busybox_image)
    r = d.run("events")
    assert r.returncode == 0 and r.stdout == "", r.stdout
    assert "no events on record" in r.stderr, r.stderr

    assert d.run("run", "--", "/bin/sh", "-c", "exit 3").returncode == 3
    r = escalate(d, "uname", "-a")
    assert r.returncode == 0, r.stderr
    r = escalate(d, "id")  # needs a person; this session has no terminal
    assert r.returncode != 0
    d.assert_clean()

    evs = events(d)
    k = kinds(evs)
    # Three runs, each its own generation: started, sessions, stopped.
    assert k.count(("sandbox", "started")) == 3 and k.count(("sandbox", "stopped")) == 3, k
    assert k.count(("session", "started")) == 3 and k.count(("session", "ended")) == 3, k
    assert [e["seq"] for e in evs if e["generation"] == evs[0]["generation"]][:2] == [1, 2], evs
    first = [e for e in evs if e["source"] == "session" and e["kind"] == "started"][0]
    assert first["data"]["argv"] == ["/bin/sh", "-c", "exit 3"], first
    assert first["data"]["cwd"] == "/workspace" and first["data"]["terminal"] is False, first
    ended = [e for e in evs if e["source"] == "session" and e["kind"] == "ended"][0]
    assert ended["session"] == first["session"], (first, ended)
    assert (ended["data"]["outcome"], ended["data"]["exit_code"]) == ("Exited", 3), ended
    stopped = [e for e in evs if e["kind"] == "stopped"][0]
    assert stopped["data"]["reason"] == "no session is left", stopped

    # Each escalation: requested, then decided, linked to its audit record
    # by the request id, on the session that signed it.
    esc = [e for e in evs if e["source"] == "escalation"]
    assert [e["kind"] for e in esc] == ["requested", "decided", "requested", "decided"], esc
    audit = json.loads(d.run("audit", "--json").stdout)["records"]
    assert [a["request_id"] for a in audit] == [esc[1]["data"]["request_id"], esc[3]["data"]["request_id"]]
    assert esc[0]["data"]["request_id"] == esc[1]["data"]["request_id"]
    assert esc[1]["data"]["command"] == "uname -a"
    assert (esc[1]["data"]["decision"], esc[1]["data"]["exit_code"]) == ("auto", 0), esc[1]
    assert esc[3]["data"]["decision"] == "refused" and "terminal" in esc[3]["data"]["reason"], esc[3]
    sessions = [e["session"] for e in evs if e["source"] == "session" and e["kind"] == "started"]
    assert esc[0]["session"] == sessions[1] and esc[2]["session"] == sessions[2], (esc, sessions)

    # Filters: one session (by the first characters of its id, as the text
    # form shows them), one source, a time.
    one = events(d, "--session", first["session"][:8])
    assert {e["session"] for e in one} == {first["session"]} and len(one) == 2, one
    assert {e["source"] for e in events(d, "--source", "escalation")} == {"escalation"}
    assert events(d, "--since", "2h") == evs
    assert events(d, "--since", "2999-01-01") == []
    r = d.run("events", "--since", "yesterday")
    assert r.returncode == 64 and "--since yesterday: not a time" in r.stderr, r.stderr
    r = d.run("events", "--source", "netwrok")
    assert r.returncode == 64 and "--source netwrok: no such source" in r.stderr, r.stderr

    # The text form: one line per record, the session's first characters.
    r = d.run("events")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(evs)
    assert any(f"  {first['session'][:8]}  session    ended" in x and "exit_code=3" in x for x in lines), lines


def test_agent_strings_are_inert(lz, busybox_image):
    """What the agent chose (here a command line) may hold escapes, bidi
    marks, markup and bytes that are not UTF-8: the record and both forms
    of lazaret events show them, never act on them."""
    d = Domain(lz, busybox_image)
    evil = "\x1b]0;owned\x07\x1b[2J\u202egnp.exe</script>[x](http://e/)|a|b|"
    r = d.run("run", "--", "/bin/echo", evil)
    assert r.returncode == 0, r.stderr
    d.assert_clean()
    [dom] = d.domain_dirs()
    raw = b"".join(open(os.path.join(dom, "events", n), "rb").read()
                   for n in os.listdir(os.path.join(dom, "events")))
    assert all(b == 0x0A or 0x20 <= b < 0x7F for b in raw), raw
    started = [e for e in events(d) if e["kind"] == "started" and e["source"] == "session"][0]
    assert started["data"]["argv"][1] == evil

    r = d.run("events", "--source", "session")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout and "\x07" not in r.stdout, repr(r.stdout)
    assert "\\x1b]0;owned\\x07\\x1b[2J<U+202E>gnp.exe</script>" in r.stdout, r.stdout

    # Bytes that are not UTF-8 cannot cross the control protocol: one line
    # naming the argument, before anything starts.
    p = subprocess.run(d.lz.cmdline(["--config", d.cfg, "run", "--", "/bin/echo"], {**lz.env, **d.env})
                       + [b"caf\xe9\xff".decode("utf-8", "surrogateescape")],
                       capture_output=True, cwd=lz.work, timeout=120)
    assert p.returncode == 64, p.stderr
    assert p.stderr.decode().count("\n") == 1 and "argument 2 of the command is not UTF-8" in p.stderr.decode()
    d.assert_clean()


def test_follow_prints_records_as_they_come(lz, busybox_image):
    d = Domain(lz, busybox_image)
    # Started before the Domain ever ran: it waits for the record.
    f = d.popen("events", "--follow", "--source", "session")
    try:
        time.sleep(0.5)
        assert f.poll() is None
        assert d.run("run", "--", "/bin/true").returncode == 0
        got = b""
        deadline = time.time() + 15
        while got.count(b"\n") < 2 and time.time() < deadline:
            ready, _, _ = select.select([f.stdout], [], [], 0.5)
            if ready:
                got += os.read(f.stdout.fileno(), 4096)
        lines = got.decode().splitlines()
        assert len(lines) == 2 and " session    started " in lines[0] and " session    ended " in lines[1], lines
        assert f.poll() is None  # still following
    finally:
        kill_cli(f)  # the lazaret CLI itself, not runuser
        f.wait()
    d.assert_clean()


def test_record_directory_is_never_followed(lz, busybox_image, tmp_path):
    """events/ replaced by a symlink (someone with the user's files): the
    sandbox still starts (losing the record weakens nothing), the leader
    and status say it is not recorded, and nothing is written through the
    link."""
    d = Domain(lz, busybox_image)
    assert d.run("run", "--", "/bin/true").returncode == 0
    d.assert_clean()
    [dom] = d.domain_dirs()
    ev = os.path.join(dom, "events")
    subprocess.run(["rm", "-rf", ev], check=True)
    target = os.path.join(lz.base, "elsewhere")
    os.makedirs(target)
    os.chown(target, lz.user.pw_uid, lz.user.pw_gid)
    os.symlink(target, ev)
    holder = d.popen("run", "--", "/bin/sh", "-c", "sleep 30")
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            r = d.run("status", "--json")
            if r.returncode == 0 and json.loads(r.stdout).get("sessions"):
                break
            time.sleep(0.3)
        st = json.loads(r.stdout)
        assert st["events"]["recorded"] is False, st["events"]
        assert "events" in st["events"]["why"], st["events"]
        text = d.run("status").stdout
        assert "events      NOT RECORDED: " in text, text
    finally:
        kill_cli(holder)
        out, err = holder.communicate()
    assert b"no event record" in err, err
    assert os.listdir(target) == []
    r = d.run("events")
    assert r.returncode == 125 and "cannot read the event record" in r.stderr, r.stderr
    d.assert_clean()


def test_git_refusals_on_record(lz, busybox_image):
    """Branch mode: what the git router refuses in the repository's .git
    (its config, a hook's removal) is on the record with the path as the
    agent named it, the operation and the errno; the host's files are
    unchanged."""
    make_repo(lz)
    d = Domain(lz, busybox_image)
    git = os.path.join(lz.work, ".git")
    before = open(os.path.join(git, "config"), "rb").read()
    script = (f'echo "[core] fsmonitor = evil" >> {git}/config; echo rc=$?; '
              f'rm {git}/HEAD; echo rc=$?; cat /workspace/tracked.txt')
    r = d.run("run", "--", "/bin/sh", "-c", script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("rc=1") == 2 and "committed" in r.stdout, r.stdout
    d.assert_clean()
    assert open(os.path.join(git, "config"), "rb").read() == before
    evs = events(d, "--source", "git")
    got = {(e["data"]["path"], e["data"]["op"], e["data"]["errno"]) for e in evs}
    assert (".git/config", "write", "EROFS") in got, got
    assert any(p == ".git/HEAD" and op == "unlink" for p, op, _ in got), got
    assert all(e["kind"] == "refused" and e["data"]["rule"] == "git" for e in evs), evs
    st = d.run("events", "--source", "git")
    assert ".git/config" in st.stdout and "errno=EROFS" in st.stdout, st.stdout


def test_an_ordinary_commit_is_no_refusal(lz, debian_image):
    """Issue 42: git stores each object by link(2) first and falls back to
    rename(2); the router's refusal of the link was recorded, so one
    `git add -A && git commit` showed as refusals (six, in red) and as SARIF
    errors. Now the commit leaves no refusal, and a real one still does."""
    make_repo(lz)
    d = Domain(lz, debian_image)
    script = ("cd /workspace && export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a "
              "GIT_COMMITTER_EMAIL=a@a && for i in 1 2 3; do echo $i > f$i; done && git add -A && "
              "git commit -qm work && echo COMMITTED")
    r = d.run("run", "--", "/bin/bash", "-c", script)
    assert r.returncode == 0 and "COMMITTED" in r.stdout, r.stderr + d.log()
    time.sleep(1)
    assert events(d, "--source", "git") == []
    r = d.run("run", "--", "/bin/bash", "-c", f"echo x >> {lz.work}/.git/config; echo rc=$?")
    assert "rc=1" in r.stdout, r.stdout
    evs = events(d, "--source", "git", want=lambda evs: len(evs) >= 1)
    assert [(e["data"]["path"], e["data"]["op"]) for e in evs] == [(".git/config", "write")], evs
    d.assert_clean()


def test_a_flood_of_refusals_is_bounded(lz, busybox_image):
    """The agent refused 20,000 times as fast as it can: every terminal
    still answers, the coordinator's memory stays bounded, and the record
    holds the first few in full with the rest counted."""
    make_repo(lz)
    d = Domain(lz, busybox_image)
    git = os.path.join(lz.work, ".git")
    # A sanitizer build keeps freed memory in quarantine (256 MiB by
    # default), which would count as growth: the coordinator (started by
    # this first CLI, whose environment it keeps) gets a small one.
    env = {}
    if "ASAN_OPTIONS" in os.environ:
        env["ASAN_OPTIONS"] = os.environ["ASAN_OPTIONS"] + ":quarantine_size_mb=8"
    holder = d.popen("run", "--", "/bin/sh", "-c", "sleep 120", env=env)
    try:
        deadline = time.time() + 30
        while not d.run("status", "--json").stdout.count('"session_id"') and time.time() < deadline:
            time.sleep(0.3)
        pid = d.status()["coordinator_pid"]

        def rss():
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        base = rss()
        flood = d.popen("run", "--", "/bin/sh", "-c",
                        f"i=0; while [ $i -lt 20000 ]; do echo 2>/dev/null > {git}/config; i=$((i+1)); done; echo done")
        # A second terminal answers while the flood runs.
        t0 = time.time()
        r = d.run("run", "--", "/bin/echo", "still here", timeout=60)
        assert (r.returncode, r.stdout) == (0, "still here\n"), r.stderr
        assert time.time() - t0 < 20
        out, err = flood.communicate(timeout=600)
        assert flood.returncode == 0 and out == b"done\n", err
        grown = rss() - base
        assert grown < 64 * 1024, f"the coordinator grew by {grown} KiB"
        # The first few in full, the rest counted and put on record as
        # "aggregated" records (at most ten seconds later; issue 41).
        refused = d.status()["events"]["router_refusals"]

        def occurrences(evs):
            return sum(e["data"]["count"] if e["kind"] == "aggregated" else 1 for e in evs)
        evs = events(d, "--source", "git", want=lambda evs: occurrences(evs) >= refused, timeout=30)
        assert occurrences(evs) == refused, (occurrences(evs), refused)
        full = [e for e in evs if e["kind"] == "refused"]
        assert 0 < len(full) <= 5 and any(e["kind"] == "aggregated" for e in evs), kinds(evs)
        st = d.status()["events"]
        assert st["recorded"] is True and st["written"] >= len(evs), st
        assert st["write_errors"] == 0, st
        # Refused ones plus those dropped between the router and the
        # record account for the flood (each ">" is one refused open).
        data_dropped = sum(e["data"].get("dropped", 0) for e in evs)
        assert st["router_refusals"] + data_dropped >= 20000, (st, data_dropped)
        # The report counts the flood in one line and shows what was lost
        # (read between two equal reads of the record: it is settled).
        deadline = time.time() + 20
        while True:
            before = events(d)
            r = d.run("report", "--format", "json")
            assert r.returncode == 0, r.stderr
            after = events(d)
            if len(before) == len(after) or time.time() > deadline:
                break
        rep = json.loads(r.stdout)
        lost = sum(e["data"].get("dropped", 0) for e in after if e["source"] in ("git", "paths", "network")) + \
            sum(e["data"]["count"] for e in after if e["source"] == "record")
        assert rep["record"]["dropped"] == lost, (rep["record"], lost)
        [flood_line] = [x for x in rep["sandboxes"][-1]["refusals"] if x["path"] == ".git/config"]
        assert flood_line["count"] == occurrences([e for e in after if e["source"] == "git" and
                                                   e["data"].get("path") == ".git/config"]), flood_line
        assert rep["record"]["aggregated"] == occurrences(evs) - len(full), rep["record"]
    finally:
        kill_cli(holder)
        holder.wait()
    d.assert_clean()


def test_a_flood_of_refusals_cannot_wipe_the_record(lz, busybox_image):
    """Issue 41: an escalation request, then a flood of refusals (one path
    again and again, and a new path each time) with the record's segments
    made small: the flood is aggregated and held to a rate, the segments
    rotate, yet the escalation, the sessions and the runs' starts and
    stops are still on record, with each run's summary; the report says
    what was aggregated and what was rotated away."""
    make_repo(lz)
    d = esc_domain(lz, busybox_image)
    d.env["LAZARET_TEST_EVENT_SEGMENT_BYTES"] = "4096"
    git = os.path.join(lz.work, ".git")
    r = escalate(d, "uname", "-a")
    assert r.returncode == 0, r.stderr
    flood = (f"i=0; while [ $i -lt 3000 ]; do echo 2>/dev/null > {git}/config; "
             f"echo 2>/dev/null > {git}/f$i; i=$((i+1)); done; echo done")
    r = d.run("run", "--", "/bin/sh", "-c", flood, timeout=300)
    assert (r.returncode, r.stdout) == (0, "done\n"), r.stderr
    d.assert_clean()
    assert "segments are 4096 bytes" in d.log()

    evs = events(d)
    k = kinds(evs)
    assert ("escalation", "requested") in k and ("escalation", "decided") in k, k
    assert k.count(("sandbox", "started")) == 2 and k.count(("sandbox", "stopped")) == 2, k
    assert k.count(("session", "started")) == 2 and k.count(("session", "ended")) == 2, k
    # The segments did rotate: a note says how many records went.
    rotated = [e["data"] for e in evs if k[evs.index(e)] == ("record", "rotated")]
    assert rotated and sum(x["count"] for x in rotated) > 0, rotated
    # The flood's summary: far fewer refusals recorded one by one than
    # refused; the rest counted.
    summary = [e["data"] for e in evs if e["kind"] == "stopped"][-1]["records"]["git"]
    assert summary["recorded"] <= 400 and summary["aggregated"] >= 2000, summary
    assert summary["recorded"] + summary["aggregated"] <= 6000, summary
    assert all(e["seq"] for e in evs)
    # The kept records come first, in the order they were written.
    esc = [e for e in evs if e["source"] == "escalation"]
    assert [e["kind"] for e in esc] == ["requested", "decided"], esc

    r = d.run("report", "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["record"]["aggregated"] > 0 and rep["record"]["rotated"] > 0, rep["record"]
    r = d.run("report", "--format", "md")
    assert r.returncode == 0, r.stderr
    assert "refusals were aggregated" in r.stdout and "rotated away" in r.stdout, r.stdout


def test_a_flood_of_broker_refusals_is_aggregated(lz, busybox_image, names):  # noqa: F811
    """Issue 41: the agent asks the broker for an unlisted name 400 times
    in a few seconds: the first few refusals are on record one by one, the
    rest counted on that destination; the run's totals say so, and the
    report counts every one on the destination."""
    d = Domain(lz, busybox_image,
               network=f'default_allow = []\ndefault_deny = []\nipv6 = "disabled"\nresolvers = ["{HOST4}"]\n'
                       f'probe_domains = ["ok.example.test:8080"]\n',
               extra=f"allow_domains = {json.dumps(RULES)}\n")
    flood = ("i=0; while [ $i -lt 400 ]; do /run/lazaret/relay --probe unlisted.example.test 8080 >/dev/null 2>&1; "
             "i=$((i+1)); done; echo done")
    r = d.run("run", "--", "/bin/sh", "-c", flood, timeout=300)
    assert (r.returncode, r.stdout) == (0, "done\n"), r.stderr
    d.assert_clean()
    evs = [e for e in events(d, "--source", "network") if e["data"].get("name") == "unlisted.example.test" or
           e["data"].get("host") == "unlisted.example.test"]
    full = [e for e in evs if e["kind"] == "connection"]
    agg = [e["data"] for e in evs if e["kind"] == "aggregated"]
    assert 0 < len(full) <= 5, full
    assert all(e["data"]["reason"] == "name-not-listed" for e in full), full
    assert agg and all(a["of"] == "connection" and a["reason"] == "name-not-listed" and a["port"] == 8080
                       for a in agg), agg
    dropped = sum(e["data"].get("dropped", 0) for e in events(d, "--source", "network"))
    assert len(full) + sum(a["count"] for a in agg) + dropped == 400, (len(full), agg, dropped)
    stopped = [e for e in events(d) if e["kind"] == "stopped"][-1]["data"]
    assert stopped["records"]["network"]["aggregated"] == sum(a["count"] for a in agg), stopped

    rep = json.loads(d.run("report", "--format", "json").stdout)
    [line] = [x for x in rep["sandboxes"][-1]["network"] if x.get("host") == "unlisted.example.test" or
              x.get("name") == "unlisted.example.test"]
    assert line["count"] == len(full) + sum(a["count"] for a in agg), line
    assert rep["record"]["aggregated"] == sum(a["count"] for a in agg), rep["record"]


def test_files_changed_by_a_session(lz, busybox_image):
    """Branch mode: what a session changed in the agent's worktree (a file
    edited, new ones) is on the record when it ends, with line counts;
    names the agent chose are inert."""
    make_repo(lz)
    d = Domain(lz, busybox_image)
    assert d.run("run", "--", "/bin/true").returncode == 0  # the worktree exists from here on
    d.assert_clean()
    [dom] = d.domain_dirs()
    script = ("cd /workspace && printf 'one\\ntwo\\n' >> tracked.txt && echo new > \"$(printf 'new \\033[2J.txt')\" && "
              "mkdir -p sub && echo deep > sub/deep.txt")
    r = d.run("run", "--", "/bin/sh", "-c", script)
    assert r.returncode == 0, r.stderr
    d.assert_clean()
    evs = events(d, "--source", "files", want=lambda evs: len(evs) >= 2)
    assert [e["kind"] for e in evs] == ["changed", "changed"], evs
    first, last = evs
    assert first["data"]["files"] == [] and first["data"]["truncated"] is False, first
    sessions = [e["session"] for e in events(d, "--source", "session") if e["kind"] == "started"]
    assert last["session"] == sessions[1]
    assert last["data"]["root"] == os.path.join(dom, "agent-shell"), last
    files = {f["path"]: f for f in last["data"]["files"]}
    assert files["tracked.txt"].get("added") == 2 and files["tracked.txt"].get("deleted") == 0, files
    assert files["new \x1b[2J.txt"]["untracked"] is True, files
    assert files["sub/deep.txt"]["untracked"] is True, files
    assert len(last["data"]["since"]) == 40, last
    text = d.run("events", "--source", "files").stdout
    assert "\x1b" not in text and "\\x1b[2J" in text, text


def test_a_refusal_with_a_long_escaped_path_is_recorded(lz, busybox_image):
    """Direct mode: a protected name below three directories of 250 control
    characters each. Escaped, the path is six times as long as its bytes;
    the router cuts it, so the refusal is on the record and not turned
    into a drop count (the agent's way to hide its refusals)."""
    d = Domain(lz, busybox_image, extra='workspace_mode = "direct"\n')
    script = ('n=$(printf "%250s" "" | tr " " "\\001"); p="/workspace/$n/$n/$n"; mkdir -p "$p" && '
              '(echo x > "$p/.envrc") 2>/dev/null; echo rc=$?')
    r = d.run("run", "--", "/bin/sh", "-c", script)
    assert r.returncode == 0 and "rc=1" in r.stdout, (r.stdout, r.stderr)
    d.assert_clean()
    evs = events(d, "--source", "paths")
    long = [e for e in evs if e["data"]["path"].startswith("\x01" * 250 + "/")]
    assert long and long[0]["data"]["rule"] == "protected", evs
    assert "dropped" not in long[0]["data"], long[0]
