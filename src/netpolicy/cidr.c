/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "cidr.h"

bool cidr_parse_ipv4(const char *s, size_t n, uint8_t a[4]) {
        size_t i = 0;
        for (unsigned part = 0; part < 4; part++) {
                if (part > 0) {
                        if (i >= n || s[i] != '.')
                                return false;
                        i++;
                }
                unsigned v = 0, digits = 0;
                for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
                        if (digits > 0 && v == 0)
                                return false; /* a leading zero */
                        v = v * 10 + (unsigned) (s[i] - '0');
                        if (v > 255)
                                return false;
                }
                if (digits == 0)
                        return false;
                a[part] = (uint8_t) v;
        }
        return i == n;
}

int cidr_parse(const char *s, Cidr *ret, const char **ret_error) {
        char addr[INET6_ADDRSTRLEN + 1];
        const char *slash = strchr(s, '/');
        Cidr c = {};

        if (!slash) {
                *ret_error = "missing prefix length (write e.g. 10.0.0.0/8 or 2001:db8::/32)";
                return -EINVAL;
        }
        size_t alen = (size_t) (slash - s);
        if (alen == 0 || alen >= sizeof(addr)) {
                *ret_error = "not an IPv4 or IPv6 address";
                return -EINVAL;
        }
        memcpy(addr, s, alen);
        addr[alen] = '\0';

        if (cidr_parse_ipv4(addr, alen, c.addr))
                c.family = AF_INET;
        else if (inet_pton(AF_INET, addr, c.addr) == 1)
                c.family = AF_INET;
        else if (inet_pton(AF_INET6, addr, c.addr) == 1)
                c.family = AF_INET6;
        else {
                *ret_error = "not an IPv4 or IPv6 address";
                return -EINVAL;
        }

        const char *p = slash + 1;
        unsigned max = c.family == AF_INET ? 32 : 128, len = 0;
        if (*p == '\0' || (p[0] == '0' && p[1] != '\0')) {
                *ret_error = "prefix length must be a decimal number without leading zeros";
                return -EINVAL;
        }
        for (; *p; p++) {
                if (*p < '0' || *p > '9') {
                        *ret_error = "prefix length must be a decimal number without leading zeros";
                        return -EINVAL;
                }
                len = len * 10 + (unsigned) (*p - '0');
                if (len > max) {
                        *ret_error = c.family == AF_INET ? "prefix length is larger than 32"
                                                         : "prefix length is larger than 128";
                        return -EINVAL;
                }
        }
        c.prefixlen = len;

        unsigned bytes = max / 8;
        for (unsigned i = 0; i < bytes; i++) {
                unsigned first = i * 8;
                uint8_t mask = first >= len ? 0 : (len - first >= 8 ? 0xff : (uint8_t) (0xff << (8 - (len - first))));
                if (c.addr[i] & (uint8_t) ~mask) {
                        *ret_error = "host bits are set (the address must be the network address of the prefix)";
                        return -EINVAL;
                }
        }
        *ret = c;
        return 0;
}

/* Decimal digits of v (< 1000) at p; the end. */
static char *put_dec(char *p, unsigned v) {
        if (v >= 100)
                *p++ = (char) ('0' + v / 100);
        if (v >= 10)
                *p++ = (char) ('0' + v / 10 % 10);
        *p++ = (char) ('0' + v % 10);
        return p;
}

size_t cidr_format(const Cidr *c, char *buf, unsigned long size) {
        /* IPv4 by hand: a policy of 10,000 prefixes is formatted several
         * times on each start (issue 45), and inet_ntop and snprintf
         * were most of it. */
        if (c->family == AF_INET && size >= sizeof("255.255.255.255/32")) {
                char *p = buf;
                for (size_t i = 0; i < 4; i++) {
                        p = put_dec(p, c->addr[i]);
                        *p++ = i < 3 ? '.' : '/';
                }
                p = put_dec(p, c->prefixlen);
                *p = '\0';
                return (size_t) (p - buf);
        }
        char a[INET6_ADDRSTRLEN];
        inet_ntop(c->family, c->addr, a, sizeof(a));
        int n = snprintf(buf, size, "%s/%u", a, c->prefixlen);
        return n < 0 || size == 0 ? 0 : (size_t) n < size ? (size_t) n : size - 1;
}
