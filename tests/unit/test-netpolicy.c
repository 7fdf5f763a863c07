/* SPDX-License-Identifier: MIT */
/* Unit tests of src/netpolicy/netpolicy: building, routes, probes. The
 * generated-policy comparison against Python's ipaddress lives in
 * tests/netpolicy-oracle.py; these are the cases worth reading. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "macro.h"
#include "netpolicy.h"

static const bool both[_NET_FAMILY_MAX] = { true, true };
static const bool v4only[_NET_FAMILY_MAX] = { true, false };

static NetPolicyEntry E(const char *cidr, NetAction a, size_t i) {
        NetPolicyEntry e = { .action = a, .where_index = i };
        const char *why;
        assert_int_equal(cidr_parse(cidr, &e.prefix, &why), 0);
        return e;
}

static NetAddr A(const char *s) {
        NetAddr a;
        assert_int_equal(netaddr_parse(s, &a), 0);
        return a;
}

typedef int (*RoutesFn)(const NetPolicy *p, NetFamily f, NetRoute **ret, size_t *ret_n);

/* The routes of one family as "CIDR " (gateway) and "CIDR! " (prohibit). */
static char *routes_str_of(RoutesFn fn, const NetPolicy *p, NetFamily f) {
        NetRoute *r;
        size_t n;
        static char buf[4096];
        char c[64];
        buf[0] = '\0';
        assert_int_equal(fn(p, f, &r, &n), 0);
        for (size_t i = 0; i < n; i++) {
                cidr_format(&r[i].prefix, c, sizeof(c));
                strcat(buf, c);
                strcat(buf, r[i].permit ? " " : "! ");
        }
        free(r);
        return buf;
}

static char *routes_str(const NetPolicy *p, NetFamily f) {
        return routes_str_of(netpolicy_routes, p, f);
}

static char *kernel_routes_str(const NetPolicy *p, NetFamily f) {
        return routes_str_of(netpolicy_kernel_routes, p, f);
}

static void test_default_allow_is_two_halves(void **state) {
        (void) state;
        NetPolicyEntry e[] = { E("0.0.0.0/0", NET_ALLOW, 0) };
        NetPolicy p;
        assert_int_equal(netpolicy_build(v4only, e, 1, NULL, 0, &p, NULL), 0);
        /* Never a default route: gVisor ignores prohibit routes, and a /0
         * would make every denied prefix reachable there. */
        assert_string_equal(routes_str(&p, NET_IPV4), "0.0.0.0/1 128.0.0.0/1 ");
        assert_string_equal(routes_str(&p, NET_IPV6), "");
        netpolicy_done(&p);
}

static void test_allow_with_holes(void **state) {
        (void) state;
        NetPolicyEntry e[] = { E("0.0.0.0/0", NET_ALLOW, 0), E("128.0.0.0/2", NET_DENY, 1),
                               E("160.0.0.0/3", NET_ALLOW, 2) };
        NetPolicy p;
        assert_int_equal(netpolicy_build(v4only, e, 3, NULL, 0, &p, NULL), 0);
        assert_string_equal(routes_str(&p, NET_IPV4), "0.0.0.0/1 160.0.0.0/3 192.0.0.0/2 128.0.0.0/2! ");
        NetAddr a = A("128.0.0.1"), b = A("170.1.1.1"), c = A("8.8.8.8");
        assert_int_equal(netpolicy_verdict(&p, &a), NET_DENY);
        assert_int_equal(netpolicy_verdict(&p, &b), NET_ALLOW);
        assert_int_equal(netpolicy_verdict(&p, &c), NET_ALLOW);
        NetAddr probe;
        assert_true(netpolicy_denied_probe_address(&p, &p.rules[0], &probe));
        char s[64];
        netaddr_format(&probe, s, sizeof(s));
        assert_string_equal(s, "128.0.0.0");
        netpolicy_done(&p);
}

