/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fd-util.h"
#include "nft.h"

#define RECV_SIZE (64u * 1024u)
#define NESTED    NLA_F_NESTED
#define TYPE_MASK ((uint16_t) ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER))
/* Rules per chain at most: two protocols in two families. */
#define RULES_MAX 4u

/* ---- message building ---------------------------------------------------- */

typedef struct Buf {
        char *p;
        size_t len, cap;
        bool oom;
} Buf;

static size_t buf_grow(Buf *b, size_t n) {
        size_t at = b->len, need = b->len + NLA_ALIGN(n);
        if (b->oom)
                return at;
        if (need > b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 1024;
                while (cap < need)
                        cap *= 2;
                char *q = realloc(b->p, cap);
                if (!q) {
                        b->oom = true;
                        return at;
                }
                b->p = q;
                b->cap = cap;
        }
        memset(b->p + at, 0, NLA_ALIGN(n));
        b->len = need;
        return at;
}

static void attr(Buf *b, uint16_t type, const void *data, size_t len) {
        size_t at = buf_grow(b, NLA_HDRLEN + len);
        if (b->oom)
                return;
        struct nlattr *a = (struct nlattr *) (b->p + at);
        a->nla_type = type;
        a->nla_len = (uint16_t) (NLA_HDRLEN + len);
        memcpy(b->p + at + NLA_HDRLEN, data, len);
}

static void attr_str(Buf *b, uint16_t type, const char *s) {
        attr(b, type, s, strlen(s) + 1);
}

static void attr_be32(Buf *b, uint16_t type, uint32_t v) {
        uint32_t be = htonl(v);
        attr(b, type, &be, sizeof(be));
}

static size_t nest_begin(Buf *b, uint16_t type) {
        size_t at = buf_grow(b, NLA_HDRLEN);
        if (!b->oom)
                ((struct nlattr *) (b->p + at))->nla_type = type | NESTED;
        return at;
}

static void nest_end(Buf *b, size_t at) {
        if (!b->oom)
                ((struct nlattr *) (b->p + at))->nla_len = (uint16_t) (b->len - at);
}

static size_t msg_begin(Buf *b, uint16_t type, uint16_t flags, uint8_t family, uint32_t seq, uint16_t res_id) {
        size_t at = buf_grow(b, NLMSG_HDRLEN + sizeof(struct nfgenmsg));
        if (b->oom)
                return at;
        struct nlmsghdr *h = (struct nlmsghdr *) (b->p + at);
        h->nlmsg_type = type;
        h->nlmsg_flags = NLM_F_REQUEST | flags;
        h->nlmsg_seq = seq;
        struct nfgenmsg *g = (struct nfgenmsg *) (b->p + at + NLMSG_HDRLEN);
        g->nfgen_family = family;
        g->version = NFNETLINK_V0;
        g->res_id = htons(res_id);
        return at;
}

static void msg_end(Buf *b, size_t at) {
        if (!b->oom)
                ((struct nlmsghdr *) (b->p + at))->nlmsg_len = (uint32_t) (b->len - at);
}

static uint16_t nft_type(int msg) {
        return (uint16_t) ((NFNL_SUBSYS_NFTABLES << 8) | msg);
}

/* ---- the rules ------------------------------------------------------------ */

static size_t expr_begin(Buf *b, const char *name, size_t *ret_data) {
        size_t e = nest_begin(b, NFTA_LIST_ELEM);
        attr_str(b, NFTA_EXPR_NAME, name);
        *ret_data = nest_begin(b, NFTA_EXPR_DATA);
        return e;
}

static void expr_end(Buf *b, size_t e, size_t d) {
        nest_end(b, d);
        nest_end(b, e);
}

static void expr_meta(Buf *b, uint32_t key) {
        size_t d, e = expr_begin(b, "meta", &d);
        attr_be32(b, NFTA_META_KEY, key);
        attr_be32(b, NFTA_META_DREG, NFT_REG_1);
        expr_end(b, e, d);
}

