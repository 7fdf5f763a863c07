/* SPDX-License-Identifier: MIT */
#pragma once

/* CIDR prefixes as written in the configuration ("10.0.0.0/8",
 * "fd00::/8"). Canonical form is required: the prefix length is explicit and
 * every host bit is zero, so "10.1.0.0/8" is an error rather than a silent
 * widening or narrowing. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Cidr {
        int family; /* AF_INET or AF_INET6 */
        uint8_t addr[16]; /* network byte order; first 4 bytes for AF_INET */
        unsigned prefixlen;
} Cidr;

/* Parse s. Returns 0, or -EINVAL with *ret_error pointing at a static
 * description ("missing prefix length", "host bits are set", ...). */
int cidr_parse(const char *s, Cidr *ret, const char **ret_error);

/* A dotted quad as inet_pton(AF_INET) takes it (four decimal numbers of
 * at most 255, no leading zero, nothing else) from s[0..n), into a[0..4);
 * false where it would refuse it. By hand: 10,000 prefixes are parsed
 * several times on each start (issue 45); tested against inet_pton. */
bool cidr_parse_ipv4(const char *s, size_t n, uint8_t a[4]);

/* Format canonically into buf (at least 50 bytes). */
size_t cidr_format(const Cidr *c, char *buf, unsigned long size);
