/* SPDX-License-Identifier: MIT */
/* lazaret-native: the native backend's boundary (issue 21), FULL mode: the
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
 * never ran. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "landlock.h"
#include "macro.h"
#include "seccomp-filter.h"

#define EXIT_NATIVE 125
#define ARGS_MAX    256 /* --ro, --mask and --setenv each */
#define NEW_ROOT    "/tmp/.lazaret-root" /* on a tmpfs of the new mount namespace */
#define HOME_DIR    "/home/sandbox"

static const char *const system_dirs[] = { "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc" };
static const char *const devices[] = { "null", "zero", "full", "random", "urandom", "tty" };

typedef struct Spec {
        char *workspace; /* resolved */
        char *ro[ARGS_MAX];
        size_t n_ro;
        char *mask[ARGS_MAX];
        size_t n_mask;
        char *setenv[ARGS_MAX];
        size_t n_setenv;
        unsigned long long shm_size;
        char **argv;
} Spec;

static void spec_done(Spec *s) {
        free(s->workspace);
        for (size_t i = 0; i < s->n_ro; i++)
                free(s->ro[i]);
        for (size_t i = 0; i < s->n_mask; i++)
                free(s->mask[i]);
}

/* Where the error of a process before the command ran goes: the pipe to P,
 * or stderr in P itself. */
static int err_fd = STDERR_FILENO;

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
        if (err_fd == STDERR_FILENO)
                (void) !write(err_fd, "lazaret-native: ", 16);
        (void) !write(err_fd, buf, (size_t) n);
        _exit(EXIT_NATIVE);
}

static void usage(void) {
        fprintf(stderr,
                "usage: lazaret-native --workspace DIR [--ro PATH]... [--mask PATH]... [--setenv NAME=VALUE]...\n"
                "                      [--shm-size BYTES] -- CMD [ARG]...\n"
                "       lazaret-native --check\n");
}

/* Everything P needs to know before it forks. */
static int probe_userns(char *why, size_t size) {
        pid_t pid = fork();
        if (pid < 0) {
                snprintf(why, size, "fork: %s", strerror(errno));
                return -errno;
        }
        if (pid == 0)
                _exit(unshare(CLONE_NEWUSER) < 0 ? 1 : 0);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                snprintf(why, size,
                         "unprivileged user namespaces are not available (kernel.unprivileged_userns_clone or "
                         "user.max_user_namespaces forbids them): allow them, or use the container backend");
                return -EPERM;
        }
        return 0;
}

static int preflight(int *ret_abi, char *why, size_t size) {
        int abi = landlock_abi();
        if (abi <= 0) {
                snprintf(why, size,
                         "Landlock is not available (the kernel lacks it or did not enable it at boot): enable it "
                         "(Linux 5.13 or newer, \"landlock\" in lsm=), or use the container backend");
                return -EOPNOTSUPP;
        }
        *ret_abi = abi;
        return probe_userns(why, size);
}

/* ---- A: the namespaces ---------------------------------------------------- */

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

static pid_t forward_to;

static void forward(int sig) {
        if (forward_to > 0)
                (void) kill(forward_to, sig);
}

static void forward_signals(pid_t pid) {
        forward_to = pid;
        struct sigaction sa = { .sa_handler = forward };
        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGHUP, &sa, NULL);
        /* Ctrl+C and Ctrl+\ reach the command from the terminal itself. */
        (void) signal(SIGINT, SIG_IGN);
        (void) signal(SIGQUIT, SIG_IGN);
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
                if (r == pid)
                        return status_of(st);
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
        mount_tmpfs("/tmp", "mode=1777", 0);
        mount_tmpfs(HOME_DIR, "mode=0700", 0);
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

static char *envp[ARGS_MAX + 8];

static void build_env(const Spec *s) {
        size_t n = 0;
        envp[n++] = (char *) "PATH=/usr/local/bin:/usr/bin:/bin";
        envp[n++] = (char *) "HOME=" HOME_DIR;
        envp[n++] = (char *) "LANG=C.UTF-8";
        static char term[256];
        const char *t = getenv("TERM");
        if (t && strlen(t) < sizeof(term) - 6) {
                snprintf(term, sizeof(term), "TERM=%s", t);
                envp[n++] = term;
        }
        for (size_t i = 0; i < s->n_setenv; i++)
                envp[n++] = s->setenv[i];
        envp[n] = NULL;
}

static void add_rule(LandlockRules *r, const char *path, LandlockGrant g) {
        char *why = NULL;
        int k = landlock_rules_add(r, path, g, &why);
        if (k == -ENOENT)
                return; /* not on this host (/lib64) */
        if (k < 0)
                die("Landlock: %s", why ?: strerror(-k));
}

_noreturn_ static void run_command(const Spec *s) {
        _cleanup_(landlock_rules_freep) LandlockRules *r = NULL;
        /* The network namespace has no interface up; Landlock refuses TCP
         * as well where it can (ABI 4). */
        if (landlock_rules_new(landlock_abi() >= 4 ? LANDLOCK_DENY_TCP : 0, &r) < 0)
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
        build_env(s);
        if (chdir("/workspace") < 0)
                die("chdir /workspace: %s", strerror(errno));
        const char *why = NULL;
        int k = landlock_apply(r, 1, &why);
        if (k < 0)
                die("Landlock: %s", why ?: strerror(-k));
        k = native_seccomp_apply(0);
        if (k < 0)
                die("seccomp: %s", strerror(-k));
        /* PATH is the sandbox's: execvpe() looks the command up in the
         * caller's own. */
        if (setenv("PATH", envp[0] + 5, 1) < 0)
                die("out of memory");
        execvpe(s->argv[0], s->argv, envp);
        die("cannot run %s: %s", s->argv[0], strerror(errno));
}

