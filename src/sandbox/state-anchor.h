/* SPDX-License-Identifier: MIT */
#pragma once

/* The State Anchor (spec §4.3.2 - §4.3.4, decision 5): for each of the
 * profile's persistent_dirs, a fuse-overlayfs mount inside Podman's rootless
 * user and mount namespace with the image's copy of that directory as
 * lowerdir (from `podman image mount`) and <name>_changes/, <name>_work/ and
 * <name>_merged/ under the Domain Root, which the sandbox gets over the
 * directory. The daemons are our children, signalled and reaped like the
 * git router. */

#include <stdbool.h>
#include <sys/types.h>

#include "launch.h"
#include "participant.h"
#include "store.h"

typedef struct AnchorLayer {
        char *dir; /* in the sandbox: "/usr" */
        char *name; /* persist_dir_name(): "usr" */
        /* The layer's own file system: <name>_layer.img (ext4, disk_limit
         * MiB, sparse) mounted by fuse2fs on <name>_layer; the overlay's
         * upper and work directories are changes/ and work/ in it. */
        char *image, *fs_mnt;
        char *changes, *work; /* in the layer's file system */
        char *merged; /* under the Domain Root */
        char *legacy_changes, *legacy_work; /* <name>_changes, _work: before the image */
        char *lower; /* as Podman's namespace sees it */
        pid_t pid;
        ProcessIdentity ident;
        int mount_id;
        pid_t fs_pid;
        ProcessIdentity fs_ident;
        int fs_mount_id;
        uint64_t fs_size_mib; /* what the image holds, once it is mounted */
        bool discard_image; /* made for a move that failed: removed on failure */
        Part participant;
} AnchorLayer;

/* The image mount all layers share, and the layers. */
typedef struct StateAnchor {
        char *image_id;
        char *image_mount; /* NULL until mounted */
        Part p_lower; /* the PreparedLower participant */
        AnchorLayer *layers;
        size_t n_layers;
} StateAnchor;

/* Fill the layers' names and paths from s->persistent_dirs (nothing is
 * made yet). */
int anchor_init(const LaunchSpec *s, StateAnchor *ret);

/* The image's id (`podman image inspect`). On failure -errno with
 * *ret_error (caller frees). */
int anchor_resolve_image(const LaunchSpec *s, StateAnchor *a, char **ret_error);
/* A lease on the image's mount in the Storage Catalog (s->catalog_dir) for
 * this Domain and generation: the first lease makes it (`podman image mount
 * ID`, through `podman unshare` rootless), later ones share it; sets
 * a->image_mount. */
int anchor_lease_image(const LaunchSpec *s, StateAnchor *a, uint64_t generation, char **ret_error);
/* Give the lease back (idempotent); the last one unmounts the image. */
int anchor_release_image(const LaunchSpec *s, const char *image_id, uint64_t generation);

/* Make (mke2fs) or check (e2fsck -p) the layer's image and bring it to
 * disk_limit MiB (resize2fs; a shrink below what it holds is refused,
 * naming the fix), mount it with fuse2fs in Podman's namespace, move the
 * changes of a layer from before the images into it, drop Podman's
 * runtime files from /etc's changes (resolv.conf, hosts, hostname:
 * Podman's copies win), start fuse-overlayfs in Podman's namespace and
 * wait (5 s at most) for each mount. The image's copy of the directory is
 * the lowerdir; an image without one gets an empty lowerdir. A full layer
 * makes writes fail with ENOSPC inside. */
int anchor_layer_start(const LaunchSpec *s, const StateAnchor *a, AnchorLayer *l, char **ret_error);
/* SIGTERM the overlay (it unmounts), then the layer's fuse2fs (it writes
 * back and unmounts), SIGKILL after 5 s, detach leftover mounts. Safe for
 * daemons that already died. */
void anchor_layer_stop(const LaunchSpec *s, AnchorLayer *l);

/* What a dead coordinator's layer left (from its StateAnchor record):
 * the overlay daemon killed and its mount detached, then the layer's
 * fuse2fs asked to write back (SIGTERM, SIGKILL after 5 s) and its mount
 * detached. The next start checks the image (e2fsck -p). */
void anchor_layer_recover(const LaunchSpec *s, const ProcessIdentity *overlay, const char *merged,
                          const ProcessIdentity *fs, const char *fs_mnt);

/* Remember which image a layer was last used with: <name>_image in the
 * Domain Root, {"dir", "image", "image_id", "previous_image_id",
 * "updated"}; previous_image_id is set when the image changed underneath
 * the layer (spec §4.3.4). Returns 1 when it changed, 0 when not. */
int anchor_record_image(const LaunchSpec *s, const StateAnchor *a, const AnchorLayer *l);

void anchor_done(StateAnchor *a);