static void expr_payload(Buf *b, uint32_t base, uint32_t offset, uint32_t len) {
        size_t d, e = expr_begin(b, "payload", &d);
        attr_be32(b, NFTA_PAYLOAD_DREG, NFT_REG_1);
        attr_be32(b, NFTA_PAYLOAD_BASE, base);
        attr_be32(b, NFTA_PAYLOAD_OFFSET, offset);
        attr_be32(b, NFTA_PAYLOAD_LEN, len);
        expr_end(b, e, d);
}

static void expr_cmp(Buf *b, uint32_t op, const void *data, size_t len) {
        size_t d, e = expr_begin(b, "cmp", &d);
        attr_be32(b, NFTA_CMP_SREG, NFT_REG_1);
        attr_be32(b, NFTA_CMP_OP, op);
        size_t v = nest_begin(b, NFTA_CMP_DATA);
        attr(b, NFTA_DATA_VALUE, data, len);
        nest_end(b, v);
        expr_end(b, e, d);
}

static void expr_drop(Buf *b) {
        size_t d, e = expr_begin(b, "immediate", &d);
        attr_be32(b, NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
        size_t v = nest_begin(b, NFTA_IMMEDIATE_DATA);
        size_t vd = nest_begin(b, NFTA_DATA_VERDICT);
        attr_be32(b, NFTA_VERDICT_CODE, NF_DROP);
        nest_end(b, vd);
        nest_end(b, v);
        expr_end(b, e, d);
}

/* One rule's expressions: frames of family f, protocol proto, to port 53,
 * to none of the resolvers of f: drop. */
static void rule_exprs(Buf *b, const NftDns *d, NetFamily f, uint8_t proto) {
        bool v6 = f == NET_IPV6;
        uint16_t ethertype = htons(v6 ? ETH_P_IPV6 : ETH_P_IP), port = htons(53);
        expr_meta(b, NFT_META_PROTOCOL);
        expr_cmp(b, NFT_CMP_EQ, &ethertype, sizeof(ethertype));
        /* The transport protocol after any IPv6 extension headers. */
        expr_meta(b, NFT_META_L4PROTO);
        expr_cmp(b, NFT_CMP_EQ, &proto, sizeof(proto));
        /* The destination port: bytes 2-3 of the UDP and the TCP header
         * (a fragment after the first has no transport header and does
         * not match; without its first fragment it is never reassembled). */
        expr_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2);
        expr_cmp(b, NFT_CMP_EQ, &port, sizeof(port));
        expr_payload(b, NFT_PAYLOAD_NETWORK_HEADER, v6 ? 24 : 16, v6 ? 16 : 4);
        for (size_t i = 0; i < d->n_resolvers; i++)
                if (d->resolvers[i].family == (v6 ? AF_INET6 : AF_INET))
                        expr_cmp(b, NFT_CMP_NEQ, d->resolvers[i].addr, v6 ? 16 : 4);
        expr_drop(b);
}

static void chain_name(size_t i, char ret[16]) {
        /* i < NFT_DNS_DEVICES_MAX: one digit. */
        memcpy(ret, "egress", 6);
        ret[6] = (char) ('0' + i % 10);
        ret[7] = '\0';
}

/* ---- the socket ---------------------------------------------------------- */

/* One socket for the process's batches and dumps, opened once and never
 * closed on the way: closing a NETLINK_NETFILTER socket makes nf_tables
 * flush its destroy work, which waits for an RCU grace period once a
 * batch has been committed (8 ms measured here, most of netd's start with
 * a small policy). It goes with the process (netd holds the namespace
 * until it ends anyway), or when a reply went wrong (nfnl_drop). */
static int nfnl_fd = -EBADF;

static int nfnl_open(void);

static int nfnl_get(void) {
        if (nfnl_fd < 0)
                nfnl_fd = nfnl_open();
        return nfnl_fd;
}

static void nfnl_drop(void) {
        if (nfnl_fd >= 0)
                close(nfnl_fd);
        nfnl_fd = -EBADF;
}

static int nfnl_open(void) {
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (fd < 0)
                return negative_errno();
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
        struct timeval tv = { .tv_sec = 5 };
        int one = 1;
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void) setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = negative_errno();
                close(fd);
                return r;
        }
        return fd;
}

