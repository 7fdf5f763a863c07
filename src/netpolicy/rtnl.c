/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <arpa/inet.h>
#include <linux/fib_rules.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "rtnl.h"

#define BUF_SIZE   (64u * 1024u)
#define BATCH_MAX  256u
#define ROUTES_MAX (1u << 20)

typedef struct Msg {
        size_t len;
        union {
                struct nlmsghdr h;
                char buf[512];
        };
} Msg;

static void *msg_tail(Msg *m) {
        return m->buf + NLMSG_ALIGN(m->h.nlmsg_len);
}

static void msg_put(Msg *m, unsigned short type, const void *data, size_t len) {
        struct rtattr *a = msg_tail(m);
        a->rta_type = type;
        a->rta_len = (unsigned short) RTA_LENGTH(len);
        memcpy(RTA_DATA(a), data, len);
        m->h.nlmsg_len = NLMSG_ALIGN(m->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

int rtnl_open(Rtnl *ret) {
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (fd < 0)
                return negative_errno();
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = negative_errno();
                close(fd);
                return r;
        }
        int one = 1;
        /* Errors without the whole request echoed back; strict checking of
         * dump requests (ignored by older kernels). */
        (void) setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
        (void) setsockopt(fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof(one));
        *ret = (Rtnl){ .fd = fd, .seq = 1 };
        return 0;
}

void rtnl_close(Rtnl *r) {
        r->fd = safe_close(r->fd);
}

static int family_len(int family) {
        return family == AF_INET6 ? 16 : 4;
}

static void route_msg(Msg *m, uint16_t type, uint16_t flags, uint32_t seq, const RtnlRoute *rt) {
        memset(m, 0, sizeof(*m));
        m->h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
        m->h.nlmsg_type = type;
        m->h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        m->h.nlmsg_seq = seq;
        struct rtmsg *rm = NLMSG_DATA(&m->h);
        rm->rtm_family = (unsigned char) rt->dst.family;
        rm->rtm_dst_len = (unsigned char) rt->dst.prefixlen;
        uint32_t table = rt->table ?: RT_TABLE_MAIN;
        rm->rtm_table = table < 256 ? (unsigned char) table : RT_TABLE_UNSPEC;
        rm->rtm_type = rt->type;
        rm->rtm_flags = rt->flags;
        if (type == RTM_NEWROUTE) {
                rm->rtm_protocol = rt->protocol ?: RTPROT_STATIC;
                rm->rtm_scope = rt->scope;
        } else {
                rm->rtm_protocol = 0;
                rm->rtm_scope = RT_SCOPE_NOWHERE; /* any scope */
        }
        if (rt->dst.prefixlen > 0)
                msg_put(m, RTA_DST, rt->dst.addr, (size_t) family_len(rt->dst.family));
        if (rt->has_gateway)
                msg_put(m, RTA_GATEWAY, rt->gateway.addr, (size_t) family_len(rt->gateway.family));
        if (rt->oif > 0) {
                uint32_t oif = (uint32_t) rt->oif;
                msg_put(m, RTA_OIF, &oif, sizeof(oif));
        }
        if (!rt->no_table)
                msg_put(m, RTA_TABLE, &table, sizeof(table));
}

/* Read replies until every seq in [first, first + n) is acknowledged. */
static int read_acks(Rtnl *r, uint32_t first, size_t n, size_t *ret_failed) {
        _cleanup_free_ char *buf = malloc(BUF_SIZE);
        size_t acked = 0;
        int result = 0;
        if (!buf)
                return -ENOMEM;
        while (acked < n) {
                ssize_t k = recv(r->fd, buf, BUF_SIZE, 0);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                for (struct nlmsghdr *h = (struct nlmsghdr *) buf; NLMSG_OK(h, (size_t) k); h = NLMSG_NEXT(h, k)) {
                        if (h->nlmsg_seq < first || h->nlmsg_seq >= first + n)
                                continue;
                        if (h->nlmsg_type != NLMSG_ERROR)
                                continue;
                        const struct nlmsgerr *e = NLMSG_DATA(h);
                        acked++;
                        if (e->error < 0 && result == 0) {
                                result = e->error;
                                if (ret_failed)
                                        *ret_failed = h->nlmsg_seq - first;
                        }
                }
        }
        return result;
}

static int send_all(Rtnl *r, const void *buf, size_t len) {
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
        for (;;) {
                ssize_t k = sendto(r->fd, buf, len, 0, (struct sockaddr *) &sa, sizeof(sa));
                if (k >= 0)
                        return (size_t) k == len ? 0 : -EIO;
                if (errno != EINTR)
                        return negative_errno();
        }
}

int rtnl_route_batch(Rtnl *r, const RtnlRoute *routes, const bool *add, size_t n, size_t *ret_failed_index) {
        _cleanup_free_ char *buf = malloc(BATCH_MAX * sizeof(Msg));
        int result = 0;
        if (!buf)
                return -ENOMEM;
        for (size_t start = 0; start < n; start += BATCH_MAX) {
                size_t cnt = n - start < BATCH_MAX ? n - start : BATCH_MAX, len = 0;
                uint32_t first = r->seq;
                for (size_t i = 0; i < cnt; i++) {
                        Msg m;
                        bool a = add[start + i];
                        route_msg(&m, a ? RTM_NEWROUTE : RTM_DELROUTE, a ? NLM_F_CREATE | NLM_F_EXCL : 0, r->seq++,
                                  &routes[start + i]);
                        memcpy(buf + len, m.buf, NLMSG_ALIGN(m.h.nlmsg_len));
                        len += NLMSG_ALIGN(m.h.nlmsg_len);
                }
                int k = send_all(r, buf, len);
                if (k < 0)
                        return k;
                size_t failed = 0;
                k = read_acks(r, first, cnt, &failed);
                if (k < 0 && result == 0) {
                        result = k;
                        if (ret_failed_index)
                                *ret_failed_index = start + failed;
                }
        }
        return result;
}

int rtnl_route_add(Rtnl *r, const RtnlRoute *rt) {
        bool add = true;
        return rtnl_route_batch(r, rt, &add, 1, NULL);
}

int rtnl_route_del(Rtnl *r, const RtnlRoute *rt) {
        bool add = false;
        return rtnl_route_batch(r, rt, &add, 1, NULL);
}

static void parse_route(const struct nlmsghdr *h, RtnlRoute *rt, uint32_t *ret_table) {
        const struct rtmsg *rm = NLMSG_DATA(h);
        *rt = (RtnlRoute){ .type = rm->rtm_type, .protocol = rm->rtm_protocol, .scope = rm->rtm_scope };
        rt->dst.family = rm->rtm_family;
        rt->dst.prefixlen = rm->rtm_dst_len;
        rt->flags = rm->rtm_flags;
        *ret_table = rm->rtm_table;
        int alen = family_len(rm->rtm_family);
        int len = (int) RTM_PAYLOAD(h);
        for (const struct rtattr *a = RTM_RTA(rm); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                switch (a->rta_type) {
                case RTA_DST:
                        if (RTA_PAYLOAD(a) == (size_t) alen)
                                memcpy(rt->dst.addr, RTA_DATA(a), (size_t) alen);
                        break;
                case RTA_GATEWAY:
                        if (RTA_PAYLOAD(a) == (size_t) alen) {
                                rt->has_gateway = true;
                                rt->gateway.family = rm->rtm_family;
                                memcpy(rt->gateway.addr, RTA_DATA(a), (size_t) alen);
                        }
                        break;
                case RTA_OIF:
                        if (RTA_PAYLOAD(a) == sizeof(uint32_t))
                                rt->oif = (int) *(const uint32_t *) RTA_DATA(a);
                        break;
                case RTA_TABLE:
                        if (RTA_PAYLOAD(a) == sizeof(uint32_t))
                                *ret_table = *(const uint32_t *) RTA_DATA(a);
                        break;
                default:
                        break;
                }
        }
}

/* Read the replies to request seq: on_msg sees each message of another
 * type than DONE and ERROR; it returns 0 to go on, 1 to stop (answered), or
 * -errno. An ERROR message ends with its error (or -EIO for an ack where
 * data was wanted), DONE with 0. */
static int recv_replies(Rtnl *r, uint32_t seq, int (*on_msg)(const struct nlmsghdr *h, void *userdata),
                        void *userdata) {
        _cleanup_free_ char *buf = malloc(BUF_SIZE);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t len = recv(r->fd, buf, BUF_SIZE, 0);
                if (len < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                for (struct nlmsghdr *h = (struct nlmsghdr *) buf; NLMSG_OK(h, (size_t) len); h = NLMSG_NEXT(h, len)) {
                        if (h->nlmsg_seq != seq)
                                continue;
                        if (h->nlmsg_type == NLMSG_DONE)
                                return 0;
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *e = NLMSG_DATA(h);
                                return e->error < 0 ? e->error : -EIO;
                        }
                        int k = on_msg(h, userdata);
                        if (k != 0)
                                return k < 0 ? k : 0;
                }
        }
}

