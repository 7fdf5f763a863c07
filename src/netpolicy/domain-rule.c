/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "domain-rule.h"

#define REASON_IP_ADDRESS "an IP address, not a name"

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool is_hex_digit(char c) {
        return is_digit(c) || (c >= 'a' && c <= 'f');
}

static bool all_digits(const char *l, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!is_digit(l[i]))
                        return false;
        return n > 0;
}

/* A label inet_aton(3) would read as a number: decimal (or octal), or "0x"
 * and hex digits. Such names never reach a resolver as names, so
 * "0x7f.1" is refused like "127.1" (the label is already lower case). */
static bool label_is_number(const char *l, size_t n) {
        if (n >= 2 && l[0] == '0' && l[1] == 'x') {
                for (size_t i = 2; i < n; i++)
                        if (!is_hex_digit(l[i]))
                                return false;
                return true;
        }
        return all_digits(l, n);
}

static const char *byte_error(unsigned char c) {
        if (c == '\0')
                return "the name has a NUL byte";
        if (c == ' ')
                return "the name has a space";
        if (c == '%')
                return "the name has a '%' (percent-encoding is not a host name)";
        if (c == '*')
                return "the name has a '*' (a wildcard is not a host name)";
        if (c >= 0x80)
                return "the name has a non-ASCII byte (write an international name as punycode \"xn--...\")";
        return "the name has a byte that is not a letter, digit, hyphen or dot";
}

static bool is_ldh(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int domain_name_canonical(const char *in, size_t len, char out[static DOMAIN_NAME_MAX + 1], const char **ret_error) {
        char buf[DOMAIN_NAME_MAX + 1];

        /* The byte check comes first and covers the whole input: its reason
         * is the most precise, and a long input with a bad byte should hear
         * about the byte. */
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) in[i];
                if (!is_ldh(c) && c != '.') {
                        *ret_error = byte_error(c);
                        return -EINVAL;
                }
        }

        if (len > 0 && in[len - 1] == '.')
                len--;
        if (len == 0) {
                *ret_error = "the name is empty";
                return -EINVAL;
        }
        if (len > DOMAIN_NAME_MAX) {
                *ret_error = "the name is longer than 253 bytes";
                return -EINVAL;
        }

        size_t n_labels = 0, last = 0;
        bool all_numbers = true;
        for (size_t start = 0; start <= len;) {
                size_t end = start;
                while (end < len && in[end] != '.')
                        end++;
                size_t n = end - start;
                if (n == 0) {
                        *ret_error = "the name has an empty label (\"..\" or a leading dot)";
                        return -EINVAL;
                }
                if (n > DOMAIN_LABEL_MAX) {
                        *ret_error = "a label is longer than 63 bytes";
                        return -EINVAL;
                }
                if (in[start] == '-' || in[end - 1] == '-') {
                        *ret_error = "a label starts or ends with a hyphen";
                        return -EINVAL;
                }
                for (size_t i = start; i < end; i++)
                        buf[i] = in[i] >= 'A' && in[i] <= 'Z' ? (char) (in[i] - 'A' + 'a') : in[i];
                if (end < len)
                        buf[end] = '.';
                if (!label_is_number(buf + start, n))
                        all_numbers = false;
                n_labels++;
                last = start;
                start = end + 1;
        }
        buf[len] = '\0';

        /* inet_aton(3) takes 1 to 4 numeric parts ("127.1", "0x7f000001"). */
        if (all_numbers && n_labels <= 4) {
                *ret_error = REASON_IP_ADDRESS;
                return -EINVAL;
        }
        if (all_digits(buf + last, len - last)) {
                *ret_error = "the last label is all digits";
                return -EINVAL;
        }

        memcpy(out, buf, len + 1);
        return 0;
}

static int parse_port(const char *p, uint16_t *ret, const char **ret_error) {
        unsigned v = 0;

        if (*p == '\0') {
                *ret_error = "the port after ':' is empty";
                return -EINVAL;
        }
        for (const char *q = p; *q; q++)
                if (!is_digit(*q)) {
                        *ret_error = "the port must be a decimal number without sign or leading zeros";
                        return -EINVAL;
                }
        if (p[0] == '0' && p[1] != '\0') {
                *ret_error = "the port must be a decimal number without sign or leading zeros";
                return -EINVAL;
        }
        for (; *p; p++) {
                v = v * 10 + (unsigned) (*p - '0');
                if (v > 65535)
                        break;
        }
        if (v < 1 || v > 65535) {
                *ret_error = "the port must be 1..65535";
                return -EINVAL;
        }
        *ret = (uint16_t) v;
        return 0;
}

