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
 * home, no network interface up, no process of the host visible. With
 * --share-net no network namespace is made: the sandbox keeps the one it
 * was started in (Lazaret's network sidecar's, entered as root of the user
 * namespace that owns it, below which A makes the sandbox's own).
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
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include "native-probe.h"
#include "fd-util.h"
#include "string-util.h"
#include "native-common.h"

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

static void spec_done(Spec *s) {
        free(s->workspace);
        for (size_t i = 0; i < s->n_ro; i++) {
                free(s->ro[i]);
                free(s->ro_id[i]);
        }
        for (size_t i = 0; i < s->n_ro_bind; i++) {
                free(s->ro_src[i]);
                free(s->ro_src_id[i]);
        }
        for (size_t i = 0; i < s->n_rw_bind; i++) {
                free(s->rw_src[i]);
                free(s->rw_src_id[i]);
        }
        for (size_t i = 0; i < s->n_mask; i++)
                free(s->mask[i]);
        for (size_t i = 0; i < s->n_persist; i++)
                free(s->persist_dir[i]);
        free(s->fd_env);
        free(s->fd_env_buf);
}

static void usage(void) {
        fprintf(stderr,
                "usage: lazaret-native --workspace DIR [--ro PATH]... [--ro-pinned DEV:INO:PATH]... [--ro-bind "
                "SRC:DST]...\n"
                "                      [--ro-bind-pinned DEV:INO:SRC:DST]... [--bind-pinned DEV:INO:SRC:DST]...\n"
                "                      [--bind SRC:DST]... [--mask PATH]... [--setenv NAME=VALUE]... [--shm-size "
                "BYTES]\n"
                "                      [--tmp-size BYTES] [--loopback] [--share-net] [--nproc N]\n"
                "                      [--mode full|fs-only|auto]\n"
                "                      -- CMD [ARG]...\n"
                "       lazaret-native --workspace DIR [--ro PATH]... [--ro-bind SRC:DST]... [--bind SRC:DST]...\n"
                "                      [--persist DIR:DST]... [--mask PATH]... [--shm-size BYTES] [--tmp-size BYTES]\n"
                "                      [--loopback] [--share-net] [--nproc N] [--mode full|auto] [--cgroup DIR]\n"
                "                      [--die-with-parent] --hold\n"
                "       lazaret-native --join PID [--cwd REL] [--env-fd N] [--rw DST]... [--loopback] [--share-net]\n"
                "                      [--nproc N]\n"
                "                      [--cgroup DIR]\n"
                "                      [--setenv NAME=VALUE]... -- CMD [ARG]...\n"
                "       lazaret-native [--mode full|fs-only|auto] --check\n");
}

/* Everything P needs to know before it forks. */

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

/* The pinned options' "DEV:INO:" (fd_identity) before an absolute path:
 * the identity in *ret_id (caller frees) and what follows it, or NULL. */
static const char *split_pin(const char *arg, char **ret_id) {
        const char *c1 = strchr(arg, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
                return NULL;
        if (!(*ret_id = strndup(arg, (size_t) (c2 - arg))))
                die("out of memory");
        return c2 + 1;
}

/* path, reached with no symbolic link, must still be what lazaret checked
 * (id); else one line naming it and exit 125. A directory is asked for
 * (and named) with dir. */
static void require_pinned(const char *path, const char *id, bool dir) {
        int k = dir ? open_pinned_dir(path, id, NULL, NULL) : open_pinned(path, id, NULL, NULL);
        if (k >= 0)
                return;
        fprintf(stderr, "lazaret-native: %s is no longer %s lazaret checked (%s): it was replaced or moved since\n",
                path, dir ? "the directory" : "what",
                k == -ESTALE ? (dir ? "another directory is there now" : "another file is there now") : strerror(-k));
        exit(EXIT_NATIVE);
}

/* --cgroup DIR: this process moves into that cgroup (a memory cgroup
 * the coordinator made and limited), and so does every process it starts.
 * Fails closed: a limit that is not in force would be a claim only.
 *
 * In a cgroup v1 hierarchy the process moves its one thread by writing 0
 * to "tasks": a move of the caller's own thread skips the kernel's lock of
 * every thread group (cgroup_threadgroup_rwsem), whose write side waits
 * for an RCU grace period, 7 to 15 ms on these hosts for each write of a
 * pid to cgroup.procs: most of a warm join's time (issue 45). lazaret-native
 * starts no thread, so its thread is the process; that is checked, since a
 * second thread would stay outside. cgroup v2 has no such file. */
static void enter_cgroup(const char *dir) {
        int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (d < 0)
                die("--cgroup %s: %s", dir, strerror(errno));
        struct statfs sf;
        if (fstatfs(d, &sf) < 0)
                die("--cgroup %s: %s", dir, strerror(errno));
        if (sf.f_type != CGROUP_SUPER_MAGIC && sf.f_type != CGROUP2_SUPER_MAGIC)
                die("--cgroup %s: not a directory of a cgroup file system", dir);
        bool v1 = sf.f_type == CGROUP_SUPER_MAGIC;
        if (v1) {
                struct stat st;
                /* procfs counts a process's threads in its task directory's
                 * links (each thread one, plus . and ..). */
                if (stat("/proc/self/task", &st) < 0)
                        die("--cgroup %s: /proc/self/task: %s", dir, strerror(errno));
                if (st.st_nlink != 3)
                        die("--cgroup %s: lazaret-native has %ju threads, not one", dir, (uintmax_t) st.st_nlink - 2);
        }
        const char *file = v1 ? "tasks" : "cgroup.procs";
        int fd = openat(d, file, O_WRONLY | O_CLOEXEC);
        close(d);
        if (fd < 0)
                die("--cgroup %s: cannot open its %s: %s", dir, file, strerror(errno));
        char line[32];
        int n = v1 ? snprintf(line, sizeof(line), "0\n") : snprintf(line, sizeof(line), "%d\n", (int) getpid());
        if (write(fd, line, (size_t) n) != n)
                die("--cgroup %s: cannot move into it: %s", dir, strerror(errno));
        close(fd);
}

/* A decimal int >= 0, or -1. */
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
                { "ro-pinned", required_argument, NULL, 'K' },
                { "ro-bind", required_argument, NULL, 'B' },
                { "bind", required_argument, NULL, 'b' },
                { "ro-bind-pinned", required_argument, NULL, 'Z' },
                { "bind-pinned", required_argument, NULL, 'Y' },
                { "rw", required_argument, NULL, 'W' },
                { "loopback", no_argument, NULL, 'L' },
                { "share-net", no_argument, NULL, 'S' },
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
                { "persist", required_argument, NULL, 'p' },
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
                case 'K': {
                        /* DEV:INO:PATH, PATH canonical: that directory, as
                         * lazaret checked it (fd_identity), reached with no
                         * symbolic link, read-only at its own path. Opened
                         * so again when it is bound. */
                        char *id = NULL;
                        const char *rest = split_pin(optarg, &id);
                        if (!rest) {
                                fprintf(stderr, "lazaret-native: --ro-pinned %s: DEV:INO:PATH expected\n", optarg);
                                exit(EXIT_NATIVE);
                        }
                        char *path = strdup(rest);
                        if (!path)
                                die("out of memory");
                        require_pinned(path, id, true);
                        s.ro_id[s.n_ro] = id;
                        add_arg(s.ro, &s.n_ro, path, "--ro-pinned");
                        break;
                }
                case 'Z':
                case 'Y':
                case 'B':
                case 'b': {
                        /* SRC:DST, split at the last colon (DST is ours,
                         * SRC any host path); pinned: DEV:INO:SRC:DST, SRC
                         * canonical, bound only if it is still what lazaret
                         * checked (fd_identity), reached with no link. */
                        bool pinned = c == 'Z' || c == 'Y';
                        bool ro = c == 'B' || c == 'Z';
                        const char *opt = c == 'B'   ? "--ro-bind"
                                          : c == 'b' ? "--bind"
                                          : c == 'Z' ? "--ro-bind-pinned"
                                                     : "--bind-pinned";
                        char *id = NULL;
                        if (pinned) {
                                const char *rest = split_pin(optarg, &id);
                                if (!rest) {
                                        fprintf(stderr, "lazaret-native: %s %s: DEV:INO:SRC:DST expected\n", opt,
                                                optarg);
                                        return EXIT_NATIVE;
                                }
                                optarg = (char *) rest;
                        }
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
                        char *src = NULL;
                        if (pinned) {
                                require_pinned(optarg, id, false);
                                src = strdup(optarg);
                                if (!src)
                                        die("out of memory");
                        } else
                                src = resolve(opt, optarg);
                        *colon = ':';
                        size_t *n = ro ? &s.n_ro_bind : &s.n_rw_bind;
                        if (*n >= ARGS_MAX) {
                                free(src);
                                free(id);
                                fprintf(stderr, "lazaret-native: more than %d %s options\n", ARGS_MAX, opt);
                                return EXIT_NATIVE;
                        }
                        (ro ? s.ro_src_id : s.rw_src_id)[*n] = id;
                        (ro ? s.ro_src : s.rw_src)[*n] = src;
                        (ro ? s.ro_dst : s.rw_dst)[(*n)++] = dst;
                        if (!ro)
                                rw_paths[n_rw_paths++] = dst;
                        break;
                }
                case 'p': {
                        /* DIR:DST: DST kept in DIR across runs
                         * (native-persist.c); the commands may write
                         * there. */
                        char *colon = strrchr(optarg, ':');
                        const char *dst = colon ? colon + 1 : NULL;
                        if (!dst || colon == optarg || !dst_is_valid(dst) || streq(dst, "/")) {
                                fprintf(stderr,
                                        "lazaret-native: --persist %s: DIR:DST expected, DST absolute without \".\" "
                                        "or \"..\" segments, not /, /tmp or the home, and not /proc, /dev or "
                                        "/workspace or below them\n",
                                        optarg);
                                return EXIT_NATIVE;
                        }
                        if (s.n_persist >= ARGS_MAX || n_rw_paths >= ARGS_MAX) {
                                fprintf(stderr, "lazaret-native: more than %d --persist options\n", ARGS_MAX);
                                return EXIT_NATIVE;
                        }
                        *colon = '\0';
                        s.persist_dir[s.n_persist] = resolve("--persist", optarg);
                        *colon = ':';
                        s.persist_dst[s.n_persist++] = dst;
                        rw_paths[n_rw_paths++] = dst;
                        break;
                }
                case 'L':
                        loopback = true;
                        break;
                case 'S':
                        share_net = true;
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
                                    : s.n_persist     ? "--persist"
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
        if (mode == NATIVE_MODE_FS_ONLY &&
            (s.n_ro_bind || s.n_rw_bind || s.n_persist || tmp_given || loopback || share_net || nproc_limit))
                die("%s needs FULL mode (FS-ONLY has no mount or network namespace of its own)",
                    s.n_ro_bind   ? "--ro-bind"
                    : s.n_rw_bind ? "--bind"
                    : s.n_persist ? "--persist"
                    : tmp_given   ? "--tmp-size"
                    : loopback    ? "--loopback"
                    : share_net   ? "--share-net"
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
