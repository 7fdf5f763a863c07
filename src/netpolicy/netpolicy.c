/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fd-util.h"
#include "netpolicy.h"
#include "strbuf.h"

NetFamily net_family_of(int af) {
        return af == AF_INET6 ? NET_IPV6 : NET_IPV4;
}

const char *net_family_to_string(NetFamily f) {
        return f == NET_IPV6 ? "ipv6" : "ipv4";
}

const char *net_action_to_string(NetAction a) {
        return a == NET_ALLOW ? "allow" : "deny";
}

static unsigned family_bits(int af) {
        return af == AF_INET6 ? 128 : 32;
}

static int addr_bit(const uint8_t *a, unsigned i) {
        return (a[i / 8] >> (7 - i % 8)) & 1;
}

static void addr_set_bit(uint8_t *a, unsigned i) {
        a[i / 8] |= (uint8_t) (0x80 >> (i % 8));
}

bool cidr_contains(const Cidr *c, const NetAddr *a) {
        if (c->family != a->family)
                return false;
        unsigned full = c->prefixlen / 8, rest = c->prefixlen % 8;
        if (memcmp(c->addr, a->addr, full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t) (0xff << (8 - rest));
        return (c->addr[full] & mask) == (a->addr[full] & mask);
}

/* Does prefix inner lie within (or equal) outer? */
static bool cidr_within(const Cidr *inner, const Cidr *outer) {
        if (inner->family != outer->family || inner->prefixlen < outer->prefixlen)
                return false;
        NetAddr a = { .family = inner->family };
        memcpy(a.addr, inner->addr, sizeof(a.addr));
        return cidr_contains(outer, &a);
}

static int cidr_cmp(const Cidr *a, const Cidr *b) {
        if (a->family != b->family)
                return a->family == AF_INET ? -1 : 1;
        int r = memcmp(a->addr, b->addr, 16);
        if (r != 0)
                return r;
        return a->prefixlen < b->prefixlen ? -1 : a->prefixlen > b->prefixlen;
}

static int addr_cmp(const NetAddr *a, const NetAddr *b) {
        if (a->family != b->family)
                return a->family == AF_INET ? -1 : 1;
        return memcmp(a->addr, b->addr, 16);
}

int netaddr_parse(const char *s, NetAddr *ret) {
        NetAddr a = {};
        if (inet_pton(AF_INET, s, a.addr) == 1)
                a.family = AF_INET;
        else if (inet_pton(AF_INET6, s, a.addr) == 1)
                a.family = AF_INET6;
        else
                return -EINVAL;
        *ret = a;
        return 0;
}

void netaddr_format(const NetAddr *a, char *buf, size_t size) {
        char s[INET6_ADDRSTRLEN] = "?";
        inet_ntop(a->family, a->addr, s, sizeof(s));
        snprintf(buf, size, "%s", s);
}

/* LSD radix sort of n 64-bit keys, a byte a pass (a pass whose byte is
 * the same in every key is skipped); tmp holds n. */
static void radix_sort_u64(uint64_t *k, uint64_t *tmp, size_t n) {
        for (unsigned shift = 0; shift < 64; shift += 8) {
                size_t count[257] = {};
                for (size_t i = 0; i < n; i++)
                        count[((k[i] >> shift) & 0xff) + 1]++;
                if (count[((k[0] >> shift) & 0xff) + 1] == n)
                        continue;
                for (unsigned d = 0; d < 256; d++)
                        count[d + 1] += count[d];
                for (size_t i = 0; i < n; i++)
                        tmp[count[(k[i] >> shift) & 0xff]++] = k[i];
                memcpy(k, tmp, n * sizeof(*k));
        }
}

/* Entry indices in cidr_cmp's order, an equal prefix in the caller's
 * order (stable). */
static int index_cmp(const void *x, const void *y, void *userdata) {
        const NetPolicyEntry *e = userdata;
        uint32_t a = *(const uint32_t *) x, b = *(const uint32_t *) y;
        int r = cidr_cmp(&e[a].prefix, &e[b].prefix);
        return r != 0 ? r : a < b ? -1 : a > b;
}

/* The order of e[0..n) into ret[0..n): the IPv4 entries (a long list is
 * IPv4, as a rule) by a radix sort of keys that order them as index_cmp
 * does (the address, the prefix length, the position: unique, at most
 * NETPOLICY_RULES_MAX, 17 bits); the IPv6 ones after them by qsort. No
 * copy of the entries: a qsort of 10,000 of them took about 2 ms, and a
 * copy of them half a megabyte of fresh pages. */
static int sort_order(const NetPolicyEntry *e, size_t n, uint32_t *ret) {
        _cleanup_free_ uint64_t *k = malloc(2 * (n ?: 1) * sizeof(uint64_t));
        if (!k)
                return -ENOMEM;
        size_t n4 = 0, n6 = 0;
        for (size_t i = 0; i < n; i++)
                if (e[i].prefix.family == AF_INET) {
                        const uint8_t *a = e[i].prefix.addr;
                        uint64_t addr = (uint64_t) a[0] << 24 | (uint64_t) a[1] << 16 | (uint64_t) a[2] << 8 | a[3];
                        k[n4++] = addr << 32 | (uint64_t) e[i].prefix.prefixlen << 24 | i;
                }
        if (n4 > 0)
                radix_sort_u64(k, k + n, n4);
        for (size_t j = 0; j < n4; j++)
                ret[j] = (uint32_t) (k[j] & 0xffffff);
        for (size_t i = 0; i < n; i++)
                if (e[i].prefix.family != AF_INET)
                        ret[n4 + n6++] = (uint32_t) i;
        qsort_r(ret + n4, n6, sizeof(uint32_t), index_cmp, (void *) e);
        return 0;
}

static int resolver_cmp(const void *x, const void *y) {
        return addr_cmp(x, y);
}

void netpolicy_done(NetPolicy *p) {
        free(p->rules);
        free(p->resolvers);
        *p = (NetPolicy){};
}

int netpolicy_copy(const NetPolicy *p, NetPolicy *ret) {
        NetPolicy c = *p;
        /* Never NULL, as netpolicy_build's. */
        c.rules = malloc((p->n_rules ?: 1) * sizeof(NetRule));
        c.resolvers = malloc((p->n_resolvers ?: 1) * sizeof(NetAddr));
        if (!c.rules || !c.resolvers) {
                free(c.rules);
                free(c.resolvers);
                return -ENOMEM;
        }
        if (p->n_rules)
                memcpy(c.rules, p->rules, p->n_rules * sizeof(NetRule));
        if (p->n_resolvers)
                memcpy(c.resolvers, p->resolvers, p->n_resolvers * sizeof(NetAddr));
        *ret = c;
        return 0;
}

/* The rule on exactly prefix c, or NULL: a binary search of the rules,
 * which are in canonical order (cidr_cmp's). */
static NetRule *rule_find(const NetPolicy *p, const Cidr *c) {
        size_t lo = 0, hi = p->n_rules;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int r = cidr_cmp(&p->rules[mid].prefix, c);
                if (r == 0)
                        return &p->rules[mid];
                if (r < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

/* The longest rule containing a: the prefixes of a from the longest down,
 * each looked up (at most 32 or 128 searches of log2(rules) steps, where a
 * walk of 10,000 rules took milliseconds for a handful of addresses). */
NetAction netpolicy_verdict(const NetPolicy *p, const NetAddr *a) {
        NetFamily f = net_family_of(a->family);
        if (!p->enabled[f])
                return NET_DENY;
        unsigned bits = family_bits(a->family);
        Cidr c = { .family = a->family, .prefixlen = bits };
        memcpy(c.addr, a->addr, bits / 8);
        for (unsigned len = bits; len > 0; len--) {
                c.prefixlen = len;
                const NetRule *r = rule_find(p, &c);
                if (r)
                        return r->action;
                /* The next shorter prefix: its last bit cleared. */
                c.addr[(len - 1) / 8] &= (uint8_t) ~(0x80 >> ((len - 1) % 8));
        }
        return p->default_action[f];
}

int netpolicy_set_resolvers(NetPolicy *p, const NetAddr *resolvers, size_t n_resolvers, NetPolicyError *ret_error) {
        NetPolicyError err = { .is_resolver = true };
        if (n_resolvers > NETPOLICY_RESOLVERS_MAX) {
                snprintf(err.message, sizeof(err.message), "too many resolvers (at most %u)", NETPOLICY_RESOLVERS_MAX);
                goto fail;
        }
        NetAddr *kept = calloc(n_resolvers ?: 1, sizeof(NetAddr));
        if (!kept)
                return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < n_resolvers; i++) {
                NetFamily f = net_family_of(resolvers[i].family);
                char a[INET6_ADDRSTRLEN];
                netaddr_format(&resolvers[i], a, sizeof(a));
                err.where_index = i;
                if (!p->enabled[f]) {
                        snprintf(err.message, sizeof(err.message),
                                 "resolver %s is an %s address, but %s is disabled (network.%s = \"disabled\")", a,
                                 f == NET_IPV6 ? "IPv6" : "IPv4", f == NET_IPV6 ? "IPv6" : "IPv4",
                                 net_family_to_string(f));
                        free(kept);
                        goto fail;
                }
                if (netpolicy_verdict(p, &resolvers[i]) != NET_ALLOW) {
                        snprintf(err.message, sizeof(err.message),
                                 "resolver %s is denied by the policy; allow it (e.g. \"%s/%u\" in "
                                 "network.default_allow) or choose another resolver",
                                 a, a, family_bits(resolvers[i].family));
                        free(kept);
                        goto fail;
                }
                kept[n++] = resolvers[i];
        }
        qsort(kept, n, sizeof(NetAddr), resolver_cmp);
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                if (k == 0 || addr_cmp(&kept[i], &kept[k - 1]) != 0)
                        kept[k++] = kept[i];
        free(p->resolvers);
        p->resolvers = kept;
        p->n_resolvers = k;
        return 0;

fail:
        if (ret_error)
                *ret_error = err;
        return -EINVAL;
}

int netpolicy_build(const bool enabled[_NET_FAMILY_MAX], const NetPolicyEntry *entries, size_t n_entries,
                    const NetAddr *resolvers, size_t n_resolvers, NetPolicy *ret, NetPolicyError *ret_error) {
        _cleanup_(netpolicy_done) NetPolicy p = {};
        _cleanup_free_ uint32_t *order = NULL;
        NetPolicyError err = {};

        if (n_entries > NETPOLICY_RULES_MAX || n_resolvers > NETPOLICY_RESOLVERS_MAX) {
                snprintf(err.message, sizeof(err.message), "too many %s (at most %u)",
                         n_entries > NETPOLICY_RULES_MAX ? "prefixes" : "resolvers",
                         n_entries > NETPOLICY_RULES_MAX ? NETPOLICY_RULES_MAX : NETPOLICY_RESOLVERS_MAX);
                err.where_index = 0;
                err.is_resolver = n_entries <= NETPOLICY_RULES_MAX;
                goto fail;
        }
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                p.enabled[f] = enabled[f];
                p.default_action[f] = NET_DENY;
        }

        p.rules = malloc((n_entries ?: 1) * sizeof(NetRule));
        p.resolvers = calloc(n_resolvers ?: 1, sizeof(NetAddr));
        if (!p.rules || !p.resolvers)
                return -ENOMEM;

        for (size_t i = 0; i < n_entries; i++) {
                NetFamily f = net_family_of(entries[i].prefix.family);
                if (!enabled[f]) {
                        char c[64];
                        cidr_format(&entries[i].prefix, c, sizeof(c));
                        err.where_index = entries[i].where_index;
                        snprintf(err.message, sizeof(err.message),
                                 "%s is an %s prefix, but %s is disabled (network.%s = \"disabled\"); remove it or "
                                 "enable %s",
                                 c, f == NET_IPV6 ? "IPv6" : "IPv4", f == NET_IPV6 ? "IPv6" : "IPv4",
                                 net_family_to_string(f), f == NET_IPV6 ? "IPv6" : "IPv4");
                        goto fail;
                }
        }
        /* A canonical policy read back (the coordinator's, netd's) comes
         * in order, no prefix twice: its rules as they are, no copy or
         * sort of 10,000 entries. */
        bool sorted = true;
        for (size_t i = 1; i < n_entries && sorted; i++)
                sorted = cidr_cmp(&entries[i - 1].prefix, &entries[i].prefix) < 0;
        if (sorted) {
                for (size_t i = 0; i < n_entries; i++)
                        if (entries[i].prefix.prefixlen == 0)
                                p.default_action[net_family_of(entries[i].prefix.family)] = entries[i].action;
                        else
                                p.rules[p.n_rules++] =
                                        (NetRule){ .prefix = entries[i].prefix, .action = entries[i].action };
        } else {
                order = malloc(n_entries * sizeof(uint32_t));
                if (!order || sort_order(entries, n_entries, order) < 0)
                        return -ENOMEM;
        }

        for (size_t i = 0; order && i < n_entries; i++) {
                const NetPolicyEntry *e = &entries[order[i]], *prev = i > 0 ? &entries[order[i - 1]] : NULL;
                if (prev && cidr_cmp(&e->prefix, &prev->prefix) == 0) {
                        if (e->action == prev->action)
                                continue; /* the same rule twice: one rule */
                        /* Report the entry that comes later in the caller's
                         * list (the order sorts it after the other). */
                        char c[64];
                        cidr_format(&e->prefix, c, sizeof(c));
                        err.where_index = e->where_index;
                        err.has_other = true;
                        err.other_index = prev->where_index;
                        snprintf(err.message, sizeof(err.message),
                                 "%s is both allowed and denied; an equal prefix cannot have two actions (use a "
                                 "longer prefix for the exception)",
                                 c);
                        goto fail;
                }
                if (e->prefix.prefixlen == 0) {
                        p.default_action[net_family_of(e->prefix.family)] = e->action;
                        continue;
                }
                p.rules[p.n_rules++] = (NetRule){ .prefix = e->prefix, .action = e->action };
        }

        if (n_resolvers) {
                free(p.resolvers);
                p.resolvers = NULL;
                int r = netpolicy_set_resolvers(&p, resolvers, n_resolvers, &err);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        goto fail;
        }

        *ret = p;
        p = (NetPolicy){};
        return 0;

fail:
        if (ret_error)
                *ret_error = err;
        return -EINVAL;
}

const char *host_addr_effect_to_string(HostAddrEffect e) {
        static const char *const t[_HOST_ADDR_EFFECT_MAX] = {
                [HOST_ADDR_IMPLICIT_DENY] = "implicit_deny",
                [HOST_ADDR_POLICY_DENIES] = "policy_denies",
                [HOST_ADDR_RESOLVER] = "resolver_permitted",
        };
        return e < _HOST_ADDR_EFFECT_MAX ? t[e] : "?";
}

static int rule_cmp(const void *x, const void *y) {
        return cidr_cmp(&((const NetRule *) x)->prefix, &((const NetRule *) y)->prefix);
}

int netpolicy_deny_addresses(NetPolicy *p, const NetAddr *addrs, size_t n, HostAddrEffect *ret_effect) {
        _cleanup_free_ HostAddrEffect *effect = calloc(n ?: 1, sizeof(HostAddrEffect));
        _cleanup_free_ NetRule *fresh = calloc(n ?: 1, sizeof(NetRule));
        size_t changed = 0, added = 0;
        if (!effect || !fresh)
                return -ENOMEM;

        /* Each address's effect on the policy as given (an address twice
         * is denied by its first), and the rules that are new, before
         * anything changes: a failure changes nothing. */
        for (size_t i = 0; i < n; i++) {
                const NetAddr *a = &addrs[i];
                bool resolver = false, again = false;
                for (size_t k = 0; k < p->n_resolvers; k++)
                        resolver |= addr_cmp(&p->resolvers[k], a) == 0;
                for (size_t k = 0; k < i; k++)
                        again |= effect[k] == HOST_ADDR_IMPLICIT_DENY && addr_cmp(&addrs[k], a) == 0;
                effect[i] = resolver                                         ? HOST_ADDR_RESOLVER
                            : !again && netpolicy_verdict(p, a) == NET_ALLOW ? HOST_ADDR_IMPLICIT_DENY
                                                                             : HOST_ADDR_POLICY_DENIES;
                if (effect[i] != HOST_ADDR_IMPLICIT_DENY)
                        continue;
                changed++;
                Cidr whole = { .family = a->family, .prefixlen = family_bits(a->family) };
                memcpy(whole.addr, a->addr, family_bits(a->family) / 8);
                if (!rule_find(p, &whole))
                        fresh[added++] = (NetRule){ .prefix = whole, .action = NET_DENY };
        }
        if (p->n_rules + added > NETPOLICY_RULES_MAX)
                return -E2BIG;
        NetRule *rules = realloc(p->rules, (p->n_rules + added ?: 1) * sizeof(NetRule));
        if (!rules)
                return -ENOMEM;
        p->rules = rules;

        /* A rule on the very address (an allowed /32 or /128) now denies;
         * the new ones go in at their places, from the end (the rules stay
         * in canonical order without a sort of all of them). */
        for (size_t i = 0; i < n; i++)
                if (effect[i] == HOST_ADDR_IMPLICIT_DENY) {
                        Cidr whole = { .family = addrs[i].family, .prefixlen = family_bits(addrs[i].family) };
                        memcpy(whole.addr, addrs[i].addr, family_bits(addrs[i].family) / 8);
                        NetRule *same = rule_find(p, &whole);
                        if (same)
                                same->action = NET_DENY;
                }
        qsort(fresh, added, sizeof(NetRule), rule_cmp);
        size_t w = p->n_rules + added, r = p->n_rules;
        for (size_t k = added; k > 0;) {
                if (r > 0 && cidr_cmp(&p->rules[r - 1].prefix, &fresh[k - 1].prefix) > 0)
                        p->rules[--w] = p->rules[--r];
                else
                        p->rules[--w] = fresh[--k];
        }
        p->n_rules += added;
        if (ret_effect)
                memcpy(ret_effect, effect, n * sizeof(HostAddrEffect));
        return (int) changed;
}

int netpolicy_format(const NetPolicy *p, char **ret, size_t *ret_len) {
        StrBuf b = STRBUF_INIT;
        char c[64];

        strbuf_puts(&b, NETPOLICY_SCHEMA "\n");
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++)
                if (p->enabled[f])
                        strbuf_printf(&b, "family %s enabled default %s\n", net_family_to_string(f),
                                      net_action_to_string(p->default_action[f]));
                else
                        strbuf_printf(&b, "family %s disabled\n", net_family_to_string(f));
        /* Each rule written in place (10,000 of them on each start), in
         * room for most made once. */
        (void) strbuf_room(&b, 128 + p->n_rules * 32);
        for (size_t i = 0; i < p->n_rules; i++) {
                char *w = strbuf_room(&b, sizeof("rule ") + 64 + sizeof(" allow\n"));
                if (!w)
                        break;
                size_t n = sizeof("rule ") - 1;
                memcpy(w, "rule ", n);
                n += cidr_format(&p->rules[i].prefix, w + n, 64);
                const char *act = p->rules[i].action == NET_ALLOW ? " allow\n" : " deny\n";
                size_t al = p->rules[i].action == NET_ALLOW ? sizeof(" allow\n") - 1 : sizeof(" deny\n") - 1;
                memcpy(w + n, act, al);
                strbuf_grew(&b, n + al);
        }
        for (size_t i = 0; i < p->n_resolvers; i++) {
                netaddr_format(&p->resolvers[i], c, sizeof(c));
                strbuf_printf(&b, "resolver %s\n", c);
        }
        size_t len = b.len;
        char *s = strbuf_steal(&b);
        if (!s)
                return -ENOMEM;
        *ret = s;
        if (ret_len)
                *ret_len = len;
        return 0;
}