/* Bare IPv6 ("::1", "2001:db8::1"): hex digits, colons and dots only, and
 * more than one colon. */
static bool looks_like_ipv6(const char *s) {
        size_t colons = 0;
        for (; *s; s++) {
                char c = *s >= 'A' && *s <= 'F' ? (char) (*s - 'A' + 'a') : *s;
                if (c == ':')
                        colons++;
                else if (!is_hex_digit(c) && c != '.')
                        return false;
        }
        return colons > 1;
}

int domain_rule_parse(const char *s, DomainRule *ret, const char **ret_error) {
        static const char ip_reason[] = REASON_IP_ADDRESS ": use a CIDR rule in allow_egress";
        DomainRule r = { .port = DOMAIN_PORT_DEFAULT };
        const char *why;
        int k;

        if (s[0] == '[' || looks_like_ipv6(s)) {
                *ret_error = ip_reason;
                return -EINVAL;
        }

        const char *colon = strchr(s, ':');
        size_t name_len = colon ? (size_t) (colon - s) : strlen(s);
        if (colon) {
                if (strchr(colon + 1, ':')) {
                        *ret_error = "the rule has more than one ':'";
                        return -EINVAL;
                }
                k = parse_port(colon + 1, &r.port, ret_error);
                if (k < 0)
                        return k;
        }

        const char *name = s;
        if (name_len >= 2 && name[0] == '*' && name[1] == '.') {
                r.wildcard = true;
                name += 2;
                name_len -= 2;
        } else if (name_len == 1 && name[0] == '*') {
                *ret_error = "a wildcard needs a suffix of at least two labels";
                return -EINVAL;
        }
        if (memchr(name, '*', name_len)) {
                *ret_error = "a '*' may only be the whole first label";
                return -EINVAL;
        }
        if (r.wildcard && (name_len == 0 || (name_len == 1 && name[0] == '.'))) {
                *ret_error = "a wildcard needs a suffix of at least two labels";
                return -EINVAL;
        }

        k = domain_name_canonical(name, name_len, r.name, &why);
        if (k < 0) {
                *ret_error = strcmp(why, REASON_IP_ADDRESS) == 0 ? ip_reason : why;
                return k;
        }

        if (r.wildcard) {
                if (!strchr(r.name, '.')) {
                        *ret_error = "a wildcard needs a suffix of at least two labels";
                        return -EINVAL;
                }
                /* A matching name is at least "x." longer than the suffix. */
                if (strlen(r.name) + 2 > DOMAIN_NAME_MAX) {
                        *ret_error = "the wildcard's suffix is too long for any name to match it";
                        return -EINVAL;
                }
        }

        *ret = r;
        return 0;
}

void domain_rule_format(const DomainRule *r, char *buf, size_t size) {
        if (size == 0)
                return;
        snprintf(buf, size, "%s%s:%u", r->wildcard ? "*." : "", r->name, (unsigned) r->port);
}

static bool name_match(const DomainRule *r, const char *name) {
        if (!r->wildcard)
                return strcmp(r->name, name) == 0;

        /* Exactly one label before ".SUFFIX", never the suffix itself. */
        size_t n = strlen(name), m = strlen(r->name);
        if (n < m + 2 || name[n - m - 1] != '.' || strcmp(name + n - m, r->name) != 0)
                return false;
        return memchr(name, '.', n - m - 1) == NULL;
}

bool domain_rule_match(const DomainRule *r, const char *name, uint16_t port) {
        return r->port == port && name_match(r, name);
}

const DomainRule *domain_rules_find(const DomainRule *rules, size_t n, const char *name, uint16_t port,
                                    bool *ret_name_listed) {
        bool listed = false;

        for (size_t i = 0; i < n; i++) {
                if (!name_match(&rules[i], name))
                        continue;
                if (rules[i].port == port) {
                        if (ret_name_listed)
                                *ret_name_listed = true;
                        return &rules[i];
                }
                listed = true;
        }
        if (ret_name_listed)
                *ret_name_listed = listed;
        return NULL;
}
