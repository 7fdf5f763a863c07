# SPDX-License-Identifier: MIT
"""lazaret-native (the native backend, FULL and FS-ONLY modes) attacked from
inside.

Every test runs the real launcher as the unprivileged test user, with a
command that tries to get out: write the host's files, read secrets that are
masked or outside the workspace, follow symbolic links out, create
namespaces and mounts, trace or signal host processes, reach the kernel's
riskier interfaces, inject terminal input, and reach host sockets (abstract,
pathname, TCP on loopback). Each attack asserts the errno it got AND that the
host is unchanged (marker files, the victim process, the listener that must
have accepted nothing). Where it is cheap, the same operation is first shown
to succeed outside the sandbox, so a denial inside is the sandbox's doing.

Raw system calls come from a small static C program compiled here
(ATTACK_C) and copied into each workspace; file operations run in the host's
/usr/bin/python3, which the sandbox sees read-only under /usr.

The FS-ONLY tests (test_fs_only_*) force that mode with --mode fs-only, as
this host has user namespaces; LAZARET_TEST_NO_USERNS=1 simulates a host
without them.

The HOLD and JOIN tests (test_hold_*, test_join_*) keep a sandbox with
--hold and run commands in it with --join PID; test_join_attack_* rerun a
subset of the FULL attacks above, unchanged, on joined commands (through
JoinedNative, whose runs join a held sandbox).

Nothing here uses Podman or runsc; network traffic goes to loopback only.
"""
import contextlib
import fcntl
import json
import os
import pty
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import termios
import time
import tty

import pytest

from conftest import BUILD

PYTHON = "/usr/bin/python3"
EXIT_NATIVE = 125
PREFIX = "lazaret-native: "
DEVICES = {"null", "zero", "full", "random", "urandom", "tty"}

# A static program that runs one system call per operation and prints
# "<operation and its arguments>: OK" or ": <errno name>". The sandbox has
# no compiler and maybe no libc of the same version, hence -static.
ATTACK_C = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

static void report(int argc, char **argv, long r) {
        for (int i = 0; i < argc; i++)
                printf("%s%s", i ? " " : "", argv[i]);
        if (r < 0)
                printf(": %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "E?");
        else
                printf(": OK\n");
        fflush(stdout);
}

static long sock_connect(int family, int type, const struct sockaddr *sa, socklen_t len) {
        int fd = socket(family, type | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        long r = connect(fd, sa, len);
        int e = errno;
        close(fd);
        errno = e;
        return r;
}

static socklen_t inet_addr_of(const char *host, int port, struct sockaddr_storage *ss) {
        memset(ss, 0, sizeof(*ss));
        struct sockaddr_in *in4 = (struct sockaddr_in *) ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) ss;
        if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons(port);
                return sizeof(*in4);
        }
        if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(port);
                return sizeof(*in6);
        }
        fprintf(stderr, "bad address %s\n", host);
        exit(2);
}

static pid_t pid_of(const char *s) {
        return strcmp(s, "self") ? (pid_t) atoi(s) : getpid();
}

/* One operation, argv[0] its name; returns how many words it used. */
static int op(int argc, char **argv) {
        const char *o = argv[0];
        long r;
        int n = 1;
#define NEED(k) do { \
                if (argc < (k) + 1) { fprintf(stderr, "%s needs %d args\n", o, k); exit(2); } \
                n = (k) + 1; \
        } while (0)
        errno = 0;
        if (!strcmp(o, "io_uring")) {
                struct io_uring_params p;
                memset(&p, 0, sizeof(p));
                r = syscall(SYS_io_uring_setup, 4, &p);
        } else if (!strcmp(o, "userfaultfd")) {
                /* user-mode only: allowed to anyone unless something forbids it */
                r = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
        } else if (!strcmp(o, "unshare-user")) {
                r = unshare(CLONE_NEWUSER);
        } else if (!strcmp(o, "unshare-mount")) {
                r = unshare(CLONE_NEWNS);
        } else if (!strcmp(o, "unshare-net")) {
                r = unshare(CLONE_NEWNET);
        } else if (!strcmp(o, "clone-newuser")) {
                r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
                if (r == 0)
                        _exit(0);
                if (r > 0)
                        waitpid(r, NULL, 0);
        } else if (!strcmp(o, "clone3")) {
                struct clone_args ca;
                memset(&ca, 0, sizeof(ca));
                ca.exit_signal = SIGCHLD;
                r = syscall(SYS_clone3, &ca, sizeof(ca));
                if (r == 0)
                        _exit(0);
                if (r > 0)
                        waitpid(r, NULL, 0);
        } else if (!strcmp(o, "mount-tmpfs")) {
                NEED(1);
                r = mount("none", argv[1], "tmpfs", 0, "");
        } else if (!strcmp(o, "bind")) {
                NEED(2);
                r = mount(argv[1], argv[2], NULL, MS_BIND, NULL);
        } else if (!strcmp(o, "umount")) {
                NEED(1);
                r = umount2(argv[1], MNT_DETACH);
        } else if (!strcmp(o, "pivot_root")) {
                r = syscall(SYS_pivot_root, ".", ".");
        } else if (!strcmp(o, "setns")) {
                int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
                r = fd < 0 ? -1 : setns(fd, 0);
        } else if (!strcmp(o, "ptrace-attach")) {
                NEED(1);
                r = ptrace(PTRACE_ATTACH, pid_of(argv[1]), 0, 0);
        } else if (!strcmp(o, "ptrace-seize")) {
                NEED(1);
                r = ptrace(PTRACE_SEIZE, pid_of(argv[1]), 0, 0);
        } else if (!strcmp(o, "ptrace-traceme")) {
                r = ptrace(PTRACE_TRACEME, 0, 0, 0);
        } else if (!strcmp(o, "vmread")) {
                /* PID ADDR (hex); "self" for this process or an address of its own */
                NEED(2);
                static char target[16] = "secret";
                char buf[16];
                void *addr = strcmp(argv[2], "self") ? (void *) strtoul(argv[2], NULL, 16) : (void *) target;
                struct iovec l = { buf, sizeof(buf) }, rm = { addr, sizeof(buf) };
                r = process_vm_readv(pid_of(argv[1]), &l, 1, &rm, 1, 0);
        } else if (!strcmp(o, "vmwrite")) {
                NEED(1);
                static char target[16];
                char buf[16] = "x";
                struct iovec l = { buf, sizeof(buf) }, rm = { target, sizeof(buf) };
                r = process_vm_writev(pid_of(argv[1]), &l, 1, &rm, 1, 0);
        } else if (!strcmp(o, "pidfd_getfd")) {
                int pfd = syscall(SYS_pidfd_open, getpid(), 0);
                r = pfd < 0 ? -1 : syscall(SYS_pidfd_getfd, pfd, 1, 0);
        } else if (!strcmp(o, "kcmp")) {
                r = syscall(SYS_kcmp, getpid(), getpid(), 0 /* KCMP_FILE */, 1, 1);
        } else if (!strcmp(o, "bpf")) {
                union bpf_attr a;
                memset(&a, 0, sizeof(a));
                a.map_type = BPF_MAP_TYPE_ARRAY;
                a.key_size = 4;
                a.value_size = 4;
                a.max_entries = 1;
                r = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a));
        } else if (!strcmp(o, "perf_event_open")) {
                struct perf_event_attr a;
                memset(&a, 0, sizeof(a));
                a.size = sizeof(a);
                a.type = PERF_TYPE_SOFTWARE;
                a.config = PERF_COUNT_SW_TASK_CLOCK;
                a.exclude_kernel = 1;
                a.exclude_hv = 1;
                r = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
        } else if (!strcmp(o, "keyctl")) {
                r = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
        } else if (!strcmp(o, "add_key")) {
                r = syscall(SYS_add_key, "user", "lazaret-test", "x", 1, -2 /* process */);
        } else if (!strcmp(o, "request_key")) {
                r = syscall(SYS_request_key, "user", "lazaret-test", NULL, 0);
        } else if (!strcmp(o, "kexec_load")) {
                r = syscall(SYS_kexec_load, 0, 0, NULL, 0);
        } else if (!strcmp(o, "init_module")) {
                r = syscall(SYS_init_module, "", 0, "");
        } else if (!strcmp(o, "finit_module")) {
                r = syscall(SYS_finit_module, -1, "", 0);
        } else if (!strcmp(o, "delete_module")) {
                r = syscall(SYS_delete_module, "lazaret_none", 0);
        } else if (!strcmp(o, "tiocsti-fd")) {
                /* FD: push "X" into the terminal's input */
                NEED(1);
                char c = 'X';
                r = ioctl(atoi(argv[1]), TIOCSTI, &c);
        } else if (!strcmp(o, "tiocsti-path")) {
                NEED(1);
                char c = 'X';
                int fd = open(argv[1], O_RDWR | O_NOCTTY | O_CLOEXEC);
                r = fd < 0 ? -1 : ioctl(fd, TIOCSTI, &c);
        } else if (!strcmp(o, "tioclinux-fd")) {
                NEED(1);
                char sub = 6; /* TIOCL_GETSHIFTSTATE */
                r = ioctl(atoi(argv[1]), TIOCLINUX, &sub);
        } else if (!strcmp(o, "kill")) {
                NEED(2);
                r = kill(atoi(argv[1]), atoi(argv[2]));
        } else if (!strcmp(o, "abstract")) {
                NEED(1);
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                size_t l = strlen(argv[1]);
                memcpy(sa.sun_path + 1, argv[1], l);
                r = sock_connect(AF_UNIX, SOCK_STREAM, (struct sockaddr *) &sa,
                                 offsetof(struct sockaddr_un, sun_path) + 1 + l);
        } else if (!strcmp(o, "unix")) {
                NEED(1);
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
                r = sock_connect(AF_UNIX, SOCK_STREAM, (struct sockaddr *) &sa, sizeof(sa));
        } else if (!strcmp(o, "tcp")) {
                NEED(2);
                struct sockaddr_storage ss;
                socklen_t l = inet_addr_of(argv[1], atoi(argv[2]), &ss);
                r = sock_connect(ss.ss_family, SOCK_STREAM, (struct sockaddr *) &ss, l);
        } else if (!strcmp(o, "tcp-bind")) {
                NEED(2);
                struct sockaddr_storage ss;
                socklen_t l = inet_addr_of(argv[1], atoi(argv[2]), &ss);
                int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                r = fd < 0 ? -1 : bind(fd, (struct sockaddr *) &ss, l);
        } else if (!strcmp(o, "unix-dgram")) {
                /* PATH: one datagram to a socket by its path, no connect */
                NEED(1);
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
                int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                r = fd < 0 ? -1 : sendto(fd, "lazaret", 7, 0, (struct sockaddr *) &sa, sizeof(sa));
        } else if (!strcmp(o, "shm-create")) {
                NEED(1);
                r = shmget((key_t) strtol(argv[1], NULL, 0), 4096, IPC_CREAT | IPC_EXCL | 0600);
        } else if (!strcmp(o, "shmget")) {
                NEED(1);
                r = shmget((key_t) strtol(argv[1], NULL, 0), 0, 0);
        } else if (!strcmp(o, "shmat")) {
                /* ID: attach the segment and read its first byte */
                NEED(1);
                void *a = shmat(atoi(argv[1]), NULL, SHM_RDONLY);
                r = a == (void *) -1 ? -1 : 0;
        } else if (!strcmp(o, "shm-rm")) {
                NEED(1);
                r = shmctl(atoi(argv[1]), IPC_RMID, NULL);
        } else if (!strcmp(o, "mq-create")) {
                NEED(1);
                mqd_t q = mq_open(argv[1], O_CREAT | O_EXCL | O_RDWR, 0600, NULL);
                r = q == (mqd_t) -1 ? -1 : 0;
        } else if (!strcmp(o, "mq_open")) {
                NEED(1);
                mqd_t q = mq_open(argv[1], O_RDWR);
                r = q == (mqd_t) -1 ? -1 : 0;
        } else if (!strcmp(o, "mq-unlink")) {
                NEED(1);
                r = mq_unlink(argv[1]);
        } else if (!strcmp(o, "udp")) {
                NEED(2);
                struct sockaddr_storage ss;
                socklen_t l = inet_addr_of(argv[1], atoi(argv[2]), &ss);
                int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                r = fd < 0 ? -1 : sendto(fd, "lazaret", 7, 0, (struct sockaddr *) &ss, l);
        } else {
                fprintf(stderr, "unknown operation %s\n", o);
                exit(2);
        }
        report(n, argv, r);
        return n;
}

int main(int argc, char **argv) {
        for (int i = 1; i < argc;)
                i += op(argc - i, argv + i);
        return 0;
}
"""

# Prepended to every Python program run inside: t(f, ...) is f's result, or
# "OK" for None, or the errno name of the OSError it raised; the program
# fills R, which is printed as JSON on the last line.
PRELUDE = r"""
import errno, json, os, socket, sys
def t(f, *a):
    try:
        r = f(*a)
        return "OK" if r is None else r
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def write(p, data="pwned by the sandbox\n", mode="w"):
    with open(p, mode) as f:
        f.write(data)
def read(p):
    with open(p, "rb") as f:
        return "READ:" + f.read(4096).decode("utf-8", "replace")
R = {}
"""
EPILOGUE = "\nprint(json.dumps(R))\n"

# A listener run on the host as the test user: binds KIND ADDR, prints
# "READY <port or ->", then for every line on stdin prints how many
# connections (datagrams for udp) it has received so far.
LISTENER = r"""
import socket, sys
kind, addr = sys.argv[1], sys.argv[2]
if kind == "abstract":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind("\0" + addr)
elif kind == "unix":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(addr)
elif kind == "unix-dgram":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(addr)
elif kind == "tcp":
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.bind((addr, 0))
elif kind == "tcp6":
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.bind((addr, 0))
elif kind == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, 0))
if kind not in ("udp", "unix-dgram"):
    s.listen(64)
s.setblocking(False)
port = s.getsockname()[1] if kind in ("tcp", "tcp6", "udp") else "-"
print("READY", port, flush=True)
n = 0
for line in sys.stdin:
    while True:
        try:
            if kind in ("udp", "unix-dgram"):
                s.recv(100)
            else:
                c, _ = s.accept(); c.close()
            n += 1
        except BlockingIOError:
            break
    print(n, flush=True)
"""


# ---------------------------------------------------------------- helpers


def user_env(user, home=None):
    return {"HOME": home or user.pw_dir, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def as_user(user):
    """Popen arguments that run a program directly as the test user (no
    runuser in between, so Popen.pid is the program's own pid)."""
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "cwd": "/"}


def proc_uid(pid):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def proc_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return None


def proc_state(pid):
    """The one-letter state of pid, or None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def proc_ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid):
    s = proc_state(pid)
    return s is not None and s not in ("Z", "X")


def all_pids():
    return [int(x) for x in os.listdir("/proc") if x.isdigit()]


def descendants(root):
    """Every live descendant of root (not root itself)."""
    children = {}
    for p in all_pids():
        pp = proc_ppid(p)
        if pp is not None:
            children.setdefault(pp, []).append(p)
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def procs_of_exe(uid, exe):
    """Live processes of uid whose executable is the file exe."""
    st = os.stat(exe)
    found = []
    for p in all_pids():
        if proc_uid(p) != uid or not alive(p):
            continue
        try:
            e = os.stat(f"/proc/{p}/exe")
        except OSError:
            continue
        if (e.st_dev, e.st_ino) == (st.st_dev, st.st_ino):
            found.append(p)
    return found


def wait_until(pred, timeout=5.0, step=0.05):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


def kill_ours(pids):
    """SIGKILL processes this test started, by pid."""
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


def parse_attack(stdout):
    """The helper's lines as {"op args": "OK" | "EXXX"}."""
    out = {}
    for line in stdout.splitlines():
        if ": " in line:
            k, v = line.rsplit(": ", 1)
            out[k] = v
    return out


def snapshot(path):
    """(mode, uid, size, content) of a file, or None when missing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    data = b""
    if os.path.isfile(path) and not os.path.islink(path):
        with open(path, "rb") as f:
            data = f.read()
    return (st.st_mode, st.st_uid, st.st_size, data)


def chown_user(path, user):
    os.chown(path, user.pw_uid, user.pw_gid)


def one_error_line(r):
    """The launcher's own failure: status 125 and one line on stderr."""
    lines = r.stderr.splitlines()
    assert r.returncode == EXIT_NATIVE, f"status {r.returncode}, stderr {r.stderr!r}, stdout {r.stdout!r}"
    assert len(lines) == 1 and lines[0].startswith(PREFIX), f"stderr is not one '{PREFIX}...' line: {r.stderr!r}"
    return lines[0]


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def native_bin(world_dir):
    """The launcher, copied where the test user can run it."""
    src = os.path.join(BUILD, "src", "native", "lazaret-native")
    if not os.access(src, os.X_OK):
        pytest.fail(f"{src} is missing: build first (ninja -C {BUILD})", pytrace=False)
    d = os.path.join(world_dir, "native")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    dst = os.path.join(d, "lazaret-native")
    shutil.copy2(src, dst)
    os.chmod(dst, 0o755)
    return dst


