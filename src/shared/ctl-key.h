/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* The key of a local control socket (the coordinator's, `lazaret up`'s
 * group socket): what a client shows to be the person's lazaret CLI rather
 * than a process that merely runs as the person (issue 41).
 *
 * The server makes a fresh key from getrandom() before it listens and
 * writes it beside its socket, in the private runtime directory (0600, in a
 * 0700 directory); a client reads it there and sends it as the first thing
 * on the connection (the control protocol's Hello, the group's 'k' frame),
 * and the server compares it in constant time before it reads anything
 * else. It holds against a process of the same uid that cannot read the
 * runtime directory: a sandbox (nothing it mounts may reach that
 * directory), the native backend's agent and host commands run under
 * Landlock. It does not hold against an unconfined process of the same
 * uid, which can read the file (or the CLI's memory): that process is the
 * person. */

#define CTL_KEY_BYTES 32u
#define CTL_KEY_TEXT  (2u * CTL_KEY_BYTES) /* lowercase hex, as the file holds it and the wire carries it */

/* The key file of the socket at socket_path: a trailing ".sock" replaced by
 * ".key", else ".key" appended. Allocated; NULL when out of memory. */
char *ctl_key_path(const char *socket_path);

/* Make a new key and write it to path (temporary file and rename; mode
 * 0600). ret (CTL_KEY_TEXT + 1 bytes) gets its text. Returns 0 or -errno. */
int ctl_key_create(const char *path, char *ret);

/* Read the key at path into ret (CTL_KEY_TEXT + 1 bytes). The file must be
 * a regular file (no symbolic link) of ours that no one else may read or
 * write, holding exactly a key's text. Returns 0, -ENOENT (no server made
 * one), -EACCES (we may not read it), -EPERM (not ours, or open to others),
 * -EBADMSG (not a key), or another -errno. */
int ctl_key_read(const char *path, char *ret);

/* Is given (may be NULL) the key? In constant time for a given of the
 * key's length. */
bool ctl_key_equal(const char *key, const char *given);
