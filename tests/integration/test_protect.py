# SPDX-License-Identifier: MIT
"""Direct mode: the sandbox can read the workspace's host-run files but can
neither change nor create them, and masked secrets read as empty (issue 13).
Each attack runs from inside the sandbox, as the agent would, and the host's
tree is compared byte for byte afterwards. The workspace reaches the sandbox
only through the workspace router (lazaret-gitrouter --workspace), which
leaves nothing behind in the host's tree."""
import json
import time
import shutil
import subprocess
import os

import pytest

from conftest import Rootful, tree_digest
from test_run import Domain, busybox_image, debian_image, git_as, podman  # noqa: F401

HOST_FILES = {
    "lazaret.toml": '[network]\ndefault_deny = ["192.0.2.0/24"]\n',  # narrowing: loads untrusted
    ".vscode/tasks.json": '{"tasks": []}\n',
    ".envrc": "export A=1\n",
    "pkg/.envrc": "export B=2\n",
    "pkg/code.txt": "code\n",
    "plain/file.txt": "plain\n",
    ".env": "SECRET-ENV\n",
    "config/.env.local": "SECRET-LOCAL\n",
    "certs/server.pem": "SECRET-PEM\n",
    ".ssh/id_ed25519": "SECRET-SSH\n",
    ".aws/credentials": "SECRET-AWS\n",
    "deploy/id_rsa": "SECRET-RSA\n",
    "store.p12": "SECRET-P12\n",
}


# gVisor keeps attributes in its own cache: a chmod or touch of a protected
# file may look done inside while the router refused it. What counts is the
# host's file, checked by mode and times.
ATTRS = "touch -d '2001-01-01 00:00' lazaret.toml; chmod 777 .envrc; touch -d '2001-01-01 00:00' .envrc\n"


def attrs(root):
    return {p: (os.lstat(os.path.join(root, p)).st_mode, os.lstat(os.path.join(root, p)).st_mtime_ns)
            for p in ("lazaret.toml", ".envrc")}


def populate(lz):
    for rel, text in HOST_FILES.items():
        lz.write(os.path.join("work", rel), text)
    os.symlink(".env", os.path.join(lz.work, "link-to-env"))
    secret = lz.write("outside-secret.txt", "SECRET-OUTSIDE\n")
    os.symlink(secret, os.path.join(lz.work, "link-outside"))
    for p in ("link-to-env", "link-outside"):
        os.lchown(os.path.join(lz.work, p), lz.user.pw_uid, lz.user.pw_gid)


# Each attack: (name, shell command that succeeds only if the attack worked).
ATTACKS = [
    ("change lazaret.toml", "echo x > lazaret.toml"),
    ("append to .vscode/tasks.json", "echo x >> .vscode/tasks.json"),
    ("change .envrc", "echo x > .envrc"),
    ("remove lazaret.toml", "rm -f lazaret.toml && test ! -e lazaret.toml"),
    ("create .claude/settings.json", "mkdir -p .claude && echo x > .claude/settings.json"),
    ("create .devcontainer/devcontainer.json",
     "mkdir -p .devcontainer && echo x > .devcontainer/devcontainer.json"),
    ("create a nested .envrc", "echo x > plain/.envrc"),
    ("create .pre-commit-config.yaml", "echo x > .pre-commit-config.yaml"),
    ("rename onto lazaret.toml", "echo x > evil1 && mv -f evil1 lazaret.toml"),
    ("rename to create .envrc deeper", "echo x > evil2 && mv evil2 plain/.envrc"),
    ("rename a directory onto .claude", "mkdir -p evil3 && echo x > evil3/settings.json && mv evil3 .claude"),
    ("rename .vscode away", "mv .vscode vscode-old"),
    ("hard link onto a protected name", "echo x > evil4 && ln evil4 plain/.envrc"),
    ("hard link to a protected file", "ln .envrc evil5 && echo x >> evil5"),
    ("symlink at a protected name", "ln -s /tmp/x .devcontainer"),
    ("symlink swap of lazaret.toml", "ln -sf evil6 lazaret.toml"),
    ("mv of a parent holding .envrc", "mv pkg pkg2"),
    ("a new repository", "mkdir -p sub && mkdir sub/.git"),
    ("a .git file", "echo 'gitdir: /tmp' > plain/.git"),
    ("git at the top", "mkdir .git"),
    ("change a masked secret", "echo x > .env"),
    ("remove a masked secret", "rm -f .env && test ! -e .env"),
]

