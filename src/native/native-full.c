/* SPDX-License-Identifier: MIT */
/* lazaret-native's FULL and HOLD sandbox (native-common.h; the processes
 * are drawn in native-main.c): A makes the namespaces, B is their init
 * and builds the root, then runs the command (C) or, HOLD, holds the
 * sandbox for the commands that join it. */
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "fd-util.h"
#include "string-util.h"
#include "native-common.h"

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

static void plan_bind_pinned(const char *src, const char *id, const char *dst, bool rw) {
        if (n_binds >= ELEMENTSOF(binds))
                die("too many paths to bind");
        Bind *b = &binds[n_binds];
        if (id) {
                /* --ro-pinned, --bind-pinned, --ro-bind-pinned: what
                 * lazaret checked, still. */
                int k = open_pinned(src, id, &b->fd, NULL);
                if (k < 0)
                        die("%s is no longer what lazaret checked (%s): it was replaced or moved since", src,
                            k == -ESTALE ? "another file is there now" : strerror(-k));
        } else
                b->fd = open(src, O_PATH | O_CLOEXEC);
        if (b->fd < 0)
                die("cannot bind %s: %s", src, strerror(errno));
        if ((size_t) snprintf(b->dst, sizeof(b->dst), "%s", dst) >= sizeof(b->dst))
                die("%s: path too long", dst);
        b->rw = rw;
        n_binds++;
}

static void plan_bind(const char *src, const char *dst, bool rw) {
        plan_bind_pinned(src, NULL, dst, rw);
}

/* dst inside the new root (before the pivot) in to, with a symbolic
 * link on its last name followed there and never out of it: a file bound
 * over one of the host's (Ubuntu's /etc/resolv.conf ->
 * ../run/systemd/resolve/stub-resolv.conf) lands where the sandbox's
 * readers of the link look. The target is taken apart by name, ".." never
 * above the new root. */
static void dst_in_root(char to[static PATH_MAX], const char *dst) {
        char inside[PATH_MAX];
        if ((size_t) snprintf(inside, sizeof(inside), "%s", dst) >= sizeof(inside))
                die("%s: path too long", dst);
        for (int hops = 0;; hops++) {
                in_root(to, inside);
                struct stat st;
                if (lstat(to, &st) < 0 || !S_ISLNK(st.st_mode))
                        return;
                if (hops == 8)
                        die("cannot bind %s: too many symbolic links", dst);
                char target[PATH_MAX], path[PATH_MAX * 2];
                ssize_t n = readlink(to, target, sizeof(target) - 1);
                if (n < 0)
                        die("cannot read the link %s: %s", dst, strerror(errno));
                target[n] = '\0';
                if (target[0] == '/')
                        snprintf(path, sizeof(path), "%s", target);
                else {
                        *strrchr(inside, '/') = '\0'; /* its directory ("" for /) */
                        snprintf(path, sizeof(path), "%s/%s", inside, target);
                }
                /* Lexically, name by name. */
                size_t len = 0;
                inside[0] = '\0';
                for (char *save = NULL, *c = strtok_r(path, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                        if (streq(c, "."))
                                continue;
                        if (streq(c, "..")) {
                                char *slash = strrchr(inside, '/');
                                len = slash ? (size_t) (slash - inside) : 0;
                                inside[len] = '\0';
                                continue;
                        }
                        size_t cl = strlen(c);
                        if (len + cl + 2 >= sizeof(inside))
                                die("cannot bind %s: path too long", dst);
                        inside[len++] = '/';
                        memcpy(inside + len, c, cl + 1);
                        len += cl;
                }
                if (len == 0)
                        die("cannot bind %s: the link leads to /", dst);
        }
}

/* Bind one at the new root's dst (a directory or a file, made to match),
 * read-only unless rw; never a set-uid program, nor a device but the six. */
static void do_bind(const Bind *b) {
        char to[PATH_MAX], from[64];
        dst_in_root(to, b->dst);
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
                /* A file already there (in a read-only bind: /etc's) is
                 * covered as it is. */
                struct stat there;
                if (lstat(to, &there) < 0)
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
                plan_bind_pinned(s->ro[i], s->ro_id[i], s->ro[i], false);
        for (size_t i = 0; i < s->n_ro_bind; i++)
                plan_bind_pinned(s->ro_src[i], s->ro_src_id[i], s->ro_dst[i], false);
        for (size_t i = 0; i < s->n_rw_bind; i++)
                plan_bind_pinned(s->rw_src[i], s->rw_src_id[i], s->rw_dst[i], true);
        plan_bind(s->workspace, "/workspace", true);
        for (size_t i = 0; i < ELEMENTSOF(devices); i++) {
                char d[64];
                snprintf(d, sizeof(d), "/dev/%s", devices[i]);
                if (access(d, F_OK) == 0)
                        plan_bind(d, d, true);
        }

        persist_plan(s);
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
        persist_mount();
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

/* What id (of ours, in this user namespace) is in the parent one, by the
 * map file of ours; id itself in the initial namespace. */
static unsigned parent_id(const char *map, unsigned id) {
        FILE *f = fopen(map, "re");
        if (!f)
                die("cannot read %s: %s", map, strerror(errno));
        unsigned in, out, len;
        while (fscanf(f, "%u %u %u", &in, &out, &len) == 3)
                if (id >= in && id - in < len) {
                        fclose(f);
                        return out + (id - in);
                }
        fclose(f);
        die("%s does not map id %u", map, id);
}

/* ready: HOLD, the pipe to P that gets B's pid once B built the root (-1
 * otherwise). */
_noreturn_ void setup_main(const Spec *s, int alive, int ready, uid_t uid, gid_t gid) {
        die_with_parent(alive);
        close(alive);
        /* --share-net: the network namespace we were started in (the
         * coordinator's network sidecar's), whose owner, a user namespace
         * above ours (Podman's), keeps its routes out of the sandbox's
         * reach: the new user namespace below it has no capability there.
         * Started as that namespace's root, the sandbox's user is who we
         * are one level up (the user on the host). */
        unsigned in_uid = share_net ? parent_id("/proc/self/uid_map", uid) : uid;
        unsigned in_gid = share_net ? parent_id("/proc/self/gid_map", gid) : gid;
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | (share_net ? 0 : CLONE_NEWNET)) < 0)
                die("cannot create the namespaces: %s", strerror(errno));
        char map[64];
        write_file("/proc/self/setgroups", "deny");
        snprintf(map, sizeof(map), "%u %u 1\n", in_uid, (unsigned) uid);
        write_file("/proc/self/uid_map", map);
        snprintf(map, sizeof(map), "%u %u 1\n", in_gid, (unsigned) gid);
        write_file("/proc/self/gid_map", map);
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                die("cannot make the mounts private: %s", strerror(errno));
        /* A shared namespace's loopback is its owner's to bring up. */
        if (loopback && !share_net)
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
