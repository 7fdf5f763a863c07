/* SPDX-License-Identifier: MIT */
#pragma once

/* The Network Sidecar (spec §1.1, FR-3, decision 7): a runc container from
 * the scratch image holding lazaret-netd alone, named lazaret-net-<hash>,
 * whose network namespace the sandbox joins. The policy reaches netd as a
 * sealed memfd (fd 3); netd answers on a SOCK_SEQPACKET control socket
 * (fd 4) with its attestation, and takes updates there. Rootless, the
 * namespace's uplink is slirp4netns; rootful, Podman's default bridge.
 *
 * The native backend's sidecar is no container (issue 45): netd in a user
 * and network namespace the coordinator makes for it, slirp4netns its
 * uplink, both the coordinator's children (sidecar_own_namespace). */

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "launch.h"
#include "netpolicy.h"
#include "sandbox.h"

/* The Derived Network Policy in force: the declared one with the host's
 * own addresses denied, kept parsed, in canonical form and by its digest,
 * once per change (the launch's LaunchSpec keeps the declared one). */
typedef struct PolicyInForce {
        NetPolicy parsed;
        char *canonical;
        char digest[65]; /* "" while none is set */
        bool own_rules; /* made by the profile's own address rules, not the global ones */
} PolicyInForce;

void policy_in_force_done(PolicyInForce *p);

typedef struct Sidecar {
        char *name; /* lazaret-net-<hash> */
        char *id; /* container id */
        pid_t conmon_pid;
        pid_t netd_pid; /* on the host */
        int ctl_fd; /* our end of the control socket */
        json_t *attestation; /* netd's last one */
        bool kernel_stack; /* netd --kernel-stack: routes for the kernel's longest match */
        /* No container (the native backend): netd is our child in a
         * namespace of its own, slirp4netns its uplink; closing exit_fd
         * ends slirp4netns. */
        bool own_namespace;
        pid_t uplink_pid;
        int uplink_exit_fd;
        /* Started early (sidecar_prestart), not finished: netd waits on
         * go_fd for its policy, slirp4netns says it is ready on
         * uplink_ready_fd; with the flags it was started with. */
        int go_fd, uplink_ready_fd;
        bool pre_ipv6, pre_ipv6_uplink;
        uint64_t started_usec;
        /* Kept between runs (issue 45): keep_dir (the Domain's) holds
         * netd.sock, where netd listens once it is kept, and netd.key
         * ("KEY UPLINK-PID IPV6 IPV6-UPLINK"), what a later coordinator
         * shows it. keepable: netd took "keep" (it may outlive us);
         * kept: it is an earlier run's, reached on netd.sock, not our
         * child. */
        char *keep_dir;
        bool listening, keepable, kept;
} Sidecar;

/* The native backend's sidecar's first half, started early when the
 * policy permits something. First sidecar_prestart_kept: the namespace
 * kept from an earlier run of the Domain, connected to (which needs no
 * policy: sidecar_start decides whether it serves this one); true when it
 * is, or when there is nothing to start early (a container, no policy).
 * Else sidecar_prestart: netd in its namespace, slirp4netns attaching its
 * uplink, both side by side with the rest of the start; sidecar_start
 * finishes it (or, started with other flags or failed, starts it anew and
 * says what fails). declared: s's policy, parsed (NULL: parsed here). */
bool sidecar_prestart_kept(const LaunchSpec *s, Sidecar *sc);
void sidecar_prestart(const LaunchSpec *s, const NetPolicy *declared, Sidecar *sc);

/* The sidecar for s is a namespace of the coordinator's own, not a
 * container: the native backend (always rootless). */
bool sidecar_own_namespace(const LaunchSpec *s);

/* End the sidecar's own-namespace processes (netd, slirp4netns) and reap
 * them, and forget a kept namespace (netd.sock, netd.key); nothing for a
 * container (Podman removes that). */
void sidecar_stop_own(Sidecar *sc);

/* At a teardown that may keep it (issue 45): a netd that took "keep" stays,
 * with its uplink, its routes and its attestation, for the next run of
 * the Domain with the same policy (or until its idle time passes); we
 * only let go of it. Else as sidecar_stop_own. */
void sidecar_leave_own(Sidecar *sc, bool keep);

/* End the network namespace kept in domain_dir (lazaret stop with no
 * sandbox running): netd shown its key and told to quit. 1 when one was
 * ended, 0 when none was kept, -errno. */
int sidecar_end_kept(const char *domain_dir);

/* The name of the kept namespace's files in the Domain. */
#define SIDECAR_KEEP_SOCKET "netd.sock"
#define SIDECAR_KEEP_KEY    "netd.key"

/* Reap what of the own-namespace sidecar has exited (SIGCHLD); true when
 * it was the uplink, which the sandbox cannot do without. */
bool sidecar_reap(Sidecar *sc);

void sidecar_done(Sidecar *sc);

/* Accept netd's attestation (0) only for digest, with every route read back
 * and routes made for the stack that reads them (kernel_stack: the kernel's;
 * else gVisor's own); -EPROTO and *ret_error otherwise. */
int sidecar_check_attestation(json_t *a, const char *digest, bool kernel_stack, char **ret_error);

/* "lazaret-net-<hash>". */
int sidecar_name(const LaunchSpec *s, char **ret);

/* Build the image when missing, start the container with the policy in
 * force, wait for netd's attestation and check it (digest, routes
 * attested). On failure nothing is left running; -errno with *ret_error. */
int sidecar_start(const LaunchSpec *s, const PolicyInForce *pol, Sidecar *ret, char **ret_error);

/* Hand netd a new policy (canonical form) and check its new attestation. */
int sidecar_update(Sidecar *sc, const char *canonical, const char *digest, char **ret_error);

/* Probe reachability where the agent's traffic originates: the sidecar's
 * namespace (runsc_network = "host"), or inside the sandbox through runsc
 * exec of the mounted netd ("sandbox", where gVisor keeps its own copy of
 * the routes). Denied prefixes must be unreachable, permitted routes and
 * probe targets reachable, each resolver must answer. *ret_probe gets the
 * observations (schema NetworkReachabilityProbe) either way; a mismatch is
 * -EPROTO with *ret_error naming the destination. */
/* With runsc_network = "sandbox": write the policy's routes into gVisor's
 * own route table, from inside the sandbox, after sidecar_update; reads
 * them back. */
#define GVISOR_POLICY_ARG_MAX (120u * 1024u)
int sidecar_update_gvisor(const LaunchSpec *s, const Sidecar *sc, const SandboxInfo *sandbox, const char *canonical,
                          char **ret_error);

int sidecar_probe(const LaunchSpec *s, const Sidecar *sc, const SandboxInfo *sandbox, const NetPolicy *p,
                  json_t **ret_probe, char **ret_error);

/* The readiness fingerprint: SHA-256 over the canonical JSON of the
 * readiness identity, with a domain separator (schema "Network readiness"). */
int sidecar_readiness_fingerprint(json_t *identity, char ret[65]);
