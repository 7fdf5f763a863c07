/* SPDX-License-Identifier: MIT */
#pragma once

/* The native backend's sandbox (issue 21): `lazaret-native --hold` as the
 * coordinator's child holds the namespaces and the root (its PID 1, the
 * init, reaps and ends with it), and each session joins it with
 * `lazaret-native --join`, which enters those namespaces and applies the
 * same Landlock rules and seccomp filter before it runs the command. The
 * holder dies with the coordinator (--die-with-parent), and the kernel
 * ends every process of the sandbox with its init. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "launch.h"
#include "sandbox-backend.h"
#include "store.h"

typedef struct NativeRun {
        pid_t pid; /* the holder, our child */
        ProcessIdentity ident;
        pid_t init_pid; /* the sandbox's PID 1, as the host sees it */
        bool git_routed; /* the git router's mount is the repository's .git (each join gets --rw for it) */
        bool loopback; /* egress by name: the loopback is up, the relay listens there (each join: --loopback) */
        bool share_net; /* address rules: in the network sidecar's namespace (each join: --share-net) */
        pid_t relay_pid; /* the joiner of lazaret-init --relay, our child; 0 without names */
        char *cgroup; /* its memory cgroup (runtime.memory_cgroup), ours, removed by native_run_stop; NULL: watched */
        bool fs_only; /* FS-ONLY: no holder (pid 0, init_pid 0); each session runs fs_args, in cgroup */
        char **fs_args; /* lazaret-native --mode fs-only --workspace ... --cgroup ... (the sessions' own follow) */
        dev_t pidns_dev; /* the sandbox's PID namespace: its processes are those in it */
        ino_t pidns_ino;
} NativeRun;

/* Start the sandbox from plan (sandbox-backend.h): its workspace at
 * /workspace; in branch mode the repository's .git at its own path: the
 * plan's git_source (the git router's mount) read-write, or read-only
 * (git_read_only); terminfo read-only at /run/lazaret/terminfo; /tmp and
 * the home tmpfs of memory_limit each; with escalation (certs_dir and
 * socket_dir) its client, certificates and socket directory read-only at
 * /run/lazaret/escalate, certs and sock; with egress by name (broker_dir)
 * the loopback up, the broker's socket directory, the relay and
 * lazaret-init bound read-only, and lazaret-init --relay joined in to keep
 * the relay running (relay_pid); with address rules (the plan's
 * network_pid) in the network sidecar's namespace, started in the user
 * namespace that owns it, with the policy's resolvers in
 * <domain>/resolv.conf bound at /etc/resolv.conf. Waits (10 s at most) for the holder's
 * "ready". On failure returns -errno with *ret_error (one line, caller
 * frees) and leaves nothing running. */
int native_run_start(const LaunchSpec *s, const MountPlan *plan, NativeRun *ret, char **ret_error);

/* Stop it: SIGTERM to the holder (it ends the sandbox's processes), SIGKILL
 * after 5 s, reaped. Safe to call twice. */
void native_run_stop(NativeRun *n);

/* One probe of egress by name from inside: `lazaret-relay --listening
 * --probe NAME PORT` joined in; its one line of output in *ret_line. */
int native_run_probe(const LaunchSpec *s, const NativeRun *n, const char *name, const char *port, uint64_t timeout_usec,
                     char **ret_line);

/* The memory the sandbox holds, as the host pays it. In its memory cgroup:
 * what the kernel charges it, less file contents cached from disk. Without
 * one, the coordinator's watch: the proportional set size of every process
 * in its PID namespace (the resident set where smaps_rollup cannot be read)
 * and what its tmpfs mounts (/tmp, the home, /dev/shm) hold; shared memory
 * no process maps any more is not seen. */
int native_memory_used(const NativeRun *n, uint64_t *ret_bytes);

/* How many processes the kernel ended in its memory cgroup for want of
 * memory (-ENODATA without one). */
int native_memory_killed(const NativeRun *n, uint64_t *ret_kills);

/* A holder a dead coordinator left (by pid and start time): killed. */
void native_run_kill_leftover(const ProcessIdentity *holder);

/* A memory cgroup a dead coordinator left: every process in it killed,
 * then removed (FS-ONLY has no holder whose end ends them). */
void native_run_remove_leftover_cgroup(const char *cgroup);

/* The argument vector of a joiner: `lazaret-native --join PID [--cwd REL]
 * [--env-fd 3] [--rw ...] [--loopback] -- argv...` (cwd: "/workspace" or
 * below it, or NULL; env_fd: a session's environment at fd 3). NULL on
 * OOM. */
char **native_join_argv(const LaunchSpec *s, const NativeRun *n, const char *cwd, bool env_fd, char *const *argv);