static void test_kernel_routes_one_per_rule(void **state) {
        (void) state;
        NetPolicyEntry e[] = { E("0.0.0.0/0", NET_ALLOW, 0), E("128.0.0.0/2", NET_DENY, 1),
                               E("160.0.0.0/3", NET_ALLOW, 2), E("0.0.0.0/1", NET_DENY, 3),
                               E("2001:db8::/32", NET_ALLOW, 4) };
        NetPolicy p;
        assert_int_equal(netpolicy_build(both, e, 5, NULL, 0, &p, NULL), 0);
        /* The kernel's longest match does what the cover spells out: the
         * rules as they are, the default as the halves no rule has. */
        assert_string_equal(kernel_routes_str(&p, NET_IPV4), "128.0.0.0/1 0.0.0.0/1! 128.0.0.0/2! 160.0.0.0/3 ");
        /* IPv6 denies by default: no route but the rule's. */
        assert_string_equal(kernel_routes_str(&p, NET_IPV6), "2001:db8::/32 ");
        netpolicy_done(&p);
        bool off[_NET_FAMILY_MAX] = { false, false };
        assert_int_equal(netpolicy_build(off, NULL, 0, NULL, 0, &p, NULL), 0);
        assert_string_equal(kernel_routes_str(&p, NET_IPV4), "");
        netpolicy_done(&p);
}

static void test_probe_skips_allowed_part(void **state) {
        (void) state;
        NetPolicyEntry e[] = { E("10.0.0.0/8", NET_DENY, 0), E("10.0.0.0/9", NET_ALLOW, 1) };
        NetPolicy p;
        NetAddr probe;
        char s[64];
        assert_int_equal(netpolicy_build(v4only, e, 2, NULL, 0, &p, NULL), 0);
        assert_true(netpolicy_denied_probe_address(&p, &p.rules[0], &probe));
        netaddr_format(&probe, s, sizeof(s));
        assert_string_equal(s, "10.128.0.0");
        netpolicy_done(&p);

        NetPolicyEntry all[] = { E("10.0.0.0/8", NET_DENY, 0), E("10.0.0.0/9", NET_ALLOW, 1),
                                 E("10.128.0.0/9", NET_ALLOW, 2) };
        assert_int_equal(netpolicy_build(v4only, all, 3, NULL, 0, &p, NULL), 0);
        assert_false(netpolicy_denied_probe_address(&p, &p.rules[0], &probe));
        netpolicy_done(&p);
}

static void test_nothing_permitted(void **state) {
        (void) state;
        NetPolicyEntry e[] = { E("10.0.0.0/8", NET_DENY, 0), E("fe80::/10", NET_DENY, 1) };
        NetPolicy p;
        assert_int_equal(netpolicy_build(both, e, 2, NULL, 0, &p, NULL), 0);
        assert_true(netpolicy_permits_nothing(&p));
        assert_string_equal(routes_str(&p, NET_IPV4), "10.0.0.0/8! ");
        netpolicy_done(&p);

        NetPolicyEntry one[] = { E("2001:db8::/32", NET_ALLOW, 0) };
        assert_int_equal(netpolicy_build(both, one, 1, NULL, 0, &p, NULL), 0);
        assert_false(netpolicy_permits_nothing(&p));
        assert_false(netpolicy_family_permits_any(&p, NET_IPV4));
        assert_true(netpolicy_family_permits_any(&p, NET_IPV6));
        netpolicy_done(&p);
}

