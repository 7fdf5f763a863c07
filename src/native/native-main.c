/* SPDX-License-Identifier: MIT */
/* lazaret-native: the native backend's boundary (issue 21).
 *
 * FULL mode (where unprivileged user namespaces work): the
 * command runs in new user, mount, IPC, network and PID namespaces, under
 * an init of ours as PID 1, in a root of its own (the host's system
 * directories read-only, the workspace writable, a private /tmp and home,
 * /proc of its PID namespace, a /dev of six devices and a size-limited
 * /dev/shm), restricted by Landlock to those paths and by seccomp from
 * mounts, namespaces, other processes' memory and the kernel's riskier
 * interfaces. Nothing of the host is reachable but what is bound in: no
 * /run (the user's D-Bus, ssh-agent, Podman and Docker sockets), no host
 * home, no network interface up, no process of the host visible.
 *
 * The processes:
 *   lazaret-native (P)                 waits, forwards SIGTERM and SIGHUP
 *   └─ setup (A)                       new user, mount, IPC, network ns;
 *      └─ init (B), PID 1               builds the root, reaps, ends the tree
 *         └─ the command (C)            Landlock, seccomp, execve
 * Each dies with its parent (PR_SET_PDEATHSIG, checked after it is set),
 * and the kernel ends every process of the namespace when B exits. Errors
 * of A, B and C before the command runs come back to P over a pipe, which
 * the command's execve closes: one line, exit status 125, and the command
 * never ran.
 *
 * HOLD and JOIN (FULL only): --hold builds the same sandbox and keeps it
 * running without a command, for commands that --join it later (a
 * sandbox started once, then entered as often as needed, as with podman
 * exec). B runs nothing; it is PID 1 and reaps until SIGTERM or SIGHUP
 * reaches it through P and A, then ends every process of the namespace.
 * Once the root is built, P prints "ready PID", PID being B's.
 *   lazaret-native --hold (P)          prints "ready PID" once B is ready,
 *   │                                  waits, forwards SIGTERM and SIGHUP
 *   └─ setup (A)                       as in FULL; passes B's pid on to P
 *      └─ init (B), PID 1              builds the root, says it is ready,
 *                                      reaps every orphan until SIGTERM or
 *                                      SIGHUP, then ends the tree
 *   lazaret-native --join PID (J)      checks that PID is such a B of this
 *   │                                  user's, enters its namespaces
 *   │                                  (setns), waits, forwards SIGTERM and
 *   │                                  SIGHUP, exits with the command's
 *   │                                  status
 *   └─ the command (C)                 in the sandbox's PID namespace, dies
 *                                      with J; Landlock and seccomp as in
 *                                      FULL, execve
 * What the joined commands leave running is orphaned to B and lives until
 * the sandbox ends. Each joined command gets a Landlock domain of its own:
 * they share the sandbox's files (/tmp, the home, /dev/shm, pathname
 * sockets among them), its IPC namespace and its /proc, but where Landlock
 * scopes signals and abstract sockets (ABI 6) one cannot signal another's
 * processes, nor B, nor reach another's abstract sockets.
 *
 * FS-ONLY mode (Landlock without user namespaces): no namespace at all. The
 * command runs at the host's paths, in the workspace, with a private temp
 * directory as TMPDIR and HOME, and Landlock alone draws the boundary: the
 * system directories and --ro paths read-only, the workspace, the temp
 * directory and six devices read-write, and nothing else of the host's file
 * system. Landlock cannot subtract a --mask from the workspace's grant, so
 * the workspace is granted piecewise around each mask (see walk_root).
 * seccomp adds to FULL's list: no socket but AF_UNIX, no connect(2) at all
 * (Landlock up to ABI 8 does not guard pathname sockets: the user's D-Bus,
 * ssh-agent, Podman and Docker sockets would be one connect away), no
 * datagram socket (sendto(2) names its peer by path), no System V IPC or
 * POSIX message queue of the host's.
 *   lazaret-native (P)                 walks the rules, makes the temp dir,
 *   │                                  waits, forwards signals, then kills
 *   │                                  the command's process group and
 *   │                                  removes the temp dir
 *   └─ the command (C)                  its own process group; Landlock,
 *                                       seccomp, execve
 * C dies with P (PR_SET_PDEATHSIG, checked after it is set); errors before
 * the command runs come back over the same pipe as in FULL. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "landlock.h"
#include "native-probe.h"
#include "macro.h"
#include "seccomp-filter.h"
#include "string-util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define EXIT_NATIVE 125
#define ARGS_MAX    256 /* --ro, --mask and --setenv each */
/* --env-fd: what a caller may pass, in all and in entries. */
#define ENV_FD_BYTES_MAX   (1024 * 1024)
#define ENV_FD_ENTRIES_MAX 4096
#define NEW_ROOT           "/tmp/.lazaret-root" /* on a tmpfs of the new mount namespace */
#define HOME_DIR           "/home/sandbox"
#define ENTRIES_MAX        4096 /* FS-ONLY: entries granted one by one around the masks */
#define TMP_TEMPLATE       "/tmp/lazaret-native.XXXXXX"
/* For tests: "1" makes the user namespace probe fail, as on a host that
 * forbids them (auto then picks FS-ONLY, --mode full fails). */

static const char *const mode_names[_NATIVE_MODE_MAX] = {
        [NATIVE_MODE_AUTO] = "auto",
        [NATIVE_MODE_FULL] = "full",
        [NATIVE_MODE_FS_ONLY] = "fs-only",
};

static NativeMode mode_from_string(const char *s) {
        for (int m = 0; m < _NATIVE_MODE_MAX; m++)
                if (streq(s, mode_names[m]))
                        return (NativeMode) m;
        return _NATIVE_MODE_INVALID;
}

static const char *const system_dirs[] = { "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc" };
static const char *const devices[] = { "null", "zero", "full", "random", "urandom", "tty" };

typedef struct Spec {
        char *workspace; /* resolved */
        const char *cwd; /* FS-ONLY: --cwd, below the workspace */
        char *ro[ARGS_MAX];
        size_t n_ro;
        /* --ro-bind SRC:DST: SRC (resolved) read-only at DST. */
        char *ro_src[ARGS_MAX];
        const char *ro_dst[ARGS_MAX];
        size_t n_ro_bind;
        /* --bind SRC:DST: SRC (resolved) read-write at DST. */
        char *rw_src[ARGS_MAX];
        const char *rw_dst[ARGS_MAX];
        size_t n_rw_bind;
        unsigned long long tmp_size; /* of /tmp and the home each; 0: the kernel's default */
        char *mask[ARGS_MAX];
        size_t n_mask;
        char *setenv[ARGS_MAX];
        size_t n_setenv;
        /* --join: the entries read from --env-fd, in one buffer. */
        char *fd_env_buf;
        char **fd_env;
        size_t n_fd_env;
        unsigned long long shm_size;
        bool hold;
        char **argv;
} Spec;

static void spec_done(Spec *s) {
        free(s->workspace);
        for (size_t i = 0; i < s->n_ro; i++)
                free(s->ro[i]);
        for (size_t i = 0; i < s->n_ro_bind; i++)
                free(s->ro_src[i]);
        for (size_t i = 0; i < s->n_rw_bind; i++)
                free(s->rw_src[i]);
        for (size_t i = 0; i < s->n_mask; i++)
                free(s->mask[i]);
        free(s->fd_env);
        free(s->fd_env_buf);
}

/* Where the error of a process before the command ran goes: the pipe to P,
 * or stderr in P itself. */
static int err_fd = STDERR_FILENO;

/* FS-ONLY: P's temp directory, removed when P dies of an error (NULL in
 * every other process). */
static const char *tmp_dir;
static int tmp_fd = -EBADF;
static void remove_tmp_dir(void);

_noreturn_ _printf_(1, 2) static void die(const char *fmt, ...) {
        char buf[1024];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                n = 0;
        n = MIN(n, (int) sizeof(buf) - 2);
        buf[n++] = '\n';
        remove_tmp_dir();
        if (err_fd == STDERR_FILENO)
                (void) !write(err_fd, "lazaret-native: ", 16);
        (void) !write(err_fd, buf, (size_t) n);
        _exit(EXIT_NATIVE);
}

static void usage(void) {
        fprintf(stderr,
                "usage: lazaret-native --workspace DIR [--ro PATH]... [--ro-bind SRC:DST]... [--bind SRC:DST]...\n"
                "                      [--mask PATH]... [--setenv NAME=VALUE]... [--shm-size BYTES]\n"
                "                      [--tmp-size BYTES] [--loopback] [--nproc N] [--mode full|fs-only|auto]\n"
                "                      -- CMD [ARG]...\n"
                "       lazaret-native --workspace DIR [--ro PATH]... [--ro-bind SRC:DST]... [--bind SRC:DST]...\n"
                "                      [--mask PATH]... [--shm-size BYTES] [--tmp-size BYTES] [--loopback]\n"
                "                      [--nproc N] [--mode full|auto] [--cgroup DIR] [--die-with-parent] --hold\n"
                "       lazaret-native --join PID [--cwd REL] [--env-fd N] [--rw DST]... [--loopback] [--nproc N]\n"
                "                      [--cgroup DIR]\n"
                "                      [--setenv NAME=VALUE]... -- CMD [ARG]...\n"
                "       lazaret-native [--mode full|fs-only|auto] --check\n");
}

/* Everything P needs to know before it forks. */

/* What the processes before the command wrote to the error pipe, read to
 * its end (every copy closed: by the command's execve, or by their exit):
 * its first line in msg, its length 0 when the command ran. Closes fd. */
static size_t read_error(int fd, char *msg, size_t size) {
        size_t n = 0;
        for (;;) {
                ssize_t k = read(fd, msg + n, size - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                n += (size_t) k;
                if (n == size - 1)
                        break;
        }
        close(fd);
        msg[n] = '\0';
        char *nl = strchr(msg, '\n');
        if (nl)
                *nl = '\0';
        return n;
}

/* ---- A: the namespaces ---------------------------------------------------- */

/* The new network namespace's loopback up (A has CAP_NET_ADMIN in the
 * user namespace that owns it). */
static void loopback_up(void) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                die("--loopback: socket: %s", strerror(errno));
        struct ifreq ifr = {};
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                die("--loopback: cannot read lo's flags: %s", strerror(errno));
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                die("--loopback: cannot bring lo up: %s", strerror(errno));
        close(fd);
}