/* Next line of buf[*pos..len) into line (NUL-terminated); false at the end
 * or when a line is unterminated or too long. */
static bool next_line(const char *buf, size_t len, size_t *pos, char *line, size_t size) {
        const char *nl = memchr(buf + *pos, '\n', len - *pos);
        if (!nl)
                return false;
        size_t n = (size_t) (nl - (buf + *pos));
        if (n >= size)
                return false;
        memcpy(line, buf + *pos, n);
        line[n] = '\0';
        *pos += n + 1;
        return true;
}

int netpolicy_parse(const char *buf, size_t len, NetPolicy *ret, const char **ret_error) {
        _cleanup_free_ NetPolicyEntry *entries = NULL;
        NetAddr resolvers[NETPOLICY_RESOLVERS_MAX];
        size_t n_entries = 0, n_resolvers = 0, pos = 0, cap = 0;
        bool enabled[_NET_FAMILY_MAX] = {};
        char line[128];
        const char *why = "not a canonical network policy";

        if (len > NETPOLICY_CANONICAL_MAX) {
                *ret_error = "policy too large";
                return -EINVAL;
        }
        /* Room for a rule a line, made once (10,000 rules). */
        for (const char *nl = buf; (nl = memchr(nl, '\n', len - (size_t) (nl - buf))); nl++)
                cap++;
        cap = cap < NETPOLICY_RULES_MAX + 2 ? cap + 1 : NETPOLICY_RULES_MAX + 2;
        entries = malloc(cap * sizeof(NetPolicyEntry));
        if (!entries)
                return -ENOMEM;
        if (!next_line(buf, len, &pos, line, sizeof(line)) || strcmp(line, NETPOLICY_SCHEMA) != 0) {
                *ret_error = "unknown schema line (want \"" NETPOLICY_SCHEMA "\")";
                return -EINVAL;
        }
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                char want_on[64], want_off[64];
                if (!next_line(buf, len, &pos, line, sizeof(line))) {
                        *ret_error = "missing family line";
                        return -EINVAL;
                }
                snprintf(want_on, sizeof(want_on), "family %s enabled default ", net_family_to_string(f));
                snprintf(want_off, sizeof(want_off), "family %s disabled", net_family_to_string(f));
                if (strcmp(line, want_off) == 0)
                        continue;
                if (strncmp(line, want_on, strlen(want_on)) != 0) {
                        *ret_error = "bad family line";
                        return -EINVAL;
                }
                enabled[f] = true;
                const char *act = line + strlen(want_on);
                if (strcmp(act, "allow") == 0) {
                        if (n_entries >= cap) {
                                cap = cap ? cap * 2 : 16;
                                NetPolicyEntry *n = realloc(entries, cap * sizeof(*n));
                                if (!n)
                                        return -ENOMEM;
                                entries = n;
                        }
                        Cidr all = { .family = f == NET_IPV6 ? AF_INET6 : AF_INET };
                        entries[n_entries] = (NetPolicyEntry){ .prefix = all, .action = NET_ALLOW };
                        entries[n_entries].where_index = n_entries;
                        n_entries++;
                } else if (strcmp(act, "deny") != 0) {
                        *ret_error = "bad default action";
                        return -EINVAL;
                }
        }
        while (pos < len) {
                if (!next_line(buf, len, &pos, line, sizeof(line))) {
                        *ret_error = "unterminated or overlong line";
                        return -EINVAL;
                }
                if (strncmp(line, "rule ", 5) == 0) {
                        if (n_resolvers > 0) {
                                *ret_error = "rule after resolver";
                                return -EINVAL;
                        }
                        char *sp = strrchr(line + 5, ' ');
                        if (!sp) {
                                *ret_error = "bad rule line";
                                return -EINVAL;
                        }
                        *sp = '\0';
                        NetAction a;
                        if (strcmp(sp + 1, "allow") == 0)
                                a = NET_ALLOW;
                        else if (strcmp(sp + 1, "deny") == 0)
                                a = NET_DENY;
                        else {
                                *ret_error = "bad rule action";
                                return -EINVAL;
                        }
                        Cidr c;
                        const char *cwhy;
                        if (cidr_parse(line + 5, &c, &cwhy) < 0) {
                                *ret_error = cwhy;
                                return -EINVAL;
                        }
                        if (c.prefixlen == 0) {
                                *ret_error = "a /0 rule (the default action belongs on the family line)";
                                return -EINVAL;
                        }
                        if (n_entries >= NETPOLICY_RULES_MAX) {
                                *ret_error = "too many rules";
                                return -EINVAL;
                        }
                        if (n_entries >= cap) {
                                cap = cap ? cap * 2 : 16;
                                NetPolicyEntry *n = realloc(entries, cap * sizeof(*n));
                                if (!n)
                                        return -ENOMEM;
                                entries = n;
                        }
                        entries[n_entries] = (NetPolicyEntry){ .prefix = c, .action = a, .where_index = n_entries };
                        n_entries++;
                } else if (strncmp(line, "resolver ", 9) == 0) {
                        if (n_resolvers >= NETPOLICY_RESOLVERS_MAX) {
                                *ret_error = "too many resolvers";
                                return -EINVAL;
                        }
                        if (netaddr_parse(line + 9, &resolvers[n_resolvers]) < 0) {
                                *ret_error = "bad resolver address";
                                return -EINVAL;
                        }
                        n_resolvers++;
                } else {
                        *ret_error = "unknown line";
                        return -EINVAL;
                }
        }

        /* Accept only what the builder makes of it and the formatter writes
         * back byte for byte: sorted, unique, no conflicts, canonical text. */
        _cleanup_(netpolicy_done) NetPolicy p = {};
        NetPolicyError err;
        int r = netpolicy_build(enabled, entries, n_entries, resolvers, n_resolvers, &p, &err);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                *ret_error = "rules or resolvers contradict the policy";
                return -EINVAL;
        }
        _cleanup_free_ char *again = NULL;
        size_t again_len;
        r = netpolicy_format(&p, &again, &again_len);
        if (r < 0)
                return r;
        if (again_len != len || memcmp(again, buf, len) != 0) {
                *ret_error = why;
                return -EINVAL;
        }
        *ret = p;
        p = (NetPolicy){};
        return 0;
}

