# SPDX-License-Identifier: MIT
"""The State Anchor (persistent_dirs) against the real stack: the kernel's
overlayfs in Podman's rootless namespace over `podman image mount`, its
upper directory on the Domain Root's disk, rootless runsc, as the
unprivileged test user. What the sandbox installs under a persistent
directory is there after a restart, for that profile and workspace only;
an image rebuilt underneath shows through without losing the user's
changes; a crash of the coordinator leaves no stale mount and loses
nothing; changes an older Lazaret kept (an ext4 image, a directory in
fuse-overlayfs's form) move in once."""
import io
import json
import os
import re
import signal
import stat
import subprocess
import tarfile
import tempfile
import time

import pytest

from conftest import Rootful, tool_dir
from test_run import Domain, pause_mounts, podman, wait_sessions
from test_run import busybox_image, debian_image  # noqa: F401  (fixtures)

PERSIST = 'persistent_dirs = ["/usr", "/etc"]\n'
DRIFT = "localhost/lazaret-test/drift:latest"


def mounted_images(user):
    """Ids of the images Podman has mounted (in its namespace)."""
    r = podman(user, "unshare", "podman", "image", "mount", "--format", "json")
    return {m["id"] for m in json.loads(r.stdout or "[]")}


def catalog(data):
    """The Storage Catalog's tables, read with LMDB's own mdb_dump (an
    independent reader): {"artifacts": [...], "leases": [...], ...}."""
    env = os.path.join(data, "catalog", "lmdb")
    out = {}
    for table in ("artifacts", "leases", "operations"):
        r = subprocess.run(["mdb_dump", "-p", "-s", table, env], capture_output=True, text=True, check=True)
        body = r.stdout.split("HEADER=END\n", 1)[1].split("DATA=END", 1)[0].splitlines()
        values = body[1::2]  # key line, value line, ...

        def unescape(v):
            return re.sub(r"\\(\\|[0-9a-fA-F]{2})", lambda m: "\\" if m.group(1) == "\\" else
                          chr(int(m.group(1), 16)), v[1:])
        out[table] = [json.loads(unescape(v)) for v in values]
    return out


def image_id(user, ref):
    return podman(user, "image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()


def cleanup(d, lz, image):
    try:
        d.assert_clean()
        assert image_id(lz.user, image) not in mounted_images(lz.user), "the image mount was not given back"
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)


@pytest.fixture
def sdom(lz, busybox_image):
    d = Domain(lz, busybox_image, extra=PERSIST)
    yield d
    cleanup(d, lz, busybox_image)


def layer(d, name):
    [domain] = d.domain_dirs()
    return os.path.join(domain, name)


DEBUGFS = "/usr/sbin/debugfs"


