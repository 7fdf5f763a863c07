/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Read a whole regular file, refusing anything larger than max_size bytes.
 * Opens with O_CLOEXEC|O_NOCTTY and checks the type with fstat, so FIFOs and
 * devices are refused (-EINVAL) instead of blocking. The result is
 * NUL-terminated (ret_size excludes the NUL); the caller frees it.
 * Returns 0, -EFBIG when larger than max_size, or another -errno. */
int read_file_capped(const char *path, size_t max_size, char **ret_data, size_t *ret_size);

/* The same for an already open descriptor (read from its current offset). */
int read_fd_capped(int fd, size_t max_size, char **ret_data, size_t *ret_size);

/* Write data to path atomically: a temporary file in the same directory,
 * fsync, then rename. mode applies to the new file. If exclusive, fail with
 * -EEXIST when path already exists (checked with link-free
 * renameat2(RENAME_NOREPLACE)). */
int write_file_atomic(const char *path, const char *data, size_t size, unsigned mode, int exclusive);

/* Its first half: data in a new temporary file beside path (path.tmp.XXXXXX,
 * mode, fsynced), named in *ret_tmp for the caller to rename or unlink.
 * Nothing is left on failure. */
int write_file_temp(const char *path, const char *data, size_t size, unsigned mode, char **ret_tmp);
