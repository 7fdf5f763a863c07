/* SPDX-License-Identifier: MIT */
#pragma once

/* The configuration contract (spec §3, §4.3.1).
 *
 * Files, lowest precedence first:
 *   1. $XDG_CONFIG_HOME/lazaret/config.toml (default ~/.config/lazaret/config.toml)
 *   2. <workspace>/lazaret.toml
 *   3. the file given with --config
 * Missing files 1 and 2 are skipped; a missing --config file is an error.
 *
 * Files 1 and 3 are the person's choice and carry authority. File 2 is
 * read from the workspace directory's descriptor without following a
 * symlink, must be the user's own regular file, and is untrusted until
 * its exact bytes are trusted (workspace-trust.h): until then it may only
 * narrow the sandbox (config-authority.h). An untrusted file's additions
 * to lists that only narrow (network.default_deny) are kept beside the
 * merged value (ConfigNode.extra), not in place of it.
 *
 * Merge rule: tables (including inline tables such as env) merge key by key,
 * recursively; any other value, arrays included, from a higher-precedence
 * file replaces the lower one whole. A key that is a table in one file and
 * something else in another is an error. Every merged value remembers the
 * file and position it came from (config show prints them).
 *
 * Validation collects every problem it can find (one ConfigDiag each, with
 * file, line and column) instead of stopping at the first. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "autoapprove.h"
#include "config-authority.h"
#include "domain-rule.h"
#include "profile-name.h"
#include "workspace-trust.h"

#define CONFIG_OUTPUT_LIMIT_DEFAULT (1024u * 1024u)
#define CONFIG_OUTPUT_LIMIT_MAX     (2u * 1024u * 1024u)
#define CONFIG_TIME_LIMIT_DEFAULT   300u /* seconds a host command may run */
/* A sandbox's ceilings (issue 16). Tasks: processes and threads inside
 * gVisor; 1,024 runs a make -j16 and 400 sleeping processes, and bounds
 * runsc's host threads (about 8 per task) well below a host's pid_max. */
#define CONFIG_PIDS_LIMIT_DEFAULT 1024u
#define CONFIG_PIDS_LIMIT_MIN     16u
#define CONFIG_PIDS_LIMIT_MAX     16384u
/* MiB of memory the sandbox's applications may hold. */
#define CONFIG_MEMORY_LIMIT_DEFAULT 8192u
#define CONFIG_MEMORY_LIMIT_MIN     64u
#define CONFIG_MEMORY_LIMIT_MAX     (1024u * 1024u)
/* CPUs the sandbox's host threads may run on; 0: all of the host's. */
#define CONFIG_CPU_LIMIT_MAX 1024u
/* MiB the container's own root file system may take on the host. */
#define CONFIG_DISK_LIMIT_DEFAULT 16384u
#define CONFIG_DISK_LIMIT_MIN     64u
#define CONFIG_DISK_LIMIT_MAX     (16u * 1024u * 1024u)
#define CONFIG_TIME_LIMIT_MAX     86400u
#include "netpolicy.h"
#include "toml.h"

/* Bounds on everything a configuration can make Lazaret do. */
#define CONFIG_FILE_MAX           (1024u * 1024u) /* bytes per file */
#define CONFIG_DEPTH_MAX          16u /* nesting of tables and arrays */
#define CONFIG_STRING_MAX         4096u /* bytes per string or key */
#define CONFIG_PROFILES_MAX       64u
#define CONFIG_LIST_MAX           1024u /* entries in any array or env table */
#define CONFIG_PREFIXES_MAX       65536u /* entries in a CIDR list (block lists are long) */
#define NETPROBE_DNS_NAME_DEFAULT "example.com"
/* Egress by name (issue 18): connections the Domain's broker holds at once. */
#define CONFIG_BROKER_CONNECTIONS_DEFAULT 256u
#define CONFIG_BROKER_CONNECTIONS_MAX     4096u

typedef struct ConfigDiag {
        char *file; /* NULL when the problem belongs to no file */
        TomlPos pos; /* 0:0 when it belongs to no position */
        bool warning;
        char *message;
} ConfigDiag;

typedef struct ConfigDiags {
        ConfigDiag *items;
        size_t n;
} ConfigDiags;

void config_diags_done(ConfigDiags *d);
size_t config_diags_errors(const ConfigDiags *d);
/* One line per diagnostic: "FILE:LINE:COL: message", warnings as
 * "FILE:LINE:COL: warning: message". */
void config_diags_print(const ConfigDiags *d, FILE *f);

typedef struct ConfigSource {
        char *path;
        TomlValue *root;
        bool trusted; /* the person's own file, or a workspace file they trusted */
} ConfigSource;

