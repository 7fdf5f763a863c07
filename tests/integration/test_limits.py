# SPDX-License-Identifier: MIT
"""Issue 16: a sandbox's ceilings, attacked from inside on the real stack
(rootless Podman, runsc) as the test user. Each attack has a time limit;
alongside it a host command must run in its normal time, and afterwards
nothing of the Domain is left."""
import json
import os
import subprocess
import threading
import time

import pytest

from test_network import ROOT_ENV, rootful_domain
from test_run import Domain, kill_cli, make_repo, wait_sessions
from test_run import busybox_image  # noqa: F401  (fixture)


def user_threads(user):
    """Every thread of the test user's processes on the host."""
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != user.pw_uid:
                continue
            n += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return n


class Responsiveness:
    """A host command run again and again while an attack goes on: the
    slowest run; and, given a user, the most threads that user's processes
    had on the host meanwhile."""

    def __init__(self, user=None):
        self.user = user
        self.peak_threads = 0
        self.worst = 0.0
        self.stop = False
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop:
            start = time.monotonic()
            subprocess.run(["/bin/true"], check=True)
            self.worst = max(self.worst, time.monotonic() - start)
            if self.user:
                self.peak_threads = max(self.peak_threads, user_threads(self.user))
            time.sleep(0.1)

    def close(self):
        self.stop = True
        self.t.join()
        return self.worst


def test_status_shows_each_limit_and_what_enforces_it(lz, busybox_image):  # noqa: F811
    dom = Domain(lz, busybox_image, extra="pids_limit = 200\nmemory_limit = 512\n")
    p = dom.popen("run", "--", "/bin/sleep", "60")
    try:
        st = wait_sessions(dom, 1)
        lim = st["limits"]
        assert lim["pids"]["limit"] == 200 and "RLIMIT_NPROC" in lim["pids"]["enforced_by"], lim
        assert lim["memory"]["limit_mib"] == 512 and lim["memory"]["enforced"] is True, lim
        assert 0 <= lim["memory"]["used_mib"] < 512, lim
        text = dom.run("status").stdout
        assert "  pids        at most 200 tasks: gVisor (RLIMIT_NPROC for every task of the sandbox)" in text, text
        assert lim["disk"]["limit_mib"] == 16384 and "root file system" in lim["disk"]["enforced_by"]
        assert "  memory      " in text and " of 512 MiB: the coordinator, which stops the sandbox at the limit" \
            in text, text
    finally:
        p.kill()
        p.wait()
    dom.run("stop")
    dom.assert_clean()


def test_fork_loop_meets_the_pids_limit(lz, busybox_image):  # noqa: F811
    """A loop that forks sleepers until fork fails: it fails inside at the
    limit, the host's thread count for the user stays bounded, and a host
    command runs in normal time alongside."""
    dom = Domain(lz, busybox_image, extra="pids_limit = 100\n")
    before = user_threads(lz.user)
    resp = Responsiveness(lz.user)
    try:
        # busybox sh gives up when it cannot fork: the last count it
        # printed is how many sleepers it started.
        r = dom.run("run", "--", "/bin/sh", "-c",
                    "n=0; while [ $n -lt 400 ]; do sleep 30 & n=$((n+1)); echo $n; done", timeout=120)
    finally:
        worst = resp.close()
    out = r.stdout + r.stderr
    started = int(r.stdout.split()[-1])
    assert 50 < started < 100, out
    assert "can't fork: Resource temporarily unavailable" in r.stderr, out
    assert worst < 2.0, worst
    print(f"host threads of the user: {before} before, {resp.peak_threads} at most during the loop")
    # runsc's host threads for them stayed within ten per task (Podman,
    # conmon, the coordinator and its helpers besides).
    assert resp.peak_threads - before < 100 * 10 + 200, (before, resp.peak_threads)
    dom.assert_clean()
    # Nothing of it is left on the host.
    assert user_threads(lz.user) <= before + 50