SCRIPT = "cd /workspace\n" + ATTRS + "".join(
    f"if ( {cmd} ) 2>/dev/null; then echo 'WORKED {name}'; else echo 'refused {name}'; fi\n"
    for name, cmd in ATTACKS) + """
# The scratch files the attacks needed are the sandbox's own to remove.
rm -rf evil1 evil2 evil3 evil4 evil5 sub pkg2 vscode-old 2>/dev/null
cat lazaret.toml .envrc .vscode/tasks.json pkg/.envrc
echo "env=[$(cat .env)] local=[$(cat config/.env.local)] pem=[$(cat certs/server.pem)]"
echo "ssh=[$(ls -A .ssh)] sshkey=[$(cat .ssh/id_ed25519 2>&1)] aws=[$(cat .aws/credentials 2>&1)]"
echo "rsa=[$(cat deploy/id_rsa)] p12=[$(cat store.p12)] link=[$(cat link-to-env)] size=$(wc -c < .env)"
echo "outside=[$(cat link-outside 2>&1)]"
"""


def run_attacks(dom):
    r = dom.run("run", "--", "/bin/sh", "-c", SCRIPT, timeout=180)
    assert r.returncode == 0, r.stderr + dom.log()
    lines = r.stdout.splitlines()
    results = lines[:len(ATTACKS)]
    worked = [x for x in results if not x.startswith("refused ")]
    assert worked == [], r.stdout
    return lines[len(ATTACKS):]


def check_reads(rest):
    # Protected files are readable as they are.
    assert rest[:4] == ['[network]', 'default_deny = ["192.0.2.0/24"]', "export A=1", '{"tasks": []}'], rest
    text = "\n".join(rest)
    assert "SECRET" not in text, text
    assert "env=[] local=[] pem=[]" in rest, rest
    ssh = next(x for x in rest if x.startswith("ssh="))
    assert ssh.startswith("ssh=[] sshkey=[cat: "), ssh  # the masked directory is empty
    assert "rsa=[] p12=[] link=[] size=0" in rest, rest
    assert next(x for x in rest if x.startswith("outside=")).startswith("outside=[cat: "), rest


@pytest.fixture
def pdom(lz, busybox_image):
    populate(lz)
    d = Domain(lz, busybox_image, extra='[workspace]\nmask = ["*.p12"]\n')
    yield d
    try:
        d.assert_clean()
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)


def test_protected_and_masked_in_direct_mode(pdom, lz):
    before, times = tree_digest(lz.work), attrs(lz.work)
    rest = run_attacks(pdom)
    check_reads(rest)
    # Nothing changed on the host, and nothing was left behind.
    assert tree_digest(lz.work) == before
    assert attrs(lz.work) == times
    pdom.assert_clean()
    # Each refused write is on the Domain's record (source "paths"): the
    # name as the agent used it, the rule, the operation.
    from test_events import events
    got = {(e["data"]["rule"], e["data"]["path"], e["data"]["op"]) for e in events(pdom, "--source", "paths")}
    for want in [("protected", "lazaret.toml", "write"), ("protected", "lazaret.toml", "unlink"),
                 ("masked", ".env", "write"), ("protected", "pkg/.envrc", "rename-from")]:
        assert want in got, (want, sorted(got))
    assert any(r == "protected" and p.startswith(".claude") for r, p, _ in got), sorted(got)
    text = pdom.run("events", "--source", "paths").stdout
    assert "rule=protected" in text and "path=lazaret.toml" in text, text


def test_status_lists_the_masked_secrets(pdom, lz):
    p = pdom.popen("run", "--", "sleep", "30")
    try:
        st = None
        for _ in range(200):
            r = pdom.run("status", "--json")
            if r.returncode == 0 and json.loads(r.stdout).get("running"):
                st = json.loads(r.stdout)
                break
        assert st, pdom.log()
        guard = st["workspace_guard"]
        assert guard["mode"] == "direct"
        assert "*.p12" in guard["mask_patterns"] and ".env" in guard["mask_patterns"]
        assert ".vscode/" in guard["protect_patterns"]
        assert sorted(guard["masked"]) == [".aws", ".env", ".ssh", "certs/server.pem", "config/.env.local",
                                           "deploy/id_rsa", "store.p12"], guard
        r = pdom.run("status")
        assert "  masked      .aws, .env, .ssh, certs/server.pem, config/.env.local, deploy/id_rsa, store.p12" \
            in r.stdout, r.stdout
        # A secret the host makes after the launch is masked as well.
        lz.write("work/late.key", "SECRET-LATE\n")
        r = pdom.run("run", "--", "/bin/sh", "-c", "echo \"late=[$(cat /workspace/late.key)]\"")
        assert (r.returncode, r.stdout) == (0, "late=[]\n"), r.stderr
    finally:
        pdom.run("stop")
        p.wait(timeout=30)


