# SPDX-License-Identifier: MIT
"""lazaret up MANIFEST (issue 22): several agents at once, on the real
stack as the test user (the native backend: no Podman needed). Each agent
has a Domain, a sandbox and a branch lazaret/agent-NAME of its own, so
three agents on one repository commit to three branches and never see each
other's work; every agent is checked before any starts; the output is one
stream tagged by agent; one agent killed, the others go on, and its exit is
reported; nothing is left behind."""
import fcntl
import hashlib
import json
import os
import re
import shlex
import stat
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

from test_native_run import bin_without, domain_processes, native, repo
from test_run import Domain, busybox_image, debian_image, git_as  # noqa: F401  (fixtures)


def real_home(lz):
    # Domain runs lazaret with the test user's real HOME (its Podman
    # store), so that is where up looks for trusted manifests.
    return {"HOME": lz.user.pw_dir}


def manifest(lz, text, trust=True):
    """The manifest in the workspace, trusted as the person would after
    reading it (lazaret trust --manifest)."""
    path = lz.write("work/agents.toml", text)
    if trust:
        r = lz.run("trust", "--manifest", path, "--yes", env=real_home(lz))
        assert r.returncode == 0, r.stdout + r.stderr
    return path


@pytest.fixture(autouse=True)
def forget_the_manifest(lz):
    """The real HOME outlives the test: its manifest's record goes with it."""
    yield
    path = os.path.join(lz.work, "agents.toml")
    if os.path.exists(group_dir(lz, path)):
        # A detached group a failed test left: ended, so that no later
        # test meets its agents.
        lz.run("down", path, env=real_home(lz), timeout=120)
    lz.run("trust", "--revoke", "--manifest", path, env=real_home(lz))


COMMIT = ('["sh", "-c", "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a '
          'GIT_COMMITTER_EMAIL=a@a; ls; echo $0 > mine.txt; git add -A && git commit -qm \\"by $0\\" && '
          'echo committed", "{name}"]')


def wait_clean(d, seconds=15):
    end = time.monotonic() + seconds
    while time.monotonic() < end and domain_processes(d):
        time.sleep(0.1)
    assert not domain_processes(d), domain_processes(d)


