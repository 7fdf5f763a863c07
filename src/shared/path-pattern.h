/* SPDX-License-Identifier: MIT */
#pragma once

/* Path patterns for the workspace's protected host-run files and masked
 * secrets. A pattern is a '/'-separated relative path whose components are
 * fnmatch(3) globs (flags 0, one component each, so '*' never crosses '/';
 * there is no '**'). A leading '/' anchors it at the workspace root,
 * otherwise it matches at any depth; a trailing '/' says it names a
 * directory, and matches like the same pattern without it.
 *
 * A relative path matches a pattern of k components when k consecutive
 * components of the path match them one by one (for an anchored pattern,
 * the first k), and everything beneath a match matches too: ".git" matches
 * "sub/.git/config", "/.envrc" matches ".envrc" but not "a/.envrc".
 *
 * Matching is per byte in the C locale (the CLI and the coordinator leave
 * LC_CTYPE alone): '?' matches one byte. Pure; libc only. */

#include <stdbool.h>
#include <stddef.h>

#define PATH_PATTERN_MAX            1024
#define PATH_PATTERN_COMPONENTS_MAX 32

/* NULL when pattern is valid, else a static reason without trailing period
 * ("an empty component (a//b)", ...). Refused: NULL or empty, "/" alone,
 * "." or ".." components, empty components, control characters, more than
 * PATH_PATTERN_MAX bytes or PATH_PATTERN_COMPONENTS_MAX components. */
const char *path_pattern_problem(const char *pattern);

/* True when rel (relative: a leading '/' and empty components are skipped)
 * matches any of the n patterns. Patterns that path_pattern_problem refuses
 * never match: check them first. A path too long for the stack whose copy
 * cannot be allocated is taken to match (the callers protect or mask what
 * matches, so failing closed errs on the safe side). */
bool path_pattern_match_any(const char *rel, const char *const *patterns, size_t n);

/* The built-in protected host-run files: what a host program runs or obeys
 * when it opens the workspace (NULL-terminated). */
extern const char *const path_pattern_protect_default[];

/* The built-in masked secrets (NULL-terminated). */
extern const char *const path_pattern_mask_default[];

/* Number of entries of a NULL-terminated list. */
size_t path_pattern_count(const char *const *list);
