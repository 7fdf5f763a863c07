/* SPDX-License-Identifier: MIT */
#pragma once

#include "config.h"
#include "verbs.h"

/* For verbs that act on one profile: load the configuration (printing its
 * diagnostics) and pick the profile named, or the only one configured.
 * Returns 0, or -EINVAL after printing why. *ret_profile points into
 * *ret_cfg. */
int profile_load(const Globals *g, const char *name, Config **ret_cfg, const ConfigProfile **ret_profile);

/* The operands after a verb's options (from index first): none, or one
 * profile name. Returns 0 with *ret_name (NULL: none), or -EINVAL after
 * printing "VERB takes at most one profile name". */
int profile_operand(int argc, char **argv, int first, const char *verb, const char **ret_name);