static int send_buf(int fd, const Buf *b) {
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
        for (;;) {
                ssize_t k = sendto(fd, b->p, b->len, 0, (struct sockaddr *) &sa, sizeof(sa));
                if (k >= 0)
                        return (size_t) k == b->len ? 0 : -EIO;
                if (errno != EINTR)
                        return negative_errno();
        }
}

/* Read acknowledgements of seq in [first, last]: one per message, the
 * first error wins. */
static int read_acks(int fd, uint32_t first, uint32_t last, uint32_t *ret_failed_seq) {
        _cleanup_free_ char *buf = malloc(RECV_SIZE);
        if (!buf)
                return -ENOMEM;
        size_t want = last - first + 1, got = 0;
        int result = 0;
        while (got < want) {
                ssize_t k = recv(fd, buf, RECV_SIZE, 0);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? -ETIMEDOUT : negative_errno();
                }
                for (struct nlmsghdr *h = (struct nlmsghdr *) buf; NLMSG_OK(h, (size_t) k); h = NLMSG_NEXT(h, k)) {
                        if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_seq < first || h->nlmsg_seq > last)
                                continue;
                        const struct nlmsgerr *e = NLMSG_DATA(h);
                        got++;
                        if (e->error < 0 && result == 0) {
                                result = e->error;
                                *ret_failed_seq = h->nlmsg_seq;
                        }
                }
        }
        return result;
}

/* Send one batch (begin, the messages between seq first and last, end) and
 * read its acknowledgements. */
static int run_batch(Buf *b, uint32_t first, uint32_t last, uint32_t *ret_failed_seq) {
        if (b->oom)
                return -ENOMEM;
        int fd = nfnl_get();
        if (fd < 0)
                return fd;
        int r = send_buf(fd, b);
        if (r >= 0)
                r = read_acks(fd, first, last, ret_failed_seq);
        if (r < 0)
                nfnl_drop(); /* no reply of this batch left for the next */
        return r;
}

static void batch_begin(Buf *b, uint32_t seq) {
        msg_end(b, msg_begin(b, NFNL_MSG_BATCH_BEGIN, 0, AF_UNSPEC, seq, NFNL_SUBSYS_NFTABLES));
}

static void batch_end(Buf *b, uint32_t seq) {
        msg_end(b, msg_begin(b, NFNL_MSG_BATCH_END, 0, AF_UNSPEC, seq, NFNL_SUBSYS_NFTABLES));
}

static void table_msg(Buf *b, int type, uint32_t seq) {
        size_t m = msg_begin(b, nft_type(type), NLM_F_ACK | (type == NFT_MSG_NEWTABLE ? NLM_F_CREATE : 0),
                             NFPROTO_NETDEV, seq, 0);
        attr_str(b, NFTA_TABLE_NAME, NFT_DNS_TABLE);
        msg_end(b, m);
}

