/* SPDX-License-Identifier: MIT */
#pragma once

/* The Derived Network Policy (schema "Derived network policy", decision 7).
 *
 * One disposition (enabled or disabled) per address family; one default
 * action per enabled family; canonical prefix rules, sorted, without
 * duplicates, no two rules on the same prefix; resolvers. Longest prefix
 * wins; a /0 rule is not a rule but the family's default action.
 *
 * The canonical form is a small line format, also the bytes the sidecar reads
 * from its sealed memfd:
 *
 *   lazaret-derived-network-policy v1
 *   family ipv4 enabled default deny
 *   family ipv6 disabled
 *   rule 10.0.0.0/8 deny
 *   rule 198.51.100.0/24 allow
 *   resolver 198.51.100.53
 *
 * Rules sort IPv4 before IPv6, then by address bytes, then by prefix length;
 * resolvers likewise. netpolicy_parse() accepts exactly what
 * netpolicy_format() writes and nothing else. The policy's identity is
 * SHA-256(NETPOLICY_DIGEST_DOMAIN || canonical bytes).
 *
 * The permitted space is installed as routes (netpolicy_routes): explicit
 * gateway routes that cover exactly the permitted addresses, never a default
 * route (gVisor ignores blackhole and prohibit routes), plus a prohibit
 * route for every deny rule so kernel-stack connects fail fast.
 *
 * libc only, so the static sidecar links it (the digest is separate, in
 * netpolicy-digest.c). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"
#include "macro.h"

#define NETPOLICY_SCHEMA         "lazaret-derived-network-policy v1"
#define NETPOLICY_DIGEST_DOMAIN  "lazaret/derived-network-policy/v1\n"
#define NETPOLICY_RULES_MAX      65536u
#define NETPOLICY_RESOLVERS_MAX  16u
#define NETPOLICY_CANONICAL_MAX  (4u * 1024u * 1024u)
#define NETPOLICY_DIGEST_HEX_LEN 64u

typedef enum NetFamily {
        NET_IPV4,
        NET_IPV6,
        _NET_FAMILY_MAX,
} NetFamily;

typedef enum NetAction {
        NET_DENY,
        NET_ALLOW,
} NetAction;

typedef struct NetRule {
        Cidr prefix;
        NetAction action;
} NetRule;

typedef struct NetAddr {
        int family; /* AF_INET or AF_INET6 */
        uint8_t addr[16];
} NetAddr;

typedef struct NetPolicy {
        bool enabled[_NET_FAMILY_MAX];
        NetAction default_action[_NET_FAMILY_MAX]; /* meaningful for enabled families */
        NetRule *rules; /* canonical order, no /0, no two on one prefix */
        size_t n_rules;
        NetAddr *resolvers; /* canonical order, no duplicates */
        size_t n_resolvers;
} NetPolicy;

/* What the configuration said, in its order; where_index lets the caller
 * name the entry an error is about. */
typedef struct NetPolicyEntry {
        Cidr prefix;
        NetAction action;
        size_t where_index;
} NetPolicyEntry;

typedef struct NetPolicyError {
        size_t where_index; /* the entry (or resolver, see is_resolver) at fault */
        bool is_resolver;
        bool has_other;
        size_t other_index; /* for conflicts: the earlier entry */
        char message[256];
} NetPolicyError;

NetFamily net_family_of(int af);
const char *net_family_to_string(NetFamily f);
const char *net_action_to_string(NetAction a);

/* Build the canonical policy. Entries in a disabled family, equal-prefix
 * conflicts, resolvers of a disabled family and resolvers the policy denies
 * are errors (-EINVAL, *ret_error filled, *ret untouched). Equal entries with
 * the same action are merged. */
int netpolicy_build(const bool enabled[_NET_FAMILY_MAX], const NetPolicyEntry *entries, size_t n_entries,
                    const NetAddr *resolvers, size_t n_resolvers, NetPolicy *ret, NetPolicyError *ret_error);

/* Give p (built) the resolvers, each checked against it as netpolicy_build
 * does (its family enabled, the policy permitting it), sorted and without
 * duplicates; on -EINVAL *ret_error says which, and p is unchanged. */
int netpolicy_set_resolvers(NetPolicy *p, const NetAddr *resolvers, size_t n_resolvers, NetPolicyError *ret_error);

void netpolicy_done(NetPolicy *p);

/* A deep copy of p into *ret; -ENOMEM. */
int netpolicy_copy(const NetPolicy *p, NetPolicy *ret);