/* The merged tree: one node per key. */
typedef struct ConfigNode ConfigNode;
struct ConfigNode {
        const char *key; /* borrowed from the TOML tree; NULL for the root */
        const ConfigSource *src; /* file the value (for tables: the last merged part) came from */
        TomlPos key_pos;
        const TomlValue *value; /* for tables, the last merged part; use children */
        ConfigNode *children; /* tables only, in first-seen order */
        size_t n_children;
        /* A list that only narrows (CONFIG_KEY_UNION), also set by an
         * untrusted workspace file: its entries, added to value's. */
        const ConfigSource *extra_src;
        const TomlValue *extra;
};

typedef struct ConfigWhere {
        const char *file;
        TomlPos pos;
} ConfigWhere;

typedef struct ConfigEnvVar {
        char *name;
        char *value; /* the literal value, or NULL when taken from the host */
        char *host_var; /* "env:VAR" form: the host variable, else NULL */
        bool optional; /* "env?:VAR": left out when the host has no VAR (a preset's API keys) */
        ConfigWhere where;
} ConfigEnvVar;

typedef struct ConfigVolume {
        char *host; /* expanded and canonicalized */
        char *host_given; /* expanded only: the names as written, links not followed (launch checks them) */
        char *container; /* absolute path in the sandbox */
        bool read_only;
        bool relabel_shared; /* z */
        bool relabel_private; /* Z */
        ConfigWhere where;
} ConfigVolume;

typedef enum RunscNetwork {
        RUNSC_NETWORK_SANDBOX, /* gVisor's own network stack (runsc --network=sandbox) */
        RUNSC_NETWORK_HOST, /* the kernel stack of the sandbox's namespace (runsc --network=host) */
        _RUNSC_NETWORK_MAX,
        _RUNSC_NETWORK_INVALID = -EINVAL,
} RunscNetwork;

const char *runsc_network_to_string(RunscNetwork n);

/* What draws the boundary (issue 21). */
typedef enum Backend {
        BACKEND_GVISOR, /* rootless Podman with gVisor (runsc): the default */
        BACKEND_NATIVE, /* lazaret-native: Landlock, namespaces and seccomp on the host's kernel */
        _BACKEND_MAX,
        _BACKEND_INVALID = -EINVAL,
} Backend;

const char *backend_to_string(Backend b);
Backend backend_from_string(const char *s);

/* A destination the launch probes and must find reachable. */
typedef struct ConfigProbe {
        NetAddr addr;
        uint16_t port;
        ConfigWhere where;
} ConfigProbe;

typedef struct ConfigProfile {
        char *name;
        char **command; /* NULL-terminated argv; default {"/bin/sh", "-l"} */
        size_t n_command;
        RunscNetwork runsc_network;
        ConfigWhere runsc_network_where; /* file 0 when defaulted */
        Backend backend; /* default gvisor; `lazaret run --backend` overrides it */
        bool workspace_branch; /* workspace_mode: "branch" (default) or "direct" */
        uint64_t pids_limit; /* tasks inside the sandbox */
        uint64_t memory_limit_mib; /* 0: no limit (memory_limit = 0) */
        uint64_t cpu_limit; /* 0: every CPU */
        uint64_t disk_limit_mib; /* the container's root file system */
        char *image; /* NULL only with backend = "native", which runs none */
        ConfigWhere image_where;
        char **persistent_dirs;
        size_t n_persistent_dirs;
        size_t n_allow_egress; /* valid entries (compiled into net: no copies kept) */
        char *allow_egress_name; /* "profiles.NAME.allow_egress" */
        /* inherit_default_allow = false: [network] default_allow does not
         * reach this profile; its addresses are its allow_egress alone
         * ([network] default_deny still holds). The agent presets say so. */
        bool own_address_rules;
        /* Egress by name: [network] default_domains, then the profile's
         * allow_domains, without repeats; none: no broker. */
        DomainRule *domains;
        size_t n_domains;
        bool check_server_name; /* the broker compares TLS SNI / Host with the name asked for */
        bool status_line; /* lazaret run's status line on a terminal (default true) */
        bool clipboard; /* the sandbox's OSC 52 clipboard writes reach the terminal (default false) */
        /* ca_certificates: "host" (the host's trust store) and PEM files,
         * canonical, in order, NULL-terminated; NULL: none (the image's own). */
        char **ca_files;
        size_t n_ca_files;
        ConfigWhere ca_where;
        ConfigEnvVar *env;
        size_t n_env;
        ConfigVolume *volumes;
        size_t n_volumes;
        /* The Derived Network Policy: [network] with this profile's
         * allow_egress (valid only when the configuration is). */
        NetPolicy net;
        char net_digest[NETPOLICY_DIGEST_HEX_LEN + 1];
        char *net_canonical; /* net in canonical form (what net_digest is of) */
        /* Resolved for the configuration's workspace (spec §3.2.2, §4.3.1).
         * A branch-mode profile in a directory of a git repository works
         * from the repository's root: its Domain is the root's, whichever
         * directory of the repository it was started in. */
        char *repo_root; /* canonical; NULL in direct mode or outside a repository (a .git directory) */
        char *workspace_subdir; /* the workspace relative to repo_root; NULL at the root or without one */
        char *profile_dir; /* {data_root}/{profile_name} */
        char domain_hash[13];
        char *domain_dir; /* {data_root}/domains/{domain_hash} */
} ConfigProfile;