static void test_errors(void **state) {
        (void) state;
        NetPolicy p;
        NetPolicyError err;

        NetPolicyEntry c[] = { E("10.0.0.0/8", NET_ALLOW, 7), E("10.0.0.0/8", NET_ALLOW, 8),
                               E("10.0.0.0/8", NET_DENY, 9) };
        assert_int_equal(netpolicy_build(both, c, 3, NULL, 0, &p, &err), -EINVAL);
        assert_int_equal(err.where_index, 9);
        assert_true(err.has_other);
        assert_int_equal(err.other_index, 8);

        NetPolicyEntry v6[] = { E("0.0.0.0/0", NET_ALLOW, 0), E("::/0", NET_ALLOW, 1) };
        assert_int_equal(netpolicy_build(v4only, v6, 2, NULL, 0, &p, &err), -EINVAL);
        assert_int_equal(err.where_index, 1);
        assert_non_null(strstr(err.message, "IPv6 is disabled"));

        NetAddr r[] = { A("192.0.2.53"), A("10.0.0.53") };
        NetPolicyEntry d[] = { E("0.0.0.0/0", NET_ALLOW, 0), E("10.0.0.0/8", NET_DENY, 1) };
        assert_int_equal(netpolicy_build(v4only, d, 2, r, 2, &p, &err), -EINVAL);
        assert_true(err.is_resolver);
        assert_int_equal(err.where_index, 1);

        /* Same prefix, same action: one rule. */
        assert_int_equal(netpolicy_build(both, c, 2, &r[1], 1, &p, &err), 0);
        assert_int_equal(p.n_rules, 1);
        netpolicy_done(&p);
}

static void test_parse_is_strict(void **state) {
        (void) state;
        static const char ok[] = "lazaret-derived-network-policy v1\n"
                                 "family ipv4 enabled default deny\n"
                                 "family ipv6 disabled\n"
                                 "rule 198.51.100.0/24 allow\n"
                                 "resolver 198.51.100.53\n";
        NetPolicy p;
        const char *why;
        assert_int_equal(netpolicy_parse(ok, strlen(ok), &p, &why), 0);
        assert_int_equal(p.n_rules, 1);
        assert_int_equal(p.n_resolvers, 1);
        netpolicy_done(&p);

        static const char *const bad[] = {
                /* unsorted */
                "lazaret-derived-network-policy v1\nfamily ipv4 enabled default deny\nfamily ipv6 disabled\n"
                "rule 198.51.100.0/24 allow\nrule 10.0.0.0/8 allow\n",
                /* a rule in a disabled family */
                "lazaret-derived-network-policy v1\nfamily ipv4 enabled default deny\nfamily ipv6 disabled\n"
                "rule 2001:db8::/32 allow\n",
                /* non-canonical address text */
                "lazaret-derived-network-policy v1\nfamily ipv4 enabled default deny\nfamily ipv6 enabled default "
                "deny\nrule 2001:DB8::/32 allow\n",
                /* resolver the policy denies */
                "lazaret-derived-network-policy v1\nfamily ipv4 enabled default deny\nfamily ipv6 disabled\n"
                "resolver 192.0.2.1\n",
                /* a /0 rule */
                "lazaret-derived-network-policy v1\nfamily ipv4 enabled default deny\nfamily ipv6 disabled\n"
                "rule 0.0.0.0/0 allow\n",
                /* missing newline at the end */
                "lazaret-derived-network-policy v1\nfamily ipv4 enabled default deny\nfamily ipv6 disabled",
                "lazaret-derived-network-policy v2\nfamily ipv4 enabled default deny\nfamily ipv6 disabled\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                if (netpolicy_parse(bad[i], strlen(bad[i]), &p, &why) == 0) {
                        print_error("accepted bad[%zu]\n", i);
                        fail();
                }
        }
}

/* The host's own addresses: denied whatever the policy says, an explicit
 * allow of the very address included; a resolver stays as configured; a
 * disabled family or a denied address adds nothing; the result is canonical
 * (it formats and parses back to the same bytes); every other address keeps
 * its verdict. */
