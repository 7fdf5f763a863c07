/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "disk-watch.h"
#include "exec-util.h"
#include "fd-util.h"
#include "fileio.h"
#include "log.h"
#include "router-run.h"
#include "string-util.h"

/* ---- the walk ------------------------------------------------------------ */

typedef struct Inode {
        dev_t dev;
        ino_t ino;
} Inode;

/* nftw() has no user data: one walk at a time, in this process. */
static struct {
        uint64_t bytes, unreadable;
        Inode *seen;
        size_t n_seen, cap;
} walk;

static size_t inode_hash(dev_t dev, ino_t ino, size_t cap) {
        uint64_t h = (uint64_t) ino * UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t) dev;
        return (size_t) (h ^ (h >> 29)) & (cap - 1);
}

/* Whether (dev, ino) was seen already; remembers it. -ENOMEM aside. */
static int seen_before(dev_t dev, ino_t ino) {
        if ((walk.n_seen + 1) * 2 > walk.cap) {
                size_t cap = walk.cap ? walk.cap * 2 : 1024;
                Inode *t = calloc(cap, sizeof(Inode));
                if (!t)
                        return -ENOMEM;
                for (size_t i = 0; i < walk.cap; i++)
                        if (walk.seen[i].ino || walk.seen[i].dev) {
                                size_t k = inode_hash(walk.seen[i].dev, walk.seen[i].ino, cap);
                                while (t[k].ino || t[k].dev)
                                        k = (k + 1) & (cap - 1);
                                t[k] = walk.seen[i];
                        }
                free(walk.seen);
                walk.seen = t;
                walk.cap = cap;
        }
        size_t k = inode_hash(dev, ino, walk.cap);
        while (walk.seen[k].ino || walk.seen[k].dev) {
                if (walk.seen[k].dev == dev && walk.seen[k].ino == ino)
                        return 1;
                k = (k + 1) & (walk.cap - 1);
        }
        walk.seen[k] = (Inode){ .dev = dev, .ino = ino };
        walk.n_seen++;
        return 0;
}

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) path;
        (void) ftw;
        switch (type) {
        case FTW_NS:
                walk.unreadable++; /* no stat, nothing to count */
                return 0;
        case FTW_DNR:
                walk.unreadable++;
                break;
        default:
                break;
        }
        if (S_ISREG(st->st_mode) && st->st_nlink > 1) {
                int r = seen_before(st->st_dev, st->st_ino);
                if (r < 0)
                        return r;
                if (r > 0)
                        return 0;
        }
        walk.bytes += (uint64_t) st->st_blocks * 512;
        return 0;
}

static bool ends_deleted(const char *s, size_t len) {
        static const char mark[] = " (deleted)";
        return len >= sizeof(mark) - 1 && memcmp(s + len - (sizeof(mark) - 1), mark, sizeof(mark) - 1) == 0;
}

/* One process's descriptors (dfd: its /proc/PID/fd, taken). */
static int unlinked_open_of(int dfd, const dev_t *devs, size_t n_devs) {
        DIR *fds = fdopendir(dfd);
        if (!fds) {
                safe_close(dfd);
                return 0;
        }
        int r = 0;
        struct dirent *fe;
        while (r >= 0 && (fe = readdir(fds))) {
                if (fe->d_name[0] == '.')
                        continue;
                char target[PATH_MAX];
                ssize_t k = readlinkat(dirfd(fds), fe->d_name, target, sizeof(target));
                if (k <= 0 || !ends_deleted(target, (size_t) k))
                        continue;
                struct stat st;
                if (fstatat(dirfd(fds), fe->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode) || st.st_nlink > 0)
                        continue;
                bool ours = false;
                for (size_t i = 0; i < n_devs && !ours; i++)
                        ours = st.st_dev == devs[i];
                if (!ours)
                        continue;
                r = seen_before(st.st_dev, st.st_ino);
                if (r == 0)
                        walk.bytes += (uint64_t) st.st_blocks * 512;
        }
        closedir(fds);
        return r < 0 ? r : 0;
}

/* The parent of pid, from /proc/PID/stat (its fourth field, after the
 * command in parentheses, which may hold anything): 0 when gone. */
