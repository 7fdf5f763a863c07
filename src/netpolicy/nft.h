/* SPDX-License-Identifier: MIT */
#pragma once

/* A small nf_tables client for one job: a netdev table ("lazaret") whose
 * egress chains, one per uplink device, drop DNS (UDP and TCP to port 53)
 * towards any address but the resolvers.
 *
 * Why egress: with the kernel's stack (runsc_network = "host") the route
 * rules already send port 53 nowhere but to the resolvers; gVisor's own
 * stack (runsc_network = "sandbox") writes whole frames to the device from
 * a packet socket and never consults the namespace's routes or rules, but
 * the device's egress hook sees every frame that leaves, from either stack.
 *
 * libc only, like rtnl.c: lazaret-netd is static, and Debian ships libmnl
 * (which libnftnl needs) as a shared library alone. The messages are few
 * and fixed; the whole table is replaced in one transaction, and the check
 * reads every chain and rule back and compares them with what was meant.
 * Tested against nft(8) reading the table back (tests/integration/
 * test_netd.py). */

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>

#include "netpolicy.h"

#define NFT_DNS_TABLE       "lazaret"
#define NFT_DNS_DEVICES_MAX 2

typedef struct NftDns {
        char devices[NFT_DNS_DEVICES_MAX][IF_NAMESIZE];
        size_t n_devices;
        bool family[_NET_FAMILY_MAX]; /* the families whose port 53 to filter */
        const NetAddr *resolvers;
        size_t n_resolvers;
} NftDns;

/* Replace the table with d's chains and rules in one transaction (the old
 * ones hold until the new ones are in). 0, or the kernel's error with
 * *ret_why naming the step. */
int nft_dns_apply(const NftDns *d, const char **ret_why);

/* Read the table back: 0 when it holds exactly d's chains and rules (the
 * number of rules in *ret_rules), -EPROTO with *ret_why when it differs,
 * another error when it cannot be read. */
int nft_dns_check(const NftDns *d, size_t *ret_rules, const char **ret_why);
