# SPDX-License-Identifier: MIT
"""lazaret run started in a subdirectory of a git repository (issue 13: the
workspace cannot widen its own sandbox). Branch mode works from the
repository's root: one Domain, one agent worktree of the whole repository,
each session in the same subdirectory of it; never a silent switch to the
host's tree. Direct mode mounts the subdirectory alone."""
import json
import os
import subprocess
import time

from conftest import TEST_USER, Rootful  # noqa: F401 (the harness's user)
from conftest import tree_digest as conftest_tree_digest
from test_run import Domain, busybox_image, debian_image, dom, git_as, podman, wait_sessions  # noqa: F401


def tree_digest(root):
    """The tree below root, .git left out (the agent's branch is meant to
    change it)."""
    return conftest_tree_digest(root, skip_top_git=True)


def make_clean_repo(lz):
    """A committed repository in lz.work with sub/deep, nothing uncommitted."""
    git_as(lz, "init", "-q", "-b", "main")
    lz.write("work/top.txt", "top\n")
    lz.write("work/sub/deep/in-sub.txt", "in sub\n")
    git_as(lz, "add", "-A")
    git_as(lz, "commit", "-q", "-m", "first")
    assert git_as(lz, "status", "--porcelain") == ""
    return os.path.join(lz.work, "sub", "deep")


def run_in(d, cwd, *args, timeout=180):
    """lazaret run as the test user with cwd as its working directory."""
    return d.lz.run("--config", d.cfg, *args, cwd=cwd, env=d.env, timeout=timeout)


def test_branch_mode_in_subdirectory(lz, debian_image):
    """Started in repo/sub/deep: the sandbox starts in /workspace/sub/deep of
    the agent's worktree of the whole repository; the agent's commit lands on
    lazaret/agent-shell; the host's tree is unchanged, byte for byte."""
    sub = make_clean_repo(lz)
    before = tree_digest(lz.work)
    head = git_as(lz, "rev-parse", "HEAD").strip()
    d = Domain(lz, debian_image)

    script = r"""
set -eu
export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=a@a
pwd
cat in-sub.txt
echo x > new.txt
git add -A
git commit -qm 'agent in sub'
echo DONE
"""
    r = run_in(d, sub, "run", "--", "/bin/bash", "-c", script)
    assert r.returncode == 0, r.stderr + d.log()
    assert r.stdout.splitlines() == ["/workspace/sub/deep", "in sub", "DONE"], r.stdout
    # The edit is on the agent's branch, from the host's HEAD.
    assert git_as(lz, "show", "lazaret/agent-shell:sub/deep/new.txt") == "x\n"
    assert git_as(lz, "rev-parse", "lazaret/agent-shell~1").strip() == head
    assert git_as(lz, "log", "-1", "--format=%s", "lazaret/agent-shell").strip() == "agent in sub"
    # The host's working tree and index are as they were.
    assert tree_digest(lz.work) == before
    assert git_as(lz, "status", "--porcelain") == ""
    assert git_as(lz, "rev-parse", "HEAD").strip() == head
    assert not os.path.exists(os.path.join(sub, "new.txt"))
    d.assert_clean()
    assert len(d.domain_dirs()) == 1

    # Both directories resolve to the repository's Domain.
    shown = {}
    for where in (lz.work, sub):
        r = run_in(d, where, "config", "show", "--json")
        assert r.returncode == 0, r.stderr
        shown[where] = json.loads(r.stdout)["resolved"]["profiles"]["shell"]
    assert shown[sub]["repo_root"] == lz.work and shown[sub]["workspace_subdir"] == "sub/deep"
    assert shown[lz.work]["repo_root"] == lz.work and shown[lz.work]["workspace_subdir"] is None
    assert shown[sub]["domain_hash"] == shown[lz.work]["domain_hash"]

    # The review works from the subdirectory too: the root's branch.
    r = run_in(d, sub, "diff")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Files changed on lazaret/agent-shell against HEAD: 1 (1 added)", r.stdout
    assert any(x.split()[-1] == "sub/deep/new.txt" and " added " in x for x in lines[1:6] if x), r.stdout
    assert "+++ b/sub/deep/new.txt\n" in r.stdout


def test_root_and_subdirectory_share_one_sandbox(dom, lz):
    """One terminal from the repository's root, one from a subdirectory, one
    from a directory only the host has (untracked): one sandbox, one
    generation, each session in its own directory."""
    sub = make_clean_repo(lz)
    untracked = os.path.join(lz.work, "notes")
    lz.write("work/notes/n.txt", "untracked\n")
    before = tree_digest(lz.work)
    procs = {}
    for name, where in (("root", lz.work), ("sub", sub), ("untracked", untracked)):
        procs[name] = dom.popen("--workspace", where, "run", "--", "/bin/sh", "-c", "pwd; read x; echo bye")
        wait_sessions(dom, len(procs))
    st_root = dom.status()
    r = dom.run("--workspace", sub, "status", "--json")
    assert r.returncode == 0, r.stderr
    st_sub = json.loads(r.stdout)
    assert st_root["generation"] == st_sub["generation"]
    assert st_root["sandbox"] == st_sub["sandbox"]
    assert sorted(s["cwd"] for s in st_root["sessions"]) == ["/workspace", "/workspace/notes",
                                                               "/workspace/sub/deep"]
    assert len(dom.container_names()) >= 1 and len(dom.domain_dirs()) == 1
    outs = {}
    for name, p in procs.items():
        out, err = p.communicate(input=b"\n", timeout=60)
        assert p.returncode == 0, err
        outs[name] = out.decode().splitlines()
    assert outs == {"root": ["/workspace", "bye"], "sub": ["/workspace/sub/deep", "bye"],
                    "untracked": ["/workspace/notes", "bye"]}
    # The untracked directory was made in the agent's worktree, empty.
    [domain] = dom.domain_dirs()
    assert os.listdir(os.path.join(domain, "agent-shell", "notes")) == []
    assert tree_digest(lz.work) == before


