/* SPDX-License-Identifier: MIT */
/* lazaret-netd: the Network Sidecar's only program (decision 7).
 *
 *   lazaret-netd [--policy-fd N] [--control-fd N] [--ipv6-uplink ADDR/LEN,GATEWAY]
 *                [--kernel-stack] [--listen-fd N [--keep-idle-ms N]]
 *
 * Reads the Derived Network Policy from a sealed memfd (fd 3 by default),
 * replaces every route of the namespace's main table with the policy's
 * routes (explicit gateway routes over the uplink, prohibit routes for the
 * denied prefixes, never a default route), reads them back and writes an
 * attestation, one JSON object per packet, to the control socket (fd 4, a
 * SOCK_SEQPACKET socket). Then it stays, holding the namespace, and applies
 * each further policy that arrives on the control socket (a packet "update"
 * carrying a sealed memfd), attesting again. SIGTERM ends it.
 *
 * With --listen-fd N (the native backend's sidecar, a namespace of the
 * coordinator's own) netd may outlive the coordinator: a packet "keep KEY
 * PID" (KEY 64 hex digits, PID the uplink's slirp4netns) makes it listen
 * on N (bound by the coordinator; a connection's peer is then netd) and
 * stay, for NETD_KEEP_IDLE_MS (or --keep-idle-ms, shorter), after the
 * control socket closes, with its routes and its last attestation. A
 * later coordinator connects to the listening socket (its path in the
 * Domain, beside the key) and sends "state KEY":
 * netd checks the key and that its uplink's link is still there, and
 * answers with its last attestation; the connection is then the control
 * socket. "quit" ends it; so does the uplink's end (a pidfd on PID), and
 * the idle time with no coordinator. Anything else on a new connection
 * closes it.
 *
 *   lazaret-netd probe [--deny ADDR]... [--route ADDR]... [--permit ADDR:PORT]...
 *                      [--dns ADDR]... [--dns-name NAME] [--timeout-ms N]
 *
 * Probes reachability from the namespace it runs in and prints one JSON
 * object per line; exit 0 when every observation is as the policy says, 1
 * when one is not, 2 on bad usage. Denied destinations are looked up in the
 * routing table first and connected to only when no route exists, so a
 * probe never sends a packet towards a denied address.
 *
 * The first policy's routes live in the main table, where gVisor's own
 * stack (runsc_network = "sandbox") copies them when it starts: gateway
 * routes that cover exactly the permitted space (gVisor ignores prohibit
 * routes). With --kernel-stack the namespace's own stack is the sandbox's
 * (the native backend, runsc_network = "host"): one route per rule, the
 * kernel's longest match deciding (netpolicy_kernel_routes). DNS to
 * anything but the resolvers is also dropped on the uplinks' egress
 * (nf_tables), which sees the frames of either stack.
 *
 *   lazaret-netd gvisor-routes --policy CANONICAL [--uplink GATEWAY,DEVICE]...
 *
 * Inside a sandbox with gVisor's own stack (runsc exec with CAP_NET_ADMIN):
 * replaces gVisor's routes with the policy's and reads them back; one JSON
 * line, exit 0 when they match.
 *
 * Static, no shell, no libc beyond the kernel interfaces: the sidecar image
 * holds this file alone. That is also why it is one file of some 1,500
 * lines: its three modes share the netlink and nf_tables code (which lives
 * in netpolicy/rtnl and netpolicy/nft) and this program's own setup, and it links
 * nothing of the rest of Lazaret. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "netpolicy-digest.h"
#include "netpolicy.h"
#include "nft.h"
#include "rtnl.h"
#include "strbuf.h"

#define ATTESTATION_SCHEMA "lazaret.network-readiness-attestation.v1"
#define SEALS_REQUIRED     (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
#define PACKET_MAX         (64u * 1024u)
/* DNS (port 53, UDP and TCP) to anything but the resolvers: rules match the
 * port and send the lookup to a table that holds the resolvers' routes
 * alone; the next rule prohibits the rest. */
#define DNS_TABLE     53u
#define DNS_RULE_PRIO 100u
/* Updates switch tables: the new policy goes into a table of its own (with
 * a prohibit catch-all, so no lookup falls through), one rule switches to
 * it, then the old routes go. The first policy lives in the main table,
 * where gVisor's own stack reads it. */
#define POLICY_TABLE_A   101u
#define POLICY_TABLE_B   102u
#define POLICY_RULE_PRIO 1000u

static uint32_t active_table = 0; /* 0: main */
/* --kernel-stack: routes for the kernel's longest match (one per rule), not
 * gVisor's cover. Never in gvisor-routes. */
static bool kernel_stack = false;

typedef struct Uplink {
        bool have[_NET_FAMILY_MAX];
        NetAddr gateway[_NET_FAMILY_MAX];
        int oif[_NET_FAMILY_MAX];
} Uplink;

static volatile sig_atomic_t terminate = 0;

/* The last attestation sent (kept: what a later coordinator gets). */
static char *last_attestation = NULL;

/* Kept, with no coordinator, this long before ending (and with it the
 * uplink, which ends when its exit pipe closes). */
#define NETD_KEEP_IDLE_MS (10 * 60 * 1000)
static int64_t keep_idle_ms = NETD_KEEP_IDLE_MS; /* --keep-idle-ms: shorter, for the tests */
#define KEY_HEX 64

static void on_term(int sig) {
        (void) sig;
        terminate = 1;
}

static void die_usage(const char *msg) {
        fprintf(stderr, "lazaret-netd: %s\n", msg);
        exit(2);
}

/* The policy fd must be a memfd sealed against every change; anything else
 * could be rewritten under us after we read it. */
static int read_sealed(int fd, char **ret, size_t *ret_len, const char **ret_why) {
        int seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0) {
                *ret_why = errno == EBADF ? "no policy file descriptor" : "the policy is not in a memfd";
                return -EINVAL;
        }
        if ((seals & SEALS_REQUIRED) != SEALS_REQUIRED) {
                *ret_why = "the policy memfd is not sealed (need F_SEAL_SEAL, SHRINK, GROW and WRITE)";
                return -EPERM;
        }
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
            (uint64_t) st.st_size > NETPOLICY_CANONICAL_MAX) {
                *ret_why = "the policy memfd is empty or too large";
                return -EINVAL;
        }
        size_t len = (size_t) st.st_size;
        char *buf = malloc(len + 1);
        if (!buf)
                return -ENOMEM;
        size_t got = 0;
        while (got < len) {
                ssize_t k = pread(fd, buf + got, len - got, (off_t) got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        free(buf);
                        *ret_why = "cannot read the policy memfd";
                        return -EIO;
                }
                got += (size_t) k;
        }
        buf[len] = '\0';
        *ret = buf;
        *ret_len = len;
        return 0;
}

static int find_uplink(Rtnl *nl, Uplink *u) {
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                if (u->have[f])
                        continue;
                RtnlRoute *rt;
                size_t n;
                int r = rtnl_dump_routes(nl, f == NET_IPV6 ? AF_INET6 : AF_INET, &rt, &n);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++)
                        if (rt[i].dst.prefixlen == 0 && rt[i].type == RTN_UNICAST && rt[i].has_gateway &&
                            rt[i].oif > 0) {
                                u->have[f] = true;
                                u->gateway[f] = rt[i].gateway;
                                u->oif[f] = rt[i].oif;
                                break;
                        }
                free(rt);
        }
        return 0;
}

/* Order on what makes two routes the same for the policy: destination,
 * type, gateway. */
static int route_cmp(const void *x, const void *y) {
        const RtnlRoute *a = x, *b = y;
        if (a->dst.family != b->dst.family)
                return a->dst.family < b->dst.family ? -1 : 1;
        int r = memcmp(a->dst.addr, b->dst.addr, 16);
        if (r != 0)
                return r;
        if (a->dst.prefixlen != b->dst.prefixlen)
                return a->dst.prefixlen < b->dst.prefixlen ? -1 : 1;
        if (a->type != b->type)
                return a->type < b->type ? -1 : 1;
        if (a->has_gateway != b->has_gateway)
                return a->has_gateway ? 1 : -1;
        return a->has_gateway ? memcmp(a->gateway.addr, b->gateway.addr, 16) : 0;
}

/* set must be sorted with route_cmp. */
static bool route_in(const RtnlRoute *r, const RtnlRoute *set, size_t n) {
        return n > 0 && bsearch(r, set, n, sizeof(*set), route_cmp);
}

