/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <sys/mman.h>
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
