/* SPDX-License-Identifier: MIT */
#pragma once

/* The native backend's persistent directories (issue 45): each profile's
 * persistent_dirs entry DIR is kept in <domain>/<name>_native/ (upper/ and
 * work/ in it; <name> from persist_dir_name(), so "/usr/local" is
 * usr_2flocal_native), apart from gVisor's layers of the same Domain
 * (<name>_layer.img and the rest), which it never mixes with. lazaret-native
 * --persist mounts them in the sandbox's own namespace (native-persist.c
 * there says how). */

#include <stdbool.h>

#include "argv-util.h"
#include "launch.h"

#define NATIVE_LAYER_SUFFIX "_native"

/* The layer directory of canonical persistent directory dir in the Domain
 * Root domain_dir. Caller frees; NULL on OOM. */
char *native_layer_dir(const char *domain_dir, const char *dir);

/* Make each layer directory (0700, the user's) and add "--persist
 * LAYER:DIR" for each to a. On failure -errno and *ret_error (one line,
 * caller frees). */
int native_layers_args(const LaunchSpec *s, Argv *a, char **ret_error);

/* Whether a layer is new (no upper directory yet): its first start copies
 * the host directory's tree of directories, which takes seconds for /usr. */
bool native_layers_new(const LaunchSpec *s);

/* The upper directories, which the disk watch measures beside the work
 * files: a NULL-terminated array the caller frees (strv), NULL on OOM. */
char **native_layers_uppers(const LaunchSpec *s);
