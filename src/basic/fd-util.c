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
