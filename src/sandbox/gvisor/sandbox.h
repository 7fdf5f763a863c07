/* SPDX-License-Identifier: MIT */
#pragma once

/* runsc's host threads per task of the sandbox, measured: 1,000 sleeping
 * processes made 7,932 host threads. */
#define SANDBOX_HOST_THREADS_PER_TASK 10u

/* The Agent Sandbox: one runsc container per Domain, made and removed with
 * Podman (rootless for a normal user, rootful for root), entered with runsc
 * exec directly (decision 8). */

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec-util.h"
#include "launch.h"
#include "podman.h"
#include "sandbox-backend.h"
#include "state-anchor.h"

/* conmon's pid, written by Podman into the Domain Root. */
#define SANDBOX_CONMON_PIDFILE "conmon.pid"

/* "lazaret-coord-<hash>" (spec §4.3.1). */
int sandbox_name(const LaunchSpec *s, char **ret);

/* Where volume i is staged for Podman when launch pinned it (its id):
 * <domain>/volumes/<i>, the volume bound there, in Podman's mount
 * namespace, from a descriptor of what launch checked. Caller frees. */
char *sandbox_volume_stage(const LaunchSpec *s, size_t i);

typedef struct SandboxInfo {
        char *id; /* full container id */
        char *runsc_root; /* runsc --root of this container */
        pid_t conmon_pid; /* exits when the container does */
        char **env; /* the container's process environment (image + Podman), NULL-terminated */
        json_t *user; /* the container's process user (OCI "user" object) */
} SandboxInfo;

void sandbox_info_done(SandboxInfo *i);

/* podman run -d ... with the spec's limits and runtime flags and plan's
 * mounts (sandbox-backend.h): its workspace at /workspace, its git_source
 * at the repository's .git, terminfo read-only at /run/lazaret/terminfo,
 * the CA bundle, escalation's client and certificates, the relay; PID 1
 * is lazaret-init mounted at /run/lazaret/init. network_from names the
 * network sidecar whose namespace the sandbox joins (NULL: none, loopback
 * only). anchor (or NULL) adds the State Anchor's merged directories and
 * runs the image by the id its layers were made from. With escalation or
 * names, a tmpfs at DISPENSE_DIR for the dispenser (dispenser.h), which
 * the caller runs: no host socket (nor its directory) is mounted, and
 * runsc reaches none. On failure returns -EIO with *ret_error holding
 * Podman's last error line (caller frees). */
int sandbox_start(const LaunchSpec *s, uint64_t generation, const MountPlan *plan, const char *trace_config,
                  SandboxInfo *ret, char **ret_error);

/* workspace_mode = "branch": the agent's worktree on branch
 * lazaret/agent-<profile> under the Domain Root, made from the host's HEAD
 * the first time (the branch is reused when it exists) and reused by later
 * generations. The host's working tree is not touched. Host git runs without
 * hooks or fsmonitor. Returns 0 and the path, or -EIO with *ret_error. */
int sandbox_prepare_worktree(const LaunchSpec *s, char **ret_path, char **ret_error);

/* Make sure the relative directory rel (path_relative_safe: no "." or "..")
 * exists below root (the agent's worktree), creating missing directories
 * (0755) one name at a time; each step is opened with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS), so a symlink the sandbox planted fails with -ELOOP
 * and nothing is made outside root. -EINVAL for an unsafe rel; -ENOTDIR
 * when a name is not a directory. */
int sandbox_worktree_dir(const char *root, const char *rel);

/* The argv of a runsc exec for container id with process file procfile
 * (a path runsc can open). NULL-terminated, caller frees with free(). */
char **sandbox_exec_argv(const LaunchSpec *s, const SandboxInfo *i, const char *procfile, const char *pidfile);