static void write_file(const char *path, const char *s) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                die("cannot open %s: %s", path, strerror(errno));
        size_t n = strlen(s);
        if (write(fd, s, n) != (ssize_t) n)
                die("cannot write %s: %s", path, strerror(errno));
        close(fd);
}

/* Die with the parent; and if it is already gone (it died before the
 * signal was asked for), now. alive: a pipe whose other end the parent
 * holds (its hang-up says the parent is gone, whatever getppid() says
 * across a PID namespace). */
static void die_with_parent(int alive) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                die("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
        struct pollfd p = { .fd = alive, .events = POLLIN };
        if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)))
                _exit(EXIT_NATIVE);
}

/* 0 once the child is gone, so that its pid, free for reuse, is not hit. */
static volatile sig_atomic_t forward_to;

static void forward(int sig) {
        if (forward_to > 0)
                (void) kill((pid_t) forward_to, sig);
}

/* SIGTERM and SIGHUP go on to pid; so do SIGINT and SIGQUIT if interrupts,
 * else they are ignored (the terminal sends Ctrl+C and Ctrl+\ to the
 * command's process group as well). */
static void forward_signals(pid_t pid, bool interrupts) {
        forward_to = pid;
        struct sigaction sa = { .sa_handler = forward };
        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGHUP, &sa, NULL);
        if (interrupts) {
                (void) sigaction(SIGINT, &sa, NULL);
                (void) sigaction(SIGQUIT, &sa, NULL);
        } else {
                (void) signal(SIGINT, SIG_IGN);
                (void) signal(SIGQUIT, SIG_IGN);
        }
}

/* The status to exit with for a child's wait status. */
static int status_of(int st) {
        if (WIFEXITED(st))
                return WEXITSTATUS(st);
        if (WIFSIGNALED(st))
                return 128 + WTERMSIG(st);
        return EXIT_NATIVE;
}

static int wait_for(pid_t pid) {
        int st = 0;
        for (;;) {
                pid_t r = waitpid(pid, &st, 0);
                if (r == pid) {
                        if (forward_to == pid)
                                forward_to = 0;
                        return status_of(st);
                }
                if (r < 0 && errno != EINTR)
                        return EXIT_NATIVE;
        }
}

/* ---- B: the root ---------------------------------------------------------- */

static void mkdir_p(const char *path, mode_t mode) {
        char buf[PATH_MAX];
        if (snprintf(buf, sizeof(buf), "%s", path) >= (int) sizeof(buf))
                die("%s: path too long", path);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        die("cannot create %s: %s", buf, strerror(errno));
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                die("cannot create %s: %s", buf, strerror(errno));
}

static void touch(const char *path) {
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                die("cannot create %s: %s", path, strerror(errno));
        close(fd);
}

/* path inside the new root, before the pivot. */
static void in_root(char to[static PATH_MAX], const char *path) {
        if ((size_t) snprintf(to, PATH_MAX, "%s%s", NEW_ROOT, path) >= PATH_MAX)
                die("%s: path too long", path);
}

/* The flags a remount of a bind of src must keep (a user namespace may not
 * clear the ones its mount was locked with). */
static unsigned long kept_flags(const char *src) {
        struct statvfs v;
        if (statvfs(src, &v) < 0)
                die("cannot read the mount flags of %s: %s", src, strerror(errno));
        unsigned long f = 0;
        if (v.f_flag & ST_NOSUID)
                f |= MS_NOSUID;
        if (v.f_flag & ST_NODEV)
                f |= MS_NODEV;
        if (v.f_flag & ST_NOEXEC)
                f |= MS_NOEXEC;
        if (v.f_flag & ST_RDONLY)
                f |= MS_RDONLY;
        if (v.f_flag & ST_NOATIME)
                f |= MS_NOATIME;
        if (v.f_flag & ST_NODIRATIME)
                f |= MS_NODIRATIME;
        if (v.f_flag & ST_RELATIME)
                f |= MS_RELATIME;
        return f;
}

/* The binds, planned while every source is in sight (the staging tmpfs
 * covers the host's /tmp, where a workspace may be) and made from the
 * sources' descriptors. */
typedef struct Bind {
        int fd; /* O_PATH */
        char dst[PATH_MAX];
        bool rw;
} Bind;

static Bind binds[ARGS_MAX + 16];
static size_t n_binds;

static void plan_bind(const char *src, const char *dst, bool rw) {
        if (n_binds >= ELEMENTSOF(binds))
                die("too many paths to bind");
        Bind *b = &binds[n_binds];
        b->fd = open(src, O_PATH | O_CLOEXEC);
        if (b->fd < 0)
                die("cannot bind %s: %s", src, strerror(errno));
        if ((size_t) snprintf(b->dst, sizeof(b->dst), "%s", dst) >= sizeof(b->dst))
                die("%s: path too long", dst);
        b->rw = rw;
        n_binds++;
}

/* Bind one at the new root's dst (a directory or a file, made to match),
 * read-only unless rw; never a set-uid program, nor a device but the six. */
static void do_bind(const Bind *b) {
        char to[PATH_MAX], from[64];
        in_root(to, b->dst);
        snprintf(from, sizeof(from), "/proc/self/fd/%d", b->fd);
        struct stat st;
        if (fstat(b->fd, &st) < 0)
                die("cannot bind %s: %s", b->dst, strerror(errno));
        if (S_ISDIR(st.st_mode))
                mkdir_p(to, 0755);
        else {
                char parent[PATH_MAX];
                memcpy(parent, to, PATH_MAX);
                *strrchr(parent, '/') = '\0';
                mkdir_p(parent, 0755);
                touch(to);
        }
        if (mount(from, to, NULL, MS_BIND | MS_REC, NULL) < 0)
                die("cannot bind %s: %s", b->dst, strerror(errno));
        unsigned long f = MS_REMOUNT | MS_BIND | MS_NOSUID | kept_flags(to);
        if (!S_ISCHR(st.st_mode))
                f |= MS_NODEV;
        if (!b->rw)
                f |= MS_RDONLY;
        if (mount(NULL, to, NULL, f, NULL) < 0)
                die("cannot make %s %s: %s", b->dst, b->rw ? "nosuid" : "read-only", strerror(errno));
        close(b->fd);
}

static void mount_tmpfs(const char *dst, const char *opts, unsigned long flags) {
        char to[PATH_MAX];
        in_root(to, dst);
        mkdir_p(to, 0755);
        if (mount("tmpfs", to, "tmpfs", MS_NOSUID | MS_NODEV | flags, opts) < 0)
                die("cannot mount a tmpfs on %s: %s", dst, strerror(errno));
}

static void build_root(const Spec *s) {
        for (size_t i = 0; i < ELEMENTSOF(system_dirs); i++) {
                struct stat st;
                if (lstat(system_dirs[i], &st) == 0 && S_ISDIR(st.st_mode))
                        plan_bind(system_dirs[i], system_dirs[i], false);
        }
        for (size_t i = 0; i < s->n_ro; i++)
                plan_bind(s->ro[i], s->ro[i], false);
        for (size_t i = 0; i < s->n_ro_bind; i++)
                plan_bind(s->ro_src[i], s->ro_dst[i], false);
        for (size_t i = 0; i < s->n_rw_bind; i++)
                plan_bind(s->rw_src[i], s->rw_dst[i], true);
        plan_bind(s->workspace, "/workspace", true);
        for (size_t i = 0; i < ELEMENTSOF(devices); i++) {
                char d[64];
                snprintf(d, sizeof(d), "/dev/%s", devices[i]);
                if (access(d, F_OK) == 0)
                        plan_bind(d, d, true);
        }

        /* The new root, on a tmpfs over /tmp (in this mount namespace
         * only). */
        if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
                die("cannot mount a tmpfs for the new root: %s", strerror(errno));
        mkdir_p(NEW_ROOT, 0755);
        if (mount("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") < 0)
                die("cannot mount the new root: %s", strerror(errno));

        for (size_t i = 0; i < ELEMENTSOF(system_dirs); i++) {
                const char *d = system_dirs[i];
                struct stat st;
                if (lstat(d, &st) < 0 || !S_ISLNK(st.st_mode))
                        continue;
                /* Debian's merged /usr: /bin -> usr/bin. */
                char target[PATH_MAX], at[PATH_MAX];
                ssize_t n = readlink(d, target, sizeof(target) - 1);
                if (n < 0)
                        die("cannot read the link %s: %s", d, strerror(errno));
                target[n] = '\0';
                in_root(at, d);
                if (symlink(target, at) < 0)
                        die("cannot create the link %s: %s", d, strerror(errno));
        }
        /* The private directories first, so that a --ro path below one
         * of them is bound into it rather than hidden by it. */
        /* Memory they are: --tmp-size caps each. */
        char tmp_opts[64], home_opts[64];
        snprintf(tmp_opts, sizeof(tmp_opts), s->tmp_size ? "mode=1777,size=%llu" : "mode=1777", s->tmp_size);
        snprintf(home_opts, sizeof(home_opts), s->tmp_size ? "mode=0700,size=%llu" : "mode=0700", s->tmp_size);
        mount_tmpfs("/tmp", tmp_opts, 0);
        mount_tmpfs(HOME_DIR, home_opts, 0);
        mount_tmpfs("/dev", "mode=0755", MS_NOEXEC);
        for (size_t i = 0; i < n_binds; i++)
                do_bind(&binds[i]);
        char shm[64];
        snprintf(shm, sizeof(shm), "mode=1777,size=%llu", s->shm_size);
        mount_tmpfs("/dev/shm", shm, MS_NOEXEC);
        static const char *const links[][2] = { { "/proc/self/fd", "/dev/fd" },
                                                { "/proc/self/fd/0", "/dev/stdin" },
                                                { "/proc/self/fd/1", "/dev/stdout" },
                                                { "/proc/self/fd/2", "/dev/stderr" } };
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                char at[PATH_MAX];
                in_root(at, links[i][1]);
                if (symlink(links[i][0], at) < 0)
                        die("cannot create %s: %s", links[i][1], strerror(errno));
        }
        /* /proc of this PID namespace, mounted while the host's /proc is
         * still in sight (the kernel refuses a procfs in a user namespace
         * that has none fully visible). */
        mkdir_p(NEW_ROOT "/proc", 0555);
        if (mount("proc", NEW_ROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                die("cannot mount /proc: %s", strerror(errno));

        /* Masks: a file becomes /dev/null, a directory an empty read-only
         * tmpfs. */
        for (size_t i = 0; i < s->n_mask; i++) {
                const char *m = s->mask[i];
                char at[PATH_MAX];
                const char *inside = m;
                size_t wl = strlen(s->workspace);
                char ws[PATH_MAX];
                if (strncmp(m, s->workspace, wl) == 0 && (m[wl] == '/' || m[wl] == '\0')) {
                        if ((size_t) snprintf(ws, sizeof(ws), "/workspace%s", m + wl) >= sizeof(ws))
                                die("%s: path too long", m);
                        inside = ws;
                }
                in_root(at, inside);
                struct stat st;
                if (lstat(at, &st) < 0)
                        die("cannot mask %s: %s", m, strerror(errno));
                if (S_ISDIR(st.st_mode)) {
                        if (mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                                  "mode=0555,size=4k") < 0)
                                die("cannot mask %s: %s", m, strerror(errno));
                } else if (mount(NEW_ROOT "/dev/null", at, NULL, MS_BIND, NULL) < 0 ||
                           mount(NULL, at, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) < 0)
                        die("cannot mask %s: %s", m, strerror(errno));
        }

        /* Into it; the host's root detached beneath. */
        if (chdir(NEW_ROOT) < 0)
                die("chdir to the new root: %s", strerror(errno));
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                die("pivot_root: %s", strerror(errno));
        if (umount2(".", MNT_DETACH) < 0)
                die("cannot detach the host's root: %s", strerror(errno));
        if (chdir("/") < 0)
                die("chdir /: %s", strerror(errno));
}