static pid_t parent_of(int proc_fd, const char *pid) {
        char path[300], buf[512];
        snprintf(path, sizeof(path), "%s/stat", pid);
        int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        safe_close(fd);
        if (k <= 0)
                return 0;
        buf[k] = '\0';
        char *e = strrchr(buf, ')');
        int ppid = 0;
        if (!e || sscanf(e + 1, " %*c %d", &ppid) != 1)
                return 0;
        return (pid_t) ppid;
}

typedef struct ProcEntry {
        pid_t pid, ppid;
        bool in;
} ProcEntry;

/* Files unlinked but held open on the devices of paths: no walk finds
 * them, yet their blocks stay taken until the last descriptor closes.
 * Only the processes of the roots' trees (the coordinator's: the git and
 * workspace routers, the native sandbox; conmon's: gVisor's sandbox and
 * gofer) count: a file some other program of the person's holds on the
 * same file system is not the sandbox's. Only a link that names a
 * deleted file is followed, so a live file of some other mount (a FUSE
 * file system that does not answer) is never touched. Added to
 * walk.bytes, each inode once. */
static int unlinked_open(const dev_t *devs, size_t n_devs, const pid_t *roots, size_t n_roots) {
        DIR *proc = opendir("/proc");
        if (!proc)
                return negative_errno();
        ProcEntry *ps = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        struct dirent *de;
        while ((de = readdir(proc))) {
                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                if (n == cap) {
                        ProcEntry *t = realloc(ps, (cap = cap ? cap * 2 : 256) * sizeof(*ps));
                        if (!t) {
                                r = -ENOMEM;
                                break;
                        }
                        ps = t;
                }
                pid_t pid = (pid_t) strtol(de->d_name, NULL, 10);
                ps[n++] = (ProcEntry){ pid, parent_of(dirfd(proc), de->d_name), false };
        }
        /* The roots, then whatever descends from a process already in,
         * until nothing is added (a tree's depth in passes). */
        for (size_t i = 0; r >= 0 && i < n; i++)
                for (size_t k = 0; k < n_roots && !ps[i].in; k++)
                        ps[i].in = ps[i].pid == roots[k];
        for (bool added = true; r >= 0 && added;) {
                added = false;
                for (size_t i = 0; i < n; i++) {
                        if (ps[i].in || ps[i].ppid <= 0)
                                continue;
                        for (size_t k = 0; k < n && !ps[i].in; k++)
                                if (ps[k].in && ps[k].pid == ps[i].ppid)
                                        ps[i].in = added = true;
                }
        }
        for (size_t i = 0; r >= 0 && i < n; i++) {
                if (!ps[i].in)
                        continue;
                char path[64];
                snprintf(path, sizeof(path), "%d/fd", (int) ps[i].pid);
                int dfd = openat(dirfd(proc), path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd >= 0) /* else gone, or not ours to read */
                        r = unlinked_open_of(dfd, devs, n_devs);
        }
        free(ps);
        closedir(proc);
        return r;
}

int diskwatch_measure(char *const *paths, uint64_t *ret_bytes, uint64_t *ret_unreadable) {
        walk.bytes = walk.unreadable = 0;
        walk.n_seen = 0;
        if (walk.seen)
                memset(walk.seen, 0, walk.cap * sizeof(Inode));
        int r = 0;
        for (; *paths && r == 0; paths++) {
                /* FTW_PHYS: symlinks are not followed; FTW_MOUNT: other
                 * file systems below (a FUSE mount) are not entered. */
                r = nftw(*paths, walk_one, 32, FTW_PHYS | FTW_MOUNT);
                if (r < 0 && errno == ENOENT)
                        r = 0; /* not there (yet): nothing to count */
                else if (r < 0)
                        r = negative_errno();
        }
        if (r != 0)
                return r < 0 ? r : -ENOMEM;
        *ret_bytes = walk.bytes;
        if (ret_unreadable)
                *ret_unreadable = walk.unreadable;
        return 0;
}