int nft_dns_apply(const NftDns *d, const char **ret_why) {
        Buf b = {};
        uint32_t seq = 1, first, failed = 0;
        /* Add (a no-op when present), delete, add again: whatever was
         * there goes, in the same transaction as the new rules come. */
        batch_begin(&b, seq++);
        first = seq;
        table_msg(&b, NFT_MSG_NEWTABLE, seq++);
        table_msg(&b, NFT_MSG_DELTABLE, seq++);
        table_msg(&b, NFT_MSG_NEWTABLE, seq++);
        uint32_t chains_from = seq;
        for (size_t i = 0; i < d->n_devices; i++) {
                char name[16];
                chain_name(i, name);
                size_t m =
                        msg_begin(&b, nft_type(NFT_MSG_NEWCHAIN), NLM_F_ACK | NLM_F_CREATE, NFPROTO_NETDEV, seq++, 0);
                attr_str(&b, NFTA_CHAIN_TABLE, NFT_DNS_TABLE);
                attr_str(&b, NFTA_CHAIN_NAME, name);
                size_t h = nest_begin(&b, NFTA_CHAIN_HOOK);
                attr_be32(&b, NFTA_HOOK_HOOKNUM, NF_NETDEV_EGRESS);
                attr_be32(&b, NFTA_HOOK_PRIORITY, 0);
                attr_str(&b, NFTA_HOOK_DEV, d->devices[i]);
                nest_end(&b, h);
                attr_be32(&b, NFTA_CHAIN_POLICY, NF_ACCEPT);
                attr_str(&b, NFTA_CHAIN_TYPE, "filter");
                msg_end(&b, m);
        }
        uint32_t rules_from = seq;
        for (size_t i = 0; i < d->n_devices; i++) {
                char name[16];
                chain_name(i, name);
                for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++)
                        for (int t = 0; d->family[f] && t < 2; t++) {
                                size_t m = msg_begin(&b, nft_type(NFT_MSG_NEWRULE),
                                                     NLM_F_ACK | NLM_F_CREATE | NLM_F_APPEND, NFPROTO_NETDEV, seq++, 0);
                                attr_str(&b, NFTA_RULE_TABLE, NFT_DNS_TABLE);
                                attr_str(&b, NFTA_RULE_CHAIN, name);
                                size_t x = nest_begin(&b, NFTA_RULE_EXPRESSIONS);
                                rule_exprs(&b, d, f, t == 0 ? IPPROTO_UDP : IPPROTO_TCP);
                                nest_end(&b, x);
                                msg_end(&b, m);
                        }
        }
        uint32_t last = seq - 1;
        batch_end(&b, seq++);
        int r = run_batch(&b, first, last, &failed);
        free(b.p);
        if (r < 0)
                *ret_why = failed >= rules_from    ? "cannot add the DNS filter's rules"
                           : failed >= chains_from ? "cannot add the DNS filter's egress chain (the kernel needs "
                                                     "nf_tables with the netdev egress hook, Linux 5.16 or newer)"
                           : failed                ? "cannot replace the DNS filter's nf_tables table"
                                                   : "cannot talk to nf_tables";
        return r;
}

/* ---- reading back -------------------------------------------------------- */

/* Equal attribute lists: the same attributes with the same payloads. The
 * expressions' list keeps its order (it is the rule); inside an element
 * order is free, as the kernel writes attributes in its own order. What
 * is nested is known from ours (the kernel may leave NLA_F_NESTED off). */
static bool attrs_equal(const char *want, size_t wlen, const char *have, size_t hlen, bool ordered) {
        size_t n_w = 0, n_h = 0;
        for (size_t o = 0; o + NLA_HDRLEN <= hlen; n_h++) {
                const struct nlattr *a = (const struct nlattr *) (have + o);
                if (a->nla_len < NLA_HDRLEN || o + a->nla_len > hlen)
                        return false;
                o += NLA_ALIGN(a->nla_len);
        }
        for (size_t o = 0; o + NLA_HDRLEN <= wlen; n_w++) {
                const struct nlattr *w = (const struct nlattr *) (want + o);
                size_t k = 0;
                bool found = false;
                for (size_t p = 0; !found && p + NLA_HDRLEN <= hlen; k++) {
                        const struct nlattr *h = (const struct nlattr *) (have + p);
                        p += NLA_ALIGN(h->nla_len);
                        if (ordered && k != n_w)
                                continue;
                        if ((h->nla_type & TYPE_MASK) != (w->nla_type & TYPE_MASK))
                                continue;
                        const char *wp = (const char *) w + NLA_HDRLEN, *hp = (const char *) h + NLA_HDRLEN;
                        size_t wl = w->nla_len - NLA_HDRLEN, hl = h->nla_len - NLA_HDRLEN;
                        found = (w->nla_type & NESTED) ? attrs_equal(wp, wl, hp, hl, false)
                                                       : wl == hl && memcmp(wp, hp, wl) == 0;
                }
                if (!found)
                        return false;
                o += NLA_ALIGN(w->nla_len);
        }
        return n_w == n_h;
}

static const struct nlattr *find_attr(const char *p, size_t len, uint16_t type) {
        for (size_t o = 0; o + NLA_HDRLEN <= len;) {
                const struct nlattr *a = (const struct nlattr *) (p + o);
                if (a->nla_len < NLA_HDRLEN || o + a->nla_len > len)
                        return NULL;
                if ((a->nla_type & TYPE_MASK) == type)
                        return a;
                o += NLA_ALIGN(a->nla_len);
        }
        return NULL;
}

