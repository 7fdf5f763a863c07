/* SPDX-License-Identifier: MIT */
#pragma once

/* What the Domain Store and the Storage Catalog share about LMDB. */

#include <lmdb.h>
#include <stdint.h>

#include "macro.h"

static inline void lmdb_txn_abortp(MDB_txn **t) {
        if (*t)
                mdb_txn_abort(*t);
}
/* Declare a cursor after its transaction, so it is closed first. Close it
 * explicitly (TAKE_PTR) before a commit: a commit frees write cursors. */
static inline void lmdb_cursor_closep(MDB_cursor **c) {
        if (*c)
                mdb_cursor_close(*c);
}
#define _cleanup_txn_    _cleanup_(lmdb_txn_abortp)
#define _cleanup_cursor_ _cleanup_(lmdb_cursor_closep)

/* LMDB returns errno values (positive) or its own negative codes: -errno. */
int lmdb_errno(int r);

/* flock(LOCK_EX) on path (a regular file, made 0600 when missing), polling
 * for at most wait_usec: 0 and the fd, or -EBUSY. */
int lmdb_lock_acquire(const char *path, uint64_t wait_usec, int *ret_fd);

/* mkdir path 0700 unless it exists; it must be a directory. */
int lmdb_env_dir_prepare(const char *path);