int diskwatch_unlinked(char *const *paths, const pid_t *roots, size_t n_roots, uint64_t *ret_bytes) {
        dev_t devs[16];
        size_t n_devs = 0;
        for (; *paths; paths++) {
                struct stat st;
                if (stat(*paths, &st) == 0 && n_devs < ELEMENTSOF(devs))
                        devs[n_devs++] = st.st_dev;
        }
        walk.bytes = 0;
        walk.n_seen = 0;
        if (walk.seen)
                memset(walk.seen, 0, walk.cap * sizeof(Inode));
        int r = unlinked_open(devs, n_devs, roots, n_roots);
        if (r < 0)
                return r;
        *ret_bytes = walk.bytes;
        return 0;
}

/* The walk and the unlinked files together. */
/* The trees whose unlinked files count: the coordinator's (parent) and,
 * when pidfile names a live conmon, its (gVisor's sandbox). */
static size_t roots_of(pid_t parent, const char *pidfile, pid_t roots[static 2]) {
        size_t n = 0;
        roots[n++] = parent;
        _cleanup_free_ char *text = NULL, *comm = NULL;
        if (!pidfile || read_file_capped(pidfile, 64, &text, NULL) < 0)
                return n;
        pid_t pid = (pid_t) strtol(text, NULL, 10);
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/comm", (int) pid);
        /* A pid the kernel gave again to another program is not conmon. */
        if (pid > 0 && read_file_capped(path, 64, &comm, NULL) >= 0) {
                comm[strcspn(comm, "\n")] = '\0';
                if (streq(comm, "conmon"))
                        roots[n++] = pid;
        }
        return n;
}

static int measure_all(char *const *paths, pid_t parent, const char *pidfile, uint64_t *ret_bytes,
                       uint64_t *ret_unreadable) {
        uint64_t walked, unlinked;
        pid_t roots[2];
        size_t n_roots = roots_of(parent, pidfile, roots);
        int r = diskwatch_measure(paths, &walked, ret_unreadable);
        if (r >= 0)
                r = diskwatch_unlinked(paths, roots, n_roots, &unlinked);
        if (r < 0)
                return r;
        *ret_bytes = walked + unlinked;
        return 0;
}

/* ---- the helper ---------------------------------------------------------- */

/* Used bytes of the file system under each path; distinct file systems
 * summed once. */
static uint64_t fs_used(char *const *paths) {
        fsid_t seen[16];
        size_t n = 0;
        uint64_t used = 0;
        for (; *paths; paths++) {
                struct statfs sf;
                if (statfs(*paths, &sf) < 0)
                        continue;
                bool dup = false;
                for (size_t i = 0; i < n; i++)
                        dup = dup || memcmp(&seen[i], &sf.f_fsid, sizeof(fsid_t)) == 0;
                if (dup)
                        continue;
                if (n < ELEMENTSOF(seen))
                        seen[n++] = sf.f_fsid;
                used += (uint64_t) (sf.f_blocks - sf.f_bfree) * (uint64_t) sf.f_bsize;
        }
        return used;
}

static int say(const char *what, uint64_t bytes) {
        char line[64];
        int n = snprintf(line, sizeof(line), "%s %" PRIu64 "\n", what, bytes);
        return write(STDOUT_FILENO, line, (size_t) n) == n ? 0 : -EPIPE;
}