static void routes_sort(RtnlRoute *v, size_t n) {
        if (n > 1)
                qsort(v, n, sizeof(*v), route_cmp);
}

/* The routes the policy wants, in kernel terms. */
static int desired_routes(const NetPolicy *p, const Uplink *u, NetFamily f, RtnlRoute **ret, size_t *ret_n,
                          const char **ret_why) {
        NetRoute *nr;
        size_t n;
        int r = kernel_stack ? netpolicy_kernel_routes(p, f, &nr, &n) : netpolicy_routes(p, f, &nr, &n);
        if (r < 0)
                return r;
        RtnlRoute *out = calloc(n ?: 1, sizeof(*out));
        if (!out) {
                free(nr);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                out[i] = (RtnlRoute){ .dst = nr[i].prefix, .protocol = RTPROT_STATIC };
                out[i].dst.family = f == NET_IPV6 ? AF_INET6 : AF_INET;
                if (nr[i].permit) {
                        if (!u->have[f]) {
                                free(nr);
                                free(out);
                                *ret_why = f == NET_IPV6 ? "the policy permits IPv6 destinations, but the namespace "
                                                           "has no IPv6 uplink"
                                                         : "the policy permits IPv4 destinations, but the namespace "
                                                           "has no IPv4 uplink";
                                return -ENETUNREACH;
                        }
                        out[i].type = RTN_UNICAST;
                        out[i].scope = RT_SCOPE_UNIVERSE;
                        out[i].has_gateway = true;
                        out[i].gateway = u->gateway[f];
                        out[i].oif = u->oif[f];
                        out[i].flags = RTNH_F_ONLINK;
                } else {
                        out[i].type = RTN_PROHIBIT;
                        out[i].scope = RT_SCOPE_UNIVERSE;
                }
        }
        free(nr);
        *ret = out;
        *ret_n = n;
        return 0;
}

/* Replace the main table's routes of family f with want[], never making
 * reachable, even for a moment, what the new policy denies: first every
 * unicast route the new policy does not have goes, then the prohibit routes
 * come, then the new gateway routes, and last the old routes of other
 * types. */
static int apply_family(Rtnl *nl, int af, RtnlRoute *want, size_t n_want, const char **ret_why) {
        RtnlRoute *cur;
        size_t n_cur;
        int r = rtnl_dump_routes(nl, af, &cur, &n_cur);
        if (r < 0) {
                *ret_why = "cannot list the namespace's routes";
                return r;
        }
        routes_sort(cur, n_cur);
        size_t total = n_cur + n_want, k = 0;
        RtnlRoute *ops = calloc(total ?: 1, sizeof(*ops));
        bool *add = calloc(total ?: 1, sizeof(*add));
        if (!ops || !add) {
                free(cur);
                free(ops);
                free(add);
                return -ENOMEM;
        }
        size_t phase_end[4];
        for (size_t i = 0; i < n_cur; i++)
                if (cur[i].type == RTN_UNICAST && !route_in(&cur[i], want, n_want)) {
                        ops[k] = cur[i];
                        add[k++] = false;
                }
        phase_end[0] = k;
        for (int permit = 0; permit < 2; permit++) {
                for (size_t i = 0; i < n_want; i++)
                        if ((want[i].type == RTN_UNICAST) == (bool) permit && !route_in(&want[i], cur, n_cur)) {
                                ops[k] = want[i];
                                add[k++] = true;
                        }
                phase_end[1 + permit] = k;
        }
        for (size_t i = 0; i < n_cur; i++)
                if (cur[i].type != RTN_UNICAST && cur[i].type != RTN_MULTICAST && !route_in(&cur[i], want, n_want)) {
                        ops[k] = cur[i];
                        add[k++] = false;
                }
        phase_end[3] = k;
        /* One batch per phase, so a phase is complete before the next
         * begins. */
        size_t start = 0;
        for (int ph = 0; ph < 4 && r >= 0; ph++) {
                size_t failed = 0;
                r = rtnl_route_batch(nl, ops + start, add + start, phase_end[ph] - start, &failed);
                if (r < 0) {
                        static char why[160];
                        char c[64];
                        cidr_format(&ops[start + failed].dst, c, sizeof(c));
                        snprintf(why, sizeof(why), "cannot %s the route %s: %s", add[start + failed] ? "add" : "delete",
                                 c, strerror(-r));
                        *ret_why = why;
                }
                start = phase_end[ph];
        }
        free(cur);
        free(ops);
        free(add);
        return r;
}

typedef struct Attestation {
        bool ok;
        size_t observed[_NET_FAMILY_MAX];
        size_t gateway[_NET_FAMILY_MAX], prohibit[_NET_FAMILY_MAX];
        bool ipv6_off;
        size_t dns_rules, dns_filter_rules;
        const char *why;
} Attestation;

static int read_sysctl_bool(const char *path, bool *ret) {
        char b[8] = "";
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        ssize_t k = read(fd, b, sizeof(b) - 1);
        close(fd);
        if (k <= 0)
                return -EIO;
        *ret = b[0] == '1';
        return 0;
}

/* Read the routes back and compare them with the policy's, exactly. */
static void catch_all(int af, uint32_t table, RtnlRoute *ret) {
        *ret = (RtnlRoute){
                .type = RTN_PROHIBIT, .protocol = RTPROT_STATIC, .scope = RT_SCOPE_UNIVERSE, .table = table
        };
        ret->dst.family = af;
}

static void attest(Rtnl *nl, const NetPolicy *p, const Uplink *u, Attestation *a) {
        *a = (Attestation){ .ok = true };
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                int af = f == NET_IPV6 ? AF_INET6 : AF_INET;
                RtnlRoute *want = NULL, *cur = NULL;
                size_t n_want = 0, n_cur = 0;
                if (!p->enabled[f]) {
                        bool off = false;
                        if (read_sysctl_bool("/proc/sys/net/ipv6/conf/all/disable_ipv6", &off) < 0 || !off) {
                                a->ok = false;
                                a->why = "IPv6 is disabled by the policy but on in the namespace";
                        }
                        a->ipv6_off = off;
                        continue;
                }
                const char *why = NULL;
                if (desired_routes(p, u, f, &want, &n_want, &why) < 0 ||
                    rtnl_dump_table(nl, af, active_table, &cur, &n_cur) < 0) {
                        a->ok = false;
                        a->why = why ?: "cannot read the routes back";
                        free(want);
                        continue;
                }
                if (active_table != 0) {
                        /* After an update: the policy's table with its
                         * catch-all, and nothing left in main. */
                        RtnlRoute *grown = realloc(want, (n_want + 1) * sizeof(*want));
                        if (!grown) {
                                a->ok = false;
                                a->why = "out of memory";
                                free(want);
                                free(cur);
                                continue;
                        }
                        want = grown;
                        catch_all(af, active_table, &want[n_want++]);
                        RtnlRoute *mainr = NULL;
                        size_t n_main = 0;
                        if (rtnl_dump_routes(nl, af, &mainr, &n_main) < 0) {
                                a->ok = false;
                                a->why = "cannot read the main table";
                        }
                        for (size_t i = 0; i < n_main; i++)
                                if (mainr[i].type != RTN_MULTICAST) {
                                        a->ok = false;
                                        a->why = "routes are left in the main table";
                                }
                        free(mainr);
                }
                routes_sort(want, n_want);
                routes_sort(cur, n_cur);
                for (size_t i = 0; i < n_cur; i++) {
                        /* The kernel's ff00::/8 multicast route reaches no
                         * unicast destination; it comes back on every
                         * address change, and is left alone. */
                        if (cur[i].type == RTN_MULTICAST)
                                continue;
                        a->observed[f]++;
                        if (cur[i].type == RTN_UNICAST)
                                a->gateway[f]++;
                        else if (cur[i].type == RTN_PROHIBIT)
                                a->prohibit[f]++;
                        bool is_catch_all = active_table != 0 && cur[i].type == RTN_PROHIBIT;
                        if ((cur[i].dst.prefixlen == 0 && !is_catch_all) || !route_in(&cur[i], want, n_want)) {
                                a->ok = false;
                                a->why = cur[i].dst.prefixlen == 0 ? "a default route is present"
                                                                   : "a route the policy does not have is present";
                        }
                }
                for (size_t i = 0; i < n_want; i++)
                        if (!route_in(&want[i], cur, n_cur)) {
                                a->ok = false;
                                a->why = "a route of the policy is missing";
                        }
                free(want);
                free(cur);
        }
}

