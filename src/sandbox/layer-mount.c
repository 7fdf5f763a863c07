/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fd-util.h"
#include "fileio.h"
#include "layer-mount.h"
#include "path-util.h"
#include "podman.h"
#include "spawn-util.h"
#include "strbuf.h"
#include "string-util.h"

#define OPQ_KERNEL "user.overlay.opaque"

/* ---- the helper, in Podman's namespaces ----------------------------------- */

static int say_ok(void) {
        puts("ok");
        return 0;
}

static int say_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int say_error(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        return 1;
}

static int helper_mount(char **argv) {
        const char *lower = argv[0], *upper = argv[1], *work = argv[2], *merged = argv[3];
        /* The options string cannot carry these (the State Anchor refuses
         * such paths before it gets here). */
        for (size_t i = 0; i < 3; i++)
                if (strpbrk(argv[i], ",:\\\n"))
                        return say_error("the path %s contains ',', ':' or '\\', which an overlay mount cannot take",
                                         argv[i]);
        _cleanup_free_ char *opts = NULL;
        if (asprintf(&opts, "userxattr,lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work) < 0)
                return say_error("out of memory");
        if (mount("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, opts) < 0) {
                int e = errno;
                return say_error("the kernel refused the overlay mount on %s: %s%s", merged, strerror(e),
                                 e == EPERM || e == EINVAL
                                         ? " (persistent_dirs need overlayfs mounts in a user namespace: Linux 5.11 or "
                                           "later, and an upper directory on a file system with user extended "
                                           "attributes; 'lazaret doctor' checks both)"
                                         : "");
        }
        return say_ok();
}

static int helper_unmount(const char *merged) {
        if (umount2(merged, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
                return say_error("cannot unmount %s: %m", merged);
        return say_ok();
}

/* fuse-overlayfs marks an opaque directory with one of these attributes
 * (and a .wh..wh..opq file); the kernel reads user.overlay.opaque. */
static bool take_fuse_opaque(int dfd) {
        static const char *const names[] = { "user.fuseoverlayfs.opaque", "trusted.overlay.opaque" };
        bool opaque = false;
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                char v[4];
                ssize_t k = fgetxattr(dfd, names[i], v, sizeof(v));
                if (k >= 1 && v[0] == 'y')
                        opaque = true;
                if (k >= 0)
                        (void) fremovexattr(dfd, names[i]);
        }
        return opaque;
}

/* One directory of changes, taken (dfd): its whiteouts and opaque mark in
 * the kernel's form, then each subdirectory, opened without following a
 * symbolic link. */
static int convert_dir(int dfd, const char *path, StrBuf *why) {
        bool opaque = take_fuse_opaque(dfd);
        int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0) {
                strbuf_printf(why, "%s: %m", path);
                return negative_errno();
        }
        DIR *d = fdopendir(dup_fd);
        if (!d) {
                safe_close(dup_fd);
                strbuf_printf(why, "%s: %m", path);
                return negative_errno();
        }
        /* Names first: the directory changes under readdir otherwise. */
        char **names = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        for (struct dirent *e; (e = readdir(d));) {
                if (streq(e->d_name, ".") || streq(e->d_name, ".."))
                        continue;
                if (n == cap) {
                        char **t = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(char *));
                        if (!t) {
                                r = -ENOMEM;
                                break;
                        }
                        names = t;
                }
                if (!(names[n] = strdup(e->d_name))) {
                        r = -ENOMEM;
                        break;
                }
                n++;
        }
        closedir(d);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                const char *name = names[i];
                struct stat st;
                if (streq(name, ".wh..wh..opq")) {
                        opaque = true;
                        if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT) {
                                r = negative_errno();
                                strbuf_printf(why, "cannot remove %s/%s: %m", path, name);
                        }
                        continue;
                }
                if (strncmp(name, ".wh.", 4) == 0 && name[4]) {
                        const char *target = name + 4;
                        if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT) {
                                r = negative_errno();
                                strbuf_printf(why, "cannot remove %s/%s: %m", path, name);
                                continue;
                        }
                        /* Both a name and its whiteout: the name wins, as
                         * it did in fuse-overlayfs. */
                        if (fstatat(dfd, target, &st, AT_SYMLINK_NOFOLLOW) == 0)
                                continue;
                        if (mknodat(dfd, target, S_IFCHR | 0000, makedev(0, 0)) < 0) {
                                r = negative_errno();
                                strbuf_printf(why, "cannot make the whiteout %s/%s: %m", path, target);
                        }
                        continue;
                }
                if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0) {
                        r = negative_errno();
                        strbuf_printf(why, "cannot open %s/%s: %m", path, name);
                        continue;
                }
                _cleanup_free_ char *subpath = path_join(path, name);
                r = subpath ? convert_dir(sub, subpath, why) : -ENOMEM;
                safe_close(sub);
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        if (r >= 0 && opaque && fsetxattr(dfd, OPQ_KERNEL, "y", 1, 0) < 0) {
                r = negative_errno();
                strbuf_printf(why, "cannot mark %s opaque: %m", path);
        }
        return r;
}

