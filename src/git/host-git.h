/* SPDX-License-Identifier: MIT */
#pragma once

/* The host's git, run by Lazaret on a repository the sandbox can write
 * (its .git through the router, its worktree directly): one safe command
 * line for every call. A repository's configuration may name hooks, an
 * fsmonitor program, a pager or a gpg program; none of them run. And no
 * GIT_* variable of ours (GIT_DIR, GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF,
 * GIT_PAGER and their kind change what git reads or runs) reaches it. */

#include "argv-util.h"

/* "git", "-C", workspace, then the options below. */
void host_git_argv(Argv *a, const char *workspace);

/* The options themselves, NULL-terminated: no hooks, no fsmonitor, no
 * signature checks (gpg), no pager. */
extern const char *const host_git_options[];

/* Unset every GIT_* variable of this process's environment. */
int host_git_drop_environment(void);