static int send_packet(int fd, const char *s) {
        if (fd < 0)
                return 0;
        ssize_t k = send(fd, s, strlen(s), MSG_NOSIGNAL);
        return k < 0 ? negative_errno() : 0;
}

static void report_error(int ctl, const char *why) {
        StrBuf b = STRBUF_INIT;
        fprintf(stderr, "lazaret-netd: %s\n", why);
        /* Messages are ours: no quotes or backslashes to escape. */
        strbuf_printf(&b, "{\"type\":\"error\",\"message\":\"%s\"}", why);
        (void) send_packet(ctl, strbuf_str(&b));
        strbuf_done(&b);
}

static int report_attestation(int ctl, const char *digest, const Attestation *a, const Uplink *u) {
        struct stat ns = {};
        (void) stat("/proc/self/ns/net", &ns);
        StrBuf b = STRBUF_INIT;
        strbuf_printf(&b,
                      "{\"type\":\"attestation\",\"schema_id\":\"" ATTESTATION_SCHEMA "\","
                      "\"derived_policy_digest\":\"%s\","
                      "\"enforcement_namespace\":{\"device\":%llu,\"inode\":%llu},"
                      "\"observation\":{\"policy_delivery\":\"SealedMemfd\",\"helper_ready\":true,"
                      "\"observed_routes\":%zu,\"routes_attested\":%s},"
                      "\"routes\":{\"ipv4\":{\"gateway\":%zu,\"prohibit\":%zu},"
                      "\"ipv6\":{\"gateway\":%zu,\"prohibit\":%zu}},\"dns_rules\":%zu,\"dns_filter_rules\":%zu,"
                      "\"ipv6_disabled\":%s,\"routes_for\":\"%s\"",
                      digest, (unsigned long long) ns.st_dev, (unsigned long long) ns.st_ino,
                      a->observed[NET_IPV4] + a->observed[NET_IPV6], a->ok ? "true" : "false", a->gateway[NET_IPV4],
                      a->prohibit[NET_IPV4], a->gateway[NET_IPV6], a->prohibit[NET_IPV6], a->dns_rules,
                      a->dns_filter_rules, a->ipv6_off ? "true" : "false", kernel_stack ? "kernel" : "gvisor");
        /* The uplinks, for gVisor's own stack to be given the same routes
         * when the policy changes. */
        strbuf_puts(&b, ",\"uplinks\":{");
        for (NetFamily f = 0, n = 0; f < _NET_FAMILY_MAX; f++) {
                char gw[INET6_ADDRSTRLEN + 1], dev[IF_NAMESIZE];
                if (!u->have[f] || !if_indextoname((unsigned) u->oif[f], dev) ||
                    dev[strspn(dev, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")] != '\0')
                        continue;
                netaddr_format(&u->gateway[f], gw, sizeof(gw));
                strbuf_printf(&b, "%s\"%s\":{\"gateway\":\"%s\",\"device\":\"%s\"}", n++ ? "," : "",
                              f == NET_IPV6 ? "ipv6" : "ipv4", gw, dev);
        }
        strbuf_puts(&b, "}");
        if (!a->ok)
                strbuf_printf(&b, ",\"error\":\"%s\"", a->why ?: "routes differ from the policy");
        strbuf_puts(&b, "}");
        if (b.oom)
                return -ENOMEM;
        int r = send_packet(ctl, strbuf_str(&b));
        if (ctl < 0)
                puts(strbuf_str(&b));
        free(last_attestation);
        last_attestation = a->ok ? strbuf_steal(&b) : NULL;
        strbuf_done(&b);
        return r;
}

static void dns_rules(int af, RtnlRule ret[4]) {
        for (int i = 0; i < 4; i++)
                ret[i] = (RtnlRule){ .family = af,
                                     .priority = DNS_RULE_PRIO + (uint32_t) i,
                                     .ip_proto = i < 2 ? IPPROTO_UDP : IPPROTO_TCP,
                                     .dport = 53,
                                     .action = i % 2 == 0 ? FR_ACT_TO_TBL : FR_ACT_PROHIBIT,
                                     .table = i % 2 == 0 ? DNS_TABLE : 0 };
}

static bool rule_same(const RtnlRule *a, const RtnlRule *b) {
        return a->family == b->family && a->priority == b->priority && a->ip_proto == b->ip_proto &&
               a->dport == b->dport && a->action == b->action && (a->action != FR_ACT_TO_TBL || a->table == b->table);
}

/* The kernel's own rules of a fresh namespace. */
static bool rule_is_default(const RtnlRule *r) {
        return r->action == FR_ACT_TO_TBL && !r->ip_proto && !r->dport &&
               ((r->priority == 0 && r->table == RT_TABLE_LOCAL) ||
                (r->priority == 32766 && r->table == RT_TABLE_MAIN) ||
                (r->priority == 32767 && r->table == RT_TABLE_DEFAULT));
}

static int dns_routes(const NetPolicy *p, const Uplink *u, NetFamily f, RtnlRoute **ret, size_t *ret_n,
                      const char **ret_why) {
        RtnlRoute *out = calloc(p->n_resolvers + 1, sizeof(*out));
        size_t n = 0;
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_resolvers; i++) {
                if (net_family_of(p->resolvers[i].family) != f)
                        continue;
                if (!u->have[f]) {
                        free(out);
                        *ret_why = "a resolver's family has no uplink in the namespace";
                        return -ENETUNREACH;
                }
                RtnlRoute *rt = &out[n++];
                *rt = (RtnlRoute){ .type = RTN_UNICAST,
                                   .protocol = RTPROT_STATIC,
                                   .scope = RT_SCOPE_UNIVERSE,
                                   .has_gateway = true,
                                   .gateway = u->gateway[f],
                                   .oif = u->oif[f],
                                   .flags = RTNH_F_ONLINK,
                                   .table = DNS_TABLE };
                rt->dst.family = p->resolvers[i].family;
                rt->dst.prefixlen = p->resolvers[i].family == AF_INET6 ? 128 : 32;
                memcpy(rt->dst.addr, p->resolvers[i].addr, 16);
        }
        routes_sort(out, n);
        *ret = out;
        *ret_n = n;
        return 0;
}

/* The DNS filter on the uplinks' egress: what the kernel's stack routes and
 * what gVisor's own stack writes to the device alike. */
static void dns_filter_spec(const NetPolicy *p, const Uplink *u, NftDns *ret) {
        *ret = (NftDns){ .resolvers = p->resolvers, .n_resolvers = p->n_resolvers };
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                ret->family[f] = p->enabled[f];
                if (!p->enabled[f] || !u->have[f])
                        continue;
                char name[IF_NAMESIZE];
                if (!if_indextoname((unsigned) u->oif[f], name))
                        continue;
                bool dup = false;
                for (size_t i = 0; i < ret->n_devices; i++)
                        dup |= strcmp(ret->devices[i], name) == 0;
                if (!dup && ret->n_devices < NFT_DNS_DEVICES_MAX)
                        memcpy(ret->devices[ret->n_devices++], name, sizeof(name));
        }
}

/* Port 53 may reach the resolvers only: their routes in DNS_TABLE, the
 * rules, prohibit rules first so nothing is open while they go in. */
static int apply_dns(Rtnl *nl, const NetPolicy *p, const Uplink *u, const char **ret_why) {
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                if (!p->enabled[f])
                        continue;
                int af = f == NET_IPV6 ? AF_INET6 : AF_INET;
                RtnlRoute *want = NULL, *cur = NULL;
                size_t n_want = 0, n_cur = 0;
                int r = dns_routes(p, u, f, &want, &n_want, ret_why);
                if (r < 0)
                        return r;
                r = rtnl_dump_table(nl, af, DNS_TABLE, &cur, &n_cur);
                if (r < 0) {
                        free(want);
                        *ret_why = "cannot list the DNS table";
                        return r;
                }
                routes_sort(cur, n_cur);
                RtnlRule rules[4], *have = NULL;
                size_t n_have = 0;
                dns_rules(af, rules);
                r = rtnl_dump_rules(nl, af, &have, &n_have);
                for (int order = 0; r >= 0 && order < 2; order++)
                        for (int i = 0; r >= 0 && i < 4; i++) {
                                /* prohibit rules (odd) first, then lookups */
                                if ((i % 2 == 1) != (order == 0))
                                        continue;
                                bool present = false;
                                for (size_t k = 0; k < n_have; k++)
                                        present |= rule_same(&rules[i], &have[k]);
                                if (!present)
                                        r = rtnl_rule_add(nl, &rules[i]);
                        }
                if (r < 0)
                        *ret_why = "cannot add the DNS rules";
                for (size_t i = 0; r >= 0 && i < n_cur; i++)
                        if (!route_in(&cur[i], want, n_want))
                                r = rtnl_route_del(nl, &cur[i]);
                for (size_t i = 0; r >= 0 && i < n_want; i++)
                        if (!route_in(&want[i], cur, n_cur))
                                r = rtnl_route_add(nl, &want[i]);
                if (r < 0 && !*ret_why)
                        *ret_why = "cannot install the resolvers' routes";
                free(want);
                free(cur);
                free(have);
                if (r < 0)
                        return r;
        }
        NftDns d;
        dns_filter_spec(p, u, &d);
        /* No uplink, no egress: nothing to filter. */
        return d.n_devices > 0 ? nft_dns_apply(&d, ret_why) : 0;
}