/* ---- B: init --------------------------------------------------------------- */

_noreturn_ static void init_main(const Spec *s, int alive) {
        die_with_parent(alive);
        close(alive);
        build_root(s);
        int pipe_c[2];
        if (pipe2(pipe_c, O_CLOEXEC) < 0)
                die("pipe: %s", strerror(errno));
        pid_t c = fork();
        if (c < 0)
                die("fork: %s", strerror(errno));
        if (c == 0) {
                close(pipe_c[0]);
                die_with_parent(pipe_c[1]); /* the read end is B's */
                run_command(s);
        }
        close(pipe_c[1]);
        /* What C reports goes to P on its own; B's copy goes now. */
        close(err_fd);
        err_fd = -1;
        forward_signals(c);
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

_noreturn_ static void setup_main(const Spec *s, int alive, uid_t uid, gid_t gid) {
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
        if (unshare(CLONE_NEWPID) < 0)
                die("cannot create the PID namespace: %s", strerror(errno));
        int pipe_b[2];
        if (pipe2(pipe_b, O_CLOEXEC) < 0)
                die("pipe: %s", strerror(errno));
        pid_t b = fork();
        if (b < 0)
                die("fork: %s", strerror(errno));
        if (b == 0) {
                close(pipe_b[0]);
                init_main(s, pipe_b[1]);
        }
        close(pipe_b[1]);
        close(err_fd);
        err_fd = -1;
        forward_signals(b);
        _exit(wait_for(b));
}

/* ---- P ---------------------------------------------------------------------- */

static char *resolve(const char *what, const char *path) {
        char *r = realpath(path, NULL);
        if (!r) {
                fprintf(stderr, "lazaret-native: %s %s: %s\n", what, path, strerror(errno));
                exit(EXIT_NATIVE);
        }
        return r;
}

static void add_arg(char **list, size_t *n, char *v, const char *opt) {
        if (*n >= ARGS_MAX) {
                fprintf(stderr, "lazaret-native: more than %d %s options\n", ARGS_MAX, opt);
                exit(EXIT_NATIVE);
        }
        list[(*n)++] = v;
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "workspace", required_argument, NULL, 'w' },
                { "ro", required_argument, NULL, 'r' },
                { "mask", required_argument, NULL, 'm' },
                { "setenv", required_argument, NULL, 'e' },
                { "shm-size", required_argument, NULL, 's' },
                { "check", no_argument, NULL, 'c' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(spec_done) Spec s = { .shm_size = 64ULL << 20 };
        bool check = false;
        const char *workspace = NULL;
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
                        if (errno || *end || s.shm_size == 0) {
                                fprintf(stderr, "lazaret-native: --shm-size %s: a number of bytes expected\n", optarg);
                                return EXIT_NATIVE;
                        }
                        break;
                }
                case 'c':
                        check = true;
                        break;
                case 'h':
                        usage();
                        return 0;
                default:
                        if (optopt)
                                fprintf(stderr, "lazaret-native: option -%c %s (see --help)\n", optopt,
                                        strchr("wrmes", optopt) ? "needs a value" : "is unknown");
                        else
                                fprintf(stderr, "lazaret-native: %s: unknown option or missing value (see --help)\n",
                                        argv[optind - 1]);
                        return EXIT_NATIVE;
                }
        }
        char why[512];
        int abi = 0;
        if (check) {
                if (preflight(&abi, why, sizeof(why)) < 0) {
                        fprintf(stderr, "lazaret-native: %s\n", why);
                        return EXIT_NATIVE;
                }
                printf("native: FULL (Landlock ABI %d, user namespaces)\n", abi);
                return 0;
        }
        if (!workspace) {
                fprintf(stderr, "lazaret-native: --workspace DIR is required\n");
                return EXIT_NATIVE;
        }
        if (optind >= argc) {
                fprintf(stderr, "lazaret-native: no command given (-- CMD [ARG]...)\n");
                return EXIT_NATIVE;
        }
        s.argv = argv + optind;
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
        /* Fail closed before anything runs. */
        if (preflight(&abi, why, sizeof(why)) < 0) {
                fprintf(stderr, "lazaret-native: %s\n", why);
                return EXIT_NATIVE;
        }

        int errp[2], alive[2];
        if (pipe2(errp, O_CLOEXEC) < 0 || pipe2(alive, O_CLOEXEC) < 0) {
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
                err_fd = errp[1];
                setup_main(&s, alive[1], uid, gid);
        }
        close(errp[1]);
        close(alive[1]);
        forward_signals(a);
        /* Until the command runs (EOF: every copy closed by its execve or
         * by the processes before it), what went wrong. */
        char msg[1024];
        size_t n = 0;
        for (;;) {
                ssize_t k = read(errp[0], msg + n, sizeof(msg) - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                n += (size_t) k;
                if (n == sizeof(msg) - 1)
                        break;
        }
        close(errp[0]);
        int status = wait_for(a);
        close(alive[0]);
        if (n > 0) {
                msg[n] = '\0';
                char *nl = strchr(msg, '\n');
                if (nl)
                        *nl = '\0';
                fprintf(stderr, "lazaret-native: %s\n", msg);
                return EXIT_NATIVE;
        }
        return status;
}