def test_direct_mode_repository(lz, debian_image):
    """A repository in direct mode: git works on the working tree, but the
    agent can make no repository of its own and cannot reach .git's config."""
    git_as(lz, "init", "-q", "-b", "main")
    lz.write("work/tracked.txt", "committed\n")
    git_as(lz, "add", "tracked.txt")
    git_as(lz, "commit", "-q", "-m", "first")
    config_before = open(os.path.join(lz.work, ".git/config")).read()
    dom = Domain(lz, debian_image, extra='workspace_mode = "direct"\n')
    script = r"""
cd /workspace
git status --porcelain && echo STATUS-OK
git config core.fsmonitor 'touch /tmp/pwned' 2>/dev/null && echo WORKED-config || echo refused-config
mkdir -p sub && (git -C sub init -q 2>/dev/null && echo WORKED-init || echo refused-init)
echo new > new.txt && git add new.txt && echo ADD-OK
git rm -q --cached new.txt && rm new.txt && rmdir sub
"""
    r = dom.run("run", "--", "/bin/bash", "-c", script, timeout=180)
    assert r.returncode == 0, r.stderr + dom.log()
    assert r.stdout.splitlines() == ["STATUS-OK", "refused-config", "refused-init", "ADD-OK"], r.stdout
    assert open(os.path.join(lz.work, ".git/config")).read() == config_before
    assert not os.path.exists(os.path.join(lz.work, "sub"))
    # The index and objects changed (git add, git rm --cached), the tree did not.
    assert git_as(lz, "status", "--porcelain") == ""
    dom.assert_clean()


def test_rootful(lazaret_bin, tmp_path):
    """Run by root: the same router guards the tree, with root's own files."""
    rf = Rootful(lazaret_bin, tmp_path, top='[workspace]\nmask = ["*.p12"]\n')
    work = rf.work
    for rel, text in HOST_FILES.items():
        p = work / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (work / "link-to-env").symlink_to(".env")
    (tmp_path / "outside-secret.txt").write_text("SECRET-OUTSIDE\n")
    (work / "link-outside").symlink_to(tmp_path / "outside-secret.txt")
    before, times = tree_digest(work), attrs(work)
    r = rf.run("run", "--", "/bin/sh", "-c", SCRIPT)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [x for x in lines[:len(ATTACKS)] if not x.startswith("refused ")] == [], r.stdout
    check_reads(lines[len(ATTACKS):])
    assert tree_digest(work) == before
    assert attrs(work) == times


def test_lazarets_own_files_inside_the_workspace(lz, busybox_image):
    """Direct mode on a directory that holds Lazaret's own files (a home
    directory, say): a workspace holding socket_dir or the data root is
    refused (issue 14), and the --config file inside one cannot be
    changed."""
    os.chown(lz.base, lz.user.pw_uid, lz.user.pw_gid)
    d = Domain(lz, busybox_image)
    r = d.run("--workspace", lz.base, "run", "--", "true")
    assert r.returncode == 125
    assert r.stderr.splitlines() == [
        f"lazaret: error: the workspace {lz.base} contains socket_dir (the escalation sockets) {lz.base}/sock, "
        "which the sandbox must not reach; run lazaret in another directory, or move socket_dir"]
    ws = os.path.join(lz.base, "ws")
    cfg = lz.write("ws/cfg.toml", open(d.cfg).read())
    before = open(cfg).read()
    script = "cd /workspace; (echo x >> cfg.toml) 2>/dev/null && echo W1; (rm cfg.toml) 2>/dev/null && echo W2; head -1 cfg.toml"
    r = lz.run("--config", cfg, "--workspace", ws, "run", "--", "/bin/sh", "-c", script, env=d.env)
    assert r.returncode == 0, r.stderr + d.log()
    assert r.stdout == "[storage]\n", r.stdout
    assert open(cfg).read() == before
    d.assert_clean()