@pytest.fixture(scope="session")
def attack_bin(world_dir):
    """ATTACK_C, compiled statically."""
    d = os.path.join(world_dir, "native-attack")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    src = os.path.join(d, "attack.c")
    with open(src, "w", encoding="utf-8") as f:
        f.write(ATTACK_C)
    dst = os.path.join(d, "attack")
    r = subprocess.run(["cc", "-static", "-O1", "-Wall", "-o", dst, src], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, f"cannot compile the attack helper: {r.stderr}"
    os.chmod(dst, 0o755)
    return dst


class Native:
    """lazaret-native run as the test user.

    base:  a 0755 directory of this test (below the session's world_dir)
    work:  the workspace (owned by the test user)
    home:  the HOME the launcher itself is given (owned by the test user);
           the test user's real home is user.pw_dir
    """

    def __init__(self, binary, attack, user, base):
        self.binary = binary
        self.attack_src = attack
        self.user = user
        self.base = base
        self.work = os.path.join(base, "work")
        self.home = os.path.join(base, "home")
        for d in (self.work, self.home):
            os.makedirs(d)
            chown_user(d, user)
            os.chmod(d, 0o755)
        self.env = {"HOME": self.home, "PATH": "/usr/bin:/bin"}
        self.cleanup = []
        self.holds = []  # every Hold started, ended by the fixture
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if k in os.environ:
                self.env[k] = os.environ[k]

    def write(self, path, text, mode=0o644):
        """A file owned by the test user (path absolute, or relative to the workspace)."""
        path = os.path.join(self.work, path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        chown_user(path, self.user)
        os.chmod(path, mode)
        return path

    def mkdir(self, path, mode=0o755):
        path = os.path.join(self.work, path)
        os.makedirs(path, exist_ok=True)
        chown_user(path, self.user)
        os.chmod(path, mode)
        return path

    def outside_tmp_dir(self, name):
        """A 0755 directory of the test user below /var/tmp (removed by the
        fixture), for paths that must not be under the host's /tmp."""
        d = os.path.join("/var/tmp", f"lazaret-native-{os.path.basename(self.base)}-{name}")
        os.makedirs(d)
        chown_user(d, self.user)
        os.chmod(d, 0o755)
        self.cleanup.append(d)
        return d

    @property
    def attack(self):
        """The attack helper inside the sandbox (copied into the workspace)."""
        self.attack_fs
        return "/workspace/.attack"

    @property
    def attack_fs(self):
        """The attack helper in FS-ONLY mode, where the workspace is at its
        host path."""
        dst = os.path.join(self.work, ".attack")
        if not os.path.exists(dst):
            shutil.copy2(self.attack_src, dst)
            chown_user(dst, self.user)
            os.chmod(dst, 0o755)
        return dst

    def cmdline(self, args, env=None):
        e = {**self.env, **(env or {})}
        envv = [f"{k}={v}" for k, v in sorted(e.items()) if v is not None]
        return ["runuser", "-u", self.user.pw_name, "--", "env", "-i"] + envv + [self.binary] + list(args)

    def run(self, *args, env=None, input=None, timeout=60, **kw):
        return subprocess.run(self.cmdline(args, env), cwd=self.base, input=input, capture_output=True,
                              text=True, timeout=timeout, **kw)

    def sandbox_args(self, cmd, ro=(), mask=(), setenv=(), shm=None, workspace=None, mode=None, join=None):
        if join is not None:
            return self.join_args(join, cmd, setenv=setenv)
        a = ["--workspace", workspace or self.work]
        if mode is not None:
            a += ["--mode", mode]
        for p in ro:
            a += ["--ro", p]
        for p in mask:
            a += ["--mask", p]
        for s in setenv:
            a += ["--setenv", s]
        if shm is not None:
            a += ["--shm-size", str(shm)]
        return a + ["--"] + list(cmd)

    def sandbox(self, cmd, env=None, input=None, timeout=60, **kw):
        return self.run(*self.sandbox_args(cmd, **kw), env=env, input=input, timeout=timeout)

    def py(self, code, **kw):
        """Run PRELUDE + code + EPILOGUE in the sandbox; R as a dict."""
        r = self.sandbox([PYTHON, "-c", PRELUDE + code + EPILOGUE], **kw)
        assert r.returncode == 0, f"status {r.returncode}, stderr {r.stderr!r}, stdout {r.stdout!r}"
        lines = r.stdout.strip().splitlines()
        assert lines, f"no output; stderr {r.stderr!r}"
        return json.loads(lines[-1])

    def attack_run(self, *ops, **kw):
        """Run the helper's operations in the sandbox; {op: result}."""
        exe = self.attack_fs if kw.get("mode") == "fs-only" else self.attack
        r = self.sandbox([exe] + list(ops), **kw)
        assert r.returncode == 0, f"status {r.returncode}, stderr {r.stderr!r}, stdout {r.stdout!r}"
        return parse_attack(r.stdout)

    def hold_args(self, ro=(), mask=(), shm=None, workspace=None, mode=None, extra=()):
        a = ["--workspace", workspace or self.work]
        if mode is not None:
            a += ["--mode", mode]
        for p in ro:
            a += ["--ro", p]
        for p in mask:
            a += ["--mask", p]
        if shm is not None:
            a += ["--shm-size", str(shm)]
        return a + list(extra) + ["--hold"]

    def hold(self, env=None, **kw):
        """A held sandbox (lazaret-native --hold), ready; see Hold."""
        h = Hold(self, self.hold_args(**kw), env=env)
        self.holds.append(h)
        h.wait_ready()
        return h

    def join_args(self, pid, cmd, cwd=None, env_fd=None, setenv=()):
        a = ["--join", str(pid)]
        if cwd is not None:
            a += ["--cwd", cwd]
        if env_fd is not None:
            a += ["--env-fd", str(env_fd)]
        for s in setenv:
            a += ["--setenv", s]
        return a + ["--"] + list(cmd)

    def join(self, pid, cmd, cwd=None, env_fd=None, setenv=(), **kw):
        """lazaret-native --join PID -- CMD, run to its end (through runuser, as run())."""
        return self.run(*self.join_args(pid, cmd, cwd=cwd, env_fd=env_fd, setenv=setenv), **kw)

    def direct(self, args, env=None, **kw):
        """lazaret-native started directly as the test user (Popen.pid is
        its own pid), its output piped."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.Popen([self.binary] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**self.env, **(env or {})}, **{**as_user(self.user), **kw})

    def attack_host(self, *ops):
        """The same operations run on the host as the test user, no sandbox:
        the control that shows what a denial inside is worth."""
        r = subprocess.run([self.attack_src] + list(ops), capture_output=True, text=True, timeout=30,
                           env=user_env(self.user, self.home), **as_user(self.user))
        assert r.returncode == 0, r.stderr
        return parse_attack(r.stdout)


def _read_line(f, timeout):
    """One line from a pipe, read byte by byte (nothing after it is
    consumed); what came before EOF or the timeout otherwise."""
    fd, buf = f.fileno(), b""
    end = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        b = os.read(fd, 1)
        if not b:
            break
        buf += b
    return buf


class Hold:
    """lazaret-native --hold, started directly as the test user: p.pid is
    P; init is the PID of its "ready PID" line (B, the sandbox's init)."""

    def __init__(self, nat, args, env=None):
        self.p = nat.direct(args, env=env)
        self.line = None
        self.init = None

    def wait_ready(self, timeout=10):
        self.line = _read_line(self.p.stdout, timeout)
        m = re.fullmatch(rb"ready ([1-9][0-9]*)\n", self.line)
        if not m:
            self.end(signal.SIGKILL)
            pytest.fail(f"--hold did not print 'ready PID': stdout {self.line!r}, status {self.p.returncode}, "
                        f"stderr {self.p.stderr.read()!r}", pytrace=False)
        self.init = int(m.group(1))

    def end(self, sig=signal.SIGTERM, timeout=10):
        """Send P sig unless it has ended; wait for it; its status."""
        if self.p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.p.pid, sig)
            try:
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


@pytest.fixture
def nat(native_bin, attack_bin, test_user, world_dir):
    """A Native for one test; afterwards no process of the launcher may be
    left (they are killed by pid and the test fails if there were any)."""
    base = os.path.join(world_dir, "n-" + secrets.token_hex(4))
    os.makedirs(base)
    os.chmod(base, 0o755)
    n = Native(native_bin, attack_bin, test_user, base)
    yield n
    for h in n.holds:
        h.end()
    left = wait_until(lambda: not procs_of_exe(test_user.pw_uid, native_bin), timeout=5)
    stray = procs_of_exe(test_user.pw_uid, native_bin)
    kill_ours(stray)
    shutil.rmtree(base, ignore_errors=True)
    for d in n.cleanup:
        shutil.rmtree(d, ignore_errors=True)
    assert left, f"processes of lazaret-native left behind: {stray}"


@pytest.fixture
def host_sleep(test_user):
    """A `sleep 999` of the test user on the host: the victim process."""
    p = subprocess.Popen(["/usr/bin/sleep", "999"], stdin=subprocess.DEVNULL, env=user_env(test_user),
                         **as_user(test_user))
    assert wait_until(lambda: proc_cmdline(p.pid) == b"/usr/bin/sleep\x00999\x00"), "the victim did not start"
    yield p
    p.kill()
    p.wait()


@contextlib.contextmanager
def listener(user, kind, addr):
    """LISTENER as the test user; yields (port, accepted) where accepted()
    is the number of connections it has received so far."""
    p = subprocess.Popen([PYTHON, "-c", LISTENER, kind, addr], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=user_env(user), **as_user(user))
    try:
        line = p.stdout.readline().split()
        assert line[:1] == ["READY"], f"listener {kind} {addr} did not start: {line}"
        port = int(line[1]) if line[1] != "-" else None

        def accepted():
            time.sleep(0.2)
            p.stdin.write("?\n")
            p.stdin.flush()
            return int(p.stdout.readline())

        yield port, accepted
    finally:
        p.kill()
        p.wait()


def uniq(prefix="lazaret-native-"):
    return prefix + secrets.token_hex(6)


# ---------------------------------------------------------------- tests


def test_check_reports_full(nat):
    """--check names the mode and exits 0 on this machine (Landlock and user
    namespaces are available), in one line."""
    r = nat.run("--check")
    assert r.returncode == 0, f"status {r.returncode}, stderr {r.stderr!r}"
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("native: FULL"), f"stdout {r.stdout!r}"
    assert "Landlock ABI" in lines[0], f"stdout {r.stdout!r}"


def test_workspace_is_writable_and_reaches_the_host(nat):
    """The baseline the attacks are measured against: the command runs in
    /workspace, as the same uid, and what it writes there lands in the host
    directory, owned by the test user."""
    res = nat.py("""
R["cwd"] = os.getcwd()
R["uid"] = os.getuid()
R["write"] = t(write, "/workspace/made-inside", "hello\\n")
""")
    assert res["cwd"] == "/workspace", f"cwd inside: {res}"
    assert res["uid"] == nat.user.pw_uid, f"uid inside: {res}"
    assert res["write"] == "OK", f"writing the workspace: {res}"
    p = os.path.join(nat.work, "made-inside")
    assert snapshot(p) is not None and snapshot(p)[3] == b"hello\n", f"host file: {snapshot(p)}"
    assert os.stat(p).st_uid == nat.user.pw_uid, f"owner on the host: {os.stat(p).st_uid}"


def test_write_outside_workspace(nat):
    """Attack 1: write outside the workspace -- into /usr, /etc, /, the
    sandbox's /dev, a --ro path, the test user's real home and the launcher's
    HOME (both writable by this uid on the host), and the host's /tmp. The
    system paths fail (EROFS/EACCES), the homes are not there, /tmp is a
    private empty tmpfs; on the host nothing changed."""
    name = uniq()
    host_tmp = f"/tmp/{name}"
    with open(host_tmp, "w") as f:
        f.write("host marker\n")
    chown_user(host_tmp, nat.user)
    os.chmod(host_tmp, 0o666)
    home_marker = nat.write(os.path.join(nat.home, "marker"), "home marker\n")
    real_home_new = os.path.join(nat.user.pw_dir, name)
    # Outside /tmp: the sandbox has a /tmp of its own (see test_ro_paths).
    ro = nat.outside_tmp_dir("ro")
    ro_file = nat.write(os.path.join(ro, "file"), "read-only\n")
    watched = [host_tmp, home_marker, ro_file, "/etc/passwd", "/etc/hostname"]
    before = {p: snapshot(p) for p in watched}
    try:
        res = nat.py(f"""
name = {name!r}
R["tmp_before"] = t(read, "/tmp/" + name)
R["tmp_list"] = t(os.listdir, "/tmp")
for p in ["/usr/" + name, "/usr/bin/" + name, "/etc/" + name, "/" + name, "/lib/" + name,
          "/dev/" + name, {nat.home + '/marker'!r}, {real_home_new!r},
          {ro + '/file'!r}, {ro + '/' + name!r}]:
    R["write " + p] = t(write, p)
R["append /etc/passwd"] = t(write, "/etc/passwd", "evil::0:0::/:/bin/sh\\n", "a")
R["mkdir /etc/x"] = t(os.mkdir, "/etc/" + name)
R["unlink /etc/hostname"] = t(os.unlink, "/etc/hostname")
R["rename ro file"] = t(os.rename, {ro_file!r}, {ro + '/renamed'!r})
R["chmod ro file"] = t(os.chmod, {ro_file!r}, 0o777)
R["truncate ro file"] = t(os.truncate, {ro_file!r}, 0)
R["tmp_write"] = t(write, "/tmp/" + name)
""", ro=[ro])
    finally:
        after = {p: snapshot(p) for p in watched}
        real_home_made = os.path.lexists(real_home_new)
        if real_home_made:
            os.unlink(real_home_new)
        os.unlink(host_tmp)
    assert res["tmp_before"] == "ENOENT", f"the host's /tmp marker seen inside: {res['tmp_before']}"
    assert res["tmp_list"] == [], f"/tmp inside is not empty: {res['tmp_list']}"
    assert res["tmp_write"] == "OK", f"the private /tmp is not writable: {res['tmp_write']}"
    denied = {"EROFS", "EACCES", "EPERM"}
    for p in ["/usr/", "/usr/bin/", "/etc/", "/", "/lib/", "/dev/"]:
        got = res["write " + p + name]
        assert got in denied, f"write {p}{name}: expected one of {denied}, got {got}"
    for p in [nat.home + "/marker", real_home_new]:
        got = res["write " + p]
        assert got in {"ENOENT", "EACCES"}, f"write to a host home {p}: expected ENOENT/EACCES, got {got}"
    for k in [f"write {ro}/file", f"write {ro}/{name}", "append /etc/passwd", "mkdir /etc/x",
              "unlink /etc/hostname", "rename ro file", "chmod ro file", "truncate ro file"]:
        assert res[k] in denied, f"{k}: expected one of {denied}, got {res[k]}"
    for p in watched:
        assert after[p] == before[p], f"{p} changed on the host: {before[p]} -> {after[p]}"
    assert not real_home_made, f"{real_home_new} was created in the test user's real home"
    assert sorted(os.listdir(ro)) == ["file"], f"--ro directory on the host: {os.listdir(ro)}"


def test_masked_file_and_directory(nat):
    """Attack 2: read a --mask'ed secret file (empty or unreadable), list a
    masked directory (empty), and try to get around the masks: through
    /proc/self/cwd, by unmounting, renaming, unlinking or hard-linking the
    masked file, and by writing into the masked directory. The host's
    secrets are unchanged and not copied anywhere."""
    secret = nat.write("secret.env", "API_KEY=hunter2-native\n", 0o600)
    sdir = nat.mkdir("secrets")
    key = nat.write("secrets/id_ed25519", "PRIVATE KEY native\n", 0o600)
    before = {p: snapshot(p) for p in (secret, key)}
    res = nat.py(r"""
R["read"] = t(read, "/workspace/secret.env")
R["read via cwd"] = t(read, "/proc/self/cwd/secret.env")
R["list"] = t(os.listdir, "/workspace/secrets")
R["read key"] = t(read, "/workspace/secrets/id_ed25519")
R["write in dir"] = t(write, "/workspace/secrets/new")
R["rename file"] = t(os.rename, "/workspace/secret.env", "/workspace/moved.env")
R["unlink file"] = t(os.unlink, "/workspace/secret.env")
R["link file"] = t(os.link, "/workspace/secret.env", "/workspace/hard.env")
R["rename dir"] = t(os.rename, "/workspace/secrets", "/workspace/moved-secrets")
R["list after"] = t(os.listdir, "/workspace")
""", mask=[secret, sdir])
    ops = nat.attack_run("umount", "/workspace/secret.env", "umount", "/workspace/secrets", mask=[secret, sdir])
    assert res["read"] in ("READ:", "EACCES"), f"reading the masked file: {res['read']}"
    assert res["read via cwd"] in ("READ:", "EACCES"), f"reading it through /proc/self/cwd: {res['read via cwd']}"
    # An empty read-only tmpfs.
    assert res["list"] == [], f"listing the masked directory: {res['list']}"
    assert res["read key"] in ("ENOENT", "EACCES"), f"reading a file of the masked directory: {res['read key']}"
    assert res["write in dir"] in ("EROFS", "EACCES"), f"writing into the masked directory: {res['write in dir']}"
    for k in ("rename file", "unlink file", "link file", "rename dir"):
        assert res[k] != "OK", f"{k} succeeded on a mask"
    for k, v in ops.items():
        assert v == "EPERM", f"{k}: expected EPERM, got {v}"
    for p in (secret, key):
        assert snapshot(p) == before[p], f"{p} changed on the host"
    assert sorted(os.listdir(sdir)) == ["id_ed25519"], f"masked dir on the host: {os.listdir(sdir)}"
    for d, _, files in os.walk(nat.work):
        for f in files:
            p = os.path.join(d, f)
            if p in (secret, key) or os.path.islink(p):
                continue
            with open(p, "rb") as fh:
                assert b"hunter2-native" not in fh.read(), f"the secret was copied to {p}"


def test_ro_paths(nat):
    """--ro PATH is visible read-only at the same path, wherever it is on
    the host -- also below the host's /tmp (where the sandbox has a private
    /tmp of its own): its files can be read, not written, renamed or
    removed, and the host's copy is unchanged."""
    ro_var = nat.outside_tmp_dir("ro")
    ro_tmp = nat.mkdir(os.path.join(nat.base, "ro-in-tmp"))
    files = [nat.write(os.path.join(d, "file"), f"content of {d}\n") for d in (ro_var, ro_tmp)]
    before = {p: snapshot(p) for p in files}
    res = nat.py(f"""
for d in {[ro_var, ro_tmp]!r}:
    R["read " + d] = t(read, d + "/file")
    R["write " + d] = t(write, d + "/file")
    R["create " + d] = t(write, d + "/new")
    R["unlink " + d] = t(os.unlink, d + "/file")
""", ro=[ro_var, ro_tmp])
    for d in (ro_var, ro_tmp):
        assert res["read " + d] == f"READ:content of {d}\n", f"reading {d}/file inside: {res['read ' + d]}"
        for op in ("write", "create", "unlink"):
            got = res[f"{op} {d}"]
            assert got in ("EROFS", "EACCES"), f"{op} in --ro {d}: expected EROFS/EACCES, got {got}"
    for p in files:
        assert snapshot(p) == before[p], f"{p} changed on the host"


def test_ro_bind_over_a_file_and_a_link_in_etc(nat):
    """Issue 45: a file bound over one of the host's in the read-only /etc
    (the policy's resolv.conf, when the sandbox runs in the network
    sidecar's namespace), and over a symbolic link there (Ubuntu's
    resolv.conf is one; here /etc/os-release -> ../usr/lib/os-release):
    the link is followed inside the new root, never out of it, the sandbox
    reads the bound file by either name, and the host's files are
    unchanged."""
    link = os.readlink("/etc/os-release") if os.path.islink("/etc/os-release") else None
    if link != "../usr/lib/os-release":
        pytest.skip("this host's /etc/os-release is not the link ../usr/lib/os-release the test binds over")
    src = nat.write(os.path.join(nat.base, "resolv"), "nameserver 192.0.2.53\n")
    before = {p: snapshot(p) for p in ("/etc/resolv.conf", "/usr/lib/os-release")}
    r = nat.run("--workspace", nat.work, "--ro-bind", f"{src}:/etc/resolv.conf", "--ro-bind",
                f"{src}:/etc/os-release", "--", "/bin/sh", "-c",
                "cat /etc/resolv.conf /etc/os-release /usr/lib/os-release; readlink /etc/os-release; "
                "echo x > /etc/resolv.conf || echo refused")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "nameserver 192.0.2.53\n" * 3 + "../usr/lib/os-release\nrefused\n", r.stdout + r.stderr
    for p, snap in before.items():
        assert snapshot(p) == snap, f"{p} changed on the host"


def test_share_net_keeps_the_callers_network_namespace(nat):
    """--share-net (issue 45: Lazaret starts the holder so in its network
    sidecar's namespace): no network namespace of its own, the caller's
    kept, TCP not refused by Landlock; the same user inside; FS-ONLY
    refuses it. Here the caller's is the host's, so a listener of the
    test's on loopback answers; without --share-net it does not."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    script = ("readlink /proc/self/ns/net; id -u; "
              f"{PYTHON} -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3); print(\"tcp ok\")'")
    try:
        shared = nat.run("--workspace", nat.work, "--share-net", "--", "/bin/sh", "-c", script)
        own = nat.run("--workspace", nat.work, "--", "/bin/sh", "-c", script)
    finally:
        srv.close()
    host = os.readlink("/proc/self/ns/net")
    assert shared.returncode == 0, shared.stderr
    assert shared.stdout == f"{host}\n{nat.user.pw_uid}\ntcp ok\n", shared.stdout + shared.stderr
    assert own.stdout.splitlines()[:2] != [host, str(nat.user.pw_uid)] and "tcp ok" not in own.stdout, own.stdout
    r = nat.run("--workspace", nat.work, "--mode", "fs-only", "--share-net", "--", "/bin/true")
    assert r.returncode == 125 and "--share-net needs FULL mode" in r.stderr, r.stderr


def test_mask_survives_renaming_its_parent(nat):
    """Attack 2b (a mask bypass that lasts): the masked file itself cannot be
    moved (a mount point), but its parent directory can be renamed from
    inside; the host's secret then sits at another name. A later run with
    the same --mask must not show it: the launcher either refuses (the
    masked path is gone) or the secret stays unreadable."""
    sub = nat.mkdir("sub")
    secret = nat.write("sub/secret.env", "API_KEY=hunter2-rename\n", 0o600)
    r1 = nat.py(r"""
R["read"] = t(read, "/workspace/sub/secret.env")
R["mv"] = t(os.rename, "/workspace/sub", "/workspace/sub2")
""", mask=[secret])
    assert "hunter2" not in r1["read"], f"first run read the secret: {r1}"
    r2 = nat.sandbox([PYTHON, "-c", PRELUDE + r"""
for p in ["/workspace/sub/secret.env", "/workspace/sub2/secret.env"]:
    R[p] = t(read, p)
""" + EPILOGUE], mask=[secret])
    leaked = r2.returncode == 0 and "hunter2" in r2.stdout
    assert not leaked, (f"the renamed parent ({r1['mv']}) took the secret out of the mask: "
                        f"second run printed {r2.stdout!r}")
    if r2.returncode != 0:
        one_error_line(r2)
    print(f"rename of the parent: {r1['mv']}; second run: {r2.returncode} {r2.stdout!r} {r2.stderr!r}")


@pytest.fixture
def fake_ssh_key(test_user):
    """~/.ssh/id_rsa in the test user's real home: a fake one made here if
    there is none (and removed afterwards), else the existing one untouched."""
    sshdir = os.path.join(test_user.pw_dir, ".ssh")
    key = os.path.join(sshdir, "id_rsa")
    made_dir = not os.path.exists(sshdir)
    made_key = not os.path.lexists(key)
    if made_dir:
        os.mkdir(sshdir, 0o700)
        chown_user(sshdir, test_user)
    if made_key:
        with open(key, "w") as f:
            f.write("-----BEGIN OPENSSH PRIVATE KEY-----\nfake lazaret-native key\n")
        chown_user(key, test_user)
        os.chmod(key, 0o600)
    yield key
    if made_key:
        os.unlink(key)
    if made_dir:
        os.rmdir(sshdir)


def test_host_home_ssh_key(nat, fake_ssh_key):
    """Attack 3: read the test user's ~/.ssh/id_rsa (readable by this uid on
    the host) by its host path, and the same in the launcher's HOME: ENOENT
    or EACCES. /home holds only the sandbox's own empty home, HOME points
    at it."""
    caller_key = nat.write(os.path.join(nat.home, ".ssh", "id_rsa"), "fake caller key\n", 0o600)
    chown_user(os.path.dirname(caller_key), nat.user)
    before = snapshot(fake_ssh_key)
    res = nat.py(f"""
R["real"] = t(read, {fake_ssh_key!r})
R["real dir"] = t(os.listdir, {os.path.dirname(fake_ssh_key)!r})
R["caller"] = t(read, {caller_key!r})
R["in HOME"] = t(read, os.path.expanduser("~/.ssh/id_rsa"))
R["HOME"] = os.environ.get("HOME")
R["home list"] = t(os.listdir, os.environ.get("HOME", "/nonexistent"))
R["/home"] = t(os.listdir, "/home")
R["/root"] = t(os.listdir, "/root")
""")
    for k in ("real", "real dir", "caller", "in HOME"):
        assert res[k] in ("ENOENT", "EACCES"), f"{k}: expected ENOENT/EACCES, got {res[k]}"
    assert res["HOME"] == "/home/sandbox", f"HOME inside: {res['HOME']}"
    assert res["home list"] == [], f"the sandbox's home is not empty: {res['home list']}"
    assert res["/home"] == ["sandbox"], f"/home inside: {res['/home']}"
    assert res["/root"] in ("ENOENT", "EACCES"), f"/root inside: {res['/root']}"
    assert snapshot(fake_ssh_key) == before, "the key changed on the host"


def test_symlink_out_of_workspace(nat, fake_ssh_key):
    """Attack 4: symbolic links planted in the workspace that point outside
    it -- to the real home's key (absolute and relative), the home directory,
    the launcher's HOME, the host's /tmp -- are followed inside: reading and
    writing through them fail with ENOENT or EACCES; the host's files are
    unchanged."""
    name = uniq()
    host_tmp = f"/tmp/{name}"
    with open(host_tmp, "w") as f:
        f.write("host tmp file\n")
    chown_user(host_tmp, nat.user)
    caller_file = nat.write(os.path.join(nat.home, "notes"), "caller home\n")
    links = {
        "l-key": fake_ssh_key,
        "l-key-rel": "../../../../.." + fake_ssh_key,
        "l-home": nat.user.pw_dir,
        "l-caller": caller_file,
        "l-tmp": host_tmp,
    }
    for ln, target in links.items():
        os.symlink(target, os.path.join(nat.work, ln))
        os.lchown(os.path.join(nat.work, ln), nat.user.pw_uid, nat.user.pw_gid)
    watched = [fake_ssh_key, caller_file, host_tmp]
    before = {p: snapshot(p) for p in watched}
    try:
        res = nat.py(f"""
for ln in {sorted(links)!r}:
    R["read " + ln] = t(read, "/workspace/" + ln)
    R["write " + ln] = t(write, "/workspace/" + ln)
R["list l-home"] = t(os.listdir, "/workspace/l-home")
R["key via dir"] = t(read, "/workspace/l-home/.ssh/id_rsa")
""")
    finally:
        after = {p: snapshot(p) for p in watched}
        os.unlink(host_tmp)
    for ln in links:
        assert res["read " + ln] in ("ENOENT", "EACCES"), f"reading through {ln}: {res['read ' + ln]}"
    for k in ("list l-home", "key via dir"):
        assert res[k] in ("ENOENT", "EACCES"), f"{k}: {res[k]}"
    for ln in ("l-key", "l-key-rel", "l-home", "l-caller"):
        assert res["write " + ln] in ("ENOENT", "EACCES"), f"writing through {ln}: {res['write ' + ln]}"
    # l-tmp names the host's /tmp, which is the sandbox's private one: a write
    # may create a file there, but never the host's.
    for p in watched:
        assert after[p] == before[p], f"{p} changed on the host: {before[p]} -> {after[p]}"


def test_namespaces_and_mounts_denied(nat):
    """Attack 5: after creating a file (allowed), try `unshare -U`, `mount -t
    tmpfs`, and the raw calls: unshare and clone with CLONE_NEW*, mount,
    bind mount, umount, pivot_root, setns -> EPERM; clone3 -> ENOSYS. On the
    host, unprivileged user namespaces do work for this user (the control),
    so the denial is the sandbox's. Nothing of the attempts reaches the
    host."""
    control = nat.attack_host("clone-newuser", "unshare-user")
    r = nat.sandbox(["/bin/sh", "-c",
                     "echo ok > /workspace/before && unshare -U true; echo unshare=$?; "
                     "mount -t tmpfs none /tmp; echo mount=$?; echo done > /workspace/after"])
    assert r.returncode == 0, f"status {r.returncode}, stderr {r.stderr!r}"
    assert "unshare=0" not in r.stdout and "unshare=" in r.stdout, f"unshare -U: {r.stdout!r} {r.stderr!r}"
    assert "mount=0" not in r.stdout and "mount=" in r.stdout, f"mount -t tmpfs: {r.stdout!r} {r.stderr!r}"
    assert "Operation not permitted" in r.stderr, f"unshare/mount errors: {r.stderr!r}"
    res = nat.attack_run("unshare-user", "unshare-mount", "unshare-net", "clone-newuser", "clone3",
                         "mount-tmpfs", "/tmp", "bind", "/workspace", "/tmp", "umount", "/workspace",
                         "umount", "/proc", "pivot_root", "setns")
    expected = {k: "EPERM" for k in res}
    expected["clone3"] = "ENOSYS"
    assert res == expected, f"expected {expected}, got {res}"
    assert sorted(x for x in os.listdir(nat.work) if x != ".attack") == ["after", "before"], \
        f"workspace on the host: {os.listdir(nat.work)}"
    if control.get("clone-newuser") != "OK" or control.get("unshare-user") != "OK":
        print(f"note: user namespaces fail on the host too: {control}")


def test_trace_and_read_host_process(nat, host_sleep):
    """Attack 6: ptrace (attach, seize) and process_vm_readv of a host
    process of the same uid (a sleep this test started) and of pytest
    itself; also of the sandbox's own init and of itself, and
    PTRACE_TRACEME. Each fails (EPERM, or ESRCH for pids the sandbox cannot
    see); the victim is alive and untraced. The control: on the host the same
    uid can read the victim's memory."""
    victim = host_sleep.pid
    with open(f"/proc/{victim}/maps") as f:
        addr = f.readline().split("-")[0]
    control = nat.attack_host("vmread", str(victim), addr)
    me = str(os.getpid())
    res = nat.attack_run("ptrace-attach", str(victim), "ptrace-seize", str(victim),
                         "vmread", str(victim), addr, "ptrace-attach", me, "vmread", me, addr,
                         "ptrace-attach", "1", "vmread", "1", addr, "vmread", "self", "self",
                         "vmwrite", "self", "ptrace-traceme")
    for k, v in res.items():
        host = k.split()[1] in (str(victim), me) if len(k.split()) > 1 else False
        ok = {"EPERM", "ESRCH"} if host else {"EPERM"}
        assert v in ok, f"{k}: expected one of {ok}, got {v}"
    assert len(res) == 10, f"not every operation ran: {res}"
    assert alive(victim), "the victim died"
    with open(f"/proc/{victim}/status") as f:
        tracer = [ln for ln in f if ln.startswith("TracerPid:")]
    assert tracer == ["TracerPid:\t0\n"], f"the victim is traced: {tracer}"
    if control.get(f"vmread {victim} {addr}") != "OK":
        print(f"note: the control read failed on the host too: {control}")


def test_proc_of_init_is_closed(nat):
    """Attack 6b: the sandbox's PID 1 (our init, outside Landlock and
    seccomp) must not be a way out: its memory, environment, root, cwd and
    open files are closed to the command, and /proc cannot be written. The
    command itself has no capabilities, no_new_privs and a seccomp filter."""
    res = nat.py(r"""
R["mem r"] = t(read, "/proc/1/mem")
R["mem w"] = t(lambda: open("/proc/1/mem", "r+b").close())
R["environ"] = t(read, "/proc/1/environ")
R["root"] = t(os.listdir, "/proc/1/root/")
R["cwd"] = t(os.listdir, "/proc/1/cwd/")
fds = t(os.listdir, "/proc/1/fd")
R["fds"] = fds
if isinstance(fds, list):
    for fd in fds:
        R["fd " + fd] = t(lambda: os.listdir("/proc/1/fd/" + fd) if os.path.isdir("/proc/1/fd/" + fd)
                          else read("/proc/1/fd/" + fd))
R["comm w"] = t(write, "/proc/self/comm", "x")
R["oom w"] = t(write, "/proc/self/oom_score_adj", "500")
R["sys w"] = t(write, "/proc/sys/kernel/hostname", "x")
st = {}
for ln in open("/proc/self/status"):
    k, _, v = ln.partition(":")
    st[k] = v.strip()
R["status"] = {k: st.get(k) for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")}
R["uid_map"] = open("/proc/self/uid_map").read().split()
""")
    for k in ("mem r", "mem w", "environ", "root", "cwd"):
        assert res[k] in ("EACCES", "EPERM"), f"/proc/1 {k}: expected EACCES/EPERM, got {res[k]}"
    for k, v in res.items():
        if k.startswith("fd "):
            assert v in ("EACCES", "EPERM", "ENOENT"), f"/proc/1/{k.replace(' ', '/')}: got {v}"
    for k in ("comm w", "oom w", "sys w"):
        assert res[k] in ("EACCES", "EROFS", "EPERM"), f"{k}: expected EACCES/EROFS, got {res[k]}"
    st = res["status"]
    assert st["CapEff"] == "0000000000000000" and st["CapPrm"] == "0000000000000000" \
        and st["CapAmb"] == "0000000000000000", f"capabilities of the command: {st}"
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", f"no_new_privs/seccomp: {st}"
    uid = str(nat.user.pw_uid)
    assert res["uid_map"] == [uid, uid, "1"], f"uid_map: {res['uid_map']}"


def test_kernel_interfaces_denied(nat):
    """Attack 7: io_uring_setup and userfaultfd (user-mode only, which the
    host allows this user: the control) fail with EPERM, and so do bpf,
    perf_event_open, the keyring calls, pidfd_getfd, kcmp, kexec and module
    loading."""
    ops = ["io_uring", "userfaultfd", "perf_event_open", "kcmp", "pidfd_getfd", "keyctl", "add_key"]
    control = nat.attack_host(*ops)
    res = nat.attack_run(*ops, "bpf", "request_key", "kexec_load", "init_module", "finit_module",
                         "delete_module")
    expected = {k: "EPERM" for k in ops + ["bpf", "request_key", "kexec_load", "init_module", "finit_module",
                                           "delete_module"]}
    assert res == expected, f"expected {expected}, got {res}"
    if control.get("io_uring") != "OK" or control.get("userfaultfd") != "OK":
        print(f"note: io_uring/userfaultfd fail on the host too: {control}")


def _make_ctty(slave):
    def pre():
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    return pre


def _pending(fd):
    """Bytes waiting in a terminal's input queue (read without blocking)."""
    out = b""
    while select.select([fd], [], [], 0.2)[0]:
        try:
            b = os.read(fd, 1024)
        except OSError:
            break
        if not b:
            break
        out += b
    return out


def test_tiocsti_denied(nat):
    """Attack 8: with a pty as controlling terminal and stdin, TIOCSTI (push
    input into the terminal: commands typed in the user's shell after the
    agent exits) on fd 0 and on /dev/tty -> EPERM; TIOCLINUX -> EPERM (a
    pty answers ENOTTY without the filter). The control: on the host the
    same uid can inject. Nothing reaches the terminal's input queue."""
    master, slave = pty.openpty()
    try:
        tty.setraw(slave)
        os.chown(os.ttyname(slave), nat.user.pw_uid, -1)
        attack = nat.attack
        ctl = subprocess.run([nat.attack_src, "tiocsti-fd", "0"], stdin=slave, capture_output=True, text=True,
                             timeout=30, env=user_env(nat.user), preexec_fn=_make_ctty(slave),
                             user=nat.user.pw_uid, group=nat.user.pw_gid, extra_groups=[], cwd="/")
        control = parse_attack(ctl.stdout)
        injected_control = _pending(slave)
        r = subprocess.run(nat.cmdline(nat.sandbox_args([attack, "tiocsti-fd", "0", "tiocsti-path", "/dev/tty",
                                                        "tioclinux-fd", "0"])),
                           stdin=slave, capture_output=True, text=True, timeout=60, cwd=nat.base,
                           preexec_fn=_make_ctty(slave))
        injected = _pending(slave)
    finally:
        os.close(master)
        os.close(slave)
    assert r.returncode == 0, f"status {r.returncode}, stderr {r.stderr!r}"
    res = parse_attack(r.stdout)
    assert res.get("tiocsti-fd 0") == "EPERM", f"TIOCSTI on fd 0: {res}"
    assert res.get("tiocsti-path /dev/tty") in ("EPERM", "ENXIO"), f"TIOCSTI on /dev/tty: {res}"
    assert res.get("tioclinux-fd 0") == "EPERM", f"TIOCLINUX on fd 0: {res}"
    assert b"X" not in injected, f"input injected into the terminal: {injected!r}"
    if control.get("tiocsti-fd 0") != "OK" or injected_control != b"X":
        print(f"note: TIOCSTI fails on the host too: {control} {injected_control!r}")


def test_kill_host_process(nat, host_sleep):
    """Attack 9: kill() of a host process of the same uid (SIGKILL and the
    probe signal 0), of pytest, and kill(-1, SIGKILL) (every process the
    caller may signal) -> ESRCH or EPERM for the named pids; the victim
    survives."""
    victim = str(host_sleep.pid)
    res = nat.attack_run("kill", victim, "0", "kill", victim, "9", "kill", str(os.getpid()), "0",
                         "kill", "-1", "9")
    for k in (f"kill {victim} 0", f"kill {victim} 9", f"kill {os.getpid()} 0"):
        assert res.get(k) in ("ESRCH", "EPERM"), f"{k}: expected ESRCH/EPERM, got {res}"
    time.sleep(0.3)
    assert host_sleep.poll() is None and alive(host_sleep.pid), "the victim was killed"


def test_abstract_socket_of_host(nat):
    """Attack 10: connect to an abstract unix socket the test user listens on
    in the host -> fails (ECONNREFUSED: another network namespace; EPERM:
    Landlock's scope). The listener accepted nothing; the control connect
    from the host is accepted."""
    name = uniq()
    with listener(nat.user, "abstract", name) as (_, accepted):
        res = nat.attack_run("abstract", name)
        got = accepted()
        s = socket.socket(socket.AF_UNIX)
        s.connect("\0" + name)
        s.close()
        control = accepted()
    assert res.get("abstract " + name) in ("ECONNREFUSED", "EPERM"), f"connect: {res}"
    assert got == 0, f"the host listener accepted {got} connections from the sandbox"
    assert control == 1, f"the control connection was not accepted: {control}"


def test_loopback_tcp_of_host(nat):
    """Attack 11: connect to the host's loopback TCP listener (IPv4, and
    IPv6 when the host has ::1), bind a TCP port, and send UDP to a host
    listener. Connect -> ENETUNREACH/EACCES, bind -> EACCES (Landlock), UDP
    -> ENETUNREACH; loopback is down inside; the listeners received nothing,
    while a control connection from the host is accepted."""
    with contextlib.ExitStack() as es:
        port, acc = es.enter_context(listener(nat.user, "tcp", "127.0.0.1"))
        uport, uacc = es.enter_context(listener(nat.user, "udp", "127.0.0.1"))
        ops = ["tcp", "127.0.0.1", str(port), "tcp-bind", "127.0.0.1", "0", "udp", "127.0.0.1", str(uport)]
        v6 = None
        if socket.has_ipv6 and os.path.exists("/proc/net/if_inet6"):
            with contextlib.suppress(OSError):
                v6port, v6acc = es.enter_context(listener(nat.user, "tcp6", "::1"))
                v6 = (v6port, v6acc)
                ops += ["tcp", "::1", str(v6port)]
        r = nat.sandbox([nat.attack] + ops)
        ifs = nat.py(r"""
import fcntl, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
R["ifs"] = [n for _, n in socket.if_nameindex()]
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
R["lo up"] = bool(flags & 1)
""")
        got, ugot = acc(), uacc()
        v6got = v6[1]() if v6 else 0
        c = socket.create_connection(("127.0.0.1", port))
        c.close()
        control = acc()
    assert r.returncode == 0, f"status {r.returncode}, stderr {r.stderr!r}"
    res = parse_attack(r.stdout)
    assert res.get(f"tcp 127.0.0.1 {port}") in ("ENETUNREACH", "EACCES"), f"TCP connect: {res}"
    assert res.get("tcp-bind 127.0.0.1 0") == "EACCES", f"TCP bind: {res}"
    assert res.get(f"udp 127.0.0.1 {uport}") in ("ENETUNREACH", "EACCES", "EPERM"), f"UDP send: {res}"
    if v6:
        assert res.get(f"tcp ::1 {v6[0]}") in ("ENETUNREACH", "EACCES", "EADDRNOTAVAIL"), f"TCP6: {res}"
    assert ifs["ifs"] == ["lo"], f"interfaces inside: {ifs}"
    assert ifs["lo up"] is False, f"loopback is up inside: {ifs}"
    assert (got, ugot, v6got) == (0, 0, 0), f"host listeners received (tcp, udp, tcp6) = {(got, ugot, v6got)}"
    assert control == 1, f"the control connection was not accepted: {control}"


def test_pathname_sockets_of_host(nat):
    """Attack 12: connect to pathname sockets the test user listens on in its
    real home and in the host's /tmp -> ENOENT/EACCES/ECONNREFUSED, and to
    the usual well-known sockets (the user's D-Bus, Docker, Podman, the
    system bus): /run, /var, /run/user do not exist inside. The listeners
    accepted nothing."""
    name = uniq()
    home_sock = os.path.join(nat.user.pw_dir, name + ".sock")
    tmp_sock = f"/tmp/{name}.sock"
    uid = nat.user.pw_uid
    wellknown = [f"/run/user/{uid}/bus", "/var/run/docker.sock", "/run/docker.sock",
                 f"/run/user/{uid}/podman/podman.sock", "/run/podman/podman.sock",
                 "/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket"]
    try:
        with listener(nat.user, "unix", home_sock) as (_, hacc), listener(nat.user, "unix", tmp_sock) as (_, tacc):
            res = nat.attack_run(*sum((["unix", p] for p in [home_sock, tmp_sock] + wellknown), []))
            paths = nat.py("""
for p in ["/run", "/var", "/run/user", "/var/run", "/root", "/srv", "/opt", "/mnt", "/media"]:
    R[p] = os.path.lexists(p)
""")
            got = (hacc(), tacc())
    finally:
        for p in (home_sock, tmp_sock):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
    ok = {"ENOENT", "EACCES", "ECONNREFUSED"}
    for p in [home_sock, tmp_sock] + wellknown:
        assert res.get("unix " + p) in ok, f"connect {p}: expected one of {ok}, got {res.get('unix ' + p)}"
    assert got == (0, 0), f"host listeners (home, /tmp) accepted {got}"
    present = [p for p, v in paths.items() if v]
    assert not present, f"host paths present inside: {present}"


def _marker_cmd(nat):
    # Relative: the working directory is the workspace in both modes.
    return ["/bin/sh", "-c", "echo ran > marker"]


@pytest.mark.parametrize("mode", ["auto", "fs-only"])
@pytest.mark.parametrize("abi", ["0", "bogus"])
def test_no_landlock_refuses(nat, abi, mode):
    """Attack 13: a kernel without Landlock (simulated with
    LAZARET_TEST_LANDLOCK_ABI=0; an unparsable value must count as none):
    the launcher refuses with 125 and one line naming Landlock, and the
    command never runs (its marker file is not created) -- FS-ONLY, which
    is Landlock alone, included. --check says the same. The same command
    without the variable creates the marker."""
    r = nat.sandbox(_marker_cmd(nat), env={"LAZARET_TEST_LANDLOCK_ABI": abi}, mode=mode)
    line = one_error_line(r)
    assert "landlock" in line.lower(), f"the error does not name Landlock: {line!r}"
    assert not os.path.exists(os.path.join(nat.work, "marker")), "the command ran without Landlock"
    c = nat.run("--mode", mode, "--check", env={"LAZARET_TEST_LANDLOCK_ABI": abi})
    assert c.returncode == EXIT_NATIVE, f"--check: status {c.returncode}, stdout {c.stdout!r} stderr {c.stderr!r}"
    assert "landlock" in (c.stdout + c.stderr).lower(), f"--check does not name Landlock: {c.stdout!r} {c.stderr!r}"
    ok = nat.sandbox(_marker_cmd(nat))
    assert ok.returncode == 0 and os.path.exists(os.path.join(nat.work, "marker")), \
        f"the control run failed: {ok.returncode} {ok.stderr!r}"


BAD_INPUTS = {
    # id: (args builder, words the one line must contain (any of))
    "no-workspace": (lambda n, cmd: ["--"] + cmd, ["--workspace", "workspace"]),
    "missing-workspace": (lambda n, cmd: ["--workspace", os.path.join(n.base, "nope"), "--"] + cmd,
                          ["nope"]),
    "workspace-is-file": (lambda n, cmd: ["--workspace", n.write(os.path.join(n.base, "afile"), "x"), "--"] + cmd,
                          ["afile"]),
    "unknown-option": (lambda n, cmd: ["--bogus-option", "--workspace", n.work, "--"] + cmd, ["bogus-option"]),
    "no-command": (lambda n, cmd: ["--workspace", n.work], ["command", "CMD"]),
    "no-command-after-dashes": (lambda n, cmd: ["--workspace", n.work, "--"], ["command", "CMD"]),
    "setenv-without-equals": (lambda n, cmd: ["--workspace", n.work, "--setenv", "NOEQUALS", "--"] + cmd,
                              ["NOEQUALS", "setenv"]),
    "bad-shm-size": (lambda n, cmd: ["--workspace", n.work, "--shm-size", "lots", "--"] + cmd,
                     ["lots", "shm-size"]),
    "missing-ro": (lambda n, cmd: ["--workspace", n.work, "--ro", os.path.join(n.base, "no-ro"), "--"] + cmd,
                   ["no-ro"]),
    "missing-mask": (lambda n, cmd: ["--workspace", n.work, "--mask", os.path.join(n.work, "no-such"), "--"] + cmd,
                     ["no-such"]),
    "mask-outside": (lambda n, cmd: ["--workspace", n.work, "--mask", "/etc/hostname", "--"] + cmd,
                     ["/etc/hostname", "mask"]),
    "mask-symlink-out": (lambda n, cmd: ["--workspace", n.work, "--mask", n.symlink_out, "--"] + cmd,
                         ["mask"]),
    "bad-mode": (lambda n, cmd: ["--mode", "bogus", "--workspace", n.work, "--"] + cmd, ["bogus"]),
    "fs-only-mask-outside": (lambda n, cmd: ["--mode", "fs-only", "--workspace", n.work, "--mask", "/etc/hostname",
                                             "--"] + cmd, ["/etc/hostname"]),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input(nat, case):
    """Attack 14: bad input -- no --workspace, a workspace that does not
    exist or is a file, an unknown option, no command, malformed --setenv
    and --shm-size, a missing --ro, a --mask outside the bound paths
    (directly, or through a symbolic link in the workspace): 125, one line
    'lazaret-native: ...' naming the cause, the command never ran, nothing
    created, no process left."""
    target = os.path.join(nat.user.pw_dir, ".bashrc")
    nat.symlink_out = os.path.join(nat.work, "out-link")
    os.symlink(target, nat.symlink_out)
    os.lchown(nat.symlink_out, nat.user.pw_uid, nat.user.pw_gid)
    host_marker = os.path.join(nat.base, "host-marker")
    cmd = ["/bin/sh", "-c", f"echo ran > /workspace/marker; echo ran > {host_marker}"]
    build, words = BAD_INPUTS[case]
    args = build(nat, cmd)
    before = sorted(os.listdir(nat.base))
    r = nat.run(*args)
    line = one_error_line(r)
    assert any(w.lower() in line.lower() for w in words), f"the error does not name the cause ({words}): {line!r}"
    assert not os.path.exists(os.path.join(nat.work, "marker")), "the command ran"
    assert not os.path.exists(host_marker), "the command ran on the host"
    assert sorted(os.listdir(nat.base)) == before, f"files created: {before} -> {sorted(os.listdir(nat.base))}"
    assert r.stdout == "", f"stdout: {r.stdout!r}"


@pytest.mark.parametrize("cmd,status", [
    (["/bin/sh", "-c", "exit 7"], 7),
    (["/bin/sh", "-c", "exit 0"], 0),
    (["/bin/sh", "-c", "kill -KILL $$"], 128 + 9),
    (["/bin/sh", "-c", "kill -TERM $$"], 128 + 15),
    (["/workspace/not-there"], None),
])
def test_exit_status_passed_through(nat, cmd, status):
    """Attack 15: the command's exit status is the launcher's (128+N for a
    command killed by signal N); a command that cannot be executed is not
    reported as success."""
    r = nat.sandbox(cmd)
    if status is None:
        assert r.returncode not in (0,), f"a missing command exited {r.returncode}: {r.stderr!r}"
        assert r.stderr.strip(), "no message for a missing command"
    else:
        assert r.returncode == status, f"{cmd}: expected {status}, got {r.returncode}, stderr {r.stderr!r}"


def test_proc_shows_only_the_sandbox(nat):
    """Attack 16: /proc lists only the sandbox's processes: PID 1 (init)
    and the command (PID 2); no host process (pytest's pid) is there."""
    me = os.getpid()
    res = nat.py(f"""
R["pids"] = sorted(int(x) for x in os.listdir("/proc") if x.isdigit())
R["self"] = os.getpid()
R["ppid"] = os.getppid()
R["host pid"] = os.path.exists("/proc/{me}")
R["init"] = t(read, "/proc/1/comm")
""")
    assert res["pids"] == [1, 2], f"pids in /proc: {res['pids']}"
    assert res["self"] == 2 and res["ppid"] == 1, f"pid {res['self']}, ppid {res['ppid']}"
    if me not in (1, 2):
        assert res["host pid"] is False, f"/proc/{me} (pytest) is visible inside"


def test_environment_is_clean(nat):
    """The command gets only PATH, HOME, TERM, LANG and --setenv values:
    nothing of the launcher's own environment (a token, SSH_AUTH_SOCK,
    DBUS_SESSION_BUS_ADDRESS) leaks in."""
    env = {"TERM": "xterm-lazaret", "LAZARET_SECRET_TOKEN": "tok-native", "SSH_AUTH_SOCK": "/tmp/agent.sock",
           "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/1/bus", "LANG": "de_DE.UTF-8"}
    res = nat.py('R["env"] = dict(os.environ)', env=env, setenv=["FOO=bar baz", "EMPTY="])
    e = res["env"]
    expected = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/home/sandbox", "TERM": "xterm-lazaret", "LANG": "C.UTF-8",
                "FOO": "bar baz", "EMPTY": ""}
    assert e == expected, f"environment inside: expected {expected}, got {e}"


def test_dev_and_shm(nat):
    """/dev holds only null, zero, full, random, urandom and tty as devices
    (no disk, no /dev/mem, no ptmx of the host), and /dev/shm is a private
    tmpfs limited by --shm-size: writing past it fails with ENOSPC and the
    host's /dev/shm is untouched."""
    name = uniq()
    res = nat.py(f"""
import stat
devs = {{}}
for n in os.listdir("/dev"):
    st = os.lstat("/dev/" + n)
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        devs[n] = [os.major(st.st_rdev), os.minor(st.st_rdev)]
R["devs"] = devs
R["dev"] = sorted(os.listdir("/dev"))
R["shm list"] = t(os.listdir, "/dev/shm")
R["shm small"] = t(write, "/dev/shm/{name}", "x" * 1000)
R["shm big"] = t(write, "/dev/shm/{name}-big", "x" * (3 << 20))
R["zero"] = t(lambda: len(open("/dev/zero", "rb").read(10)))
R["null w"] = t(write, "/dev/null", "x")
""", shm=1 << 20)
    assert set(res["devs"]) == DEVICES, f"devices in /dev: {res['devs']} (all of /dev: {res['dev']})"
    majors = {"null": [1, 3], "zero": [1, 5], "full": [1, 7], "random": [1, 8], "urandom": [1, 9], "tty": [5, 0]}
    assert res["devs"] == majors, f"device numbers: {res['devs']}"
    assert res["shm list"] == [], f"/dev/shm inside is not empty: {res['shm list']}"
    assert res["shm small"] == "OK", f"/dev/shm write: {res['shm small']}"
    assert res["shm big"] == "ENOSPC", f"writing 3 MiB into a 1 MiB /dev/shm: {res['shm big']}"
    assert res["zero"] == 10 and res["null w"] == "OK", f"devices unusable: {res}"
    assert not any(n.startswith(name) for n in os.listdir("/dev/shm")), "the host's /dev/shm was written"


def _sleep_1000_pids(uid):
    return {p for p in all_pids() if proc_uid(p) == uid and alive(p) and proc_cmdline(p) == b"sleep\x001000\x00"}


def test_sigkill_of_launcher_ends_the_sandbox(nat):
    """Attack 17 (escape by orphaning): `sleep 1000 & sleep 1000` runs in the
    sandbox; the launcher is killed with SIGKILL; within 5 s every process of
    the sandbox is gone -- no `sleep 1000` of the test user that this test
    started remains, and neither the setup process nor init."""
    uid = nat.user.pw_uid
    preexisting = _sleep_1000_pids(uid)
    p = subprocess.Popen(nat.cmdline(nat.sandbox_args(["/bin/sh", "-c", "sleep 1000 & sleep 1000"])),
                         cwd=nat.base, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ours = []
    try:
        def launcher():
            kids = [c for c in descendants(p.pid) if proc_ppid(c) == p.pid and proc_uid(c) == uid]
            return kids[0] if kids else None
        lpid = wait_until(launcher, timeout=10)
        assert lpid, "the launcher did not start"

        def sleeps():
            s = [c for c in descendants(lpid) if proc_cmdline(c) == b"sleep\x001000\x00"]
            return s if len(s) == 2 else None
        found = wait_until(sleeps, timeout=10)
        ours = descendants(lpid)
        assert found, f"the two sleeps did not start; the tree: {[(c, proc_cmdline(c)) for c in ours]}"
        assert set(found).isdisjoint(preexisting)
        os.kill(lpid, signal.SIGKILL)
        gone = wait_until(lambda: not any(alive(c) for c in ours), timeout=5)
        left = [(c, proc_cmdline(c)) for c in ours if alive(c)]
        new_sleeps = _sleep_1000_pids(uid) - preexisting
        assert gone and not new_sleeps, f"left after SIGKILL of the launcher: {left}; sleeps {new_sleeps}"
        p.wait(timeout=10)
    finally:
        kill_ours([c for c in ours if alive(c)])
        if p.poll() is None:
            p.kill()
            p.wait()


def test_background_processes_end_with_the_command(nat):
    """Escape by daemonizing: the command starts `sleep 1000` in the
    background (in a new session, detached from its terminal) and exits 3.
    The launcher returns 3 promptly, and the sleep does not outlive the
    sandbox."""
    uid = nat.user.pw_uid
    preexisting = _sleep_1000_pids(uid)
    p = subprocess.Popen(nat.cmdline(nat.sandbox_args(
        [PYTHON, "-c", "import os, sys\n"
                       "if os.fork() == 0:\n"
                       "    os.setsid()\n"
                       "    if os.fork() == 0:\n"
                       "        os.execv('/usr/bin/sleep', ['sleep', '1000'])\n"
                       "    os._exit(0)\n"
                       "os.wait()\n"
                       "sys.exit(3)\n"])),
        cwd=nat.base, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ours = []
    try:
        try:
            _, err = p.communicate(timeout=20)
            status = p.returncode
        except subprocess.TimeoutExpired:
            status, err = None, b""
        ours = [q for q in _sleep_1000_pids(uid) - preexisting]
        gone = wait_until(lambda: not (_sleep_1000_pids(uid) - preexisting), timeout=5)
        assert status == 3, f"the launcher returned {status} (None: still running after 20 s), stderr {err!r}"
        assert gone, f"a background sleep outlived the sandbox: {_sleep_1000_pids(uid) - preexisting}"
    finally:
        if p.poll() is None:
            ours += [c for c in descendants(p.pid)]
        kill_ours([c for c in ours if alive(c)])
        if p.poll() is None:
            p.kill()
            p.wait()


def test_sigterm_of_launcher_ends_the_command(nat):
    """SIGTERM to the launcher (how a caller stops a sandbox) reaches the
    command: the launcher exits 128+15 and nothing of the sandbox remains."""
    uid = nat.user.pw_uid
    p = subprocess.Popen(nat.cmdline(nat.sandbox_args(["/usr/bin/sleep", "1000"])), cwd=nat.base,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ours = []
    try:
        lpid = wait_until(lambda: next((c for c in descendants(p.pid)
                                        if proc_ppid(c) == p.pid and proc_uid(c) == uid), None), timeout=10)
        assert lpid, "the launcher did not start"
        assert wait_until(lambda: any(proc_cmdline(c) == b"/usr/bin/sleep\x001000\x00" for c in descendants(lpid)),
                          timeout=10), "the command did not start"
        ours = descendants(lpid)
        os.kill(lpid, signal.SIGTERM)
        p.wait(timeout=10)
        assert p.returncode == 128 + 15, f"status after SIGTERM: {p.returncode}, stderr {p.stderr.read()!r}"
        assert wait_until(lambda: not any(alive(c) for c in ours), timeout=5), \
            f"left after SIGTERM: {[(c, proc_cmdline(c)) for c in ours if alive(c)]}"
    finally:
        kill_ours([c for c in ours if alive(c)])
        if p.poll() is None:
            p.kill()
            p.wait()


# ---------------------------------------------------------------- FS-ONLY

FS = "fs-only"


def _pids_of_cmdline(uid, cmdline):
    return {p for p in all_pids() if proc_uid(p) == uid and alive(p) and proc_cmdline(p) == cmdline}


def _env_of(pid):
    """The environment of a process (pytest runs as root), as a dict."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    return dict(x.decode().split("=", 1) for x in raw.split(b"\0") if b"=" in x)


def _landlock_abi(nat):
    r = nat.run("--mode", FS, "--check")
    assert r.returncode == 0, f"--check: {r.returncode} {r.stderr!r}"
    return int(r.stdout.split("Landlock ABI ")[1].split(";")[0])


def test_fs_only_workspace_and_masks(nat):
    """FS-ONLY: the command runs at the workspace's host path as the same
    uid, with HOME = TMPDIR a private 0700 directory below /tmp. The
    workspace is writable; a --mask'ed file and the files of a --mask'ed
    directory cannot be read or written (EACCES), while their siblings, at
    every level of the way down to the masks, can be read and written.
    Linking or moving a masked file or directory to where it could be read
    fails (EXDEV: Landlock's refer check); the host's secrets are unchanged
    and copied nowhere. A file created later right in a directory on the
    way to a mask cannot be read back (the documented limit)."""
    work = os.path.realpath(nat.work)
    files = {
        "README": nat.write("README", "top level\n"),
        "sub/sibling.txt": nat.write("sub/sibling.txt", "sibling\n"),
        "sub/deeper/file": nat.write("sub/deeper/file", "deeper\n"),
        "other/file": nat.write("other/file", "other\n"),
    }
    secret = nat.write("sub/secret.env", "API_KEY=hunter2-fsonly\n", 0o600)
    sdir = nat.mkdir("secrets")
    key = nat.write("secrets/id_ed25519", "PRIVATE KEY hunter2-fsonly\n", 0o600)
    for d in ("sub", "sub/deeper", "other"):
        chown_user(os.path.join(nat.work, d), nat.user)
    before = {p: snapshot(p) for p in (secret, key)}
    r = nat.sandbox([PYTHON, "-c", PRELUDE + f"""
import stat
w = {work!r}
R["cwd"] = os.getcwd()
R["uid"] = os.getuid()
R["HOME"] = os.environ.get("HOME")
R["TMPDIR"] = os.environ.get("TMPDIR")
st = os.stat(os.environ["TMPDIR"])
R["tmp mode"] = stat.S_IMODE(st.st_mode)
R["tmp owner"] = st.st_uid
R["tmp write"] = t(write, os.environ["TMPDIR"] + "/f", "tmp\\n")
R["tmp read"] = t(read, os.environ["TMPDIR"] + "/f")
R["read secret"] = t(read, w + "/sub/secret.env")
R["read secret rel"] = t(read, "sub/secret.env")
R["write secret"] = t(write, w + "/sub/secret.env", "x", "a")
R["read key"] = t(read, w + "/secrets/id_ed25519")
R["write key"] = t(write, w + "/secrets/id_ed25519", "x", "a")
for p in {sorted(files)!r}:
    R["read " + p] = t(read, w + "/" + p)
    R["append " + p] = t(write, w + "/" + p, "more\\n", "a")
R["new in deeper"] = t(write, w + "/sub/deeper/new", "new\\n")
R["read new in deeper"] = t(read, w + "/sub/deeper/new")
R["new dirs in other"] = t(os.makedirs, w + "/other/a/b")
R["new in chain dir"] = t(write, w + "/sub/made-later", "later\\n")
R["read new in chain dir"] = t(read, w + "/sub/made-later")
R["link secret"] = t(os.link, w + "/sub/secret.env", w + "/sub/deeper/hard.env")
R["rename secret"] = t(os.rename, w + "/sub/secret.env", w + "/sub/deeper/moved.env")
R["rename key dir"] = t(os.rename, w + "/secrets", w + "/other/secrets")
R["link key"] = t(os.link, w + "/secrets/id_ed25519", w + "/other/key")
""" + EPILOGUE], mask=[secret, sdir], mode=FS)
    assert r.returncode == 0, f"status {r.returncode}, stderr {r.stderr!r}"
    assert "hunter2" not in r.stdout + r.stderr, f"the secret was printed: {r.stdout!r}"
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["cwd"] == work, f"cwd inside: {res['cwd']} (expected the workspace's host path {work})"
    assert res["uid"] == nat.user.pw_uid, f"uid inside: {res}"
    tmp = res["TMPDIR"]
    assert tmp and tmp.startswith("/tmp/lazaret-native.") and res["HOME"] == tmp, f"HOME/TMPDIR: {res}"
    assert res["tmp mode"] == 0o700 and res["tmp owner"] == nat.user.pw_uid, f"the temp dir: {res}"
    assert (res["tmp write"], res["tmp read"]) == ("OK", "READ:tmp\n"), f"the temp dir is not usable: {res}"
    for k in ("read secret", "read secret rel", "write secret", "read key", "write key"):
        assert res[k] == "EACCES", f"{k}: expected EACCES, got {res[k]}"
    for p, host in files.items():
        assert res["read " + p].startswith("READ:"), f"reading {p}, a sibling of the masks: {res['read ' + p]}"
        assert res["append " + p] == "OK", f"writing {p}: {res['append ' + p]}"
        with open(host) as f:
            assert f.read().endswith("more\n"), f"the write to {p} did not land on the host"
    assert (res["new in deeper"], res["read new in deeper"]) == ("OK", "READ:new\n"), f"new file: {res}"
    assert res["new dirs in other"] == "OK", f"mkdir in the workspace: {res}"
    assert os.stat(os.path.join(nat.work, "sub/deeper/new")).st_uid == nat.user.pw_uid
    assert res["read new in chain dir"] == "EACCES", f"the documented limit changed: {res}"
    for k in ("link secret", "rename secret", "rename key dir", "link key"):
        assert res[k] in ("EXDEV", "EACCES"), f"{k}: expected EXDEV/EACCES, got {res[k]}"
    for p in (secret, key):
        assert snapshot(p) == before[p], f"{p} changed on the host"
    assert sorted(os.listdir(sdir)) == ["id_ed25519"], f"masked dir on the host: {os.listdir(sdir)}"
    for d, _, names in os.walk(nat.work):
        for f in names:
            p = os.path.join(d, f)
            if p in (secret, key) or os.path.islink(p):
                continue
            with open(p, "rb") as fh:
                assert b"hunter2" not in fh.read(), f"the secret was copied to {p}"


def test_fs_only_outside_is_denied(nat, fake_ssh_key):
    """FS-ONLY: nothing of the host outside the rules can be read or
    written, though the uid may on the host: the test user's real home (its
    key, a listing, a new file), the launcher's HOME, 0666 markers of the
    test user's in /var/tmp and in the host's /tmp (and new files there),
    /proc; /etc and /usr cannot be written, a --ro directory only read. The
    host is unchanged."""
    name = uniq()
    vt = nat.outside_tmp_dir("outside")
    vmark = nat.write(os.path.join(vt, "marker"), "var tmp marker\n", 0o666)
    host_tmp = f"/tmp/{name}"
    with open(host_tmp, "w") as f:
        f.write("host marker\n")
    chown_user(host_tmp, nat.user)
    os.chmod(host_tmp, 0o666)
    home_marker = nat.write(os.path.join(nat.home, "marker"), "home marker\n")
    real_home_new = os.path.join(nat.user.pw_dir, name)
    ro = nat.outside_tmp_dir("ro")
    ro_file = nat.write(os.path.join(ro, "file"), "read-only\n")
    watched = [fake_ssh_key, vmark, host_tmp, home_marker, ro_file, "/etc/passwd"]
    before = {p: snapshot(p) for p in watched}
    listings = {d: sorted(os.listdir(d)) for d in (vt, ro, nat.home, nat.user.pw_dir)}
    try:
        res = nat.py(f"""
for p in {[fake_ssh_key, vmark, host_tmp, home_marker]!r}:
    R["read " + p] = t(read, p)
    R["write " + p] = t(write, p, "pwned\\n", "a")
R["list home"] = t(os.listdir, {nat.user.pw_dir!r})
R["create in home"] = t(write, {real_home_new!r})
R["list /var/tmp dir"] = t(os.listdir, {vt!r})
R["create in /var/tmp dir"] = t(write, {vt + '/new'!r})
R["list /tmp"] = t(os.listdir, "/tmp")
R["create in /tmp"] = t(write, {host_tmp + '-new'!r})
R["proc"] = t(read, "/proc/self/status")
R["etc read"] = t(read, "/etc/passwd")
R["etc write"] = t(write, "/etc/{name}")
R["etc append"] = t(write, "/etc/passwd", "evil::0:0::/:/bin/sh\\n", "a")
R["usr write"] = t(write, "/usr/{name}")
R["ro read"] = t(read, {ro_file!r})
R["ro write"] = t(write, {ro_file!r}, "x", "a")
R["ro create"] = t(write, {ro + '/new'!r})
""", ro=[ro], mode=FS)
    finally:
        after = {p: snapshot(p) for p in watched}
        made = [p for p in (real_home_new, host_tmp + "-new") if os.path.lexists(p)]
        for p in made + [host_tmp]:
            os.unlink(p)
    for p in (fake_ssh_key, vmark, host_tmp, home_marker):
        for op in ("read", "write"):
            assert res[f"{op} {p}"] == "EACCES", f"{op} {p}: expected EACCES, got {res[f'{op} {p}']}"
    for k in ("list home", "create in home", "list /var/tmp dir", "create in /var/tmp dir", "list /tmp",
              "create in /tmp", "proc", "etc write", "etc append", "usr write", "ro write", "ro create"):
        assert res[k] == "EACCES", f"{k}: expected EACCES, got {res[k]}"
    assert res["etc read"].startswith("READ:root:"), f"/etc is not readable: {res['etc read']}"
    assert res["ro read"] == "READ:read-only\n", f"--ro is not readable: {res['ro read']}"
    assert not made, f"files created on the host: {made}"
    for p in watched:
        assert after[p] == before[p], f"{p} changed on the host"
    for d, names in listings.items():
        assert sorted(os.listdir(d)) == names, f"{d} changed on the host"


def test_fs_only_network_sockets(nat):
    """FS-ONLY has no network namespace: seccomp refuses every socket family
    but AF_UNIX with EAFNOSUPPORT -- TCP connect and bind, UDP, IPv6,
    netlink, packet -- while an AF_UNIX socketpair works. The host's
    loopback listeners receive nothing; a control connection from the host
    is accepted."""
    with contextlib.ExitStack() as es:
        port, acc = es.enter_context(listener(nat.user, "tcp", "127.0.0.1"))
        uport, uacc = es.enter_context(listener(nat.user, "udp", "127.0.0.1"))
        res = nat.attack_run("tcp", "127.0.0.1", str(port), "tcp-bind", "127.0.0.1", "0", "udp", "127.0.0.1",
                             str(uport), "tcp", "::1", str(port), mode=FS)
        py = nat.py("""
for n, fam, typ in [("inet6", socket.AF_INET6, socket.SOCK_STREAM), ("netlink", socket.AF_NETLINK, socket.SOCK_RAW),
                    ("packet", socket.AF_PACKET, socket.SOCK_RAW), ("inet dgram", socket.AF_INET, socket.SOCK_DGRAM)]:
    R[n] = t(lambda: socket.socket(fam, typ).close())
a, b = socket.socketpair()
a.sendall(b"ping")
R["pair"] = b.recv(4).decode()
R["unix stream"] = t(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
""", mode=FS)
        got = (acc(), uacc())
        socket.create_connection(("127.0.0.1", port)).close()
        control = acc()
    for k, v in res.items():
        assert v == "EAFNOSUPPORT", f"{k}: expected EAFNOSUPPORT, got {v}"
    assert len(res) == 4, f"not every operation ran: {res}"
    for k in ("inet6", "netlink", "packet", "inet dgram"):
        assert py[k] == "EAFNOSUPPORT", f"{k} socket: expected EAFNOSUPPORT, got {py[k]}"
    assert (py["pair"], py["unix stream"]) == ("ping", "OK"), f"AF_UNIX: {py}"
    assert got == (0, 0), f"host listeners (tcp, udp) received {got}"
    assert control == 1, f"the control connection was not accepted: {control}"


def test_fs_only_pathname_sockets_of_host(nat):
    """FS-ONLY, the pathname socket finding. Landlock (ABI 7 here; a right
    for it comes with ABI 9) guards neither the lookup of a path nor
    connect(2) to a Unix socket: without the seccomp rule the sandbox
    reached these listeners, as the control from the host does. So
    FS-ONLY refuses connect(2) (EACCES) and datagram Unix sockets (their
    sendto(2) names a path) outright: the test user's stream sockets in
    /tmp and in its home and a datagram socket in /tmp receive nothing, the
    well-known sockets fail, and -- the price -- a socket the command binds
    in its own TMPDIR cannot be connected to either. An address given to a
    stream socketpair is refused by the kernel."""
    name = uniq()
    home_sock = os.path.join(nat.user.pw_dir, name + ".sock")
    tmp_sock = f"/tmp/{name}.sock"
    dgram_sock = f"/tmp/{name}.dgram"
    uid = nat.user.pw_uid
    wellknown = [f"/run/user/{uid}/bus", "/var/run/docker.sock", "/run/docker.sock",
                 f"/run/user/{uid}/podman/podman.sock", "/run/dbus/system_bus_socket"]
    ops = ["unix", home_sock, "unix", tmp_sock, "unix-dgram", dgram_sock] + sum((["unix", p] for p in wellknown), [])
    try:
        with contextlib.ExitStack() as es:
            _, hacc = es.enter_context(listener(nat.user, "unix", home_sock))
            _, tacc = es.enter_context(listener(nat.user, "unix", tmp_sock))
            _, dacc = es.enter_context(listener(nat.user, "unix-dgram", dgram_sock))
            res = nat.attack_run(*ops, mode=FS)
            py = nat.py(f"""
import stat
for p in {[home_sock, tmp_sock]!r}:
    R["stat " + p] = t(lambda: stat.S_ISSOCK(os.stat(p).st_mode))
R["dgram socket"] = t(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close())
R["dgram pair"] = t(lambda: [s.close() for s in socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)] and None)
R["seqpacket pair"] = t(lambda: [s.close() for s in socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)]
                        and None)
a, b = socket.socketpair()
R["sendto via stream pair"] = t(a.sendto, b"x", {dgram_sock!r})
own = os.environ["TMPDIR"] + "/own.sock"
srv = socket.socket(socket.AF_UNIX)
R["own bind"] = t(srv.bind, own)
R["own listen"] = t(srv.listen, 1)
R["own connect"] = t(socket.socket(socket.AF_UNIX).connect, own)
""", mode=FS)
            got = (hacc(), tacc(), dacc())
            control = nat.attack_host("unix", home_sock, "unix", tmp_sock, "unix-dgram", dgram_sock)
            got_control = (hacc(), tacc(), dacc())
    finally:
        for p in (home_sock, tmp_sock, dgram_sock):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
    for k, v in res.items():
        assert v == "EACCES", f"{k}: expected EACCES, got {v}"
    assert len(res) == 3 + len(wellknown), f"not every operation ran: {res}"
    assert got == (0, 0, 0), f"host listeners (home, /tmp, datagram) received {got}"
    assert control == {f"unix {home_sock}": "OK", f"unix {tmp_sock}": "OK", f"unix-dgram {dgram_sock}": "OK"}, \
        f"the control from the host failed: {control}"
    assert got_control == (1, 1, 1), f"the control did not arrive: {got_control}"
    for k in ("dgram socket", "dgram pair", "own connect"):
        assert py[k] == "EACCES", f"{k}: expected EACCES, got {py[k]}"
    assert py["seqpacket pair"] == "OK", f"a seqpacket socketpair: {py}"
    assert py["sendto via stream pair"] in ("EISCONN", "EOPNOTSUPP"), f"sendto with an address: {py}"
    assert (py["own bind"], py["own listen"]) == ("OK", "OK"), f"bind/listen in TMPDIR: {py}"
    # The premise of the seccomp rule: the sockets' paths resolve inside,
    # although neither /tmp nor the home is granted.
    print(f"stat of the host's sockets inside: {[py['stat ' + p] for p in (home_sock, tmp_sock)]}")


def test_fs_only_host_ipc_denied(nat):
    """FS-ONLY has no IPC namespace: a System V shared memory segment and a
    POSIX message queue the test user made on the host are out of reach
    (shmget by key, shmat by id, mq_open by name -> EPERM), while the host
    (the control, same uid) reaches both."""
    key = str(0x4c5a0000 + secrets.randbelow(1 << 16))
    mq = "/" + uniq()
    made = nat.attack_host("shm-create", key, "mq-create", mq)
    shmid = None
    try:
        assert made == {f"shm-create {key}": "OK", f"mq-create {mq}": "OK"}, f"cannot make the objects: {made}"
        with open("/proc/sysvipc/shm") as f:
            for ln in f.readlines()[1:]:
                cols = ln.split()
                if int(cols[0]) == int(key):
                    shmid = cols[1]
        assert shmid is not None, "the segment is not in /proc/sysvipc/shm"
        ops = ["shmget", key, "shmat", shmid, "mq_open", mq]
        res = nat.attack_run(*ops, mode=FS)
        control = nat.attack_host(*ops)
    finally:
        cleanup = ["mq-unlink", mq] + (["shm-rm", shmid] if shmid else [])
        nat.attack_host(*cleanup)
    assert res == {f"shmget {key}": "EPERM", f"shmat {shmid}": "EPERM", f"mq_open {mq}": "EPERM"}, f"inside: {res}"
    assert set(control.values()) == {"OK"}, f"the control failed: {control}"


def test_fs_only_processes_and_kernel(nat, host_sleep):
    """FS-ONLY shares the host's PID namespace: a process of the test user's
    is in sight, yet cannot be traced or read (EPERM), nor signalled
    (EPERM: Landlock's signal scope, ABI 6); namespaces, mounts and io_uring
    are refused as in FULL (EPERM). The victim lives, untraced."""
    victim = str(host_sleep.pid)
    with open(f"/proc/{victim}/maps") as f:
        addr = f.readline().split("-")[0]
    res = nat.attack_run("ptrace-attach", victim, "vmread", victim, addr, "kill", victim, "0", "kill", victim, "9",
                         "unshare-user", "clone-newuser", "mount-tmpfs", "/tmp", "io_uring", "userfaultfd", "bpf",
                         mode=FS)
    abi = _landlock_abi(nat)
    for k, v in res.items():
        if k.startswith("kill ") and abi < 6:
            continue
        assert v == "EPERM", f"{k}: expected EPERM, got {v}"
    assert len(res) == 10, f"not every operation ran: {res}"
    time.sleep(0.2)
    assert host_sleep.poll() is None and alive(host_sleep.pid), "the victim was killed"
    with open(f"/proc/{victim}/status") as f:
        assert "TracerPid:\t0\n" in f.readlines(), "the victim is traced"
    if abi < 6:
        print(f"note: Landlock ABI {abi} cannot scope signals: {res}")


def test_fs_only_when_user_namespaces_are_missing(nat):
    """LAZARET_TEST_NO_USERNS=1 (a host without user namespaces): --check
    reports FS-ONLY with the Landlock ABI and the reason, and the default
    mode (auto) runs the command in FS-ONLY (at the workspace's host path,
    HOME a private temp dir); --mode full fails closed with 125 and one line
    naming user namespaces, the command never run, and so does its --check.
    Without the variable, auto is FULL (/workspace)."""
    env = {"LAZARET_TEST_NO_USERNS": "1"}
    c = nat.run("--check", env=env)
    assert c.returncode == 0, f"--check: {c.returncode} {c.stderr!r}"
    lines = c.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("native: FS-ONLY (Landlock ABI ") \
        and "; no user namespaces: " in lines[0] and lines[0].endswith(")"), f"--check: {c.stdout!r}"
    code = 'R["cwd"] = os.getcwd(); R["HOME"] = os.environ["HOME"]'
    auto = nat.py(code, env=env)
    assert auto["cwd"] == os.path.realpath(nat.work), f"auto without user namespaces: {auto}"
    assert auto["HOME"].startswith("/tmp/lazaret-native."), f"auto without user namespaces: {auto}"
    full = nat.sandbox(_marker_cmd(nat), env=env, mode="full")
    line = one_error_line(full)
    assert "user namespaces" in line, f"--mode full does not name user namespaces: {line!r}"
    assert not os.path.exists(os.path.join(nat.work, "marker")), "--mode full ran the command"
    cf = nat.run("--mode", "full", "--check", env=env)
    assert cf.returncode == EXIT_NATIVE and "user namespaces" in cf.stderr, f"--mode full --check: {cf!r}"
    assert nat.py(code)["cwd"] == "/workspace", "auto with user namespaces is not FULL"
    forced = nat.run("--mode", FS, "--check")
    assert forced.returncode == 0 and forced.stdout.startswith("native: FS-ONLY (Landlock ABI "), \
        f"--mode fs-only --check: {forced!r}"


def test_fs_only_mask_entry_budget(nat):
    """FS-ONLY grants the entries of a directory on the way to a mask one by
    one, at most 4096 of them: 4096 run (the marker is written), 4097 fail
    closed with 125 and one line naming the limit, the command never run."""
    big = nat.mkdir("big")
    nat.mkdir("out")
    secret = nat.write("big/secret.env", "API_KEY=hunter2-budget\n", 0o600)
    for i in range(4095):  # + "out" in the workspace: 4096 entries
        with open(os.path.join(big, f"f{i:04d}"), "w"):
            pass
    cmd = ["/bin/sh", "-c", "echo ran > out/marker"]
    marker = os.path.join(nat.work, "out", "marker")
    ok = nat.sandbox(cmd, mask=[secret], mode=FS)
    assert ok.returncode == 0 and os.path.exists(marker), f"4096 entries: {ok.returncode} {ok.stderr!r}"
    os.unlink(marker)
    with open(os.path.join(big, "one-more"), "w"):
        pass
    r = nat.sandbox(cmd, mask=[secret], mode=FS)
    line = one_error_line(r)
    assert "4096" in line, f"the error does not name the limit: {line!r}"
    assert not os.path.exists(marker), "the command ran past the limit"


def test_fs_only_symlink_in_chain_refused(nat, fake_ssh_key):
    """FS-ONLY: a symbolic link among the entries of a directory on the way
    to a mask (here to the test user's ~/.ssh, next to the masked file)
    would be granted through to its target: the launcher fails closed with
    125 and one line naming the link, and the command never ran. The same
    link off the way is harmless (it leads to what no rule grants:
    EACCES)."""
    sub = nat.mkdir("sub")
    nat.mkdir("other")
    secret = nat.write("sub/secret.env", "API_KEY=hunter2-link\n", 0o600)
    link = os.path.join(sub, "ssh-link")
    os.symlink(os.path.dirname(fake_ssh_key), link)
    os.lchown(link, nat.user.pw_uid, nat.user.pw_gid)
    cmd = ["/bin/sh", "-c", "echo ran > other/marker"]
    r = nat.sandbox(cmd, mask=[secret], mode=FS)
    line = one_error_line(r)
    assert os.path.realpath(sub) + "/ssh-link" in line, f"the error does not name the link: {line!r}"
    assert not os.path.exists(os.path.join(nat.work, "other", "marker")), "the command ran"
    moved = os.path.join(nat.work, "other", "ssh-link")
    os.rename(link, moved)
    res = nat.py(f'R["key"] = t(read, {moved + "/id_rsa"!r})', mask=[secret], mode=FS)
    assert res["key"] == "EACCES", f"reading the key through the link off the way: {res}"


def test_fs_only_sigkill_of_launcher_ends_the_command(nat):
    """FS-ONLY: the command dies with the launcher (PR_SET_PDEATHSIG): when
    the launcher is killed with SIGKILL, the command (`sleep 1000`) is gone
    within 5 s. (Its temp dir stays behind: nobody is left to remove it.)"""
    uid = nat.user.pw_uid
    want = b"/usr/bin/sleep\x001000\x00"
    preexisting = _pids_of_cmdline(uid, want)
    p = subprocess.Popen(nat.cmdline(nat.sandbox_args(["/usr/bin/sleep", "1000"], mode=FS)), cwd=nat.base,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ours, tmp = [], None
    try:
        lpid = wait_until(lambda: next((c for c in descendants(p.pid)
                                        if proc_ppid(c) == p.pid and proc_uid(c) == uid), None), timeout=10)
        assert lpid, "the launcher did not start"
        cmd = wait_until(lambda: next((c for c in descendants(lpid) if proc_cmdline(c) == want), None), timeout=10)
        assert cmd and cmd not in preexisting, "the command did not start"
        ours = descendants(lpid)
        tmp = _env_of(cmd).get("TMPDIR")
        os.kill(lpid, signal.SIGKILL)
        gone = wait_until(lambda: not alive(cmd), timeout=5)
        assert gone, f"the command outlived the launcher: {cmd} {proc_cmdline(cmd)}"
        p.wait(timeout=10)
    finally:
        kill_ours([c for c in ours if alive(c)])
        if p.poll() is None:
            p.kill()
            p.wait()
        if tmp and tmp.startswith("/tmp/lazaret-native."):
            shutil.rmtree(tmp, ignore_errors=True)


def test_fs_only_temp_dir_removed_without_following_links(nat):
    """FS-ONLY: the private temp dir is removed when the command ends,
    whatever the command left in it -- symbolic links to a host file and a
    host directory (also deep down), a tree 80 levels deep, a directory of
    mode 0 and one of 0500, the temp dir itself made 0500 -- and the links
    are not followed: the host file and directory they point to are intact."""
    victim_dir = nat.outside_tmp_dir("victim")
    victim = nat.write(os.path.join(victim_dir, "keep.txt"), "keep me\n")
    host_file = nat.write(os.path.join(nat.base, "host-file"), "host file\n")
    watched = [victim, host_file]
    before = {p: snapshot(p) for p in watched}
    res = nat.py(f"""
d = os.environ["TMPDIR"]
R["tmp"] = d
os.symlink({host_file!r}, d + "/link-file")
os.symlink({victim_dir!r}, d + "/link-dir")
p = d
for i in range(80):
    p += "/n"
    os.mkdir(p)
write(p + "/deep", "x")
os.symlink({victim_dir!r}, p + "/deep-link")
os.mkdir(d + "/locked")
write(d + "/locked/f")
os.symlink({victim!r}, d + "/locked/l")
os.chmod(d + "/locked", 0)
os.mkdir(d + "/ro")
write(d + "/ro/f")
os.chmod(d + "/ro", 0o500)
os.chmod(d, 0o500)
R["made"] = True
""", mode=FS)
    tmp = res["tmp"]
    assert res.get("made") is True and tmp.startswith("/tmp/lazaret-native."), f"inside: {res}"
    left = os.path.lexists(tmp)
    if left:
        shutil.rmtree(tmp, ignore_errors=True)
    assert not left, f"the temp dir {tmp} was not removed"
    for p in watched:
        assert snapshot(p) == before[p], f"{p} changed on the host (a link was followed)"
    assert sorted(os.listdir(victim_dir)) == ["keep.txt"], f"the linked directory: {os.listdir(victim_dir)}"


def test_fs_only_process_group_ends_with_the_command(nat):
    """FS-ONLY: what the command started in its process group (`sleep 1000
    &`) is killed when the command exits 3: the launcher returns 3
    promptly and no such sleep remains."""
    uid = nat.user.pw_uid
    want = b"sleep\x001000\x00"
    preexisting = _pids_of_cmdline(uid, want)
    p = subprocess.Popen(nat.cmdline(nat.sandbox_args(["/bin/sh", "-c", "sleep 1000 & sleep 0.3; exit 3"], mode=FS)),
                         cwd=nat.base, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        try:
            _, err = p.communicate(timeout=20)
            status = p.returncode
        except subprocess.TimeoutExpired:
            status, err = None, b""
        gone = wait_until(lambda: not (_pids_of_cmdline(uid, want) - preexisting), timeout=5)
        assert status == 3, f"the launcher returned {status} (None: still running after 20 s), stderr {err!r}"
        assert gone, f"a background sleep outlived the command: {_pids_of_cmdline(uid, want) - preexisting}"
    finally:
        kill_ours(_pids_of_cmdline(uid, want) - preexisting)
        if p.poll() is None:
            p.kill()
            p.wait()


def test_fs_only_sigterm_of_launcher_ends_the_command(nat):
    """FS-ONLY: SIGTERM to the launcher reaches the command: the launcher
    exits 128+15, the command is gone, and so is its temp dir."""
    uid = nat.user.pw_uid
    want = b"/usr/bin/sleep\x001000\x00"
    p = subprocess.Popen(nat.cmdline(nat.sandbox_args(["/usr/bin/sleep", "1000"], mode=FS)), cwd=nat.base,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ours, tmp = [], None
    try:
        lpid = wait_until(lambda: next((c for c in descendants(p.pid)
                                        if proc_ppid(c) == p.pid and proc_uid(c) == uid), None), timeout=10)
        assert lpid, "the launcher did not start"
        cmd = wait_until(lambda: next((c for c in descendants(lpid) if proc_cmdline(c) == want), None), timeout=10)
        assert cmd, "the command did not start"
        ours = descendants(lpid)
        tmp = _env_of(cmd).get("TMPDIR")
        assert tmp and os.path.isdir(tmp), f"the temp dir of the command: {tmp}"
        os.kill(lpid, signal.SIGTERM)
        p.wait(timeout=10)
        assert p.returncode == 128 + 15, f"status after SIGTERM: {p.returncode}, stderr {p.stderr.read()!r}"
        assert wait_until(lambda: not any(alive(c) for c in ours), timeout=5), \
            f"left after SIGTERM: {[(c, proc_cmdline(c)) for c in ours if alive(c)]}"
        assert not os.path.lexists(tmp), f"the temp dir {tmp} was not removed"
    finally:
        kill_ours([c for c in ours if alive(c)])
        if p.poll() is None:
            p.kill()
            p.wait()
        if tmp and tmp.startswith("/tmp/lazaret-native."):
            shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("mode", ["full", FS])
def test_inherited_descriptor_is_closed(nat, mode):
    """A descriptor the caller leaves open -- here /etc/shadow, opened by
    root, which the test user may not open -- does not reach the command:
    reading it inside fails with EBADF. The control: the same descriptor,
    passed the same way to a plain command of the test user, is readable."""
    fd = os.open("/etc/shadow", os.O_RDONLY)
    try:
        os.set_inheritable(fd, True)
        code = PRELUDE + f'R["read"] = t(lambda: os.read({fd}, 5).decode())' + EPILOGUE
        r = subprocess.run(nat.cmdline(nat.sandbox_args([PYTHON, "-c", code], mode=mode)), pass_fds=[fd],
                           cwd=nat.base, capture_output=True, text=True, timeout=60)
        os.lseek(fd, 0, os.SEEK_SET)
        ctl = subprocess.run(["runuser", "-u", nat.user.pw_name, "--", "env", "-i", PYTHON, "-c", code],
                             pass_fds=[fd], cwd=nat.base, capture_output=True, text=True, timeout=60)
    finally:
        os.close(fd)
    assert r.returncode == 0, f"status {r.returncode}, stderr {r.stderr!r}"
    assert json.loads(r.stdout.splitlines()[-1])["read"] == "EBADF", f"the caller's descriptor inside: {r.stdout!r}"
    assert json.loads(ctl.stdout.splitlines()[-1])["read"] not in ("EBADF", "EACCES"), \
        f"the control could not read the descriptor: {ctl.stdout!r} {ctl.stderr!r}"


# ---------------------------------------------------------------- HOLD and JOIN

JOIN_NS = ("user", "mnt", "ipc", "net", "pid")


def _status_field(pid, name):
    """A field of /proc/PID/status as its words, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                k, _, v = ln.partition(":")
                if k == name:
                    return v.split()
    except OSError:
        return None
    return None


def _ns_of(pid, name):
    st = os.stat(f"/proc/{pid}/ns/{name}")
    return (st.st_dev, st.st_ino)


class JoinedNative(Native):
    """A Native whose sandbox runs go through --hold and --join: the first
    run with a given set of --ro, --mask and --shm-size starts a hold with
    them, and every run joins it (its --setenv given to the join). The
    existing attack tests run on it unchanged (test_join_attack_*)."""

    @classmethod
    def of(cls, nat):
        j = cls.__new__(cls)
        j.__dict__.update(nat.__dict__)  # the same workspace, and the same list of holds to end
        j.held = {}
        return j

    def sandbox_args(self, cmd, ro=(), mask=(), setenv=(), shm=None, workspace=None, mode=None, join=None):
        assert join is None and mode in (None, "auto", "full"), f"a join is FULL only, not {mode}"
        key = (tuple(ro), tuple(mask), shm, workspace)
        if key not in self.held:
            self.held[key] = self.hold(ro=ro, mask=mask, shm=shm, workspace=workspace)
        return self.join_args(self.held[key].init, cmd, setenv=setenv)


@pytest.fixture
def jnat(nat):
    return JoinedNative.of(nat)


def test_hold_prints_ready_and_its_init_is_pid_1(nat):
    """--hold prints exactly one line, "ready PID", once the sandbox is
    built; PID is alive, runs lazaret-native, is the grandchild of P (P ->
    A -> B) and PID 1 of its own PID namespace, in user, mount, IPC, network
    and PID namespaces other than the host's. SIGTERM to P ends it all: P
    exits 0, B and A are gone, and nothing more was printed."""
    h = nat.hold()
    b = h.init
    assert alive(b), f"the PID of the ready line, {b}, is not alive"
    a = proc_ppid(b)
    assert a is not None and proc_ppid(a) == h.p.pid, f"B {b} is not P's grandchild: A {a}, P {h.p.pid}"
    assert os.path.samestat(os.stat(f"/proc/{b}/exe"), os.stat(nat.binary)), "B does not run lazaret-native"
    nspid = _status_field(b, "NSpid")
    assert nspid and nspid[-1] == "1" and len(nspid) >= 2, f"NSpid of B: {nspid}"
    assert _status_field(b, "Uid") == [str(nat.user.pw_uid)] * 4, f"Uid of B: {_status_field(b, 'Uid')}"
    for ns in JOIN_NS:
        assert _ns_of(b, ns) != _ns_of(os.getpid(), ns), f"B shares the host's {ns} namespace"
    status = h.end()
    rest = h.p.stdout.read()
    assert status == 0, f"P after SIGTERM: status {status}, stderr {h.p.stderr.read()!r}"
    assert rest == b"", f"more than the ready line: {h.line!r} + {rest!r}"
    assert wait_until(lambda: not alive(b) and not alive(a), timeout=5), "B or A outlived P"


def test_join_runs_in_the_workspace_with_its_status(nat):
    """--join PID -- CMD runs CMD in the held sandbox, in /workspace as the
    test user, and exits with its status (128+N for signal N); what it
    writes lands in the host's workspace. A command that cannot be run is
    125 and one line."""
    h = nat.hold()
    r = nat.join(h.init, ["/bin/sh", "-c", "pwd; id -u; echo made > made-by-join; exit 7"])
    assert r.returncode == 7, f"status {r.returncode}, stderr {r.stderr!r}"
    assert r.stdout.split() == ["/workspace", str(nat.user.pw_uid)], f"stdout {r.stdout!r}"
    made = os.path.join(nat.work, "made-by-join")
    assert snapshot(made) is not None and snapshot(made)[3] == b"made\n", f"host file: {snapshot(made)}"
    assert os.stat(made).st_uid == nat.user.pw_uid, "owner on the host"
    k = nat.join(h.init, ["/bin/sh", "-c", "kill -TERM $$"])
    assert k.returncode == 128 + 15, f"a command killed by SIGTERM: {k.returncode} {k.stderr!r}"
    line = one_error_line(nat.join(h.init, ["/workspace/not-there"]))
    assert "not-there" in line, f"the error does not name the command: {line!r}"


def test_join_shares_the_sandbox_between_joins(nat):
    """Two joins share the sandbox: a file one writes in /tmp the next one
    reads (and the host's /tmp has no such file); a process one leaves in
    the background (`sleep 1000`, orphaned to the sandbox's init, which
    keeps it) the next one sees in /proc -- but cannot signal: each join
    has a Landlock domain of its own (ABI 6 scopes signals to it), and no
    join can signal the init either. When the sandbox ends, the sleep ends
    with it."""
    name = uniq()
    h = nat.hold()
    r1 = nat.join(h.init, ["/bin/sh", "-c", f"echo shared > /tmp/{name}; sleep 1000 </dev/null >/dev/null 2>&1 & "
                                            "echo $!"])
    assert r1.returncode == 0, f"first join: {r1.returncode} {r1.stderr!r}"
    inner = int(r1.stdout.strip())
    res = nat.py(f"""
R["tmp"] = t(read, "/tmp/{name}")
R["pids"] = sorted(int(x) for x in os.listdir("/proc") if x.isdigit())
R["cmdline"] = t(read, "/proc/{inner}/cmdline")
R["kill"] = t(os.kill, {inner}, 0)
R["kill init"] = t(os.kill, 1, 15)
""", join=h.init)
    assert res["tmp"] == "READ:shared\n", f"the second join does not see the first one's /tmp: {res}"
    assert inner in res["pids"] and 1 in res["pids"], f"the first join's sleep ({inner}) is not in /proc: {res}"
    assert res["cmdline"] == "READ:sleep\x001000\x00", f"its command line: {res}"
    if _landlock_abi(nat) >= 6:
        assert res["kill"] == "EPERM", f"signal to another join's process: {res['kill']}"
        # Nor can a command end the sandbox by its init (which takes SIGTERM).
        assert res["kill init"] == "EPERM", f"SIGTERM to the sandbox's init: {res['kill init']}"
        assert alive(h.init), "a joined command ended the sandbox"
    assert not os.path.lexists(f"/tmp/{name}"), "the file landed in the host's /tmp"
    sleeps = [c for c in descendants(h.init) if proc_cmdline(c) == b"sleep\x001000\x00"]
    assert len(sleeps) == 1 and proc_ppid(sleeps[0]) == h.init, f"the sleep is not the init's: {sleeps}"
    assert h.end() == 0, f"P after SIGTERM: {h.p.returncode}"
    assert wait_until(lambda: not alive(sleeps[0]), timeout=5), "the sleep outlived the sandbox"


def test_join_cwd(nat):
    """--cwd REL runs the command in /workspace/REL. Refused with 125 and
    one line, the command never run: a path with "..", an absolute one, a
    missing directory, and a symbolic link on the way -- one planted in the
    workspace pointing out of it (to /etc), and even one pointing inside
    (none is followed)."""
    nat.mkdir("sub/deeper")
    for ln, target in (("out-link", "/etc"), ("in-link", "sub")):
        os.symlink(target, os.path.join(nat.work, ln))
        os.lchown(os.path.join(nat.work, ln), nat.user.pw_uid, nat.user.pw_gid)
    h = nat.hold()
    ok = nat.join(h.init, ["/bin/pwd"], cwd="sub/deeper")
    assert (ok.returncode, ok.stdout) == (0, "/workspace/sub/deeper\n"), f"--cwd sub/deeper: {ok!r}"
    marker = os.path.join(nat.work, "marker")
    cmd = ["/bin/sh", "-c", "echo ran > /workspace/marker"]
    for cwd, words in (("sub/../..", [".."]), ("..", [".."]), ("sub/./deeper", ['"."']), ("/etc", ["relative"]),
                       ("no-such-dir", ["no such directory"]), ("out-link", ["symbolic link"]),
                       ("out-link/ssh", ["symbolic link"]), ("in-link/deeper", ["symbolic link"]),
                       ("sub/deeper/../../..", [".."])):
        r = nat.join(h.init, cmd, cwd=cwd)
        line = one_error_line(r)
        assert "--cwd" in line and any(w in line for w in words), f"--cwd {cwd}: {line!r}"
        assert not os.path.exists(marker), f"--cwd {cwd}: the command ran"


def _memfd(data):
    """A descriptor of a memory file holding data, at offset 0 (as the
    coordinator passes the environment)."""
    fd = os.memfd_create("lazaret-env", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def test_join_env_fd(nat):
    """--env-fd N: NUL-separated NAME=VALUE entries read from a descriptor
    reach the command, on top of the defaults (an entry replaces a default
    of its name) and under --setenv (which replaces an entry); a value may
    hold spaces, newlines and '='. The secret passed that way is in neither
    the joiner's command line nor the command's; the joiner has closed the
    descriptor, and one the caller left open (it keeps nothing but its
    standard streams and a pipe of its own), and is not dumpable."""
    secret = "sk-" + secrets.token_hex(12)
    data = (f"API_KEY={secret}\0FOO=from-fd\0PATH=/usr/bin:/bin\0MULTI=a b\nc=d\0HOME=/tmp\0"
            "LAST=no-final-nul").encode()
    fd = _memfd(data)
    leak = _memfd(b"a descriptor the caller left open\n")
    out = os.path.join(nat.work, "env.json")
    code = f"import json, os, sys; json.dump(dict(os.environ), open({out.replace(nat.work, '/workspace')!r}, 'w')); " \
           "sys.stdin.read()"
    h = nat.hold()
    try:
        j = nat.direct(nat.join_args(h.init, [PYTHON, "-c", code], env_fd=fd, setenv=["FOO=from-setenv"]),
                       pass_fds=[fd, leak], stdin=subprocess.PIPE)
    finally:
        os.close(fd)
        os.close(leak)
    try:
        assert wait_until(lambda: os.path.exists(out) and os.path.getsize(out) > 0, timeout=10), \
            f"the command did not write its environment: {j.poll()} {j.stderr.read() if j.poll() is not None else ''}"
        time.sleep(0.1)
        with open(out) as f:
            env = json.load(f)
        cmd = next(c for c in descendants(j.pid) if proc_cmdline(c) and proc_cmdline(c).startswith(PYTHON.encode()))
        fds = {int(n): os.readlink(f"/proc/{j.pid}/fd/{n}") for n in os.listdir(f"/proc/{j.pid}/fd")}
        # Not dumpable: its /proc files belong to root, out of reach of
        # the sandbox's processes (and of the user's).
        j_owner = os.stat(f"/proc/{j.pid}/environ").st_uid
        j_cmdline, c_cmdline = proc_cmdline(j.pid), proc_cmdline(cmd)
    finally:
        j.stdin.close()
        j.wait(timeout=10)
    assert j.returncode == 0, f"status {j.returncode}, stderr {j.stderr.read()!r}"
    expected = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "API_KEY": secret, "FOO": "from-setenv",
                "MULTI": "a b\nc=d", "LAST": "no-final-nul"}
    assert env == expected, f"environment inside: expected {expected}, got {env}"
    assert secret.encode() not in j_cmdline and secret.encode() not in c_cmdline, "the secret is on a command line"
    # Past stderr, the pipe that tells C of J's death; the error pipe is
    # closed by now (read to its end when C executed the command), and so
    # are the environment's descriptor and the one the caller leaked.
    extra = {n: t for n, t in fds.items() if n > 2}
    assert len(extra) == 1 and list(extra.values())[0].startswith("pipe:"), f"the joiner's descriptors: {fds}"
    assert j_owner == 0, f"the joiner is dumpable: its /proc files belong to uid {j_owner}"


ENV_FD_BAD = {
    # id: (data, words the line must contain, words it must not)
    "no-equals": (b"GOOD=1\0NOEQUALS\0", ["entry 2", "NOEQUALS"], []),
    "value-without-name": (b"GOOD=1\0sk-hunter2 not a name\0", ["entry 2", "not shown"], ["hunter2"]),
    "empty-name": (b"=hunter2\0", ["entry 1", "empty name"], ["hunter2"]),
    "empty-entry": (b"A=1\0\0B=2\0", ["entry 2", "empty"], []),
    "too-many": (b"".join(b"V%d=x\0" % i for i in range(4097)), ["4096"], []),
    "too-big": (b"BIG=" + b"x" * (1 << 20), ["1048576"], []),
}


@pytest.mark.parametrize("case", sorted(ENV_FD_BAD) + ["not-open"])
def test_join_env_fd_malformed(nat, case):
    """--env-fd with what is not NAME=VALUE entries -- an entry without '='
    (named when it looks like a name, else not shown: it may be a secret),
    an empty name, an empty entry, more than 4096 entries or 1 MiB, a
    descriptor that is not open -- is 125 and one line; the command never
    ran. 4096 entries and exactly 1 MiB are accepted (the control)."""
    h = nat.hold()
    marker = os.path.join(nat.work, "marker")
    cmd = ["/bin/sh", "-c", "echo ran > /workspace/marker"]
    if case == "not-open":
        r = nat.join(h.init, cmd, env_fd=9)
        words, absent = ["--env-fd 9"], []
    else:
        data, words, absent = ENV_FD_BAD[case]
        fd = _memfd(data)
        try:
            r = nat.join(h.init, cmd, env_fd=fd, pass_fds=[fd])
        finally:
            os.close(fd)
    line = one_error_line(r)
    assert all(w in line for w in words), f"the error does not name {words}: {line!r}"
    assert not any(w in line for w in absent), f"the error shows {absent}: {line!r}"
    assert not os.path.exists(marker), "the command ran"
    if case in ("too-many", "too-big"):
        ok_data = b"".join(b"V%d=x\0" % i for i in range(4096)) if case == "too-many" else \
            b"BIG=" + b"x" * ((1 << 20) - 4)
        fd = _memfd(ok_data)
        try:
            ok = nat.join(h.init, ["/bin/sh", "-c", "echo ran > /workspace/marker"], env_fd=fd, pass_fds=[fd])
        finally:
            os.close(fd)
        # 1 MiB in one variable is more than execve takes (E2BIG): the
        # launcher accepted it, the kernel did not.
        if case == "too-big":
            assert ok.returncode == EXIT_NATIVE and "Argument list too long" in ok.stderr, f"1 MiB: {ok!r}"
        else:
            assert ok.returncode == 0 and os.path.exists(marker), f"4096 entries: {ok!r}"


@pytest.mark.parametrize("target", ["host-sleep", "ended-sandbox", "hold-p", "hold-a", "host-init"])
def test_join_refuses_what_is_not_a_held_sandbox(nat, host_sleep, target):
    """--join of a process that is not the init of a sandbox this user
    holds fails closed with 125 and one line naming why, and runs nothing
    (neither in a sandbox nor on the host): a sleep of the test user's
    (another program), the init of a sandbox that has ended (no such
    process), P and A of a running hold (lazaret-native, but not PID 1 of
    a namespace), the host's init (another user's)."""
    h = nat.hold()
    pid, words = {
        "host-sleep": (host_sleep.pid, ["another program"]),
        "hold-p": (h.p.pid, ["not PID 1"]),
        "hold-a": (proc_ppid(h.init), ["not PID 1"]),
        "host-init": (1, ["not this user's"]),
        "ended-sandbox": (None, ["no such process"]),
    }[target]
    if target == "ended-sandbox":
        ended = nat.hold()
        pid = ended.init
        assert ended.end() == 0 and wait_until(lambda: not alive(pid), timeout=5), "the hold did not end"
    host_marker = os.path.join(nat.work, "host-marker")
    cmd = ["/bin/sh", "-c", f"echo ran > /workspace/marker; echo ran > {host_marker}"]
    r = nat.join(pid, cmd)
    line = one_error_line(r)
    assert str(pid) in line and any(w in line for w in words), f"the error does not name {words}: {line!r}"
    assert not os.path.exists(os.path.join(nat.work, "marker")), "the command ran in a sandbox"
    assert not os.path.exists(host_marker), "the command ran on the host"
    assert r.stdout == "", f"stdout: {r.stdout!r}"
    assert alive(host_sleep.pid) and alive(h.init), "the target died"


HOLD_JOIN_BAD = {
    # id: (args builder, env, words the one line must contain (any of))
    "hold-with-command": (lambda n, cmd: ["--workspace", n.work, "--hold", "--"] + cmd, None, ["no command"]),
    "hold-fs-only": (lambda n, cmd: ["--mode", "fs-only", "--workspace", n.work, "--hold"], None, ["FULL"]),
    "hold-auto-no-userns": (lambda n, cmd: ["--workspace", n.work, "--hold"], {"LAZARET_TEST_NO_USERNS": "1"},
                            ["user namespaces"]),
    "hold-full-no-userns": (lambda n, cmd: ["--mode", "full", "--workspace", n.work, "--hold"],
                            {"LAZARET_TEST_NO_USERNS": "1"}, ["user namespaces"]),
    "hold-no-landlock": (lambda n, cmd: ["--workspace", n.work, "--hold"], {"LAZARET_TEST_LANDLOCK_ABI": "0"},
                         ["Landlock"]),
    "hold-setenv": (lambda n, cmd: ["--workspace", n.work, "--setenv", "A=1", "--hold"], None, ["--setenv"]),
    "hold-no-workspace": (lambda n, cmd: ["--hold"], None, ["--workspace"]),
    "hold-check": (lambda n, cmd: ["--hold", "--check"], None, ["--check"]),
    "join-with-workspace": (lambda n, cmd: ["--join", "1", "--workspace", n.work, "--"] + cmd, None,
                            ["--workspace"]),
    "join-with-ro": (lambda n, cmd: ["--ro", "/usr", "--join", "1", "--"] + cmd, None, ["--ro"]),
    "join-with-mask": (lambda n, cmd: ["--join", "1", "--mask", n.work, "--"] + cmd, None, ["--mask"]),
    "join-with-shm-size": (lambda n, cmd: ["--join", "1", "--shm-size", "4096", "--"] + cmd, None, ["--shm-size"]),
    "join-with-mode": (lambda n, cmd: ["--join", "1", "--mode", "full", "--"] + cmd, None, ["--mode"]),
    "join-with-hold": (lambda n, cmd: ["--join", "1", "--hold", "--"] + cmd, None, ["--hold"]),
    "join-no-command": (lambda n, cmd: ["--join", "1"], None, ["command"]),
    "join-bad-pid": (lambda n, cmd: ["--join", "one", "--"] + cmd, None, ["one"]),
    "join-env-fd-stdin": (lambda n, cmd: ["--join", "1", "--env-fd", "0", "--"] + cmd, None, ["--env-fd"]),
    "cwd-without-join": (lambda n, cmd: ["--workspace", n.work, "--cwd", "sub", "--"] + cmd, None, ["--cwd"]),
    "env-fd-without-join": (lambda n, cmd: ["--workspace", n.work, "--env-fd", "3", "--"] + cmd, None,
                            ["--env-fd"]),
    "die-with-parent-without-hold": (lambda n, cmd: ["--workspace", n.work, "--die-with-parent", "--"] + cmd, None,
                                     ["--die-with-parent"]),
}


@pytest.mark.parametrize("case", sorted(HOLD_JOIN_BAD))
def test_hold_and_join_bad_input(nat, case):
    """--hold and --join with what they cannot take: --hold with a command,
    with --setenv, in FS-ONLY (asked for, or where user namespaces are
    missing, also with --mode full), without Landlock or --workspace;
    --join with the options that build a sandbox, without a command, with a
    pid that is no number or stdin as --env-fd; --cwd, --env-fd and
    --die-with-parent elsewhere: 125, one line naming the cause, nothing
    printed on stdout, nothing run, no process left."""
    host_marker = os.path.join(nat.work, "host-marker")
    cmd = ["/bin/sh", "-c", f"echo ran > /workspace/marker; echo ran > {host_marker}"]
    build, env, words = HOLD_JOIN_BAD[case]
    r = nat.run(*build(nat, cmd), env=env, timeout=20)
    line = one_error_line(r)
    assert any(w.lower() in line.lower() for w in words), f"the error does not name the cause ({words}): {line!r}"
    assert r.stdout == "", f"stdout: {r.stdout!r}"
    assert not os.path.exists(os.path.join(nat.work, "marker")), "the command ran"
    assert not os.path.exists(host_marker), "the command ran on the host"


def _sleeps_of(uid, arg):
    want = b"sleep\x00" + arg.encode() + b"\x00"
    return {p for p in all_pids() if proc_uid(p) == uid and alive(p) and proc_cmdline(p) in (want, b"/usr/bin/" + want)}


def test_hold_sigterm_ends_joined_commands(nat):
    """SIGTERM to the hold's P (how the coordinator ends a sandbox) ends
    what runs in it: a joined long-running command (its joiner exits 128+9:
    the init killed it) and a background process an earlier join left;
    B and A are gone, P exits 0."""
    uid, arg = nat.user.pw_uid, str(100000 + secrets.randbelow(900000))
    h = nat.hold()
    a = proc_ppid(h.init)
    bg = nat.join(h.init, ["/bin/sh", "-c", f"sleep {arg} </dev/null >/dev/null 2>&1 &"])
    assert bg.returncode == 0, f"the background join: {bg!r}"
    j = nat.direct(nat.join_args(h.init, ["/usr/bin/sleep", arg]))
    try:
        assert wait_until(lambda: len(_sleeps_of(uid, arg)) == 2, timeout=10), \
            f"the sleeps did not start: {_sleeps_of(uid, arg)}"
        sleeps = _sleeps_of(uid, arg)
        assert h.end() == 0, f"P after SIGTERM: {h.p.returncode}, stderr {h.p.stderr.read()!r}"
        j.wait(timeout=10)
        assert j.returncode == 128 + 9, f"the joiner: {j.returncode}, stderr {j.stderr.read()!r}"
        assert wait_until(lambda: not any(alive(p) for p in sleeps | {h.init, a}), timeout=5), \
            f"left after SIGTERM: {[p for p in sleeps | {h.init, a} if alive(p)]}"
    finally:
        kill_ours(_sleeps_of(uid, arg))
        if j.poll() is None:
            j.kill()
            j.wait()


def test_hold_sigkill_ends_the_tree(nat):
    """SIGKILL of the hold's P (nothing forwarded): A and B die with it
    (PR_SET_PDEATHSIG), and with B every process of the sandbox: a joined
    command (its joiner exits 128+9) and a background one."""
    uid, arg = nat.user.pw_uid, str(100000 + secrets.randbelow(900000))
    h = nat.hold()
    a = proc_ppid(h.init)
    nat.join(h.init, ["/bin/sh", "-c", f"sleep {arg} </dev/null >/dev/null 2>&1 &"])
    j = nat.direct(nat.join_args(h.init, ["/usr/bin/sleep", arg]))
    try:
        assert wait_until(lambda: len(_sleeps_of(uid, arg)) == 2, timeout=10), "the sleeps did not start"
        sleeps = _sleeps_of(uid, arg)
        os.kill(h.p.pid, signal.SIGKILL)
        h.p.wait(timeout=10)
        assert wait_until(lambda: not any(alive(p) for p in sleeps | {h.init, a}), timeout=5), \
            f"left after SIGKILL of P: {[(p, proc_cmdline(p)) for p in sleeps | {h.init, a} if alive(p)]}"
        j.wait(timeout=10)
        assert j.returncode == 128 + 9, f"the joiner: {j.returncode}, stderr {j.stderr.read()!r}"
    finally:
        kill_ours(_sleeps_of(uid, arg) | {p for p in (h.init, a) if alive(p)})
        if j.poll() is None:
            j.kill()
            j.wait()


@pytest.mark.parametrize("option", [True, False])
def test_hold_die_with_parent(nat, option):
    """--die-with-parent: when the process that started the hold is killed
    with SIGKILL, the whole tree goes -- P, A, B and what runs in the
    sandbox. The control, without the option: the hold outlives its
    parent (and is ended here with SIGTERM)."""
    uid, arg = nat.user.pw_uid, str(100000 + secrets.randbelow(900000))
    args = nat.hold_args(extra=["--die-with-parent"] if option else [])
    parent = subprocess.Popen([PYTHON, "-c", "import subprocess, sys; subprocess.Popen(sys.argv[1:]).wait()",
                               nat.binary] + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=dict(nat.env), **as_user(nat.user))
    tree = set()
    try:
        line = _read_line(parent.stdout, 10)
        m = re.fullmatch(rb"ready ([1-9][0-9]*)\n", line)
        assert m, f"no ready line: {line!r}"
        b = int(m.group(1))
        a = proc_ppid(b)
        p = proc_ppid(a)
        assert proc_ppid(p) == parent.pid, f"P {p} is not the child of the parent {parent.pid}"
        nat.join(b, ["/bin/sh", "-c", f"sleep {arg} </dev/null >/dev/null 2>&1 &"])
        assert wait_until(lambda: _sleeps_of(uid, arg), timeout=5), "the sleep did not start"
        tree = {p, a, b} | _sleeps_of(uid, arg)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        if option:
            assert wait_until(lambda: not any(alive(x) for x in tree), timeout=5), \
                f"left after SIGKILL of the parent: {[(x, proc_cmdline(x)) for x in tree if alive(x)]}"
        else:
            time.sleep(0.3)
            assert all(alive(x) for x in tree), "without --die-with-parent the hold died with its parent"
            os.kill(p, signal.SIGTERM)
            assert wait_until(lambda: not any(alive(x) for x in tree), timeout=5), "SIGTERM did not end it"
    finally:
        kill_ours([x for x in tree if alive(x)])
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_join_forwards_sigterm_and_ignores_sigint(nat):
    """The joiner passes SIGTERM (and SIGHUP) on to the command and exits
    with its status (128+15); SIGINT sent to the joiner alone is ignored
    (the terminal sends Ctrl+C to the command's process group itself)."""
    uid, arg = nat.user.pw_uid, str(100000 + secrets.randbelow(900000))
    h = nat.hold()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        j = nat.direct(nat.join_args(h.init, ["/usr/bin/sleep", arg]))
        try:
            assert wait_until(lambda: _sleeps_of(uid, arg), timeout=10), "the command did not start"
            os.kill(j.pid, signal.SIGINT)
            time.sleep(0.2)
            assert j.poll() is None and _sleeps_of(uid, arg), "SIGINT ended the join"
            os.kill(j.pid, sig)
            j.wait(timeout=10)
            assert j.returncode == 128 + sig, f"the joiner after {sig.name}: {j.returncode} {j.stderr.read()!r}"
            assert wait_until(lambda: not _sleeps_of(uid, arg), timeout=5), f"the command outlived {sig.name}"
        finally:
            kill_ours(_sleeps_of(uid, arg))
            if j.poll() is None:
                j.kill()
                j.wait()


# The attacks of FULL mode, rerun on commands that joined a held sandbox:
# the same operations, the same errnos, the same unchanged host.


def test_join_attack_write_outside_workspace(jnat):
    test_write_outside_workspace(jnat)


def test_join_attack_masked_file_and_directory(jnat):
    test_masked_file_and_directory(jnat)


def test_join_attack_namespaces_and_mounts(jnat):
    test_namespaces_and_mounts_denied(jnat)


def test_join_attack_trace_and_read_host_process(jnat, host_sleep):
    test_trace_and_read_host_process(jnat, host_sleep)


def test_join_attack_proc_of_init(jnat):
    """Also: setns gave the joiner every capability in the sandbox's user
    namespace; the command has none left (CapEff 0), and no_new_privs and
    seccomp."""
    test_proc_of_init_is_closed(jnat)


def test_join_attack_kernel_interfaces(jnat):
    test_kernel_interfaces_denied(jnat)


def test_join_attack_kill_host_process(jnat, host_sleep):
    test_kill_host_process(jnat, host_sleep)


def test_join_attack_abstract_socket_of_host(jnat):
    test_abstract_socket_of_host(jnat)


def test_join_attack_loopback_tcp_of_host(jnat):
    test_loopback_tcp_of_host(jnat)


def test_join_attack_inherited_descriptor(jnat):
    test_inherited_descriptor_is_closed(jnat, "full")


def test_join_attack_environment_is_clean(jnat):
    test_environment_is_clean(jnat)


def test_join_is_quick(nat):
    """A join costs no sleep or poll (it is compared against podman exec):
    ten joins of /bin/true, each started directly as the test user, take
    well under half a second each on average (the time is printed)."""
    h = nat.hold()
    start = time.monotonic()
    for _ in range(10):
        j = nat.direct(nat.join_args(h.init, ["/bin/true"]))
        _, err = j.communicate(timeout=10)
        assert j.returncode == 0, f"a join failed: {j.returncode} {err!r}"
    mean = (time.monotonic() - start) / 10
    print(f"a join of /bin/true: {mean * 1000:.1f} ms on average")
    assert mean < 0.5, f"a join takes {mean:.3f} s on average"


def test_ro_bind_at_another_path(nat):
    """--ro-bind SRC:DST (the coordinator puts its terminfo directory at
    /run/lazaret/terminfo so): SRC's files read at DST, nothing written,
    renamed or removed there, the host's copy unchanged; through a hold
    and a join alike."""
    src = nat.outside_tmp_dir("robind")
    f = nat.write(os.path.join(src, "entry"), "terminfo bytes\n")
    before = snapshot(f)
    code = """
R["read"] = t(read, "/run/lazaret/x/entry")
R["write"] = t(write, "/run/lazaret/x/entry")
R["create"] = t(write, "/run/lazaret/x/new")
R["unlink"] = t(os.unlink, "/run/lazaret/x/entry")
R["host-path"] = t(read, %r)
""" % f
    for how in ("run", "hold"):
        if how == "run":
            r = nat.run("--workspace", nat.work, "--ro-bind", f"{src}:/run/lazaret/x", "--", PYTHON, "-c",
                        PRELUDE + code + EPILOGUE)
        else:
            h = nat.hold(extra=["--ro-bind", f"{src}:/run/lazaret/x"])
            r = nat.join(h.init, [PYTHON, "-c", PRELUDE + code + EPILOGUE])
        assert r.returncode == 0, (how, r.stderr)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        assert res["read"] == "READ:terminfo bytes\n", (how, res)
        for op in ("write", "create", "unlink"):
            assert res[op] in ("EROFS", "EACCES"), (how, op, res)
        # Bound at DST only, not at its own path as well.
        assert res["host-path"] == "ENOENT", (how, res)
    assert snapshot(f) == before


@pytest.mark.parametrize("dst", ["relative", "/", "/tmp", "/workspace/x", "/proc/x", "/dev", "/home/sandbox", "/home",
                                 "/run/../etc", "/run//x", "/run/./x", ""])
def test_ro_bind_bad_destination(nat, dst):
    """A destination that is not absolute and plain, or that would cover the
    sandbox's own mounts: one line, 125, nothing run."""
    marker = os.path.join(nat.work, "ran")
    r = nat.run("--workspace", nat.work, "--ro-bind", f"{nat.work}:{dst}", "--", "/bin/sh", "-c", "touch /workspace/ran")
    assert "--ro-bind" in one_error_line(r)
    assert not os.path.exists(marker)


def test_tmp_size_caps_tmp_and_home(nat):
    """--tmp-size: /tmp and the home are tmpfs of at most that many bytes
    each (ENOSPC past it); without it they are bigger."""
    code = """
def fill(p):
    with open(p, "wb") as f:
        f.write(b"x" * (3 << 20))
        f.flush()
        os.fsync(f.fileno())
    return "WROTE"
R["tmp"] = t(fill, "/tmp/big")
R["home"] = t(fill, "/home/sandbox/big")
"""
    r = nat.run("--workspace", nat.work, "--tmp-size", str(1 << 20), "--", PYTHON, "-c", PRELUDE + code + EPILOGUE)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res == {"tmp": "ENOSPC", "home": "ENOSPC"}, res
    r = nat.run("--workspace", nat.work, "--", PYTHON, "-c", PRELUDE + code + EPILOGUE)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["tmp"] != "ENOSPC" and res["home"] != "ENOSPC", res
    bad = nat.run("--workspace", nat.work, "--tmp-size", "lots", "--", "/bin/true")
    assert "--tmp-size" in one_error_line(bad)


def test_ro_bind_and_tmp_size_need_full(nat):
    """FS-ONLY has no mount namespace to bind or mount in: refused, not
    ignored."""
    for extra in (["--ro-bind", f"{nat.work}:/run/x"], ["--tmp-size", "1048576"]):
        r = nat.run("--mode", "fs-only", "--workspace", nat.work, *extra, "--", "/bin/true")
        assert "needs FULL mode" in one_error_line(r), extra


def test_bind_read_write_and_rw_of_a_join(nat):
    """--bind SRC:DST: writable at DST by the command of a sandbox of its
    own; in a hold, by a join told --rw DST, and by no other join
    (Landlock's rules are each join's own); SRC's host copy gets what was
    written. --rw outside --join is refused."""
    src = nat.outside_tmp_dir("rwbind")
    code = """
R["write"] = t(write, "/run/lazaret/rw/%s", "from inside\\n")
"""
    r = nat.run("--workspace", nat.work, "--bind", f"{src}:/run/lazaret/rw", "--", PYTHON, "-c",
                PRELUDE + code % "run" + EPILOGUE)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"write": "OK"}
    assert open(os.path.join(src, "run")).read() == "from inside\n"
    h = nat.hold(extra=["--bind", f"{src}:/run/lazaret/rw"])
    r = nat.join(h.init, [PYTHON, "-c", PRELUDE + code % "without" + EPILOGUE])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["write"] == "EACCES"
    assert not os.path.exists(os.path.join(src, "without"))
    r = nat.run("--join", str(h.init), "--rw", "/run/lazaret/rw", "--", PYTHON, "-c",
                PRELUDE + code % "with" + EPILOGUE)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"write": "OK"}
    assert open(os.path.join(src, "with")).read() == "from inside\n"
    bad = nat.run("--workspace", nat.work, "--rw", "/run/lazaret/rw", "--", "/bin/true")
    assert "--rw is only for --join" in one_error_line(bad)


def test_loopback_is_the_sandboxs_own(nat):
    """--loopback (egress by name's relay listens there): the sandbox's own
    loopback is up and TCP works on it (a server and a client inside); the
    host's loopback listener still receives nothing (ECONNREFUSED: the
    sandbox's 127.0.0.1 is its own); a join without --loopback keeps
    Landlock's TCP refusal; FS-ONLY refuses it."""
    code = r"""
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
c = socket.create_connection(srv.getsockname(), timeout=5)
a, _ = srv.accept()
c.sendall(b"inside")
R["own"] = a.recv(16).decode()
def host():
    s = socket.socket()
    s.settimeout(3)
    s.connect(("127.0.0.1", %d))
R["host"] = t(host)
"""
    with listener(nat.user, "tcp", "127.0.0.1") as (port, acc):
        r = nat.run("--workspace", nat.work, "--loopback", "--", PYTHON, "-c", PRELUDE + code % port + EPILOGUE)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout.strip().splitlines()[-1])
        assert res == {"own": "inside", "host": "ECONNREFUSED"}, res
        h = nat.hold(extra=["--loopback"])
        with_lo = nat.run("--join", str(h.init), "--loopback", "--", PYTHON, "-c",
                          PRELUDE + code % port + EPILOGUE)
        assert with_lo.returncode == 0, with_lo.stderr
        assert json.loads(with_lo.stdout.strip().splitlines()[-1]) == {"own": "inside", "host": "ECONNREFUSED"}
        without = nat.join(h.init, [PYTHON, "-c", PRELUDE + 'R["bind"] = t(socket.socket().bind, ("127.0.0.1", 0))'
                                    + EPILOGUE])
        assert json.loads(without.stdout.strip().splitlines()[-1]) == {"bind": "EACCES"}, without.stdout
        assert acc() == 0
    bad = nat.run("--mode", "fs-only", "--workspace", nat.work, "--loopback", "--", "/bin/true")
    assert "needs FULL mode" in one_error_line(bad)


def test_nproc_sets_the_limit_in_run_hold_and_join(nat):
    """--nproc N: every process of the sandbox has RLIMIT_NPROC N (the
    coordinator's pids_limit; counted in the sandbox's own user namespace,
    test_native_run.py shows the count); bad values and FS-ONLY refused."""
    code = 'R["limit"] = [line.split()[2] for line in open("/proc/self/limits") if line.startswith("Max processes")][0]'
    r = nat.run("--workspace", nat.work, "--nproc", "77", "--", PYTHON, "-c", PRELUDE + code + EPILOGUE)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"limit": "77"}
    h = nat.hold(extra=["--nproc", "66"])
    r = nat.run("--join", str(h.init), "--nproc", "55", "--", PYTHON, "-c", PRELUDE + code + EPILOGUE)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"limit": "55"}
    for bad in ("0", "many", "-1"):
        assert "--nproc" in one_error_line(nat.run("--workspace", nat.work, "--nproc", bad, "--", "/bin/true"))
    r = nat.run("--mode", "fs-only", "--workspace", nat.work, "--nproc", "10", "--", "/bin/true")
    assert "needs FULL mode" in one_error_line(r)


