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

/* Directories a host program runs from, known by what they hold rather than
 * by their own name (issue 40):
 *
 *   a git directory   HEAD with objects and refs, or HEAD with commondir
 *                     (git's is_git_directory: the names alone, of any file
 *                     type, since a symlink counts and a file's contents can
 *                     change later). Git takes one as a repository wherever
 *                     it is (safe.bareRepository defaults to "all"), and its
 *                     config names commands (core.fsmonitor).
 *   a Python venv     pyvenv.cfg: its bin/ and site-packages' .pth files run
 *                     when the person uses it on the host.
 *
 * Everything beneath such a directory is read-only. No name may be brought
 * into existence (created, made a directory, symlinked, linked or renamed
 * to) that would make a directory one, so the sandbox never makes one; the
 * router looks at the directory's names, this decides. */
typedef enum WsMarker {
        WS_MARKER_HEAD = 1u << 0,
        WS_MARKER_OBJECTS = 1u << 1,
        WS_MARKER_REFS = 1u << 2,
        WS_MARKER_COMMONDIR = 1u << 3,
        WS_MARKER_PYVENV = 1u << 4,
} WsMarker;

/* The marker names, NULL-terminated, name i standing for bit 1 << i. */
extern const char *const workspace_marker_names[];

/* The marker bit of a single file name, or 0 for any other name. */
unsigned workspace_marker_of(const char *name);

typedef enum WsMarked {
        WS_MARKED_NONE, /* a plain directory */
        WS_MARKED_GIT, /* a git directory */
        WS_MARKED_VENV, /* a Python virtual environment */
        _WS_MARKED_MAX,
        _WS_MARKED_INVALID = -22 /* -EINVAL */,
} WsMarked;

/* What a directory holding the markers present is. To ask whether a new
 * name may appear in a directory, ask about present | workspace_marker_of
 * (name): anything but WS_MARKED_NONE is refused. */
WsMarked workspace_markers_kind(unsigned present);

/* "git-directory", "venv" (the rule named on the record), NULL for
 * WS_MARKED_NONE and invalid values. */
const char *ws_marked_to_string(WsMarked k);