def test_branch_mode_warns_of_committed_secrets(lz, busybox_image):
    """Branch mode gives the agent a checkout of HEAD: an untracked secret
    never reaches it, and a committed one cannot be masked (git's objects
    hold it), so the launch names it."""
    git_as(lz, "init", "-q", "-b", "main")
    lz.write("work/.env", "SECRET-COMMITTED\n")
    lz.write("work/app.txt", "app\n")
    git_as(lz, "add", ".env", "app.txt")
    git_as(lz, "commit", "-q", "-m", "oops")
    lz.write("work/local.pem", "SECRET-UNTRACKED\n")
    d = Domain(lz, busybox_image)
    r = d.run("run", "--", "/bin/sh", "-c", "ls -A /workspace; cat /workspace/local.pem 2>/dev/null; true")
    assert r.returncode == 0, r.stderr
    assert "SECRET-UNTRACKED" not in r.stdout and "local.pem" not in r.stdout, r.stdout
    assert ".env is committed to the repository and matches a mask pattern: the agent can read it through git" \
        in r.stderr, r.stderr
    assert "app.txt" not in r.stderr
    d.assert_clean()


def test_many_files_through_the_router(lz, busybox_image):
    """gVisor's gofer holds many files open at once through the workspace
    router: thousands of new files must not run it out of descriptors."""
    d = Domain(lz, busybox_image)
    script = ("cd /workspace && mkdir many && i=0; while [ $i -lt 3000 ]; do echo $i > many/f$i || exit 1; "
              "i=$((i+1)); done; cat many/* | wc -l; rm -rf many")
    r = d.run("run", "--", "/bin/sh", "-c", script, timeout=300)
    assert (r.returncode, r.stdout.strip()) == (0, "3000"), r.stderr
    assert not os.path.exists(os.path.join(lz.work, "many"))
    d.assert_clean()


# Git takes a directory as a repository when it holds HEAD, objects and refs
# (or HEAD and commondir), whatever its name (issue 40): each way of making
# the last of them appear, from inside the sandbox.
LOOKALIKE_ATTACKS = [
    ("HEAD last", "mkdir -p g1/objects g1/refs && echo 'ref: refs/heads/main' > g1/HEAD"),
    ("refs last", "mkdir -p g2/objects && echo 'ref: refs/heads/main' > g2/HEAD && mkdir g2/refs"),
    ("objects last", "mkdir -p g3/refs && echo 'ref: refs/heads/main' > g3/HEAD && mkdir g3/objects"),
    ("refs as a symlink", "mkdir -p g4/objects && echo 'ref: refs/heads/main' > g4/HEAD && ln -s objects g4/refs"),
    ("HEAD as a symlink", "mkdir -p g5/objects g5/refs && ln -s refs/heads/main g5/HEAD"),
    ("a directory renamed to refs", "mkdir -p g6/objects r6 && echo 'ref: refs/heads/main' > g6/HEAD && mv r6 g6/refs"),
    ("a file renamed to HEAD", "mkdir -p g7/objects g7/refs && echo 'ref: refs/heads/main' > h7 && mv h7 g7/HEAD"),
    ("a hard link as HEAD", "mkdir -p g8/objects g8/refs && echo 'ref: refs/heads/main' > h8 && ln h8 g8/HEAD"),
    ("HEAD with commondir", "mkdir -p g9 && echo 'ref: refs/heads/main' > g9/HEAD && echo ../c9 > g9/commondir"),
    ("a prepared directory moved in", "mkdir -p /tmp/p/objects /tmp/p/refs && echo 'ref: refs/heads/main' > /tmp/p/HEAD"
     " && mv /tmp/p g10 && test -e g10/HEAD -a -e g10/refs"),
    ("the whole attack", "mkdir -p vendor/lib/objects vendor/lib/refs && printf '[core]\\n\\tbare = false\\n"
     "\\tworktree = WORK/vendor/lib\\n\\tfsmonitor = touch PWNED\\n' > vendor/lib/config"
     " && echo 'ref: refs/heads/main' > vendor/lib/HEAD"),
]


