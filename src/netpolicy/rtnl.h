/* SPDX-License-Identifier: MIT */
#pragma once

/* A small rtnetlink client: routes in the main table, addresses, and route
 * lookups. libc only, because lazaret-netd is static and Debian ships
 * libmnl as a shared library alone; the messages are few and fixed
 * (RTM_NEWROUTE, RTM_DELROUTE, RTM_GETROUTE, RTM_NEWADDR), each checked by
 * its kernel acknowledgement. Tested against iproute2 reading back what it
 * wrote (tests/integration/test_network.py). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cidr.h"
#include "netpolicy.h"

typedef struct RtnlRoute {
        Cidr dst; /* dst.prefixlen 0: a default route */
        unsigned char type; /* RTN_UNICAST, RTN_PROHIBIT, ... */
        unsigned char protocol;
        unsigned char scope;
        bool has_gateway;
        NetAddr gateway;
        int oif; /* 0 when none */
        unsigned flags; /* RTNH_F_ONLINK ... */
        uint32_t table; /* 0: the main table */
        bool no_table; /* send no RTA_TABLE (gVisor's netlink refuses it) */
} RtnlRoute;

/* A policy-routing rule that matches one protocol and destination port. */
typedef struct RtnlRule {
        int family;
        uint32_t priority;
        uint8_t ip_proto; /* IPPROTO_UDP, IPPROTO_TCP; 0: any */
        uint16_t dport; /* 0: any */
        uint8_t action; /* FR_ACT_TO_TBL, FR_ACT_PROHIBIT */
        uint32_t table; /* FR_ACT_TO_TBL */
} RtnlRule;

typedef struct Rtnl {
        int fd;
        uint32_t seq;
} Rtnl;

int rtnl_open(Rtnl *ret);
void rtnl_close(Rtnl *r);

/* All routes of one family (AF_INET or AF_INET6) in the main table. */
int rtnl_dump_routes(Rtnl *r, int family, RtnlRoute **ret, size_t *ret_n);
/* The same for another table (0: main). */
int rtnl_dump_table(Rtnl *r, int family, uint32_t table, RtnlRoute **ret, size_t *ret_n);

/* Rules: all of one family; add and delete one. */
int rtnl_dump_rules(Rtnl *r, int family, RtnlRule **ret, size_t *ret_n);
int rtnl_rule_add(Rtnl *r, const RtnlRule *rule);
int rtnl_rule_del(Rtnl *r, const RtnlRule *rule);

/* Add (NLM_F_CREATE|NLM_F_EXCL) or delete one route. */
int rtnl_route_add(Rtnl *r, const RtnlRoute *rt);
int rtnl_route_del(Rtnl *r, const RtnlRoute *rt);

/* Many route operations pipelined: every message is sent, then every
 * acknowledgement read; the first error wins (others are still read).
 * ops[i] true = add, false = delete. */
int rtnl_route_batch(Rtnl *r, const RtnlRoute *routes, const bool *add, size_t n, size_t *ret_failed_index);

/* Add an address to an interface; noprefixroute keeps the kernel from adding
 * the subnet's route (the policy decides every route). */
int rtnl_addr_add(Rtnl *r, int ifindex, const Cidr *addr, bool noprefixroute);

/* The kernel's route lookup for one destination (ip route get): 0 with
 * *ret filled, or the kernel's error (-ENETUNREACH, -EACCES for prohibit,
 * -EHOSTUNREACH ...). */
int rtnl_route_get(Rtnl *r, const NetAddr *dst, RtnlRoute *ret);
/* The same for a flow with a protocol and destination port (the rules that
 * match ports apply). */
int rtnl_route_get_port(Rtnl *r, const NetAddr *dst, uint8_t ip_proto, uint16_t dport, RtnlRoute *ret);