int diskwatch_main(int argc, char **argv) {
        if (argc < 4)
                return 64;
        pid_t parent = (pid_t) strtol(argv[0], NULL, 10);
        bool absolute = argv[1][0] == '=';
        uint64_t limit = strtoull(argv[1] + absolute, NULL, 10);
        const char *pidfile = streq(argv[2], "-") ? NULL : argv[2];
        char **paths = argv + 3;
        log_set_program("lazaret-diskwatch");
        /* It ends with its coordinator, and yields to everything else. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                return 1;
        (void) setpriority(PRIO_PROCESS, 0, 19);
        (void) signal(SIGPIPE, SIG_IGN);

        uint64_t base, unreadable;
        int r = measure_all(paths, parent, pidfile, &base, &unreadable);
        if (r < 0) {
                log_error("cannot measure the work files: %s", strerror(-r));
                return 1;
        }
        if (unreadable > 0)
                log_warning("%" PRIu64 " entries of the work files cannot be read; what is beneath them is not counted",
                            unreadable);
        if (say("base", base) < 0)
                return 0;
        uint64_t used = base, fs_at_walk = fs_used(paths), walked = now_usec();
        if (absolute)
                base = 0; /* the room left is from what they hold */
        for (;;) {
                struct timespec ts = { .tv_sec = DISKWATCH_TICK_USEC / 1000000,
                                       .tv_nsec = (DISKWATCH_TICK_USEC % 1000000) * 1000 };
                (void) nanosleep(&ts, NULL);
                if (getppid() != parent)
                        return 0;
                /* What the work files could have grown by since the last
                 * walk is at most what their file systems grew by (unless
                 * something else freed space meanwhile: hence the walk
                 * once a minute whatever happens). Half the room left
                 * triggers a walk, so the last steps are measured
                 * closely. */
                uint64_t fs_now = fs_used(paths), grew = fs_now > fs_at_walk ? fs_now - fs_at_walk : 0;
                uint64_t grown = used > base ? used - base : 0, room = limit > grown ? limit - grown : 0;
                if (grew < room / 2 && grew < limit / 8 && now_usec() - walked < DISKWATCH_WALK_USEC)
                        continue;
                r = measure_all(paths, parent, pidfile, &used, NULL);
                if (r < 0) {
                        log_error("cannot measure the work files: %s", strerror(-r));
                        return 1;
                }
                fs_at_walk = fs_now;
                walked = now_usec();
                if (say("used", used) < 0)
                        return 0;
        }
}

/* ---- the coordinator's side ---------------------------------------------- */

int diskwatch_start(const LaunchSpec *s, char *const *paths, const char *pidfile, uint64_t limit_bytes, DiskWatch *w) {
        size_t n = 0;
        while (paths[n])
                n++;
        char **argv = calloc(n + 6, sizeof(char *));
        char parent[32], limit[32];
        if (!argv)
                return -ENOMEM;
        snprintf(parent, sizeof(parent), "%d", (int) getpid());
        snprintf(limit, sizeof(limit), "%s%" PRIu64, w->absolute ? "=" : "", limit_bytes);
        argv[0] = (char *) "lazaret";
        argv[1] = (char *) "__diskwatch";
        argv[2] = parent;
        argv[3] = limit;
        argv[4] = (char *) (pidfile ?: "-");
        for (size_t i = 0; i < n; i++)
                argv[5 + i] = paths[i];
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                free(argv);
                return negative_errno();
        }
        /* /proc/self/exe: this binary, whichever mount namespace the
         * child is in by then. */
        int r = podman_ns_spawn_out(s, "/proc/self/exe", argv, p[1], &w->pid);
        free(argv);
        safe_close(p[1]);
        if (r < 0) {
                safe_close(p[0]);
                return r;
        }
        (void) fcntl(p[0], F_SETFL, O_NONBLOCK);
        w->fd = p[0];
        return 0;
}

int diskwatch_read(DiskWatch *w) {
        bool changed = false;
        for (;;) {
                if (w->len == sizeof(w->buf))
                        w->len = 0; /* no line is that long: start over */
                ssize_t k = read(w->fd, w->buf + w->len, sizeof(w->buf) - w->len);
                if (k < 0 && (errno == EAGAIN || errno == EINTR))
                        break;
                if (k <= 0)
                        return -EPIPE;
                w->len += (size_t) k;
                char *nl;
                while ((nl = memchr(w->buf, '\n', w->len))) {
                        *nl = '\0';
                        uint64_t v;
                        if (sscanf(w->buf, "base %" SCNu64, &v) == 1) {
                                w->base = w->used = v;
                                w->have_base = true;
                                changed = true;
                        } else if (sscanf(w->buf, "used %" SCNu64, &v) == 1) {
                                w->used = v;
                                w->have_used = true;
                                changed = true;
                        }
                        size_t used = (size_t) (nl - w->buf) + 1;
                        memmove(w->buf, nl + 1, w->len - used);
                        w->len -= used;
                }
        }
        return changed;
}

uint64_t diskwatch_grown(const DiskWatch *w) {
        if (w->absolute)
                return w->have_base ? w->used : 0;
        return w->have_base && w->used > w->base ? w->used - w->base : 0;
}

void diskwatch_stop(DiskWatch *w) {
        if (w->pid > 0) {
                (void) kill(w->pid, SIGKILL);
                while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                w->pid = 0;
        }
        w->fd = safe_close(w->fd);
}
