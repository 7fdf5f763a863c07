/* SPDX-License-Identifier: MIT */
#pragma once

/* What a coordinator needs to know to start and serve one Domain: computed
 * once by the CLI that spawns it (the leader) from the validated
 * configuration, handed over as JSON on an inherited memfd, so the
 * coordinator never re-reads configuration files. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "macro.h"

/* The descriptors a coordinator is started with (coordinator.h): the
 * sealed LaunchSpec and the pipe of its start's one line. */
#define COORDINATOR_SPEC_FD   3
#define COORDINATOR_STATUS_FD 4
/* The spec each coordinator writes into its Domain (for a watchdog, status
 * and the record of the trees agents write: agent-trees.h). */
#define WATCHDOG_SPEC_FILE "launch-spec.json"

typedef struct LaunchVolume {
        char *host;
        char *container;
        bool read_only;
        char relabel; /* 0, 'z' or 'Z' */
        /* The identity (fd_identity) of what launch resolved host to, with
         * no link the sandbox could have made on the way: the native
         * backend binds only that (NULL: a spec from before it). */
        char *id;
} LaunchVolume;

/* lazaret up -> each agent's lazaret run: the identity (fd_identity) of
 * the workspace up checked and trusted. */
#define WORKSPACE_ID_ENV "LAZARET_WORKSPACE_ID"

typedef struct LaunchSpec {
        char *domain_hash;
        char *profile;
        char *workspace; /* canonical host directory, mounted at /workspace */
        /* What the leader checked, by identity (fd_identity: "DEV:INO"), which
         * every later opener of workspace and git_dir by name must find there
         * (open_pinned_dir): the coordinator, the routers. */
        char *workspace_id;
        char *git_dir_id; /* NULL with git_dir */
        char *domain_dir; /* Domain Root */
        char *agent_trees; /* the record of the trees agents write (agent-trees.h); set by every launch */
        char *image; /* gVisor backend only; NULL for a native profile that names none */
        RunscNetwork runsc_network;
        /* The boundary (issue 21). The native backend runs lazaret-native
         * (its path in native) instead of Podman and runsc, which it does
         * not need: podman and runsc are NULL there when not installed. */
        Backend backend;
        char *native;
        char *memory_cgroup; /* native: runtime.memory_cgroup, where its memory cgroup is made; NULL: watched */
        bool native_fs_only; /* native on a host without user namespaces: Landlock and seccomp only */
        char *agent; /* --agent NAME: the branch is lazaret/agent-NAME (the profile's name otherwise) */
        char **command; /* default session command, NULL-terminated */
        char **env_names; /* variables sessions may set (the profile's env), NULL-terminated */
        LaunchVolume *volumes;
        size_t n_volumes;
        char *git_dir; /* the workspace repository's .git, served to the sandbox through the git
                        * router; NULL when the workspace is no git repository */
        bool branch; /* workspace_mode = "branch": the agent works in its own worktree, and .git
                      * is mounted at its host path so the worktree's "gitdir:" resolves */
        /* Direct mode serves the working tree through the workspace router:
         * these path patterns (built-in and [workspace]) are protected
         * (read-only, never created) and masked (read as empty).
         * NULL-terminated. */
        char **protect;
        char **mask;
        char *runtime_dir;
        char *lock_path;
        char *socket_path;
        char *podman; /* absolute paths of the tools (NULL with the native backend when missing) */
        char *runsc;
        char *init; /* lazaret-init on the host */
        bool rootless;
        /* The Derived Network Policy (canonical form) and what the launch
         * probes; netd and sidecar_image are NULL when the policy permits
         * nothing (loopback only, no sidecar); sidecar_image is NULL too
         * for the native backend's sidecar, which is no container. */
        char *netpolicy;
        char *netpolicy_digest;
        /* The policy came from the profile's own address rules
         * (inherit_default_allow = false), not [network] default_allow. */
        bool own_address_rules;
        char **probe_targets; /* "ADDR:PORT" / "[ADDR6]:PORT", NULL-terminated */
        char *probe_dns_name;
        char *netd; /* lazaret-netd on the host */
        char *slirp4netns; /* the native backend's uplink for netd's namespace (NULL otherwise) */
        char *sidecar_image; /* localhost/lazaret/sidecar:netd-HASH */
        /* Egress by name (issue 18): the profile's rules, canonical
         * ("NAME:PORT", "*.SUFFIX:PORT"), NULL-terminated; empty when it
         * has none, and then there is no broker and no relay. */
        char **domains;
        char **probe_domains; /* "NAME:PORT" the launch reaches through the broker */
        char **broker_resolvers; /* network.resolvers ("ADDR"); empty: the host's /etc/resolv.conf */
        bool check_server_name;
        uint64_t broker_connections;
        char *broker; /* lazaret-broker on the host (NULL without rules) */
        char *relay; /* lazaret-relay on the host (NULL without rules) */
        /* The State Anchor (spec §4.3): canonical container directories kept
         * across restarts, NULL-terminated (empty: none). */
        char **persistent_dirs;
        /* What moves the changes an older Lazaret kept in an ext4 image
         * (<name>_layer.img) out of it: NULL when not installed. */
        char *fuse2fs, *e2fsck;
        char *catalog_dir; /* the Storage Catalog: <data_root>/catalog */
        /* Host escalation ([escalation]); the socket and certificates exist
         * only when enabled. */
        bool escalation_enabled;
        char *escalation_socket_dir;
        char **auto_approve; /* entries as written, NULL-terminated */
        uint64_t escalation_output_max; /* bytes kept per stream */
        uint64_t escalation_time_limit; /* seconds an approved command may run */
        char *escalate; /* lazaret-escalate on the host */
        uint64_t nofile; /* the hard limit, passed as --ulimit */
        uint64_t nproc; /* the profile's pids_limit (at most the hard limit), passed as --ulimit */
        uint64_t memory_limit_mib; /* the profile's memory_limit */
        uint64_t cpu_limit; /* the profile's cpu_limit (0: every CPU) */
        uint64_t disk_limit_mib; /* the profile's disk_limit */
        /* ca_certificates (issue 24): the files the bundle is made of, in
         * order ("host" resolved to the host's store), NULL-terminated, and
         * the SHA-256 of the bundle they made when the spec was built;
         * NULL: no bundle. The coordinator makes it again from the same
         * files and starts only when it has the same digest. */
        char **ca_files;
        char *ca_digest;
        char fingerprint[65]; /* SHA-256 of the canonical JSON (without this field) */
} LaunchSpec;