static void test_host_addresses_denied(void **state) {
        (void) state;
        NetPolicyEntry e[] = { E("0.0.0.0/0", NET_ALLOW, 0), E("10.0.0.0/8", NET_DENY, 1),
                               E("198.51.100.1/32", NET_ALLOW, 2), E("::/0", NET_ALLOW, 3) };
        NetAddr res[] = { A("192.0.2.53") };
        NetPolicy p;
        assert_int_equal(netpolicy_build(both, e, 4, res, 1, &p, NULL), 0);
        NetAddr host[] = { A("10.1.2.3"), A("192.0.2.53"), A("198.51.100.1"), A("203.0.113.7"), A("2001:db8::2") };
        HostAddrEffect eff[5];
        assert_int_equal(netpolicy_deny_addresses(&p, host, 5, eff), 3);
        assert_int_equal(eff[0], HOST_ADDR_POLICY_DENIES);
        assert_int_equal(eff[1], HOST_ADDR_RESOLVER);
        assert_int_equal(eff[2], HOST_ADDR_IMPLICIT_DENY);
        assert_int_equal(eff[3], HOST_ADDR_IMPLICIT_DENY);
        assert_int_equal(eff[4], HOST_ADDR_IMPLICIT_DENY);
        for (size_t i = 0; i < 5; i++)
                assert_int_equal(netpolicy_verdict(&p, &host[i]), i == 1 ? NET_ALLOW : NET_DENY);
        NetAddr near[] = { A("198.51.100.2"), A("203.0.113.6"), A("2001:db8::3"), A("8.8.8.8") };
        for (size_t i = 0; i < 4; i++)
                assert_int_equal(netpolicy_verdict(&p, &near[i]), NET_ALLOW);
        char *canon = NULL, *again = NULL;
        assert_int_equal(netpolicy_format(&p, &canon, NULL), 0);
        assert_non_null(strstr(canon, "rule 198.51.100.1/32 deny\nrule 203.0.113.7/32 deny\n"));
        assert_non_null(strstr(canon, "rule 2001:db8::2/128 deny\n"));
        NetPolicy q;
        const char *why;
        assert_int_equal(netpolicy_parse(canon, strlen(canon), &q, &why), 0);
        assert_int_equal(netpolicy_format(&q, &again, NULL), 0);
        assert_string_equal(canon, again);
        /* Again with the same addresses: nothing more to deny. */
        assert_int_equal(netpolicy_deny_addresses(&q, host, 5, NULL), 0);
        free(canon);
        free(again);
        netpolicy_done(&q);
        netpolicy_done(&p);

        /* IPv6 disabled: its addresses are denied already. */
        NetPolicyEntry e4[] = { E("0.0.0.0/0", NET_ALLOW, 0) };
        assert_int_equal(netpolicy_build(v4only, e4, 1, NULL, 0, &p, NULL), 0);
        assert_int_equal(netpolicy_deny_addresses(&p, &host[4], 1, eff), 0);
        assert_int_equal(eff[0], HOST_ADDR_POLICY_DENIES);
        assert_int_equal(p.n_rules, 0);
        netpolicy_done(&p);
}

static char *blocks_str(const NetPolicy *p, NetFamily f) {
        NetBlock *b;
        size_t n;
        static char buf[4096];
        char c[64];
        buf[0] = '\0';
        assert_int_equal(netpolicy_blocks(p, f, &b, &n), 0);
        for (size_t i = 0; i < n; i++) {
                cidr_format(&b[i].cidr, c, sizeof(c));
                strcat(buf, c);
                for (size_t k = 0; k < b[i].n_except; k++) {
                        cidr_format(&b[i].except[k], c, sizeof(c));
                        strcat(buf, k ? "," : " except ");
                        strcat(buf, c);
                }
                strcat(buf, "; ");
        }
        netpolicy_blocks_free(b, n);
        return buf;
}

/* Kubernetes' shape of the permitted space: each allowing rule that
 * changes the verdict, less the denying ones directly beneath; a rule that
 * repeats what encloses it is not there. */
