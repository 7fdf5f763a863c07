/* SPDX-License-Identifier: MIT */
#pragma once

/* The kernel's overlayfs for a persistent directory (issue 44), mounted by
 * a helper, `lazaret __layer`, which the coordinator starts in Podman's
 * user and mount namespaces (decision 5; rootful: the host's), where the
 * mount stays after the helper ends:
 *
 *   lazaret __layer mount LOWER UPPER WORK MERGED
 *       overlay with userxattr (the format is the same rootless and
 *       rootful: whiteouts are 0:0 character devices, opaque directories
 *       carry user.overlay.opaque=y)
 *   lazaret __layer unmount MERGED
 *       detached (MNT_DETACH); not mounted is success
 *   lazaret __layer convert DIR
 *       a directory of changes fuse-overlayfs made (before issue 44) in
 *       the kernel's format: `.wh.NAME` files become whiteouts,
 *       `.wh..wh..opq` and fuse-overlayfs's opaque attributes become
 *       user.overlay.opaque; never follows a symbolic link
 *
 * It prints "ok" or one line saying what failed on stdout. */

#include "launch.h"

int layer_helper_main(int argc, char **argv);

/* Run `lazaret __layer ARGS...` (the running binary, /proc/self/exe) in
 * Podman's namespaces and wait. 0, or -errno with *ret_error (its line,
 * caller frees). */
int layer_helper_run(const LaunchSpec *s, const char *const *args, char **ret_error);

/* The mount id of the overlay on mountpoint as process pid's mount
 * namespace sees it, or -ENOENT. */
int layer_mount_id(pid_t pid, const char *mountpoint, int *ret_id);
