/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

#include "config.h"
#include "launch.h"

/* The native backend's LaunchPreflight (launch.h): root refused, address
 * rules only with Podman (the sidecar), persistent directories not over the
 * sandbox's memory, volumes not over its own mounts, lazaret-native next to
 * lazaret (s->native), and what this host allows (native_probe): FULL, or
 * FS-ONLY with what that mode cannot do refused, naming it. */
int native_preflight(const Config *cfg, const ConfigProfile *p, bool from_flag, LaunchSpec *s, const char *dir,
                     char **ret_error);
