/* SPDX-License-Identifier: MIT */
/* A line interface to the network policy compiler, for the oracle test
 * (netpolicy-oracle.py) and the route benchmark.
 *
 * build mode (default), stdin:
 *   ipv6 enabled|disabled
 *   allow CIDR | deny CIDR          (in order; the index is the entry's id)
 *   resolver ADDR
 *   query ADDR                      (answered after the build)
 * stdout:
 *   error INDEX resolver|entry MESSAGE      (exit 1), or
 *   digest HEX
 *   canonical LINE...               (one per canonical line)
 *   route CIDR permit|prohibit
 *   kroute CIDR permit|prohibit     (netpolicy_kernel_routes; "kernel" mode only)
 *   verdict ADDR allow|deny
 *   probe CIDR ADDR|none            (for each deny rule)
 *   parse ok|REASON                 (the canonical form parsed back)
 *
 * "kernel" mode: build mode, with the kernel's routes too.
 * "parse" mode: canonical bytes on stdin; prints "ok DIGEST" or "error REASON". */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd-util.h"
#include "netpolicy-digest.h"
#include "netpolicy.h"

static char *slurp(FILE *f, size_t *ret_len) {
        size_t len = 0, cap = 1 << 16;
        char *b = malloc(cap);
        while (b) {
                size_t n = fread(b + len, 1, cap - len, f);
                len += n;
                if (n == 0)
                        break;
                if (len == cap) {
                        char *nb = realloc(b, cap *= 2);
                        if (!nb)
                                free(b);
                        b = nb;
                }
        }
        *ret_len = len;
        return b;
}

static int parse_mode(void) {
        size_t len;
        _cleanup_free_ char *buf = slurp(stdin, &len);
        NetPolicy p;
        const char *why;
        if (!buf)
                return 2;
        if (netpolicy_parse(buf, len, &p, &why) < 0) {
                printf("error %s\n", why);
                return 1;
        }
        char d[65];
        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, buf, len, d);
        printf("ok %s\n", d);
        netpolicy_done(&p);
        return 0;
}

/* One line per route: "TAG CIDR permit|prohibit". */
static int print_routes(const char *tag, int (*fn)(const NetPolicy *, NetFamily, NetRoute **, size_t *),
                        const NetPolicy *p, NetFamily f) {
        NetRoute *r;
        size_t n;
        char a[64];
        if (fn(p, f, &r, &n) < 0)
                return -1;
        for (size_t i = 0; i < n; i++) {
                cidr_format(&r[i].prefix, a, sizeof(a));
                printf("%s %s %s\n", tag, a, r[i].permit ? "permit" : "prohibit");
        }
        free(r);
        return 0;
}

int main(int argc, char **argv) {
        if (argc > 1 && strcmp(argv[1], "parse") == 0)
                return parse_mode();

        bool kernel = argc > 1 && strcmp(argv[1], "kernel") == 0;
        bool enabled[_NET_FAMILY_MAX] = { true, true };
        NetPolicyEntry *e = calloc(NETPOLICY_RULES_MAX, sizeof(*e));
        NetAddr res[NETPOLICY_RESOLVERS_MAX], *q = calloc(65536, sizeof(*q));
        size_t ne = 0, nr = 0, nq = 0;
        char line[256];
        if (!e || !q)
                return 2;
        while (fgets(line, sizeof(line), stdin)) {
                line[strcspn(line, "\n")] = '\0';
                char *arg = strchr(line, ' ');
                if (!arg)
                        continue;
                *arg++ = '\0';
                const char *why;
                if (strcmp(line, "ipv6") == 0)
                        enabled[NET_IPV6] = strcmp(arg, "enabled") == 0;
                else if (strcmp(line, "allow") == 0 || strcmp(line, "deny") == 0) {
                        if (ne >= NETPOLICY_RULES_MAX || cidr_parse(arg, &e[ne].prefix, &why) < 0) {
                                fprintf(stderr, "bad input %s\n", arg);
                                return 2;
                        }
                        e[ne].action = line[0] == 'a' ? NET_ALLOW : NET_DENY;
                        e[ne].where_index = ne;
                        ne++;
                } else if (strcmp(line, "resolver") == 0) {
                        if (nr >= NETPOLICY_RESOLVERS_MAX || netaddr_parse(arg, &res[nr++]) < 0)
                                return 2;
                } else if (strcmp(line, "query") == 0) {
                        if (nq >= 65536 || netaddr_parse(arg, &q[nq++]) < 0)
                                return 2;
                }
        }

        NetPolicy p;
        NetPolicyError err;
        if (netpolicy_build(enabled, e, ne, res, nr, &p, &err) < 0) {
                printf("error %zu %s %s\n", err.where_index, err.is_resolver ? "resolver" : "entry", err.message);
                free(e);
                free(q);
                return 1;
        }
        _cleanup_free_ char *canon = NULL;
        size_t len;
        if (netpolicy_format(&p, &canon, &len) < 0)
                return 2;
        char d[65], a[64];
        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, canon, len, d);
        printf("digest %s\n", d);
        for (char *l = canon, *nl; (nl = strchr(l, '\n')); l = nl + 1)
                printf("canonical %.*s\n", (int) (nl - l), l);
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++)
                if (print_routes("route", netpolicy_routes, &p, f) < 0 ||
                    (kernel && print_routes("kroute", netpolicy_kernel_routes, &p, f) < 0))
                        return 2;
        for (size_t i = 0; i < nq; i++) {
                netaddr_format(&q[i], a, sizeof(a));
                printf("verdict %s %s\n", a, net_action_to_string(netpolicy_verdict(&p, &q[i])));
        }
        for (size_t i = 0; i < p.n_rules; i++) {
                if (p.rules[i].action != NET_DENY)
                        continue;
                NetAddr pa;
                char c[64];
                cidr_format(&p.rules[i].prefix, c, sizeof(c));
                if (netpolicy_denied_probe_address(&p, &p.rules[i], &pa)) {
                        netaddr_format(&pa, a, sizeof(a));
                        printf("probe %s %s\n", c, a);
                } else
                        printf("probe %s none\n", c);
        }
        NetPolicy back;
        const char *why;
        if (netpolicy_parse(canon, len, &back, &why) < 0)
                printf("parse %s\n", why);
        else {
                printf("parse ok\n");
                netpolicy_done(&back);
        }
        netpolicy_done(&p);
        free(e);
        free(q);
        return 0;
}
