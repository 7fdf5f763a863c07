/* SPDX-License-Identifier: MIT */
/* Unit tests of src/netpolicy/nft: the DNS filter's table written and read
 * back in a network namespace of the test's own (on its loopback device),
 * and the read-back check failing when the table holds anything else.
 * nft(8) reads the same table back in tests/integration/test_netd.py. */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "nft.h"

static NetAddr A(const char *s) {
        NetAddr a;
        assert_int_equal(netaddr_parse(s, &a), 0);
        return a;
}

static int in_own_netns(void **state) {
        (void) state;
        /* As root a new network namespace is enough; otherwise one of a
         * new user namespace, where we hold CAP_NET_ADMIN. */
        if (unshare(CLONE_NEWNET) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0)
                return 0;
        fprintf(stderr, "LOUD SKIP: test-nft needs a network namespace of its own: %s\n", strerror(errno));
        return -1;
}

static NftDns spec(const NetAddr *resolvers, size_t n) {
        NftDns d = { .n_devices = 1, .family = { true, true }, .resolvers = resolvers, .n_resolvers = n };
        strcpy(d.devices[0], "lo");
        return d;
}

static void test_apply_then_check(void **state) {
        (void) state;
        NetAddr res[] = { A("10.0.2.3"), A("fd00::3") };
        NftDns d = spec(res, 2);
        const char *why = NULL;
        size_t rules = 0;
        assert_int_equal(nft_dns_apply(&d, &why), 0);
        assert_int_equal(nft_dns_check(&d, &rules, &why), 0);
        assert_int_equal(rules, 4);
        /* Applying again replaces, never adds. */
        assert_int_equal(nft_dns_apply(&d, &why), 0);
        assert_int_equal(nft_dns_check(&d, &rules, &why), 0);
        assert_int_equal(rules, 4);
}

static void test_check_sees_other_rules(void **state) {
        (void) state;
        NetAddr res[] = { A("10.0.2.3"), A("fd00::3") }, other[] = { A("10.0.2.4"), A("fd00::3") };
        NftDns d = spec(res, 2), o = spec(other, 2);
        const char *why = NULL;
        size_t rules = 0;
        assert_int_equal(nft_dns_apply(&o, &why), 0);
        assert_int_equal(nft_dns_check(&d, &rules, &why), -EPROTO);
        assert_string_equal(why, "a rule of the DNS filter differs from the policy");
        /* One resolver fewer: a comparison fewer in two rules. */
        o = spec(res, 1);
        assert_int_equal(nft_dns_apply(&o, &why), 0);
        assert_int_equal(nft_dns_check(&d, &rules, &why), -EPROTO);
        assert_string_equal(why, "a rule of the DNS filter differs from the policy");
        /* IPv4 alone: the IPv6 rules are missing. */
        o = spec(res, 2);
        o.family[NET_IPV6] = false;
        assert_int_equal(nft_dns_apply(&o, &why), 0);
        assert_int_equal(nft_dns_check(&d, &rules, &why), -EPROTO);
        assert_string_equal(why, "a rule of the DNS filter is missing");
        assert_int_equal(rules, 2);
        /* A second device the table does not have. */
        assert_int_equal(nft_dns_apply(&d, &why), 0);
        NftDns two = d;
        two.n_devices = 2;
        strcpy(two.devices[1], "lo2");
        assert_int_equal(nft_dns_check(&two, &rules, &why), -EPROTO);
        assert_string_equal(why, "a chain of the DNS filter is missing");
}

static void test_check_sees_another_device(void **state) {
        (void) state;
        NftDns d = spec(NULL, 0), other = spec(NULL, 0);
        const char *why = NULL;
        size_t rules = 0;
        strcpy(other.devices[0], "lo2");
        assert_int_equal(nft_dns_apply(&d, &why), 0);
        /* No resolver: port 53 is dropped whatever the destination. */
        assert_int_equal(nft_dns_check(&d, &rules, &why), 0);
        assert_int_equal(rules, 4);
        assert_int_equal(nft_dns_check(&other, &rules, &why), -EPROTO);
        assert_string_equal(why, "the DNS filter's chain is not on the uplink's egress");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_apply_then_check),
                cmocka_unit_test(test_check_sees_other_rules),
                cmocka_unit_test(test_check_sees_another_device),
        };
        return cmocka_run_group_tests(tests, in_own_netns, NULL);
}