def debugfs(image, request, write=False):
    """e2fsprogs' debugfs on an ext4 image (an older Lazaret's layer): an
    independent reader of what it holds."""
    r = subprocess.run([DEBUGFS] + (["-w"] if write else []) + ["-R", request, image],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def upper(d, name, path=""):
    """The overlay's upper directory of persistent dir NAME ("usr") on the
    host, or a path in it."""
    return os.path.join(layer(d, f"{name}_layer"), "upper", path)


def in_layer(d, name, path):
    """The text of PATH in the changes of persistent dir NAME ("usr") (read
    on the host, as root: the independent reader), None when it has no such
    file, "<whiteout>" for the kernel overlay's whiteout (a 0:0 character
    device)."""
    p = upper(d, name, path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return None
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
        return "<whiteout>"
    with open(p) as f:
        return f.read()


def opaque(path):
    """Whether the kernel overlay (userxattr) takes the directory as opaque."""
    try:
        return os.getxattr(path, "user.overlay.opaque", follow_symlinks=False) == b"y"
    except OSError:
        return False


def test_changes_survive_a_restart(sdom):
    r = sdom.run("run", "--", "/bin/sh", "-c",
                 "mkdir -p /usr/local/bin && echo kept > /usr/local/bin/tool && chmod 755 /usr/local/bin/tool"
                 " && echo conf > /etc/agent.conf && rm /usr/bin/env && ls /usr/local/bin")
    assert (r.returncode, r.stdout) == (0, "tool\n"), r.stderr
    sdom.assert_clean()
    # On the host: the upper directory holds the change, the deleted file
    # of the image is the kernel overlay's whiteout; the mount point is
    # empty between runs, and no ext4 image is made.
    assert in_layer(sdom, "usr", "local/bin/tool") == "kept\n"
    assert in_layer(sdom, "etc", "agent.conf") == "conf\n"
    assert in_layer(sdom, "usr", "bin/env") == "<whiteout>"
    assert os.listdir(layer(sdom, "usr_merged")) == []  # only a mount point
    for gone in ("usr_layer.img", "usr_changes"):
        assert not os.path.exists(layer(sdom, gone))

    r = sdom.run("run", "--", "/bin/sh", "-c",
                 "cat /usr/local/bin/tool /etc/agent.conf; test -e /usr/bin/env && echo env-back || echo env-gone;"
                 " ls /bin/busybox")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "kept\nconf\nenv-gone\n/bin/busybox\n"
    # The overlays are State Anchor participants, the image mount a
    # PreparedLower one, and the log says where each layer came from.
    log = sdom.log()
    assert "persistent /usr: overlay" in log and "persistent /etc: overlay" in log


def test_deleted_image_directory_stays_deleted(sdom):
    """A directory of the image removed and made again is opaque (its old
    files stay hidden), a file of the image deleted stays deleted, across
    restarts: the kernel overlay's whiteouts and opaque directories on the
    host's disk."""
    r = sdom.run("run", "--", "/bin/sh", "-c",
                 "ls /usr/bin | grep -c . ; rm -rf /usr/bin && mkdir /usr/bin && echo new > /usr/bin/only"
                 " && rm /usr/sbin/chroot && ls /usr/bin")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[0]) > 10 and r.stdout.split()[1:] == ["only"], r.stdout
    sdom.assert_clean()
    assert opaque(upper(sdom, "usr", "bin")), "the new /usr/bin is not opaque in the upper directory"
    assert in_layer(sdom, "usr", "sbin/chroot") == "<whiteout>"
    r = sdom.run("run", "--", "/bin/sh", "-c", "ls /usr/bin; test -e /usr/sbin/chroot && echo back || echo gone")
    assert (r.returncode, r.stdout) == (0, "only\ngone\n"), r.stderr


def test_layers_reach_the_sandbox_without_gvisors_own_overlay(sdom):
    """Each persistent directory is gVisor's gofer mount of the layer (9p
    in the sandbox's /proc/mounts), so what is written there reaches the
    layer. Not gVisor's overlay: runsc lays one over a mount hinted as the
    sandbox's own (dev.gvisor.spec.mount.*.share=container, tried for issue
    44 to cache the layers), its upper layer a file that goes with the
    sandbox, and the writes never reach fuse-overlayfs."""
    r = sdom.run("run", "--", "/bin/cat", "/proc/mounts")
    assert r.returncode == 0, r.stderr
    types = {f[1]: f[2] for f in (line.split() for line in r.stdout.splitlines()) if len(f) >= 3}
    for d in ("/usr", "/etc"):
        assert types.get(d) == "9p", f"{d} is mounted as {types.get(d)!r} in the sandbox:\n{r.stdout}"


def test_other_workspace_and_profile_see_nothing(sdom, lz):
    r = sdom.run("run", "--", "/bin/sh", "-c", "echo mine > /usr/mine")
    assert r.returncode == 0, r.stderr
    # Another workspace, same profile: its own Domain, its own layers.
    other = os.path.join(lz.base, "other-ws")
    os.makedirs(other)
    os.chown(other, lz.user.pw_uid, lz.user.pw_gid)
    r = sdom.run("--workspace", other, "run", "--", "/bin/sh", "-c", "test -e /usr/mine && echo seen || echo absent")
    assert (r.returncode, r.stdout) == (0, "absent\n"), r.stderr
    # Another profile, same workspace.
    with open(sdom.cfg, "a") as f:
        f.write(f'[profiles.other]\nimage = "localhost/lazaret/busybox:latest"\nrunsc_network = "host"\n{PERSIST}')
    r = sdom.run("run", "other", "--", "/bin/sh", "-c", "test -e /usr/mine && echo seen || echo absent")
    assert (r.returncode, r.stdout) == (0, "absent\n"), r.stderr
    assert len(sdom.domain_dirs()) == 3
    r = sdom.run("run", "shell", "--", "/bin/cat", "/usr/mine")
    assert (r.returncode, r.stdout) == (0, "mine\n"), r.stderr


def test_runtime_files_never_come_from_the_overlay(sdom):
    r = sdom.run("run", "--", "/bin/sh", "-c", "cat /etc/hostname; echo; echo evil > /etc/hostname")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "shell"
    sdom.assert_clean()
    # Planted in the layer between runs: the sandbox still gets Podman's.
    for f in ("hostname", "hosts", "resolv.conf"):
        p = upper(sdom, "etc", f)
        with open(p, "w") as out:
            out.write("planted\n")
        os.chown(p, sdom.lz.user.pw_uid, sdom.lz.user.pw_gid)
        assert in_layer(sdom, "etc", f) == "planted\n"
    r = sdom.run("run", "--", "/bin/sh", "-c", "cat /etc/hostname; echo; grep -c planted /etc/hosts; "
                                               "cat /etc/resolv.conf 2>/dev/null | grep -c planted")
    assert r.stdout.splitlines()[:2] == ["shell", "0"], (r.stdout, r.stderr)
    assert r.stdout.splitlines()[2:] in ([], ["0"]), r.stdout
    sdom.assert_clean()
    for f in ("hostname", "hosts", "resolv.conf"):
        assert in_layer(sdom, "etc", f) is None, f"{f} is kept in the overlay"


def build_drift(user, version, extra_file=None):
    """localhost/lazaret-test/drift:latest = busybox + /usr/version (and
    another file), made with podman export, a tar edit, and podman import."""
    with tempfile.TemporaryDirectory() as t:
        os.chmod(t, 0o777)
        base = os.path.join(t, "base.tar")
        podman(user, "rm", "-f", "lazaret-drift-build", check=False)
        podman(user, "create", "--name", "lazaret-drift-build", "localhost/lazaret/busybox:latest", "true")
        try:
            podman(user, "export", "-o", base, "lazaret-drift-build")
        finally:
            podman(user, "rm", "-f", "lazaret-drift-build", check=False)
        files = {"usr/version": version}
        if extra_file:
            files[f"usr/{extra_file}"] = "new in the image\n"
        with tarfile.open(base, "a") as tf:
            for name, text in files.items():
                data = text.encode()
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
                tf.addfile(info, io.BytesIO(data))
        os.chmod(base, 0o644)
        podman(user, "import", "-q", base, DRIFT)
    return image_id(user, DRIFT)


def test_image_drift_keeps_the_changes(lz, busybox_image):
    old = build_drift(lz.user, "v1\n")
    d = Domain(lz, DRIFT, extra=PERSIST)
    new = None
    try:
        r = d.run("run", "--", "/bin/sh", "-c", "cat /usr/version; echo mine > /usr/mine; echo edited > /usr/edited")
        assert (r.returncode, r.stdout) == (0, "v1\n"), r.stderr
        st = d.run("status", "--json")
        [usr] = [x for x in json.loads(st.stdout)["persistent"] if x["dir"] == "/usr"]
        assert usr["image_id"] == old and usr["previous_image_id"] is None
        d.assert_clean()

        new = build_drift(lz.user, "v2\n", extra_file="edited")
        assert new != old
        r = d.run("run", "--", "/bin/sh", "-c", "cat /usr/version /usr/mine /usr/edited")
        # The new image's files show; the user's own change wins over the
        # image's new copy of the same file; the user's new file stays.
        assert (r.returncode, r.stdout) == (0, "v2\nmine\nedited\n"), r.stderr
        assert "the image under /usr changed" in d.log()
        st = d.run("status", "--json")
        [usr] = [x for x in json.loads(st.stdout)["persistent"] if x["dir"] == "/usr"]
        assert usr["image_id"] == new and usr["previous_image_id"] == old
        text = d.run("status").stdout
        assert f"/usr  image {new[:12]}" in text, text
        assert f"was {old[:12]}" in text, text
        d.assert_clean()
        mounted = mounted_images(lz.user)
        assert old not in mounted and new not in mounted
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)
        podman(lz.user, "rmi", "-f", DRIFT, check=False)
        for i in (old, new):
            if i:
                podman(lz.user, "rmi", "-f", i, check=False)


