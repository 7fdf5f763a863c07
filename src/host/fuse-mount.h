/* SPDX-License-Identifier: MIT */
#pragma once

/* FUSE mounts made by our daemons in Podman's namespace (decision 5): when
 * one is there, how one is detached, and how a daemon is stopped. */

#include <sys/types.h>

#include "launch.h"

/* The mount id of the FUSE mount on mountpoint as process pid's mount
 * namespace sees it, or -ENOENT while there is none. */
int fuse_mount_id(pid_t pid, const char *mountpoint, int *ret_id);

/* Detach a FUSE mount in Podman's namespace (fusermount3 -u -z). */
void fuse_mount_detach(const LaunchSpec *s, const char *mountpoint);

/* SIGTERM a FUSE daemon we started (it unmounts itself), SIGKILL after
 * 5 s, reap it, and detach a mount it left behind. *pid becomes 0. */
void fuse_daemon_stop(const LaunchSpec *s, pid_t *pid, const char *mountpoint);
