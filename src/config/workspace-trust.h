/* SPDX-License-Identifier: MIT */
#pragma once

/* Trusted workspace files (lazaret trust): which workspace lazaret.toml
 * files the person has read and allowed to widen the sandbox, each by its
 * canonical path and the SHA-256 of its exact bytes. Any change to a file
 * voids its trust; a copy elsewhere has another path and is not trusted.
 *
 * The records live in the person's own data directory, never in a
 * workspace: $XDG_DATA_HOME/lazaret/trusted-workspaces (default
 * ~/.local/share/lazaret/), one line per file:
 *
 *     <sha256 hex> <seconds since the epoch> <absolute path>
 *
 * Paths with control characters are never recorded. The file is replaced
 * atomically under an exclusive lock (trusted-workspaces.lock beside it). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

#define WSTRUST_SHA256_HEX_LEN 64
#define WSTRUST_FILE_MAX       (1024u * 1024u) /* bytes of the workspace file itself */
#define WSTRUST_RECORDS_MAX    4096u

typedef struct WsTrustRecord {
        char *path;
        char sha256[WSTRUST_SHA256_HEX_LEN + 1];
        int64_t when;
} WsTrustRecord;

typedef struct WsTrustRecords {
        WsTrustRecord *items;
        size_t n;
} WsTrustRecords;

void wstrust_records_done(WsTrustRecords *r);

/* The store's path: $XDG_DATA_HOME (absolute) or <home>/.local/share, then
 * lazaret/trusted-workspaces. Caller frees. */
int wstrust_store_path(const char *home, char **ret);

/* The same for manifests (lazaret up; manifest.h): lazaret/trusted-manifests,
 * records of the same form. */
int wstrust_manifest_store_path(const char *home, char **ret);

/* Another of the person's records beside them: lazaret/<name>. */
int wstrust_user_record_path(const char *home, const char *name, char **ret);

/* Make every missing directory on the way to path's own, 0700. */
int wstrust_mkdir_parents(const char *path);

/* The lock of one of these records (<record>.lock, made 0600 with its
 * directories), held exclusively on *ret_fd until it is closed. */
int wstrust_lock(const char *record, int *ret_fd);

/* Read every record. A missing store is no records. Returns -EBADMSG when
 * a line is not a record (*ret_line says which), or another -errno. */
int wstrust_load(const char *store, WsTrustRecords *ret, unsigned *ret_line);

/* The record for path, or NULL. Points into r. */
const WsTrustRecord *wstrust_find(const WsTrustRecords *r, const char *path);

/* Record path with sha256 (replacing any record of path), or remove it
 * (sha256 NULL; -ENOENT when there was none). Creates the directory 0700.
 * -EINVAL for a path that is not absolute or has control characters. */
int wstrust_set(const char *store, const char *path, const char *sha256, int64_t when);

/* SHA-256 of data as lowercase hex; ret holds 65 bytes. */
int wstrust_sha256_hex(const void *data, size_t size, char ret[WSTRUST_SHA256_HEX_LEN + 1]);

/* Read <dir>/lazaret.toml the way a workspace file must be read: opened
 * from the directory's descriptor without following a symlink, without
 * blocking on a FIFO, and refused unless it is a regular file owned by
 * uid, at most WSTRUST_FILE_MAX bytes. Returns 0 with the bytes
 * (NUL-terminated), -ENOENT when there is none, or -errno with a static
 * reason in *ret_why (-ELOOP a symlink, -EISDIR a directory, -EINVAL not a
 * regular file, -EPERM owned by someone else, -EFBIG too large). */
int wstrust_read_workspace_file(const char *dir, uid_t uid, char **ret_data, size_t *ret_size, uid_t *ret_owner,
                                const char **ret_why);
