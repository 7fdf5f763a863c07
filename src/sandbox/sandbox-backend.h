/* SPDX-License-Identifier: MIT */
#pragma once

/* The sandbox backends as one interface (issue 43). A SandboxBackend is an
 * ops table chosen once from the profile's backend (sandbox_backend_for);
 * the coordinator calls only these ops and never asks which backend it
 * has. Each backend lives in its own file (backend-gvisor.c, backend-
 * native.c); a third is one new file and one entry in the table of
 * sandbox-backend.c. An op a backend cannot do returns -EOPNOTSUPP (with a
 * reason where it takes an error buffer); none is NULL.
 *
 * What the sandbox sees is decided once per generation in a MountPlan,
 * which the coordinator fills and the sandbox participant records with its
 * ownership ("plan"), so a reader of the store sees which host directory
 * was /workspace and what guarded .git. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "argv-util.h"
#include "launch.h"
#include "state-anchor.h"

struct SandboxInfo;

/* The sandbox's host threads run at this nice value under cpu_limit, so
 * that the person's own work comes first. */
#define SANDBOX_NICE 10

typedef struct MountPlan {
        /* The host directory at /workspace: the workspace router's mount in
         * direct mode (workspace_routed), the agent's worktree in branch
         * mode, the workspace itself otherwise. */
        char *workspace;
        bool workspace_routed; /* the router serves the masks and protected names itself */
        /* Branch mode: the git router's mount, at the repository's .git path
         * (spec->git_dir), or NULL; git_read_only: no router, .git read-only. */
        char *git_source;
        bool git_read_only;
        char *terminfo_dir; /* read-only at /run/lazaret/terminfo */
        char *ca_bundle; /* the CA bundle file on the host, or NULL */
        /* Host escalation (both or neither): its certificates' and socket's
         * directories. Egress by name: the broker's directory. */
        char *certs_dir, *socket_dir;
        char *broker_dir;
        char *network_from; /* the network sidecar whose namespace gVisor joins, or NULL */
        pid_t network_pid; /* its netd on the host, whose namespace the native sandbox runs in; 0: none */
        char *resolv_conf; /* with network_pid: the sandbox's /etc/resolv.conf, the policy's resolvers */
        const StateAnchor *anchor; /* persistent_dirs, or NULL (borrowed from the coordinator) */
        /* git's file system monitor's socket on the host (coordinator/
         * fsmonitor.h), or NULL: a backend with fsmonitor hands it in. */
        char *fsmonitor_socket;
} MountPlan;

void mount_plan_done(MountPlan *p);
/* {workspace, workspace_routed, git_source, git_read_only, ...}: what the
 * sandbox participant records. NULL on OOM. */
json_t *mount_plan_to_json(const MountPlan *p);

/* What the coordinator does for a backend while it starts (observation):
 * each may be NULL. */
typedef struct SandboxHooks {
        /* Before the start: gVisor's trace points; *ret_config (or NULL) is
         * runsc's trace configuration. A failure fails the start. */
        int (*trace_begin)(void *host, char **ret_config);
        void (*trace_attached)(void *host, bool started);
        /* After the start: a scan of /proc for the sandbox's processes, from
         * workspace (the host path at /workspace). */
        void (*scan_begin)(void *host, const char *workspace);
        /* A session's process started (the scan looks sooner). */
        void (*session_started)(void *host);
} SandboxHooks;

typedef struct SandboxBackend SandboxBackend;

/* One sandbox of one generation. backend, spec, name, generation, hooks
 * and host are the coordinator's; id, supervisor and state the backend's
 * start fills and its release/done empty. */
typedef struct Sandbox {
        const SandboxBackend *backend;
        const LaunchSpec *spec;
        const char *name; /* "lazaret-coord-<hash>" */
        uint64_t generation;
        MountPlan plan;
        const SandboxHooks *hooks;
        void *host;
        char *id; /* the container's id (gVisor), the name (native) */
        pid_t supervisor; /* its process on the host, whose end is the sandbox's (conmon, the holder); 0: none */
        char cpus[64]; /* cpu_limit's CPU list, when the coordinator set one ("" otherwise) */
        void *state;
} Sandbox;

typedef enum SandboxLimit {
        SANDBOX_LIMIT_PIDS,
        SANDBOX_LIMIT_MEMORY,
        SANDBOX_LIMIT_DISK,
} SandboxLimit;

typedef enum SandboxPath {
        SANDBOX_PATH_CA_BUNDLE,
        SANDBOX_PATH_TERMINFO,
} SandboxPath;

/* A session's command. */
typedef struct SessionExec {
        char **argv;
        const char *cwd; /* "/workspace" or below */
        bool interactive;
        unsigned rows, columns;
        const char *pidfile; /* gVisor's trace points: where runsc writes the pid, or NULL */
} SessionExec;

