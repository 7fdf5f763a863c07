/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* What 'lazaret init' fits its starter configuration to. */
typedef struct StarterHost {
        bool sandbox_network_ok; /* runsc --network=sandbox works here (doctor's runsc-network) */
        bool rootful; /* root: rootful Podman, its default bridge */
        bool ipv6; /* rootless and the host routes global IPv6 (a route lookup) */
        char resolver[64]; /* rootful: the host's first nameserver a bridged sandbox can reach, or "" */
        /* The host's trust store has authorities of the host's own (files in
         * /usr/local/share/ca-certificates or /etc/pki/ca-trust/source/anchors),
         * which an image's store lacks: init offers ca_certificates = "host". */
        bool local_cas;
} StarterHost;

/* Everything but sandbox_network_ok, read off this host now. */
void starter_probe_host(StarterHost *ret);

/* The commented starter configuration that 'lazaret init' writes, for host
 * h: rootless, slirp4netns's resolver and IPv6 when the host has an IPv6
 * route; rootful, IPv6 off and the host's resolver (allowed by a /32).
 * The escalation socket directory is this user's runtime directory
 * ($XDG_RUNTIME_DIR, else /tmp/lazaret-<uid>). Caller frees. */
int starter_config(const StarterHost *h, char **ret);

typedef struct Preset Preset;

/* The commented profile NAME that uses preset ps, for 'lazaret init
 * --agent': what each of the preset's keys gives, as comments, and
 * ca_certificates = "host" where h has authorities of its own (commented
 * out otherwise). Caller frees. */
int starter_agent_profile(const char *name, const Preset *ps, const StarterHost *h, char **ret);