def memory_cgroup_of(user):
    """The cgroup v1 memory directory scripts/setup.sh gives the test user,
    or a loud skip naming why there is none."""
    d = f"/sys/fs/cgroup/memory/lazaret-{user.pw_name}"
    if not os.path.isdir(d):
        v1 = os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")
        pytest.skip(f"SKIPPED LOUDLY: no memory cgroup {d}: " +
                    (f"scripts/setup.sh --memory-cgroup {user.pw_name} makes it" if v1 else
                     "this host has no cgroup v1 memory hierarchy, and cgroup v2 is not supported yet"))
    return d


def cgroup_line(text):
    return [line.split(":", 2)[2] for line in text.splitlines() if line.split(":")[1] == "memory"][0]


def test_cgroup_moves_run_hold_and_join(nat):
    """--cgroup DIR: the launcher moves into that cgroup first, so the
    command of a run, and of each join, and the whole held sandbox are in
    it (the kernel charges their memory there). Bad directories: one error,
    nothing run."""
    parent = memory_cgroup_of(nat.user)
    child = os.path.join(parent, "t-" + secrets.token_hex(4))
    subprocess.run(["runuser", "-u", nat.user.pw_name, "--", "mkdir", child], check=True)
    rel = child[len("/sys/fs/cgroup/memory"):]
    try:
        code = 'R["cg"] = open("/proc/self/cgroup").read()'
        r = nat.run("--workspace", nat.work, "--cgroup", child, "--", PYTHON, "-c", PRELUDE + code + EPILOGUE)
        assert r.returncode == 0, r.stderr
        assert cgroup_line(json.loads(r.stdout.strip().splitlines()[-1])["cg"]) == rel
        h = nat.hold(extra=["--cgroup", child])
        with open(f"/proc/{h.init}/cgroup") as f:
            assert cgroup_line(f.read()) == rel, "the held sandbox's init"
        r = nat.run("--join", str(h.init), "--cgroup", child, "--", PYTHON, "-c", PRELUDE + code + EPILOGUE)
        assert r.returncode == 0, r.stderr
        assert cgroup_line(json.loads(r.stdout.strip().splitlines()[-1])["cg"]) == rel
        # From inside, the cgroup file system is not there to leave by.
        r = nat.run("--join", str(h.init), "--cgroup", child, "--", "/bin/sh", "-c",
                    f"echo $$ > {parent}/cgroup.procs; echo $$ > /sys/fs/cgroup/memory/cgroup.procs; "
                    "grep memory /proc/self/cgroup")
        assert r.stdout.strip().endswith(rel), r.stdout + r.stderr
        assert "cannot create" in r.stderr, r.stderr
        h.end()
        marker = os.path.join(nat.work, "ran")
        for bad, why in ((os.path.join(parent, "none"), "No such file or directory"),
                         (nat.work, "not a directory of a cgroup file system"),
                         ("/sys/fs/cgroup/memory", "cannot open its tasks: Permission denied")):
            r = nat.run("--workspace", nat.work, "--cgroup", bad, "--", "/bin/touch", marker)
            line = one_error_line(r)
            assert "--cgroup" in line and why in line, line
            assert not os.path.exists(marker)
    finally:
        wait_until(lambda: not open(os.path.join(child, "cgroup.procs")).read(), timeout=5)
        os.rmdir(child)


