/* SPDX-License-Identifier: MIT */
#include <errno.h>
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
