/* SPDX-License-Identifier: MIT */
#pragma once

/* The workspace router's policy (issue 13): what a direct-mode sandbox may
 * do to each path of the host's working tree it is given. Pure: no I/O.
 *
 *   the top-level .git (a repository's)  the git policy (git-policy.h), on
 *                                        the path below .git
 *   masked (path-pattern.h)              read as empty; nothing else
 *   protected (path-pattern.h)           read; nothing else: host-run files
 *                                        can be neither changed nor created,
 *                                        whether or not they exist
 *   everything else                      everything
 *
 * A masked name is served as an empty file or directory; what lies beneath
 * a masked directory does not exist. Refusals use the git policy's errno
 * rule: EROFS to change an existing name, EACCES to bring a new one into
 * existence, EPERM for a link. */

#include <stdbool.h>
#include <stddef.h>

#include "git-policy.h"

typedef struct WorkspacePolicy {
        /* The workspace's own repository: its top-level .git is served
         * under this policy. NULL: no repository, and a .git (at any depth)
         * is only a protected name. */
        const GitPolicy *git;
        const char *const *protect; /* path patterns, checked valid */
        size_t n_protect;
        const char *const *mask;
        size_t n_mask;
} WorkspacePolicy;

typedef enum WsDecision {
        WS_DECISION_ALLOW, /* pass through to the host's file */
        WS_DECISION_ISOLATED, /* .git's hooks: the isolated root, at the path below .git */
        WS_DECISION_MASKED, /* reads see an empty file or directory */
        WS_DECISION_HIDDEN, /* beneath a masked directory: does not exist (ENOENT) */
        WS_DECISION_DENY, /* refused with *ret_errno */
        _WS_DECISION_MAX,
        _WS_DECISION_INVALID = -22 /* -EINVAL */,
} WsDecision;

/* rel is relative to the workspace ("" is its root: readable, nothing
 * else), as git_policy_normalize makes it. On DENY stores the positive
 * errno in *ret_errno (may be NULL). *ret_git_rel (may be NULL) is set to
 * the path below .git for decisions the git policy made, else to NULL. */
WsDecision workspace_policy_check(const WorkspacePolicy *p, const char *rel, GitOp op, int *ret_errno,
                                  const char **ret_git_rel);

/* True when rel, or anything beneath it, would be refused more than a
 * plain path (protected, masked or the repository's .git): used to decide
 * whether a directory may move, for each name found beneath it. */
bool workspace_policy_guarded(const WorkspacePolicy *p, const char *rel);

/* True when rel is the repository's top-level .git or lies in it (where
 * the git policy decides). */
bool workspace_policy_in_git(const WorkspacePolicy *p, const char *rel);

const char *ws_decision_to_string(WsDecision d);