static void attest_dns(Rtnl *nl, const NetPolicy *p, const Uplink *u, Attestation *a) {
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                if (!p->enabled[f])
                        continue;
                int af = f == NET_IPV6 ? AF_INET6 : AF_INET;
                RtnlRoute *want = NULL, *cur = NULL;
                RtnlRule rules[4], *have = NULL;
                size_t n_want = 0, n_cur = 0, n_have = 0;
                const char *why = NULL;
                dns_rules(af, rules);
                if (dns_routes(p, u, f, &want, &n_want, &why) < 0 ||
                    rtnl_dump_table(nl, af, DNS_TABLE, &cur, &n_cur) < 0 ||
                    rtnl_dump_rules(nl, af, &have, &n_have) < 0) {
                        a->ok = false;
                        a->why = why ?: "cannot read the DNS rules back";
                } else {
                        routes_sort(cur, n_cur);
                        bool same = n_cur == n_want;
                        for (size_t i = 0; same && i < n_want; i++)
                                same = route_in(&want[i], cur, n_cur);
                        if (!same) {
                                a->ok = false;
                                a->why = "the resolvers' routes differ from the policy";
                        }
                        for (int i = 0; i < 4; i++) {
                                bool present = false;
                                for (size_t k = 0; k < n_have; k++)
                                        present |= rule_same(&rules[i], &have[k]);
                                if (!present) {
                                        a->ok = false;
                                        a->why = "a DNS rule is missing";
                                }
                        }
                        for (size_t k = 0; k < n_have; k++) {
                                bool ours = false;
                                for (int i = 0; i < 4; i++)
                                        ours |= rule_same(&rules[i], &have[k]);
                                RtnlRule pol = { .family = af,
                                                 .priority = POLICY_RULE_PRIO,
                                                 .action = FR_ACT_TO_TBL,
                                                 .table = active_table };
                                ours |= active_table != 0 && rule_same(&pol, &have[k]);
                                if (!ours && !rule_is_default(&have[k])) {
                                        a->ok = false;
                                        a->why = "a routing rule the policy does not have is present";
                                }
                        }
                        a->dns_rules += 4;
                }
                free(want);
                free(cur);
                free(have);
        }
        NftDns d;
        dns_filter_spec(p, u, &d);
        if (d.n_devices > 0) {
                const char *why = NULL;
                if (nft_dns_check(&d, &a->dns_filter_rules, &why) < 0) {
                        a->ok = false;
                        a->why = why;
                }
        }
}

static int flush_table(Rtnl *nl, int af, uint32_t table) {
        RtnlRoute *cur = NULL;
        size_t n = 0;
        int r = rtnl_dump_table(nl, af, table, &cur, &n);
        for (size_t i = 0; r >= 0 && i < n; i++)
                if (cur[i].type != RTN_MULTICAST) {
                        cur[i].table = table == RT_TABLE_MAIN ? 0 : table;
                        r = rtnl_route_del(nl, &cur[i]);
                }
        free(cur);
        return r;
}

/* Replace the policy at once: new table, one rule, then the old routes go.
 * No moment sees a mix of the two policies. */
static int switch_policy(Rtnl *nl, const NetPolicy *p, const Uplink *u, const char **ret_why) {
        uint32_t next = active_table == POLICY_TABLE_A ? POLICY_TABLE_B : POLICY_TABLE_A;
        int r = 0;
        for (NetFamily f = 0; f < _NET_FAMILY_MAX && r >= 0; f++) {
                if (!p->enabled[f])
                        continue;
                int af = f == NET_IPV6 ? AF_INET6 : AF_INET;
                RtnlRoute *want = NULL;
                size_t n_want = 0;
                r = flush_table(nl, af, next);
                if (r >= 0)
                        r = desired_routes(p, u, f, &want, &n_want, ret_why);
                if (r < 0)
                        break;
                RtnlRoute *grown = realloc(want, (n_want + 1) * sizeof(*want));
                if (!grown) {
                        free(want);
                        return -ENOMEM;
                }
                want = grown;
                for (size_t i = 0; i < n_want; i++)
                        want[i].table = next;
                catch_all(af, next, &want[n_want++]);
                bool *add = calloc(n_want, sizeof(bool));
                if (!add) {
                        free(want);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < n_want; i++)
                        add[i] = true;
                size_t failed = 0;
                r = rtnl_route_batch(nl, want, add, n_want, &failed);
                free(want);
                free(add);
                if (r < 0) {
                        *ret_why = "cannot fill the new policy table";
                        break;
                }
                /* The switch: a rule in front of the old one. */
                RtnlRule now = {
                        .family = af, .priority = POLICY_RULE_PRIO - 1, .action = FR_ACT_TO_TBL, .table = next
                };
                RtnlRule old = {
                        .family = af, .priority = POLICY_RULE_PRIO, .action = FR_ACT_TO_TBL, .table = active_table
                };
                RtnlRule keep = now;
                keep.priority = POLICY_RULE_PRIO;
                r = rtnl_rule_add(nl, &now);
                if (r < 0) {
                        *ret_why = "cannot switch to the new policy table";
                        break;
                }
                if (active_table == 0)
                        r = flush_table(nl, af, RT_TABLE_MAIN);
                else {
                        r = rtnl_rule_del(nl, &old);
                        if (r >= 0)
                                r = flush_table(nl, af, active_table);
                }
                /* Back to the usual priority for the next switch. */
                if (r >= 0)
                        r = rtnl_rule_add(nl, &keep);
                if (r >= 0)
                        r = rtnl_rule_del(nl, &now);
                if (r < 0)
                        *ret_why = "cannot retire the old policy";
        }
        if (r >= 0)
                active_table = next;
        return r;
}

/* Read, install and attest the policy in fd. */
static int apply_policy_fd(Rtnl *nl, Uplink *u, int policy_fd, int ctl, bool update) {
        _cleanup_free_ char *canon = NULL;
        size_t len;
        const char *why = NULL;
        int r = read_sealed(policy_fd, &canon, &len, &why);
        if (r < 0) {
                report_error(ctl, why ?: "cannot read the policy");
                return r;
        }
        NetPolicy p;
        r = netpolicy_parse(canon, len, &p, &why);
        if (r < 0) {
                char m[200];
                snprintf(m, sizeof(m), "the policy is not canonical: %s", why ?: "?");
                report_error(ctl, m);
                return r;
        }
        char digest[65];
        sha256_domain_hex(NETPOLICY_DIGEST_DOMAIN, canon, len, digest);

        if (update)
                r = switch_policy(nl, &p, u, &why);
        for (NetFamily f = 0; !update && f < _NET_FAMILY_MAX && r >= 0; f++) {
                RtnlRoute *want = NULL;
                size_t n_want = 0;
                if (p.enabled[f])
                        r = desired_routes(&p, u, f, &want, &n_want, &why);
                routes_sort(want, n_want);
                if (r >= 0)
                        r = apply_family(nl, f == NET_IPV6 ? AF_INET6 : AF_INET, want, n_want, &why);
                free(want);
        }
        if (r >= 0)
                r = apply_dns(nl, &p, u, &why);
        if (r < 0) {
                report_error(ctl, why ?: strerror(-r));
                netpolicy_done(&p);
                return r;
        }
        Attestation a;
        attest(nl, &p, u, &a);
        attest_dns(nl, &p, u, &a);
        netpolicy_done(&p);
        r = report_attestation(ctl, digest, &a, u);
        return a.ok ? r : -EPROTO;
}

