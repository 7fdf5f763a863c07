/* SPDX-License-Identifier: MIT */
#pragma once

/* Egress by name (issue 18): the rules of allow_domains and
 * [network] default_domains, and the names a client asks the broker for.
 *
 * A rule is NAME[:PORT]. NAME is an exact host name, or "*.SUFFIX" where
 * the star stands for exactly one label: "*.example.com" matches
 * "a.example.com", never "a.b.example.com" nor "example.com" itself (list
 * that too). SUFFIX has at least two labels ("*.com" is refused as too
 * wide). PORT is 1..65535 and defaults to 443.
 *
 * Names are canonical: ASCII letters, digits and hyphens (LDH) in labels of
 * 1..63 bytes that neither start nor end with a hyphen, lower case, at most
 * 253 bytes without the one trailing dot that may be written, and the last
 * label not all digits (so "127.1" is no name). Upper case is folded and
 * one trailing dot removed; anything else (a byte outside LDH, an empty
 * label, a NUL, "%", a space, non-ASCII: IDN only as punycode "xn--...")
 * is an error with a static reason.
 *
 * libc only: the static relay links it. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DOMAIN_NAME_MAX     253u /* bytes, without a trailing dot */
#define DOMAIN_LABEL_MAX    63u
#define DOMAIN_PORT_DEFAULT 443u

typedef struct DomainRule {
        char name[DOMAIN_NAME_MAX + 1]; /* canonical; for a wildcard, the SUFFIX without "*." */
        bool wildcard;
        uint16_t port;
} DomainRule;

/* Canonicalize the host name in (len bytes, no NUL needed; a NUL among them
 * is an error) into out (DOMAIN_NAME_MAX + 1 bytes, NUL-terminated).
 * Returns 0, or -EINVAL with *ret_error a static reason ("a label is longer
 * than 63 bytes", "the name has a byte that is not a letter, digit, hyphen
 * or dot", ...). An IP literal is not a name: -EINVAL ("an IP address, not
 * a name") for dotted-quad-like input whose last label is all digits, and
 * for anything inet_aton(3) would read as an IPv4 address ("127.1",
 * "0x7f.0.0.1", "0x7f000001": one to four decimal, octal or 0x-hex labels). */
int domain_name_canonical(const char *in, size_t len, char out[static DOMAIN_NAME_MAX + 1], const char **ret_error);

/* Parse a rule "NAME[:PORT]" or "*.SUFFIX[:PORT]". Returns 0, or -EINVAL
 * with *ret_error a static reason. */
int domain_rule_parse(const char *s, DomainRule *ret, const char **ret_error);

/* Format a rule canonically ("*.example.com:443"; the port always
 * written) into buf (at least DOMAIN_NAME_MAX + 9 bytes). */
void domain_rule_format(const DomainRule *r, char *buf, size_t size);

/* Does rule r permit the canonical name at port? */
bool domain_rule_match(const DomainRule *r, const char *name, uint16_t port);

/* The first rule of rules[] that permits name at port, or NULL. When no rule
 * permits it, *ret_name_listed (may be NULL) says whether some rule names
 * it on another port (so the refusal can say "port not listed" rather than
 * "name not listed"); when a rule permits it, *ret_name_listed is true. */
const DomainRule *domain_rules_find(const DomainRule *rules, size_t n, const char *name, uint16_t port,
                                    bool *ret_name_listed);