typedef enum ConfigTrust {
        CONFIG_TRUST_NONE, /* there is no workspace file */
        CONFIG_TRUST_UNTRUSTED, /* never trusted: it may only narrow */
        CONFIG_TRUST_CHANGED, /* trusted once, changed since: it may only narrow */
        CONFIG_TRUST_TRUSTED, /* its exact bytes are trusted */
        CONFIG_TRUST_EXPLICIT, /* the person named it with --config */
        _CONFIG_TRUST_MAX,
        _CONFIG_TRUST_INVALID = -EINVAL,
} ConfigTrust;

const char *config_trust_to_string(ConfigTrust t);

/* The workspace's lazaret.toml as it was read. */
typedef struct ConfigWorkspaceFile {
        char *path; /* <workspace>/lazaret.toml */
        bool exists;
        char sha256[WSTRUST_SHA256_HEX_LEN + 1]; /* of the bytes parsed */
        ConfigTrust trust;
        int64_t trusted_when; /* TRUSTED or CHANGED: when the record was made */
        char *store; /* the trust store consulted */
        /* What it adds over the trusted files (filled when it is untrusted,
         * or when ConfigLoadOptions.trust_workspace asks). Points into the
         * workspace file's tree. */
        ConfigWidenings widenings;
} ConfigWorkspaceFile;

typedef struct Config {
        ConfigSource *sources; /* lowest precedence first */
        size_t n_sources;
        ConfigNode root;
        char *workspace; /* canonical */
        char *home;
        char *default_profile; /* default_profile: the profile of a verb given none; NULL: the only one */
        char *data_root; /* expanded and canonicalized */
        size_t n_default_allow; /* valid entries of each (compiled into each profile's net) */
        size_t n_default_deny;
        bool ipv6_enabled; /* network.ipv6 = "enabled" (default) | "disabled" */
        NetAddr *resolvers; /* network.resolvers, as written */
        size_t n_resolvers;
        ConfigProbe *probe_targets; /* network.probe_targets */
        size_t n_probe_targets;
        char *probe_dns_name; /* network.probe_dns_name */
        DomainRule *default_domains; /* network.default_domains */
        size_t n_default_domains;
        DomainRule *probe_domains; /* network.probe_domains: exact names the launch reaches through the broker */
        ConfigWhere *probe_domains_where;
        size_t n_probe_domains;
        uint64_t broker_connections; /* network.broker_connections */
        bool escalation_enabled;
        char *socket_dir; /* expanded and canonicalized */
        char *runsc; /* runtime.runsc, expanded and canonicalized; NULL: the runsc on PATH */
        char *agent; /* --agent NAME: its own Domain and branch on this workspace and profile; NULL: none */
        char *memory_cgroup; /* runtime.memory_cgroup (cgroup v1 memory, writable), or the one setup gives
                              * the user (memory_cgroup_found); NULL: none */
        bool memory_cgroup_found; /* not configured: CONFIG_MEMORY_CGROUP_ROOT/lazaret-USER, found */
        char *memory_cgroup_why; /* neither: why none was found, naming the fix */
        char **auto_approve; /* as written */
        size_t n_auto_approve;
        AutoApproveRule *auto_rules; /* parsed: programs resolved in AUTOAPPROVE_SEARCH_PATH */
        size_t n_auto_rules;
        uint64_t escalation_output_max; /* escalation.output_limit, bytes per stream */
        uint64_t escalation_time_limit; /* escalation.time_limit, seconds */
        ConfigProfile *profiles;
        size_t n_profiles;
        /* [workspace] protect and mask: path patterns (path-pattern.h)
         * beyond the built-in lists, from every file (an untrusted
         * workspace file's added). */
        char **protect;
        size_t n_protect;
        char **mask;
        size_t n_mask;
        ConfigWorkspaceFile wsfile;
} Config;

