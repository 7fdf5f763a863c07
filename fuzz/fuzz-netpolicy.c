/* SPDX-License-Identifier: MIT */
/* Fuzz the network policy compiler. The first byte picks the mode:
 *  even: the rest is canonical text for netpolicy_parse; what parses must
 *        format back to the same bytes;
 *  odd:  the rest is a list of 18-byte entries (flags, prefix length, 16
 *        address bytes) for netpolicy_build; what builds must format, parse
 *        back to the same bytes, and compile to routes whose longest-prefix
 *        verdict equals the policy's at every rule's first and last address
 *        and its neighbours, with no /0 route and no overlapping gateway
 *        routes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static NetAction route_verdict(const NetRoute *r, size_t n, const NetAddr *a) {
        int best = -1;
        NetAction v = NET_DENY;
        for (size_t i = 0; i < n; i++)
                if ((int) r[i].prefix.prefixlen > best && cidr_contains(&r[i].prefix, a)) {
                        best = (int) r[i].prefix.prefixlen;
                        v = r[i].permit ? NET_ALLOW : NET_DENY;
                }
        return v;
}

static void edge(const Cidr *c, bool last, int step, NetAddr *ret) {
        unsigned bytes = c->family == AF_INET ? 4 : 16;
        *ret = (NetAddr){ .family = c->family };
        memcpy(ret->addr, c->addr, 16);
        for (unsigned i = c->prefixlen; last && i < bytes * 8; i++)
                ret->addr[i / 8] |= (uint8_t) (0x80 >> (i % 8));
        /* +/- 1 with carry, wrapping at the ends of the space. */
        for (int i = (int) bytes - 1; step && i >= 0; i--) {
                ret->addr[i] = (uint8_t) (ret->addr[i] + step);
                if ((step > 0 && ret->addr[i] != 0) || (step < 0 && ret->addr[i] != 0xff))
                        break;
        }
}

static void check_routes(const NetPolicy *p) {
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                NetRoute *r;
                size_t n;
                if (netpolicy_routes(p, f, &r, &n) < 0)
                        return;
                for (size_t i = 0; i < n; i++) {
                        if (r[i].prefix.prefixlen == 0 || net_family_of(r[i].prefix.family) != f)
                                abort();
                        for (size_t j = i + 1; j < n; j++) {
                                if (!r[i].permit || !r[j].permit)
                                        continue;
                                NetAddr a = { .family = r[j].prefix.family }, b = { .family = r[i].prefix.family };
                                memcpy(a.addr, r[j].prefix.addr, 16);
                                memcpy(b.addr, r[i].prefix.addr, 16);
                                if (cidr_contains(&r[i].prefix, &a) || cidr_contains(&r[j].prefix, &b))
                                        abort();
                        }
                }
                for (size_t i = 0; i < p->n_rules; i++) {
                        if (net_family_of(p->rules[i].prefix.family) != f)
                                continue;
                        for (int last = 0; last < 2; last++)
                                for (int step = -1; step <= 1; step++) {
                                        NetAddr a;
                                        edge(&p->rules[i].prefix, last, step, &a);
                                        if (route_verdict(r, n, &a) != netpolicy_verdict(p, &a))
                                                abort();
                                }
                }
                free(r);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > 65536)
                return 0;
        NetPolicy p;
        if ((data[0] & 1) == 0) {
                const char *why;
                if (netpolicy_parse((const char *) data + 1, size - 1, &p, &why) < 0)
                        return 0;
                char *s;
                size_t len;
                if (netpolicy_format(&p, &s, &len) < 0)
                        abort();
                if (len != size - 1 || memcmp(s, data + 1, len) != 0)
                        abort();
                free(s);
                check_routes(&p);
                netpolicy_done(&p);
                return 0;
        }

        bool enabled[_NET_FAMILY_MAX] = { true, (data[0] & 2) == 0 };
        size_t n = (size - 1) / 18;
        NetPolicyEntry *e = calloc(n + 1, sizeof(*e));
        NetAddr res[2];
        size_t nres = 0;
        if (!e)
                return 0;
        for (size_t i = 0; i < n; i++) {
                const uint8_t *d = data + 1 + i * 18;
                Cidr c = { .family = (d[0] & 1) ? AF_INET6 : AF_INET };
                unsigned bits = c.family == AF_INET ? 32 : 128;
                c.prefixlen = d[1] % (bits + 1);
                memcpy(c.addr, d + 2, bits / 8);
                for (unsigned b = c.prefixlen; b < 128; b++)
                        c.addr[b / 8] &= (uint8_t) ~(0x80 >> (b % 8));
                e[i] = (NetPolicyEntry){ .prefix = c, .action = (d[0] & 2) ? NET_ALLOW : NET_DENY, .where_index = i };
                if ((d[0] & 4) && nres < 2) {
                        res[nres] = (NetAddr){ .family = c.family };
                        memcpy(res[nres].addr, d + 2, 16);
                        if (c.family == AF_INET)
                                memset(res[nres].addr + 4, 0, 12);
                        nres++;
                }
        }
        NetPolicyError err;
        if (netpolicy_build(enabled, e, n, res, nres, &p, &err) == 0) {
                char *s;
                size_t len;
                NetPolicy back;
                const char *why;
                if (netpolicy_format(&p, &s, &len) < 0)
                        abort();
                if (netpolicy_parse(s, len, &back, &why) < 0)
                        abort();
                netpolicy_done(&back);
                free(s);
                check_routes(&p);
                netpolicy_done(&p);
        } else if (err.message[0] == '\0' || (!err.is_resolver && err.where_index >= n) ||
                   (err.is_resolver && err.where_index >= nres))
                abort();
        free(e);
        return 0;
}