def test_git_directory_lookalike_direct_mode(lz, busybox_image):
    """A git directory not named .git (issue 40): in a workspace that is no
    repository the agent cannot make a directory that git would take as
    one, and a git status on the host runs nothing the agent wrote."""
    lz.write("work/plain/file.txt", "plain\n")
    pwned = os.path.join(lz.base, "pwned")
    d = Domain(lz, busybox_image)
    before = tree_digest(lz.work)
    script = "cd /workspace\n" + "".join(
        f"if ( {cmd.replace('PWNED', pwned).replace('WORK', lz.work)} ) 2>/dev/null; then echo 'WORKED {name}'; else echo 'refused {name}'; fi\n"
        for name, cmd in LOOKALIKE_ATTACKS) + "rm -rf g1 g2 g3 g4 g5 g6 g7 g8 g9 g10 r6 h7 h8 2>/dev/null; true\n"
    r = d.run("run", "--", "/bin/sh", "-c", script, timeout=180)
    assert r.returncode == 0, r.stderr + d.log()
    assert [x for x in r.stdout.splitlines() if not x.startswith("refused ")] == [], r.stdout
    # What the agent could make (config, objects/, refs/) is no repository:
    # the host's git, run there as a shell prompt would, runs nothing.
    lib = os.path.join(lz.work, "vendor/lib")
    assert os.path.isfile(os.path.join(lib, "config")) and not os.path.lexists(os.path.join(lib, "HEAD"))
    env = ["env", "-i", f"HOME={lz.home}", "PATH=/usr/bin:/bin", f"GIT_CEILING_DIRECTORIES={lz.base}"]
    g = subprocess.run(["runuser", "-u", lz.user.pw_name, "--"] + env + ["git", "status"], cwd=lib,
                       capture_output=True, text=True, timeout=60)
    assert g.returncode != 0 and "not a git repository" in g.stderr, (g.returncode, g.stdout, g.stderr)
    assert not os.path.exists(pwned)
    shutil.rmtree(os.path.join(lz.work, "vendor"))
    assert tree_digest(lz.work) == before
    from test_events import events
    got = {(e["data"]["rule"], e["data"]["path"]) for e in events(d, "--source", "paths")}
    assert ("git-directory", "g1/HEAD") in got and ("git-directory", "g2/refs") in got, sorted(got)
    # The report gives them a rule of their own.
    r = d.run("report", "--format", "sarif")
    assert r.returncode == 0, r.stderr
    [run] = json.loads(r.stdout)["runs"]
    ids = {res["ruleId"] for res in run["results"]}
    assert "paths.git-directory" in ids, ids
    d.assert_clean()


def test_git_directory_and_venv_read_only(lz, busybox_image):
    """A repository not named .git and a Python venv the host already has
    (issue 40): nothing beneath either can be changed, created, moved or
    removed, nor can a directory holding one move; no venv can be made."""
    git_as(lz, "init", "-q", "--bare", "lib.git")
    lz.write("work/proj/.venv/pyvenv.cfg", "home = /usr/bin\n")
    lz.write("work/proj/.venv/bin/python", "#!/bin/sh\necho host python\n", mode=0o755)
    lz.write("work/proj/.venv/lib/python3/site-packages/ok.pth", "\n")
    lz.write("work/proj/main.py", "print(1)\n")
    d = Domain(lz, busybox_image)
    before = tree_digest(lz.work)
    attacks = [
        ("git config", "echo '[core] fsmonitor = touch /tmp/x' >> lib.git/config"),
        ("git hook", "echo 'touch /tmp/x' > lib.git/hooks/post-checkout"),
        ("remove HEAD", "rm lib.git/HEAD"),
        ("move the repository", "mv lib.git lib2"),
        ("move refs away", "mv lib.git/refs lib.git/refs2"),
        ("venv interpreter", "echo 'touch /tmp/x' > proj/.venv/bin/python"),
        ("venv .pth", "echo 'import os' > proj/.venv/lib/python3/site-packages/evil.pth"),
        ("venv pyvenv.cfg", "rm proj/.venv/pyvenv.cfg"),
        ("move the venv", "mv proj/.venv proj/venv-old"),
        ("move what holds the venv", "mv proj proj2"),
        ("a new venv", "mkdir -p nv/bin && echo 'home = /usr/bin' > nv/pyvenv.cfg"),
    ]
    script = "cd /workspace\n" + "".join(
        f"if ( {cmd} ) 2>/dev/null; then echo 'WORKED {name}'; else echo 'refused {name}'; fi\n"
        for name, cmd in attacks) + "echo ok > proj/main.py && cat proj/.venv/bin/python && rm -rf nv\n"
    r = d.run("run", "--", "/bin/sh", "-c", script, timeout=180)
    lines = r.stdout.splitlines()
    assert [x for x in lines[:len(attacks)] if not x.startswith("refused ")] == [], r.stdout
    assert r.returncode == 0, r.stderr + d.log()
    # Beside them the tree is the agent's, and both read as they are.
    assert lines[len(attacks):] == ["#!/bin/sh", "echo host python"], r.stdout
    lz.write("work/proj/main.py", "print(1)\n")
    assert tree_digest(lz.work) == before
    d.assert_clean()


