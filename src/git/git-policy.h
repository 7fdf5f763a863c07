/* SPDX-License-Identifier: MIT */
#pragma once

/* The git router's policy (issue 4, decision 3): for a path inside the
 * served `.git` and an operation, decide whether the request passes through
 * to the host's file, is served from the isolated root (hooks), or is
 * refused. Pure: no I/O, no allocation in git_policy_check. Fuzzed by
 * fuzz/fuzz-git-policy.c.
 *
 * Reads are always allowed (configuration always shows the host's current
 * file). Writes follow an allowlist:
 *
 *   objects/... except objects/info/...     create, mkdir, rmdir, setattr,
 *                                          rename-to (never replacing: see
 *                                          git_policy_rename_noreplace);
 *                                          an object file git reads (see
 *                                          git_policy_object_file) is never
 *                                          created, only renamed into place
 *                                          (the router checks its content
 *                                          first), and .rev, .bitmap,
 *                                          .mtimes and multi-pack-index*
 *                                          are refused;
 *                                          write, unlink, rename-from only
 *                                          for scratch names (tmp_*, *.lock,
 *                                          objects/incoming-*), so existing
 *                                          objects cannot be changed
 *   refs/heads/lazaret/...                 everything; refs/heads/lazaret
 *                                          itself: mkdir, rmdir
 *   logs/refs/heads/lazaret/...            everything; logs/refs/heads/lazaret:
 *                                          mkdir, rmdir; logs, logs/refs,
 *                                          logs/refs/heads: mkdir
 *   the agent worktree's private files    worktrees/<name>/ (branch mode) or
 *                                          the top level (direct mode):
 *                                          index, COMMIT_EDITMSG, ORIG_HEAD,
 *                                          AUTO_MERGE, MERGE_HEAD, MERGE_MSG,
 *                                          MERGE_MODE, logs/HEAD, each with
 *                                          its .lock; HEAD and HEAD.lock
 *                                          (direct mode: only with
 *                                          allow_main_head); sequencer/...;
 *                                          mkdir of logs and sequencer
 *
 * Isolated (served from the isolated root at the same relative path):
 * hooks and everything below it, and any `hooks` segment at depth >= 2 below
 * `modules/` (submodules' git dirs, also nested) and the same below
 * `worktrees/<any>/`.
 *
 * Everything else is read-only: config, config.worktree, config.lock,
 * commondir, gitdir, packed-refs(.lock), other branches, tags, info/...,
 * shallow, FETCH_HEAD, modules/... (apart from their hooks), other worktrees.
 *
 * Errno rule for refusals: an operation that changes an existing name or its
 * content (write, truncate, setattr, unlink, rmdir, rename-from) gets EROFS;
 * one that brings a new name into existence (create, mkdir, rename-to) gets
 * EACCES; symlink and hard link creation get EPERM. Invalid (not normalized)
 * paths get EINVAL.
 *
 * Invariant the daemon relies on: no read-only or isolated name lies below a
 * path whose RENAME_FROM or RENAME_TO is allowed, so moving a directory never
 * carries protected names in or out (tests/unit/test-git-policy.c). */

#include <stdbool.h>

typedef enum GitOp {
        GIT_OP_READ, /* read, stat, list, readlink, open read-only */
        GIT_OP_WRITE, /* open an existing file for writing, truncate, append */
        GIT_OP_CREATE, /* create a new file */
        GIT_OP_MKDIR,
        GIT_OP_UNLINK,
        GIT_OP_RMDIR,
        GIT_OP_RENAME_FROM,
        GIT_OP_RENAME_TO, /* the new name of a rename, existing or not */
        GIT_OP_SETATTR, /* chmod, utimens */
        GIT_OP_LINK, /* create a symlink or hard link at this path */
        _GIT_OP_MAX,
        _GIT_OP_INVALID = -22 /* -EINVAL */,
} GitOp;

typedef enum GitDecision {
        GIT_DECISION_ALLOW, /* pass through to the host's file */
        GIT_DECISION_ISOLATED, /* serve from the isolated root, same relative path */
        GIT_DECISION_DENY, /* refuse with the errno from *ret_errno */
        _GIT_DECISION_MAX,
        _GIT_DECISION_INVALID = -22 /* -EINVAL */,
} GitDecision;

typedef struct GitPolicy {
        /* Name of the agent's worktree (the `worktrees/<name>` entry), or NULL
         * for direct mode. A name that is not a single valid path segment
         * disables every worktree-private write. */
        const char *worktree;
        /* Direct mode only: allow HEAD and HEAD.lock at the top level. */
        bool allow_main_head;
} GitPolicy;

/* Check relpath against the policy. relpath is relative to the served .git,
 * as produced by git_policy_normalize ("" is the .git directory itself:
 * readable, nothing else). Returns the decision; on GIT_DECISION_DENY stores
 * the positive errno in *ret_errno (which may be NULL), otherwise leaves it
 * untouched. An op outside the enum is denied with EINVAL. */
GitDecision git_policy_check(const GitPolicy *p, const char *relpath, GitOp op, int *ret_errno);

/* The files of the object store that git reads as objects, by their path
 * below .git (issue 40). */
typedef enum GitObjectFile {
        GIT_OBJECT_FILE_NONE, /* anything else: scratch, flags (.keep, .promisor), elsewhere */
        GIT_OBJECT_FILE_LOOSE, /* objects/<2 hex>/<38 or 62 hex> */
        GIT_OBJECT_FILE_PACK, /* objects/pack/<stem>.pack */
        GIT_OBJECT_FILE_INDEX, /* objects/pack/<stem>.idx: makes the stem's pack count */
        GIT_OBJECT_FILE_AUX, /* objects/pack/ *.rev, *.bitmap, *.mtimes, multi-pack-index*: refused */
        _GIT_OBJECT_FILE_MAX,
        _GIT_OBJECT_FILE_INVALID = -22 /* -EINVAL */,
} GitObjectFile;

/* Which of those relpath (normalized, below .git) is; NONE for an invalid
 * path. */
GitObjectFile git_policy_object_file(const char *relpath);

/* True when a rename onto relpath must not replace an existing file (loose
 * objects and packs are immutable: a rename onto one is refused with EEXIST,
 * which git treats as "already there"). */
bool git_policy_rename_noreplace(const char *relpath);

/* Validate a request path and return a copy without the leading '/' that
 * FUSE paths carry (one leading '/' is accepted; "/" alone gives "").
 * Refuses empty segments ("a//b", trailing '/'), "." and "..", a path longer
 * than 4095 bytes or a segment longer than 255 bytes.
 * Returns 0 and *ret (caller frees), -EINVAL or -ENAMETOOLONG on a refused
 * path, -ENOMEM. */
int git_policy_normalize(const char *in, char **ret);

/* The errno a refused op gets (the rule above): EROFS, EACCES or EPERM;
 * EINVAL for a read or an op outside the enum. */
int git_policy_refusal(GitOp op);

const char *git_op_to_string(GitOp op);
const char *git_decision_to_string(GitDecision d);