static int parse_ipv6_uplink(const char *arg, Cidr *ret_addr, NetAddr *ret_gw) {
        char buf[128];
        const char *comma = strchr(arg, ',');
        if (!comma || (size_t) (comma - arg) >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, arg, (size_t) (comma - arg));
        buf[comma - arg] = '\0';
        char *slash = strchr(buf, '/');
        if (!slash)
                return -EINVAL;
        *slash = '\0';
        NetAddr a;
        if (netaddr_parse(buf, &a) < 0 || a.family != AF_INET6)
                return -EINVAL;
        char *end;
        long len = strtol(slash + 1, &end, 10);
        if (*end || len < 1 || len > 128)
                return -EINVAL;
        *ret_addr = (Cidr){ .family = AF_INET6, .prefixlen = (unsigned) len };
        memcpy(ret_addr->addr, a.addr, 16);
        if (netaddr_parse(comma + 1, ret_gw) < 0 || ret_gw->family != AF_INET6)
                return -EINVAL;
        return 0;
}

/* ---- kept between runs (--listen-fd) --------------------------------- */

typedef struct Kept {
        int listen_fd;
        char key[KEY_HEX + 1]; /* "" until "keep" */
        int uplink_pidfd;
        int64_t idle_deadline_ms;
} Kept;

static int64_t now_ms(void);

static bool is_key(const char *s) {
        for (size_t i = 0; i < KEY_HEX; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* "keep KEY PID": stay after the control socket closes; end with the
 * uplink (PID). No longer dies with the coordinator. */
static int kept_begin(Kept *k, const char *arg, int ctl) {
        char *end = NULL;
        long pid = 0;
        if (k->listen_fd < 0 || strlen(arg) < KEY_HEX + 2 || !is_key(arg) || arg[KEY_HEX] != ' ')
                goto bad;
        errno = 0;
        pid = strtol(arg + KEY_HEX + 1, &end, 10);
        if (errno || *end || pid <= 1)
                goto bad;
        int pidfd = (int) syscall(SYS_pidfd_open, (pid_t) pid, 0);
        if (pidfd < 0) {
                report_error(ctl, "cannot watch the uplink's process");
                return -errno;
        }
        /* Listening only now, and by us: a connection's peer credentials
         * are the listener's, so a later coordinator sees netd's. */
        if (listen(k->listen_fd, 4) < 0) {
                int e = errno;
                safe_close(pidfd);
                report_error(ctl, "cannot listen on the socket given");
                return -e;
        }
        safe_close(k->uplink_pidfd);
        k->uplink_pidfd = pidfd;
        memcpy(k->key, arg, KEY_HEX);
        k->key[KEY_HEX] = '\0';
        (void) prctl(PR_SET_PDEATHSIG, 0);
        return send_packet(ctl, "{\"type\":\"kept\"}");
bad:
        report_error(ctl, k->listen_fd < 0 ? "not started to be kept (no --listen-fd)"
                                           : "keep wants KEY (64 hex digits) and the uplink's PID");
        return -EINVAL;
}

/* A later coordinator on the listening socket: the user (root here), and
 * "state KEY" within a second, or the connection is closed. Its uplink's
 * link still there, it gets the last attestation and becomes the control
 * socket (returned). -ENOLINK: the link is gone, end. */
static int kept_accept(Kept *k, const Uplink *u) {
        _cleanup_close_ int fd = accept4(k->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct ucred cr;
        socklen_t sl = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl) < 0 || cr.uid != 0)
                return -EPERM;
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 1000) != 1)
                return -ETIMEDOUT;
        char buf[128];
        ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
        if (n != 6 + KEY_HEX)
                return -EPERM;
        buf[n] = '\0';
        unsigned diff = 0;
        for (size_t i = 0; i < KEY_HEX; i++)
                diff |= (unsigned char) (buf[6 + i] ^ k->key[i]);
        if (memcmp(buf, "state ", 6) != 0 || diff != 0) {
                report_error(fd, "wrong key");
                return -EPERM;
        }
        for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++) {
                char dev[IF_NAMESIZE];
                if (u->have[f] && !if_indextoname((unsigned) u->oif[f], dev)) {
                        report_error(fd, "the uplink's link is gone");
                        return -ENOLINK;
                }
        }
        if (!last_attestation || send_packet(fd, last_attestation) < 0)
                return -EIO;
        return TAKE_FD(fd);
}

static int serve(int argc, char **argv) {
        int policy_fd = 3, ctl = 4, listen_fd = -EBADF;
        const char *ipv6_uplink = NULL;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--policy-fd") == 0 && i + 1 < argc)
                        policy_fd = atoi(argv[++i]);
                else if (strcmp(argv[i], "--control-fd") == 0 && i + 1 < argc)
                        ctl = atoi(argv[++i]);
                else if (strcmp(argv[i], "--ipv6-uplink") == 0 && i + 1 < argc)
                        ipv6_uplink = argv[++i];
                else if (strcmp(argv[i], "--kernel-stack") == 0)
                        kernel_stack = true;
                else if (strcmp(argv[i], "--listen-fd") == 0 && i + 1 < argc)
                        listen_fd = atoi(argv[++i]);
                else if (strcmp(argv[i], "--keep-idle-ms") == 0 && i + 1 < argc) {
                        keep_idle_ms = atoll(argv[++i]);
                        if (keep_idle_ms < 100 || keep_idle_ms > NETD_KEEP_IDLE_MS)
                                die_usage("--keep-idle-ms wants 100 to 600000");
                } else
                        die_usage("usage: lazaret-netd [--policy-fd N] [--control-fd N] [--ipv6-uplink "
                                  "ADDR/LEN,GATEWAY] [--kernel-stack] [--listen-fd N [--keep-idle-ms N]] | "
                                  "lazaret-netd probe ...");
        }
        if (ctl >= 0) {
                int type = 0;
                socklen_t sl = sizeof(type);
                if (getsockopt(ctl, SOL_SOCKET, SO_TYPE, &type, &sl) < 0 || type != SOCK_SEQPACKET) {
                        fprintf(stderr, "lazaret-netd: fd %d is not a SOCK_SEQPACKET control socket\n", ctl);
                        return 1;
                }
        }
        if (listen_fd >= 0) {
                int type = 0;
                socklen_t sl = sizeof(type);
                if (getsockopt(listen_fd, SOL_SOCKET, SO_TYPE, &type, &sl) < 0 || type != SOCK_SEQPACKET) {
                        fprintf(stderr, "lazaret-netd: fd %d is not a bound SOCK_SEQPACKET socket\n", listen_fd);
                        return 1;
                }
        }

        struct sigaction sa = { .sa_handler = on_term };
        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);

        Rtnl nl;
        int r = rtnl_open(&nl);
        if (r < 0) {
                report_error(ctl, "cannot open a netlink socket");
                return 1;
        }
        Uplink u = {};
        if (ipv6_uplink) {
                Cidr addr;
                if (parse_ipv6_uplink(ipv6_uplink, &addr, &u.gateway[NET_IPV6]) < 0)
                        die_usage("--ipv6-uplink wants ADDR/LEN,GATEWAY");
        }
        r = find_uplink(&nl, &u);
        if (r < 0) {
                report_error(ctl, "cannot list the namespace's routes");
                return 1;
        }
        if (ipv6_uplink && u.have[NET_IPV4]) {
                /* A fixed address without the subnet route, and the
                 * given gateway on the IPv4 uplink's link. */
                Cidr addr;
                NetAddr gw;
                (void) parse_ipv6_uplink(ipv6_uplink, &addr, &gw);
                r = rtnl_addr_add(&nl, u.oif[NET_IPV4], &addr, true);
                if (r < 0 && r != -EACCES) {
                        char m[160];
                        snprintf(m, sizeof(m), "cannot add the IPv6 uplink address: %s", strerror(-r));
                        report_error(ctl, m);
                } else if (r >= 0) {
                        u.have[NET_IPV6] = true;
                        u.gateway[NET_IPV6] = gw;
                        u.oif[NET_IPV6] = u.oif[NET_IPV4];
                }
        }

        r = apply_policy_fd(&nl, &u, policy_fd, ctl, false);
        if (policy_fd != ctl)
                (void) close(policy_fd);
        if (r < 0)
                return 1;

        /* Hold the namespace; apply updates as they come. */
        Kept kept = { .listen_fd = listen_fd, .uplink_pidfd = -EBADF };
        while (!terminate) {
                struct pollfd p[3];
                int n = 0, i_ctl = -1, i_listen = -1, i_uplink = -1;
                if (ctl >= 0) {
                        i_ctl = n;
                        p[n++] = (struct pollfd){ ctl, POLLIN, 0 };
                }
                if (ctl < 0 && kept.key[0] && kept.listen_fd >= 0) {
                        i_listen = n;
                        p[n++] = (struct pollfd){ kept.listen_fd, POLLIN, 0 };
                }
                if (kept.uplink_pidfd >= 0) {
                        i_uplink = n;
                        p[n++] = (struct pollfd){ kept.uplink_pidfd, POLLIN, 0 };
                }
                int timeout = -1;
                if (ctl < 0 && kept.key[0]) {
                        int64_t left = kept.idle_deadline_ms - now_ms();
                        timeout = left < 0 ? 0 : (int) left;
                }
                if (n == 0 && timeout < 0) {
                        /* The coordinator is gone and we are not kept:
                         * keep the routes and the namespace until we are
                         * stopped. */
                        pause();
                        continue;
                }
                int k = poll(p, (nfds_t) n, timeout);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (k == 0) {
                        if (ctl < 0 && kept.key[0] && now_ms() >= kept.idle_deadline_ms)
                                break; /* kept long enough with nobody */
                        continue;
                }
                if (i_uplink >= 0 && p[i_uplink].revents) {
                        /* Without the uplink the routes lead nowhere (its
                         * link is gone with them): end, and say so. */
                        report_error(ctl, "the uplink (slirp4netns) ended");
                        break;
                }
                if (i_listen >= 0 && p[i_listen].revents) {
                        int r2 = kept_accept(&kept, &u);
                        if (r2 == -ENOLINK)
                                break;
                        if (r2 >= 0)
                                ctl = r2;
                        continue;
                }
                if (i_ctl < 0 || !p[i_ctl].revents)
                        continue;
                char buf[256];
                char cbuf[CMSG_SPACE(sizeof(int))];
                struct iovec iov = { buf, sizeof(buf) - 1 };
                struct msghdr mh = {
                        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)
                };
                ssize_t m = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
                if (m < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        break;
                }
                if (m == 0) {
                        /* The coordinator is gone: keep the routes and
                         * the namespace until we are stopped (or, kept,
                         * until a later one comes or the idle time
                         * passes). */
                        ctl = safe_close(ctl);
                        kept.idle_deadline_ms = now_ms() + keep_idle_ms;
                        continue;
                }
                buf[m] = '\0';
                int fd = -EBADF;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
                            c->cmsg_len == CMSG_LEN(sizeof(int)))
                                memcpy(&fd, CMSG_DATA(c), sizeof(int));
                if (strcmp(buf, "quit") == 0 && fd < 0) {
                        terminate = 1;
                        break;
                }
                if (strncmp(buf, "keep ", 5) == 0 && fd < 0) {
                        (void) kept_begin(&kept, buf + 5, ctl);
                        continue;
                }
                if (strcmp(buf, "update") != 0 || fd < 0 || (mh.msg_flags & MSG_CTRUNC)) {
                        report_error(ctl, "unknown control message (want \\\"update\\\" with a memfd)");
                        safe_close(fd);
                        continue;
                }
                (void) apply_policy_fd(&nl, &u, fd, ctl, true);
                safe_close(fd);
        }
        rtnl_close(&nl);
        return 0;
}