def test_subdirectory_symlink_planted_in_worktree(dom, lz):
    """The agent replaces a directory of its worktree with a symlink to a
    host path: a later session from that directory is refused, and nothing
    is made through the link."""
    sub = make_clean_repo(lz)
    outside = os.path.join(lz.base, "outside")
    os.makedirs(outside)
    os.chown(outside, lz.user.pw_uid, lz.user.pw_gid)
    a = dom.popen("run", "--", "/bin/sh", "-c",
                  f"rm -rf /workspace/sub && ln -s {outside} /workspace/sub && echo ok; read x")
    assert a.stdout.readline() == b"ok\n"
    r = dom.run("--workspace", sub, "run", "--", "/bin/pwd")
    assert r.returncode == 125, r.stdout + r.stderr
    assert "cannot enter /workspace/sub/deep in the agent's worktree" in r.stderr, r.stderr
    assert os.listdir(outside) == []
    _, err = a.communicate(input=b"\n", timeout=60)
    assert a.returncode == 0, err
    dom.assert_clean()


def test_linked_worktree_subdirectory_refused(dom, lz):
    """A subdirectory of a linked worktree (its .git is a file): branch mode
    is refused with the reason and the fix, and nothing is made."""
    make_clean_repo(lz)
    wt = os.path.join(lz.home, "wt")
    git_as(lz, "worktree", "add", "-q", wt)
    wsub = os.path.join(wt, "sub", "deep")
    r = dom.run("--workspace", wsub, "run", "--", "/bin/true")
    assert r.returncode == 125, r.stderr
    assert f"{wt}/.git is not a directory (the workspace is in a linked worktree or a submodule)" in r.stderr
    assert 'set workspace_mode = "direct" in [profiles.shell]' in r.stderr
    assert dom.domain_dirs() == [] and dom.container_names() == []
    dom.assert_clean()


def test_inside_dot_git_refused(lz, busybox_image):
    """The workspace inside the repository's .git: refused in both modes
    (the sandbox would get git's hooks and config read-write)."""
    make_clean_repo(lz)
    hooks = os.path.join(lz.work, ".git", "hooks")
    for mode in ("branch", "direct"):
        d = Domain(lz, busybox_image, extra=f'workspace_mode = "{mode}"\n')
        r = d.run("--workspace", hooks, "run", "--", "/bin/sh", "-c", "echo x > /workspace/pre-commit")
        assert r.returncode == 125, (mode, r.stdout, r.stderr)
        assert f"is inside the git directory {lz.work}/.git" in r.stderr, r.stderr
        assert not os.path.exists(os.path.join(hooks, "pre-commit"))
        assert d.domain_dirs() == []
        d.assert_clean()


def test_direct_mode_in_subdirectory(lz, busybox_image):
    """workspace_mode = "direct" in a subdirectory: that directory alone is
    mounted (read-write, the host's own), without .git."""
    sub = make_clean_repo(lz)
    d = Domain(lz, busybox_image, extra='workspace_mode = "direct"\n')
    r = run_in(d, sub, "run", "--", "/bin/sh", "-c",
               "pwd; ls -a /workspace; test -e /workspace/.git || echo no-git; "
               "test -e /workspace/../top.txt || echo no-top; echo direct > /workspace/written.txt")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["/workspace", ".", "..", "in-sub.txt", "no-git", "no-top"], r.stdout
    assert open(os.path.join(sub, "written.txt")).read() == "direct\n"
    assert "git router" not in d.log()
    d.assert_clean()
    r = run_in(d, sub, "config", "show", "--json")
    assert r.returncode == 0, r.stderr
    prof = json.loads(r.stdout)["resolved"]["profiles"]["shell"]
    assert prof["repo_root"] is None and prof["workspace_subdir"] is None


def test_rootful_subdirectory(lazaret_bin, tmp_path):
    """Run by root from a subdirectory of a repository: the session starts
    in the same subdirectory of the agent's worktree, and the edit lands
    there, not in the host's tree."""
    rf = Rootful(lazaret_bin, tmp_path)
    work = rf.work
    (work / "sub").mkdir()
    (work / "sub" / "a.txt").write_text("a\n")
    genv = {**rf.env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "first"]):
        subprocess.run(["git"] + args, cwd=work, env=genv, check=True, capture_output=True)
    before = tree_digest(str(work))
    r = rf.run("run", "--", "/bin/sh", "-c", "pwd; echo x > new.txt", cwd=work / "sub")
    assert (r.returncode, r.stdout) == (0, "/workspace/sub\n"), r.stderr
    [domain] = list((rf.data / "domains").iterdir())
    assert (domain / "agent-root" / "sub" / "new.txt").read_text() == "x\n"
    assert tree_digest(str(work)) == before
    assert not (work / "sub" / "new.txt").exists()
