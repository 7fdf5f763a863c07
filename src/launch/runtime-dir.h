/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* The private runtime directory (decision 2): $XDG_RUNTIME_DIR/lazaret, or
 * /tmp/lazaret-<uid> when XDG_RUNTIME_DIR is unset or unusable. Created 0700
 * and verified on every use: a real directory (not a symlink), owned by us,
 * no access for group or others, below directories that no other user can
 * change (issue 14). When /tmp/lazaret-<uid> belongs to another user (it was
 * made first, squatted), the runtime directory is
 * ${XDG_CACHE_HOME:-~/.cache}/lazaret/run instead, with a warning naming the
 * squatter and the fix. The spec's predictable names live inside:
 * lazaret_coord_<hash>.lock and lazaret_coord_<hash>.sock. */

typedef struct RuntimePaths {
        char *dir;
        char *lock; /* lazaret_coord_<hash>.lock */
        char *socket; /* lazaret_coord_<hash>.sock */
} RuntimePaths;

/* Returns 0, -EPERM when the directory exists but is not ours / not private
 * (*ret_why says what, naming the directory and the fix), or another
 * -errno. */
int runtime_paths(const char *domain_hash, RuntimePaths *ret, char **ret_why);
void runtime_paths_done(RuntimePaths *p);

/* Create dir (and missing parents) with mode 0700 if missing, then verify it
 * as above (but not its parents). */
int private_dir(const char *dir, const char **ret_why);

/* private_dir, and every directory above dir must be root's or ours and
 * writable by no one else unless sticky (/tmp), and no symbolic link on the
 * way may be another user's: otherwise its owner could swap dir for their
 * own after the checks. -EPERM with *ret_why (allocated) naming the
 * directory at fault, its owner and the fix: what names dir ("the runtime
 * directory"), fix is the way out besides removing it ("set
 * XDG_RUNTIME_DIR"). *ret_other_owner (may be NULL) is true when dir itself
 * exists and belongs to another user. */
int safe_private_dir(const char *dir, const char *what, const char *fix, char **ret_why, bool *ret_other_owner);