/* ---- probe ------------------------------------------------------------- */

typedef struct Target {
        NetAddr addr;
        uint16_t port;
} Target;

static bool parse_target(const char *s, Target *t) {
        char buf[80];
        const char *host = s, *colon;
        size_t hl;
        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                if (!end || end[1] != ':')
                        return false;
                host = s + 1;
                hl = (size_t) (end - host);
                colon = end + 1;
        } else {
                colon = strrchr(s, ':');
                if (!colon)
                        return false;
                hl = (size_t) (colon - s);
        }
        if (hl == 0 || hl >= sizeof(buf))
                return false;
        memcpy(buf, host, hl);
        buf[hl] = '\0';
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (*end || port < 1 || port > 65535 || netaddr_parse(buf, &t->addr) < 0)
                return false;
        t->port = (uint16_t) port;
        return true;
}

static socklen_t sockaddr_of(const NetAddr *a, uint16_t port, struct sockaddr_storage *ss) {
        memset(ss, 0, sizeof(*ss));
        if (a->family == AF_INET6) {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *) ss;
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons(port);
                memcpy(&s6->sin6_addr, a->addr, 16);
                return sizeof(*s6);
        }
        struct sockaddr_in *s4 = (struct sockaddr_in *) ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        memcpy(&s4->sin_addr, a->addr, 4);
        return sizeof(*s4);
}

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A TCP connect with a deadline: 0 connected, else -errno. */
static int tcp_connect(const NetAddr *a, uint16_t port, int timeout_ms) {
        struct sockaddr_storage ss;
        socklen_t sl = sockaddr_of(a, port, &ss);
        int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        int r = 0;
        if (connect(fd, (struct sockaddr *) &ss, sl) < 0) {
                if (errno != EINPROGRESS)
                        r = negative_errno();
                else {
                        struct pollfd p = { fd, POLLOUT, 0 };
                        int k = poll(&p, 1, timeout_ms);
                        if (k == 0)
                                r = -ETIMEDOUT;
                        else if (k < 0)
                                r = negative_errno();
                        else {
                                int err = 0;
                                socklen_t el = sizeof(err);
                                (void) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
                                r = -err;
                        }
                }
        }
        close(fd);
        return r;
}

static bool is_loopback(int ifindex) {
        char name[IF_NAMESIZE];
        if (ifindex <= 0 || !if_indextoname((unsigned) ifindex, name))
                return false;
        struct ifreq ifr = {};
        memcpy(ifr.ifr_name, name, sizeof(name));
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return false;
        int r = ioctl(fd, SIOCGIFFLAGS, &ifr);
        close(fd);
        return r == 0 && (ifr.ifr_flags & IFF_LOOPBACK);
}

/* A denied destination: no route (or a prohibit route) in the table, and a
 * connect that fails at once. Returns true when unreachable. */
static bool probe_denied(Rtnl *nl, bool have_nl, const NetAddr *a, const char **ret_how) {
        /* The namespace's own loopback is no egress: it stays whatever the
         * policy says about 127.0.0.0/8 and ::1. */
        static const uint8_t v6_loopback[16] = { [15] = 1 }, zero[16] = {};
        if ((a->family == AF_INET && a->addr[0] == 127) ||
            (a->family == AF_INET6 && memcmp(a->addr, v6_loopback, 16) == 0)) {
                *ret_how = "the namespace's own loopback (not egress)";
                return true;
        }
        /* connect() takes 0.0.0.0 and :: for this host. */
        if (memcmp(a->addr, zero, a->family == AF_INET6 ? 16 : 4) == 0) {
                *ret_how = "the unspecified address (this host, not egress)";
                return true;
        }
        if (have_nl) {
                RtnlRoute rt;
                int r = rtnl_route_get(nl, a, &rt);
                if (r == 0 && rt.type == RTN_UNICAST && !rt.has_gateway && is_loopback(rt.oif)) {
                        /* gVisor's own stack takes the kernel's IPv6
                         * prohibit routes (which Linux keeps on lo) as
                         * routes to its loopback: nothing leaves. */
                        *ret_how = "routed to the sandbox's own loopback (not egress)";
                        return true;
                }
                if (r == 0 && rt.type == RTN_UNICAST) {
                        *ret_how = "a route leads there";
                        return false; /* never connect: a packet would leave */
                }
                if (r == 0 && (rt.type == RTN_LOCAL || rt.type == RTN_BROADCAST)) {
                        *ret_how = "an address of the namespace itself (not egress)";
                        return true;
                }
        }
        struct sockaddr_storage ss;
        socklen_t sl = sockaddr_of(a, 9, &ss);
        int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                *ret_how = a->family == AF_INET6 ? "no IPv6 socket" : "no IPv4 socket";
                return errno == EAFNOSUPPORT;
        }
        int r = connect(fd, (struct sockaddr *) &ss, sl);
        int e = errno;
        close(fd);
        if (r == 0 || e == EINPROGRESS) {
                *ret_how = "connect went ahead";
                return false;
        }
        *ret_how = e == ENETUNREACH     ? "ENETUNREACH"
                   : e == EACCES        ? "EACCES"
                   : e == EHOSTUNREACH  ? "EHOSTUNREACH"
                   : e == EPERM         ? "EPERM"
                   : e == EADDRNOTAVAIL ? "EADDRNOTAVAIL"
                                        : strerror(e);
        return true;
}