static bool attr_is_str(const struct nlattr *a, const char *s) {
        size_t l = a ? a->nla_len - NLA_HDRLEN : 0;
        return a && l == strlen(s) + 1 && memcmp((const char *) a + NLA_HDRLEN, s, l) == 0;
}

static bool attr_is_be32(const struct nlattr *a, uint32_t v) {
        uint32_t be;
        if (!a || a->nla_len - NLA_HDRLEN != sizeof(be))
                return false;
        memcpy(&be, (const char *) a + NLA_HDRLEN, sizeof(be));
        return ntohl(be) == v;
}

#define PAYLOAD(a) ((const char *) (a) + NLA_HDRLEN)
#define PLEN(a)    ((size_t) ((a)->nla_len - NLA_HDRLEN))

/* One dump: every message's attributes to fn. */
static int dump(int type, void (*fn)(const char *attrs, size_t len, void *userdata), void *userdata) {
        Buf b = {};
        size_t m = msg_begin(&b, nft_type(type), NLM_F_DUMP, NFPROTO_NETDEV, 1, 0);
        msg_end(&b, m);
        if (b.oom)
                return -ENOMEM;
        int fd = nfnl_get();
        if (fd < 0) {
                free(b.p);
                return fd;
        }
        int r = send_buf(fd, &b);
        free(b.p);
        _cleanup_free_ char *buf = malloc(RECV_SIZE);
        if (!buf)
                r = -ENOMEM;
        for (bool done = false; r >= 0 && !done;) {
                ssize_t k = recv(fd, buf, RECV_SIZE, 0);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        r = errno == EAGAIN ? -ETIMEDOUT : negative_errno();
                        break;
                }
                for (struct nlmsghdr *h = (struct nlmsghdr *) buf; NLMSG_OK(h, (size_t) k); h = NLMSG_NEXT(h, k)) {
                        if (h->nlmsg_type == NLMSG_DONE) {
                                done = true;
                                break;
                        }
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *e = NLMSG_DATA(h);
                                r = e->error < 0 ? e->error : -EPROTO;
                                done = true;
                                break;
                        }
                        size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
                        if (h->nlmsg_len < off)
                                continue;
                        fn((const char *) h + off, h->nlmsg_len - off, userdata);
                }
        }
        if (r < 0)
                nfnl_drop();
        return r;
}

typedef struct Seen {
        const NftDns *d;
        size_t n_tables, n_chains, n_rules[NFT_DNS_DEVICES_MAX];
        bool bad;
        const char *why;
        Buf want[NFT_DNS_DEVICES_MAX][RULES_MAX];
        size_t n_want;
} Seen;

static void seen_fail(Seen *s, const char *why) {
        if (!s->bad) {
                s->bad = true;
                s->why = why;
        }
}

static void on_table(const char *p, size_t len, void *userdata) {
        if (attr_is_str(find_attr(p, len, NFTA_TABLE_NAME), NFT_DNS_TABLE))
                ((Seen *) userdata)->n_tables++;
}

static int chain_index(const NftDns *d, const struct nlattr *name) {
        for (size_t i = 0; i < d->n_devices; i++) {
                char n[16];
                chain_name(i, n);
                if (attr_is_str(name, n))
                        return (int) i;
        }
        return -1;
}