def test_preset_agent_configs(lz, busybox_image):
    """The configuration of the agents our presets install runs commands on
    the host when the person runs that agent there (MCP servers, hooks,
    plugins, lint and test commands; issue 40): in every direct workspace
    the sandbox can neither change it nor create it, at any depth."""
    existing = {
        ".mcp.json": '{"mcpServers": {}}\n',
        ".claude/settings.json": '{"permissions": {}}\n',
        ".aider.conf.yml": "auto-commits: false\n",
        "opencode.json": '{"$schema": "https://opencode.ai/config.json"}\n',
    }
    for rel, text in existing.items():
        lz.write(os.path.join("work", rel), text)
    lz.write("work/sub/readme.txt", "x\n")
    d = Domain(lz, busybox_image)
    before = tree_digest(lz.work)
    hook = '{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch /tmp/x"}]}]}}'
    attacks = [
        ("change .mcp.json", "echo '{\"mcpServers\": {\"x\": {\"command\": \"sh\"}}}' > .mcp.json"),
        ("a nested .mcp.json", "echo '{}' > sub/.mcp.json"),
        ("a Claude Code hook", f"echo '{hook}' > .claude/settings.json"),
        ("Claude Code local settings", f"echo '{hook}' > .claude/settings.local.json"),
        ("Gemini CLI settings", "mkdir -p .gemini && echo '{}' > .gemini/settings.json"),
        ("Codex config", "mkdir -p .codex && echo 'x = 1' > .codex/config.toml"),
        ("change opencode.json", "echo '{}' > opencode.json"),
        ("opencode.jsonc", "echo '{}' > sub/opencode.jsonc"),
        ("an opencode plugin", "mkdir -p .opencode/plugin && echo 'x' > .opencode/plugin/x.js"),
        ("the Aider lint command", "echo 'lint-cmd: touch /tmp/x' >> .aider.conf.yml"),
        ("a new .aider.conf.yml", "echo 'test-cmd: touch /tmp/x' > sub/.aider.conf.yml"),
        ("rename onto .mcp.json", "echo '{}' > m && mv -f m sub/.mcp.json"),
        ("rename .gemini into place", "mkdir -p gm && echo '{}' > gm/settings.json && mv gm .gemini"),
    ]
    script = "cd /workspace\n" + "".join(
        f"if ( {cmd} ) 2>/dev/null; then echo 'WORKED {name}'; else echo 'refused {name}'; fi\n"
        for name, cmd in attacks) + "rm -rf m gm .gemini .codex .opencode 2>/dev/null; cat .mcp.json\n"
    r = d.run("run", "--", "/bin/sh", "-c", script, timeout=180)
    lines = r.stdout.splitlines()
    assert [x for x in lines[:len(attacks)] if not x.startswith("refused ")] == [], r.stdout
    assert r.returncode == 0, r.stderr + d.log()
    assert lines[len(attacks):] == ['{"mcpServers": {}}'], r.stdout  # readable as it is
    assert tree_digest(lz.work) == before
    d.assert_clean()