def alive(pid):
    """A process that runs (a zombie waiting for its new parent is gone)."""
    try:
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_daemons_hold_none_of_the_coordinators_descriptors(sdom, lz):
    """The FUSE daemon (git router) parses what the sandbox drives, and the work files' measure walks what it
    writes: none of them may hold the Domain Store (a compromised daemon
    could rewrite it and its audit trail) or the coordinator's event
    loop, signal or process descriptors."""
    a = sdom.popen("run", "--", "/bin/sleep", "1000")
    try:
        wait_sessions(sdom, 1)
        [domain] = sdom.domain_dirs()
        out = []
        for pattern in (sdom.data, "__diskwatch .*" + lz.work):
            out += subprocess.run(["pgrep", "-u", lz.user.pw_name, "-a", "-f", pattern],
                                  capture_output=True, text=True).stdout.splitlines()
        daemons = {int(line.split()[0]): line for line in out
                   if any(k in line for k in ("lazaret-gitrouter", "__diskwatch"))}
        kinds = " ".join(daemons.values())
        assert "fuse2fs" not in kinds and "fuse-overlayfs" not in kinds, kinds
        for k in ("lazaret-gitrouter", "__diskwatch"):
            assert k in kinds, out
        for pid, line in daemons.items():
            fds = {}
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    fds[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    pass
            bad = {fd: t for fd, t in fds.items() if fd > 2 and (
                t.startswith(os.path.join(domain, "store")) or t.endswith("store.lock")
                or t in ("anon_inode:[eventpoll]", "anon_inode:[signalfd]", "anon_inode:[pidfd]")
                or t.startswith("/memfd:"))}
            assert bad == {}, (line, bad)
    finally:
        a.kill()
        a.wait()
        sdom.run("stop")


def test_coordinator_killed_then_recovered(sdom, lz, busybox_image):
    a = sdom.popen("run", "--", "/bin/sh", "-c", "echo before-crash > /usr/crash; sync; sleep 1000")
    wait_sessions(sdom, 1)
    time.sleep(0.5)
    [pid] = sdom.coordinator_pids()
    [domain] = sdom.domain_dirs()
    assert len([m for m in pause_mounts(lz.user, domain) if " - overlay " in m]) == 2
    os.kill(pid, signal.SIGKILL)
    a.communicate(timeout=30)
    assert a.returncode == 125
    # Its watchdog removes what it held (the overlay mounts, the image
    # mount's lease) within seconds, from the store's record.
    deadline = time.time() + 10
    while time.time() < deadline and (pause_mounts(lz.user, domain)
                                      or image_id(lz.user, busybox_image) in mounted_images(lz.user)):
        time.sleep(0.2)
    assert pause_mounts(lz.user, domain) == []
    assert image_id(lz.user, busybox_image) not in mounted_images(lz.user)
    log = sdom.log()
    assert "recovering participant" in log and "(StateAnchor, Committed)" in log
    assert "(PreparedLower, Committed)" in log
    # The changes stay: the next run sees them.
    r = sdom.run("run", "--", "/bin/cat", "/usr/crash")
    assert (r.returncode, r.stdout) == (0, "before-crash\n"), r.stderr
    # cleanup() checks that the recovered image mount was given back too.


def test_two_domains_share_the_image_mount(sdom, lz, busybox_image):
    """The Storage Catalog: one image mount for two Domains, a lease each;
    the first to stop leaves the other's lowerdir in place, the last one
    gives the mount back."""
    img = image_id(lz.user, busybox_image)
    a = sdom.popen("run", "--", "/bin/sleep", "1000")
    wait_sessions(sdom, 1)
    [first] = [os.path.basename(d) for d in sdom.domain_dirs()]
    other = os.path.join(lz.base, "ws2")
    os.makedirs(other)
    os.chown(other, lz.user.pw_uid, lz.user.pw_gid)
    b = sdom.popen("--workspace", other, "run", "--", "/bin/sleep", "1000")
    deadline = time.time() + 30
    while time.time() < deadline:
        r = sdom.run("--workspace", other, "status", "--json")
        if r.returncode == 0 and len(json.loads(r.stdout).get("sessions", [])) == 1:
            break
        time.sleep(0.2)
    [second] = [os.path.basename(d) for d in sdom.domain_dirs() if os.path.basename(d) != first]
    cat = catalog(sdom.data)
    assert [(x["prepared_artifact_id"], x["state"]) for x in cat["artifacts"]] == [(img, "Available")]
    assert sorted(x["domain_id"] for x in cat["leases"]) == sorted([first, second])
    assert cat["operations"] == []

    # The second stops: its lease goes, the mount stays for the first.
    assert sdom.run("--workspace", other, "stop").returncode == 0
    b.communicate(timeout=30)
    deadline = time.time() + 30
    while len(catalog(sdom.data)["leases"]) != 1 and time.time() < deadline:
        time.sleep(0.2)
    cat = catalog(sdom.data)
    assert [x["domain_id"] for x in cat["leases"]] == [first]
    assert len(cat["artifacts"]) == 1 and img in mounted_images(lz.user)
    r = sdom.run("run", "--", "/bin/sh", "-c", "cat /usr/bin/env >/dev/null && ls /bin/busybox")
    assert (r.returncode, r.stdout) == (0, "/bin/busybox\n"), r.stderr

    # The last one gives the image mount back.
    assert sdom.run("stop").returncode == 0
    a.communicate(timeout=30)
    sdom.assert_clean()
    assert catalog(sdom.data) == {"artifacts": [], "leases": [], "operations": []}
    assert img not in mounted_images(lz.user)


def test_reset(sdom):
    r = sdom.run("run", "--", "/bin/sh", "-c", "echo a > /usr/a; echo b > /etc/b")
    assert r.returncode == 0, r.stderr
    # Refused while the sandbox runs.
    p = sdom.popen("run", "--", "/bin/sleep", "1000")
    wait_sessions(sdom, 1)
    r = sdom.run("reset", "--yes")
    assert r.returncode == 125
    assert "the sandbox of shell is running; stop it first ('lazaret stop shell')" in r.stderr
    assert sdom.run("stop").returncode == 0
    p.communicate(timeout=30)
    sdom.assert_clean()
    # Without a terminal and without --yes: no confirmation, nothing removed.
    r = sdom.run("reset", input="y\n")
    assert r.returncode == 64
    assert "needs confirmation" in r.stderr and "--yes" in r.stderr
    assert in_layer(sdom, "usr", "a") == "a\n"
    # A directory that is not persistent is an error naming the ones that are.
    r = sdom.run("reset", "--dir", "/var", "--yes")
    assert r.returncode == 64
    assert "/var is not one of shell's persistent_dirs (/usr, /etc)" in r.stderr
    r = sdom.run("reset", "--dir", "/etc", "--yes")
    assert r.returncode == 0, r.stderr
    assert "discarded the changes to /etc" in r.stdout
    assert not os.path.exists(layer(sdom, "etc_layer"))
    r = sdom.run("run", "--", "/bin/sh", "-c", "cat /usr/a; test -e /etc/b && echo b || echo no-b")
    assert (r.returncode, r.stdout) == (0, "a\nno-b\n"), r.stderr
    r = sdom.run("reset", "--yes")
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(layer(sdom, "usr_layer"))
    r = sdom.run("run", "--", "/bin/sh", "-c", "test -e /usr/a && echo a || echo no-a")
    assert (r.returncode, r.stdout) == (0, "no-a\n"), r.stderr


def test_reset_never_removes_through_a_mount_below_a_layer(sdom, lz):
    """A mount left below a layer in Podman's namespace (a crash's, such as
    a person's directory bound there, of the same file system: rm's
    --one-file-system would not see it): reset removes nothing, through it
    or beside it; it fails naming it and the fix, and the directory behind
    it is whole. Detached, reset works."""
    r = sdom.run("run", "--", "/bin/sh", "-c", "mkdir -p /usr/x && echo a > /usr/a")
    assert r.returncode == 0, r.stderr
    keep = os.path.join(lz.base, "keep")
    os.makedirs(keep)
    with open(os.path.join(keep, "mine"), "w") as f:
        f.write("mine\n")
    for p in (keep, os.path.join(keep, "mine")):
        os.chown(p, lz.user.pw_uid, lz.user.pw_gid)
    target = upper(sdom, "usr", "x")
    assert os.path.isdir(target)
    podman(lz.user, "unshare", "mount", "--bind", keep, target)
    try:
        r = sdom.run("reset", "--dir", "/usr", "--yes")
        assert r.returncode == 125, r.stdout + r.stderr
        errs = [line for line in r.stderr.splitlines() if line.strip()]
        assert len(errs) == 1 and f"{target.rstrip('/')} is still mounted" in errs[0] \
            and "podman unshare umount" in errs[0], r.stderr
        assert in_layer(sdom, "usr", "a") == "a\n"
        assert open(os.path.join(keep, "mine")).read() == "mine\n"
    finally:
        podman(lz.user, "unshare", "umount", target, check=False)
    assert os.listdir(keep) == ["mine"]
    r = sdom.run("reset", "--dir", "/usr", "--yes")
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(layer(sdom, "usr_layer"))


def test_bad_domain_root_file_system(lz, busybox_image):
    """A Domain Root on FAT (fusefat: no symlinks, no modes) cannot hold
    overlay layers: one clear error, nothing started or made."""
    fat = os.path.join(lz.base, "fat.img")
    mnt = os.path.join(lz.base, "fat")
    os.makedirs(mnt)
    subprocess.run(["truncate", "-s", "64M", fat], check=True)
    subprocess.run(["mkfs.vfat", fat], check=True, capture_output=True)
    subprocess.run(["fusefat", "-o", f"rw+,uid={lz.user.pw_uid},gid={lz.user.pw_gid},allow_other", fat, mnt],
                   check=True, capture_output=True)
    try:
        d = Domain(lz, busybox_image, extra=PERSIST)
        text = open(d.cfg).read().replace(f'data_root = "{d.data}"', f'data_root = "{mnt}/data"')
        lz.write("cfg.toml", text)
        r = d.run("run", "--", "/bin/true")
        assert r.returncode == 125
        assert (f"the Domain Root {mnt}/data/domains/" in r.stderr and
                "is on a fuse file system, which cannot hold the overlay layers of persistent_dirs" in r.stderr and
                "set [storage] data_root to a directory on ext4, xfs, btrfs or tmpfs" in r.stderr), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert os.listdir(mnt) == []
        assert d.container_names() == []
    finally:
        subprocess.run(["fusermount", "-u", mnt], check=False)
        subprocess.run(["umount", mnt], check=False, capture_output=True)


def test_missing_image_leaves_nothing(lz, busybox_image):
    d = Domain(lz, "localhost/lazaret/no-such-image:1", extra=PERSIST)
    r = d.run("run", "--", "/bin/true")
    assert r.returncode == 125
    assert "cannot start the sandbox from localhost/lazaret/no-such-image:1" in r.stderr, r.stderr
    d.assert_clean()
    [domain] = d.domain_dirs()
    assert not any(n.startswith(("usr_", "etc_")) for n in os.listdir(domain)), os.listdir(domain)
    cat = catalog(d.data) if os.path.isdir(os.path.join(d.data, "catalog")) else None
    assert cat in (None, {"artifacts": [], "leases": [], "operations": []})


def older_domain(d, lz, tree):
    """Turn d's Domain (run once) into one an older Lazaret left: /usr's
    changes in <name>_layer.img, an ext4 image made from tree (owners,
    modes, attributes and device nodes kept), as fuse2fs under
    fuse-overlayfs kept them in changes/ (issue 44's move)."""
    r = d.run("run", "--", "/bin/true")
    assert r.returncode == 0, r.stderr
    d.assert_clean()
    subprocess.run(["rm", "-rf", "--", layer(d, "usr_layer")], check=True)
    os.makedirs(layer(d, "usr_layer"))  # fuse2fs's mount point
    os.chown(layer(d, "usr_layer"), lz.user.pw_uid, lz.user.pw_gid)
    img = layer(d, "usr_layer.img")
    subprocess.run(["truncate", "-s", "64M", img], check=True)
    subprocess.run(["/usr/sbin/mke2fs", "-q", "-F", "-t", "ext4", "-O", "^has_journal", "-m", "0", "-E",
                    "root_owner=0:0", "-L", "lazaret-layer", "-d", tree, img], check=True, capture_output=True)
    os.chown(img, lz.user.pw_uid, lz.user.pw_gid)
    os.chmod(img, 0o600)
    return img


def old_changes_tree(root):
    """What fuse-overlayfs wrote into an older layer's changes/: a file, a
    file of another user, a deleted file of the image as a 0:0 whiteout and
    one as a .wh. file, a directory of the image made again (opaque by
    fuse-overlayfs's attribute), one opaque by .wh..wh..opq."""
    c = os.path.join(root, "changes")
    for sub in ("local", "sbin", "bin", "lib/again"):
        os.makedirs(os.path.join(c, sub))
    with open(os.path.join(c, "local/old"), "w") as f:
        f.write("from the ext4 image\n")
    with open(os.path.join(c, "local/theirs"), "w") as f:
        f.write("user 42\n")
    os.chown(os.path.join(c, "local/theirs"), 42, 42)
    os.chmod(os.path.join(c, "local/theirs"), 0o600)
    os.mknod(os.path.join(c, "sbin/chroot"), 0o600 | stat.S_IFCHR, os.makedev(0, 0))
    open(os.path.join(c, "sbin/.wh.crond"), "w").close()
    with open(os.path.join(c, "bin/mine"), "w") as f:
        f.write("mine\n")
    os.setxattr(os.path.join(c, "bin"), "user.fuseoverlayfs.opaque", b"y")
    open(os.path.join(c, "lib/again/.wh..wh..opq"), "w").close()
    with open(os.path.join(c, "lib/again/new"), "w") as f:
        f.write("new\n")
    os.makedirs(os.path.join(root, "work"))
    return root


def test_ext4_layer_of_an_older_lazaret_moves_in(sdom, lz):
    """A Domain whose /usr changes an older Lazaret kept in an ext4 image
    (fuse2fs under fuse-overlayfs): the first run moves them into the
    kernel overlay's upper directory once (owners, modes, the image's
    deleted files and remade directories kept), removes the image, and the
    second run needs no move. Fails on the code before the move (the
    changes stay in the image, unseen)."""
    with tempfile.TemporaryDirectory() as t:
        img = older_domain(sdom, lz, old_changes_tree(t))
    script = ("cat /usr/local/old; stat -c '%u %a' /usr/local/theirs; ls /usr/bin; "
              "for f in chroot crond brctl; do test -e /usr/sbin/$f && echo $f || echo no-$f; done; ls /usr/lib/again")
    r = sdom.run("run", "--", "/bin/sh", "-c", script)
    want = "from the ext4 image\n42 600\nmine\nno-chroot\nno-crond\nbrctl\nnew\n"
    assert (r.returncode, r.stdout) == (0, want), (r.stdout, r.stderr, sdom.log()[-2000:])
    sdom.assert_clean()
    assert not os.path.exists(img)
    assert "moving the changes to /usr from " + img in sdom.log()
    assert in_layer(sdom, "usr", "local/old") == "from the ext4 image\n"
    assert in_layer(sdom, "usr", "sbin/crond") == "<whiteout>"
    assert not os.path.lexists(upper(sdom, "usr", "sbin/.wh.crond"))
    assert opaque(upper(sdom, "usr", "bin")) and opaque(upper(sdom, "usr", "lib/again"))
    r = sdom.run("run", "--", "/bin/sh", "-c", script)
    assert (r.returncode, r.stdout) == (0, want), r.stderr
    assert sdom.log().count("moving the changes to /usr") == 1


def test_older_ext4_layer_without_fuse2fs_is_one_clear_error(lz, busybox_image):
    """The move out of an older ext4 image needs fuse2fs: without it one
    clear line naming the package, nothing started, the image kept. A
    Domain without such an image needs neither fuse2fs nor
    fuse-overlayfs."""
    tools = tool_dir(lz, omit={"fuse2fs", "fuse-overlayfs"})
    d = Domain(lz, busybox_image, extra=PERSIST)
    try:
        r = d.run("run", "--", "/bin/sh", "-c", "echo ok > /usr/ok; cat /usr/ok", env={"PATH": tools})
        assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
        with tempfile.TemporaryDirectory() as t:
            img = older_domain(d, lz, old_changes_tree(t))
        r = d.run("run", "--", "/bin/true", env={"PATH": tools})
        assert r.returncode == 125, r.stderr
        assert ("the changes to /usr are in " + img in r.stderr and
                "sudo apt-get install fuse2fs" in r.stderr), r.stderr + d.log()[-3000:]
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        d.assert_clean()
        assert os.path.exists(img)
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)