/* ---- C: the command ------------------------------------------------------- */

/* The command's environment, NULL-terminated. A later entry replaces an
 * earlier one of the same name: --env-fd and --setenv values win over the
 * defaults, --setenv over --env-fd. */
static char **envp;
static size_t n_envp, cap_envp;

static void env_put(const char *entry) {
        size_t l = strcspn(entry, "=") + 1; /* the name and its '=' */
        for (size_t i = 0; i < n_envp; i++)
                if (strncmp(envp[i], entry, l) == 0) {
                        envp[i] = (char *) entry;
                        return;
                }
        if (n_envp + 1 >= cap_envp) {
                size_t cap = MAX(cap_envp * 2, (size_t) 16);
                char **n = reallocarray(envp, cap, sizeof(*n));
                if (!n)
                        die("out of memory");
                envp = n;
                cap_envp = cap;
        }
        envp[n_envp++] = (char *) entry;
        envp[n_envp] = NULL;
}

/* PATH of the command's environment (there always is one): execvpe()
 * looks the command up in the caller's own, so it is set there too. */
static void use_env_path(void) {
        for (size_t i = 0; i < n_envp; i++)
                if (startswith(envp[i], "PATH=") && setenv("PATH", envp[i] + 5, 1) < 0)
                        die("out of memory");
}

/* tmpdir: TMPDIR, if not NULL. */
static void build_env(const Spec *s, const char *home, const char *tmpdir) {
        static char home_var[PATH_MAX + 8], tmp_var[PATH_MAX + 8], term[256];
        env_put("PATH=/usr/local/bin:/usr/bin:/bin");
        snprintf(home_var, sizeof(home_var), "HOME=%s", home);
        env_put(home_var);
        if (tmpdir) {
                snprintf(tmp_var, sizeof(tmp_var), "TMPDIR=%s", tmpdir);
                env_put(tmp_var);
        }
        env_put("LANG=C.UTF-8");
        const char *t = getenv("TERM");
        if (t && strlen(t) < sizeof(term) - 6) {
                snprintf(term, sizeof(term), "TERM=%s", t);
                env_put(term);
        }
        for (size_t i = 0; i < s->n_fd_env; i++)
                env_put(s->fd_env[i]);
        for (size_t i = 0; i < s->n_setenv; i++)
                env_put(s->setenv[i]);
}

/* Nothing of the caller's descriptors but the standard streams reaches the
 * command (a socket or directory the caller leaked would be a way out). */
static void close_inherited(void) {
        if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                die("close_range: %s", strerror(errno));
}

static void add_rule(LandlockRules *r, const char *path, LandlockGrant g) {
        char *why = NULL;
        int k = landlock_rules_add(r, path, g, &why);
        if (k == -ENOENT)
                return; /* not on this host (/lib64) */
        if (k < 0)
                die("Landlock: %s", why ?: strerror(-k));
}

/* FULL's Landlock rules, for the command and for every joined one alike. */
/* FULL, HOLD and JOIN: what Landlock lets be written besides the fixed
 * places: --bind's destinations (a join is told them with --rw). */
static const char *rw_paths[ARGS_MAX];
static size_t n_rw_paths;

/* --nproc: RLIMIT_NPROC of every process of the sandbox. Linux counts it
 * per user namespace and user (since 5.14), so in the sandbox's own
 * namespace it counts the sandbox's tasks (threads too), not the user's
 * processes on the host; none of them has the capabilities that pass it. 0:
 * left as it is. */
static unsigned long long nproc_limit;

static void apply_nproc(void) {
        if (nproc_limit == 0)
                return;
        struct rlimit rl;
        if (getrlimit(RLIMIT_NPROC, &rl) < 0)
                die("getrlimit(RLIMIT_NPROC): %s", strerror(errno));
        /* Never above the hard limit the caller has (raising it takes a
         * privilege the sandbox must not have). */
        rlim_t n = (rlim_t) nproc_limit;
        if (rl.rlim_max != RLIM_INFINITY && n > rl.rlim_max)
                n = rl.rlim_max;
        rl.rlim_cur = rl.rlim_max = n;
        if (setrlimit(RLIMIT_NPROC, &rl) < 0)
                die("--nproc %llu: setrlimit: %s", nproc_limit, strerror(errno));
}

/* --loopback: the namespace's loopback is up (the relay of egress by name
 * listens there), and TCP is not refused by Landlock: a network namespace
 * of its own with nothing but that loopback reaches nothing else. */
static bool loopback;

static LandlockRules *full_rules(void) {
        LandlockRules *r = NULL;
        /* Without --loopback the network namespace has no interface up;
         * Landlock refuses TCP as well where it can (ABI 4). */
        if (landlock_rules_new(!loopback && landlock_abi() >= 4 ? LANDLOCK_DENY_TCP : 0, &r) < 0)
                die("out of memory");
        /* The new root holds nothing but what was put there (the system
         * directories and --ro paths read-only anyway, masks, /proc of the
         * sandbox, six devices): all of it may be read; the rest of the
         * rules grant writing. */
        add_rule(r, "/", LANDLOCK_GRANT_READ_ONLY);
        add_rule(r, "/workspace", LANDLOCK_GRANT_READ_WRITE);
        add_rule(r, "/tmp", LANDLOCK_GRANT_READ_WRITE);
        add_rule(r, HOME_DIR, LANDLOCK_GRANT_READ_WRITE);
        add_rule(r, "/dev/shm", LANDLOCK_GRANT_READ_WRITE);
        for (size_t i = 0; i < ELEMENTSOF(devices); i++) {
                char d[64];
                snprintf(d, sizeof(d), "/dev/%s", devices[i]);
                add_rule(r, d, LANDLOCK_GRANT_READ_WRITE);
        }
        for (size_t i = 0; i < n_rw_paths; i++)
                add_rule(r, rw_paths[i], LANDLOCK_GRANT_READ_WRITE);
        return r;
}

/* FULL and JOIN: the command, in the sandbox's root and its working
 * directory already, with envp built; confined, then executed. */
_noreturn_ static void exec_confined(char *const *argv) {
        _cleanup_(landlock_rules_freep) LandlockRules *r = full_rules();
        apply_nproc();
        close_inherited();
        const char *why = NULL;
        int k = landlock_apply(r, 1, &why);
        if (k < 0)
                die("Landlock: %s", why ?: strerror(-k));
        k = native_seccomp_apply(0);
        if (k < 0)
                die("seccomp: %s", strerror(-k));
        use_env_path();
        execvpe(argv[0], argv, envp);
        die("cannot run %s: %s", argv[0], strerror(errno));
}

_noreturn_ static void run_command(const Spec *s) {
        build_env(s, HOME_DIR, NULL);
        if (chdir("/workspace") < 0)
                die("chdir /workspace: %s", strerror(errno));
        exec_confined(s->argv);
}

/* ---- B: init --------------------------------------------------------------- */

/* The caller's signal mask, which A changes for B (see setup_main) and the
 * command gets back. */
static sigset_t caller_mask;

static void ignore_signal(int sig) {
        (void) sig;
}

/* HOLD: B runs no command. It is PID 1 for the commands that join the
 * sandbox and reaps what they leave behind, until SIGTERM or SIGHUP says
 * to end it all. ready: the pipe to A, written once the root is built. */
_noreturn_ static void hold_main(int ready) {
        /* SIGTERM and SIGHUP have been blocked since A forked B, SIGCHLD is
         * now: sigwaitinfo() takes each, with none of the races of a
         * handler and a blocking wait. A blocked signal is queued even for
         * a namespace's init; the handlers are a second guard, as the
         * kernel drops a signal from outside the namespace that its init
         * would take with SIG_DFL. */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                die("sigprocmask: %s", strerror(errno));
        struct sigaction sa = { .sa_handler = ignore_signal };
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGHUP, &sa, NULL) < 0)
                die("sigaction: %s", strerror(errno));
        /* Nothing of the caller's stays open in an init that lasts as long
         * as the sandbox: the standard streams become /dev/null, and after
         * the byte that says "ready" every other descriptor goes, the
         * error pipe to P with them. */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0)
                die("cannot open /dev/null: %s", strerror(errno));
        for (int fd = 0; fd < 3; fd++)
                if (dup2(null, fd) < 0)
                        die("dup2: %s", strerror(errno));
        if (write(ready, "R", 1) != 1)
                die("cannot report the sandbox ready: %s", strerror(errno));
        (void) syscall(SYS_close_range, 3U, ~0U, 0U);
        err_fd = -1;
        for (;;) {
                int sig = sigwaitinfo(&set, NULL);
                if (sig == SIGTERM || sig == SIGHUP)
                        break;
                if (sig == SIGCHLD)
                        while (waitpid(-1, NULL, WNOHANG) > 0)
                                ;
        }
        /* The joined commands are J's children: B cannot reap them, but
         * its exit waits until J has (the kernel's end of a PID
         * namespace). */
        (void) kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
        _exit(0);
}