def test_up_table_with_several_profiles(lz):
    """Issue 42: with more than one profile configured (the starter's and an
    agent's), every figure of the table was '?': up asked each agent's
    report without its profile. Now the figures are the agent's own, and a
    record that cannot be read says why, with a command that works."""
    repo(lz)
    d = native(lz)
    text = open(d.cfg).read()
    shell = text[text.index("[profiles.shell]"):]
    lz.write("cfg.toml", text + "\n" + shell.replace("[profiles.shell]", "[profiles.other]"))
    path = manifest(lz, f'[agents.alpha]\nprofile = "shell"\ncommand = {COMMIT.format(name="alpha")}\n')
    r = d.run("up", path, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| alpha | shell | 0 | " in r.stdout and "| 1 | +1 -0 | 0/0 | 0 | `lazaret/agent-alpha` |" in r.stdout, \
        r.stdout
    assert "?" not in r.stdout.split("| agent |")[1], r.stdout
    # On a terminal, columns rather than the Markdown source.
    argv = d.lz.cmdline(["--config", d.cfg, "up", path], {**d.lz.env, **d.env})
    t = subprocess.run(["script", "-qec", shlex.join(argv), "/dev/null"], capture_output=True, text=True,
                       cwd=lz.work, timeout=180, stdin=subprocess.DEVNULL)
    out = t.stdout.replace("\r\n", "\n")
    # (Its commit has nothing new this time: the agent exits 1, up with it.)
    assert t.returncode == 1, out
    assert "| agent |" not in out and "|---|" not in out, out
    assert re.search(r"^agent +profile +exit +duration +files +lines \+/- +network \+/- +refusals +branch$", out, re.M), out
    assert re.search(r"^alpha +shell +1 +[0-9.]+ s +1 +\+1 -0 +0/0 +0 +lazaret/agent-alpha$", out, re.M), out


def test_up_three_agents_three_branches(lz):
    head = repo(lz)
    d = native(lz)
    path = manifest(lz, "".join(f'[agents.{n}]\nprofile = "shell"\ncommand = {COMMIT.format(name=n)}\n'
                                for n in ("alpha", "beta", "gamma")))
    reports = os.path.join(lz.base, "reports")
    os.makedirs(reports)
    os.chown(reports, lz.user.pw_uid, lz.user.pw_gid)
    r = d.run("up", "--report", reports, path, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    # The agents side by side, from each one's own record.
    with open(os.path.join(reports, "up-report.json")) as f:
        rep = json.load(f)
    assert [a["name"] for a in rep["agents"]] == ["alpha", "beta", "gamma"], rep
    for a in rep["agents"]:
        assert (a["exit"], a["changes_from"], a["files_changed"], a["lines_added"], a["branch"]) == \
            (0, "branch", 1, 1, f"lazaret/agent-{a['name']}"), a
    md = open(os.path.join(reports, "up-report.md")).read()
    assert md in r.stdout, "the same table on the terminal"
    # The report's other forms: one agent a line; SARIF a run of each
    # agent's own (never one run of two boundaries); HTML the same table.
    with open(os.path.join(reports, "up-report.jsonl")) as f:
        assert [json.loads(x)["name"] for x in f] == ["alpha", "beta", "gamma"]
    with open(os.path.join(reports, "up-report.sarif")) as f:
        sarif = json.load(f)
    assert sarif["version"] == "2.1.0", sarif
    assert sorted({x["properties"]["agent"] for x in sarif["runs"]}) == ["alpha", "beta", "gamma"], sarif
    assert all(x["tool"]["driver"]["name"] == "lazaret" for x in sarif["runs"])
    html = open(os.path.join(reports, "up-report.html")).read()
    for n in ("alpha", "beta", "gamma"):
        assert f"<tr><td>{n}</td><td>shell</td><td>0</td>" in html, html
    for n in ("alpha", "beta", "gamma"):
        assert f"| {n} | shell | 0 | " in md and f"| 1 | +1 -0 | 0/0 |" in md, md
    lines = r.stdout.splitlines()
    for n in ("alpha", "beta", "gamma"):
        # Tagged output, the agent's own worktree (no other's file).
        assert f"{n} | committed" in lines, r.stdout
        mine = [x for x in lines if x.startswith(f"{n} | ")]
        assert f"{n} | mine.txt" not in mine[:mine.index(f"{n} | committed")], r.stdout
        assert git_as(lz, "log", "-1", "--format=%s", f"lazaret/agent-{n}").strip() == f"by {n}"
        assert git_as(lz, "show", f"lazaret/agent-{n}:mine.txt") == f"{n}\n"
    assert len(d.domain_dirs()) == 3, d.domain_dirs()
    assert git_as(lz, "rev-parse", "HEAD").strip() == head
    assert git_as(lz, "status", "--porcelain", "--untracked-files=no") == ""
    wait_clean(d)


def test_up_three_agents_on_gvisor(lz, debian_image):
    """The same on the real default stack: three gVisor sandboxes under
    rootless Podman, git inside each, three commits on three branches, the
    host's HEAD and work tree untouched, no container left."""
    head = repo(lz)
    d = Domain(lz, debian_image)
    path = manifest(lz, "".join(f'[agents.{n}]\nprofile = "shell"\ncommand = {COMMIT.format(name=n)}\n'
                                for n in ("alpha", "beta", "gamma")))
    r = d.run("up", path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr + d.log()
    for n in ("alpha", "beta", "gamma"):
        assert f"{n} | committed" in r.stdout.splitlines(), r.stdout
        assert f"| {n} | shell | 0 | " in r.stdout and "| 1 | +1 -0 |" in r.stdout, r.stdout
        assert git_as(lz, "log", "-1", "--format=%s", f"lazaret/agent-{n}").strip() == f"by {n}"
        assert git_as(lz, "show", f"lazaret/agent-{n}:mine.txt") == f"{n}\n"
    assert git_as(lz, "rev-parse", "HEAD").strip() == head
    assert git_as(lz, "status", "--porcelain", "--untracked-files=no") == ""
    d.assert_clean()


def test_up_checks_every_agent_before_any_starts(lz):
    """An agent whose profile does not exist, or whose launch its backend
    refuses (a volume over the native sandbox's own /tmp): one error naming the
    agent and where it is written; nothing started, no Domain made."""
    repo(lz)
    d = native(lz, extra='[profiles.wide]\nimage = "localhost/lazaret/unused:1"\nbackend = "native"\n'
                         'volumes = [{ host = "/usr/share", container = "/tmp", mode = "ro" }]\n')
    for bad, why in (('profile = "nosuch"', "nosuch"), ('profile = "wide"', "cannot take volume /tmp there")):
        path = manifest(lz, '[agents.good]\nprofile = "shell"\ncommand = ["touch", "ran-good"]\n'
                            f'[agents.bad]\n{bad}\ncommand = ["touch", "ran-bad"]\n')
        r = d.run("up", path, timeout=60)
        assert r.returncode != 0, r.stdout + r.stderr
        assert why in r.stderr, r.stderr
        assert "agent bad (" in r.stderr and "agents.toml:4:9)" in r.stderr, r.stderr
        assert "nothing was started" in r.stderr, r.stderr
        assert d.domain_dirs() == [], d.domain_dirs()
        assert not os.path.exists(os.path.join(lz.work, "ran-good"))
    assert not domain_processes(d)


def test_up_one_agent_killed_the_others_go_on(lz):
    repo(lz)
    d = native(lz)
    path = manifest(lz, '[agents.sleeper]\nprofile = "shell"\ncommand = ["sleep", "60"]\n'
                        '[agents.worker]\nprofile = "shell"\n'
                        'command = ["sh", "-c", "sleep 2; echo done"]\n')
    p = subprocess.Popen(d.cmd("up", path), cwd=lz.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Started (its session open, and up told so): from now on its end
        # is its own, not a failed start.
        end = time.monotonic() + 20
        while time.monotonic() < end:
            r = d.run("--agent", "sleeper", "status", "--json")
            if r.returncode == 0 and json.loads(r.stdout).get("sessions"):
                break
            time.sleep(0.05)
        time.sleep(0.5)
        # The sleeper's lazaret run, by its --agent argument and its parent,
        # up itself: not the middle of its detached spawn of the coordinator
        # (the run's arguments for a moment, its parent the run), nor the
        # coordinator before its exec once that middle is gone (the same
        # arguments, its parent no longer the run: killing it was a lost
        # coordinator, 125, not the run's 137).
        victim = None
        end = time.monotonic() + 20
        while victim is None and time.monotonic() < end:
            out = subprocess.run(["ps", "-u", lz.user.pw_name, "-o", "pid=,ppid=,args="], capture_output=True,
                                 text=True).stdout
            procs = {}
            for line in out.splitlines():
                f = line.split(None, 2)
                if len(f) == 3:
                    procs[f[0]] = (f[1], f[2])
            for pid, (ppid, args) in procs.items():
                parent = procs.get(ppid, ("", ""))[1]
                if "--agent sleeper run" in args and path not in args and path in parent and " up " in parent:
                    victim = int(pid)
            time.sleep(0.05)
        assert victim, "the sleeper's lazaret run never appeared"
        os.kill(victim, signal.SIGKILL)
        out, err = p.communicate(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 1, out + err
    assert "worker | done" in out, out
    assert "| sleeper | shell | 137 | " in out and "| worker | shell | 0 | " in out, out
    wait_clean(d, 30)


def test_up_bad_manifest(lz):
    """A manifest error is one positioned line, exit 65, nothing started."""
    d = native(lz)
    path = manifest(lz, '[agents.a1]\nprofile = "shell"\ncommand = "claude --yes"\n', trust=False)
    r = lz.run("trust", "--manifest", path, "--yes", env=real_home(lz))
    assert r.returncode == 65 and "nothing was trusted" in r.stderr, r.stderr
    r = d.run("up", path)
    assert r.returncode == 65, r.stderr
    assert f"{path}:3:11: agents.a1.command must be a non-empty array of strings" in r.stderr, r.stderr
    assert d.domain_dirs() == []
    r = d.run("--agent", "x1", "up", path)
    assert r.returncode == 64 and "takes no --agent" in r.stderr, r.stderr
    r = d.run("up", "--report", os.path.join(lz.base, "none", "deeper"), path)
    assert r.returncode == 64 and "cannot open none" in r.stderr, r.stderr


def test_up_report_is_written_as_report_output_writes(lz):
    """Issue 41, item 5: --report DIR writes through the one safe writer
    of lazaret report --output: new files 0600 (not 0644, whatever the
    umask), never over a file there (nor through a link planted with a
    report's name), never through a symbolic link on DIR's path; each
    refusal is one error before any agent starts, and the host file it
    would have reached is unchanged."""
    d = native(lz)
    path = manifest(lz, '[agents.quiet]\nprofile = "shell"\ncommand = ["true"]\n')
    reports = os.path.join(lz.base, "reports")
    os.makedirs(reports)
    os.chown(reports, lz.user.pw_uid, lz.user.pw_gid)
    secret = os.path.join(lz.base, "secret.txt")
    with open(secret, "w") as f:
        f.write("keep\n")
    os.chown(secret, lz.user.pw_uid, lz.user.pw_gid)
    # A symbolic link on DIR's path: refused, nothing written where it points.
    link = os.path.join(lz.base, "via-link")
    os.symlink(reports, link)
    r = d.run("up", "--report", link, path)
    assert r.returncode == 64 and "via-link is a symbolic link" in r.stderr, r.stderr
    assert os.listdir(reports) == [] and d.domain_dirs() == [], os.listdir(reports)
    # A link with a report's name: refused, its target unchanged.
    planted = os.path.join(reports, "up-report.md")
    os.symlink(secret, planted)
    r = d.run("up", "--report", reports, path)
    assert r.returncode == 64 and "up-report.md is already there" in r.stderr, r.stderr
    assert r.stderr.count("error") <= 1, r.stderr
    assert open(secret).read() == "keep\n" and d.domain_dirs() == []
    os.unlink(planted)
    # Written: every file new and the person's alone.
    r = d.run("up", "--report", reports, path)
    assert r.returncode == 0, r.stdout + r.stderr
    names = sorted(os.listdir(reports))
    assert names == ["up-report.html", "up-report.json", "up-report.jsonl", "up-report.md", "up-report.sarif"], names
    for n in names:
        st = os.lstat(os.path.join(reports, n))
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, (n, oct(st.st_mode))
    # Again into the same directory: nothing replaced.
    before = {n: open(os.path.join(reports, n)).read() for n in names}
    r = d.run("up", "--report", reports, path)
    assert r.returncode == 64 and "up-report.md is already there" in r.stderr, r.stderr
    assert {n: open(os.path.join(reports, n)).read() for n in names} == before
    wait_clean(d)


def test_up_shows_the_agents_output_inert(lz):
    """What an agent prints reaches the person's terminal inert: an OSC 52
    (set the clipboard), a CSI and a C1 control come out as \\xHH, never as
    the bytes a terminal would act on."""
    d = native(lz)
    path = manifest(lz, '[agents.noisy]\nprofile = "shell"\n'
                        "command = ['printf', 'a\\033]52;c;aGVsbG8=\\007b\\033[2Jc\\302\\233d\\n']\n")
    reports = os.path.join(lz.base, "reports")
    os.makedirs(reports)
    os.chown(reports, lz.user.pw_uid, lz.user.pw_gid)
    r = d.run("up", "--report", reports, path)
    assert r.returncode == 0, r.stdout + r.stderr
    # A workspace outside git: no branch; its changes are its record's.
    with open(os.path.join(reports, "up-report.json")) as f:
        (a,) = json.load(f)["agents"]
    assert (a["branch"], a["changes_from"], a["files_changed"]) == (None, "record", 0), a
    assert "noisy | a\\x1b]52;c;aGVsbG8=\\x07b\\x1b[2Jc\\x9bd" in r.stdout, repr(r.stdout)
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\u009b" not in r.stdout, repr(r.stdout)


def one_cannot_start(lz, *options):
    """Two agents, one that passes the checks but cannot start (a
    workspace outside git needs the workspace router, which this install
    lacks): its Domain, the manifest, and the up command line."""
    repo(lz)
    plain = os.path.join(lz.base, "plain")
    os.makedirs(plain)
    os.chown(plain, lz.user.pw_uid, lz.user.pw_gid)
    bindir = bin_without(lz, "lazaret-gitrouter")
    d = native(lz)
    path = manifest(lz, '[agents.ok]\nprofile = "shell"\ncommand = ["sleep", "60"]\n'
                        f'[agents.broken]\nprofile = "shell"\ncommand = ["true"]\nworkspace = "{plain}"\n')
    env = {**lz.env, **d.env}
    cmd = [c if c != lz.binary else os.path.join(bindir, "lazaret") for c in
           lz.cmdline(["--config", d.cfg, "up", *options, path], env)]
    return d, path, cmd


def test_up_an_agent_that_cannot_start_ends_the_group(lz):
    """An agent that passes the checks but whose start fails (here: a
    workspace outside git needs the workspace router, which this install
    lacks) ends the whole group: the agent already running is ended, up
    says which agent did not start, exit 125, nothing is left."""
    d, path, cmd = one_cannot_start(lz)

    start = time.monotonic()
    r = subprocess.run(cmd, cwd=lz.work, capture_output=True, text=True, timeout=120)
    assert r.returncode == 125, r.stdout + r.stderr
    assert "agent broken did not start" in r.stderr and "the other agents were ended" in r.stderr, r.stderr
    assert "broken | " in r.stdout and "lazaret-gitrouter is missing" in r.stdout, r.stdout
    assert time.monotonic() - start < 40, "the running agent was not ended"
    wait_clean(d, 30)


def test_up_an_image_missing_starts_nothing(lz, busybox_image):
    """gVisor agents: one whose image is not in the user's Podman store
    stops the whole manifest before anything starts: no container, no
    Domain, the agent and the image named."""
    repo(lz)
    d = Domain(lz, busybox_image, extra='[profiles.gone]\nimage = "localhost/lazaret/not-built:1"\n')
    path = manifest(lz, '[agents.good]\nprofile = "shell"\ncommand = ["touch", "ran-good"]\n'
                        '[agents.bad]\nprofile = "gone"\ncommand = ["touch", "ran-bad"]\n')
    ps = ["runuser", "-u", lz.user.pw_name, "--", "env", "-i", f"HOME={lz.user.pw_dir}",
          "PATH=/usr/bin:/bin:/usr/sbin:/sbin", "podman", "ps", "-aq"]
    before = subprocess.run(ps, capture_output=True, text=True, cwd="/").stdout
    r = d.run("up", path, timeout=120)
    assert r.returncode == 125, r.stdout + r.stderr
    assert "agent bad (" in r.stderr and "localhost/lazaret/not-built:1 is not in Podman's store" in r.stderr, \
        r.stderr
    assert "nothing was started" in r.stderr, r.stderr
    assert d.domain_dirs() == [], d.domain_dirs()
    after = subprocess.run(ps, capture_output=True, text=True, cwd="/").stdout
    assert after == before, (before, after)


UNTRUSTED = "is not trusted: a manifest chooses each agent's workspace and profile"


def test_up_refuses_a_manifest_until_its_bytes_are_trusted(lz):
    """A manifest chooses directories and profiles: lazaret up refuses it,
    before anything starts, until the person trusts its exact bytes; one
    byte changed voids that; a symlink to a trusted one is not followed."""
    d = native(lz)
    text = '[agents.one]\nprofile = "shell"\ncommand = ["touch", "ran-one"]\n'
    path = manifest(lz, text, trust=False)
    ran = os.path.join(lz.work, "ran-one")
    r = d.run("up", path)
    assert r.returncode == 65, r.stdout + r.stderr
    assert UNTRUSTED in r.stderr and f"'lazaret trust --manifest {path}'" in r.stderr, r.stderr
    assert "nothing was started" in r.stderr and d.domain_dirs() == [] and not os.path.exists(ran)
    r = lz.run("trust", "--manifest", path, env=real_home(lz))
    assert r.returncode == 64 and "trust needs confirmation" in r.stderr, r.stderr
    # What trusting gives, shown before it is given.
    assert f'Manifest "{path}"' in r.stdout and f'your profile shell, with the directory "{lz.work}"' in r.stdout
    assert 'command ["touch", "ran-one"]' in r.stdout, r.stdout
    # A directory the manifest names, named to repaint the screen that
    # asks: shown escaped.
    odd = os.path.join(lz.work, "x\x1b[2J\ry")
    os.makedirs(odd)
    os.chown(odd, lz.user.pw_uid, lz.user.pw_gid)
    lz.write("work/odd.toml", '[agents.one]\nprofile = "shell"\ncommand = ["true"]\nworkspace = "x\\u001b[2J\\ry"\n')
    r = lz.run("trust", "--manifest", os.path.join(lz.work, "odd.toml"), env=real_home(lz))
    assert r.returncode == 64 and "\x1b" not in r.stdout and "\r" not in r.stdout, repr(r.stdout)
    assert "x\\u001b[2J\\u000dy" in r.stdout, repr(r.stdout)
    assert d.run("up", path).returncode == 65
    assert lz.run("trust", "--manifest", path, "--yes", env=real_home(lz)).returncode == 0
    r = d.run("up", path)
    assert r.returncode == 0 and os.path.exists(ran), r.stdout + r.stderr
    os.unlink(ran)
    r = lz.run("trust", "--list", env=real_home(lz))
    assert f"trusted  {path}  (a manifest, since " in r.stdout, r.stdout
    # One byte changed.
    lz.write("work/agents.toml", text.replace("ran-one", "ran-two"))
    r = d.run("up", path)
    assert r.returncode == 65 and f"{path} changed since you trusted it" in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(lz.work, "ran-two")) and d.domain_dirs() != []
    assert f"changed  {path}  (a manifest" in lz.run("trust", "--list", env=real_home(lz)).stdout
    # A symlink to it is refused, never followed.
    link = os.path.join(lz.base, "link.toml")
    os.symlink(path, link)
    r = d.run("up", link)
    assert r.returncode == 65 and f"{link}: is a symbolic link; a manifest must be a regular file" in r.stderr, \
        r.stderr
    r = lz.run("trust", "--revoke", "--manifest", path, env=real_home(lz))
    assert r.returncode == 0 and "no longer trusted" in r.stdout, r.stderr
    r = lz.run("trust", "--revoke", "--manifest", path, env=real_home(lz))
    assert r.returncode == 1 and "nothing to revoke" in r.stderr, r.stderr


def test_an_agent_cannot_widen_the_next_run_through_its_manifest(lz):
    """The attack: the manifest lies in the agent's own workspace, and the
    agent rewrites it so the next run gives an agent the person's home
    directory and a command of its choosing. The rewrite reaches the file
    (the agent may write its workspace), but lazaret up refuses the changed
    manifest: nothing starts and the home directory is unchanged."""
    d = native(lz)
    evil = (f'[agents.one]\\nprofile = \\"shell\\"\\nworkspace = \\"{lz.home}\\"\\n'
            'command = [\\"touch\\", \\"pwned\\"]\\n')
    path = manifest(lz, '[agents.one]\nprofile = "shell"\n'
                        f'command = ["sh", "-c", "printf \'{evil}\' > agents.toml"]\n')
    r = d.run("up", path)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(path) as f:
        assert f'workspace = "{lz.home}"' in f.read(), "the agent's rewrite did not reach the manifest"
    home_before = sorted(os.listdir(lz.home))
    r = d.run("up", path)
    assert r.returncode == 65 and f"{path} changed since you trusted it" in r.stderr, r.stdout + r.stderr
    assert not os.path.exists(os.path.join(lz.home, "pwned"))
    assert sorted(os.listdir(lz.home)) == home_before
    wait_clean(d)


def test_a_trusted_manifest_does_not_follow_a_symlink_an_agent_made(lz):
    """Issue 40, item 5: the manifest names agent bb with the workspace
    agents/b; an agent that writes the manifest's directory (direct mode)
    moves agents/b aside and puts a symbolic link to another directory of
    the person's in its place. The manifest's bytes did not change, but
    its trust covered the directories it resolved to: the next up refuses,
    naming the fix, and nothing runs in the other directory."""
    d = native(lz)
    b = os.path.join(lz.work, "agents", "b")
    os.makedirs(b)
    os.chown(os.path.dirname(b), lz.user.pw_uid, lz.user.pw_gid)
    os.chown(b, lz.user.pw_uid, lz.user.pw_gid)
    path = manifest(lz, '[agents.bb]\nprofile = "shell"\nworkspace = "agents/b"\ncommand = ["touch", "ran-bb"]\n')
    r = d.run("up", path)
    assert r.returncode == 0 and os.path.exists(os.path.join(b, "ran-bb")), r.stdout + r.stderr
    wait_clean(d)
    # The swap, as the agent would make it.
    secret = os.path.join(lz.home, "secret")
    os.makedirs(secret)
    os.chown(secret, lz.user.pw_uid, lz.user.pw_gid)
    os.rename(b, b + ".aside")
    os.symlink(secret, b)
    os.lchown(b, lz.user.pw_uid, lz.user.pw_gid)
    r = d.run("up", path)
    assert r.returncode == 65, r.stdout + r.stderr
    assert f"{path} changed since you trusted it (its bytes, or the directory an agent's workspace resolves " \
           f"to: now bb in {secret})" in r.stderr, r.stderr
    assert f"then run 'lazaret trust --manifest {path}' again; nothing was started" in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert os.listdir(secret) == []
    r = lz.run("trust", "--list", env=real_home(lz))
    assert f"changed  {path}  (a manifest" in r.stdout, r.stdout
    # The directory put back: the trust holds again.
    os.unlink(b)
    os.rename(b + ".aside", b)
    r = lz.run("trust", "--list", env=real_home(lz))
    assert f"trusted  {path}  (a manifest" in r.stdout, r.stdout


def group_dir(lz, path):
    # No XDG_RUNTIME_DIR in the test's environment: /tmp/lazaret-UID.
    h = hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:16]
    return f"/tmp/lazaret-{lz.user.pw_uid}/up-{h}"


class Terminal:
    """A command of the test user's on a pseudo-terminal of its own."""

    def __init__(self, cmd, cwd):
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        self.p = subprocess.Popen(cmd, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.seen = b""

    def expect(self, want, seconds=30):
        end = time.monotonic() + seconds
        while want not in self.seen and time.monotonic() < end:
            r, _, _ = select.select([self.master], [], [], 0.2)
            if r:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:
                    break
        assert want in self.seen, self.seen
        return self.seen

    def send(self, data):
        os.write(self.master, data)

    def wait(self, seconds=30):
        end = time.monotonic() + seconds
        while self.p.poll() is None and time.monotonic() < end:
            r, _, _ = select.select([self.master], [], [], 0.2)
            if r:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:
                    pass
        if self.p.poll() is None:
            self.p.kill()
        rc = self.p.wait()
        os.close(self.master)
        return rc


def test_up_detach_attach_down(lz):
    """up --detach starts the group in the background and returns; attach
    shows one agent's terminal (what it printed before, then live) and
    takes keys for it; Ctrl-\\ detaches and leaves it running; down ends
    every agent, prints the comparison and leaves nothing behind: no
    process of any Domain, no group directory, no socket."""
    repo(lz)
    d = native(lz)
    path = manifest(lz, '[agents.echoer]\nprofile = "shell"\n'
                        'command = ["sh", "-c", "echo ready-$0; read x; echo got-$x; sleep 60", "e"]\n'
                        '[agents.sleeper]\nprofile = "shell"\ncommand = ["sleep", "60"]\n')
    start = time.monotonic()
    r = d.run("up", "--detach", path, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all 2 agents started in" in r.stderr and f"lazaret down {path}" in r.stderr, r.stderr
    assert time.monotonic() - start < 30
    gdir = group_dir(lz, path)
    assert os.path.exists(os.path.join(gdir, "sock")), os.listdir(os.path.dirname(gdir))
    # One group per manifest.
    r = d.run("up", "--detach", path)
    assert r.returncode == 1 and "is already up" in r.stderr, r.stderr
    r = d.run("attach", "nosuch")
    assert r.returncode == 1 and "no group that is up has an agent nosuch" in r.stderr, r.stderr

    t = Terminal(d.cmd("attach", "echoer"), lz.work)
    t.expect(b"ready-e")  # printed before anyone attached
    t.send(b"hello\r")
    t.expect(b"got-hello")
    t.send(b"\x1c")
    assert t.wait() == 0, t.seen
    assert b"[detached from echoer; it runs on" in t.seen, t.seen
    r = d.run("--agent", "echoer", "status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout).get("sessions"), r.stdout + r.stderr

    r = d.run("down", path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| echoer | shell | " in r.stdout and "| sleeper | shell | " in r.stdout, r.stdout
    assert not os.path.exists(gdir), os.listdir(gdir)
    wait_clean(d, 30)
    r = d.run("down", path)
    assert r.returncode == 1 and "is not up" in r.stderr, r.stderr


def test_up_attach_follows_one_agent_to_its_end(lz):
    """up --attach NAME: the group in the background, this terminal on
    NAME's; its exit status becomes attach's. The group that ended by
    itself: down prints its table and removes what it left."""
    repo(lz)
    d = native(lz)
    path = manifest(lz, '[agents.quick]\nprofile = "shell"\ncommand = ["sh", "-c", "sleep 1; echo hi-there; exit 3"]\n'
                        '[agents.other]\nprofile = "shell"\ncommand = ["true"]\n')
    r = d.run("up", "--attach", "nosuch", path)
    assert r.returncode == 64 and "has no such agent" in r.stderr, r.stderr
    t = Terminal(d.cmd("up", "--attach", "quick", path), lz.work)
    assert t.wait(60) == 3, t.seen
    assert b"hi-there" in t.seen and b"[agent quick exited with 3]" in t.seen, t.seen
    gdir = group_dir(lz, path)
    end = time.monotonic() + 60
    while os.path.exists(os.path.join(gdir, "sock")) and time.monotonic() < end:
        time.sleep(0.1)
    assert os.path.exists(os.path.join(gdir, "up-report.md")), os.listdir(gdir)
    r = d.run("down", path, timeout=60)
    assert r.returncode == 0 and "had ended by itself" in r.stderr, r.stdout + r.stderr
    assert "| quick | shell | 3 | " in r.stdout and "| other | shell | 0 | " in r.stdout, r.stdout
    assert not os.path.exists(gdir)
    wait_clean(d, 30)


def test_up_detached_start_that_fails_leaves_nothing(lz):
    """Detached as in the foreground: an agent that cannot start ends the
    group, up says which and why (from its terminal), exit 125, and the
    group's directory is gone."""
    d, path, cmd = one_cannot_start(lz, "--detach")

    r = subprocess.run(cmd, cwd=lz.work, capture_output=True, text=True, timeout=120)
    assert r.returncode == 125, r.stdout + r.stderr
    assert "agent broken did not start" in r.stderr and "broken | " in r.stderr, r.stderr
    assert "lazaret-gitrouter is missing" in r.stderr, r.stderr
    assert not os.path.exists(group_dir(lz, path))
    wait_clean(d, 30)


def test_up_down_leaves_nothing_of_gvisor_agents(lz, busybox_image):
    """On gVisor: a detached group of two sandboxes, then down. No
    container, coordinator, watchdog, mount, socket or FUSE daemon of the
    Domains is left, and no group directory."""
    repo(lz)
    d = Domain(lz, busybox_image)
    path = manifest(lz, '[agents.one]\nprofile = "shell"\ncommand = ["sleep", "120"]\n'
                        '[agents.two]\nprofile = "shell"\ncommand = ["sh", "-c", "echo two-up; sleep 120"]\n')
    r = d.run("up", "--detach", path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr + d.log()
    assert len(d.container_names()) == 2, d.container_names()
    r = d.run("down", path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| one | shell | 143 | " in r.stdout and "| two | shell | 143 | " in r.stdout, r.stdout
    assert not os.path.exists(group_dir(lz, path))
    d.assert_clean(30)


def test_up_detach_interrupted_while_starting_ends_the_group(lz, busybox_image):
    """Ctrl-C while a detached group starts: nothing goes on in the
    background (exit 130, the agents ended, no group directory, no
    container)."""
    repo(lz)
    d = Domain(lz, busybox_image)
    path = manifest(lz, '[agents.one]\nprofile = "shell"\ncommand = ["sleep", "120"]\n')
    p = subprocess.Popen(d.cmd("up", "--detach", path), cwd=lz.work, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # The group's socket is made just before the agents start (a gVisor
    # start takes a few hundred ms): interrupt then.
    sock = os.path.join(group_dir(lz, path), "sock")
    end = time.monotonic() + 60
    while not os.path.exists(sock) and time.monotonic() < end:
        time.sleep(0.005)
    time.sleep(0.02)
    # runuser's child is lazaret (env execs it).
    for k in subprocess.run(["ps", "--ppid", str(p.pid), "-o", "pid="], capture_output=True,
                            text=True).stdout.split():
        os.kill(int(k), signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "interrupted: every agent of the group was ended" in err, out + err
    assert not os.path.exists(group_dir(lz, path))
    d.assert_clean(30)


def test_an_agent_cannot_reach_its_groups_socket(lz):
    """The attack: an agent of a detached group knows where the group's
    socket is on the host (RUNTIME/up-HASH/sock, accepted from any process
    of the person's uid) and tries to connect to it, to read another
    agent's terminal or to end the group (a D frame). The native sandbox
    has no /run and a /tmp of its own: there is nothing there to connect
    to, the group goes on, and down finds both agents still running. (In
    FS-ONLY, seccomp refuses every connect(2): test_native.py.)"""
    repo(lz)
    d = native(lz)
    path = os.path.join(lz.work, "agents.toml")
    gdir = group_dir(lz, path)
    runtime = os.path.dirname(gdir)
    attack = ("import os, socket, struct\n"
              f"for p in ({os.path.join(gdir, 'sock')!r}, {runtime!r}, '/run/user/{lz.user.pw_uid}'):\n"
              "    print('exists' if os.path.exists(p) else 'absent', p, flush=True)\n"
              "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
              "try:\n"
              f"    s.connect({os.path.join(gdir, 'sock')!r})\n"
              "    s.sendall(b'D\\0' + struct.pack('>H', 0))\n"
              "    print('CONNECTED', flush=True)\n"
              "except OSError as e:\n"
              "    print('refused:', e.strerror, flush=True)\n"
              "import time; time.sleep(60)\n")
    manifest(lz, '[agents.victim]\nprofile = "shell"\ncommand = ["sh", "-c", "echo victim-up; sleep 60"]\n'
                 '[agents.attacker]\nprofile = "shell"\n'
                 f'command = ["/usr/bin/python3", "-c", {json.dumps(attack)}]\n')
    r = d.run("up", "--detach", path, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.path.exists(os.path.join(gdir, "sock"))
    log = os.path.join(gdir, "attacker.log")
    end = time.monotonic() + 30
    while time.monotonic() < end and "refused:" not in open(log, errors="replace").read() \
            and "CONNECTED" not in open(log, errors="replace").read():
        time.sleep(0.1)
    said = open(log, errors="replace").read()
    assert "refused:" in said and "CONNECTED" not in said, said
    assert "exists" not in said, said
    # The group is untouched: its socket is there, down ends both agents
    # (143: SIGTERM from down, not an exit of their own).
    time.sleep(0.5)
    assert os.path.exists(os.path.join(gdir, "sock")), os.listdir(gdir)
    r = d.run("down", path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| victim | shell | 143 | " in r.stdout and "| attacker | shell | 143 | " in r.stdout, r.stdout
    wait_clean(d, 30)


def test_a_borrowed_lazaret_binary_cannot_end_or_watch_the_group(lz):
    """Issue 41: the group's socket checked the uid alone. A host process
    of the person's uid that is not the CLI (the real binary with a library
    preloaded, confined as an auto-approved host command is: no runtime
    directory) connects and sends D (down), or attaches to an agent: it
    cannot read the socket's key, the supervisor drops it at its first
    frame, and the group goes on; the person's down still ends it."""
    repo(lz)
    d = native(lz)
    path = manifest(lz, '[agents.victim]\nprofile = "shell"\ncommand = ["sh", "-c", "echo victim-up; sleep 60"]\n')
    r = d.run("up", "--detach", path, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    gdir = group_dir(lz, path)
    sock, key = os.path.join(gdir, "sock"), os.path.join(gdir, "sock.key")
    for frame in (b"D\0" + struct.pack(">H", 0), b"A\0" + struct.pack(">H", 6) + b"victim",
                  b"k\0" + struct.pack(">H", 64) + b"0" * 64 + b"D\0" + struct.pack(">H", 0)):
        out, err = lz.raw(sock, frame, env=real_home(lz), confine_key=key)
        assert b"victim-up" not in out, out
        time.sleep(0.5)
        assert os.path.exists(sock), (frame, os.listdir(gdir))
        assert "key: Permission denied" in err.splitlines(), err
    st = os.stat(key)
    assert (st.st_uid, st.st_mode & 0o777) == (lz.user.pw_uid, 0o600)
    said = open(os.path.join(gdir, "up.log"), errors="replace").read()
    assert said.count("its first frame did not carry the group socket's key") == 3, said
    r = d.run("down", path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| victim | shell | 143 | " in r.stdout, r.stdout
    assert not os.path.exists(gdir)
    wait_clean(d, 30)