def test_debian_package_persists(lz, debian_image):
    """dpkg -i of a package made on the host, stop, start: installed."""
    with tempfile.TemporaryDirectory() as t:
        root = os.path.join(t, "pkg")
        os.makedirs(os.path.join(root, "DEBIAN"))
        os.makedirs(os.path.join(root, "usr/bin"))
        with open(os.path.join(root, "DEBIAN/control"), "w") as f:
            f.write("Package: lazaret-hello\nVersion: 1.0\nArchitecture: all\n"
                    "Maintainer: Lazaret tests <tests@localhost>\nDescription: a test package\n")
        with open(os.path.join(root, "usr/bin/lazaret-hello"), "w") as f:
            f.write("#!/bin/sh\necho hello from a package\n")
        os.chmod(os.path.join(root, "usr/bin/lazaret-hello"), 0o755)
        subprocess.run(["dpkg-deb", "--root-owner-group", "-b", root, os.path.join(lz.work, "hello.deb")],
                       check=True, capture_output=True)
    os.chmod(os.path.join(lz.work, "hello.deb"), 0o644)
    d = Domain(lz, debian_image, extra='persistent_dirs = ["/usr", "/var", "/etc"]\n')
    try:
        r = d.run("run", "--", "/bin/sh", "-c", "dpkg -i /workspace/hello.deb >/dev/null && lazaret-hello")
        assert (r.returncode, r.stdout) == (0, "hello from a package\n"), r.stderr
        d.assert_clean()
        r = d.run("run", "--", "/bin/sh", "-c", "dpkg -s lazaret-hello | grep Status; lazaret-hello")
        assert (r.returncode, r.stdout) == (0, "Status: install ok installed\nhello from a package\n"), r.stderr
        d.assert_clean()
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)


