/* SPDX-License-Identifier: MIT */
/* The Domain Root's file system, checked before a launch (domain-root.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "domain-root.h"
#include "fd-util.h"
#include "path-util.h"
#include "string-util.h"

static const char *fs_name(unsigned long type) {
        switch (type) {
        case 0xEF53:
                return "ext4";
        case 0x58465342:
                return "xfs";
        case 0x9123683E:
                return "btrfs";
        case 0x01021994:
                return "tmpfs";
        case 0x4d44:
                return "vfat";
        case 0x2011BAB0:
                return "exfat";
        case 0x7366746e:
                return "ntfs3";
        case 0x5346544e:
                return "ntfs";
        case 0x6969:
                return "nfs";
        case 0x65735546:
                return "fuse";
        case 0x794c7630:
                return "overlay";
        case 0x2fc12fc1:
                return "zfs";
        case 0xF2F52010:
                return "f2fs";
        case 0x858458f6:
                return "ramfs";
        case 0x01021997:
                return "9p";
        case 0x9fa0:
                return "proc";
        case 0x73717368:
                return "squashfs";
        case 0x9660:
                return "iso9660";
        default:
                return NULL;
        }
}

int domain_root_check(const char *domain_dir, char **ret_error) {
        /* Before the first start the Domain Root does not exist yet: probe
         * the nearest directory above it that does (it will be made there). */
        _cleanup_free_ char *at = strdup(domain_dir);
        if (!at)
                return -ENOMEM;
        struct stat st0;
        while (lstat(at, &st0) < 0 && errno == ENOENT) {
                char *slash = strrchr(at, '/');
                if (!slash || slash == at)
                        return -ENOENT;
                *slash = '\0';
        }
        struct statfs sf;
        if (statfs(at, &sf) < 0)
                return negative_errno();
        const char *name = fs_name((unsigned long) sf.f_type);
        char type[32];
        if (!name) {
                snprintf(type, sizeof(type), "0x%lx", (unsigned long) sf.f_type);
                name = type;
        }
        /* What the kernel's overlay does in an upper directory: make
         * directories, files and symlinks, rename, keep ownership and
         * modes, mark a directory opaque with a user extended attribute
         * (userxattr, issue 44). */
        char leaf[64];
        snprintf(leaf, sizeof(leaf), ".lazaret-upper-probe-%d", (int) getpid());
        _cleanup_free_ char *probe = path_join(at, leaf);
        _cleanup_free_ char *f = probe ? path_join(probe, "f") : NULL, *g = probe ? path_join(probe, "g") : NULL,
                            *l = probe ? path_join(probe, "l") : NULL;
        if (!probe || !f || !g || !l)
                return -ENOMEM;
        (void) unlink(f);
        (void) unlink(g);
        (void) unlink(l);
        (void) rmdir(probe);
        const char *step = "make a directory";
        int r = mkdir(probe, 0700) < 0 ? negative_errno() : 0;
        if (r >= 0) {
                step = "write a file";
                _cleanup_close_ int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
                r = fd < 0 ? negative_errno() : 0;
                struct stat st;
                if (r >= 0) {
                        step = "keep ownership and modes";
                        if (fchown(fd, getuid(), getgid()) < 0 || fchmod(fd, 0751) < 0)
                                r = negative_errno();
                        else if (fstat(fd, &st) < 0)
                                r = negative_errno();
                        else if ((st.st_mode & 07777) != 0751)
                                r = -EPERM;
                }
        }
        if (r >= 0) {
                step = "make a symlink";
                r = symlink("f", l) < 0 ? negative_errno() : 0;
        }
        if (r >= 0) {
                step = "rename a file";
                r = rename(f, g) < 0 ? negative_errno() : 0;
        }
        if (r >= 0) {
                step = "keep a user extended attribute";
                r = setxattr(probe, "user.lazaret.probe", "y", 1, 0) < 0 ? negative_errno() : 0;
        }
        (void) unlink(f);
        (void) unlink(g);
        (void) unlink(l);
        (void) rmdir(probe);
        if (r < 0 && streq(step, "make a directory")) {
                /* Not the file system's fault: we may not write there. */
                if (asprintf(ret_error, "cannot make the Domain Root %s: %s cannot be written (%s)", domain_dir, at,
                             strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (r < 0) {
                if (asprintf(ret_error,
                             "the Domain Root %s is on a %s file system, which cannot hold the overlay layers of "
                             "persistent_dirs (it cannot %s: %s); set [storage] data_root to a directory on ext4, "
                             "xfs, btrfs or tmpfs",
                             domain_dir, name, step, strerror(-r)) < 0)
                        *ret_error = NULL;
                return -EOPNOTSUPP;
        }
        if (strpbrk(domain_dir, ",:\\")) {
                if (asprintf(ret_error,
                             "the Domain Root %s contains ',', ':' or '\\', which an overlay mount cannot take in its "
                             "options; set [storage] data_root to a path without them",
                             domain_dir) < 0)
                        *ret_error = NULL;
                return -EINVAL;
        }
        return 0;
}
