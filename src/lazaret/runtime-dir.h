/* SPDX-License-Identifier: MIT */
#pragma once

/* The private runtime directory (decision 2): $XDG_RUNTIME_DIR/lazaret, or
 * /tmp/lazaret-<uid> when XDG_RUNTIME_DIR is unset or unusable. Created 0700
 * and verified on every use: a real directory (not a symlink), owned by us,
 * no access for group or others. The spec's predictable names live inside:
 * lazaret_coord_<hash>.lock and lazaret_coord_<hash>.sock. */

typedef struct RuntimePaths {
        char *dir;
        char *lock; /* lazaret_coord_<hash>.lock */
        char *socket; /* lazaret_coord_<hash>.sock */
} RuntimePaths;

/* Returns 0, -EPERM when the directory exists but is not ours / not private
 * (*ret_why says what), or another -errno. */
int runtime_paths(const char *domain_hash, RuntimePaths *ret, const char **ret_why);
void runtime_paths_done(RuntimePaths *p);

/* Create dir (and missing parents) with mode 0700 if missing, then verify it
 * as above. */
int private_dir(const char *dir, const char **ret_why);
