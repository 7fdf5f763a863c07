/* SPDX-License-Identifier: MIT */
/* Unit tests of src/native/seccomp-filter: each attempt runs in a forked
 * child twice, once unfiltered (the control) and once after
 * native_seccomp_apply, and reports 0 or -errno through a pipe. The filtered
 * outcome must be the filter's errno; where the control already fails the
 * same way (an unprivileged run, a sysctl), the case cannot tell the filter
 * apart and is skipped, saying so, after its filtered assertion. Arguments
 * are chosen so that the unfiltered call fails harmlessly where it could do
 * damage (nothing is mounted, loaded or attached). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/io_uring.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "macro.h"
#include "seccomp-filter.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1 /* Linux 5.11, include/uapi/linux/userfaultfd.h */
#endif

#define NO_FILTER (-1)
#define EXPORTED  (1 << 30) /* with a flag: native_seccomp_export, then native_seccomp_load */

typedef int (*Attempt)(const void *arg);

typedef struct Outcome {
        int apply; /* native_seccomp_apply's return, 0 without a filter */
        int result; /* the attempt's 0 or -errno */
        int signal; /* the signal that killed the child, or 0 */
} Outcome;

static int errno_of(long r) {
        return r < 0 ? -errno : 0;
}

/* Fork; the child installs the filter for flags (unless NO_FILTER), runs a
 * and reports. */
static Outcome run(int flags, Attempt a, const void *arg) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                Outcome o = { 0 };
                close(p[0]);
                if (flags != NO_FILTER && (flags & EXPORTED)) {
                        /* Built and exported here, loaded as a spawn()
                         * child loads it: the same filter. */
                        struct sock_fprog prog;
                        o.apply = native_seccomp_export((unsigned) flags & ~(unsigned) EXPORTED, &prog);
                        if (o.apply == 0) {
                                o.apply = native_seccomp_load(&prog);
                                native_seccomp_prog_done(&prog);
                        }
                } else if (flags != NO_FILTER)
                        o.apply = native_seccomp_apply((unsigned) flags);
                if (o.apply == 0)
                        o.result = a(arg);
                (void) !write(p[1], &o, sizeof(o));
                _exit(0);
        }
        close(p[1]);
        Outcome o = { 0 };
        ssize_t k = read(p[0], &o, sizeof(o));
        close(p[0]);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (WIFSIGNALED(st)) {
                o.signal = WTERMSIG(st);
                return o;
        }
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_int_equal(k, (ssize_t) sizeof(o));
        return o;
}

/* The filtered attempt must fail with want. Returns whether that proves
 * anything: false (with a note) when the control fails the same way here. */
static bool check_denied(const char *what, unsigned flags, Attempt a, const void *arg, int want) {
        Outcome got = run((int) flags, a, arg);
        assert_int_equal(got.signal, 0);
        assert_int_equal(got.apply, 0);
        if (got.result != want)
                print_message("%s: filtered outcome %d (%s), expected %d\n", what, got.result, strerror(-got.result),
                              want);
        assert_int_equal(got.result, want);
        Outcome ctl = run(NO_FILTER, a, arg);
        assert_int_equal(ctl.signal, 0);
        if (ctl.result == want) {
                print_message("note: %s fails with %s even without the filter here\n", what, strerror(-want));
                return false;
        }
        return true;
}

/* A case whose only check proves nothing here is skipped. */
#define CHECK_DENIED_OR_SKIP(...)                                                                                      \
        do {                                                                                                           \
                if (!check_denied(__VA_ARGS__))                                                                        \
                        skip();                                                                                        \
        } while (0)

/* Works with and without the filter. */
static void check_allowed(const char *what, unsigned flags, Attempt a, const void *arg) {
        Outcome got = run((int) flags, a, arg);
        assert_int_equal(got.signal, 0);
        assert_int_equal(got.apply, 0);
        if (got.result != 0)
                print_message("%s: filtered outcome %d (%s)\n", what, got.result, strerror(-got.result));
        assert_int_equal(got.result, 0);
}

static int a_unshare_newuser(const void *arg) {
        (void) arg;
        return errno_of(unshare(CLONE_NEWUSER));
}

static int a_unshare_nothing(const void *arg) {
        (void) arg;
        return errno_of(unshare(0));
}

static void test_unshare(void **state) {
        (void) state;
        check_denied("unshare(0)", 0, a_unshare_nothing, NULL, -EPERM);
        check_denied("unshare(CLONE_NEWUSER)", 0, a_unshare_newuser, NULL, -EPERM);
}