/* The canonical bytes (NUL-terminated for convenience; the NUL is not part
 * of them). Returns -ENOMEM or 0. */
int netpolicy_format(const NetPolicy *p, char **ret, size_t *ret_len);

/* Parse canonical bytes; anything netpolicy_format would not have written is
 * -EINVAL with a static reason. */
int netpolicy_parse(const char *buf, size_t len, NetPolicy *ret, const char **ret_error);

/* The policy's verdict for an address: longest matching rule, else the
 * family's default; a disabled family denies. */
NetAction netpolicy_verdict(const NetPolicy *p, const NetAddr *a);

/* True when the policy permits no address at all (loopback-only sandbox). */
bool netpolicy_permits_nothing(const NetPolicy *p);
bool netpolicy_family_permits_any(const NetPolicy *p, NetFamily f);

typedef struct NetRoute {
        Cidr prefix;
        bool permit; /* gateway route; false: prohibit route */
} NetRoute;

/* The routes for one family, permitted cover first (in address order), then
 * the prohibit routes. A disabled family has none. */
int netpolicy_routes(const NetPolicy *p, NetFamily f, NetRoute **ret, size_t *ret_n);

/* The first max (at most) permitted routes of netpolicy_routes' cover of f,
 * in its order, without making the rest (the probes want a few of them). */
int netpolicy_permitted_routes(const NetPolicy *p, NetFamily f, size_t max, NetRoute **ret, size_t *ret_n);

/* The routes for the kernel's own stack (the native backend, runsc_network =
 * "host"), which matches the longest prefix and refuses at a prohibit route:
 * a gateway route for each allow rule, a prohibit route for each deny rule,
 * and the family's two halves as gateway routes when it allows by default
 * (never a default route); no route is "denied" as well. One route per rule
 * instead of the cover's exact permitted space (about 3.7 routes per rule on
 * the bench's 10,000 prefixes). Never for gVisor's own stack, which ignores
 * prohibit routes: every deny rule inside a permitted prefix would be
 * reachable there. */
int netpolicy_kernel_routes(const NetPolicy *p, NetFamily f, NetRoute **ret, size_t *ret_n);

/* The permitted space of one family as blocks with exceptions (the shape
 * of Kubernetes' NetworkPolicy ipBlock: a prefix less some prefixes inside
 * it): a block for each allow rule that changes the verdict (and for the
 * family's /0 when it allows by default), less the deny rules that change
 * it back directly beneath. The blocks' union, exceptions taken out, is
 * exactly what netpolicy_verdict() allows; the prefixes are the policy's
 * own rules. A disabled family has none. */
typedef struct NetBlock {
        Cidr cidr;
        Cidr *except; /* strictly inside cidr, in canonical order */
        size_t n_except;
} NetBlock;

int netpolicy_blocks(const NetPolicy *p, NetFamily f, NetBlock **ret, size_t *ret_n);
void netpolicy_blocks_free(NetBlock *b, size_t n);

/* A destination inside a prefix suitable for probing it: for a deny rule, its
 * first address that the policy really denies (a more specific allow may
 * cover part of it); returns false when the rule denies nothing. */
bool netpolicy_denied_probe_address(const NetPolicy *p, const NetRule *rule, NetAddr *ret);

/* The host's own addresses (issue 14): whatever the configuration says,
 * the sandbox must not reach the machine it runs on through one of them. */
typedef enum HostAddrEffect {
        HOST_ADDR_IMPLICIT_DENY, /* the policy would permit it: a rule now denies it */
        HOST_ADDR_POLICY_DENIES, /* the policy denies it already */
        HOST_ADDR_RESOLVER, /* a configured resolver: permitted as configured */
        _HOST_ADDR_EFFECT_MAX,
} HostAddrEffect;

const char *host_addr_effect_to_string(HostAddrEffect e);

/* Deny each of addrs the policy would permit, with a rule on the whole
 * address (/32, /128), which no configured rule outweighs (an allow rule on
 * that very prefix becomes deny). A configured resolver stays permitted.
 * ret_effect (n entries) may be NULL. Returns the number of rules added or
 * changed, -E2BIG past NETPOLICY_RULES_MAX, -ENOMEM. */
int netpolicy_deny_addresses(NetPolicy *p, const NetAddr *addrs, size_t n, HostAddrEffect *ret_effect);

int netaddr_parse(const char *s, NetAddr *ret);
void netaddr_format(const NetAddr *a, char *buf, size_t size);
bool cidr_contains(const Cidr *c, const NetAddr *a);
