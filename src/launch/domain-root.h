/* SPDX-License-Identifier: MIT */
#pragma once

/* Check that the Domain Root (or, before it exists, the directory it will
 * be made in) can hold overlay upper directories (a probe: directories,
 * symlinks, a file written and renamed, modes kept, a user extended
 * attribute) and that its path fits an overlay mount's options; one line naming the file system and the fix
 * otherwise. Its own module, so that the LaunchSpec's making (launch.c)
 * needs nothing of the State Anchor's (no include cycle). */
int domain_root_check(const char *domain_dir, char **ret_error);
