/* SPDX-License-Identifier: MIT */
/* lazaret-native's persistent directories (issue 45): --persist DIR:DST
 * keeps what the sandbox writes at DST in DIR on the host, across runs.
 *
 * Where the sandbox sees the host's own DST (it lies in one of the system
 * directories bound read-only: /usr/local, /etc, /usr), DST is the kernel's
 * overlayfs, mounted by B in the sandbox's user and mount namespace: the
 * host's directory the read-only lower layer, DIR/upper the upper one and
 * DIR/work its work directory (user extended attributes, "userxattr", as a
 * user namespace needs). Elsewhere (/root, /var, /opt: the sandbox has no
 * host directory there, and persistence does not widen what it sees) DST
 * is DIR/upper bound read-write, starting empty.
 *
 * The sandbox's user is the host's own uid, and the host's system files
 * are root's, which the namespace does not map: the sandbox sees them as
 * nobody's and cannot write to their directories. So that a persistent
 * /usr/local is the sandbox's to install into (npm -g), a new upper layer
 * gets a copy of the lower layer's directory tree first (directories only,
 * owned by the user, the lower's mode plus the owner's rights): overlayfs
 * takes a merged directory's owner and mode from its upper directory,
 * while the files in it stay the host's, read-only. Made once, in
 * DIR/upper.new, then renamed to DIR/upper.
 *
 * The mounts live in the sandbox's mount namespace and go with it: nothing
 * is mounted on the host, and nothing is left mounted when the sandbox is
 * killed. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "native-common.h"
#include "string-util.h"

#define MIRROR_DIRS_MAX 200000

typedef struct Persist {
        int dir_fd; /* O_PATH of DIR */
        int lower_fd; /* O_PATH of the host's DST, or -1: no lower layer */
        const char *dst;
} Persist;

static Persist persists[ARGS_MAX];
static size_t n_persists;

/* Whether path is one of the system directories or below one: the sandbox
 * sees the host's own there, read-only. */
static bool under_system_dir(const char *path) {
        for (size_t i = 0; i < ELEMENTSOF(system_dirs); i++) {
                size_t l = strlen(system_dirs[i]);
                if (strncmp(path, system_dirs[i], l) == 0 && (path[l] == '\0' || path[l] == '/'))
                        return true;
        }
        return false;
}

/* The copy of the lower layer's directories: nftw() has no context. */
static int mirror_fd = -1;
static size_t mirror_n, mirror_root_len;

static int mirror_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) ftw;
        if (type != FTW_D || strlen(path) <= mirror_root_len)
                return 0;
        if (++mirror_n > MIRROR_DIRS_MAX)
                die("the host's %.*s has more than %d directories: too many to keep as a persistent directory; "
                    "name a smaller one in persistent_dirs",
                    (int) mirror_root_len, path, MIRROR_DIRS_MAX);
        const char *rel = path + mirror_root_len + 1;
        /* An unreadable directory stays the host's (and unreadable). */
        if (access(path, R_OK | X_OK) < 0)
                return FTW_SKIP_SUBTREE;
        if (mkdirat(mirror_fd, rel, (st->st_mode & 0777) | 0700) < 0 && errno != EEXIST)
                die("cannot make the persistent directory's layer (%s): %s", rel, strerror(errno));
        return 0;
}

