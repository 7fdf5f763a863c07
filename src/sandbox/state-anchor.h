/* SPDX-License-Identifier: MIT */
#pragma once

/* The State Anchor (spec §4.3.2 - §4.3.4, decision 5): for each of the
 * profile's persistent_dirs, the kernel's overlayfs mounted inside Podman's
 * rootless user and mount namespace (issue 44; layer-mount.h) with the
 * image's copy of that directory as lowerdir (from `podman image mount`),
 * <name>_layer/upper and <name>_layer/work under the Domain Root, on
 * <name>_merged, which the sandbox gets over the directory. No daemon:
 * the mount stays in Podman's namespace until it is unmounted. */

#include <stdbool.h>
#include <sys/types.h>

#include "launch.h"
#include "participant.h"
#include "store.h"

typedef struct AnchorLayer {
        char *dir; /* in the sandbox: "/usr" */
        char *name; /* persist_dir_name(): "usr" */
        /* <name>_layer: the overlay's upper and work directories, upper/
         * and work/ in it. */
        char *fs_mnt;
        char *changes, *work; /* <name>_layer/upper, <name>_layer/work */
        char *merged; /* under the Domain Root */
        /* Where older Lazarets kept the changes, moved into changes once:
         * <name>_layer.img (an ext4 image under fuse2fs and fuse-overlayfs,
         * before issue 44), <name>_changes and _work (before the image). */
        char *image, *legacy_changes, *legacy_work;
        char *lower; /* as Podman's namespace sees it */
        int mount_id; /* the overlay's, in Podman's mount namespace */
        uint64_t fs_size_mib; /* the most the changes may hold: disk_limit */
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

/* Move the changes an older Lazaret kept into <name>_layer/upper once (an
 * ext4 image: checked with e2fsck, mounted read-only by fuse2fs, copied
 * with `cp -a` in Podman's namespace; a <name>_changes directory: renamed;
 * then fuse-overlayfs's whiteouts and opaque marks turned into the
 * kernel's), drop Podman's runtime files from /etc's changes (resolv.conf,
 * hosts, hostname: Podman's copies win), and mount the kernel's overlay
 * in Podman's namespace. The image's copy of the directory is the
 * lowerdir; an image without one gets an empty lowerdir. disk_limit is
 * not this function's: the coordinator measures each layer's upper
 * directory and stops the sandbox when one holds more. */
int anchor_layer_start(const LaunchSpec *s, const StateAnchor *a, AnchorLayer *l, char **ret_error);
/* Unmount the overlay (detached), drop the runtime files again. */
void anchor_layer_stop(const LaunchSpec *s, AnchorLayer *l);

/* What a dead coordinator's layer left (from its StateAnchor record): the
 * overlay unmounted; a record of an older Lazaret also names its
 * fuse-overlayfs (killed) and fuse2fs (asked to write back: SIGTERM,
 * SIGKILL after 5 s; its mount detached). */
void anchor_layer_recover(const LaunchSpec *s, const ProcessIdentity *overlay, const char *merged,
                          const ProcessIdentity *fs, const char *fs_mnt);

/* Remember which image a layer was last used with: <name>_image in the
 * Domain Root, {"dir", "image", "image_id", "previous_image_id",
 * "updated"}; previous_image_id is set when the image changed underneath
 * the layer (spec §4.3.4). Returns 1 when it changed, 0 when not. */
int anchor_record_image(const LaunchSpec *s, const StateAnchor *a, const AnchorLayer *l);

void anchor_done(StateAnchor *a);
