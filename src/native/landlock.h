/* SPDX-License-Identifier: MIT */
#pragma once

/* Landlock for the native backend (issue 21): a ruleset built from concrete,
 * already resolved paths, applied to the calling process just before it
 * executes the agent. Everything the running kernel's Landlock ABI can
 * restrict on the file system is handled, so whatever no rule grants is
 * denied; abstract unix sockets and signals are scoped to the sandbox where
 * the ABI has scoping (6), and TCP bind/connect is denied on request (ABI 4).
 *
 * The rules are resolved in the launcher (landlock_rules_add opens each path)
 * and applied in the child (landlock_apply allocates nothing, so it is safe
 * between fork and execve). */

#include <stdbool.h>

#include "macro.h"

/* The highest Landlock ABI this code knows the rights of. A newer kernel is
 * used at this level: rights it adds later stay unhandled (allowed). */
#define LANDLOCK_ABI_KNOWN 7

/* Environment variable that lowers what landlock_abi() reports, so tests can
 * simulate an older kernel or one without Landlock ("0"). It can only lower
 * the kernel's ABI, never raise it. */
#define LANDLOCK_TEST_ABI_ENV "LAZARET_TEST_LANDLOCK_ABI"

typedef enum LandlockGrant {
        /* Read files, list directories, execute. */
        LANDLOCK_GRANT_READ_ONLY,
        /* Every file-system right the ABI knows: also write, create, remove,
         * rename across directories (refer, ABI 2), truncate (ABI 3) and
         * device ioctls (ABI 5). */
        LANDLOCK_GRANT_READ_WRITE,
        /* The rights of READ_ONLY that act on names, not on file contents:
         * list directories. Nothing beneath can be read or executed. */
        LANDLOCK_GRANT_NAMES_READ_ONLY,
        /* The rights of READ_WRITE that act on names, not on file contents:
         * list directories, create, remove, rename and link entries (refer,
         * ABI 2). No file beneath can be opened, executed or truncated, so
         * this grant on a directory reveals no file's contents (the FS-ONLY
         * mode's way around a --mask, which Landlock cannot subtract). */
        LANDLOCK_GRANT_NAMES_READ_WRITE,
        _LANDLOCK_GRANT_MAX,
        _LANDLOCK_GRANT_INVALID = -EINVAL,
} LandlockGrant;

typedef enum LandlockFlags {
        /* Handle TCP bind and connect with no rule granting either, so both
         * fail with EACCES. Needs ABI 4 (Linux 6.7); landlock_apply fails
         * closed on an older kernel. */
        LANDLOCK_DENY_TCP = 1u << 0,
        _LANDLOCK_FLAGS_ALL = LANDLOCK_DENY_TCP,
} LandlockFlags;

typedef struct LandlockRules LandlockRules;

/* The Landlock ABI version of the running kernel: >= 1, or -ENOSYS (kernel
 * built without Landlock) or -EOPNOTSUPP (Landlock not enabled at boot), or
 * another -errno of the probe. When LAZARET_TEST_LANDLOCK_ABI is set to a
 * decimal integer N >= 0, returns MIN(N, kernel's ABI), and 0 for N = 0
 * meaning "none"; -EINVAL if it is set to anything else. Callers must treat
 * every value <= 0 as "no Landlock". */
int landlock_abi(void);

/* A new, empty set of rules in *ret (free with landlock_rules_free). flags
 * are LandlockFlags. -EINVAL for unknown flags, -ENOMEM. */
int landlock_rules_new(unsigned flags, LandlockRules **ret);

/* Closes the opened paths and frees r. Accepts NULL; returns NULL. */
LandlockRules *landlock_rules_free(LandlockRules *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(LandlockRules *, landlock_rules_free)

/* Grant access below path (a directory and everything beneath it, or one
 * file). path must be absolute and already resolved: no "..", no symbolic
 * link in any component, the last included. It is opened here with O_PATH
 * (close-on-exec), so the rule holds the inode the launcher saw, whatever
 * happens to the name later. On a file, only the rights that apply to files
 * are granted. Returns 0; on failure -errno and *ret_error (caller frees;
 * left NULL on -ENOMEM) names the path, the cause and the fix: -EINVAL
 * (relative, "..", bad grant), -ELOOP (a symbolic link), -ENOENT, or the
 * error of opening it. */
int landlock_rules_add(LandlockRules *r, const char *path, LandlockGrant grant, char **ret_error);

/* Number of rules added so far. */
size_t landlock_rules_count(const LandlockRules *r);

/* Restrict the calling thread (and everything it executes) to r: build the
 * ruleset for the running kernel's ABI, add the rules, set no_new_privs and
 * call landlock_restrict_self. Call it in a single-threaded child
 * right before execve: it allocates nothing. Fails closed with -EOPNOTSUPP
 * when the kernel has no Landlock, when its ABI is lower than min_abi (0 or
 * 1 for "any"), or lower than what r's flags need; *ret_why (static text)
 * names the missing feature and the fix. -EINVAL for min_abi outside
 * 0..LANDLOCK_ABI_KNOWN. Any other -errno is a failing Landlock call, with
 * *ret_why saying which; the process may then hold no_new_privs but is not
 * restricted, and must not execute the agent. */
int landlock_apply(const LandlockRules *r, int min_abi, const char **ret_why);