static void make_upper(Persist *p, const char *dir, const char *lower) {
        struct stat st;
        if (fstatat(p->dir_fd, "upper", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
                        die("--persist %s: its upper is not a directory of this user's", dir);
                return;
        }
        if (errno != ENOENT)
                die("--persist %s: %s", dir, strerror(errno));
        /* What an interrupted copy left is made again. */
        char from[64];
        snprintf(from, sizeof(from), "/proc/self/fd/%d", p->dir_fd);
        pid_t pid = fork();
        if (pid < 0)
                die("fork: %s", strerror(errno));
        if (pid == 0) {
                if (chdir(from) < 0)
                        _exit(1);
                execl("/bin/rm", "rm", "-rf", "--", "upper.new", (char *) NULL);
                _exit(1);
        }
        if (wait_for(pid) != 0)
                die("--persist %s: cannot remove an unfinished upper.new", dir);
        if (mkdirat(p->dir_fd, "upper.new", 0755) < 0)
                die("--persist %s: cannot make upper.new: %s", dir, strerror(errno));
        if (lower) {
                int fd = openat(p->dir_fd, "upper.new", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        die("--persist %s: %s", dir, strerror(errno));
                mirror_fd = fd;
                mirror_n = 0;
                mirror_root_len = strlen(lower);
                if (nftw(lower, mirror_one, 32, FTW_PHYS | FTW_MOUNT | FTW_ACTIONRETVAL) < 0)
                        die("cannot read the host's %s: %s", lower, strerror(errno));
                struct stat ls;
                if (stat(lower, &ls) == 0 && fchmodat(p->dir_fd, "upper.new", (ls.st_mode & 0777) | 0700, 0) < 0)
                        die("--persist %s: cannot set the mode of upper.new: %s", dir, strerror(errno));
                close(fd);
                mirror_fd = -1;
        }
        if (renameat(p->dir_fd, "upper.new", p->dir_fd, "upper") < 0)
                die("--persist %s: cannot rename upper.new: %s", dir, strerror(errno));
}

void persist_plan(const Spec *s) {
        for (size_t i = 0; i < s->n_persist; i++) {
                Persist *p = &persists[n_persists++];
                const char *dir = s->persist_dir[i];
                p->dst = s->persist_dst[i];
                p->dir_fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (p->dir_fd < 0)
                        die("--persist %s: %s", dir, strerror(errno));
                struct stat st;
                if (fstat(p->dir_fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 0077))
                        die("--persist %s: not a private directory (0700) of this user's", dir);
                p->lower_fd = -1;
                if (under_system_dir(p->dst)) {
                        /* The host's own, which the sandbox sees: the lower
                         * layer; never through a symbolic link. */
                        char *real = realpath(p->dst, NULL);
                        if (!real || !streq(real, p->dst) || stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
                                die("persistent directory %s: %s on the host; name a directory the host has (its "
                                    "real path)",
                                    p->dst, !real ? strerror(errno) : "a symbolic link or not a directory");
                        free(real);
                        p->lower_fd = open(p->dst, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (p->lower_fd < 0)
                                die("persistent directory %s: %s", p->dst, strerror(errno));
                }
                make_upper(p, dir, p->lower_fd >= 0 ? p->dst : NULL);
                if (p->lower_fd >= 0 && mkdirat(p->dir_fd, "work", 0700) < 0 && errno != EEXIST)
                        die("--persist %s: cannot make its work directory: %s", dir, strerror(errno));
        }
}

static void mkdirs(char *path) {
        for (char *q = path + 1; *q; q++) {
                if (*q != '/')
                        continue;
                *q = '\0';
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        die("cannot create %s: %s", path, strerror(errno));
                *q = '/';
        }
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                die("cannot create %s: %s", path, strerror(errno));
}

void persist_mount(void) {
        for (size_t i = 0; i < n_persists; i++) {
                Persist *p = &persists[i];
                char to[PATH_MAX];
                if ((size_t) snprintf(to, sizeof(to), "%s%s", NEW_ROOT, p->dst) >= sizeof(to))
                        die("%s: path too long", p->dst);
                /* Below a read-only system directory the host's DST is the
                 * mount point; elsewhere it is made on the root's tmpfs. */
                if (p->lower_fd < 0)
                        mkdirs(to);
                int upper = openat(p->dir_fd, "upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (upper < 0)
                        die("persistent directory %s: its upper layer: %s", p->dst, strerror(errno));
                if (p->lower_fd < 0) {
                        char from[64];
                        snprintf(from, sizeof(from), "/proc/self/fd/%d", upper);
                        if (mount(from, to, NULL, MS_BIND, NULL) < 0 ||
                            mount(NULL, to, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL) < 0)
                                die("cannot bind the persistent directory %s: %s", p->dst, strerror(errno));
                } else {
                        int work = openat(p->dir_fd, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (work < 0)
                                die("persistent directory %s: its work directory: %s", p->dst, strerror(errno));
                        char opts[256];
                        snprintf(opts, sizeof(opts),
                                 "lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d,"
                                 "userxattr",
                                 p->lower_fd, upper, work);
                        if (mount("overlay", to, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
                                die("cannot mount the persistent directory %s (overlayfs in the sandbox's user "
                                    "namespace): %s",
                                    p->dst, strerror(errno));
                        close(work);
                        close(p->lower_fd);
                }
                close(upper);
                close(p->dir_fd);
        }
}