def test_fs_only_cwd_env_fd_and_what_the_command_leaves(nat):
    """FS-ONLY runs as a session of the coordinator does: --cwd below the
    workspace (no link followed, nothing outside), --env-fd for the
    session's environment (not on a command line); and whatever the
    command leaves behind, a daemon that left its process group with
    setsid included, ends with it (the launcher is its subreaper)."""
    nat.mkdir("sub")
    os.symlink("/etc", os.path.join(nat.work, "link"))
    fd = _memfd(b"FOO=from-fd\0")
    tag = secrets.token_hex(4)
    try:
        p = nat.direct(["--mode", "fs-only", "--workspace", nat.work, "--cwd", "sub", "--env-fd", str(fd), "--",
                        "/bin/sh", "-c",
                        f'pwd; echo "$FOO"; setsid sh -c "sleep 97; : {tag}" & sleep 2'],
                       pass_fds=[fd])
    finally:
        os.close(fd)

    def running():
        return tag in subprocess.run(["ps", "-u", nat.user.pw_name, "-o", "args="], capture_output=True,
                                     text=True).stdout

    assert wait_until(running, timeout=2), "the daemon was never seen"
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert out.decode().splitlines() == [os.path.join(nat.work, "sub"), "from-fd"], out
    ps = subprocess.run(["ps", "-u", nat.user.pw_name, "-o", "args="], capture_output=True, text=True).stdout
    assert tag not in ps, "the setsid daemon outlived the command: " + ps
    for args, why in ((["--cwd", "link"], "a symbolic link is on the way"),
                      (["--cwd", "../x"], "without \".\" or \"..\""),
                      (["--cwd", "none"], "no such directory")):
        r = nat.run("--mode", "fs-only", "--workspace", nat.work, *args, "--", "/bin/true")
        assert why in one_error_line(r), (args, r.stderr)
    r = nat.run("--workspace", nat.work, "--cwd", "sub", "--", "/bin/true")
    assert "--cwd is only for --join and --mode fs-only" in one_error_line(r)
    r = nat.run("--workspace", nat.work, "--env-fd", "3", "--", "/bin/true")
    assert "--env-fd is only for --join and --mode fs-only" in one_error_line(r)