static void test_blocks(void **state) {
        (void) state;
        NetPolicyEntry e[] = { E("0.0.0.0/0", NET_ALLOW, 0),   E("10.0.0.0/8", NET_DENY, 1),
                               E("10.1.0.0/16", NET_ALLOW, 2), E("10.1.2.0/24", NET_DENY, 3),
                               E("10.1.2.0/25", NET_DENY, 4),  E("20.0.0.0/8", NET_ALLOW, 5),
                               E("20.1.0.0/16", NET_DENY, 6),  E("fd00::/8", NET_ALLOW, 7) };
        NetPolicy p;
        assert_int_equal(netpolicy_build(both, e, ELEMENTSOF(e), NULL, 0, &p, NULL), 0);
        assert_string_equal(blocks_str(&p, NET_IPV4),
                            "0.0.0.0/0 except 10.0.0.0/8,20.1.0.0/16; 10.1.0.0/16 except 10.1.2.0/24; ");
        assert_string_equal(blocks_str(&p, NET_IPV6), "fd00::/8; ");
        netpolicy_done(&p);
        NetPolicyEntry none[] = { E("0.0.0.0/0", NET_DENY, 0), E("10.0.0.0/8", NET_DENY, 1) };
        assert_int_equal(netpolicy_build(v4only, none, 2, NULL, 0, &p, NULL), 0);
        assert_string_equal(blocks_str(&p, NET_IPV4), "");
        assert_string_equal(blocks_str(&p, NET_IPV6), "");
        netpolicy_done(&p);
}

/* Up to 24 IPv4 entries from the xorshift state *x, no prefix twice. */
static size_t random_v4_entries(uint64_t *state, NetPolicyEntry e[24]) {
        uint64_t x = *state;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
        size_t n = 0;
        for (int i = 0; i < 24; i++) {
                static const unsigned lens[] = { 0, 1, 2, 4, 8, 8, 12, 16, 16, 20, 24, 28, 32 };
                unsigned len = lens[NEXT() % ELEMENTSOF(lens)];
                uint32_t a = len ? (uint32_t) (NEXT() & (0xffffffffu << (32 - len))) : 0;
                NetPolicyEntry c = { .action = NEXT() % 2 ? NET_ALLOW : NET_DENY, .where_index = n };
                c.prefix.family = AF_INET;
                c.prefix.prefixlen = len;
                c.prefix.addr[0] = (uint8_t) (a >> 24);
                c.prefix.addr[1] = (uint8_t) (a >> 16);
                c.prefix.addr[2] = (uint8_t) (a >> 8);
                c.prefix.addr[3] = (uint8_t) a;
                bool dup = false;
                for (size_t k = 0; k < n; k++)
                        dup = dup || (e[k].prefix.prefixlen == len && !memcmp(e[k].prefix.addr, c.prefix.addr, 4));
                if (!dup)
                        e[n++] = c;
        }
#undef NEXT
        *state = x;
        return n;
}

/* Generated policies: an address is in a block and in none of its
 * exceptions exactly when the verdict allows it. */
static void test_blocks_agree_with_the_verdict(void **state) {
        (void) state;
        uint64_t x = 0x9e3779b97f4a7c15ULL;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
        for (int round = 0; round < 200; round++) {
                NetPolicyEntry e[24];
                size_t n = random_v4_entries(&x, e);
                NetPolicy p;
                assert_int_equal(netpolicy_build(v4only, e, n, NULL, 0, &p, NULL), 0);
                NetBlock *b;
                size_t nb;
                assert_int_equal(netpolicy_blocks(&p, NET_IPV4, &b, &nb), 0);
                for (int t = 0; t < 2000; t++) {
                        /* Near a rule's edges as often as anywhere. */
                        NetAddr a = { .family = AF_INET };
                        uint32_t v = (uint32_t) NEXT();
                        if (t % 2 && n > 0) {
                                const Cidr *r = &e[NEXT() % n].prefix;
                                uint32_t base = (uint32_t) r->addr[0] << 24 | (uint32_t) r->addr[1] << 16 |
                                                (uint32_t) r->addr[2] << 8 | r->addr[3];
                                uint32_t span = r->prefixlen == 0    ? 0xffffffffu
                                                : r->prefixlen == 32 ? 0
                                                                     : 0xffffffffu >> r->prefixlen;
                                v = base + (NEXT() % 3 == 0 ? 0 : NEXT() % 3 == 0 ? span : span + 1);
                        }
                        a.addr[0] = (uint8_t) (v >> 24);
                        a.addr[1] = (uint8_t) (v >> 16);
                        a.addr[2] = (uint8_t) (v >> 8);
                        a.addr[3] = (uint8_t) v;
                        bool in = false;
                        for (size_t i = 0; i < nb && !in; i++) {
                                bool out = false;
                                for (size_t k = 0; k < b[i].n_except; k++)
                                        out = out || cidr_contains(&b[i].except[k], &a);
                                in = cidr_contains(&b[i].cidr, &a) && !out;
                        }
                        assert_int_equal(in, netpolicy_verdict(&p, &a) == NET_ALLOW);
                }
                netpolicy_blocks_free(b, nb);
                netpolicy_done(&p);
        }
#undef NEXT
}

