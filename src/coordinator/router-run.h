/* SPDX-License-Identifier: MIT */
#pragma once

/* Starting and stopping the git router (lazaret-gitrouter) for a sandbox.
 * Rootless, the router must mount inside Podman's user and mount namespace
 * (decision 5): a FUSE mount made on the host is invisible to the
 * container. We join the namespaces of Podman's pause process directly (not
 * through `podman unshare`), so the router is our own child: its pid is
 * known, it is signalled and reaped like any other participant. */

#include <stdbool.h>
#include <sys/types.h>

#include "fuse-mount.h"
#include "launch.h"
#include "podman.h"
#include "store.h"

typedef struct RouterRun {
        pid_t pid;
        ProcessIdentity ident;
        char *mountpoint;
        char *isolated;
        int mount_id; /* from the router's mountinfo once ready */
} RouterRun;

/* Start the router on <domain>/git-mnt with the isolated hooks root
 * <domain>/git-isolated: in branch mode for spec's git_dir (worktree is the
 * agent worktree's name), in direct mode for the whole working tree with
 * spec's protected and masked patterns (the workspace router; worktree
 * NULL). events_fd (or -1) is the write end of a pipe for its refusals
 * (--events-fd). Waits (5 s at most) until the FUSE mount is there. On failure
 * returns -errno with *ret_error (caller frees). */
int router_start(const LaunchSpec *s, const char *worktree, int events_fd, RouterRun *ret, char **ret_error);

/* Stop it: SIGTERM (it unmounts itself), wait, and if the mount survived a
 * crash, detach it. Safe to call for a router that already died. */
void router_stop(const LaunchSpec *s, RouterRun *r);

void router_run_done(RouterRun *r);