typedef struct ConfigLoadOptions {
        const char *explicit_path; /* --config FILE, or NULL */
        const char *workspace; /* --workspace DIR, or NULL for the current directory */
        const char *agent; /* --agent NAME, or NULL */
        /* lazaret trust: take the workspace file as trusted (to validate
         * what trusting it would give) and list what it adds. */
        bool trust_workspace;
        /* For verbs that start nothing (status, stop, audit, diff, reset):
         * an untrusted workspace file that would widen the sandbox is left
         * out with a warning per key, rather than refused. */
        bool ignore_widening_workspace;
        /* No profile needs an image: a launch with --backend native runs
         * the host's own programs whatever the profiles' backend keys say
         * (issue 45), and a verb that starts nothing (status, stop, diff)
         * looks at none. */
        bool image_optional;
} ConfigLoadOptions;

/* Find, read, merge and validate the configuration.
 *
 * Returns 0 with *ret set when the configuration is valid (diags may hold
 * warnings). Returns -EINVAL when it is not (diags holds at least one error;
 * *ret untouched), -EPERM when an untrusted workspace file would widen the
 * sandbox (one error per key, and nothing else was checked), -ENOENT when no configuration file exists at all (also
 * described in diags), -ENOTDIR when the workspace cannot be resolved (the
 * reason is in diags, without a file), or -ENOMEM. */
int config_load(const ConfigLoadOptions *o, Config **ret, ConfigDiags *diags);

/* Dotted name of a key below a parent name, e.g. "profiles.claude.image";
 * keys that are not bare are quoted as TOML basic strings. Caller frees. */
/* Text from a file or another program quoted for a message: printable ASCII
 * as is, everything else \x-escaped (no terminal escapes get through), cut
 * at 64 bytes. NULL on OOM. */
char *config_quoted(const char *s, size_t n);
char *config_key_path(const char *parent, const char *key);

/* The parsed documents (the sources' TOML trees and the merged tree over
 * them) freed, the rest of c kept: what a launch needs no longer, once its
 * spec is built (a policy of 10,000 prefixes is 20,000 allocations, freed
 * beside the coordinator's start instead of at the end). c->root is empty
 * from then on. */
void config_drop_documents(Config *c);
Config *config_free(Config *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(Config *, config_free)

const ConfigProfile *config_find_profile(const Config *c, const char *name);
const ConfigNode *config_node_get(const ConfigNode *n, const char *key);

/* Build the sandbox environment of a profile: "NAME=value" strings, with
 * env:VAR values read from the host environment now. A host variable that is
 * not set is an error naming it (one diag per variable; returns -EINVAL).
 * The caller frees the vector and its strings. */
int config_profile_env(const ConfigProfile *p, char ***ret_envv, size_t *ret_n, ConfigDiags *diags);

/* The user configuration file path ($XDG_CONFIG_HOME or ~/.config). */
int config_user_path(char **ret);

/* Home directory: $HOME when set and absolute, else the passwd entry. */
int config_home(char **ret);

/* The memory cgroup scripts/setup.sh gives a user, which runtime.memory_cgroup
 * left unset stands for: CONFIG_MEMORY_CGROUP_ROOT/lazaret-USER (user NULL:
 * the uid), when it is a directory of the cgroup v1 memory hierarchy that
 * uid owns and may make cgroups in. Returns 1 and its path, 0 and why not
 * (a sentence naming the fix), or -ENOMEM. */
#define CONFIG_MEMORY_CGROUP_ROOT "/sys/fs/cgroup/memory"
int config_memory_cgroup_find(uid_t uid, const char *user, char **ret_path, char **ret_why);

/* Resolve --workspace (NULL: the current directory) to a canonical directory. */
int config_workspace(const char *arg, char **ret);

/* Check an image reference against the rules profiles follow:
 * registry/path[:tag][@sha256:<64 hex>], the registry a host name with a '.'
 * or ':', or "localhost"; path components lowercase. Returns NULL when ref is
 * valid, else a static one-line reason (no trailing period). If ret_pinned is
 * not NULL it is set to whether ref carries a digest (false when invalid). */
const char *config_image_problem(const char *ref, bool *ret_pinned);

/* Domain Anchor (spec §4.3.1): the first 12 hex digits of
 * SHA-256("<profile>:<canonical workspace>"). ret must hold 13 bytes. */
int config_domain_hash(const char *profile, const char *workspace, const char *agent, char ret[13]);

void strv_free_n(char **v, size_t n);

/* The canonical bytes of a profile's policy and its digest in one go. */
int config_profile_netpolicy_canonical(const ConfigProfile *p, char **ret, size_t *ret_len);

/* Parse "ADDR:PORT" or "[ADDR6]:PORT". */
int probe_target_parse(const char *s, NetAddr *ret_addr, uint16_t *ret_port);
