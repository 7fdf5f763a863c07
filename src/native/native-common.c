/* SPDX-License-Identifier: MIT */
/* lazaret-native (native-common.h): what the processes of every mode
 * share: dying with one error line (on the error pipe to P, or stderr),
 * reading that pipe, the namespaces' small helpers, passing signals on and
 * waiting, FS-ONLY's temp directory (removed by die()), and the command's
 * environment and confinement (Landlock rules, RLIMIT_NPROC, seccomp,
 * execve). */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "seccomp-filter.h"
#include "string-util.h"
#include "native-common.h"

const char *const system_dirs[6] = { "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc" };
const char *const devices[6] = { "null", "zero", "full", "random", "urandom", "tty" };

/* Where the error of a process before the command ran goes: the pipe to P,
 * or stderr in P itself. */
int err_fd = STDERR_FILENO;

/* FS-ONLY: P's temp directory, removed when P dies of an error (NULL in
 * every other process). */
const char *tmp_dir;
int tmp_fd = -EBADF;

_noreturn_ _printf_(1, 2) void die(const char *fmt, ...) {
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

/* What the processes before the command wrote to the error pipe, read to
 * its end (every copy closed: by the command's execve, or by their exit):
 * its first line in msg, its length 0 when the command ran. Closes fd. */
size_t read_error(int fd, char *msg, size_t size) {
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
void loopback_up(void) {
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

void write_file(const char *path, const char *s) {
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
void die_with_parent(int alive) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                die("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
        struct pollfd p = { .fd = alive, .events = POLLIN };
        if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)))
                _exit(EXIT_NATIVE);
}

/* 0 once the child is gone, so that its pid, free for reuse, is not hit. */
volatile sig_atomic_t forward_to;

static void forward(int sig) {
        if (forward_to > 0)
                (void) kill((pid_t) forward_to, sig);
}

/* SIGTERM and SIGHUP go on to pid; so do SIGINT and SIGQUIT if interrupts,
 * else they are ignored (the terminal sends Ctrl+C and Ctrl+\ to the
 * command's process group as well). */
void forward_signals(pid_t pid, bool interrupts) {
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
int status_of(int st) {
        if (WIFEXITED(st))
                return WEXITSTATUS(st);
        if (WIFSIGNALED(st))
                return 128 + WTERMSIG(st);
        return EXIT_NATIVE;
}

int wait_for(pid_t pid) {
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

/* ---- C: the command ------------------------------------------------------- */

/* The command's environment, NULL-terminated. A later entry replaces an
 * earlier one of the same name: --env-fd and --setenv values win over the
 * defaults, --setenv over --env-fd. */
char **envp;
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
void use_env_path(void) {
        for (size_t i = 0; i < n_envp; i++)
                if (startswith(envp[i], "PATH=") && setenv("PATH", envp[i] + 5, 1) < 0)
                        die("out of memory");
}

/* tmpdir: TMPDIR, if not NULL. */
void build_env(const Spec *s, const char *home, const char *tmpdir) {
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
void close_inherited(void) {
        if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                die("close_range: %s", strerror(errno));
}

void add_rule(LandlockRules *r, const char *path, LandlockGrant g) {
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
const char *rw_paths[ARGS_MAX];
size_t n_rw_paths;

/* --nproc: RLIMIT_NPROC of every process of the sandbox. Linux counts it
 * per user namespace and user (since 5.14), so in the sandbox's own
 * namespace it counts the sandbox's tasks (threads too), not the user's
 * processes on the host; none of them has the capabilities that pass it. 0:
 * left as it is. */
unsigned long long nproc_limit;

void apply_nproc(void) {
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
bool loopback;

/* --share-net: the sandbox stays in the network namespace lazaret-native
 * was started in (one its user namespace has no capability over: the
 * network sidecar's, whose routes are the policy); TCP is not refused by
 * Landlock, the routes decide. */
bool share_net;

static LandlockRules *full_rules(void) {
        LandlockRules *r = NULL;
        /* Without --loopback the network namespace has no interface up;
         * Landlock refuses TCP as well where it can (ABI 4). */
        if (landlock_rules_new(!loopback && !share_net && landlock_abi() >= 4 ? LANDLOCK_DENY_TCP : 0, &r) < 0)
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
_noreturn_ void exec_confined(char *const *argv) {
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

_noreturn_ void run_command(const Spec *s) {
        build_env(s, HOME_DIR, NULL);
        if (chdir("/workspace") < 0)
                die("chdir /workspace: %s", strerror(errno));
        exec_confined(s->argv);
}

/* Change to the workspace root, or to cwd below it. cwd is opened where
 * the sandbox's processes may have made any name a link: none is
 * followed, nothing leads out. */
void change_to(const char *root, const char *cwd) {
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

void remove_tmp_dir(void) {
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