static int helper_convert(const char *dir) {
        /* A deep tree holds a descriptor per level. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return say_error("cannot open %s: %m", dir);
        StrBuf why = STRBUF_INIT;
        int r = convert_dir(fd, dir, &why);
        safe_close(fd);
        if (r < 0) {
                say_error("%s", strbuf_str(&why) ? strbuf_str(&why) : strerror(-r));
                strbuf_done(&why);
                return 1;
        }
        strbuf_done(&why);
        return say_ok();
}

int layer_helper_main(int argc, char **argv) {
        if (argc == 5 && streq(argv[0], "mount"))
                return helper_mount(argv + 1);
        if (argc == 2 && streq(argv[0], "unmount"))
                return helper_unmount(argv[1]);
        if (argc == 2 && streq(argv[0], "convert"))
                return helper_convert(argv[1]);
        return say_error("usage: lazaret __layer mount LOWER UPPER WORK MERGED | unmount MERGED | convert DIR");
}

/* ---- the coordinator's side ---------------------------------------------- */

int layer_helper_run(const LaunchSpec *s, const char *const *args, char **ret_error) {
        const char *argv[8];
        size_t k = 0;
        argv[k++] = "lazaret";
        argv[k++] = "__layer";
        for (; *args && k < ELEMENTSOF(argv) - 1; args++)
                argv[k++] = *args;
        argv[k] = NULL;
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        pid_t pid;
        /* /proc/self/exe: this binary, whichever mount namespace the child
         * is in by then. */
        int r = podman_ns_spawn_out(s, "/proc/self/exe", (char *const *) argv, p[1], &pid);
        safe_close(p[1]);
        if (r < 0) {
                safe_close(p[0]);
                if (ret_error && asprintf(ret_error, "cannot start the layer helper: %s", strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        char out[1024];
        size_t len = 0;
        for (;;) {
                ssize_t n = read(p[0], out + len, sizeof(out) - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t) n;
                if (len == sizeof(out) - 1)
                        break;
        }
        safe_close(p[0]);
        out[len] = '\0';
        out[strcspn(out, "\n")] = '\0';
        int st = spawn_wait(pid);
        if (st == 0 && streq(out, "ok"))
                return 0;
        if (ret_error && !(*ret_error = strdup(*out ? out : "the layer helper failed")))
                return -ENOMEM;
        return -EIO;
}

int layer_mount_id(pid_t pid, const char *mountpoint, int *ret_id) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/mountinfo", (int) pid);
        _cleanup_free_ char *text = NULL;
        int r = read_file_capped(p, 16u * 1024u * 1024u, &text, NULL);
        if (r < 0)
                return r;
        int found = -ENOENT;
        for (char *line = text; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                int id = 0;
                char mp[PATH_MAX + 1];
                /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - overlay ..."; the
                 * last one on the path is the one on top. */
                if (sscanf(line, "%d %*d %*s %*s %4096s", &id, mp) == 2 && streq(mp, mountpoint) &&
                    strstr(line, " - overlay ")) {
                        *ret_id = id;
                        found = 0;
                }
                line = nl ? nl + 1 : NULL;
        }
        return found;
}
