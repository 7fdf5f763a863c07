/* SPDX-License-Identifier: MIT */
#pragma once

#include "config.h"
#include "verbs.h"

/* For verbs that act on one profile: load the configuration (printing its
 * diagnostics) and pick the profile named, or the only one configured.
 * An untrusted workspace file that would widen the sandbox is left out,
 * with a warning: these verbs start nothing. Returns 0, or -EINVAL after
 * printing why. *ret_profile points into *ret_cfg. */
int profile_load(const Globals *g, const char *name, Config **ret_cfg, const ConfigProfile **ret_profile);

/* The same for a verb that starts a sandbox: an untrusted workspace file
 * that would widen it is refused (-EPERM) rather than left out, and a
 * profile's image is required unless it runs natively. backend:
 * the launch's --backend, or _BACKEND_INVALID for the profile's own (with
 * BACKEND_NATIVE no profile needs an image). */
int profile_load_for_launch(const Globals *g, const char *name, Backend backend, Config **ret_cfg,
                            const ConfigProfile **ret_profile);

/* Load the configuration with o, print its diagnostics, and map a failure
 * to an exit status (64 workspace unresolvable, 65 invalid, 125 out of
 * memory). Returns 0 with *ret set, or that exit status. */
int config_load_exit(const ConfigLoadOptions *o, Config **ret);

/* The exit status for a failed profile_load(): 65 (configuration refused)
 * for a workspace file that would widen the sandbox, else 125. */
int profile_load_exit(int r);

/* The operands after a verb's options (from index first): none, or one
 * profile name. Returns 0 with *ret_name (NULL: none), or -EINVAL after
 * printing "VERB takes at most one profile name". */
int profile_operand(int argc, char **argv, int first, const char *verb, const char **ret_name);

/* Read the trust records of store (wstrust_load), saying what is wrong
 * with it. Returns 0, or EXIT_LAZARET. */
int trust_records_read(const char *store, WsTrustRecords *ret);