/* cidr_format writes IPv4 by hand: it must agree with inet_ntop and
 * snprintf (the formatter it replaced, glibc's own) on every octet value
 * in every position and every prefix length, and keep inet_ntop for IPv6
 * and for a buffer too small for the longest IPv4 prefix. */
static void test_cidr_format_agrees_with_inet_ntop(void **state) {
        (void) state;
        uint32_t x = 2463534242u;
        for (unsigned i = 0; i < 200000; i++) {
                Cidr c = { .family = AF_INET, .prefixlen = i % 33 };
                if (i < 256 * 4) {
                        memset(c.addr, (int) (i * 37 % 251), 4);
                        c.addr[i / 256] = (uint8_t) (i % 256);
                } else
                        for (unsigned k = 0; k < 4; k++) {
                                x ^= x << 13;
                                x ^= x >> 17;
                                x ^= x << 5;
                                c.addr[k] = (uint8_t) (x >> (k * 8));
                        }
                char got[64], a[INET6_ADDRSTRLEN], want[64];
                cidr_format(&c, got, sizeof(got));
                assert_non_null(inet_ntop(AF_INET, c.addr, a, sizeof(a)));
                snprintf(want, sizeof(want), "%s/%u", a, c.prefixlen);
                assert_string_equal(got, want);
        }
        Cidr v6 = { .family = AF_INET6, .prefixlen = 48 };
        v6.addr[0] = 0x20;
        v6.addr[1] = 0x01;
        v6.addr[2] = 0x0d;
        v6.addr[3] = 0xb8;
        char got[64];
        cidr_format(&v6, got, sizeof(got));
        assert_string_equal(got, "2001:db8::/48");
        Cidr v4 = { .family = AF_INET, .prefixlen = 32, .addr = { 255, 255, 255, 255 } };
        char small[12];
        cidr_format(&v4, small, sizeof(small));
        assert_string_equal(small, "255.255.255");
}

/* cidr_parse_ipv4 reads a dotted quad by hand: it must take exactly what
 * inet_pton(AF_INET) takes, as the same four bytes, on strings made of
 * digits and dots (and now and then something else), near-quads with
 * leading zeros, numbers past 255, parts missing or one too many, and on
 * every octet value in every position. */
static void test_ipv4_parse_agrees_with_inet_pton(void **state) {
        (void) state;
        uint64_t x = 0xbb67ae8584caa73bULL;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
        static const char alphabet[] = "0123456789012345678901234.....1255x: ";
        size_t took = 0;
        for (unsigned i = 0; i < 400000; i++) {
                char s[32];
                size_t n = 0;
                if (i % 2) {
                        /* Four parts, each 0-3 digits from 0 to 299, some
                         * with a leading zero; now and then five or three. */
                        unsigned parts = NEXT() % 8 == 0 ? 3 + (unsigned) (NEXT() % 3) : 4;
                        for (unsigned k = 0; k < parts; k++) {
                                if (k)
                                        s[n++] = '.';
                                unsigned v = (unsigned) (NEXT() % 300);
                                if (NEXT() % 10 == 0)
                                        s[n++] = '0';
                                if (NEXT() % 20)
                                        n += (size_t) snprintf(s + n, sizeof(s) - n, "%u", v);
                        }
                } else {
                        n = (size_t) (NEXT() % 20);
                        for (size_t k = 0; k < n; k++)
                                s[k] = alphabet[NEXT() % (sizeof(alphabet) - 1)];
                }
                if (i < 256 * 4)
                        n = (size_t) snprintf(s, sizeof(s), "%u.%u.%u.%u", i / 256 == 0 ? i % 256 : 7,
                                              i / 256 == 1 ? i % 256 : 0, i / 256 == 2 ? i % 256 : 255,
                                              i / 256 == 3 ? i % 256 : 10);
                s[n] = '\0';
                uint8_t want[4] = {}, got[4] = {};
                bool ok = inet_pton(AF_INET, s, want) == 1;
                assert_int_equal(cidr_parse_ipv4(s, n, got), ok);
                if (ok) {
                        assert_memory_equal(got, want, 4);
                        took++;
                }
        }
        assert_true(took > 20000); /* many quads were good ones */
#undef NEXT
}

