/* SPDX-License-Identifier: MIT */
#pragma once

#include "config.h"
#include "verbs.h"

/* For verbs that act on one profile: load the configuration (printing its
 * diagnostics) and pick the profile named, or the only one configured.
 * Returns 0, or -EINVAL after printing why. *ret_profile points into
 * *ret_cfg. */
int profile_load(const Globals *g, const char *name, Config **ret_cfg, const ConfigProfile **ret_profile);