bool netpolicy_family_permits_any(const NetPolicy *p, NetFamily f) {
        if (!p->enabled[f])
                return false;
        if (p->default_action[f] == NET_ALLOW)
                /* Deny rules are prefixes longer than /0; something is left. */
                return true;
        for (size_t i = 0; i < p->n_rules; i++)
                if (net_family_of(p->rules[i].prefix.family) == f && p->rules[i].action == NET_ALLOW)
                        return true;
        return false;
}

bool netpolicy_permits_nothing(const NetPolicy *p) {
        return !netpolicy_family_permits_any(p, NET_IPV4) && !netpolicy_family_permits_any(p, NET_IPV6);
}

typedef struct Cover {
        NetRoute *routes;
        size_t n, cap;
        size_t limit; /* stop after this many routes (0: none) */
} Cover;

static int cover_add(Cover *c, const Cidr *prefix, bool permit) {
        if (c->n >= c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 64;
                NetRoute *n = realloc(c->routes, cap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                c->routes = n;
                c->cap = cap;
        }
        c->routes[c->n++] = (NetRoute){ .prefix = *prefix, .permit = permit };
        return 0;
}

/* rules[lo, hi) all lie within P (sorted). Emit the maximal prefixes inside P
 * on which the verdict is allow. */
static int cover(Cover *c, const Cidr *P, NetAction v, const NetRule *rules, size_t lo, size_t hi) {
        if (c->limit && c->n >= c->limit)
                return 0;
        if (lo < hi && cidr_cmp(&rules[lo].prefix, P) == 0) {
                v = rules[lo].action;
                lo++;
        }
        /* No rule inside: one route for all of P, except that /0 would be a
         * default route, which is never installed; its two halves are not. */
        if (lo == hi && (P->prefixlen > 0 || v != NET_ALLOW))
                return v == NET_ALLOW ? cover_add(c, P, true) : 0;

        /* Split at the bit after the prefix: sorted by address, the rules
         * with a 0 there come first. */
        size_t mid = lo;
        while (mid < hi && !addr_bit(rules[mid].prefix.addr, P->prefixlen))
                mid++;
        Cidr left = *P, right = *P;
        left.prefixlen = right.prefixlen = P->prefixlen + 1;
        addr_set_bit(right.addr, P->prefixlen);
        int r = cover(c, &left, v, rules, lo, mid);
        if (r < 0)
                return r;
        return cover(c, &right, v, rules, mid, hi);
}

static void family_range(const NetPolicy *p, NetFamily f, size_t *lo, size_t *hi) {
        size_t i = 0;
        while (i < p->n_rules && net_family_of(p->rules[i].prefix.family) != f)
                i++;
        *lo = i;
        while (i < p->n_rules && net_family_of(p->rules[i].prefix.family) == f)
                i++;
        *hi = i;
}

int netpolicy_permitted_routes(const NetPolicy *p, NetFamily f, size_t max, NetRoute **ret, size_t *ret_n) {
        Cover c = { .limit = max };
        size_t lo, hi;

        *ret = NULL;
        *ret_n = 0;
        if (!p->enabled[f] || max == 0)
                return 0;
        family_range(p, f, &lo, &hi);
        Cidr all = { .family = f == NET_IPV6 ? AF_INET6 : AF_INET };
        int r = cover(&c, &all, p->default_action[f], p->rules, lo, hi);
        if (r < 0) {
                free(c.routes);
                return r;
        }
        *ret = c.routes;
        *ret_n = c.n;
        return 0;
}

int netpolicy_routes(const NetPolicy *p, NetFamily f, NetRoute **ret, size_t *ret_n) {
        Cover c = {};
        size_t lo, hi;

        *ret = NULL;
        *ret_n = 0;
        if (!p->enabled[f])
                return 0;
        family_range(p, f, &lo, &hi);
        Cidr all = { .family = f == NET_IPV6 ? AF_INET6 : AF_INET };
        int r = cover(&c, &all, p->default_action[f], p->rules, lo, hi);
        for (size_t i = lo; r >= 0 && i < hi; i++)
                if (p->rules[i].action == NET_DENY)
                        r = cover_add(&c, &p->rules[i].prefix, false);
        if (r < 0) {
                free(c.routes);
                return r;
        }
        *ret = c.routes;
        *ret_n = c.n;
        return 0;
}

int netpolicy_kernel_routes(const NetPolicy *p, NetFamily f, NetRoute **ret, size_t *ret_n) {
        Cover c = {};
        size_t lo, hi;

        *ret = NULL;
        *ret_n = 0;
        if (!p->enabled[f])
                return 0;
        family_range(p, f, &lo, &hi);
        int r = 0;
        if (p->default_action[f] == NET_ALLOW) {
                /* The default as its two halves (never a default route),
                 * each unless a rule has that very prefix. */
                Cidr half = { .family = f == NET_IPV6 ? AF_INET6 : AF_INET, .prefixlen = 1 };
                for (int b = 0; b < 2 && r >= 0; b++) {
                        half.addr[0] = b ? 0x80 : 0;
                        bool ruled = false;
                        for (size_t i = lo; i < hi && !ruled; i++)
                                ruled = cidr_cmp(&p->rules[i].prefix, &half) == 0;
                        if (!ruled)
                                r = cover_add(&c, &half, true);
                }
        }
        for (size_t i = lo; r >= 0 && i < hi; i++)
                r = cover_add(&c, &p->rules[i].prefix, p->rules[i].action == NET_ALLOW);
        if (r < 0) {
                free(c.routes);
                return r;
        }
        *ret = c.routes;
        *ret_n = c.n;
        return 0;
}

void netpolicy_blocks_free(NetBlock *b, size_t n) {
        for (size_t i = 0; b && i < n; i++)
                free(b[i].except);
        free(b);
}

/* The rules are in canonical order (by address, then by length), which is
 * the prefix tree in pre-order: a rule's nearest enclosing rule is on the
 * stack of the rules kept so far. A rule that says what its nearest kept
 * enclosing rule (or the default) says changes nothing and is not kept. */
int netpolicy_blocks(const NetPolicy *p, NetFamily f, NetBlock **ret, size_t *ret_n) {
        *ret = NULL;
        *ret_n = 0;
        if (!p->enabled[f])
                return 0;
        size_t lo, hi;
        family_range(p, f, &lo, &hi);
        /* stack[k]: index into blocks for an allow rule kept, or
         * SIZE_MAX for a deny rule kept; rule[k] its rule. */
        size_t depth = 0, n = 0, cap = hi - lo + 1;
        size_t *stack = calloc(cap, sizeof(size_t));
        const Cidr **under = calloc(cap, sizeof(Cidr *));
        NetBlock *blocks = calloc(cap, sizeof(NetBlock));
        int r = 0;
        if (!stack || !under || !blocks) {
                r = -ENOMEM;
                goto out;
        }
        Cidr all = { .family = f == NET_IPV6 ? AF_INET6 : AF_INET };
        NetAction root = p->default_action[f];
        if (root == NET_ALLOW)
                blocks[n++] = (NetBlock){ .cidr = all };
        for (size_t i = lo; i < hi; i++) {
                const NetRule *rule = &p->rules[i];
                while (depth > 0 && !cidr_within(&rule->prefix, under[depth - 1]))
                        depth--;
                NetAction outer = depth > 0 ? (stack[depth - 1] == SIZE_MAX ? NET_DENY : NET_ALLOW) : root;
                if (rule->action == outer)
                        continue;
                if (rule->action == NET_ALLOW) {
                        blocks[n] = (NetBlock){ .cidr = rule->prefix };
                        stack[depth] = n++;
                } else {
                        /* An exception of the block it lies in directly. */
                        NetBlock *b = depth > 0 ? &blocks[stack[depth - 1]] : &blocks[0];
                        Cidr *e = realloc(b->except, (b->n_except + 1) * sizeof(Cidr));
                        if (!e) {
                                r = -ENOMEM;
                                goto out;
                        }
                        b->except = e;
                        e[b->n_except++] = rule->prefix;
                        stack[depth] = SIZE_MAX;
                }
                under[depth++] = &rule->prefix;
        }
        *ret = blocks;
        *ret_n = n;
        blocks = NULL;
out:
        if (blocks)
                netpolicy_blocks_free(blocks, n);
        free(stack);
        free(under);
        return r;
}

/* The first address within P whose verdict is want. */
static bool first_with(const Cidr *P, NetAction v, NetAction want, const NetRule *rules, size_t lo, size_t hi,
                       NetAddr *ret) {
        if (lo < hi && cidr_cmp(&rules[lo].prefix, P) == 0) {
                v = rules[lo].action;
                lo++;
        }
        if (lo == hi) {
                if (v != want)
                        return false;
                *ret = (NetAddr){ .family = P->family };
                memcpy(ret->addr, P->addr, sizeof(ret->addr));
                return true;
        }
        size_t mid = lo;
        while (mid < hi && !addr_bit(rules[mid].prefix.addr, P->prefixlen))
                mid++;
        Cidr left = *P, right = *P;
        left.prefixlen = right.prefixlen = P->prefixlen + 1;
        addr_set_bit(right.addr, P->prefixlen);
        return first_with(&left, v, want, rules, lo, mid, ret) || first_with(&right, v, want, rules, mid, hi, ret);
}

bool netpolicy_denied_probe_address(const NetPolicy *p, const NetRule *rule, NetAddr *ret) {
        size_t lo = 0, hi = p->n_rules;
        /* The rules within the rule's prefix, itself first: the first not
         * before it, by binary search (the rules are in order). */
        for (size_t n = hi; lo < n;) {
                size_t mid = lo + (n - lo) / 2;
                if (cidr_cmp(&p->rules[mid].prefix, &rule->prefix) < 0)
                        lo = mid + 1;
                else
                        n = mid;
        }
        size_t end = lo;
        while (end < hi && cidr_within(&p->rules[end].prefix, &rule->prefix))
                end++;
        return first_with(&rule->prefix, rule->action, NET_DENY, p->rules, lo, end, ret);
}