def test_another_user_keeps_its_own_files(lz, debian_image):  # noqa: F811
    """In a persistent directory a user other than root creates files in a
    directory it owns (apt fetches as _apt: it failed with EOPNOTSUPP, the
    kernel asking fuse2fs for an ACL it cannot give), a third user is still
    refused by the mode bits, and the owner stays across a restart."""
    d = Domain(lz, debian_image, extra='persistent_dirs = ["/var"]\n')
    try:
        r = d.run("run", "--", "/bin/sh", "-c",
                  "mkdir /var/tmp/u && chown 42:42 /var/tmp/u && chmod 755 /var/tmp/u && "
                  "setpriv --reuid=42 --regid=42 --clear-groups sh -c 'echo mine > /var/tmp/u/f' && "
                  "ls /var/tmp/u && "
                  "if setpriv --reuid=43 --regid=43 --clear-groups sh -c 'echo x > /var/tmp/u/g' 2>/dev/null; "
                  "then echo other-wrote; else echo other-refused; fi")
        assert (r.returncode, r.stdout) == (0, "f\nother-refused\n"), r.stdout + r.stderr
        d.assert_clean()
        r = d.run("run", "--", "/bin/sh", "-c", "stat -c '%u %g' /var/tmp/u/f && cat /var/tmp/u/f")
        assert (r.returncode, r.stdout) == (0, "42 42\nmine\n"), r.stdout + r.stderr
        d.assert_clean()
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)


