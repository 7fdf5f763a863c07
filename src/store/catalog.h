/* SPDX-License-Identifier: MIT */
#pragma once

/* The Storage Catalog (schema "Storage Catalog"): one LMDB environment per
 * data root, shared by every Domain's coordinator, recording the prepared
 * artifacts (for the State Anchor: an image mounted once with `podman image
 * mount`) and the leases Domains hold on them. An artifact is mounted when
 * the first lease is taken and unmounted when the last one is released; a
 * PrepareOperation is recorded before each mount, so a mount whose
 * coordinator died before it could record the artifact is found and given
 * back by the next catalog user. Leases stay until their Domain releases
 * them (at teardown, or in its recovery after a crash).
 *
 * Every call takes <dir>/catalog.lock for its whole duration (mounts
 * included), so the catalog's users are serialized. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* How artifacts are made and given back (the caller's: Podman). */
typedef struct CatalogMounter {
        /* Mount artifact_id; 0 and the path, or -errno and *ret_error. */
        int (*mount)(void *userdata, const char *artifact_id, char **ret_path, char **ret_error);
        /* Give one mount of artifact_id back; 0 or -errno. */
        int (*unmount)(void *userdata, const char *artifact_id);
        /* Whether a recorded path still shows the artifact (after a reboot
         * or a new Podman namespace it does not, and it is mounted again). */
        bool (*valid)(void *userdata, const char *path);
        void *userdata;
} CatalogMounter;

typedef struct CatalogLease {
        const char *artifact_id; /* the image id */
        const char *source_identity; /* the image reference */
        const char *domain_id;
        uint64_t generation_id;
} CatalogLease;

/* Take (or keep: the same lease twice is one) a lease on the artifact,
 * mounting it when it is not; 0 and its path (caller frees). */
int catalog_lease(const char *dir, const CatalogLease *lease, const CatalogMounter *m, char **ret_path,
                  char **ret_error);

/* Release the lease (absent: nothing to do); the last lease's release
 * unmounts the artifact. 0 or -errno (the lease is gone either way; an
 * artifact that would not unmount stays recorded as Reclaiming and is tried
 * again by the next catalog call). */
int catalog_release(const char *dir, const char *artifact_id, const char *domain_id, uint64_t generation_id,
                    const CatalogMounter *m);

/* The catalog as JSON: {"artifacts": [...], "leases": [...],
 * "operations": [...]} (tests, diagnostics). */
int catalog_dump(const char *dir, json_t **ret);