# ---- --persist (issue 45) ------------------------------------------------------

def persist_dir(nat, name):
    """A private (0700) directory of the test user for --persist."""
    d = nat.outside_tmp_dir(name)
    os.chmod(d, 0o700)
    return d


def test_persist_keeps_a_directory_across_runs(nat):
    """--persist DIR:DST: what the command writes at DST is in DIR/upper on
    the host and there for the next sandbox, through a hold and a join told
    --rw DST (and for no other join); the host's own DST (/usr/local, the
    lower layer) is unchanged; elsewhere (/opt) DST is DIR/upper alone,
    starting empty."""
    usr, opt = persist_dir(nat, "usrlocal"), persist_dir(nat, "opt")
    host_before = sorted(os.listdir("/usr/local"))
    code = """
R["usr"] = t(write, "/usr/local/lz-%s", "u\\n")
R["opt"] = t(write, "/opt/lz-%s", "o\\n")
R["opt-list"] = sorted(os.listdir("/opt"))
R["mounts"] = sorted(l.split()[4] + " " + l.split(" - ")[1].split()[0] for l in open("/proc/self/mountinfo")
                     if l.split()[4] in ("/usr/local", "/opt"))
"""
    args = ["--persist", f"{usr}:/usr/local", "--persist", f"{opt}:/opt"]
    r = nat.run("--workspace", nat.work, *args, "--", PYTHON, "-c", PRELUDE + code % ("run", "run") + EPILOGUE)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert (res["usr"], res["opt"], res["opt-list"]) == ("OK", "OK", ["lz-run"]), res
    # /usr/local the overlay, /opt the layer's directory bound (the host
    # file system's type).
    assert "/usr/local overlay" in res["mounts"] and any(m.startswith("/opt ") for m in res["mounts"]), res
    assert open(os.path.join(usr, "upper", "lz-run")).read() == "u\n"
    assert open(os.path.join(opt, "upper", "lz-run")).read() == "o\n"
    h = nat.hold(extra=args)
    r = nat.join(h.init, [PYTHON, "-c", PRELUDE + code % ("nojoin", "nojoin") + EPILOGUE])
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert (res["usr"], res["opt"], res["opt-list"]) == ("EACCES", "EACCES", ["lz-run"]), res
    r = nat.run("--join", str(h.init), "--rw", "/usr/local", "--rw", "/opt", "--", PYTHON, "-c",
                PRELUDE + code % ("join", "join") + EPILOGUE)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert (res["usr"], res["opt"], res["opt-list"]) == ("OK", "OK", ["lz-join", "lz-run"]), res
    assert sorted(os.listdir("/usr/local")) == host_before
    assert not os.path.exists("/usr/local/lz-run") and not os.path.exists("/opt/lz-run")


