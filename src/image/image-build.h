/* SPDX-License-Identifier: MIT */
#pragma once

/* Local images made without a registry (architecture decision 13): what
 * lazaret image build makes, and what the coordinator builds when the
 * sidecar image is missing. A library: it installs no signal handler and
 * changes no signal's disposition or mask; the caller says when to stop
 * through an ImageStop (image-run.h), asked at least every 100 ms while a
 * helper program runs. Errors are logged (log_error), one line naming the
 * cause and the fix; a failed or stopped build leaves no image, tagged or
 * not, and no temporary files. */

#include <stdbool.h>

#include "image-run.h"

/* What agents reach for first in the debian image: git, an HTTP client,
 * Python and the ssh client (git over SSH through the relay's
 * ProxyCommand). */
#define DEBIAN_PACKAGES "git,ca-certificates,bash,curl,python3,openssh-client"
/* The npm the node image carries beside Node.js NODE_VERSION (images.h). */
#define NPM_VERSION "11.21.2"

typedef struct ImageBuilt {
        char *ref; /* the name it was given */
        char *id; /* 64 hex digits */
        char *digest; /* "sha256:..." */
        char *layers; /* its layers' digests, separated by spaces */
} ImageBuilt;

void image_built_done(ImageBuilt *b);

/* Is name a flavour: busybox, debian, node, sidecar or broker? */
bool image_flavour_known(const char *name);

/* The reference flavour name builds by default; NULL for the sidecar (its
 * name is image_sidecar_ref()'s) and for an unknown name. Static. */
const char *image_flavour_default_ref(const char *name);

/* The Network Sidecar image's name for the lazaret-netd installed beside
 * this program: localhost/lazaret/sidecar:netd-<first 12 hex digits of its
 * SHA-256>, so a new netd gets a new image. 0 or -errno. */
int image_sidecar_ref(char **ret);

/* Build flavour into the calling user's Podman store as ref (a local
 * reference with its tag). stop may be NULL (never stopped). Returns 0
 * with *ret filled in when ret is not NULL (free with image_built_done);
 * -EINTR when stop asked for it (the partial build removed), -EINVAL for
 * an unknown flavour, -EIO for any other failure (logged). */
int image_build(const char *flavour, const char *ref, const ImageStop *stop, ImageBuilt *ret);