_noreturn_ static void init_main(const Spec *s, int alive) {
        die_with_parent(alive);
        if (!s->hold)
                close(alive);
        build_root(s);
        if (s->hold)
                hold_main(alive);
        int pipe_c[2];
        if (pipe2(pipe_c, O_CLOEXEC) < 0)
                die("pipe: %s", strerror(errno));
        pid_t c = fork();
        if (c < 0)
                die("fork: %s", strerror(errno));
        if (c == 0) {
                close(pipe_c[0]);
                (void) sigprocmask(SIG_SETMASK, &caller_mask, NULL);
                die_with_parent(pipe_c[1]); /* the read end is B's */
                run_command(s);
        }
        close(pipe_c[1]);
        /* What C reports goes to P on its own; B's copy goes now. */
        close(err_fd);
        err_fd = -1;
        forward_signals(c, false);
        /* A SIGTERM or SIGHUP held back meanwhile goes on to C now. */
        (void) sigprocmask(SIG_SETMASK, &caller_mask, NULL);
        /* Reap every orphan; when the command is gone, so is the rest. */
        int status = EXIT_NATIVE;
        for (;;) {
                int st = 0;
                pid_t r = waitpid(-1, &st, 0);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (r == c) {
                        status = status_of(st);
                        break;
                }
        }
        (void) kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
        _exit(status);
}

/* ---- A: setup -------------------------------------------------------------- */

/* ready: HOLD, the pipe to P that gets B's pid once B built the root (-1
 * otherwise). */
_noreturn_ static void setup_main(const Spec *s, int alive, int ready, uid_t uid, gid_t gid) {
        die_with_parent(alive);
        close(alive);
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET) < 0)
                die("cannot create the namespaces: %s", strerror(errno));
        char map[64];
        write_file("/proc/self/setgroups", "deny");
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned) uid, (unsigned) uid);
        write_file("/proc/self/uid_map", map);
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned) gid, (unsigned) gid);
        write_file("/proc/self/gid_map", map);
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                die("cannot make the mounts private: %s", strerror(errno));
        if (loopback)
                loopback_up();
        /* In the new user namespace: B and all below it inherit it, and
         * are counted there. */
        apply_nproc();
        if (unshare(CLONE_NEWPID) < 0)
                die("cannot create the PID namespace: %s", strerror(errno));
        /* B is the init of the new PID namespace, which drops a signal from
         * outside that it has no handler for yet: SIGTERM and SIGHUP wait,
         * blocked, until it has (A's pending ones are passed on then). */
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &stop, &caller_mask) < 0)
                die("sigprocmask: %s", strerror(errno));
        int pipe_b[2];
        if (pipe2(pipe_b, O_CLOEXEC) < 0)
                die("pipe: %s", strerror(errno));
        pid_t b = fork();
        if (b < 0)
                die("fork: %s", strerror(errno));
        if (b == 0) {
                close(pipe_b[0]);
                if (ready >= 0)
                        close(ready);
                init_main(s, pipe_b[1]);
        }
        close(pipe_b[1]);
        close(err_fd);
        err_fd = -1;
        forward_signals(b, false);
        (void) sigprocmask(SIG_SETMASK, &caller_mask, NULL);
        if (ready >= 0) {
                /* A byte once the root is built; the end of the pipe if B
                 * died first (its error went to P). */
                char c;
                ssize_t k;
                do
                        k = read(pipe_b[0], &c, 1);
                while (k < 0 && errno == EINTR);
                char line[32];
                int n = snprintf(line, sizeof(line), "%d\n", (int) b);
                /* Unless P knows of B, B must not stay. */
                if (k != 1 || write(ready, line, (size_t) n) != n)
                        (void) kill(b, SIGKILL);
                close(ready);
        }
        _exit(wait_for(b));
}

/* ---- FS-ONLY: the rules (in P) ------------------------------------------- */

/* path is root or beneath it. */
static bool path_at_or_below(const char *path, const char *root) {
        size_t l = strlen(root);
        if (streq(root, "/"))
                return true;
        return strncmp(path, root, l) == 0 && (path[l] == '/' || path[l] == '\0');
}

typedef struct Walk {
        LandlockRules *rules;
        char *const *mask;
        size_t n_mask;
        /* The directories from the root being walked down to its masks, the
         * masks themselves excluded. */
        char **chain;
        size_t n_chain, cap_chain;
        size_t n_entries; /* granted one by one, over every root */
} Walk;

static void walk_clear_chain(Walk *w) {
        for (size_t i = 0; i < w->n_chain; i++)
                free(w->chain[i]);
        w->n_chain = 0;
}

static void walk_done(Walk *w) {
        walk_clear_chain(w);
        free(w->chain);
        w->chain = NULL;
        w->cap_chain = 0;
}

static bool in_chain(const Walk *w, const char *path) {
        for (size_t i = 0; i < w->n_chain; i++)
                if (streq(w->chain[i], path))
                        return true;
        return false;
}

static bool is_mask(const Walk *w, const char *path) {
        for (size_t i = 0; i < w->n_mask; i++)
                if (streq(w->mask[i], path))
                        return true;
        return false;
}

/* A mask inside another mask adds nothing; the outer one must never be a
 * directory of a chain (its entries would be granted). */
static bool mask_is_redundant(const Walk *w, const char *m) {
        for (size_t i = 0; i < w->n_mask; i++)
                if (!streq(w->mask[i], m) && path_at_or_below(m, w->mask[i]))
                        return true;
        return false;
}

static void chain_add(Walk *w, const char *path, size_t len) {
        for (size_t i = 0; i < w->n_chain; i++)
                if (strlen(w->chain[i]) == len && strncmp(w->chain[i], path, len) == 0)
                        return;
        if (w->n_chain == w->cap_chain) {
                size_t cap = MAX(w->cap_chain * 2, (size_t) 16);
                char **n = reallocarray(w->chain, cap, sizeof(*n));
                if (!n)
                        die("out of memory");
                w->chain = n;
                w->cap_chain = cap;
        }
        char *d = strndup(path, len);
        if (!d)
                die("out of memory");
        w->chain[w->n_chain++] = d;
}

/* Grant g on every entry of the chain directory dir but the chain's next
 * directories and the masks. */
static void grant_entries(Walk *w, const char *dir, LandlockGrant g) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                die("--mask: cannot read %s, a directory on the way to a mask: %s", dir, strerror(errno));
        DIR *d = fdopendir(fd);
        if (!d)
                die("--mask: cannot read %s: %s", dir, strerror(errno));
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                die("--mask: cannot read %s: %s", dir, strerror(errno));
                        break;
                }
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                char path[PATH_MAX];
                if ((size_t) snprintf(path, sizeof(path), "%s/%s", streq(dir, "/") ? "" : dir, de->d_name) >=
                    sizeof(path))
                        die("--mask: a path in %s is too long", dir);
                if (in_chain(w, path) || is_mask(w, path))
                        continue;
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        die("--mask: cannot inspect %s: %s", path, strerror(errno));
                /* A rule opens what a link points to: that would grant the
                 * target, anywhere. */
                if (S_ISLNK(st.st_mode))
                        die("--mask in FS-ONLY mode: %s is a symbolic link in a directory on the way to a mask, "
                            "which Landlock would grant through; remove it, or run where user namespaces work "
                            "(FULL mode)",
                            path);
                if (++w->n_entries > ENTRIES_MAX)
                        die("--mask in FS-ONLY mode: more than %d entries to grant one by one in the directories "
                            "on the way to the masks (at %s); move the masked paths up or into a smaller "
                            "directory, or run where user namespaces work (FULL mode)",
                            ENTRIES_MAX, path);
                char *why = NULL;
                int k = landlock_rules_add(w->rules, path, g, &why);
                if (k < 0)
                        die("Landlock: %s", why ?: strerror(-k));
        }
        closedir(d);
}

/* Grant g below root, but nothing that reveals what a mask beneath it
 * holds. Landlock only adds rights downwards, so a root with a mask gets
 * no rule of its own: each directory of the chain from the root down to a
 * mask (a "chain directory") gets only the rights that act on names (list,
 * create, remove, rename: LANDLOCK_GRANT_NAMES_*), and each of its other
 * entries gets g. A mask gets no rule at all; what is created later right
 * in a chain directory cannot be opened either. */
static void walk_root(Walk *w, const char *root, LandlockGrant g) {
        bool masked = false;
        for (size_t i = 0; i < w->n_mask; i++) {
                if (!path_at_or_below(w->mask[i], root))
                        continue;
                if (streq(w->mask[i], root))
                        return; /* masked whole */
                masked = true;
        }
        if (!masked) {
                add_rule(w->rules, root, g);
                return;
        }
        walk_clear_chain(w);
        size_t rl = strlen(root);
        for (size_t i = 0; i < w->n_mask; i++) {
                const char *m = w->mask[i];
                if (!path_at_or_below(m, root) || mask_is_redundant(w, m))
                        continue;
                chain_add(w, root, rl);
                for (size_t k = streq(root, "/") ? 1 : rl + 1; m[k]; k++)
                        if (m[k] == '/')
                                chain_add(w, m, k);
        }
        LandlockGrant names =
                g == LANDLOCK_GRANT_READ_ONLY ? LANDLOCK_GRANT_NAMES_READ_ONLY : LANDLOCK_GRANT_NAMES_READ_WRITE;
        for (size_t i = 0; i < w->n_chain; i++) {
                add_rule(w->rules, w->chain[i], names);
                grant_entries(w, w->chain[i], g);
        }
}

/* ---- FS-ONLY: the temp directory (in P) ------------------------------------ */

#define RM_DEPTH_MAX  32
#define RM_PASSES_MAX 4096

/* Remove what the directory dfd holds, never following a symbolic link: a
 * link is unlinked as itself, a directory opened with O_NOFOLLOW from its
 * parent's descriptor. A directory deeper than RM_DEPTH_MAX is moved up
 * into top and *again set, so that a later pass removes it with the
 * descriptors in use bounded however deep the command nested them. */