/* The probes' few permitted routes: the first max of the full cover's, in
 * its order, on generated policies, for every max up to past the end. */
static void test_permitted_routes_are_the_covers_first(void **state) {
        (void) state;
        uint64_t x = 0x2545f4914f6cdd1dULL;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
        for (int round = 0; round < 200; round++) {
                NetPolicyEntry e[24];
                size_t n = random_v4_entries(&x, e);
                NetPolicy p;
                assert_int_equal(netpolicy_build(v4only, e, n, NULL, 0, &p, NULL), 0);
                NetRoute *all;
                size_t n_all, n_permit = 0;
                assert_int_equal(netpolicy_routes(&p, NET_IPV4, &all, &n_all), 0);
                while (n_permit < n_all && all[n_permit].permit)
                        n_permit++;
                for (size_t i = n_permit; i < n_all; i++)
                        assert_false(all[i].permit); /* the permitted ones come first */
                for (size_t max = 0; max <= n_permit + 2; max++) {
                        NetRoute *first;
                        size_t n_first;
                        assert_int_equal(netpolicy_permitted_routes(&p, NET_IPV4, max, &first, &n_first), 0);
                        assert_int_equal(n_first, max < n_permit ? max : n_permit);
                        for (size_t i = 0; i < n_first; i++) {
                                assert_true(first[i].permit);
                                assert_int_equal(first[i].prefix.prefixlen, all[i].prefix.prefixlen);
                                assert_memory_equal(first[i].prefix.addr, all[i].prefix.addr, 16);
                        }
                        free(first);
                }
                free(all);
                netpolicy_done(&p);
        }
#undef NEXT
}

/* netpolicy_deny_addresses finds and inserts by binary search, where it
 * used to walk the rules and sort them all again: on generated policies
 * and host addresses (some twice, some on a rule's own /32, some in no
 * rule), the same effects, count and rules as that plain way, done here. */
static int plain_cmp(const void *x, const void *y) {
        const Cidr *a = &((const NetRule *) x)->prefix, *b = &((const NetRule *) y)->prefix;
        if (a->family != b->family)
                return a->family == AF_INET ? -1 : 1;
        int r = memcmp(a->addr, b->addr, 16);
        return r ? r : a->prefixlen < b->prefixlen ? -1 : a->prefixlen > b->prefixlen;
}

static NetAction plain_verdict(const NetPolicy *p, const NetAddr *a) {
        NetAction v = p->default_action[NET_IPV4];
        int best = -1;
        for (size_t i = 0; i < p->n_rules; i++)
                if ((int) p->rules[i].prefix.prefixlen > best && cidr_contains(&p->rules[i].prefix, a)) {
                        best = (int) p->rules[i].prefix.prefixlen;
                        v = p->rules[i].action;
                }
        return v;
}