@pytest.mark.parametrize("case", ["dir-not-private", "dir-missing", "dst-root", "dst-tmp", "dst-workspace",
                                  "dst-symlink", "fs-only"])
def test_persist_bad_input(nat, case):
    """A layer directory that is not the user's private one, a destination
    over the sandbox's own mounts or through a symbolic link on the host
    (Debian's /bin, a link to usr/bin), FS-ONLY: one line, 125, nothing
    run."""
    d = persist_dir(nat, "bad")
    dst, extra = "/usr/local", []
    if case == "dir-not-private":
        os.chmod(d, 0o755)
    elif case == "dir-missing":
        d = os.path.join(d, "missing")
    elif case.startswith("dst-"):
        dst = {"dst-root": "/", "dst-tmp": "/tmp", "dst-workspace": "/workspace/x", "dst-symlink": "/bin"}[case]
    else:
        extra = ["--mode", "fs-only"]
    marker = os.path.join(nat.work, "ran")
    r = nat.run(*extra, "--workspace", nat.work, "--persist", f"{d}:{dst}", "--", "/bin/sh", "-c",
                "touch /workspace/ran")
    line = one_error_line(r)
    want = {"dir-not-private": "not a private directory", "dir-missing": "--persist",
            "dst-root": "--persist", "dst-tmp": "--persist", "dst-workspace": "--persist",
            "dst-symlink": "a symbolic link or not a directory", "fs-only": "needs FULL mode"}[case]
    assert want in line, line
    assert not os.path.exists(marker)


