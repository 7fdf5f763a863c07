/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* True if any '/'-separated segment of path is exactly "..". */
bool path_has_dotdot(const char *path);

static inline bool path_is_absolute(const char *p) {
        return p && p[0] == '/';
}

/* Join a and b with exactly one '/' between them; caller frees. NULL on OOM. */
char *path_join(const char *a, const char *b);

/* Resolve every symlink and "." / ".." of an existing path to an absolute
 * canonical path (realpath(3)); caller frees. Returns 0 or -errno. */
int path_canonicalize(const char *path, char **ret);