static void test_host_addresses_denied_as_the_plain_way(void **state) {
        (void) state;
        uint64_t x = 0x6a09e667f3bcc908ULL;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
        for (int round = 0; round < 500; round++) {
                NetPolicyEntry e[24];
                size_t n = random_v4_entries(&x, e);
                NetPolicy p, want;
                assert_int_equal(netpolicy_build(v4only, e, n, NULL, 0, &p, NULL), 0);
                assert_int_equal(netpolicy_build(v4only, e, n, NULL, 0, &want, NULL), 0);
                NetAddr host[6];
                size_t nh = 1 + NEXT() % 6;
                for (size_t i = 0; i < nh; i++) {
                        host[i] = (NetAddr){ .family = AF_INET };
                        if (i > 0 && NEXT() % 4 == 0)
                                host[i] = host[NEXT() % i]; /* twice */
                        else if (n > 0 && NEXT() % 2)
                                memcpy(host[i].addr, e[NEXT() % n].prefix.addr, 4); /* a rule's first */
                        else
                                for (int k = 0; k < 4; k++)
                                        host[i].addr[k] = (uint8_t) NEXT();
                }
                /* The plain way, as the code was. */
                HostAddrEffect weff[6];
                size_t wchanged = 0;
                want.rules = realloc(want.rules, (want.n_rules + nh) * sizeof(NetRule));
                for (size_t i = 0; i < nh; i++) {
                        weff[i] = plain_verdict(&want, &host[i]) == NET_ALLOW ? HOST_ADDR_IMPLICIT_DENY
                                                                              : HOST_ADDR_POLICY_DENIES;
                        if (weff[i] != HOST_ADDR_IMPLICIT_DENY)
                                continue;
                        Cidr whole = { .family = AF_INET, .prefixlen = 32 };
                        memcpy(whole.addr, host[i].addr, 4);
                        NetRule *same = NULL;
                        for (size_t k = 0; k < want.n_rules && !same; k++)
                                if (!plain_cmp(&want.rules[k], &(NetRule){ .prefix = whole }))
                                        same = &want.rules[k];
                        if (same)
                                same->action = NET_DENY;
                        else
                                want.rules[want.n_rules++] = (NetRule){ .prefix = whole, .action = NET_DENY };
                        wchanged++;
                }
                qsort(want.rules, want.n_rules, sizeof(NetRule), plain_cmp);

                HostAddrEffect eff[6];
                assert_int_equal(netpolicy_deny_addresses(&p, host, nh, eff), (int) wchanged);
                assert_memory_equal(eff, weff, nh * sizeof(HostAddrEffect));
                assert_int_equal(p.n_rules, want.n_rules);
                for (size_t i = 0; i < p.n_rules; i++) {
                        assert_int_equal(plain_cmp(&p.rules[i], &want.rules[i]), 0);
                        assert_int_equal(p.rules[i].action, want.rules[i].action);
                }
                /* And the verdict (by binary search) is the plain one's. */
                for (int t = 0; t < 50; t++) {
                        NetAddr a = { .family = AF_INET };
                        if (t < (int) nh)
                                a = host[t];
                        else
                                for (int k = 0; k < 4; k++)
                                        a.addr[k] = (uint8_t) NEXT();
                        assert_int_equal(netpolicy_verdict(&p, &a), plain_verdict(&p, &a));
                }
                netpolicy_done(&p);
                netpolicy_done(&want);
        }
#undef NEXT
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cidr_format_agrees_with_inet_ntop),
                cmocka_unit_test(test_host_addresses_denied_as_the_plain_way),
                cmocka_unit_test(test_ipv4_parse_agrees_with_inet_pton),
                cmocka_unit_test(test_permitted_routes_are_the_covers_first),
                cmocka_unit_test(test_default_allow_is_two_halves),
                cmocka_unit_test(test_allow_with_holes),
                cmocka_unit_test(test_kernel_routes_one_per_rule),
                cmocka_unit_test(test_probe_skips_allowed_part),
                cmocka_unit_test(test_nothing_permitted),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_parse_is_strict),
                cmocka_unit_test(test_host_addresses_denied),
                cmocka_unit_test(test_blocks),
                cmocka_unit_test(test_blocks_agree_with_the_verdict),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