/* A mount point that does not exist: unfiltered, ENOENT (root) or EPERM. */
static int a_mount(const void *arg) {
        (void) arg;
        return errno_of(mount("none", "/nonexistent-lazaret-test", "tmpfs", 0, NULL));
}

static void test_mount(void **state) {
        (void) state;
        CHECK_DENIED_OR_SKIP("mount", 0, a_mount, NULL, -EPERM);
}

static int a_ptrace_attach(const void *arg) {
        pid_t target = arg ? *(const pid_t *) arg : getppid();
        if (ptrace(PTRACE_ATTACH, target, NULL, NULL) < 0)
                return -errno;
        /* The filter failed: let the parent go before reporting it. */
        (void) waitpid(target, NULL, __WALL);
        (void) ptrace(PTRACE_DETACH, target, NULL, NULL);
        return 0;
}

static void test_ptrace(void **state) {
        (void) state;
        /* The parent has no control run: unfiltered, root would stop it. */
        Outcome got = run(0, a_ptrace_attach, NULL);
        assert_int_equal(got.signal, 0);
        assert_int_equal(got.result, -EPERM);
        /* A pid above pid_max: ESRCH unless the filter answers first. */
        static const pid_t nobody = INT_MAX;
        CHECK_DENIED_OR_SKIP("ptrace(PTRACE_ATTACH)", 0, a_ptrace_attach, &nobody, -EPERM);
}

static char marker[] = "lazaret-marker";

static int a_vm_readv(const void *arg) {
        pid_t target = arg ? getpid() : getppid();
        char buf[sizeof(marker)];
        struct iovec local = { buf, sizeof(buf) }, remote = { marker, sizeof(marker) };
        ssize_t n = process_vm_readv(target, &local, 1, &remote, 1, 0);
        if (n < 0)
                return -errno;
        return n == (ssize_t) sizeof(marker) && memcmp(buf, marker, sizeof(buf)) == 0 ? 0 : -EIO;
}

static void test_process_vm_readv(void **state) {
        (void) state;
        Outcome got = run(0, a_vm_readv, NULL);
        assert_int_equal(got.signal, 0);
        assert_int_equal(got.result, -EPERM);
        /* Even its own memory: the control reads it. */
        CHECK_DENIED_OR_SKIP("process_vm_readv(self)", 0, a_vm_readv, "self", -EPERM);
}

static int a_io_uring_setup(const void *arg) {
        (void) arg;
        struct io_uring_params p;
        memset(&p, 0, sizeof(p));
        long fd = syscall(SYS_io_uring_setup, 4, &p);
        if (fd < 0)
                return -errno;
        close((int) fd);
        return 0;
}

static void test_io_uring(void **state) {
        (void) state;
        CHECK_DENIED_OR_SKIP("io_uring_setup", 0, a_io_uring_setup, NULL, -EPERM);
}

static int a_userfaultfd(const void *arg) {
        (void) arg;
        long fd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
        if (fd < 0)
                return -errno;
        close((int) fd);
        return 0;
}

static void test_userfaultfd(void **state) {
        (void) state;
        CHECK_DENIED_OR_SKIP("userfaultfd", 0, a_userfaultfd, NULL, -EPERM);
}

/* An unknown command: EINVAL from the kernel, whoever asks. */
static int a_bpf(const void *arg) {
        (void) arg;
        return errno_of(syscall(SYS_bpf, 0x7fff, NULL, 0));
}

static void test_bpf(void **state) {
        (void) state;
        CHECK_DENIED_OR_SKIP("bpf", 0, a_bpf, NULL, -EPERM);
}

static int a_perf_event_open(const void *arg) {
        (void) arg;
        struct perf_event_attr pa;
        memset(&pa, 0, sizeof(pa));
        pa.type = PERF_TYPE_SOFTWARE;
        pa.size = sizeof(pa);
        pa.config = PERF_COUNT_SW_DUMMY;
        pa.disabled = 1;
        pa.exclude_kernel = 1;
        pa.exclude_hv = 1;
        long fd = syscall(SYS_perf_event_open, &pa, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
                return -errno;
        close((int) fd);
        return 0;
}

static void test_perf_event_open(void **state) {
        (void) state;
        CHECK_DENIED_OR_SKIP("perf_event_open", 0, a_perf_event_open, NULL, -EPERM);
}

static int a_keyctl(const void *arg) {
        (void) arg;
        return errno_of(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 1));
}

