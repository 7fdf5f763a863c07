/* SPDX-License-Identifier: MIT */
#pragma once

/* CIDR prefixes as written in the configuration ("10.0.0.0/8",
 * "fd00::/8"). Canonical form is required: the prefix length is explicit and
 * every host bit is zero, so "10.1.0.0/8" is an error rather than a silent
 * widening or narrowing. */

#include <stdint.h>

typedef struct Cidr {
        int family; /* AF_INET or AF_INET6 */
        uint8_t addr[16]; /* network byte order; first 4 bytes for AF_INET */
        unsigned prefixlen;
} Cidr;

/* Parse s. Returns 0, or -EINVAL with *ret_error pointing at a static
 * description ("missing prefix length", "host bits are set", ...). */
int cidr_parse(const char *s, Cidr *ret, const char **ret_error);

/* Format canonically into buf (at least 50 bytes). */
void cidr_format(const Cidr *c, char *buf, unsigned long size);
