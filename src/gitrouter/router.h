/* SPDX-License-Identifier: MIT */
#pragma once

/* The git router's file system (issue 4, decision 3): libfuse3 high-level
 * operations that serve the host's .git under git-policy.h. Every request is
 * resolved beneath one of two directory fds with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS): the daemon never follows a
 * symlink (symlinks are served as symlinks) and never leaves its roots. */

#define FUSE_USE_VERSION 35
#include <fuse.h>

#include "git-policy.h"
#include "workspace-policy.h"

typedef struct Router {
        int host_fd; /* O_PATH|O_DIRECTORY: the host repository's .git, or the workspace */
        int iso_fd; /* O_PATH|O_DIRECTORY: the isolated root (hooks) */
        GitPolicy policy;
        /* Workspace mode (direct mode, issue 13): host_fd is the whole
         * working tree, served under ws (whose git points at policy when
         * the tree's .git is a repository). */
        bool workspace;
        WorkspacePolicy ws;
        /* Each refusal, one JSON line on this pipe (non-blocking; -1:
         * none) for the Domain's event record; lines that do not fit are
         * counted and the count rides on the next one. */
        int events_fd;
        uint64_t events_dropped;
        /* The library's configuration, as rt_init was given it: it reads
         * the entry and attribute timeouts from here for each reply, and
         * rt_getattr, which runs before every reply that carries them,
         * sets them for the path at hand (one thread, so no other request
         * sees them). A library that copied it instead would only keep
         * nothing: the timeouts rt_init set, 0. */
        struct fuse_config *cfg;
} Router;

/* How long the kernel may keep an entry or the attributes of a plain name
 * of the working tree (workspace mode): a change the host makes there is
 * seen inside at most this late. Guarded names (the repository's .git,
 * protected and masked names) and everything in branch mode get 0. */
#define ROUTER_TREE_TIMEOUT 1.0

/* Put a refusal of op on rel (relative to the served root) on the events
 * pipe. */
void router_refused(Router *r, const char *rel, GitOp op, int err);

/* The operation table; fuse_new's user_data must be a Router that outlives
 * the session. */
const struct fuse_operations *router_operations(void);