static int rm_contents(int dfd, int top, unsigned depth, bool *again) {
        static unsigned moved;
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                int e = -errno;
                close(fd);
                return e;
        }
        int ret = 0;
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                ret = -errno;
                        break;
                }
                const char *n = de->d_name;
                if (streq(n, ".") || streq(n, ".."))
                        continue;
                if (unlinkat(dfd, n, 0) == 0 || errno == ENOENT)
                        continue;
                if (errno != EISDIR) {
                        ret = -errno;
                        continue;
                }
                if (depth >= RM_DEPTH_MAX) {
                        char up[64];
                        int k;
                        do {
                                snprintf(up, sizeof(up), ".lazaret-deep-%u", moved++);
                                k = renameat2(dfd, n, top, up, RENAME_NOREPLACE);
                        } while (k < 0 && errno == EEXIST);
                        if (k < 0)
                                ret = -errno;
                        else
                                *again = true;
                        continue;
                }
                int sub = openat(dfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0 && errno == EACCES && fchmodat(dfd, n, 0700, AT_SYMLINK_NOFOLLOW) == 0)
                        sub = openat(dfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0) {
                        ret = -errno;
                        continue;
                }
                (void) fchmod(sub, 0700); /* whatever mode the command left it in */
                int k = rm_contents(sub, top, depth + 1, again);
                close(sub);
                if (k < 0)
                        ret = k;
                else if (unlinkat(dfd, n, AT_REMOVEDIR) < 0 && errno != ENOENT)
                        ret = -errno;
        }
        closedir(d);
        return ret;
}

static void remove_tmp_dir(void) {
        if (!tmp_dir)
                return;
        const char *dir = tmp_dir;
        tmp_dir = NULL;
        int r = 0;
        if (fchmod(tmp_fd, 0700) < 0)
                r = -errno;
        for (unsigned pass = 0; r >= 0; pass++) {
                bool again = false;
                r = rm_contents(tmp_fd, tmp_fd, 0, &again);
                if (r >= 0 && !again)
                        break;
                if (pass == RM_PASSES_MAX)
                        r = -ELOOP;
        }
        if (r >= 0 && rmdir(dir) < 0)
                r = -errno;
        if (r < 0)
                fprintf(stderr, "lazaret-native: cannot remove the temporary directory %s: %s\n", dir, strerror(-r));
        close(tmp_fd);
        tmp_fd = -EBADF;
}

/* ---- FS-ONLY: the command (C) ----------------------------------------------- */

static void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

/* What FS-ONLY adds to native_seccomp_apply(NATIVE_SECCOMP_NO_NET), which
 * leaves AF_UNIX sockets only. Without a mount namespace the host's
 * pathname sockets are in reach, and Landlock (up to ABI 8) neither guards
 * connect(2) nor path lookup: so no connect(2) at all, and no datagram
 * socket (its sendto(2) and sendmsg(2) name the peer by path, which a
 * filter cannot read); stream and seqpacket sockets ignore or refuse an
 * address outside connect. Without an IPC namespace, the host's System V
 * IPC objects and POSIX message queues are in reach: none of them either.
 * Installed after that filter, so that its errors win for other families. */
static int fs_only_seccomp_apply(void) {
        static const int ipc_syscalls[] = {
                SCMP_SYS(shmget),     SCMP_SYS(shmat),   SCMP_SYS(shmctl),    SCMP_SYS(msgget), SCMP_SYS(msgsnd),
                SCMP_SYS(msgrcv),     SCMP_SYS(msgctl),  SCMP_SYS(semget),    SCMP_SYS(semop),  SCMP_SYS(semctl),
                SCMP_SYS(semtimedop), SCMP_SYS(mq_open), SCMP_SYS(mq_unlink),
        };
        static const int socket_syscalls[] = { SCMP_SYS(socket), SCMP_SYS(socketpair) };
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return r;
#if defined(__x86_64__)
        r = seccomp_arch_add(ctx, SCMP_ARCH_X86);
        if (r < 0 && r != -EEXIST)
                return r;
#endif
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(connect), 0);
        if (r < 0)
                return r;
        /* The kernel reads the type's low four bits (SOCK_TYPE_MASK); the
         * flags above them are SOCK_NONBLOCK and SOCK_CLOEXEC. */
        for (size_t i = 0; i < ELEMENTSOF(socket_syscalls); i++)
                for (uint64_t t = 0; t <= 0xf; t++) {
                        if (t == SOCK_STREAM || t == SOCK_SEQPACKET)
                                continue;
                        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), socket_syscalls[i], 2,
                                             SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, t));
                        if (r < 0)
                                return r;
                }
        for (size_t i = 0; i < ELEMENTSOF(ipc_syscalls); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), ipc_syscalls[i], 0);
                if (r < 0)
                        return r;
        }
        return seccomp_load(ctx);
}

/* Give the terminal on stdin to the process group pgrp (as a shell does
 * for its foreground job), from whichever group the caller is in. */
static void give_terminal(pid_t pgrp) {
        sigset_t ttou, old;
        sigemptyset(&ttou);
        sigaddset(&ttou, SIGTTOU);
        (void) sigprocmask(SIG_BLOCK, &ttou, &old);
        (void) tcsetpgrp(STDIN_FILENO, pgrp);
        (void) sigprocmask(SIG_SETMASK, &old, NULL);
}

static void change_to(const char *root, const char *cwd);

_noreturn_ static void fs_only_command(const Spec *s, const LandlockRules *r, int alive, bool foreground,
                                       const struct rlimit *nofile, const sigset_t *mask) {
        tmp_dir = NULL; /* P's to remove */
        /* A group of its own, which P kills whole when the command exits. */
        if (setpgid(0, 0) < 0)
                die("setpgid: %s", strerror(errno));
        die_with_parent(alive);
        if (foreground)
                give_terminal(getpid());
        change_to(s->workspace, s->cwd);
        close_inherited();
        const char *why = NULL;
        int k = landlock_apply(r, 1, &why);
        if (k < 0)
                die("Landlock: %s", why ?: strerror(-k));
        /* Only now: the ruleset's descriptor comes after the rules'. */
        if (setrlimit(RLIMIT_NOFILE, nofile) < 0)
                die("cannot restore the limit of open files: %s", strerror(errno));
        k = native_seccomp_apply(NATIVE_SECCOMP_NO_NET);
        if (k < 0)
                die("seccomp: %s", strerror(-k));
        k = fs_only_seccomp_apply();
        if (k < 0)
                die("seccomp (FS-ONLY): %s", strerror(-k));
        use_env_path();
        /* A signal P passed on meanwhile is delivered now. */
        (void) sigprocmask(SIG_SETMASK, mask, NULL);
        execvpe(s->argv[0], s->argv, envp);
        die("cannot run %s: %s", s->argv[0], strerror(errno));
}

/* ---- FS-ONLY: P ---------------------------------------------------------------- */

/* Wait for the command c to end, then end what it left in its process
 * group; while it has the terminal (foreground), a stop of the command
 * stops P too, for the shell to see, and P's continuation continues it. */
static int fs_only_wait(pid_t c, bool foreground) {
        for (;;) {
                siginfo_t si = { 0 };
                if (waitid(P_PID, (id_t) c, &si, WEXITED | WNOWAIT | (foreground ? WSTOPPED : 0)) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (si.si_code != CLD_STOPPED)
                        break;
                (void) waitid(P_PID, (id_t) c, &si, WSTOPPED | WNOHANG); /* consume the report */
                give_terminal(getpgrp());
                (void) raise(SIGSTOP);
                give_terminal(c);
                (void) killpg(c, SIGCONT);
        }
        /* c is a zombie still, so its group's id cannot have been reused. */
        forward_to = 0;
        (void) killpg(c, SIGKILL);
        int status = wait_for(c);
        if (foreground)
                give_terminal(getpgrp());
        /* What is left came to P (its subreaper) as its parents ended:
         * ended too, until none is left (one that forked meanwhile leaves
         * its child to P as well). */
        for (;;) {
                char path[64];
                snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int) getpid());
                char buf[4096];
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
                if (fd >= 0)
                        close(fd);
                if (n > 0) {
                        buf[n] = '\0';
                        for (char *p = buf, *end;; p = end) {
                                long pid = strtol(p, &end, 10);
                                if (end == p)
                                        break;
                                if (pid > 0)
                                        (void) kill((pid_t) pid, SIGKILL);
                        }
                }
                pid_t r = waitpid(-1, NULL, 0);
                if (r < 0 && errno == ECHILD)
                        break;
        }
        return status;
}

static int run_fs_only(const Spec *s, int abi) {
        /* Every rule holds a descriptor until the command applies them. */
        struct rlimit nofile, raised;
        if (getrlimit(RLIMIT_NOFILE, &nofile) < 0)
                die("getrlimit: %s", strerror(errno));
        raised = nofile;
        raised.rlim_cur = nofile.rlim_max;
        (void) setrlimit(RLIMIT_NOFILE, &raised);

        _cleanup_(landlock_rules_freep) LandlockRules *r = NULL;
        if (landlock_rules_new(abi >= 4 ? LANDLOCK_DENY_TCP : 0, &r) < 0)
                die("out of memory");
        Walk w = { .rules = r, .mask = s->mask, .n_mask = s->n_mask };
        for (size_t i = 0; i < ELEMENTSOF(system_dirs); i++) {
                struct stat st;
                if (lstat(system_dirs[i], &st) == 0 && S_ISDIR(st.st_mode))
                        walk_root(&w, system_dirs[i], LANDLOCK_GRANT_READ_ONLY);
        }
        for (size_t i = 0; i < s->n_ro; i++)
                walk_root(&w, s->ro[i], LANDLOCK_GRANT_READ_ONLY);
        walk_root(&w, s->workspace, LANDLOCK_GRANT_READ_WRITE);
        walk_done(&w);
        for (size_t i = 0; i < ELEMENTSOF(devices); i++) {
                char d[64];
                snprintf(d, sizeof(d), "/dev/%s", devices[i]);
                add_rule(r, d, LANDLOCK_GRANT_READ_WRITE);
        }

        /* From the temp directory on, the signals that would end P wait
         * until P can pass them on (and still remove it). */
        sigset_t fwd, mask;
        sigemptyset(&fwd);
        sigaddset(&fwd, SIGTERM);
        sigaddset(&fwd, SIGHUP);
        sigaddset(&fwd, SIGINT);
        sigaddset(&fwd, SIGQUIT);
        if (sigprocmask(SIG_BLOCK, &fwd, &mask) < 0)
                die("sigprocmask: %s", strerror(errno));
        static char tmp[] = TMP_TEMPLATE;
        if (!mkdtemp(tmp))
                die("cannot create a temporary directory in /tmp: %s", strerror(errno));
        tmp_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tmp_fd < 0) {
                int e = errno;
                (void) rmdir(tmp);
                die("cannot open %s: %s", tmp, strerror(e));
        }
        tmp_dir = tmp;
        add_rule(r, tmp, LANDLOCK_GRANT_READ_WRITE);
        build_env(s, tmp, tmp);

        int errp[2], alive[2];
        if (pipe2(errp, O_CLOEXEC) < 0 || pipe2(alive, O_CLOEXEC) < 0)
                die("pipe: %s", strerror(errno));
        bool foreground = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
        /* Whatever the command leaves behind (a daemon that left its
         * process group with setsid) comes to P, which ends it. */
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                die("prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
        pid_t c = fork();
        if (c < 0)
                die("fork: %s", strerror(errno));
        if (c == 0) {
                close(errp[0]);
                close(alive[0]);
                err_fd = errp[1];
                (void) prctl(PR_SET_CHILD_SUBREAPER, 0);
                fs_only_command(s, r, alive[1], foreground, &nofile, &mask);
        }
        close(errp[1]);
        close(alive[1]);
        (void) setpgid(c, c); /* as C does: whichever runs first */
        forward_signals(c, !foreground);
        (void) sigprocmask(SIG_SETMASK, &mask, NULL);
        r = landlock_rules_free(r);

        char msg[1024];
        size_t n = read_error(errp[0], msg, sizeof(msg));
        int status = fs_only_wait(c, foreground);
        close(alive[0]);
        remove_tmp_dir();
        if (n > 0) {
                fprintf(stderr, "lazaret-native: %s\n", msg);
                return EXIT_NATIVE;
        }
        return status;
}