static void test_keyctl(void **state) {
        (void) state;
        CHECK_DENIED_OR_SKIP("keyctl", 0, a_keyctl, NULL, -EPERM);
}

/* A new session with a fresh pty as its controlling terminal (so TIOCSTI is
 * permitted unfiltered without CAP_SYS_ADMIN); the slave's fd, or -errno. */
static int open_pty_as_ctty(void) {
        if (setsid() < 0)
                return -errno;
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0)
                return -errno;
        if (grantpt(m) < 0 || unlockpt(m) < 0)
                return -errno;
        const char *name = ptsname(m);
        if (!name)
                return -errno;
        int s = open(name, O_RDWR | O_CLOEXEC);
        if (s < 0)
                return -errno;
        return s;
}

/* arg: the request as the register holds it. Unfiltered, TIOCSTI is 0 (EIO
 * with dev.tty.legacy_tiocsti=0), TIOCLINUX on a pty is not a VT ioctl. */
static int a_tty_ioctl(const void *arg) {
        unsigned long req = *(const unsigned long *) arg;
        int s = open_pty_as_ctty();
        if (s < 0)
                return s;
        /* Room for what the kernel writes back (a struct winsize). */
        char buf[64] = { 0 };
        buf[0] = req == TIOCLINUX ? 6 /* TIOCL_GETSHIFTSTATE */ : 'x';
        return errno_of(syscall(SYS_ioctl, s, req, buf));
}

static void test_tiocsti(void **state) {
        (void) state;
        static const unsigned long sti = TIOCSTI, linux_req = TIOCLINUX;
        /* The kernel reads the request as 32 bits: high bits change nothing. */
        static const unsigned long sti_high = TIOCSTI | (1UL << 32);
        static const unsigned long winsz = TIOCGWINSZ;

        Outcome got = run(0, a_tty_ioctl, &sti_high);
        assert_int_equal(got.result, -EPERM);
        got = run(0, a_tty_ioctl, &linux_req);
        assert_int_equal(got.result, -EPERM);
        check_allowed("ioctl(TIOCGWINSZ)", 0, a_tty_ioctl, &winsz);
        CHECK_DENIED_OR_SKIP("ioctl(TIOCSTI)", 0, a_tty_ioctl, &sti, -EPERM);
}

static int a_clone(const void *arg) {
        unsigned long flags = *(const unsigned long *) arg;
        long pid = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
        if (pid < 0)
                return -errno;
        if (pid == 0)
                _exit(0);
        int st;
        if (waitpid((pid_t) pid, &st, 0) < 0)
                return -errno;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

static void test_clone_namespaces(void **state) {
        (void) state;
        static const unsigned long none = 0, user = CLONE_NEWUSER, user_net = CLONE_NEWUSER | CLONE_NEWNET,
                                   ns = CLONE_NEWNS;
        check_allowed("clone()", 0, a_clone, &none);
        bool proved = check_denied("clone(CLONE_NEWUSER|CLONE_NEWNET)", 0, a_clone, &user_net, -EPERM);
        proved |= check_denied("clone(CLONE_NEWUSER)", 0, a_clone, &user, -EPERM);
        /* Needs privilege unfiltered: proves something only as root. */
        proved |= check_denied("clone(CLONE_NEWNS)", 0, a_clone, &ns, -EPERM);
        if (!proved)
                skip();
}

/* NULL and size 0: EINVAL from a kernel that has clone3. */
static int a_clone3(const void *arg) {
        (void) arg;
        return errno_of(syscall(SYS_clone3, NULL, 0));
}

static void *thread_main(void *p) {
        return p;
}

static int a_thread(const void *arg) {
        (void) arg;
        pthread_t t;
        void *ret = NULL;
        int r = pthread_create(&t, NULL, thread_main, marker);
        if (r != 0)
                return -r;
        r = pthread_join(t, &ret);
        if (r != 0)
                return -r;
        return ret == marker ? 0 : -EIO;
}

static int a_fork(const void *arg) {
        (void) arg;
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0)
                _exit(7);
        int st;
        if (waitpid(pid, &st, 0) < 0)
                return -errno;
        return WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : -EIO;
}

static void test_clone3_and_fallback(void **state) {
        (void) state;
        /* libc must fall back to clone: threads and fork keep working. */
        check_allowed("pthread_create", 0, a_thread, NULL);
        check_allowed("fork", 0, a_fork, NULL);
        check_denied("clone3", 0, a_clone3, NULL, -ENOSYS);
}