/* Make room for one more element of size elem in *v (capacity *cap). */
static int grow(void **v, size_t *cap, size_t n, size_t elem, size_t max) {
        if (n < *cap)
                return 0;
        if (*cap >= max)
                return -E2BIG;
        size_t c = *cap ? *cap * 2 : 32;
        void *nv = realloc(*v, c * elem);
        if (!nv)
                return -ENOMEM;
        *v = nv;
        *cap = c;
        return 0;
}

/* A dump request of type for family; its header's first byte is the family
 * (struct rtmsg and struct fib_rule_hdr alike). */
static int send_dump(Rtnl *r, uint16_t type, int family, size_t hdr, uint32_t *ret_seq) {
        Msg m = {};
        m.h.nlmsg_len = (uint32_t) NLMSG_LENGTH(hdr);
        m.h.nlmsg_type = type;
        m.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        m.h.nlmsg_seq = *ret_seq = r->seq++;
        *(unsigned char *) NLMSG_DATA(&m.h) = (unsigned char) family;
        return send_all(r, m.buf, m.h.nlmsg_len);
}

typedef struct RouteDump {
        uint32_t table;
        int family;
        RtnlRoute *v;
        size_t n, cap;
} RouteDump;

static int on_route(const struct nlmsghdr *h, void *userdata) {
        RouteDump *d = userdata;
        if (h->nlmsg_type != RTM_NEWROUTE)
                return 0;
        RtnlRoute rt;
        uint32_t table;
        parse_route(h, &rt, &table);
        if (table != d->table || rt.dst.family != d->family)
                return 0;
        rt.table = table == RT_TABLE_MAIN ? 0 : table;
        int k = grow((void **) &d->v, &d->cap, d->n, sizeof(*d->v), ROUTES_MAX);
        if (k < 0)
                return k;
        d->v[d->n++] = rt;
        return 0;
}

