/* SPDX-License-Identifier: MIT */
#pragma once

/* The profile's persistent_dirs (spec §3.1, §4.3.2): which container
 * directories may be kept across restarts, and the names of their layers
 * under the Domain Root. Pure; libc only. */

#include <stddef.h>

/* The canonical form of an entry: absolute, single slashes, no trailing
 * slash, no "." or ".." segments. Returns NULL and sets *ret_why (static
 * text) when entry is not acceptable: not absolute, "." or "..", the root,
 * or a path that covers or lies inside what Lazaret mounts itself
 * (/workspace, /run/lazaret) or the kernel's (/proc, /sys, /dev). NULL
 * with *ret_why NULL means out of memory. Caller frees. */
char *persist_dir_canonical(const char *entry, const char **ret_why);

/* Whether canonical a and b are equal or one contains the other. */
int persist_dirs_overlap(const char *a, const char *b);

/* The layer's name under the Domain Root: the path without its leading
 * slash, '_' written as "_5f" and '/' as "_2f", so "/usr" is "usr" (its
 * layers usr_changes/, usr_work/, usr_merged/) and no two paths share a
 * name. Caller frees; NULL on OOM. */
char *persist_dir_name(const char *canonical);
