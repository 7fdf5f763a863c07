/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "path-pattern.h"
#include "workspace-policy.h"

static WsDecision deny(int e, int *ret_errno) {
        if (ret_errno)
                *ret_errno = e;
        return WS_DECISION_DENY;
}

/* The part of rel below the top-level ".git", or NULL when rel is not in
 * it ("" for .git itself). */
static const char *below_git(const char *rel) {
        if (strncmp(rel, ".git", 4) != 0)
                return NULL;
        if (rel[4] == '\0')
                return rel + 4;
        if (rel[4] == '/')
                return rel + 5;
        return NULL;
}

/* Is a proper ancestor of rel masked? */
static bool beneath_mask(const WorkspacePolicy *p, const char *rel) {
        char buf[4096];
        size_t len = strlen(rel);
        if (len >= sizeof buf)
                return true; /* cannot tell: fail closed */
        memcpy(buf, rel, len + 1);
        for (char *slash = strrchr(buf, '/'); slash; slash = strrchr(buf, '/')) {
                *slash = '\0';
                if (path_pattern_match_any(buf, p->mask, p->n_mask))
                        return true;
        }
        return false;
}

WsDecision workspace_policy_check(const WorkspacePolicy *p, const char *rel, GitOp op, int *ret_errno,
                                  const char **ret_git_rel) {
        if (ret_git_rel)
                *ret_git_rel = NULL;
        if (op < 0 || op >= _GIT_OP_MAX)
                return deny(EINVAL, ret_errno);
        if (*rel == '\0')
                return op == GIT_OP_READ ? WS_DECISION_ALLOW : deny(git_policy_refusal(op), ret_errno);

        const char *g = p->git ? below_git(rel) : NULL;
        if (g) {
                if (ret_git_rel)
                        *ret_git_rel = g;
                int e = 0;
                switch (git_policy_check(p->git, g, op, &e)) {
                case GIT_DECISION_ALLOW:
                        return WS_DECISION_ALLOW;
                case GIT_DECISION_ISOLATED:
                        return WS_DECISION_ISOLATED;
                case GIT_DECISION_DENY:
                        return deny(e, ret_errno);
                case _GIT_DECISION_MAX:
                case _GIT_DECISION_INVALID:
                        break;
                }
                return deny(EINVAL, ret_errno);
        }

        if (p->n_mask > 0 && path_pattern_match_any(rel, p->mask, p->n_mask)) {
                if (beneath_mask(p, rel))
                        return op == GIT_OP_READ ? WS_DECISION_HIDDEN : deny(ENOENT, ret_errno);
                return op == GIT_OP_READ ? WS_DECISION_MASKED : deny(git_policy_refusal(op), ret_errno);
        }
        if (path_pattern_match_any(rel, p->protect, p->n_protect))
                return op == GIT_OP_READ ? WS_DECISION_ALLOW : deny(git_policy_refusal(op), ret_errno);
        return WS_DECISION_ALLOW;
}

bool workspace_policy_guarded(const WorkspacePolicy *p, const char *rel) {
        if (p->git && below_git(rel))
                return true;
        return path_pattern_match_any(rel, p->mask, p->n_mask) || path_pattern_match_any(rel, p->protect, p->n_protect);
}

bool workspace_policy_in_git(const WorkspacePolicy *p, const char *rel) {
        return p->git && below_git(rel);
}

const char *ws_decision_to_string(WsDecision d) {
        switch (d) {
        case WS_DECISION_ALLOW:
                return "allow";
        case WS_DECISION_ISOLATED:
                return "isolated";
        case WS_DECISION_MASKED:
                return "masked";
        case WS_DECISION_HIDDEN:
                return "hidden";
        case WS_DECISION_DENY:
                return "deny";
        case _WS_DECISION_MAX:
        case _WS_DECISION_INVALID:
                break;
        }
        return NULL;
}

const char *const workspace_marker_names[] = { "HEAD", "objects", "refs", "commondir", "pyvenv.cfg", NULL };

unsigned workspace_marker_of(const char *name) {
        for (size_t i = 0; workspace_marker_names[i]; i++)
                if (strcmp(name, workspace_marker_names[i]) == 0)
                        return 1u << i;
        return 0;
}

static bool markers_git(unsigned m) {
        if (!(m & WS_MARKER_HEAD))
                return false;
        return (m & WS_MARKER_COMMONDIR) || ((m & WS_MARKER_OBJECTS) && (m & WS_MARKER_REFS));
}

WsMarked workspace_markers_kind(unsigned present) {
        if (markers_git(present))
                return WS_MARKED_GIT;
        if (present & WS_MARKER_PYVENV)
                return WS_MARKED_VENV;
        return WS_MARKED_NONE;
}

const char *ws_marked_to_string(WsMarked k) {
        switch (k) {
        case WS_MARKED_GIT:
                return "git-directory";
        case WS_MARKED_VENV:
                return "venv";
        case WS_MARKED_NONE:
        case _WS_MARKED_MAX:
        case _WS_MARKED_INVALID:
                break;
        }
        return NULL;
}