int rtnl_dump_routes(Rtnl *r, int family, RtnlRoute **ret, size_t *ret_n) {
        return rtnl_dump_table(r, family, RT_TABLE_MAIN, ret, ret_n);
}

int rtnl_dump_table(Rtnl *r, int family, uint32_t want_table, RtnlRoute **ret, size_t *ret_n) {
        uint32_t seq;
        int k = send_dump(r, RTM_GETROUTE, family, sizeof(struct rtmsg), &seq);
        if (k < 0)
                return k;
        RouteDump d = { .table = want_table ?: RT_TABLE_MAIN, .family = family };
        k = recv_replies(r, seq, on_route, &d);
        if (k < 0) {
                free(d.v);
                return k;
        }
        *ret = d.v;
        *ret_n = d.n;
        return 0;
}

int rtnl_addr_add(Rtnl *r, int ifindex, const Cidr *addr, bool noprefixroute) {
        Msg m = {};
        m.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
        m.h.nlmsg_type = RTM_NEWADDR;
        m.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
        m.h.nlmsg_seq = r->seq++;
        struct ifaddrmsg *ifa = NLMSG_DATA(&m.h);
        ifa->ifa_family = (unsigned char) addr->family;
        ifa->ifa_prefixlen = (unsigned char) addr->prefixlen;
        ifa->ifa_index = (unsigned) ifindex;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        msg_put(&m, IFA_LOCAL, addr->addr, (size_t) family_len(addr->family));
        msg_put(&m, IFA_ADDRESS, addr->addr, (size_t) family_len(addr->family));
        uint32_t flags = IFA_F_NODAD | (noprefixroute ? IFA_F_NOPREFIXROUTE : 0);
        msg_put(&m, IFA_FLAGS, &flags, sizeof(flags));
        int k = send_all(r, m.buf, m.h.nlmsg_len);
        if (k < 0)
                return k;
        return read_acks(r, m.h.nlmsg_seq, 1, NULL);
}

typedef struct GetReply {
        RtnlRoute *ret;
        bool found;
} GetReply;

static int on_get(const struct nlmsghdr *h, void *userdata) {
        GetReply *g = userdata;
        if (h->nlmsg_type != RTM_NEWROUTE)
                return 0;
        uint32_t table;
        parse_route(h, g->ret, &table);
        g->found = true;
        return 1;
}

int rtnl_route_get(Rtnl *r, const NetAddr *dst, RtnlRoute *ret) {
        return rtnl_route_get_port(r, dst, 0, 0, ret);
}

int rtnl_route_get_port(Rtnl *r, const NetAddr *dst, uint8_t ip_proto, uint16_t dport, RtnlRoute *ret) {
        Msg m = {};
        m.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
        m.h.nlmsg_type = RTM_GETROUTE;
        m.h.nlmsg_flags = NLM_F_REQUEST;
        m.h.nlmsg_seq = r->seq++;
        struct rtmsg *rm = NLMSG_DATA(&m.h);
        rm->rtm_family = (unsigned char) dst->family;
        rm->rtm_dst_len = (unsigned char) (family_len(dst->family) * 8);
        msg_put(&m, RTA_DST, dst->addr, (size_t) family_len(dst->family));
        if (ip_proto) {
                uint16_t be = htons(dport);
                msg_put(&m, RTA_IP_PROTO, &ip_proto, sizeof(ip_proto));
                msg_put(&m, RTA_DPORT, &be, sizeof(be));
        }
        int k = send_all(r, m.buf, m.h.nlmsg_len);
        if (k < 0)
                return k;
        GetReply g = { .ret = ret };
        k = recv_replies(r, m.h.nlmsg_seq, on_get, &g);
        if (k < 0)
                return k;
        return g.found ? 0 : -ENOENT;
}