def test_rootful(lazaret_bin, tmp_path):
    """Lazaret run by root: rootful Podman's image mount and fuse-overlayfs in
    the host's namespace; the same persistence, nothing left mounted."""
    rf = Rootful(lazaret_bin, tmp_path, profile=PERSIST)
    data, env, lz = rf.data, rf.env, rf.run
    r = lz("run", "--", "/bin/sh", "-c", "echo rootful > /usr/kept; rm /usr/bin/env")
    assert r.returncode == 0, r.stderr
    r = lz("run", "--", "/bin/sh", "-c", "cat /usr/kept; test -e /usr/bin/env || echo env-gone")
    assert (r.returncode, r.stdout) == (0, "rootful\nenv-gone\n"), r.stderr
    [domain] = list((data / "domains").iterdir())
    assert (domain / "usr_layer" / "upper" / "kept").read_text() == "rootful\n"
    deadline = time.time() + 15
    while time.time() < deadline and (any(str(data) in ln for ln in open("/proc/self/mountinfo")) or
                                      catalog(str(data))["artifacts"]):
        time.sleep(0.2)
    assert not any(str(data) in ln for ln in open("/proc/self/mountinfo"))
    assert catalog(str(data)) == {"artifacts": [], "leases": [], "operations": []}
    img = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", "localhost/lazaret/busybox:latest"],
                         capture_output=True, text=True, env=env).stdout.strip()
    r = subprocess.run(["podman", "image", "mount", "--format", "json"], capture_output=True, text=True, env=env)
    assert img not in {m["id"] for m in json.loads(r.stdout or "[]")}