def test_four_hundred_sleepers_under_the_default(lz, busybox_image):  # noqa: F811
    """The default pids_limit (1024) runs 400 processes at once (a large
    make -j), and bounds runsc's host threads for them."""
    dom = Domain(lz, busybox_image)
    r = dom.run("run", "--", "/bin/sh", "-c",
                "n=0; while [ $n -lt 400 ]; do sleep 20 & n=$((n+1)); done; sleep 1; "
                "echo running=$(ps -o comm | grep -cx sleep); kill $(jobs -p); exit 0", timeout=180)
    assert r.returncode == 0, r.stderr
    assert "running=400" in r.stdout, r.stdout + r.stderr
    dom.assert_clean()


def test_memory_limit_stops_the_sandbox(lz, busybox_image):  # noqa: F811
    """Memory a program in the sandbox holds (dd's 200 MB buffer, filled and
    held while the pipe's reader sleeps)
    over memory_limit: the sandbox stops, the terminal is told why, the host
    was not touched, nothing is left."""
    dom = Domain(lz, busybox_image, extra="memory_limit = 128\n")
    resp = Responsiveness()
    start = time.monotonic()
    try:
        r = dom.run("run", "--", "/bin/sh", "-c",
                    "dd if=/dev/zero bs=200M count=1 2>/dev/null | sleep 30; echo slept",
                    timeout=120)
    finally:
        worst = resp.close()
    assert r.returncode == 125, r.stdout + r.stderr
    assert "the sandbox reached its memory limit" in r.stderr and "memory_limit = 128 MiB" in r.stderr, r.stderr
    assert time.monotonic() - start < 30  # stopped, not the sleep's end
    assert worst < 2.0, worst
    assert "the sandbox reached its memory limit" in dom.log()
    dom.assert_clean()
    # Under the limit the same program runs to its end.
    dom2 = Domain(lz, busybox_image, extra="memory_limit = 1024\n")
    r = dom2.run("run", "--", "/bin/sh", "-c", "dd if=/dev/zero bs=200M count=1 of=/dev/null 2>/dev/null; echo done",
                 timeout=120)
    assert (r.returncode, r.stdout) == (0, "done\n"), r.stderr
    dom2.assert_clean()


