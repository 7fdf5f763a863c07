/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdio.h>

#include "macro.h"

/* Close fd if valid; never retried on EINTR (Linux always releases the fd).
 * Returns -EBADF so callers can write fd = safe_close(fd). */
int safe_close(int fd);

/* Write all len bytes of buf to a blocking fd (retried on EINTR and short
 * writes). 0, or -errno (-EIO for a write of nothing). */
int loop_write(int fd, const void *buf, size_t len);

/* A memfd named name (close-on-exec) holding len bytes of data, at offset
 * 0: the descriptor in *ret_fd, or -errno. */
int memfd_from(const char *name, const void *data, size_t len, int *ret_fd);

static inline void closep(int *fd) {
        safe_close(*fd);
}

static inline FILE *safe_fclose(FILE *f) {
        if (f)
                fclose(f);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(FILE *, safe_fclose)

#define _cleanup_close_  _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(safe_fclosep)
#define _cleanup_free_   _cleanup_(freep)