static size_t dns_query(uint8_t *q, uint16_t id, const char *name, uint16_t qtype) {
        size_t n = 0;
        q[n++] = (uint8_t) (id >> 8);
        q[n++] = (uint8_t) id;
        q[n++] = 0x01; /* RD */
        q[n++] = 0x00;
        q[n++] = 0, q[n++] = 1; /* QDCOUNT */
        memset(q + n, 0, 6);
        n += 6;
        const char *p = name;
        while (*p) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t) (dot - p) : strlen(p);
                if (l == 0 || l > 63)
                        break;
                q[n++] = (uint8_t) l;
                memcpy(q + n, p, l);
                n += l;
                p += l + (dot ? 1 : 0);
        }
        q[n++] = 0;
        q[n++] = (uint8_t) (qtype >> 8), q[n++] = (uint8_t) qtype;
        q[n++] = 0, q[n++] = 1; /* IN */
        return n;
}

/* Skip a (possibly compressed) name; returns the new offset or 0. */
static size_t dns_skip_name(const uint8_t *m, size_t len, size_t off) {
        while (off < len) {
                uint8_t l = m[off];
                if (l == 0)
                        return off + 1;
                if ((l & 0xc0) == 0xc0)
                        return off + 2 <= len ? off + 2 : 0;
                off += 1 + l;
        }
        return 0;
}

/* Ask resolver r for name; fill addrs (JSON array text). 0 answered. */
static int probe_dns(const NetAddr *r, const char *name, int timeout_ms, StrBuf *addrs, int *ret_rcode) {
        struct sockaddr_storage ss;
        socklen_t sl = sockaddr_of(r, 53, &ss);
        uint8_t q[512], m[1500];
        uint16_t id;
        int fd = socket(r->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        if (getentropy(&id, sizeof(id)) < 0)
                id = (uint16_t) now_ms();
        size_t qn = dns_query(q, id, name, r->family == AF_INET6 ? 28 : 1);
        int res = -ETIMEDOUT;
        if (connect(fd, (struct sockaddr *) &ss, sl) < 0 || send(fd, q, qn, 0) < 0) {
                res = negative_errno();
                close(fd);
                return res;
        }
        int64_t deadline = now_ms() + timeout_ms;
        while (now_ms() < deadline) {
                struct pollfd p = { fd, POLLIN, 0 };
                int k = poll(&p, 1, (int) (deadline - now_ms()));
                if (k <= 0)
                        break;
                ssize_t n = recv(fd, m, sizeof(m), 0);
                if (n < 0) {
                        res = negative_errno();
                        break;
                }
                if (n < 12 || m[0] != (id >> 8) || m[1] != (uint8_t) id || !(m[2] & 0x80))
                        continue; /* not our answer */
                *ret_rcode = m[3] & 0x0f;
                size_t an = (size_t) (m[6] << 8 | m[7]), off = dns_skip_name(m, (size_t) n, 12);
                if (!off)
                        break;
                off += 4;
                strbuf_putc(addrs, '[');
                bool first = true;
                for (size_t i = 0; i < an && off && off < (size_t) n; i++) {
                        off = dns_skip_name(m, (size_t) n, off);
                        if (!off || off + 10 > (size_t) n)
                                break;
                        uint16_t type = (uint16_t) (m[off] << 8 | m[off + 1]);
                        uint16_t rdlen = (uint16_t) (m[off + 8] << 8 | m[off + 9]);
                        off += 10;
                        if (off + rdlen > (size_t) n)
                                break;
                        NetAddr a = {};
                        if (type == 1 && rdlen == 4)
                                a.family = AF_INET;
                        else if (type == 28 && rdlen == 16)
                                a.family = AF_INET6;
                        if (a.family) {
                                char s[64];
                                memcpy(a.addr, m + off, rdlen);
                                netaddr_format(&a, s, sizeof(s));
                                strbuf_printf(addrs, "%s\"%s\"", first ? "" : ",", s);
                                first = false;
                        }
                        off += rdlen;
                }
                strbuf_putc(addrs, ']');
                res = 0;
                break;
        }
        close(fd);
        return res;
}

static int probe(int argc, char **argv) {
        const char *dns_name = "example.com";
        int timeout_ms = 3000;
        bool all_ok = true;
        Rtnl nl;
        bool have_nl = rtnl_open(&nl) == 0;

        /* Two passes: check the arguments first, then probe. */
        for (int pass = 0; pass < 2; pass++)
                for (int i = 2; i < argc; i++) {
                        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
                        if (!val)
                                die_usage("probe: option without a value");
                        i++;
                        char s[64];
                        if (strcmp(opt, "--dns-name") == 0) {
                                dns_name = val;
                                continue;
                        }
                        if (strcmp(opt, "--timeout-ms") == 0) {
                                timeout_ms = atoi(val);
                                if (timeout_ms < 1 || timeout_ms > 60000)
                                        die_usage("probe: --timeout-ms wants 1-60000");
                                continue;
                        }
                        if (strcmp(opt, "--permit") == 0) {
                                Target t;
                                if (!parse_target(val, &t))
                                        die_usage("probe: --permit wants ADDR:PORT");
                                if (pass == 0)
                                        continue;
                                int r = tcp_connect(&t.addr, t.port, timeout_ms);
                                all_ok &= r == 0;
                                printf("{\"kind\":\"permitted\",\"destination\":\"%s\",\"method\":\"connect\","
                                       "\"reachable\":%s,\"detail\":\"%s\"}\n",
                                       val, r == 0 ? "true" : "false", r == 0 ? "connected" : strerror(-r));
                                continue;
                        }
                        NetAddr a;
                        if (netaddr_parse(val, &a) < 0)
                                die_usage("probe: bad address");
                        if (pass == 0)
                                continue;
                        netaddr_format(&a, s, sizeof(s));
                        if (strcmp(opt, "--deny") == 0) {
                                const char *how = "?";
                                bool unreachable = probe_denied(&nl, have_nl, &a, &how);
                                all_ok &= unreachable;
                                printf("{\"kind\":\"denied\",\"destination\":\"%s\",\"unreachable\":%s,"
                                       "\"detail\":\"%s\"}\n",
                                       s, unreachable ? "true" : "false", how);
                        } else if (strcmp(opt, "--route") == 0) {
                                RtnlRoute rt;
                                int r = have_nl ? rtnl_route_get(&nl, &a, &rt) : -EOPNOTSUPP;
                                bool ok =
                                        r == 0 && ((rt.type == RTN_UNICAST && rt.has_gateway) || rt.type == RTN_LOCAL);
                                all_ok &= ok;
                                printf("{\"kind\":\"permitted\",\"destination\":\"%s\",\"method\":\"route\","
                                       "\"reachable\":%s,\"detail\":\"%s\"}\n",
                                       s, ok ? "true" : "false",
                                       r < 0 ? strerror(-r)
                                       : ok  ? "gateway route"
                                             : "no gateway route");
                        } else if (strcmp(opt, "--dns-blocked") == 0) {
                                /* A permitted address that is no resolver:
                                 * port 53 must not route there. */
                                RtnlRoute rt;
                                int ru = have_nl ? rtnl_route_get_port(&nl, &a, IPPROTO_UDP, 53, &rt) : -EOPNOTSUPP;
                                int rtcp = have_nl ? rtnl_route_get_port(&nl, &a, IPPROTO_TCP, 53, &rt) : -EOPNOTSUPP;
                                bool ok = (ru == -EACCES || ru == -ENETUNREACH) &&
                                          (rtcp == -EACCES || rtcp == -ENETUNREACH);
                                all_ok &= ok;
                                printf("{\"kind\":\"denied\",\"destination\":\"%s port 53\",\"unreachable\":%s,"
                                       "\"detail\":\"%s\"}\n",
                                       s, ok ? "true" : "false",
                                       ok                     ? "DNS only to the resolvers"
                                       : ru == 0 || rtcp == 0 ? "port 53 routes there"
                                                              : strerror(-(ru ?: rtcp)));
                        } else if (strcmp(opt, "--dns") == 0) {
                                StrBuf addrs = STRBUF_INIT;
                                int rcode = -1;
                                int r = probe_dns(&a, dns_name, timeout_ms, &addrs, &rcode);
                                /* Any answer proves the resolver is
                                 * reachable through the policy; what its
                                 * upstream says (NXDOMAIN, SERVFAIL on a
                                 * closed network) is recorded, not judged. */
                                bool ok = r == 0;
                                all_ok &= ok;
                                printf("{\"kind\":\"dns\",\"resolver\":\"%s\",\"query_name\":\"%s\","
                                       "\"answered\":%s,\"rcode\":%d,\"resolved_addresses\":%s,\"detail\":\"%s\"}\n",
                                       s, dns_name, ok ? "true" : "false", rcode,
                                       r == 0 && !addrs.oom ? strbuf_str(&addrs) : "[]",
                                       r < 0 ? strerror(-r) : "answered");
                                strbuf_done(&addrs);
                        } else
                                die_usage("probe: unknown option");
                }
        if (have_nl)
                rtnl_close(&nl);
        fflush(stdout);
        return all_ok ? 0 : 1;
}

/* ---- gVisor's own stack ------------------------------------------------ */

/* With runsc_network = "sandbox", gVisor copied the namespace's routes
 * when it started and consults nothing else after: a new policy is written
 * into its own table, from inside the sandbox (runsc exec with
 * CAP_NET_ADMIN there, which the agent lacks, so it can neither do this
 * nor trace the process that does). The routes mirror what gVisor took
 * at start: gateway routes over the uplinks for what is permitted, and,
 * for IPv6, the denied prefixes on loopback (Linux keeps IPv6 prohibit
 * routes on lo, and gVisor copies them as such); the loopback's own
 * routes stay. Every deletion comes before any addition, so no moment
 * permits more than both policies do. */

static bool gv_fixed(const RtnlRoute *r, int lo) {
        static const uint8_t v6_loopback[16] = { [15] = 1 };
        if (r->has_gateway || r->oif != lo)
                return false;
        return r->dst.family == AF_INET6 ? r->dst.prefixlen == 128 && memcmp(r->dst.addr, v6_loopback, 16) == 0
                                         : r->dst.addr[0] == 127 && r->dst.prefixlen >= 8;
}

/* The policy's routes as gVisor took them at start: gateway routes, and
 * for IPv6 the denied prefixes on loopback; no table attribute. */
static int gv_desired(const NetPolicy *p, const Uplink *u, int lo, NetFamily f, RtnlRoute **ret, size_t *ret_n,
                      const char **ret_why) {
        RtnlRoute *v = NULL;
        size_t n = 0, k = 0;
        *ret = NULL;
        *ret_n = 0;
        if (!p->enabled[f])
                return 0;
        int r = desired_routes(p, u, f, &v, &n, ret_why);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                RtnlRoute rt = { .dst = v[i].dst, .type = RTN_UNICAST, .no_table = true };
                if (v[i].type == RTN_UNICAST) {
                        rt.has_gateway = true;
                        rt.gateway = v[i].gateway;
                        rt.oif = v[i].oif;
                } else if (f == NET_IPV6)
                        rt.oif = lo;
                else
                        continue;
                v[k++] = rt;
        }
        routes_sort(v, k);
        *ret = v;
        *ret_n = k;
        return 0;
}