@pytest.mark.skipif(os.geteuid() != 0, reason="rootful Podman needs root")
def test_rootful_limits_with_cgroups_behind(lazaret_bin, tmp_path):
    """Run by root: the same limits, with Podman's cgroups behind them (a
    pids limit for runsc's host threads, a memory limit above the
    coordinator's), and the memory limit stops the sandbox the same way."""
    data, work, cfg = rootful_domain(lazaret_bin, tmp_path, [], extra_profile="pids_limit = 100\nmemory_limit = 128\n")
    p = subprocess.Popen([lazaret_bin, "--config", str(cfg), "run", "--", "/bin/sleep", "60"], env=ROOT_ENV, cwd=work,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        st = {}
        while time.time() < deadline and not st.get("running"):
            r = subprocess.run([lazaret_bin, "--config", str(cfg), "status", "--json"], env=ROOT_ENV, cwd=work,
                               capture_output=True, text=True)
            st = json.loads(r.stdout) if r.returncode == 0 else {}
            time.sleep(0.2)
        assert "pids cgroup" in st["limits"]["pids"]["enforced_by"], st["limits"]
        assert "memory cgroup" in st["limits"]["memory"]["enforced_by"], st["limits"]
        ins = json.loads(subprocess.run(["podman", "inspect", st["sandbox"]["id"]], capture_output=True,
                                        text=True).stdout)[0]["HostConfig"]
        assert ins["PidsLimit"] == 100 * 10 + 256, ins["PidsLimit"]
        assert ins["Memory"] == (128 + 32 + 256) << 20, ins["Memory"]
    finally:
        subprocess.run([lazaret_bin, "--config", str(cfg), "stop"], env=ROOT_ENV, cwd=work, capture_output=True)
        p.wait(timeout=30)
    r = subprocess.run([lazaret_bin, "--config", str(cfg), "run", "--", "/bin/sh", "-c",
                        "dd if=/dev/zero bs=200M count=1 2>/dev/null | sleep 30; echo slept"], env=ROOT_ENV, cwd=work,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 125 and "the sandbox reached its memory limit" in r.stderr, r.stdout + r.stderr


def host_cpu_task():
    """Seconds a fixed CPU-bound host task takes."""
    start = time.monotonic()
    subprocess.run(["sh", "-c", "head -c 200M /dev/zero | sha256sum >/dev/null"], check=True)
    return time.monotonic() - start


def sandbox_threads(dom):
    """(tid, Cpus_allowed_list, nice) of every thread of the sandbox's
    runsc processes (the children of its conmon)."""
    [domain] = dom.domain_dirs()
    conmon = int(open(os.path.join(domain, "conmon.pid")).read())
    out = []
    for kid in open(f"/proc/{conmon}/task/{conmon}/children").read().split():
        for tid in os.listdir(f"/proc/{kid}/task"):
            try:
                cpus = next(l.split()[1] for l in open(f"/proc/{kid}/task/{tid}/status")
                            if l.startswith("Cpus_allowed_list:"))
                nice = int(open(f"/proc/{kid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()[16])
                out.append((tid, cpus, nice))
            except (OSError, StopIteration):
                pass
    return out


def test_cpu_spinners_stay_on_their_cpus(lz, busybox_image):  # noqa: F811
    """Four CPU spinners under cpu_limit = 1: every host thread of the
    sandbox runs on the host's last CPU at nice 10, and a CPU-bound host
    task alongside takes about its normal time."""
    last = max(os.sched_getaffinity(0))
    baseline = min(host_cpu_task() for _ in range(2))
    dom = Domain(lz, busybox_image, extra="cpu_limit = 1\n")
    p = dom.popen("run", "--", "/bin/sh", "-c",
                  "for i in 1 2 3 4; do (while :; do :; done) & done; sleep 20; kill $(jobs -p)")
    try:
        st = wait_sessions(dom, 1)
        cpu = st["limits"]["cpu"]
        assert cpu["enforced"] is True and cpu["cpus"] == str(last) and cpu["nice"] == 10, cpu
        time.sleep(1)
        threads = sandbox_threads(dom)
        assert threads and all(c == str(last) and n == 10 for _, c, n in threads), threads
        during = host_cpu_task()
    finally:
        p.kill()
        p.wait()
    dom.run("stop")
    print(f"host task: {baseline:.2f} s alone, {during:.2f} s beside the spinners")
    assert during < max(3 * baseline, baseline + 1.0), (baseline, during)
    dom.assert_clean()


def test_disk_limit_fills_up_inside(lz, busybox_image):  # noqa: F811
    """Writing past disk_limit into the sandbox's own root file system
    fails inside with ENOSPC; the sandbox and the host go on; what it wrote
    went with the sandbox."""
    dom = Domain(lz, busybox_image, extra="disk_limit = 100\n")
    r = dom.run("run", "--", "/bin/sh", "-c",
                "dd if=/dev/zero of=/fill bs=1M count=300 2>/tmp/err; echo dd=$?; cat /tmp/err; ls -l /fill | "
                "awk '{print \"size=\" $5}'; rm /fill; echo after > /note; cat /note", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "No space left on device" in r.stdout and "dd=1" in r.stdout, r.stdout
    size = int(next(l for l in r.stdout.splitlines() if l.startswith("size=")).split("=")[1])
    assert size <= 100 << 20, size
    assert r.stdout.rstrip().endswith("after"), r.stdout  # it goes on once space is freed
    dom.assert_clean()


# A writer that fills the workspace at about 40 MB/s, 1 GB in all, from a
# directory that the host's user cannot read (owned by another uid inside,
# mode 000): past disk_limit the sandbox must stop long before the end.
SLOW_FILLER = ("mkdir -p {dir} && chown 1234:1234 {dir} && chmod 000 {dir} && i=0; "
               "while [ $i -lt 125 ]; do dd if=/dev/zero of={dir}/f$i bs=1M count=8 2>/dev/null; "
               "i=$((i+1)); sleep 0.2; done; echo finished")


def grown_bytes(path):
    """What the files under path take on the host (root reads all)."""
    r = subprocess.run(["du", "-s", "-B1", path], capture_output=True, text=True)
    return int(r.stdout.split()[0])


def test_disk_limit_stops_the_sandbox_when_the_work_files_grow(lz, busybox_image):  # noqa: F811
    """The workspace is the host's directory: no file system of ours can
    say ENOSPC there, so the coordinator measures it and stops the sandbox
    when it grew by more than disk_limit, telling the terminal why, with
    far less written than the agent wanted; a hidden directory does not
    escape the measure; nothing is left."""
    dom = Domain(lz, busybox_image, extra="disk_limit = 64\n")
    before = grown_bytes(lz.work)
    p = dom.popen("run", "--", "/bin/sh", "-c", SLOW_FILLER.format(dir="/workspace/hide"))
    try:
        st = wait_sessions(dom, 1)
        wf = st["limits"]["disk"]["work_files"]
        assert wf["paths"] == [lz.work] and wf["enforced"] is True, wf
        text = dom.run("status").stdout
        assert "  work files  " in text and f" in {lz.work}" in text, text
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 125, err
    assert b"the work files grew by" in err and b"past disk_limit = 64 MiB" in err, err
    grown = grown_bytes(lz.work) - before
    assert 64 << 20 < grown < 400 << 20, grown
    dom.assert_clean()
    log = dom.log()
    assert "work files measured by" in log
    # The baseline is taken before the sandbox starts: one taken while
    # the agent writes would count its writes as the start.
    assert log.index("work files: ") < log.index("running (generation"), log


def test_disk_limit_counts_the_agents_worktree(lz, busybox_image):  # noqa: F811
    """Branch mode: the agent's worktree and the repository's .git are
    what is measured."""
    make_repo(lz)
    dom = Domain(lz, busybox_image, extra="disk_limit = 64\n")
    p = dom.popen("run", "--", "/bin/sh", "-c", SLOW_FILLER.format(dir="/workspace/out"))
    try:
        st = wait_sessions(dom, 1)
        paths = st["limits"]["disk"]["work_files"]["paths"]
        assert len(paths) == 2 and paths[0].endswith("/agent-shell") and paths[1] == os.path.join(lz.work, ".git")
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 125, err
    assert b"the work files grew by" in err, err
    assert not os.path.exists(os.path.join(lz.work, "out"))  # the host's working tree is untouched
    dom.assert_clean()


# The same writer into a file it unlinked first and keeps open (issue 41,
# item 8): no walk finds it, yet the host's disk holds every byte.
UNLINKED_FILLER = ("exec 3>/workspace/.h && rm /workspace/.h && i=0; "
                   "while [ $i -lt 125 ]; do dd if=/dev/zero bs=1M count=8 >&3 2>/dev/null; "
                   "i=$((i+1)); sleep 0.2; done; echo finished")


@pytest.mark.parametrize("branch", [False, True], ids=["direct", "branch"])
def test_disk_limit_counts_an_unlinked_open_file(lz, busybox_image, branch):  # noqa: F811
    """A file the agent unlinked but holds open is still on the host's
    disk: the measure counts it, and the sandbox stops past disk_limit,
    telling the terminal why. In direct mode the git router holds its host
    descriptor (the coordinator's tree); in branch mode gVisor's own
    processes do (conmon's tree)."""
    if branch:
        make_repo(lz)
    dom = Domain(lz, busybox_image, extra="disk_limit = 64\n")
    p = dom.popen("run", "--", "/bin/sh", "-c", UNLINKED_FILLER)
    try:
        _, err = p.communicate(timeout=90)
    finally:
        p.kill()
    assert p.returncode == 125, err
    assert b"the work files grew by" in err and b"past disk_limit = 64 MiB" in err, err
    assert not os.path.exists(os.path.join(lz.work, ".h"))
    dom.assert_clean()


HOST_HOLDER = r"""
import os, sys
f = os.path.join(sys.argv[1], "held")
fd = os.open(f, os.O_WRONLY | os.O_CREAT, 0o600)
os.unlink(f)
for _ in range(128):
    os.write(fd, b"\0" * (1 << 20))
os.fsync(fd)
print("held", flush=True)
sys.stdin.read()  # until the test closes it
"""


def test_disk_limit_ignores_what_other_programs_hold(lz, busybox_image):  # noqa: F811
    """A file another program of the person's unlinked and holds open on
    the same file system is not the sandbox's: 128 MiB of it under
    disk_limit = 64 does not stop the sandbox (the measure looks at the
    coordinator's and the sandbox's processes only). The holder runs in
    Podman's user namespace, where another Domain's sandbox runs (several
    agents of `lazaret up` on one file system): the measure, which runs
    there too, could read its descriptors and counted them."""
    dom = Domain(lz, busybox_image, extra="disk_limit = 64\n")
    p = dom.popen("run", "--", "/bin/sh", "-c", "sleep 60; echo finished")
    elsewhere = os.path.join(lz.base, "elsewhere")
    os.makedirs(elsewhere)
    os.chown(elsewhere, lz.user.pw_uid, lz.user.pw_gid)
    holder = None
    try:
        wait_sessions(dom, 1, timeout=60)
        assert os.stat(elsewhere).st_dev == os.stat(lz.work).st_dev  # the same file system
        holder = subprocess.Popen(["runuser", "-u", lz.user.pw_name, "--", "env", "-i", f"HOME={lz.user.pw_dir}",
                                   "PATH=/usr/bin:/bin:/usr/sbin:/sbin", "podman", "unshare", "/usr/bin/python3",
                                   "-c", HOST_HOLDER, elsewhere],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
        assert holder.stdout.readline().strip() == "held"
        # Past a walk: the watch walks when its file system grew by an
        # eighth of the limit, at its next look (every 2 s); a walk may
        # take seconds on a busy host.
        deadline = time.time() + 25
        while time.time() < deadline and p.poll() is None:
            time.sleep(0.5)
        assert p.poll() is None, p.communicate()[1]
        st = json.loads(dom.run("status", "--json").stdout)
        assert st["running"] and st["limits"]["disk"]["work_files"]["grown_mib"] < 64, st["limits"]["disk"]
    finally:
        if holder:
            holder.stdin.close()
            holder.wait(timeout=30)
        if p.poll() is None:
            kill_cli(p)
        p.wait()
    dom.assert_clean()


def test_console_writes_do_not_reach_the_host_disk(lz, busybox_image):  # noqa: F811
    """The agent writes 8 MiB to PID 1's stdout (/proc/1/fd/1, the
    container's console): none of it lands in a file on the host (Podman's
    container log would have grown without a bound, past disk_limit)."""
    d = Domain(lz, busybox_image, extra="disk_limit = 64\n")
    holder = d.popen("run", "--", "/bin/sh", "-c", "sleep 60")
    try:
        st = wait_sessions(d, 1)
        cid = st["sandbox"]["id"]
        store = os.path.join(lz.user.pw_dir, ".local/share/containers/storage/overlay-containers", cid)

        def size():
            total = 0
            for root, _, files in os.walk(store):
                for f in files:
                    try:
                        total += os.lstat(os.path.join(root, f)).st_size
                    except FileNotFoundError:
                        pass
            return total

        assert os.path.isdir(store), store
        before = size()
        r = d.run("run", "--", "/bin/sh", "-c",
                  "head -c 8388608 /dev/zero | tr '\\0' x > /proc/1/fd/1; echo rc=$?")
        assert "rc=0" in r.stdout, r.stdout + r.stderr  # the write itself is allowed; it goes nowhere
        assert size() - before < 1024 * 1024, (before, size())
    finally:
        kill_cli(holder)
        holder.wait()