def test_ro_pinned_binds_only_the_checked_directory(nat):
    """--ro-pinned DEV:INO:PATH (a repository's .git bound read-only when
    no git router serves it): the directory lazaret checked is bound at its
    path; the same path swapped for a symbolic link to another directory
    (the attack of a process that may rename entries of its parent), or
    another directory put there, is refused with one line before the
    command runs."""
    d = nat.outside_tmp_dir("pinned")
    repo, other = os.path.join(d, "repo"), os.path.join(d, "other")
    for p in (repo, other):
        os.makedirs(p)
        chown_user(p, nat.user)
    for p, text in ((os.path.join(repo, "mine"), "mine\n"), (os.path.join(other, "CANARY"), "secret\n")):
        with open(p, "w") as f:
            f.write(text)
    st = os.stat(repo)
    pin = f"{st.st_dev}:{st.st_ino}:{repo}"
    marker = os.path.join(nat.work, "ran")

    def run():
        return nat.run("--workspace", nat.work, "--ro-pinned", pin, "--", "/bin/sh", "-c",
                       f"ls {repo} && touch /workspace/ran")

    r = run()
    assert r.returncode == 0 and "mine" in r.stdout, r.stderr
    os.unlink(marker)
    os.rename(repo, repo + ".real")
    os.symlink("other", repo)
    r = run()
    assert r.returncode != 0 and "CANARY" not in r.stdout, r.stdout
    assert "is no longer the directory lazaret checked" in r.stderr, r.stderr
    one_error_line(r)
    assert not os.path.exists(marker)
    os.unlink(repo)
    os.makedirs(repo)
    r = run()
    assert r.returncode != 0 and "another directory is there now" in r.stderr, r.stderr
    assert not os.path.exists(marker)
    r = nat.run("--workspace", nat.work, "--ro-pinned", repo, "--", "/bin/true")
    assert r.returncode != 0 and "DEV:INO:PATH expected" in r.stderr, r.stderr