def set_disk_limit(d, mib):
    with open(d.cfg) as f:
        text = f.read()
    text = re.sub(r"disk_limit = \d+", f"disk_limit = {mib}", text)
    with open(d.cfg, "w") as f:
        f.write(text)


def test_disk_limit_bounds_the_layers(lz, busybox_image):
    """The persistent directories' changes together hold at most
    disk_limit MiB (issue 44: the kernel's overlay has no size of its own;
    the coordinator measures the upper directories): a filler past it
    stops the sandbox with the reason; the next start is refused, naming
    the fix, and leaves nothing running; a raised limit starts again; the
    store stays writable. What holds instead of ENOSPC inside."""
    d = Domain(lz, busybox_image, extra='persistent_dirs = ["/usr"]\ndisk_limit = 64\n')
    try:
        r = d.run("run", "--", "/bin/sh", "-c", "echo small > /usr/small && echo ok")
        assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
        d.assert_clean()
        r = d.run("run", "--", "/bin/sh", "-c",
                  "dd if=/dev/zero of=/usr/fill bs=1M count=100 2>&1; echo dd=$?; sync; sleep 30", timeout=180)
        assert r.returncode == 125, (r.stdout, r.stderr)
        assert "the persistent directories' changes hold" in r.stderr and "past disk_limit = 64 MiB" in r.stderr, \
            r.stderr
        d.assert_clean()
        # What dd wrote before the stop (at most its 100 MiB, a block map
        # on top) is on the host's disk: no ENOSPC inside any more.
        held = os.stat(upper(d, "usr", "fill")).st_blocks * 512
        assert 60 * 1024 * 1024 < held <= 101 * 1024 * 1024, held
        r = d.run("status", "--json")
        assert r.returncode == 0, r.stderr

        # Over the limit at the start: refused, nothing half-made, nothing
        # lost.
        r = d.run("run", "--", "/bin/true")
        assert r.returncode == 125
        assert "more than disk_limit 64 MiB allows; raise disk_limit, or discard them with 'lazaret reset" \
            in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        d.assert_clean()
        assert in_layer(d, "usr", "small") == "small\n"

        # Raised: 100 MiB fit.
        set_disk_limit(d, 256)
        r = d.run("run", "--", "/bin/sh", "-c", "rm /usr/fill; dd if=/dev/zero of=/usr/fill bs=1M count=100 2>&1"
                                                " && sleep 5 && echo ok", timeout=180)
        assert (r.returncode, r.stdout.splitlines()[-1:]) == (0, ["ok"]), (r.stdout, r.stderr)
        d.assert_clean()
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)


def test_changes_from_before_the_images_move_in(sdom, lz):
    """A Domain whose changes lived in <name>_changes on the host (before
    disk_limit's images, fuse-overlayfs's form): the first run moves them
    into the upper directory, owners and whiteouts kept, and removes the
    old directories."""
    r = sdom.run("run", "--", "/bin/true")
    assert r.returncode == 0, r.stderr
    sdom.assert_clean()
    subprocess.run(["rm", "-rf", "--", layer(sdom, "usr_layer")], check=True)
    old = layer(sdom, "usr_changes")
    os.makedirs(os.path.join(old, "local"))
    with open(os.path.join(old, "local/old"), "w") as f:
        f.write("from before\n")
    os.makedirs(os.path.join(old, "bin"))
    open(os.path.join(old, "bin/.wh.env"), "w").close()
    os.makedirs(layer(sdom, "usr_work"))
    for dirpath, dirs, files in os.walk(old):
        for n in dirs + files:
            os.chown(os.path.join(dirpath, n), lz.user.pw_uid, lz.user.pw_gid)
    os.chown(old, lz.user.pw_uid, lz.user.pw_gid)
    os.chown(layer(sdom, "usr_work"), lz.user.pw_uid, lz.user.pw_gid)
    r = sdom.run("run", "--", "/bin/sh", "-c",
                 "cat /usr/local/old; stat -c %u /usr/local/old; test -e /usr/bin/env && echo env || echo no-env")
    assert (r.returncode, r.stdout) == (0, "from before\n0\nno-env\n"), r.stderr
    sdom.assert_clean()
    assert not os.path.exists(old) and not os.path.exists(layer(sdom, "usr_work"))
    assert in_layer(sdom, "usr", "local/old") == "from before\n"
    assert in_layer(sdom, "usr", "bin/env") == "<whiteout>"
    assert "moving the changes to /usr" in sdom.log()


# ---- both backends (issue 45) ------------------------------------------------
# The native backend keeps persistent_dirs too: the kernel's overlayfs in
# the sandbox's own user and mount namespace over the host's directory
# where the sandbox sees one (/usr/local), the layer's directory bound
# alone elsewhere (/opt); each in <name>_native/ under the Domain Root,
# never mixed with gVisor's <name>_layer/.
NATIVE_IMAGE = "localhost/lazaret/unused:1"  # named, never used
PERSIST_BOTH = 'persistent_dirs = ["/usr/local", "/opt"]\n'