/* ---- JOIN: J and its command ----------------------------------------------- */

/* --cwd: relative, without "." or ".." (a symbolic link on the way is
 * refused where it is opened, in join_command). */
static bool cwd_is_valid(const char *p) {
        if (p[0] == '\0' || p[0] == '/')
                return false;
        for (const char *q = p; *q;) {
                size_t l = strcspn(q, "/");
                if ((l == 1 && q[0] == '.') || (l == 2 && q[0] == '.' && q[1] == '.'))
                        return false;
                q += l;
                q += strspn(q, "/");
        }
        return true;
}

/* Whether an entry without '=' looks like a variable's name, and may be
 * shown in an error: anything else may be a value, a secret passed by
 * mistake, and is not. */
static bool looks_like_name(const char *e) {
        size_t l = strlen(e);
        if (l == 0 || l > 64)
                return false;
        for (size_t i = 0; i < l; i++)
                if (!(e[i] == '_' || (e[i] >= 'A' && e[i] <= 'Z') || (e[i] >= 'a' && e[i] <= 'z') ||
                      (i > 0 && e[i] >= '0' && e[i] <= '9')))
                        return false;
        return true;
}

/* --env-fd: NUL-separated NAME=VALUE entries (the last NUL may be left
 * out), read to the end, then the descriptor closed. Secrets come this way,
 * not on a command line that every user can read in /proc. */
static void read_env_fd(Spec *s, int fd) {
        /* A byte more than allowed tells a full buffer from too much. */
        char *buf = malloc(ENV_FD_BYTES_MAX + 2);
        if (!buf)
                die("out of memory");
        s->fd_env_buf = buf;
        size_t n = 0;
        for (;;) {
                ssize_t k = read(fd, buf + n, ENV_FD_BYTES_MAX + 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        die("--env-fd %d: cannot read it: %s", fd, strerror(errno));
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > ENV_FD_BYTES_MAX)
                        die("--env-fd %d: more than %d bytes of environment; pass less", fd, ENV_FD_BYTES_MAX);
        }
        close(fd);
        buf[n] = '\0';
        s->fd_env = calloc(ENV_FD_ENTRIES_MAX, sizeof(char *));
        if (!s->fd_env)
                die("out of memory");
        for (size_t i = 0; i < n;) {
                char *e = buf + i;
                size_t idx = s->n_fd_env + 1;
                if (s->n_fd_env == ENV_FD_ENTRIES_MAX)
                        die("--env-fd %d: more than %d entries; pass fewer", fd, ENV_FD_ENTRIES_MAX);
                if (e[0] == '\0')
                        die("--env-fd %d: entry %zu is empty (NAME=VALUE expected, each ended by a NUL)", fd, idx);
                if (e[0] == '=')
                        die("--env-fd %d: entry %zu has an empty name (NAME=VALUE expected)", fd, idx);
                if (!strchr(e, '=')) {
                        if (looks_like_name(e))
                                die("--env-fd %d: entry %zu, %s, has no '=' (NAME=VALUE expected)", fd, idx, e);
                        die("--env-fd %d: entry %zu has no '=' (NAME=VALUE expected; not shown, it may be a value)", fd,
                            idx);
                }
                s->fd_env[s->n_fd_env++] = e;
                i += strlen(e) + 1;
        }
}

/* The namespaces a join enters: every one FULL makes. */
static const struct {
        const char *name; /* in /proc/PID/ns */
        int flag;
} join_ns[] = {
        { "user", CLONE_NEWUSER }, { "mnt", CLONE_NEWNS },  { "ipc", CLONE_NEWIPC },
        { "net", CLONE_NEWNET },   { "pid", CLONE_NEWPID },
};

/* Whether pid is the init (B) of a sandbox this user holds: a process of
 * this uid, running this very program, PID 1 of its PID namespace, in
 * namespaces other than ours; else die naming what is not. What /proc/PID
 * says is about the process of the pidfd only while it lives: the caller
 * checks that afterwards. */
static void check_join_target(pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d", (int) pid);
        /* Every file is read through this one directory: it stays the
         * process it was opened for (once that is gone, reads fail). */
        int dfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                die("--join %d: cannot inspect the process: %s", (int) pid, strerror(errno));
        int fd = openat(dfd, "status", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                die("--join %d: cannot read its status: %s", (int) pid, strerror(errno));
        char st[8192];
        size_t n = 0;
        for (;;) {
                ssize_t k = read(fd, st + n, sizeof(st) - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        die("--join %d: cannot read its status: %s", (int) pid, strerror(errno));
                if (k == 0 || (n += (size_t) k) == sizeof(st) - 1)
                        break;
        }
        close(fd);
        st[n] = '\0';
        unsigned u[4];
        const char *l = strstr(st, "\nUid:");
        uid_t me = getuid();
        if (!l || sscanf(l, "\nUid: %u %u %u %u", &u[0], &u[1], &u[2], &u[3]) != 4)
                die("--join %d: no Uid in its /proc status", (int) pid);
        for (size_t i = 0; i < ELEMENTSOF(u); i++)
                if (u[i] != me)
                        die("--join %d: the process is not this user's (uid %u), so it is no sandbox of ours",
                            (int) pid, u[i]);

        struct stat mine, its;
        if (stat("/proc/self/exe", &mine) < 0)
                die("cannot inspect /proc/self/exe: %s", strerror(errno));
        if (fstatat(dfd, "exe", &its, 0) < 0)
                die("--join %d: cannot inspect its program: %s", (int) pid, strerror(errno));
        if (mine.st_dev != its.st_dev || mine.st_ino != its.st_ino)
                die("--join %d: the process does not run this lazaret-native (another program, or another build "
                    "of it): pass the PID that --hold printed as \"ready PID\"",
                    (int) pid);

        /* NSpid: its pid in each PID namespace from ours down to its own. */
        l = strstr(st, "\nNSpid:");
        if (!l)
                die("--join %d: no NSpid in its /proc status (Linux 4.1 or newer needed)", (int) pid);
        long last = -1;
        for (const char *p = l + strlen("\nNSpid:"); *p != '\n' && *p != '\0';) {
                char *e;
                long v = strtol(p, &e, 10);
                if (e == p)
                        break;
                last = v;
                p = e;
        }
        if (last != 1)
                die("--join %d: not PID 1 of a sandbox (another process of lazaret-native's): pass the PID that --hold "
                    "printed as \"ready PID\"",
                    (int) pid);

        for (size_t i = 0; i < ELEMENTSOF(join_ns); i++) {
                char self_ns[64], its_ns[64];
                snprintf(self_ns, sizeof(self_ns), "/proc/self/ns/%s", join_ns[i].name);
                snprintf(its_ns, sizeof(its_ns), "ns/%s", join_ns[i].name);
                if (stat(self_ns, &mine) < 0)
                        die("cannot inspect %s: %s", self_ns, strerror(errno));
                if (fstatat(dfd, its_ns, &its, 0) < 0)
                        die("--join %d: cannot inspect its %s namespace: %s", (int) pid, join_ns[i].name,
                            strerror(errno));
                if (mine.st_dev == its.st_dev && mine.st_ino == its.st_ino)
                        die("--join %d: the process shares our %s namespace, so it is no sandbox", (int) pid,
                            join_ns[i].name);
        }
        close(dfd);
}

/* JOIN, C: in the sandbox's namespaces and root (J entered them), with
 * envp built. */
/* Change to the workspace root, or to cwd below it. cwd is opened where
 * the sandbox's processes may have made any name a link: none is
 * followed, nothing leads out. */
static void change_to(const char *root, const char *cwd) {
        int ws = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ws < 0)
                die("cannot open the workspace %s: %s", root, strerror(errno));
        int dir = ws;
        if (cwd) {
                struct open_how how = {
                        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS,
                };
                dir = (int) syscall(SYS_openat2, ws, cwd, &how, sizeof(how));
                if (dir < 0) {
                        if (errno == ELOOP)
                                die("--cwd %s: a symbolic link is on the way, which is not followed (it could lead "
                                    "out of the workspace): give the directory's real path in the workspace",
                                    cwd);
                        die("--cwd %s: %s in the workspace", cwd,
                            errno == ENOENT ? "no such directory" : strerror(errno));
                }
        }
        if (fchdir(dir) < 0)
                die("cannot change to %s/%s: %s", root, cwd ?: "", strerror(errno));
        if (dir != ws)
                close(dir);
        close(ws);
}

_noreturn_ static void join_command(const char *cwd, char *const *argv) {
        change_to("/workspace", cwd);
        exec_confined(argv);
}

/* JOIN, J: enter the namespaces of pid, the init of a held sandbox, and
 * run the command there as its child; its status is ours. */
_noreturn_ static void join_main(const Spec *s, pid_t pid, const char *cwd) {
        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                die("--join %d: %s", (int) pid,
                    errno == ESRCH ? "no such process (the sandbox ended, or the PID is wrong)" : strerror(errno));
        check_join_target(pid);
        /* If the process of the pidfd still lives, its pid was neither
         * free nor another's while /proc/PID was read. */
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
                die("--join %d: the process ended while it was checked", (int) pid);
        /* Inside, no process of the sandbox may trace J or read its memory
         * or /proc files (the kernel refuses them a non-dumpable process of
         * the host's user namespace); C keeps this until its execve. */
        if (prctl(PR_SET_DUMPABLE, 0) < 0)
                die("prctl(PR_SET_DUMPABLE): %s", strerror(errno));
        int flags = 0;
        for (size_t i = 0; i < ELEMENTSOF(join_ns); i++)
                flags |= join_ns[i].flag;
        if (setns(pidfd, flags) < 0)
                die("--join %d: cannot enter its namespaces: %s%s", (int) pid, strerror(errno),
                    errno == EINVAL ? " (Linux 5.8 or newer needed)" : "");
        close(pidfd);
        build_env(s, HOME_DIR, NULL);

        int errp[2], alive[2];
        if (pipe2(errp, O_CLOEXEC) < 0 || pipe2(alive, O_CLOEXEC) < 0)
                die("pipe: %s", strerror(errno));
        pid_t c = fork();
        if (c < 0)
                die("cannot start the command in the sandbox: %s", errno == ENOMEM ? "it has ended" : strerror(errno));
        if (c == 0) {
                close(errp[0]);
                close(alive[0]);
                err_fd = errp[1];
                die_with_parent(alive[1]);
                join_command(cwd, s->argv);
        }
        close(errp[1]);
        close(alive[1]);
        /* C stays in J's process group: what the terminal sends it (Ctrl+C,
         * Ctrl+\) it gets itself, J ignores. */
        forward_signals(c, false);
        char msg[1024];
        size_t n = read_error(errp[0], msg, sizeof(msg));
        int status = wait_for(c);
        close(alive[0]);
        if (n > 0) {
                fprintf(stderr, "lazaret-native: %s\n", msg);
                status = EXIT_NATIVE;
        }
        /* _exit: J's /proc is the sandbox's now, where J itself is not;
         * nothing that runs at exit() may need it (a sanitizer's leak
         * check walks /proc/self/task, and waits forever). */
        fflush(stderr);
        _exit(status);
}

/* ---- HOLD: P ------------------------------------------------------------------ */

/* Print "ready PID" once A passed on B's pid (ready: the pipe from A), then
 * wait for the sandbox to end; or report why it never was ready (errp: the
 * error pipe). */
static int hold_wait(pid_t a, int errp, int ready) {
        char line[32], msg[1024];
        if (read_error(ready, line, sizeof(line)) > 0) {
                close(errp);
                char out[64];
                int k = snprintf(out, sizeof(out), "ready %s\n", line);
                if (write(STDOUT_FILENO, out, (size_t) k) != k) {
                        int e = errno;
                        (void) kill(a, SIGTERM);
                        (void) wait_for(a);
                        die("cannot write the ready line to standard output: %s", strerror(e));
                }
                return wait_for(a);
        }
        size_t n = read_error(errp, msg, sizeof(msg));
        int status = wait_for(a);
        if (n > 0)
                die("%s", msg);
        die("the sandbox ended before it was ready (status %d)", status);
}

/* ---- P ---------------------------------------------------------------------- */

/* A --ro-bind destination: absolute, no empty, "." or ".." segment, and
 * not where the sandbox's own mounts are. */
static bool dst_is_valid(const char *dst) {
        if (dst[0] != '/' || strlen(dst) >= PATH_MAX - sizeof(NEW_ROOT))
                return false;
        for (const char *p = dst + 1;;) {
                size_t n = strcspn(p, "/");
                if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                if (!p[n])
                        break;
                p += n + 1;
        }
        /* Below /tmp and the home is fine (a repository's .git under the
         * host's /tmp goes to the same path in the sandbox's own /tmp). */
        static const char *const reserved[] = { "/proc", "/dev", "/workspace" };
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++) {
                size_t l = strlen(reserved[i]);
                if (strncmp(dst, reserved[i], l) == 0 && (dst[l] == '\0' || dst[l] == '/'))
                        return false;
        }
        return !streq(dst, "/tmp") && !streq(dst, "/home") && !streq(dst, HOME_DIR);
}