@pytest.mark.parametrize("opt", ["--bind-pinned", "--ro-bind-pinned"])
def test_bind_pinned_binds_only_the_checked_volume(nat, opt):
    """--bind-pinned / --ro-bind-pinned DEV:INO:SRC:DST (a volume, as launch
    resolved and checked it): SRC is bound at DST (written through with
    --bind-pinned, not with the read-only one); SRC swapped for a symbolic
    link to another directory, or another directory put there, is refused
    in one line before the command runs, the other directory unread."""
    d = nat.outside_tmp_dir("vpinned")
    vol, other = os.path.join(d, "vol"), os.path.join(d, "other")
    for p in (vol, other):
        os.makedirs(p)
        chown_user(p, nat.user)
    for p, text in ((os.path.join(vol, "mine"), "mine\n"), (os.path.join(other, "CANARY"), "secret\n")):
        with open(p, "w") as f:
            f.write(text)
    st = os.stat(vol)
    pin = f"{st.st_dev}:{st.st_ino}:{vol}:/data/v"
    marker = os.path.join(nat.work, "ran")

    def run():
        return nat.run("--workspace", nat.work, opt, pin, "--", "/bin/sh", "-c",
                       "ls /data/v; (echo w > /data/v/new) 2>/dev/null && echo wrote; touch /workspace/ran")

    r = run()
    assert r.returncode == 0 and "mine" in r.stdout, r.stderr
    assert ("wrote" in r.stdout) == (opt == "--bind-pinned"), r.stdout
    assert os.path.exists(os.path.join(vol, "new")) == (opt == "--bind-pinned")
    os.unlink(marker)
    os.rename(vol, vol + ".real")
    os.symlink("other", vol)
    r = run()
    assert r.returncode != 0 and "CANARY" not in r.stdout, r.stdout
    assert "is no longer what lazaret checked" in r.stderr, r.stderr
    one_error_line(r)
    assert not os.path.exists(marker)
    os.unlink(vol)
    os.makedirs(vol)
    r = run()
    assert r.returncode != 0 and "another file is there now" in r.stderr, r.stderr
    assert not os.path.exists(marker)
    r = nat.run("--workspace", nat.work, opt, f"{vol}:/data/v", "--", "/bin/true")
    assert r.returncode != 0 and "DEV:INO:SRC:DST expected" in r.stderr, r.stderr