struct SandboxBackend {
        const char *name; /* "gvisor", "native": the profile's backend = */
        /* At launch, in the CLI, before anything is made: what this backend
         * cannot provide for the profile on this host (launch.h). */
        LaunchPreflight preflight;
        bool uses_image; /* runs the profile's image (a start's error names it) */
        bool traced; /* observed by trace points (sessions get a pid file), else by hooks->scan_begin */
        /* Branch mode may go on without the git router (.git read-only). */
        bool git_router_optional;
        /* git's lstat()s are costly inside (gVisor): sessions get
         * core.fsmonitor answered from the host (coordinator/fsmonitor.h)
         * through the plan's fsmonitor_socket. */
        bool fsmonitor;
        /* Where, in the Domain Root, the start writes the pid of the
         * sandbox's supervisor on the host, whose tree holds the files the
         * sandbox opened (the disk watch counts their unlinked ones), or
         * NULL: the coordinator's own tree holds them. */
        const char *supervisor_pidfile;
        /* Start the sandbox from sb->plan; fills sb->id, sb->supervisor and
         * sb->state. On success *ret_commit holds what the record learns.
         * On failure -errno, *ret_error (one line, or NULL), nothing left
         * running and sb->state NULL. */
        int (*start)(Sandbox *sb, json_t **ret_commit, char **ret_error);
        /* Remove what own (the sandbox participant's record) describes: the
         * live sandbox when sb->state is set, else what a dead coordinator
         * left. Idempotent. 0 when nothing is left. */
        int (*release)(Sandbox *sb, json_t *own);
        /* Free sb->state (after release). */
        void (*done)(Sandbox *sb);
        /* A child of the backend's that the sandbox cannot do without has
         * ended (reaped here): *ret_why says which. 0 otherwise. */
        int (*reap)(Sandbox *sb, const char **ret_why);
        /* What a session's runner reads at its fd 3 (env: the session's
         * environment, borrowed): a memfd in *ret_fd. */
        int (*session_input)(Sandbox *sb, const SessionExec *x, json_t *env, int *ret_fd);
        /* The runner's program and argument vector (NULL on OOM). */
        const char *(*session_program)(Sandbox *sb);
        char **(*session_argv)(Sandbox *sb, const SessionExec *x);
        /* The session's runner started as pid (cpu_limit, observation). */
        void (*session_started)(Sandbox *sb, pid_t pid);
        /* The environment the sandbox starts with (image and Podman's), or
         * NULL. */
        char **(*base_env)(const Sandbox *sb);
        /* Where the sandbox's processes find path (a fixed path inside, or
         * the host's where the sandbox sees the host's paths). */
        const char *(*inside_path)(const Sandbox *sb, SandboxPath path);
        /* The memory the sandbox holds: open the measure once (-errno and
         * why when it cannot be read), then read it; how many processes the
         * kernel ended for want of memory (-EOPNOTSUPP without a memory
         * cgroup). */
        int (*memory_open)(Sandbox *sb, char *why, size_t size);
        int (*memory_used)(Sandbox *sb, uint64_t *ret_bytes);
        int (*memory_killed)(Sandbox *sb, uint64_t *ret_kills);
        /* The measure closed: the sandbox is stopping (a hold on gVisor's
         * memory file would keep its pages after it ends). */
        void (*memory_close)(Sandbox *sb);
        /* What enforces a limit (for status), and whether it is. */
        const char *(*limit_enforcer)(Sandbox *sb, SandboxLimit limit, bool *ret_enforced);
        /* The argument vector of a pause (resume), run on the slow thread:
         * -EOPNOTSUPP with error filled where there is no freezer. */
        int (*pause_argv)(Sandbox *sb, bool pause, Argv *ret, char *error, size_t size);
        /* One probe of egress by name from inside through the relay. */
        int (*egress_probe)(Sandbox *sb, const char *name, const char *port, uint64_t timeout_usec, char **ret_line);
        /* A warning for the status line once started, or NULL. */
        const char *(*start_warning)(Sandbox *sb);
        /* Add what status says of the boundary to the "sandbox" object. */
        void (*describe)(Sandbox *sb, json_t *sandbox, json_t *limits);
};

extern const SandboxBackend sandbox_backend_gvisor, sandbox_backend_native;

/* The backend for b, or by its name ("gvisor", "native"); NULL for none. */
const SandboxBackend *sandbox_backend_for(Backend b);
const SandboxBackend *sandbox_backend_by_name(const char *name);

/* The sandbox participant's two halves, over a Sandbox (the coordinator's
 * kind_sandbox calls them; tests drive them with a fake backend). acquire
 * starts sb; release picks the backend by the record's "backend" (a
 * recovery's sb has no state and may have another backend). */
int sandbox_part_acquire(Sandbox *sb, json_t **ret_commit, char **ret_error);
int sandbox_part_release(Sandbox *sb, json_t *own);
/* The intent recorded before the start: name, backend, the plan. */
json_t *sandbox_part_intent(const Sandbox *sb, json_t *host_coordinator);
/* After release (or a failed start): the backend's state freed, id gone. */
void sandbox_done(Sandbox *sb);

/* For the gVisor network code (runsc's own stack): the container, or NULL
 * when sb is not a running gVisor sandbox. */
struct SandboxInfo *sandbox_gvisor_info(Sandbox *sb);
/* For the /proc scan: the native sandbox's PID 1 as the host sees it (0:
 * none, FS-ONLY or not native). */
pid_t sandbox_native_init_pid(Sandbox *sb);
