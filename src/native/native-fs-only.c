/* SPDX-License-Identifier: MIT */
/* lazaret-native's FS-ONLY mode (native-common.h; see native-main.c):
 * Landlock's rules walked around the masks, the command in its own
 * process group with the FS-ONLY seccomp filter, and P waiting for it. */
#include <dirent.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdio.h>
#include <net/if.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "seccomp-filter.h"
#include "string-util.h"
#include "native-common.h"

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

int run_fs_only(const Spec *s, int abi) {
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