static char *resolve(const char *what, const char *path) {
        char *r = realpath(path, NULL);
        if (!r) {
                fprintf(stderr, "lazaret-native: %s %s: %s\n", what, path, strerror(errno));
                exit(EXIT_NATIVE);
        }
        return r;
}

/* A decimal int >= 0, or -1. */
/* --cgroup DIR: this process moves into that cgroup (a memory cgroup
 * the coordinator made and limited), and so does every process it starts.
 * Fails closed: a limit that is not in force would be a claim only. */
static void enter_cgroup(const char *dir) {
        int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (d < 0)
                die("--cgroup %s: %s", dir, strerror(errno));
        struct statfs sf;
        if (fstatfs(d, &sf) < 0)
                die("--cgroup %s: %s", dir, strerror(errno));
        if (sf.f_type != CGROUP_SUPER_MAGIC && sf.f_type != CGROUP2_SUPER_MAGIC)
                die("--cgroup %s: not a directory of a cgroup file system", dir);
        int fd = openat(d, "cgroup.procs", O_WRONLY | O_CLOEXEC);
        close(d);
        if (fd < 0)
                die("--cgroup %s: cannot open its cgroup.procs: %s", dir, strerror(errno));
        char line[32];
        int n = snprintf(line, sizeof(line), "%d\n", (int) getpid());
        if (write(fd, line, (size_t) n) != n)
                die("--cgroup %s: cannot move into it: %s", dir, strerror(errno));
        close(fd);
}

static int parse_int(const char *s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < 0 || v > INT_MAX)
                return -1;
        return (int) v;
}

static void add_arg(char **list, size_t *n, char *v, const char *opt) {
        if (*n >= ARGS_MAX) {
                fprintf(stderr, "lazaret-native: more than %d %s options\n", ARGS_MAX, opt);
                exit(EXIT_NATIVE);
        }
        list[(*n)++] = v;
}

