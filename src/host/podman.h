/* SPDX-License-Identifier: MIT */
#pragma once

/* Podman as Lazaret uses it outside a sandbox's own start: its error lines,
 * a container removed by name, and its rootless namespaces (the pause
 * process that holds them, and programs started in them with spawn()). */

#include <sys/types.h>

#include "exec-util.h"
#include "launch.h"
#include "spawn-util.h"

/* Podman's last error line of a failed run, for one-line messages (caller
 * frees; NULL on OOM). */
char *podman_error(const ExecResult *r);

/* podman rm --force --time=0 --ignore NAME: 0 when it is gone (or was
 * never there), -EIO with *ret_error otherwise. */
int container_remove(const LaunchSpec *s, const char *name, char **ret_error);

/* Podman's rootless pause process (holder of its user and mount
 * namespaces), started with `podman unshare true` when missing. The _find
 * form only looks (-ESRCH when there is none). */
int podman_pause_pid_find(pid_t *ret);
int podman_pause_pid(const LaunchSpec *s, pid_t *ret);

/* Open namespace ns ("user", "mnt") of Podman's pause process: rootless
 * only; rootful there is none to join (*ret = -EBADF, 0). */
int podman_ns_fd(const LaunchSpec *s, const char *ns, int *ret);

/* Start path with argv (rootless: in Podman's user and mount namespaces,
 * as their root); stdin is /dev/null, stdout and stderr are ours, nothing
 * else is kept. */
int podman_ns_spawn(const LaunchSpec *s, const char *path, char *const argv[], pid_t *ret);
/* The same with stdout on out_fd. */
int podman_ns_spawn_out(const LaunchSpec *s, const char *path, char *const argv[], int out_fd, pid_t *ret);
/* The same with the n descriptors fds kept (SpawnFd: ours, and its number
 * in the child). */
int podman_ns_spawn_fds(const LaunchSpec *s, const char *path, char *const argv[], const SpawnFd *fds, size_t n,
                        pid_t *ret);
