/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd-util.h"

int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}

int loop_write(int fd, const void *buf, size_t len) {
        const char *p = buf;
        while (len > 0) {
                ssize_t k = write(fd, p, len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                p += k;
                len -= (size_t) k;
        }
        return 0;
}

int memfd_from(const char *name, const void *data, size_t len, int *ret_fd) {
        int fd = memfd_create(name, MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = loop_write(fd, data, len);
        if (r >= 0 && lseek(fd, 0, SEEK_SET) < 0)
                r = -errno;
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

int fd_identity(int fd, char *ret) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        snprintf(ret, FD_IDENTITY_MAX, "%" PRIu64 ":%" PRIu64, (uint64_t) st.st_dev, (uint64_t) st.st_ino);
        return 0;
}

static int open_pinned_flags(const char *path, int flags, const char *expect_id, int *ret_fd, char *ret_id) {
        if (!path || path[0] != '/')
                return -EINVAL;
        struct open_how how = {
                .flags = (uint64_t) (O_PATH | O_CLOEXEC | flags),
                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        long k = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
        if (k < 0)
                return -errno;
        int fd = (int) k;
        char id[FD_IDENTITY_MAX];
        int r = fd_identity(fd, id);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        if (expect_id && strcmp(expect_id, id) != 0) {
                safe_close(fd);
                return -ESTALE;
        }
        if (ret_id)
                memcpy(ret_id, id, FD_IDENTITY_MAX);
        if (ret_fd)
                *ret_fd = fd;
        else
                safe_close(fd);
        return 0;
}

int open_pinned_dir(const char *path, const char *expect_id, int *ret_fd, char *ret_id) {
        return open_pinned_flags(path, O_DIRECTORY, expect_id, ret_fd, ret_id);
}

int open_pinned(const char *path, const char *expect_id, int *ret_fd, char *ret_id) {
        return open_pinned_flags(path, 0, expect_id, ret_fd, ret_id);
}
