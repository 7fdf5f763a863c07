/* SPDX-License-Identifier: MIT */
#pragma once

/* Egress by name (issue 18): which addresses the Domain's broker may
 * connect to, and the server name a client's first bytes announce. Pure
 * functions, no I/O: the broker (src/broker) calls them, the unit tests
 * (tests/unit/test-egress-addr.c) pin them down.
 *
 * A name's answers are judged differently from the sandbox's own traffic:
 * the family's default action is not used (a profile that permits no CIDR
 * still reaches its listed names; that is the point of names), but an
 * answer is refused when
 *   - it is the host itself: one of the host's own addresses, its loopback
 *     (127.0.0.0/8, ::1) or the unspecified address (0.0.0.0/8, ::), which
 *     from the broker's namespace reach the host's own services; no rule
 *     permits these;
 *   - the longest explicit rule of the Derived Network Policy that covers it
 *     is a deny rule;
 *   - no explicit rule covers it, or only an allow rule wider than the
 *     range does, and it lies in a built-in non-public range (private,
 *     shared, link-local, multicast, reserved: DNS rebinding). An allow rule
 *     inside or equal to that range ("10.1.2.0/24", a test network's
 *     "198.51.100.0/24") lets it through; "0.0.0.0/1" does not;
 *   - it is an IPv6 form embedding an IPv4 address (IPv4-mapped
 *     ::ffff:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96, 6to4
 *     2002::/16) whose IPv4 address would be refused by the above.
 *
 * libc only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netpolicy.h"

typedef enum EgressWhy {
        EGRESS_WHY_HOST_ADDRESS, /* one of the host's own addresses */
        EGRESS_WHY_HOST_ITSELF, /* loopback or unspecified: the host itself */
        EGRESS_WHY_DENY_RULE, /* the longest explicit rule denies it */
        EGRESS_WHY_NON_PUBLIC, /* a built-in non-public range, no rule allows it */
        EGRESS_WHY_POLICY, /* IP literals only: the policy does not permit it */
        _EGRESS_WHY_MAX,
        _EGRESS_WHY_INVALID = -EINVAL,
} EgressWhy;

typedef struct EgressRefusal {
        EgressWhy why;
        const char *range; /* static: the built-in range ("10.0.0.0/8") or NULL */
        const char *embedding; /* static: "IPv4-mapped", "NAT64", ... when the embedded address was refused */
        NetAddr embedded;
} EgressRefusal;

/* A static description of why ("a deny rule of the network policy covers
 * it", ...). */
const char *egress_why_to_string(EgressWhy why);

/* Judge one answer of a name lookup. host_addrs (n entries, may be NULL
 * when n is 0) are the host's own addresses (host_addresses_read). Returns
 * 0 when the broker may connect to a, -EPERM when not, with *ret (may be
 * NULL) saying why. */
int egress_address_check(const NetPolicy *p, const NetAddr *host_addrs, size_t n, const NetAddr *a, EgressRefusal *ret);

/* Judge an IP literal a client asked for: the policy must permit it
 * (netpolicy_verdict: the longest rule, else the family's default, as for
 * the sandbox's own traffic, so going through the broker never reaches
 * more than the routes do), and it must not be the host itself nor embed
 * an IPv4 address that fails this check. 0 or -EPERM as above. */
int egress_literal_check(const NetPolicy *p, const NetAddr *host_addrs, size_t n, const NetAddr *a, EgressRefusal *ret);

/* One line of printable ASCII naming a and why it was refused
 * ("10.1.2.3 is in 10.0.0.0/8, a non-public range that no rule of the
 * network policy allows"); truncated to size. */
void egress_refusal_format(const NetAddr *a, const EgressRefusal *r, char *buf, size_t size);

/* The server name a client's first bytes announce, for the server-name
 * check (check_server_name): the SNI host name of a TLS ClientHello (when
 * buf starts with a TLS handshake record; the ClientHello may span
 * records), else the host of an HTTP/1.x request (its Host header; with an
 * absolute-form target the target's host, which must then equal the Host
 * header). The name is copied as sent, without any port, NUL-terminated,
 * into out (size bytes); the caller canonicalizes it.
 *
 * Returns 1 when found, 0 when more bytes are needed (the caller stops at
 * EGRESS_FIRST_BYTES_MAX), -ENOENT when the bytes are complete and name no
 * server (a ClientHello without SNI, a request without Host, not TLS nor
 * HTTP), -EINVAL when they are malformed (duplicate SNI or Host, lengths
 * that do not add up, a name too long for out); *ret_error (may be NULL)
 * gets a static reason for the negative ones. */
#define EGRESS_FIRST_BYTES_MAX (16u * 1024u)
int egress_server_name(const uint8_t *buf, size_t len, char *out, size_t size, const char **ret_error);

/* Whether buf (what egress_server_name() read a name from) is an HTTP
 * request rather than a TLS ClientHello. */
bool egress_is_http(const uint8_t *buf, size_t len);

/* The length of the HTTP/1.x request buf starts with: its head (through
 * the empty line) and its body (Content-Length; none without it), so that
 * the server-name check can look at every request of a kept-alive
 * connection, not only the first (issue 41). Call it once
 * egress_server_name() found the request's name.
 *
 * Returns 1 with *ret_len set, 0 when the head is not complete yet, or
 * -EINVAL when the length cannot be known: a body sent in chunks
 * (Transfer-Encoding), a Content-Length that is not a number or differs
 * from another; *ret_error (may be NULL) gets a static reason. */
int egress_http_request_length(const uint8_t *buf, size_t len, uint64_t *ret_len, const char **ret_error);