/* The table the JSON form is made from (launch.c): each field of the
 * spec but the enums, the volumes, the CA files and the fingerprint. */
typedef enum LaunchFieldKind {
        LAUNCH_STR, /* char *, required */
        LAUNCH_STR_OPT, /* char *, may be NULL (null in JSON) */
        LAUNCH_STRV, /* char **, NULL-terminated, required */
        LAUNCH_STRV_OPT, /* char **, absent in JSON: empty */
        LAUNCH_BOOL,
        LAUNCH_BOOL_OPT, /* absent: false */
        LAUNCH_U64,
        LAUNCH_U64_OPT, /* absent: 0 */
} LaunchFieldKind;

typedef struct LaunchField {
        const char *key;
        LaunchFieldKind kind;
        size_t offset; /* in LaunchSpec */
} LaunchField;

const LaunchField *launch_spec_fields(size_t *ret_n);

void launch_spec_done(LaunchSpec *s);
int launch_spec_to_json(const LaunchSpec *s, json_t **ret);
int launch_spec_from_json(json_t *j, LaunchSpec *ret);
/* The spec as it travels (the leader's sealed memfd) and is kept (the
 * Domain's launch-spec.json): its JSON with "netpolicy_bytes" for the
 * policy, a NUL, then the declared policy's canonical text, byte for byte
 * (its digest must be netpolicy_digest). The policy stays out of the JSON:
 * 10,000 prefixes are 190 KB that jansson escapes and reads back a
 * character at a time, milliseconds of every start. A spec with no
 * policy, or a copy an older Lazaret wrote, is the JSON alone. *ret is
 * NUL-terminated; *ret_len leaves that NUL out. */
int launch_spec_serialize(const LaunchSpec *s, char **ret, size_t *ret_len);
int launch_spec_deserialize(const char *buf, size_t len, LaunchSpec *ret);
/* Fill s->fingerprint from the canonical JSON form. */
int launch_spec_fingerprint(LaunchSpec *s);

/* The agent's branch and worktree of a branch-mode spec (caller frees). */
char *launch_agent_branch(const LaunchSpec *s); /* "lazaret/agent-<profile>" */
char *launch_agent_worktree(const LaunchSpec *s); /* "<domain_dir>/agent-<profile>" */

/* The chosen backend's own checks (SandboxBackend.preflight), before
 * anything is made for the launch: what the backend cannot provide on this
 * host for p, refused with one line naming it and the way out (-ENOENT and
 * *ret_error), never a silent fallback. from_flag: `--backend` chose it, not
 * the profile. It may fill s's fields of that backend (the helper program's
 * path); dir is where lazaret's own programs are. */
typedef int (*LaunchPreflight)(const Config *cfg, const ConfigProfile *p, bool from_flag, LaunchSpec *s,
                               const char *dir, char **ret_error);

/* Build the spec for profile p of cfg, with the backend p names or, when
 * backend >= 0, that one (`lazaret run --backend`). Paths of tools come from PATH. On a
 * missing prerequisite returns -ENOENT with *ret_error set to one line naming
 * the cause and the fix (caller frees). preflight (or NULL): the chosen
 * backend's (the caller looks it up: launch includes no backend). */
int launch_spec_build(const Config *cfg, const ConfigProfile *p, Backend backend, LaunchPreflight preflight,
                      LaunchSpec *ret, char **ret_error);

bool launch_spec_env_allowed(const LaunchSpec *s, const char *assignment);

/* Whether the agent's traffic goes through gVisor's own network stack
 * (runsc_network = "sandbox"), which keeps its own copy of the routes; the
 * native backend and runsc_network = "host" use the kernel's stack of the
 * sidecar's namespace, where netd's routes apply as they are. */
static inline bool launch_gvisor_netstack(const LaunchSpec *s) {
        return s->backend != BACKEND_NATIVE && s->runsc_network == RUNSC_NETWORK_SANDBOX;
}

/* Where the sandbox sees the CA bundle (gVisor, and the native backend's
 * FULL mode; FS-ONLY sees the host's path). */
#define CA_BUNDLE_PATH "/run/lazaret/ca-certificates.crt"

/* The bundle's host path, <domain_dir>/ca-certificates.crt, or NULL when
 * the spec has none (or on OOM). */
char *launch_ca_bundle_path(const LaunchSpec *s);

/* The CA bundle of s->ca_files into *ret (caller frees) with its SHA-256
 * in hex (65 bytes). -EINVAL with *ret_error naming the file and the
 * fault (caller frees), or -ENOMEM. */
int launch_ca_bundle(char *const *files, char **ret, size_t *ret_len, char ret_digest[65], char **ret_error);