def test_home_as_direct_workspace_refused(lz, busybox_image):
    """HOME, or a directory holding it, as a workspace the sandbox writes
    (issue 40): the agent would write .bashrc, .profile, .gitconfig,
    .config/ and .local/, which run on the host. Refused before anything
    starts, whether direct mode is asked for or the home is no repository;
    $HOME and the passwd entry's home both count. A project below is fine."""
    base = os.path.join(lz.base, "h")
    home = os.path.join(base, "home")
    for rel, text in {"h/home/.bashrc": "# host bashrc\n", "h/home/.gitconfig": "[user]\n\tname = me\n",
                      "h/home/.config/git/config": "", "h/home/proj/x.txt": "x\n"}.items():
        lz.write(rel, text)
    real = lz.user.pw_dir
    # $HOME is the test's own; Podman's store and configuration stay the
    # real home's.
    env = {"HOME": home, "XDG_CONFIG_HOME": os.path.join(real, ".config"),
           "XDG_DATA_HOME": os.path.join(real, ".local/share")}
    attack = ("cd /workspace; for f in .bashrc home/.bashrc; do [ -e $f ] && echo 'touch /tmp/pwned' >> $f; done; "
              "for f in .gitconfig home/.gitconfig; do [ -e $f ] && printf '[core]\\n\\tfsmonitor = x\\n' >> $f; done;"
              " mkdir -p .config/autostart && echo x > .config/autostart/x.desktop; true")
    before = tree_digest(base)
    fix = (": the agent could write your login files, ~/.gitconfig, ~/.config and ~/.local, which run on the host. "
           "Run lazaret in a project directory below it (in a git repository, workspace_mode = \"branch\", the "
           "default, gives the agent its own worktree)")
    for ws, what, mode in [(home, "is your home directory", "branch"), (home, "is your home directory", "direct"),
                           (base, f"holds your home directory {home}", "branch")]:
        dm = Domain(lz, busybox_image, extra=f'workspace_mode = "{mode}"\n')
        r = dm.run("--workspace", ws, "run", "--", "/bin/sh", "-c", attack, env=env)
        assert (r.returncode, r.stderr.splitlines()) == (125, [f"lazaret: error: the workspace {ws} {what}{fix}"]), \
            (ws, r.returncode, r.stderr)
    assert tree_digest(base) == before
    # The passwd entry's home counts whatever $HOME says: a workspace
    # holding it is refused too.
    d = Domain(lz, busybox_image)
    r = d.run("--workspace", os.path.dirname(real), "run", "--", "true")
    assert r.returncode == 125 and f"holds your home directory {real}:" in r.stderr, r.stderr
    # A project directory below the home is the agent's to write.
    r = d.run("--workspace", os.path.join(home, "proj"), "run", "--", "/bin/sh", "-c",
              "echo y > /workspace/y.txt", env=env)
    assert r.returncode == 0, r.stderr + d.log()
    assert open(os.path.join(home, "proj/y.txt")).read() == "y\n"
    d.assert_clean()


def test_host_changes_inside_while_the_kernel_keeps_names(pdom, lz):
    """Issue 44: the kernel keeps the tree's plain names for a second. Inside
    the sandbox (gVisor over the router), a plain file the host replaces
    shows within about that; a protected file it replaces and a masked one
    it rewrites larger, all looked at before, read at once: whole, and
    empty."""
    plain = "plain, and now much longer\n"
    script = f"""
cd /workspace
cat plain/file.txt .envrc .env >/dev/null; stat plain/file.txt .envrc .env >/dev/null
touch ready
i=0; while [ ! -e go ]; do sleep 0.05; i=$((i+1)); [ $i -lt 1200 ] || {{ echo no-go; exit 1; }}; done
echo "envrc=[$(cat .envrc)] env=[$(cat .env)] envsize=$(stat -c %s .env)"
i=0
while [ "$(stat -c %s plain/file.txt)" != {len(plain)} ] || [ "$(cat plain/file.txt)" != "{plain.strip()}" ]; do
  sleep 0.1; i=$((i+1)); [ $i -lt 100 ] || {{ echo plain-stale; exit 1; }}
done
echo "plain-after=$i"
rm ready go
"""
    p = pdom.popen("run", "--", "/bin/sh", "-c", script)
    try:
        ready = os.path.join(lz.work, "ready")
        for _ in range(1200):
            if os.path.exists(ready) or p.poll() is not None:
                break
            time.sleep(0.05)
        assert os.path.exists(ready), p.communicate(timeout=30)
        for rel, text in ((".envrc", "export A=a longer value\n"), ("plain/file.txt", plain)):
            lz.write(os.path.join("work", rel + ".new"), text)
            os.rename(os.path.join(lz.work, rel + ".new"), os.path.join(lz.work, rel))
        lz.write("work/.env", "SECRET-ENV-AND-MUCH-LONGER\n")
        lz.write("work/go", "")
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, out + err
    lines = out.decode().splitlines()
    assert lines[0] == "envrc=[export A=a longer value] env=[] envsize=0", out
    n = int(lines[1].partition("=")[2])
    assert n <= 20, f"the host's change was seen after {n} polls of 0.1 s"
