# SPDX-License-Identifier: MIT
"""lazaret audit: the escalation audit trail of a Domain, listed and its
hash chain verified, as the test user. Until the escalation pipeline writes
records itself, tests/audit-tool appends them through the Domain Store as
the coordinator will, and changes one behind the store's back with LMDB's
own calls, as an attacker with the user's files would."""
import json
import subprocess

import pytest

from conftest import build_tool
from test_run import Domain, wait_sessions
from test_run import busybox_image  # noqa: F401  (fixture)


@pytest.fixture
def tool(lz):
    dst = build_tool(lz, "audit-tool")

    def run(*args):
        r = subprocess.run(["runuser", "-u", lz.user.pw_name, "--", dst] + list(args), capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    return run


RECORDS = [
    {"request_id": "r1", "command": "uname -a", "decision": "auto", "exit_code": 0,
     "received_at": "2026-11-30T00:00:01Z"},
    {"request_id": "r2", "command": "ls; id", "final_command": "ls; id", "decision": "user", "exit_code": 0,
     "received_at": "2026-11-30T00:00:02Z"},
    {"request_id": "r3", "command": "rm -rf ~", "decision": "denied", "exit_code": None,
     "received_at": "2026-11-30T00:00:03Z"},
    {"request_id": "r4", "command": "echo \x1b[2Jgone\u202e", "decision": "denied", "exit_code": None,
     "received_at": "2026-11-30T00:00:04Z"},
]


def test_list_and_verify(lz, busybox_image, tool):
    d = Domain(lz, busybox_image)
    r = d.run("audit")
    assert (r.returncode, r.stdout) == (0, "shell: no escalations on record\n"), r.stderr  # never started
    assert d.run("run", "--", "/bin/true").returncode == 0
    d.assert_clean()
    [domain] = d.domain_dirs()
    for rec in RECORDS:
        tool("append", domain, json.dumps(rec))

    r = d.run("audit", "--verify")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "#1  2026-11-30T00:00:01Z  auto    exit 0   uname -a"
    assert lines[1] == "#2  2026-11-30T00:00:02Z  user    exit 0   ls; id"
    assert lines[2] == "#3  2026-11-30T00:00:03Z  denied  -        rm -rf ~"
    # Escapes and bidi marks are shown, never sent to the terminal.
    assert lines[3] == "#4  2026-11-30T00:00:04Z  denied  -        echo \\x1b[2Jgone<U+202E>"
    assert lines[4] == "chain intact: 4 records"

    r = d.run("audit", "--json", "--verify")
    doc = json.loads(r.stdout)
    assert doc["verified"] == {"intact": True}
    assert [x["seq"] for x in doc["records"]] == [1, 2, 3, 4]
    assert doc["records"][1]["prev_hash"] == doc["records"][0]["hash"]
    assert doc["records"][3]["command"] == RECORDS[3]["command"]

    # Someone with the user's files turns a denial into an approval.
    tool("tamper", domain, "3", '"decision":"denied"', '"decision":"auto"  ')
    r = d.run("audit", "--verify")
    assert r.returncode == 1
    assert r.stdout.splitlines()[-1] == "chain broken at record 3: its content does not match its hash (it was changed)"
    doc = json.loads(d.run("audit", "--json", "--verify").stdout)
    assert doc["verified"] == {"intact": False, "first_broken": 3,
                               "reason": "its content does not match its hash (it was changed)"}
    # Listing without --verify still works and exits 0.
    assert d.run("audit").returncode == 0


def test_readable_while_running(lz, busybox_image, tool):
    """The coordinator holds the store's lock; audit reads beside it."""
    d = Domain(lz, busybox_image)
    a = d.popen("run", "--", "/bin/sleep", "1000")
    try:
        wait_sessions(d, 1)
        r = d.run("audit", "--verify")
        assert (r.returncode, r.stdout) == (0, "shell: no escalations on record\nchain intact: 0 records\n"), r.stderr
    finally:
        d.run("stop")
        a.communicate(timeout=30)
    d.assert_clean()


def test_usage(lz, busybox_image):
    d = Domain(lz, busybox_image)
    r = d.run("audit", "a", "b")
    assert (r.returncode, r.stderr) == (64, "lazaret: error: audit takes at most one profile name\n")
    r = d.run("audit", "--nope")
    assert r.returncode == 64
    r = d.run("audit", "--help")
    assert r.returncode == 0 and r.stdout.startswith("Usage: lazaret audit [PROFILE] [--json] [--verify]")
