/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fd-util.h"
#include "host-addr.h"
#include "macro.h"

static int addr_cmp(const void *x, const void *y) {
        const NetAddr *a = x, *b = y;
        if (a->family != b->family)
                return a->family == AF_INET ? -1 : 1;
        return memcmp(a->addr, b->addr, sizeof(a->addr));
}

static bool is_loopback(const NetAddr *a) {
        static const uint8_t v6_loopback[16] = { [15] = 1 };
        if (a->family == AF_INET)
                return a->addr[0] == 127;
        return memcmp(a->addr, v6_loopback, 16) == 0;
}

int host_addresses_read(NetAddr **ret, size_t *ret_n) {
        struct ifaddrs *ifa = NULL;
        if (getifaddrs(&ifa) < 0)
                return negative_errno();
        size_t n = 0, k = 0;
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
                n++;
        NetAddr *v = calloc(n ?: 1, sizeof(NetAddr));
        if (!v) {
                freeifaddrs(ifa);
                return -ENOMEM;
        }
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
                if (!i->ifa_addr)
                        continue;
                NetAddr a = { .family = i->ifa_addr->sa_family };
                if (a.family == AF_INET)
                        memcpy(a.addr, &((const struct sockaddr_in *) i->ifa_addr)->sin_addr, 4);
                else if (a.family == AF_INET6)
                        memcpy(a.addr, &((const struct sockaddr_in6 *) i->ifa_addr)->sin6_addr, 16);
                else
                        continue;
                if (!is_loopback(&a))
                        v[k++] = a;
        }
        freeifaddrs(ifa);
        qsort(v, k, sizeof(NetAddr), addr_cmp);
        size_t m = 0;
        for (size_t i = 0; i < k; i++)
                if (m == 0 || addr_cmp(&v[i], &v[m - 1]) != 0)
                        v[m++] = v[i];
        *ret = v;
        *ret_n = m;
        return 0;
}

void host_addrs_done(HostAddrs *h) {
        free(h->addrs);
        free(h->effects);
        *h = (HostAddrs){};
}

int host_addresses_deny(NetPolicy *p, HostAddrs *ret, int *ret_changed) {
        _cleanup_(host_addrs_done) HostAddrs h = {};
        int r = host_addresses_read(&h.addrs, &h.n);
        if (r < 0)
                return r;
        h.effects = calloc(h.n ?: 1, sizeof(HostAddrEffect));
        if (!h.effects)
                return -ENOMEM;
        r = netpolicy_deny_addresses(p, h.addrs, h.n, h.effects);
        if (r < 0)
                return r;
        if (ret_changed)
                *ret_changed = r;
        if (ret) {
                *ret = h;
                h = (HostAddrs){};
        }
        return 0;
}