static void on_chain(const char *p, size_t len, void *userdata) {
        Seen *s = userdata;
        if (!attr_is_str(find_attr(p, len, NFTA_CHAIN_TABLE), NFT_DNS_TABLE))
                return;
        s->n_chains++;
        int i = chain_index(s->d, find_attr(p, len, NFTA_CHAIN_NAME));
        const struct nlattr *hook = find_attr(p, len, NFTA_CHAIN_HOOK);
        if (i < 0 || !hook) {
                seen_fail(s, "the DNS filter has a chain it should not have");
                return;
        }
        const struct nlattr *dev = find_attr(PAYLOAD(hook), PLEN(hook), NFTA_HOOK_DEV);
        if (!dev) {
                /* Newer kernels list the devices in a nest. */
                const struct nlattr *devs = find_attr(PAYLOAD(hook), PLEN(hook), NFTA_HOOK_DEVS);
                dev = devs ? find_attr(PAYLOAD(devs), PLEN(devs), NFTA_DEVICE_NAME) : NULL;
        }
        if (!attr_is_be32(find_attr(PAYLOAD(hook), PLEN(hook), NFTA_HOOK_HOOKNUM), NF_NETDEV_EGRESS) ||
            !attr_is_str(dev, s->d->devices[i]) || !attr_is_be32(find_attr(p, len, NFTA_CHAIN_POLICY), NF_ACCEPT))
                seen_fail(s, "the DNS filter's chain is not on the uplink's egress");
}

static void on_rule(const char *p, size_t len, void *userdata) {
        Seen *s = userdata;
        if (!attr_is_str(find_attr(p, len, NFTA_RULE_TABLE), NFT_DNS_TABLE))
                return;
        int i = chain_index(s->d, find_attr(p, len, NFTA_RULE_CHAIN));
        const struct nlattr *x = find_attr(p, len, NFTA_RULE_EXPRESSIONS);
        if (i < 0 || !x) {
                seen_fail(s, "the DNS filter has a rule it should not have");
                return;
        }
        size_t k = s->n_rules[i]++;
        if (k >= s->n_want) {
                seen_fail(s, "the DNS filter has more rules than the policy");
                return;
        }
        const Buf *w = &s->want[i][k];
        /* w holds one NFTA_RULE_EXPRESSIONS nest. */
        const struct nlattr *wx = (const struct nlattr *) w->p;
        if (!attrs_equal(PAYLOAD(wx), PLEN(wx), PAYLOAD(x), PLEN(x), true))
                seen_fail(s, "a rule of the DNS filter differs from the policy");
}

int nft_dns_check(const NftDns *d, size_t *ret_rules, const char **ret_why) {
        Seen s = { .d = d };
        int r = 0;
        for (size_t i = 0; i < d->n_devices; i++) {
                size_t k = 0;
                for (NetFamily f = 0; f < _NET_FAMILY_MAX; f++)
                        for (int t = 0; d->family[f] && t < 2; t++, k++) {
                                size_t x = nest_begin(&s.want[i][k], NFTA_RULE_EXPRESSIONS);
                                rule_exprs(&s.want[i][k], d, f, t == 0 ? IPPROTO_UDP : IPPROTO_TCP);
                                nest_end(&s.want[i][k], x);
                                if (s.want[i][k].oom)
                                        r = -ENOMEM;
                        }
                s.n_want = k;
        }
        if (r >= 0) {
                r = dump(NFT_MSG_GETTABLE, on_table, &s);
                if (r >= 0 && s.n_tables != 1) {
                        r = -EPROTO;
                        *ret_why = "the DNS filter's nf_tables table is missing";
                }
        }
        if (r >= 0)
                r = dump(NFT_MSG_GETCHAIN, on_chain, &s);
        if (r >= 0)
                r = dump(NFT_MSG_GETRULE, on_rule, &s);
        size_t total = 0;
        for (size_t i = 0; i < d->n_devices; i++)
                total += s.n_rules[i];
        if (r >= 0 && !s.bad) {
                if (s.n_chains != d->n_devices)
                        seen_fail(&s, "a chain of the DNS filter is missing");
                for (size_t i = 0; i < d->n_devices; i++)
                        if (s.n_rules[i] != s.n_want)
                                seen_fail(&s, "a rule of the DNS filter is missing");
        }
        if (r >= 0 && s.bad) {
                r = -EPROTO;
                *ret_why = s.why;
        } else if (r < 0 && r != -EPROTO)
                *ret_why = "cannot read the DNS filter back";
        for (size_t i = 0; i < NFT_DNS_DEVICES_MAX; i++)
                for (size_t k = 0; k < RULES_MAX; k++)
                        free(s.want[i][k].p);
        *ret_rules = total;
        return r;
}