static int a_socket(const void *arg) {
        int family = *(const int *) arg;
        int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 && family == AF_NETLINK)
                fd = socket(family, SOCK_RAW | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

static int a_socketpair(const void *arg) {
        int family = *(const int *) arg, sv[2];
        if (socketpair(family, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        close(sv[0]);
        close(sv[1]);
        return 0;
}

static void test_no_net(void **state) {
        (void) state;
        static const int unix_ = AF_UNIX, inet = AF_INET, inet6 = AF_INET6, netlink = AF_NETLINK;
        check_allowed("socket(AF_UNIX)", NATIVE_SECCOMP_NO_NET, a_socket, &unix_);
        check_allowed("socketpair(AF_UNIX)", NATIVE_SECCOMP_NO_NET, a_socketpair, &unix_);
        /* Without the flag, the network stays the network's business. */
        check_allowed("socket(AF_INET) without NO_NET", 0, a_socket, &inet);
        check_denied("socket(AF_INET6)", NATIVE_SECCOMP_NO_NET, a_socket, &inet6, -EAFNOSUPPORT);
        check_denied("socket(AF_NETLINK)", NATIVE_SECCOMP_NO_NET, a_socket, &netlink, -EAFNOSUPPORT);
        check_denied("socketpair(AF_INET)", NATIVE_SECCOMP_NO_NET, a_socketpair, &inet, -EAFNOSUPPORT);
        check_denied("socket(AF_INET)", NATIVE_SECCOMP_NO_NET, a_socket, &inet, -EAFNOSUPPORT);
}

static int a_mkfifo(const void *arg) {
        (void) arg;
        char path[64];
        snprintf(path, sizeof path, "/tmp/lazaret-seccomp-fifo-%d", (int) getpid());
        int r = errno_of(mknod(path, S_IFIFO | 0600, 0));
        (void) unlink(path);
        return r;
}

/* An auto-approved escalation's filter (issue 41), exported and loaded as
 * the escalation's child does: no socket of any family, no mknod, and
 * the base list with it. */
static void test_no_socket_exported(void **state) {
        (void) state;
        static const int unix_ = AF_UNIX, inet = AF_INET;
        check_denied("socket(AF_UNIX)", EXPORTED | NATIVE_SECCOMP_NO_SOCKET, a_socket, &unix_, -EPERM);
        check_denied("socket(AF_INET)", EXPORTED | NATIVE_SECCOMP_NO_SOCKET, a_socket, &inet, -EPERM);
        check_denied("mknod(FIFO)", EXPORTED | NATIVE_SECCOMP_NO_SOCKET, a_mkfifo, NULL, -EPERM);
        check_allowed("socketpair(AF_UNIX)", EXPORTED | NATIVE_SECCOMP_NO_SOCKET, a_socketpair, &unix_);
        CHECK_DENIED_OR_SKIP("unshare(CLONE_NEWUSER)", EXPORTED | NATIVE_SECCOMP_NO_SOCKET, a_unshare_newuser, NULL,
                             -EPERM);
}

/* The rest of the list, with arguments that make each fail harmlessly
 * unfiltered (bad descriptors, missing paths, invalid sizes). */
typedef struct Call {
        const char *name;
        long nr;
        long a[6];
} Call;

static int a_call(const void *arg) {
        const Call *c = arg;
        long r = syscall(c->nr, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4], c->a[5]);
        if (r < 0)
                return -errno;
        if (c->nr == SYS_fsopen || c->nr == SYS_open_tree || c->nr == SYS_fspick || c->nr == SYS_fsmount)
                close((int) r);
        return 0;
}

static void test_other_denied_calls(void **state) {
        (void) state;
        const long missing = (long) "/nonexistent-lazaret-test", empty = (long) "", me = getpid();
        const long no_type = (long) "lazaret_no_such_key_type", desc = (long) "lazaret";
        const Call calls[] = {
                { "umount2", SYS_umount2, { missing, 0 } },
                { "pivot_root", SYS_pivot_root, { missing, missing } },
                { "move_mount", SYS_move_mount, { -1, empty, -1, empty, 0 } },
                { "open_tree", SYS_open_tree, { -1, missing, 0 } },
                { "fsopen", SYS_fsopen, { (long) "lazaret_no_such_fs", 0 } },
                { "fsconfig", SYS_fsconfig, { -1, 0, 0, 0, 0 } },
                { "fsmount", SYS_fsmount, { -1, 0, 0 } },
                { "fspick", SYS_fspick, { -1, missing, 0 } },
                { "mount_setattr", SYS_mount_setattr, { -1, missing, 0, 0, 0 } },
                { "setns", SYS_setns, { -1, 0 } },
                { "process_vm_writev", SYS_process_vm_writev, { me, 0, 0, 0, 0, 0 } },
                { "pidfd_getfd", SYS_pidfd_getfd, { -1, 0, 0 } },
                { "kcmp", SYS_kcmp, { me, me, 0 /* KCMP_FILE */, 0, 0 } },
                { "io_uring_enter", SYS_io_uring_enter, { -1, 0, 0, 0, 0, 0 } },
                { "io_uring_register", SYS_io_uring_register, { -1, 0, 0, 0 } },
                { "add_key", SYS_add_key, { no_type, desc, 0, 0, KEY_SPEC_PROCESS_KEYRING } },
                { "request_key", SYS_request_key, { no_type, desc, 0, 0 } },
                /* More segments than KEXEC_SEGMENT_MAX, invalid flags. */
                { "kexec_load", SYS_kexec_load, { 0, 0x7fffffff, 0, 0 } },
                { "kexec_file_load", SYS_kexec_file_load, { -1, -1, 0, 0, 0x7fff0000 } },
                /* An empty image is no ELF file. */
                { "init_module", SYS_init_module, { 0, 0, empty } },
                { "finit_module", SYS_finit_module, { -1, empty, 0 } },
                { "delete_module", SYS_delete_module, { (long) "lazaret_no_such_module", O_NONBLOCK } },
        };
        size_t told = 0;
        for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
                Outcome got = run(0, a_call, &calls[i]);
                if (got.result != -EPERM)
                        print_message("%s: filtered outcome %d\n", calls[i].name, got.result);
                assert_int_equal(got.signal, 0);
                assert_int_equal(got.result, -EPERM);
                Outcome ctl = run(NO_FILTER, a_call, &calls[i]);
                assert_int_equal(ctl.signal, 0);
                if (ctl.result != -EPERM)
                        told++;
                else
                        print_message("note: %s fails with EPERM even without the filter here\n", calls[i].name);
        }
        /* At least some of them must show the filter at work. */
        assert_true(told > 0);
}

#if defined(__x86_64__)
/* A 32-bit x86 system call from this 64-bit process: int 0x80 takes the
 * i386 numbers and the AUDIT_ARCH_I386 path through seccomp. Returns what
 * the kernel returns (-errno on failure). */
static long int80(long nr, long a, long b, long c) {
        long ret;
        __asm__ volatile("int $0x80"
                         : "=a"(ret)
                         : "a"(nr), "b"(a), "c"(b), "d"(c)
                         : "r8", "r9", "r10", "r11", "memory", "cc");
        return ret;
}

enum {
        I386_PTRACE = 26,
        I386_SOCKETCALL = 102,
        I386_KEYCTL = 288,
        I386_UNSHARE = 310,
        I386_SOCKET = 359,
        I386_CLONE3 = 435,
        I386_GETPID = 20,
};

typedef struct Call32 {
        long nr, a, b, c;
        const char *name;
} Call32;

static int a_int80(const void *arg) {
        const Call32 *c = arg;
        long r;
        if (c->nr == I386_SOCKETCALL) {
                /* socketcall's arguments are in memory a 32-bit pointer reaches. */
                uint32_t *args =
                        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
                if (args == MAP_FAILED)
                        return -errno;
                args[0] = (uint32_t) c->b;
                args[1] = SOCK_STREAM;
                args[2] = 0;
                r = int80(I386_SOCKETCALL, c->a, (long) (uintptr_t) args, 0);
        } else
                r = int80(c->nr, c->a, c->b, c->c);
        if (r < 0)
                return (int) r;
        if (c->nr == I386_SOCKET || c->nr == I386_SOCKETCALL)
                close((int) r);
        return 0;
}

static void test_x86_32bit_abi(void **state) {
        (void) state;
        static const Call32 getpid32 = { I386_GETPID, 0, 0, 0, "getpid" };
        Outcome ctl = run(NO_FILTER, a_int80, &getpid32);
        if (ctl.result < 0 || ctl.signal != 0) {
                print_message("skipped: no 32-bit x86 emulation (%d, signal %d)\n", ctl.result, ctl.signal);
                skip();
        }
        check_allowed("i386 getpid", 0, a_int80, &getpid32);

        static const Call32 unshare0 = { I386_UNSHARE, 0, 0, 0, "unshare" };
        static const Call32 ptrace_nobody = { I386_PTRACE, PTRACE_ATTACH, INT_MAX, 0, "ptrace" };
        static const Call32 keyctl = { I386_KEYCTL, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 1, "keyctl" };
        static const Call32 clone3 = { I386_CLONE3, 0, 0, 0, "clone3" };
        static const Call32 sock_unix = { I386_SOCKET, AF_UNIX, SOCK_STREAM, 0, "socket(AF_UNIX)" };
        static const Call32 sock_inet = { I386_SOCKET, AF_INET, SOCK_STREAM, 0, "socket(AF_INET)" };
        /* socketcall(SYS_SOCKET = 1, {family, type, protocol}). */
        static const Call32 sc_inet = { I386_SOCKETCALL, 1, AF_INET, 0, "socketcall(AF_INET)" };
        static const Call32 sc_unix = { I386_SOCKETCALL, 1, AF_UNIX, 0, "socketcall(AF_UNIX)" };

        check_allowed("i386 socket(AF_UNIX)", NATIVE_SECCOMP_NO_NET, a_int80, &sock_unix);
        check_allowed("i386 socket(AF_INET) without NO_NET", 0, a_int80, &sock_inet);
        check_allowed("i386 socketcall(AF_INET) without NO_NET", 0, a_int80, &sc_inet);
        check_denied("i386 socket(AF_INET)", NATIVE_SECCOMP_NO_NET, a_int80, &sock_inet, -EAFNOSUPPORT);
        /* The multiplexer's family is out of the filter's sight: refused whatever it is. */
        check_denied("i386 socketcall(AF_INET)", NATIVE_SECCOMP_NO_NET, a_int80, &sc_inet, -EAFNOSUPPORT);
        check_denied("i386 socketcall(AF_UNIX)", NATIVE_SECCOMP_NO_NET, a_int80, &sc_unix, -EAFNOSUPPORT);
        check_denied("i386 clone3", 0, a_int80, &clone3, -ENOSYS);
        check_denied("i386 keyctl", 0, a_int80, &keyctl, -EPERM);
        check_denied("i386 ptrace", 0, a_int80, &ptrace_nobody, -EPERM);
        check_denied("i386 unshare", 0, a_int80, &unshare0, -EPERM);
}

/* x32 (the x86-64 ABI with 32-bit pointers) is not in the filter: a call
 * through it kills the process, whether or not the kernel has x32. */
static int a_x32_getpid(const void *arg) {
        (void) arg;
        return errno_of(syscall(0x40000000L | SYS_getpid));
}

static void test_other_abi_killed(void **state) {
        (void) state;
        Outcome ctl = run(NO_FILTER, a_x32_getpid, NULL);
        assert_int_equal(ctl.signal, 0);
        Outcome got = run(0, a_x32_getpid, NULL);
        assert_int_equal(got.signal, SIGSYS);
}
#endif

static int a_bad_flags(const void *arg) {
        (void) arg;
        int r = native_seccomp_apply(1u << 7);
        if (r != -EINVAL)
                return r < 0 ? r : -EIO;
        /* Nothing was loaded. */
        return errno_of(unshare(0));
}

static void test_bad_flags(void **state) {
        (void) state;
        Outcome o = run(NO_FILTER, a_bad_flags, NULL);
        assert_int_equal(o.signal, 0);
        assert_int_equal(o.result, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bad_flags),
                cmocka_unit_test(test_unshare),
                cmocka_unit_test(test_mount),
                cmocka_unit_test(test_ptrace),
                cmocka_unit_test(test_process_vm_readv),
                cmocka_unit_test(test_io_uring),
                cmocka_unit_test(test_userfaultfd),
                cmocka_unit_test(test_bpf),
                cmocka_unit_test(test_perf_event_open),
                cmocka_unit_test(test_keyctl),
                cmocka_unit_test(test_tiocsti),
                cmocka_unit_test(test_clone_namespaces),
                cmocka_unit_test(test_clone3_and_fallback),
                cmocka_unit_test(test_no_net),
                cmocka_unit_test(test_no_socket_exported),
                cmocka_unit_test(test_other_denied_calls),
#if defined(__x86_64__)
                cmocka_unit_test(test_x86_32bit_abi),
                cmocka_unit_test(test_other_abi_killed),
#endif
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
