/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* True if any '/'-separated segment of path is exactly "..". */
bool path_has_dotdot(const char *path);

static inline bool path_is_absolute(const char *p) {
        return p && p[0] == '/';
}

/* Join a and b with exactly one '/' between them; caller frees. NULL on OOM. */
char *path_join(const char *a, const char *b);

/* If path is root itself or lies below it (whole segments: "/a/bc" is not
 * below "/a/b"), the part after root without its leading '/': "" for root
 * itself, a pointer into path. NULL otherwise. Both are canonical. */
const char *path_under(const char *path, const char *root);

/* Find the repository a directory belongs to without running git: walk up
 * from the absolute, canonical directory dir (itself first, "/" last) to the
 * nearest directory holding an entry named ".git", checked with lstat(2) so
 * a ".git" symlink is not followed. Returns 1 with *ret_top (that directory,
 * caller frees) and *ret_is_dir (whether ".git" is a real directory: false
 * for the ".git" file of a linked worktree or submodule, or a symlink); 0
 * when no ancestor has one (outputs untouched); -EINVAL for a relative dir;
 * -errno when an lstat fails other than with ENOENT; -ENOMEM. */
int path_find_git_top(const char *dir, char **ret_top, bool *ret_is_dir);

/* True if s is a relative path fit to name a directory below another one:
 * 1..max bytes, segments separated by single '/', none empty, "." or "..",
 * no leading or trailing '/', and no control character (C0, DEL, or C1 as
 * UTF-8: 0xC2 0x80..0x9F). */
bool path_relative_safe(const char *s, size_t max);

/* Resolve every symlink and "." / ".." of an existing path to an absolute
 * canonical path (realpath(3)); caller frees. Returns 0 or -errno. */
int path_canonicalize(const char *path, char **ret);

/* Resolve the absolute path one name at a time as the kernel would, every
 * symbolic link followed, but none that lies in one of the n_roots
 * directories (canonical; a link in a root itself or below it): that is a
 * name whoever writes the root may have made, and it is not followed.
 * Returns 0 with *ret_canonical; 1 with *ret_link (the link's path, the
 * directories up to it canonical) and *ret_root (its root's index), when
 * such a link is met; -ENOENT when a name is missing, -ELOOP past 40 links,
 * -ENAMETOOLONG, -ENOMEM, or another lstat/readlink -errno. Names, not
 * descriptors: a change after it returns is the caller's to catch (by the
 * identity of what it then opens). */
int path_resolve_no_links_in(const char *path, char *const *roots, size_t n_roots, char **ret_canonical,
                             char **ret_link, size_t *ret_root);
