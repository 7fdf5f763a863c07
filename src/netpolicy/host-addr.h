/* SPDX-License-Identifier: MIT */
#pragma once

/* The host's own addresses, read where the caller runs (the host's network
 * namespace: the CLI and the coordinator). The Derived Network Policy
 * denies each of them (netpolicy_deny_addresses), so no policy lets the
 * sandbox reach a service of the host through one of its addresses. */

#include <stddef.h>

#include "netpolicy.h"

/* Every address of every interface, both families, sorted and without
 * duplicates, except loopback (127.0.0.0/8, ::1): in the sandbox's network
 * namespace those are its own loopback, never the host's, and Podman's
 * slirp4netns runs with the host's loopback out of reach. -errno from
 * getifaddrs(3). */
int host_addresses_read(NetAddr **ret, size_t *ret_n);

typedef struct HostAddrs {
        NetAddr *addrs;
        HostAddrEffect *effects; /* what the policy made of each */
        size_t n;
} HostAddrs;

void host_addrs_done(HostAddrs *h);

/* Read the host's addresses and deny them in p (netpolicy_deny_addresses);
 * *ret (may be NULL) gets the addresses and what happened to each,
 * *ret_changed (may be NULL) how many rules were added or changed. On
 * failure p is unchanged. */
int host_addresses_deny(NetPolicy *p, HostAddrs *ret, int *ret_changed);
