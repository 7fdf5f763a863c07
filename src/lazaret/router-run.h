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

#include "launch.h"
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
 * NULL). Waits (5 s at most) until the FUSE mount is there. On failure
 * returns -errno with *ret_error (caller frees). */
int router_start(const LaunchSpec *s, const char *worktree, RouterRun *ret, char **ret_error);

/* Stop it: SIGTERM (it unmounts itself), wait, and if the mount survived a
 * crash, detach it. Safe to call for a router that already died. */
void router_stop(const LaunchSpec *s, RouterRun *r);

void router_run_done(RouterRun *r);

/* fork + (rootless) join Podman's user and mount namespaces + exec path
 * with argv; stdin is /dev/null, stdout and stderr are inherited. */
int podman_ns_spawn(const LaunchSpec *s, const char *path, char *const argv[], pid_t *ret);
/* The same with stdout on out_fd. */
int podman_ns_spawn_out(const LaunchSpec *s, const char *path, char *const argv[], int out_fd, pid_t *ret);

/* The mount id of the FUSE mount on mountpoint as process pid's mount
 * namespace sees it, or -ENOENT while there is none. */
int fuse_mount_id(pid_t pid, const char *mountpoint, int *ret_id);

/* Detach a FUSE mount in Podman's namespace (fusermount3 -u -z). */
void fuse_mount_detach(const LaunchSpec *s, const char *mountpoint);

/* SIGTERM a FUSE daemon we started (it unmounts itself), SIGKILL after
 * 5 s, reap it, and detach a mount it left behind. *pid becomes 0. */
void fuse_daemon_stop(const LaunchSpec *s, pid_t *pid, const char *mountpoint);

/* Podman's rootless pause process (holder of its user and mount
 * namespaces), started with `podman unshare true` when missing. The _find
 * form only looks (-ESRCH when there is none). */
int podman_pause_pid_find(pid_t *ret);
int podman_pause_pid(const LaunchSpec *s, pid_t *ret);
