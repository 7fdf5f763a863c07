/* SPDX-License-Identifier: MIT */
/* lazaret-native's JOIN (native-common.h; see native-main.c): a command
 * run in a held sandbox, after checking that its init is one of this
 * user's, with the environment read from --env-fd. */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "string-util.h"
#include "native-common.h"

/* ---- JOIN: J and its command ----------------------------------------------- */

/* --cwd: relative, without "." or ".." (a symbolic link on the way is
 * refused where it is opened, in join_command). */
bool cwd_is_valid(const char *p) {
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
void read_env_fd(Spec *s, int fd) {
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

_noreturn_ static void join_command(const char *cwd, char *const *argv) {
        change_to("/workspace", cwd);
        exec_confined(argv);
}

/* JOIN, J: enter the namespaces of pid, the init of a held sandbox, and
 * run the command there as its child; its status is ours. */
_noreturn_ void join_main(const Spec *s, pid_t pid, const char *cwd) {
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