int main(int argc, char **argv) {
        /* --die-with-parent: read first, as near as can be to the start. */
        pid_t parent = getppid();
        static const struct option opts[] = {
                { "workspace", required_argument, NULL, 'w' },
                { "ro", required_argument, NULL, 'r' },
                { "ro-bind", required_argument, NULL, 'B' },
                { "bind", required_argument, NULL, 'b' },
                { "rw", required_argument, NULL, 'W' },
                { "loopback", no_argument, NULL, 'L' },
                { "nproc", required_argument, NULL, 'P' },
                { "tmp-size", required_argument, NULL, 'T' },
                { "mask", required_argument, NULL, 'm' },
                { "setenv", required_argument, NULL, 'e' },
                { "shm-size", required_argument, NULL, 's' },
                { "mode", required_argument, NULL, 'M' },
                { "check", no_argument, NULL, 'c' },
                { "hold", no_argument, NULL, 'H' },
                { "die-with-parent", no_argument, NULL, 'D' },
                { "join", required_argument, NULL, 'j' },
                { "cwd", required_argument, NULL, 'C' },
                { "env-fd", required_argument, NULL, 'E' },
                { "cgroup", required_argument, NULL, 'G' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(spec_done) Spec s = { .shm_size = 64ULL << 20 };
        bool check = false, die_with_caller = false, shm_given = false, mode_given = false, tmp_given = false,
             rw_given = false;
        NativeMode want = NATIVE_MODE_AUTO;
        const char *workspace = NULL, *cwd = NULL, *cgroup = NULL;
        pid_t join = 0;
        int env_fd = -1;
        int c;
        opterr = 0; /* our own messages: one line, named */
        while ((c = getopt_long(argc, argv, "+", opts, NULL)) >= 0) {
                switch (c) {
                case 'w':
                        workspace = optarg;
                        break;
                case 'r':
                        add_arg(s.ro, &s.n_ro, resolve("--ro", optarg), "--ro");
                        break;
                case 'B':
                case 'b': {
                        /* SRC:DST, split at the last colon (DST is ours,
                         * SRC any host path). */
                        const char *opt = c == 'B' ? "--ro-bind" : "--bind";
                        char *colon = strrchr(optarg, ':');
                        const char *dst = colon ? colon + 1 : NULL;
                        if (!dst || colon == optarg || !dst_is_valid(dst)) {
                                fprintf(stderr,
                                        "lazaret-native: %s %s: SRC:DST expected, DST absolute without \".\" or \"..\" "
                                        "segments, not /, /tmp or the home, and not /proc, /dev or /workspace or below "
                                        "them\n",
                                        opt, optarg);
                                return EXIT_NATIVE;
                        }
                        *colon = '\0';
                        char *src = resolve(opt, optarg);
                        *colon = ':';
                        size_t *n = c == 'B' ? &s.n_ro_bind : &s.n_rw_bind;
                        if (*n >= ARGS_MAX) {
                                free(src);
                                fprintf(stderr, "lazaret-native: more than %d %s options\n", ARGS_MAX, opt);
                                return EXIT_NATIVE;
                        }
                        (c == 'B' ? s.ro_src : s.rw_src)[*n] = src;
                        (c == 'B' ? s.ro_dst : s.rw_dst)[(*n)++] = dst;
                        if (c == 'b')
                                rw_paths[n_rw_paths++] = dst;
                        break;
                }
                case 'L':
                        loopback = true;
                        break;
                case 'P': {
                        char *end;
                        errno = 0;
                        nproc_limit = strtoull(optarg, &end, 10);
                        if (errno || *end || nproc_limit == 0 || !strchr("0123456789", optarg[0])) {
                                fprintf(stderr, "lazaret-native: --nproc %s: a number of tasks expected\n", optarg);
                                return EXIT_NATIVE;
                        }
                        break;
                }
                case 'W':
                        /* --join: a --bind destination of the hold. */
                        if (!dst_is_valid(optarg)) {
                                fprintf(stderr, "lazaret-native: --rw %s: an absolute destination of --bind expected\n",
                                        optarg);
                                return EXIT_NATIVE;
                        }
                        if (n_rw_paths >= ARGS_MAX) {
                                fprintf(stderr, "lazaret-native: more than %d --bind and --rw options\n", ARGS_MAX);
                                return EXIT_NATIVE;
                        }
                        rw_paths[n_rw_paths++] = optarg;
                        rw_given = true;
                        break;
                case 'T': {
                        char *end;
                        errno = 0;
                        s.tmp_size = strtoull(optarg, &end, 10);
                        if (errno || *end || s.tmp_size == 0 || !strchr("0123456789", optarg[0])) {
                                fprintf(stderr, "lazaret-native: --tmp-size %s: a number of bytes expected\n", optarg);
                                return EXIT_NATIVE;
                        }
                        tmp_given = true;
                        break;
                }
                case 'm':
                        add_arg(s.mask, &s.n_mask, resolve("--mask", optarg), "--mask");
                        break;
                case 'e':
                        if (!strchr(optarg, '=') || optarg[0] == '=') {
                                fprintf(stderr, "lazaret-native: --setenv %s: NAME=VALUE expected\n", optarg);
                                return EXIT_NATIVE;
                        }
                        add_arg(s.setenv, &s.n_setenv, optarg, "--setenv");
                        break;
                case 's': {
                        char *end;
                        errno = 0;
                        s.shm_size = strtoull(optarg, &end, 10);
                        if (errno || *end || s.shm_size == 0 || !strchr("0123456789", optarg[0])) {
                                fprintf(stderr, "lazaret-native: --shm-size %s: a number of bytes expected\n", optarg);
                                return EXIT_NATIVE;
                        }
                        shm_given = true;
                        break;
                }
                case 'M':
                        want = mode_from_string(optarg);
                        if (want < 0) {
                                fprintf(stderr, "lazaret-native: --mode %s: full, fs-only or auto expected\n", optarg);
                                return EXIT_NATIVE;
                        }
                        mode_given = true;
                        break;
                case 'c':
                        check = true;
                        break;
                case 'H':
                        s.hold = true;
                        break;
                case 'D':
                        die_with_caller = true;
                        break;
                case 'j': {
                        int v = parse_int(optarg);
                        if (v <= 0)
                                die("--join %s: a process id expected (what --hold printed as \"ready PID\")", optarg);
                        join = (pid_t) v;
                        break;
                }
                case 'E':
                        env_fd = parse_int(optarg);
                        if (env_fd < 3)
                                die("--env-fd %s: a descriptor number above 2 expected (0, 1 and 2 are the command's)",
                                    optarg);
                        break;
                case 'C':
                        cwd = optarg;
                        break;
                case 'G':
                        cgroup = optarg;
                        break;
                case 'h':
                        usage();
                        return 0;
                default:
                        if (optopt)
                                fprintf(stderr, "lazaret-native: option -%c %s (see --help)\n", optopt,
                                        strchr("wrmesMjCEG", optopt) ? "needs a value" : "is unknown");
                        else
                                fprintf(stderr, "lazaret-native: %s: unknown option or missing value (see --help)\n",
                                        argv[optind - 1]);
                        return EXIT_NATIVE;
                }
        }
        char why[1024];
        int abi = 0;
        NativeMode mode = _NATIVE_MODE_INVALID;
        if (check && (s.hold || join > 0))
                die("--check cannot be combined with %s", s.hold ? "--hold" : "--join");
        if (check && cgroup)
                die("--check cannot be combined with --cgroup");
        /* First of all: what this process and every one it starts hold is
         * charged there, and none of them can leave it. */
        if (cgroup)
                enter_cgroup(cgroup);
        if (join > 0) {
                const char *clash = workspace         ? "--workspace"
                                    : s.n_ro          ? "--ro"
                                    : s.n_ro_bind     ? "--ro-bind"
                                    : s.n_rw_bind     ? "--bind"
                                    : tmp_given       ? "--tmp-size"
                                    : s.n_mask        ? "--mask"
                                    : shm_given       ? "--shm-size"
                                    : mode_given      ? "--mode"
                                    : s.hold          ? "--hold"
                                    : die_with_caller ? "--die-with-parent"
                                                      : NULL;
                if (clash)
                        die("--join cannot be combined with %s: the sandbox it joins was built by --hold", clash);
                if (cwd && !cwd_is_valid(cwd))
                        die("--cwd %s: a path relative to the workspace without \".\" or \"..\" expected", cwd);
                if (optind >= argc)
                        die("no command given (-- CMD [ARG]...)");
                s.argv = argv + optind;
                /* Nothing of the caller's but the standard streams and the
                 * environment's descriptor (read, then closed) stays. */
                if (env_fd >= 0)
                        read_env_fd(&s, env_fd);
                if (syscall(SYS_close_range, 3U, ~0U, 0U) < 0)
                        die("close_range: %s", strerror(errno));
                join_main(&s, join, cwd);
        }
        /* FS-ONLY's command runs at the host's paths: where in the
         * workspace, and its environment, are said as a join's are. */
        if (cwd && want != NATIVE_MODE_FS_ONLY)
                die("--cwd is only for --join and --mode fs-only");
        if (cwd && !cwd_is_valid(cwd))
                die("--cwd %s: a path relative to the workspace without \".\" or \"..\" expected", cwd);
        if (env_fd >= 0 && want != NATIVE_MODE_FS_ONLY)
                die("--env-fd is only for --join and --mode fs-only");
        s.cwd = cwd;
        if (rw_given)
                die("--rw is only for --join (a sandbox of its own makes --bind's destinations writable)");
        if (die_with_caller && !s.hold)
                die("--die-with-parent is only for --hold");
        if (s.hold) {
                if (optind < argc)
                        die("--hold runs no command (%s given): start it alone, then run commands with --join PID",
                            argv[optind]);
                if (s.n_setenv > 0)
                        die("--setenv is meaningless with --hold, which runs no command: give it to each --join");
                if (want == NATIVE_MODE_FS_ONLY)
                        die("--hold needs FULL mode, whose namespaces the commands join: --mode fs-only makes none");
                if (die_with_caller) {
                        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                                die("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
                        /* The parent went before the signal was asked for. */
                        if (getppid() != parent)
                                die("--die-with-parent: the parent process has already ended");
                }
                /* Nothing of the caller's but the standard streams stays
                 * open in processes that last as long as the sandbox. */
                if (syscall(SYS_close_range, 3U, ~0U, 0U) < 0)
                        die("close_range: %s", strerror(errno));
        }
        if (check) {
                if (native_probe(want, &mode, &abi, why, sizeof(why)) < 0) {
                        fprintf(stderr, "lazaret-native: %s\n", why);
                        return EXIT_NATIVE;
                }
                if (mode == NATIVE_MODE_FULL)
                        printf("native: FULL (Landlock ABI %d, user namespaces)\n", abi);
                else
                        printf("native: FS-ONLY (Landlock ABI %d; %s)\n", abi, why);
                return 0;
        }
        if (!workspace) {
                fprintf(stderr, "lazaret-native: --workspace DIR is required\n");
                return EXIT_NATIVE;
        }
        if (!s.hold && optind >= argc) {
                fprintf(stderr, "lazaret-native: no command given (-- CMD [ARG]...)\n");
                return EXIT_NATIVE;
        }
        s.argv = argv + optind;
        if (env_fd >= 0)
                read_env_fd(&s, env_fd);
        s.workspace = resolve("--workspace", workspace);
        struct stat st;
        if (stat(s.workspace, &st) < 0 || !S_ISDIR(st.st_mode)) {
                fprintf(stderr, "lazaret-native: --workspace %s: not a directory\n", workspace);
                return EXIT_NATIVE;
        }
        for (size_t i = 0; i < s.n_mask; i++) {
                /* A mask hides something the sandbox would otherwise see. */
                bool under = false;
                const char *m = s.mask[i];
                size_t wl = strlen(s.workspace);
                under = strncmp(m, s.workspace, wl) == 0 && m[wl] == '/';
                for (size_t k = 0; !under && k < s.n_ro; k++) {
                        size_t l = strlen(s.ro[k]);
                        under = strncmp(m, s.ro[k], l) == 0 && (m[l] == '/' || m[l] == '\0');
                }
                if (!under) {
                        fprintf(stderr, "lazaret-native: --mask %s: not inside the workspace or a --ro path\n", m);
                        return EXIT_NATIVE;
                }
        }
        /* Fail closed before anything runs. --hold asks for auto, so that
         * a host without user namespaces gets its own message. */
        if (native_probe(s.hold ? NATIVE_MODE_AUTO : want, &mode, &abi, why, sizeof(why)) < 0) {
                fprintf(stderr, "lazaret-native: %s\n", why);
                return EXIT_NATIVE;
        }
        if (s.hold && mode != NATIVE_MODE_FULL)
                die("--hold needs FULL mode, whose namespaces the commands join, and there are %s: allow unprivileged "
                    "user namespaces, or use the container backend",
                    why);
        if (mode == NATIVE_MODE_FS_ONLY && (s.n_ro_bind || s.n_rw_bind || tmp_given || loopback || nproc_limit))
                die("%s needs FULL mode (FS-ONLY has no mount or network namespace of its own)",
                    s.n_ro_bind   ? "--ro-bind"
                    : s.n_rw_bind ? "--bind"
                    : tmp_given   ? "--tmp-size"
                    : loopback    ? "--loopback"
                                  : "--nproc");
        if (mode == NATIVE_MODE_FS_ONLY)
                return run_fs_only(&s, abi);

        int errp[2], alive[2], ready[2] = { -1, -1 };
        if (pipe2(errp, O_CLOEXEC) < 0 || pipe2(alive, O_CLOEXEC) < 0 || (s.hold && pipe2(ready, O_CLOEXEC) < 0)) {
                fprintf(stderr, "lazaret-native: pipe: %s\n", strerror(errno));
                return EXIT_NATIVE;
        }
        uid_t uid = geteuid();
        gid_t gid = getegid();
        pid_t a = fork();
        if (a < 0) {
                fprintf(stderr, "lazaret-native: fork: %s\n", strerror(errno));
                return EXIT_NATIVE;
        }
        if (a == 0) {
                close(errp[0]);
                close(alive[0]);
                if (s.hold)
                        close(ready[0]);
                err_fd = errp[1];
                setup_main(&s, alive[1], ready[1], uid, gid);
        }
        close(errp[1]);
        close(alive[1]);
        forward_signals(a, false);
        if (s.hold) {
                close(ready[1]);
                return hold_wait(a, errp[0], ready[0]);
        }
        /* Until the command runs (EOF: every copy closed by its execve or
         * by the processes before it), what went wrong. */
        char msg[1024];
        size_t n = read_error(errp[0], msg, sizeof(msg));
        int status = wait_for(a);
        close(alive[0]);
        if (n > 0) {
                fprintf(stderr, "lazaret-native: %s\n", msg);
                return EXIT_NATIVE;
        }
        return status;
}
