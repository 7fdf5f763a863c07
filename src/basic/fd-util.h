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

/* A directory pinned by what it is, not by its name (the workspace from the
 * leader's checks to the router's and the sandbox's binds): a process that
 * may rename entries of a parent directory (another sandbox whose
 * workspace holds it) could otherwise swap it for a symbolic link between
 * one opener and the next. "DEV:INO" of fd's file in ret (at least
 * FD_IDENTITY_MAX bytes); -errno. */
#define FD_IDENTITY_MAX 48
int fd_identity(int fd, char *ret);

/* Open path, a canonical absolute path, as an O_PATH directory with no
 * symbolic link anywhere in it (openat2's RESOLVE_NO_SYMLINKS): a link
 * found there is -ELOOP, which for a canonical path means it was replaced
 * since it was resolved. With expect_id (from fd_identity), a directory
 * that is not that one is -ESTALE. The descriptor in *ret_fd (may be NULL:
 * checked and closed), its identity in ret_id (may be NULL). */
int open_pinned_dir(const char *path, const char *expect_id, int *ret_fd, char *ret_id);
/* The same for a file of any type (a volume may be a file). */
int open_pinned(const char *path, const char *expect_id, int *ret_fd, char *ret_id);
/* The exit status of a helper given a pinned directory (lazaret-gitrouter
 * --expect-id) that found another one there. */
#define EXIT_NOT_PINNED 3

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