static int gvisor_routes(int argc, char **argv) {
        const char *policy = NULL;
        Uplink up = {};
        for (int i = 2; i < argc; i++) {
                if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc)
                        policy = argv[++i];
                else if (strcmp(argv[i], "--uplink") == 0 && i + 1 < argc) {
                        char buf[128];
                        const char *v = argv[++i], *comma = strchr(v, ',');
                        NetAddr gw;
                        if (!comma || (size_t) (comma - v) >= sizeof(buf))
                                die_usage("gvisor-routes: --uplink wants GATEWAY,DEVICE");
                        memcpy(buf, v, (size_t) (comma - v));
                        buf[comma - v] = '\0';
                        if (netaddr_parse(buf, &gw) < 0)
                                die_usage("gvisor-routes: --uplink wants GATEWAY,DEVICE");
                        NetFamily f = net_family_of(gw.family);
                        unsigned oif = if_nametoindex(comma + 1);
                        if (oif == 0) {
                                fprintf(stderr, "lazaret-netd: the sandbox has no device %s\n", comma + 1);
                                return 1;
                        }
                        up.have[f] = true;
                        up.gateway[f] = gw;
                        up.oif[f] = (int) oif;
                } else
                        die_usage("usage: lazaret-netd gvisor-routes --policy CANONICAL [--uplink GATEWAY,DEVICE]...");
        }
        if (!policy)
                die_usage("gvisor-routes: --policy is required");
        NetPolicy p;
        const char *why = NULL;
        if (netpolicy_parse(policy, strlen(policy), &p, &why) < 0) {
                fprintf(stderr, "lazaret-netd: the policy is not canonical: %s\n", why ?: "?");
                return 1;
        }
        int lo = (int) if_nametoindex("lo");
        Rtnl nl;
        int r = rtnl_open(&nl);
        if (r < 0) {
                netpolicy_done(&p);
                fprintf(stderr, "lazaret-netd: cannot open a netlink socket: %s\n", strerror(-r));
                return 1;
        }
        size_t counts[_NET_FAMILY_MAX] = {};
        bool same = true;
        for (NetFamily f = 0; f < _NET_FAMILY_MAX && r >= 0; f++) {
                int af = f == NET_IPV6 ? AF_INET6 : AF_INET;
                RtnlRoute *want = NULL, *cur = NULL;
                size_t n_want = 0, n_cur = 0;
                r = gv_desired(&p, &up, lo, f, &want, &n_want, &why);
                if (r >= 0)
                        r = rtnl_dump_routes(&nl, af, &cur, &n_cur);
                if (r < 0) {
                        why = why ?: "cannot read the sandbox's routes";
                        free(want);
                        break;
                }
                routes_sort(cur, n_cur);
                size_t k = 0;
                RtnlRoute *ops = calloc(n_cur + n_want + 1, sizeof(*ops));
                bool *add = calloc(n_cur + n_want + 1, sizeof(*add));
                if (!ops || !add)
                        r = -ENOMEM;
                for (size_t i = 0; r >= 0 && i < n_cur; i++)
                        if (!gv_fixed(&cur[i], lo) && !route_in(&cur[i], want, n_want)) {
                                ops[k] = cur[i];
                                ops[k].no_table = true;
                                add[k++] = false;
                        }
                size_t n_del = k;
                for (size_t i = 0; r >= 0 && i < n_want; i++)
                        if (!route_in(&want[i], cur, n_cur)) {
                                ops[k] = want[i];
                                add[k++] = true;
                        }
                size_t failed = 0;
                if (r >= 0 && n_del > 0)
                        r = rtnl_route_batch(&nl, ops, add, n_del, &failed);
                if (r >= 0 && k > n_del)
                        r = rtnl_route_batch(&nl, ops + n_del, add + n_del, k - n_del, &failed);
                if (r < 0)
                        why = why ?: "cannot change the sandbox's routes";
                free(ops);
                free(add);
                free(cur);
                cur = NULL;
                /* Read back: exactly the policy's routes besides the
                 * loopback's own. */
                if (r >= 0)
                        r = rtnl_dump_routes(&nl, af, &cur, &n_cur);
                if (r >= 0) {
                        routes_sort(cur, n_cur);
                        size_t managed = 0;
                        for (size_t i = 0; i < n_cur; i++)
                                if (!gv_fixed(&cur[i], lo)) {
                                        managed++;
                                        same &= route_in(&cur[i], want, n_want);
                                }
                        for (size_t i = 0; i < n_want; i++)
                                same &= route_in(&want[i], cur, n_cur);
                        same &= managed == n_want;
                        counts[f] = managed;
                }
                free(cur);
                free(want);
        }
        rtnl_close(&nl);
        netpolicy_done(&p);
        if (r < 0) {
                printf("{\"kind\":\"routes\",\"attested\":false,\"detail\":\"%s: %s\"}\n", why ?: "error",
                       strerror(-r));
                return 1;
        }
        printf("{\"kind\":\"routes\",\"ipv4\":%zu,\"ipv6\":%zu,\"attested\":%s%s}\n", counts[NET_IPV4],
               counts[NET_IPV6], same ? "true" : "false",
               same ? "" : ",\"detail\":\"the sandbox's routes differ from the policy\"");
        return same ? 0 : 1;
}

int main(int argc, char **argv) {
        if (argc > 1 && strcmp(argv[1], "probe") == 0)
                return probe(argc, argv);
        if (argc > 1 && strcmp(argv[1], "gvisor-routes") == 0)
                return gvisor_routes(argc, argv);
        return serve(argc, argv);
}