/* ---- rules ---- */

static void rule_msg(Msg *m, uint16_t type, uint16_t flags, uint32_t seq, const RtnlRule *rule) {
        memset(m, 0, sizeof(*m));
        m->h.nlmsg_len = NLMSG_LENGTH(sizeof(struct fib_rule_hdr));
        m->h.nlmsg_type = type;
        m->h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        m->h.nlmsg_seq = seq;
        struct fib_rule_hdr *h = NLMSG_DATA(&m->h);
        h->family = (unsigned char) rule->family;
        h->action = rule->action;
        h->table = rule->action == FR_ACT_TO_TBL && rule->table < 256 ? (unsigned char) rule->table : 0;
        uint32_t prio = rule->priority;
        msg_put(m, FRA_PRIORITY, &prio, sizeof(prio));
        if (rule->action == FR_ACT_TO_TBL) {
                uint32_t table = rule->table;
                msg_put(m, FRA_TABLE, &table, sizeof(table));
        }
        if (rule->ip_proto)
                msg_put(m, FRA_IP_PROTO, &rule->ip_proto, sizeof(rule->ip_proto));
        if (rule->dport) {
                struct fib_rule_port_range pr = { rule->dport, rule->dport };
                msg_put(m, FRA_DPORT_RANGE, &pr, sizeof(pr));
        }
}

static int rule_op(Rtnl *r, uint16_t type, uint16_t flags, const RtnlRule *rule) {
        Msg m;
        rule_msg(&m, type, flags, r->seq++, rule);
        int k = send_all(r, m.buf, m.h.nlmsg_len);
        if (k < 0)
                return k;
        return read_acks(r, m.h.nlmsg_seq, 1, NULL);
}

int rtnl_rule_add(Rtnl *r, const RtnlRule *rule) {
        return rule_op(r, RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL, rule);
}

int rtnl_rule_del(Rtnl *r, const RtnlRule *rule) {
        return rule_op(r, RTM_DELRULE, 0, rule);
}

typedef struct RuleDump {
        int family;
        RtnlRule *v;
        size_t n, cap;
} RuleDump;

static int on_rule(const struct nlmsghdr *h, void *userdata) {
        RuleDump *d = userdata;
        if (h->nlmsg_type != RTM_NEWRULE)
                return 0;
        const struct fib_rule_hdr *rh = NLMSG_DATA(h);
        RtnlRule rule = { .family = rh->family, .action = rh->action, .table = rh->table };
        int alen = (int) (h->nlmsg_len - NLMSG_LENGTH(sizeof(*rh)));
        for (const struct rtattr *a = (const struct rtattr *) ((const char *) rh + NLMSG_ALIGN(sizeof(*rh)));
             RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
                if (a->rta_type == FRA_PRIORITY && RTA_PAYLOAD(a) == 4)
                        rule.priority = *(const uint32_t *) RTA_DATA(a);
                else if (a->rta_type == FRA_TABLE && RTA_PAYLOAD(a) == 4)
                        rule.table = *(const uint32_t *) RTA_DATA(a);
                else if (a->rta_type == FRA_IP_PROTO && RTA_PAYLOAD(a) == 1)
                        rule.ip_proto = *(const uint8_t *) RTA_DATA(a);
                else if (a->rta_type == FRA_DPORT_RANGE && RTA_PAYLOAD(a) == sizeof(struct fib_rule_port_range)) {
                        const struct fib_rule_port_range *pr = RTA_DATA(a);
                        rule.dport = pr->start == pr->end ? pr->start : 0;
                }
        }
        if (rule.family != d->family)
                return 0;
        int k = grow((void **) &d->v, &d->cap, d->n, sizeof(*d->v), ROUTES_MAX);
        if (k < 0)
                return k;
        d->v[d->n++] = rule;
        return 0;
}

int rtnl_dump_rules(Rtnl *r, int family, RtnlRule **ret, size_t *ret_n) {
        uint32_t seq;
        int k = send_dump(r, RTM_GETRULE, family, sizeof(struct fib_rule_hdr), &seq);
        if (k < 0)
                return k;
        RuleDump d = { .family = family };
        k = recv_replies(r, seq, on_rule, &d);
        if (k < 0) {
                free(d.v);
                return k;
        }
        *ret = d.v;
        *ret_n = d.n;
        return 0;
}