def persist_domain(lz, request, backend, extra=""):
    if backend == "gvisor":
        return Domain(lz, request.getfixturevalue("busybox_image"), extra=PERSIST_BOTH + extra)
    # No memory cgroup is assumed here: the native backend then takes no
    # memory limit (test_native_run's native()).
    return Domain(lz, NATIVE_IMAGE, extra='backend = "native"\nmemory_limit = 0\n' + PERSIST_BOTH + extra)


def kept_file(d, backend, name, path):
    """The text of PATH in the layer of persistent dir NAME on the host, or
    None: in its upper directory (gVisor's <name>_layer/, the native
    backend's <name>_native/)."""
    p = os.path.join(layer(d, f"{name}_layer" if backend == "gvisor" else f"{name}_native"), "upper", path)
    return open(p).read() if os.path.exists(p) else None


@pytest.mark.parametrize("backend", ["gvisor", "native"])
def test_persistent_dirs_survive_a_restart_and_reset_clears_them(lz, request, backend):
    """What the sandbox writes under its persistent directories is there in
    the next sandbox of the profile and on the host only in its layers (the
    host's /usr/local is unchanged); `lazaret reset --dir` clears one,
    `lazaret reset` all, and the next sandbox starts from nothing again."""
    d = persist_domain(lz, request, backend)
    host_before = sorted(os.listdir("/usr/local"))
    try:
        r = d.run("run", "--", "/bin/sh", "-c",
                  "mkdir -p /usr/local/lz-kept /opt/lz && echo kept > /usr/local/lz-kept/f && echo opt > /opt/lz/f"
                  " && cat /usr/local/lz-kept/f /opt/lz/f")
        assert (r.returncode, r.stdout) == (0, "kept\nopt\n"), r.stderr + d.log()[-3000:]
        d.assert_clean()
        assert sorted(os.listdir("/usr/local")) == host_before and not os.path.exists("/usr/local/lz-kept")
        assert kept_file(d, backend, "usr_2flocal", "lz-kept/f") == "kept\n"
        assert kept_file(d, backend, "opt", "lz/f") == "opt\n"
        if backend == "native":
            [domain] = d.domain_dirs()
            assert not [n for n in os.listdir(domain) if n.endswith(("_layer.img", "_layer", "_merged"))]
            assert "fuse-overlayfs" not in d.log()
            # status names the layer (never an image: there is none).
            r = d.run("status")
            assert f"persistent  /usr/local  native backend's layer {layer(d, 'usr_2flocal_native')}\n" in r.stdout, \
                r.stdout

        r = d.run("run", "--", "/bin/sh", "-c", "cat /usr/local/lz-kept/f /opt/lz/f")
        assert (r.returncode, r.stdout) == (0, "kept\nopt\n"), r.stderr + d.log()[-3000:]
        d.assert_clean()

        r = d.run("reset", "--dir", "/opt", "--yes")
        assert r.returncode == 0, r.stderr
        assert kept_file(d, backend, "opt", "lz/f") is None
        assert kept_file(d, backend, "usr_2flocal", "lz-kept/f") == "kept\n"
        r = d.run("run", "--", "/bin/sh", "-c", "cat /usr/local/lz-kept/f; test -e /opt/lz/f && echo opt || echo no-opt")
        assert (r.returncode, r.stdout) == (0, "kept\nno-opt\n"), r.stderr
        d.assert_clean()
        r = d.run("reset", "--yes")
        assert r.returncode == 0, r.stderr
        [domain] = d.domain_dirs()
        assert not [n for n in os.listdir(domain) if n.startswith(("usr_2flocal_", "opt_"))], os.listdir(domain)
        r = d.run("run", "--", "/bin/sh", "-c", "test -e /usr/local/lz-kept/f && echo kept || echo gone")
        assert (r.returncode, r.stdout) == (0, "gone\n"), r.stderr
        d.assert_clean()
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)


# 8 MiB every 0.2 s, 1 GB in all.
LAYER_FILLER = ("i=0; while [ $i -lt 125 ]; do dd if=/dev/zero of=/opt/f$i bs=1M count=8 2>/tmp/err || "
                "{ cat /tmp/err; break; }; i=$((i+1)); sleep 0.2; done; echo finished")


@pytest.mark.parametrize("backend", ["gvisor", "native"])
def test_disk_limit_holds_on_persistent_dirs(lz, request, backend):
    """disk_limit on the persistent directories, on either backend: their
    upper directories are plain directories on the host's disk (the
    kernel's overlay takes no file system of the layer's own, issue 44), so
    there is no ENOSPC inside; the coordinator measures them (gVisor: what
    the layers hold, a helper of their own; native: with the work files,
    what they grew by) and stops the sandbox once past disk_limit, telling
    the terminal why, long before the writer's 1 GB."""
    d = persist_domain(lz, request, backend, extra="disk_limit = 64\n")
    try:
        r = d.run("run", "--", "/bin/sh", "-c", LAYER_FILLER, timeout=180)
        upper = os.path.join(layer(d, "opt_native" if backend == "native" else "opt_layer"), "upper")
        assert r.returncode == 125, (r.stdout, r.stderr)
        assert "finished" not in r.stdout
        if backend == "gvisor":
            assert ("the persistent directories' changes hold" in r.stderr
                    and "past disk_limit = 64 MiB" in r.stderr), r.stderr
        else:
            assert ("the work files and persistent directories grew by" in r.stderr
                    and "past disk_limit = 64 MiB" in r.stderr), r.stderr
            assert "_native/upper" in r.stderr, r.stderr
        grown = int(subprocess.run(["du", "-s", "-B1", upper], capture_output=True, text=True).stdout.split()[0])
        assert 64 << 20 < grown < 400 << 20, grown
        d.assert_clean()
    finally:
        for name in d.container_names():
            podman(lz.user, "rm", "-f", "-t", "0", name, check=False)
